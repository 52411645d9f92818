"""The plumbing every CASAN training script shares: the model class a run trains, processes that really form one
run, transformers' logging, and resuming from the last checkpoint (or refusing a folder that holds other files)."""

import json
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import torch
import transformers
from transformers import DistributedConfig, HfArgumentParser
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..compat import PreTrainedConfig
from ..families import FAMILIES, get_family, get_head
from ..hub import check_output_dir
from ..modeling_casan import casan_class


logger = logging.getLogger(__name__)


def run_model_class(model_name_or_path, head_name, baseline, casan_kwargs, cache_dir=None, sharded=False):
    """The class a run trains from `model_name_or_path`, and the CASAN options to load it with. `baseline`: the
    source family's own model (the head's auto class), which needs a source checkpoint (BERT, RoBERTa, ...) and
    takes no CASAN option, and is not `sharded` (FSDP2 as it loads: transformers' own encoders have no plan for
    their modules); otherwise the CASAN class of the checkpoint's family, converted from a source checkpoint or
    continued from a CASAN one."""
    saved = PreTrainedConfig.get_config_dict(model_name_or_path, cache_dir=cache_dir)[0]
    model_type = saved.get("model_type")
    if not baseline:
        return casan_class(model_type, head_name), casan_kwargs
    trains = "trains" if head_name == "masked-lm" else "fine-tunes"
    if sharded:
        raise ValueError(
            f"--baseline {trains} transformers' own model, whose FSDP2 plan names a decoder's modules and none of "
            "its own, so --fsdp_size would leave it one unsharded-in-compute group; drop one of them."
        )
    if casan_kwargs:
        raise ValueError(
            f"--baseline {trains} the plain source model; drop the context options {sorted(casan_kwargs)}."
        )
    if get_family(model_type).name != model_type:
        raise ValueError(
            f"--baseline needs the source checkpoint (model_type one of "
            f"{', '.join(repr(family.name) for family in FAMILIES)}); {model_name_or_path!r} has model_type "
            f"{model_type!r}."
        )
    return getattr(transformers, get_head(head_name).auto_class), {}


def launched_processes():
    """How many processes the launcher started (torchrun and `accelerate launch --multi_gpu` say so in
    WORLD_SIZE), after making sure that on a machine without GPUs they form one gloo group.

    `TrainingArguments` joins CPU processes only when told the run is on the CPU: without that, each of N
    processes trains alone as rank 0 and all write the same folder. `accelerate launch --cpu` with several
    processes starts just one unless it has MPI; that is refused, not run as one.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not torch.accelerator.is_available():
        os.environ["ACCELERATE_USE_CPU"] = "true"
    elif (
        world_size == 1 and "MASTER_PORT" in os.environ and os.environ.get("ACCELERATE_USE_CPU", "").lower() == "true"
    ):
        raise ValueError(
            "`accelerate launch --cpu --num_processes N` started one process: accelerate runs several CPU "
            "processes only through MPI (--mpirun_hostfile). Launch with `torchrun --nproc_per_node N` or "
            "`accelerate launch --multi_gpu --num_processes N`, which run N processes joined with gloo on a CPU."
        )
    return world_size


def check_joined(training_args, world_size):
    """A ValueError when Trainer did not join the processes the launcher started."""
    if training_args.world_size != world_size:
        raise ValueError(
            f"the launcher started {world_size} processes but Trainer joined {training_args.world_size}; "
            "pass --ddp_backend for this machine."
        )


# The engines that shard through accelerate, by TrainingArguments' flag and the variable `accelerate launch` sets
# from a config file. Without an accelerator, accelerate runs plain DDP instead of either.
ACCELERATE_ENGINES = {"fsdp": "ACCELERATE_USE_FSDP", "deepspeed": "ACCELERATE_USE_DEEPSPEED"}


def requested_engines(argv):
    """The accelerate engines a command line (or its one .json file) or the launcher asks for; read before
    `TrainingArguments` acts on them (it imports DeepSpeed)."""
    if len(argv) == 1 and argv[0].endswith(".json"):
        options = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        flagged = {name for name in ACCELERATE_ENGINES if options.get(name)}
    else:
        flagged = {name for name in ACCELERATE_ENGINES for arg in argv if arg.split("=")[0] == f"--{name}"}
    launched = {name for name, var in ACCELERATE_ENGINES.items() if os.environ.get(var, "").lower() == "true"}
    return flagged | launched


def check_engines(engines):
    """A ValueError for a sharding engine that would silently run as DDP: accelerate's FSDP and DeepSpeed without
    an accelerator."""
    if torch.accelerator.is_available():
        return
    if "fsdp" in engines:
        raise ValueError(
            "--fsdp (accelerate's FSDP) needs GPUs; on this machine accelerate would train every process with the "
            "whole model (DDP) instead. Shard on CPUs with --fsdp_size N (transformers' FSDP2, over gloo)."
        )
    if "deepspeed" in engines:
        raise ValueError(
            "DeepSpeed needs GPUs; on this machine accelerate would train every process with the whole model (DDP) "
            "instead. Shard on CPUs with --fsdp_size N (transformers' FSDP2, over gloo)."
        )


@dataclass
class ScalingArguments:
    """How a run shards the model over its processes, and keeps its batch shapes few for compiled steps; the
    flags every CASAN training script takes."""

    fsdp_size: int | None = field(
        default=None,
        metadata={
            "help": "Shard the model over N processes (FSDP2) as it loads: from_pretrained(..., distributed_config="
            "DistributedConfig(fsdp_size=N)), each layer a group of its own. N is the launcher's process count "
            "(torchrun --nproc_per_node N); on CPUs as on GPUs. Checkpoints then hold the model only "
            "(--save_only_model)."
        },
    )
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "Pad each batch to a multiple of N tokens: a few batch shapes, so that a compiled step "
            "(--torch_compile) and its CUDA graphs (--torch_compile_mode reduce-overhead) are reused, not "
            "recompiled and re-recorded for every length."
        },
    )

    def __post_init__(self):
        for name in ("fsdp_size", "pad_to_multiple_of"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be a positive number; got {getattr(self, name)}.")

    def loading_kwargs(self):
        """What `from_pretrained` takes to shard the model as it loads."""
        return {} if self.fsdp_size is None else {"distributed_config": DistributedConfig(fsdp_size=self.fsdp_size)}


def padding_multiple(scaling, training_args):
    """What batches are padded to a multiple of: `--pad_to_multiple_of`, else 8 for the tensor cores of a 16-bit
    run, else nothing."""
    if scaling.pad_to_multiple_of is not None:
        return scaling.pad_to_multiple_of
    return 8 if training_args.fp16 or training_args.bf16 else None


def check_sharding(scaling, training_args, world_size):
    """A ValueError for a `--fsdp_size` that is not one FSDP2 run over the launcher's processes."""
    if scaling.fsdp_size is None:
        return
    if scaling.fsdp_size != world_size or world_size == 1:
        raise ValueError(
            f"--fsdp_size {scaling.fsdp_size} shards over the launcher's processes, which are {world_size}: launch "
            f"with `torchrun --nproc_per_node {max(scaling.fsdp_size, 2)}` and --fsdp_size equal to it."
        )
    if training_args.fsdp or training_args.deepspeed:
        raise ValueError("--fsdp_size shards the model itself; drop --fsdp and --deepspeed.")
    if training_args.save_strategy != "no" and not training_args.save_only_model:
        raise ValueError(
            "--fsdp_size: transformers does not resume a model sharded as it loads, so its checkpoints hold the "
            "model only; pass --save_only_model (or --save_strategy no)."
        )


def pin_memory_only_with_an_accelerator(training_args):
    """Turns `dataloader_pin_memory` (on by default) off where no accelerator is found: torch would not pin
    there anyway, and warns "'pin_memory' argument is set as true but no accelerator is found" at each data
    loader, a message no user of a CPU can act on. transformers does the same for `--use_cpu`."""
    if training_args.dataloader_pin_memory and not torch.accelerator.is_available():
        training_args.dataloader_pin_memory = False
    return training_args


def parse_run_args(dataclass_types, script):
    """A training script's arguments, from the command line or one .json file (as transformers' scripts take
    them), `ScalingArguments` and `TrainingArguments` last, once it is sure that the launcher's processes form
    one run with the engine asked for. A bad value is a usage error; a launch that would not be that run stops
    with `<script>: error: ...`. Memory is pinned only where there is an accelerator to pin it for."""
    try:
        world_size = launched_processes()
        check_engines(requested_engines(sys.argv[1:]))
    except ValueError as error:
        sys.exit(f"{script}: error: {error}")
    parser = HfArgumentParser(dataclass_types)
    try:
        if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
            args = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
        else:
            args = parser.parse_args_into_dataclasses()
    except ValueError as error:
        parser.error(str(error))
    try:
        check_joined(args[-1], world_size)
        check_sharding(args[-2], args[-1], world_size)
    except ValueError as error:
        sys.exit(f"{script}: error: {error}")
    pin_memory_only_with_an_accelerator(args[-1])
    return args


RUN_START_NAME = "run_start.json"


def code_commit():
    """The git commit of the code this process runs, with "+changes" where tracked files differ from it, or None
    outside a git checkout (an installed package)."""
    package = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}+changes" if changes else commit


def record_run_start(training_args, settings):
    """Writes `run_start.json` into the output folder as a run starts (first process only): the command line as
    the run received it, the `settings` it resolved it to (e.g. the model's options), the commit of the code and
    the versions it runs on. A study's record keeps it, so it says what ran rather than what was meant to."""
    if not training_args.should_save:
        return
    started = {
        "argv": sys.argv,
        "settings": settings,
        "commit": code_commit(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    os.makedirs(training_args.output_dir, exist_ok=True)
    with open(os.path.join(training_args.output_dir, RUN_START_NAME), "w", encoding="utf-8") as handle:
        json.dump(started, handle, indent=2, default=str)


def setup_logging(training_args, logger):
    """transformers' example-script logging, and one line per process: its rank, the world size, the device."""
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    if training_args.should_log:
        transformers.utils.logging.set_verbosity_info()
    log_level = training_args.get_process_log_level()
    for name in (logger.name, "casan_hf"):  # the script's messages and the library's
        logging.getLogger(name).setLevel(log_level)
    datasets.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()
    logger.warning(
        f"Process rank: {training_args.process_index} of world size {training_args.world_size}, "
        f"device: {training_args.device}, n_gpu: {training_args.n_gpu}, "
        f"distributed: {training_args.world_size > 1} ({training_args.parallel_mode.value}), "
        f"16-bits training: {training_args.fp16 or training_args.bf16}"
    )


def check_tokenizer(tokenizer, model, tokenizer_name):
    """A ValueError when `tokenizer` (loaded from `tokenizer_name`) cannot be the model's: it makes ids beyond the
    model's embeddings, or pads with another id (a tokenizer of another family: BERT pads with 0, RoBERTa with
    1). Either would train on wrong tokens without a word, or fail in the first step with an index error."""
    vocab_size = model.config.vocab_size
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"The tokenizer of {tokenizer_name!r} has {len(tokenizer)} tokens but the model's embeddings hold "
            f"{vocab_size} (config.json vocab_size): it is not this checkpoint's tokenizer."
        )
    model_pad = model.config.pad_token_id
    if tokenizer.pad_token_id is not None and model_pad is not None and tokenizer.pad_token_id != model_pad:
        raise ValueError(
            f"The tokenizer of {tokenizer_name!r} pads with id {tokenizer.pad_token_id} ({tokenizer.pad_token!r}) "
            f"but the model with id {model_pad} (config.json pad_token_id): it is a tokenizer of another family."
        )


def take(dataset, limit):
    """The first `limit` examples of `dataset` (all of them for None)."""
    return dataset if limit is None else dataset.select(range(min(limit, len(dataset))))


def sequence_length(requested, tokenizer, logger):
    """`--max_seq_length`, no longer than the model takes."""
    if requested > tokenizer.model_max_length:
        logger.warning(
            f"--max_seq_length {requested} is longer than the model's maximum ({tokenizer.model_max_length}); "
            f"using {tokenizer.model_max_length}."
        )
    return min(requested, tokenizer.model_max_length)


def checkpoint_problem(folder):
    """Why a checkpoint folder cannot be resumed from, or None. Trainer writes trainer_state.json last, so a
    folder left half-written by a kill lacks it or holds it cut short; resuming from such a folder would restart
    at step 0 from its weights without a word."""
    path = os.path.join(folder, TRAINER_STATE_NAME)
    if not os.path.isfile(path):
        return f"it has no {TRAINER_STATE_NAME} (written last: the run stopped while saving it)"
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
    except ValueError:
        return f"its {TRAINER_STATE_NAME} is cut short"
    return None


def last_complete_checkpoint(output_dir):
    """The `checkpoint-<step>` folder of `output_dir` with the highest step that is complete, and the incomplete
    ones above it (newest first); Trainer writes over those when it reaches their step again."""
    steps = {}
    for name in os.listdir(output_dir):
        match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
        if match and os.path.isdir(os.path.join(output_dir, name)):
            steps[int(match.group(1))] = os.path.join(output_dir, name)
    incomplete = []
    for step in sorted(steps, reverse=True):
        problem = checkpoint_problem(steps[step])
        if problem is None:
            return steps[step], incomplete
        incomplete.append((steps[step], problem))
    return None, incomplete


def find_checkpoint(training_args, overwrite_output_dir):
    """transformers' run_glue rule: resume from the last checkpoint in --output_dir, refuse other leftovers. A
    checkpoint that a kill left half-written is never resumed from: the last complete one is, with a warning."""
    if training_args.resume_from_checkpoint is not None:
        checkpoint = training_args.resume_from_checkpoint
        if not os.path.isdir(checkpoint):
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is not a folder.")
        problem = checkpoint_problem(checkpoint)
        if problem is not None:
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is incomplete: {problem}.")
        return checkpoint
    output_dir = training_args.output_dir
    last_checkpoint, incomplete = None, []
    if os.path.isdir(output_dir) and training_args.do_train and not overwrite_output_dir:
        last_checkpoint, incomplete = last_complete_checkpoint(output_dir)
    if last_checkpoint is None and incomplete:
        names = ", ".join(f"{folder} ({problem})" for folder, problem in incomplete)
        raise ValueError(
            f"Output folder {output_dir!r} holds only incomplete checkpoints: {names}. Pass "
            "--overwrite_output_dir to train from scratch."
        )
    if last_checkpoint is None:
        check_output_dir(output_dir, overwrite_output_dir, flag="--overwrite_output_dir")
        return None
    for folder, problem in incomplete:
        logger.warning(f"{folder} is incomplete ({problem}): resuming from {last_checkpoint} instead.")
    logger.info(
        f"Checkpoint detected, resuming training at {last_checkpoint}. Pass --overwrite_output_dir to train from "
        "scratch."
    )
    return last_checkpoint
