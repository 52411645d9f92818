"""How a training script starts: the processes the launcher started, really joined as one run with the engine
asked for (DDP, FSDP2, DeepSpeed), its arguments parsed, and transformers' logging."""

import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import torch
import transformers
from transformers import DistributedConfig, HfArgumentParser, TrainingArguments

from ..training import PREEMPTED_EXIT_CODE, CasanTrainingArguments, Preempted
from .arguments import CasanArguments


logger = logging.getLogger(__name__)


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


def check_signal_handling(training_args):
    """A ValueError for transformers' `--enable_jit_checkpoint`: the scripts save on SIGTERM and SIGUSR1 already
    (`training.preemption`), at the end of a step every process agrees on; transformers' would save in the middle
    of a step, each process on its own, and both would take the signal."""
    if getattr(training_args, "enable_jit_checkpoint", False):
        raise ValueError(
            "--enable_jit_checkpoint: this script saves a checkpoint on SIGTERM and SIGUSR1 itself, at the end of "
            f"the step every process is in, and exits with code {PREEMPTED_EXIT_CODE} (docs/SCALING.md); drop the "
            "flag."
        )


def pin_memory_only_with_an_accelerator(training_args):
    """Turns `dataloader_pin_memory` (on by default) off where no accelerator is found: torch would not pin
    there anyway, and warns "'pin_memory' argument is set as true but no accelerator is found" at each data
    loader, a message no user of a CPU can act on. transformers does the same for `--use_cpu`."""
    if training_args.dataloader_pin_memory and not torch.accelerator.is_available():
        training_args.dataloader_pin_memory = False
    return training_args


def allow_no_context_targets(parser):
    """`--context_targets` with no value is `[]` (neither query nor key takes the context, which then drives only
    the output gate): HfArgumentParser gives every list flag `nargs="+"`."""
    for action in parser._actions:
        if action.dest == "context_targets":
            action.nargs = "*"


def run_parser(model_arguments, data_arguments, training_arguments=TrainingArguments):
    """The `HfArgumentParser` of a training script: its own model and data dataclasses with the ones every script
    shares, parsed in the order `parse_run_args` returns them."""
    parser = HfArgumentParser(
        (
            model_arguments,
            CasanArguments,
            CasanTrainingArguments,
            data_arguments,
            ScalingArguments,
            training_arguments,
        )
    )
    allow_no_context_targets(parser)
    return parser


def parse_run_args(script, model_arguments, data_arguments, training_arguments=TrainingArguments):
    """A training script's arguments, from the command line or one .json file (as transformers' scripts take
    them): its own model and data dataclasses with the ones every script shares, in the order they are returned,
    `(model, CasanArguments, CasanTrainingArguments, data, ScalingArguments, training)`, once it is sure that the
    launcher's processes form one run with the engine asked for. A bad value is a usage error; a launch that would
    not be that run stops with `<script>: error: ...`. Memory is pinned only where there is an accelerator to pin
    it for."""
    try:
        world_size = launched_processes()
        check_engines(requested_engines(sys.argv[1:]))
    except ValueError as error:
        sys.exit(f"{script}: error: {error}")
    parser = run_parser(model_arguments, data_arguments, training_arguments)
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
        check_signal_handling(args[-1])
    except ValueError as error:
        sys.exit(f"{script}: error: {error}")
    pin_memory_only_with_an_accelerator(args[-1])
    return args


def setup_logging(training_args, logger):
    """A console a person reads, each line once: the script's and casan_hf's messages at INFO on the first process
    (warnings on the others), transformers' and datasets' at their own level, WARNING (`--log_level info` shows their
    INFO lines, the argument dump among them); in a run of several processes, one line per process: its rank, the
    world size, the device."""
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    for name in (logger.name, "casan_hf"):  # the script's messages and the library's
        logging.getLogger(name).setLevel(logging.INFO if training_args.should_log else logging.WARNING)
    log_level = training_args.get_process_log_level()
    datasets.utils.logging.set_verbosity(log_level)
    datasets.utils.logging.disable_propagation()  # its own handler prints it; the root's would print it again
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.disable_propagation()  # as datasets; transformers propagates where CI=true is set
    transformers.utils.logging.enable_explicit_format()
    if training_args.world_size > 1:
        logger.warning(
            f"Process rank: {training_args.process_index} of world size {training_args.world_size}, "
            f"device: {training_args.device}, n_gpu: {training_args.n_gpu}, "
            f"distributed: {training_args.world_size > 1} ({training_args.parallel_mode.value}), "
            f"16-bits training: {training_args.fp16 or training_args.bf16}"
        )


def prepare_or_exit(script, logger, prepare, *args):
    """`prepare(*args)`: a script's checks of its input and its loading, all before any training. A ValueError there
    is bad input: it stops the script with one line, `<script>: error: ...`, printed once."""
    try:
        return prepare(*args)
    except ValueError as error:
        sys.exit(f"{script}: error: {error}")


@contextlib.contextmanager
def exit_when_preempted(trainer):
    """Around a script's run (training, evaluation, its end): the cluster's signals are noted by the trainer's
    `preemption`, and the `Preempted` a signal raises ends the script with `PREEMPTED_EXIT_CODE`, its message
    (where the run was saved, how to continue) logged by the first process."""
    try:
        with trainer.preemption.noting_signals():
            yield
    except Preempted as stop:
        if trainer.is_world_process_zero():
            logger.warning(str(stop))
        sys.exit(PREEMPTED_EXIT_CODE)
