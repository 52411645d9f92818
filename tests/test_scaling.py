"""Training at scale, as far as this machine's CPUs go: transformers' FSDP2 loading (`from_pretrained(...,
distributed_config=DistributedConfig(fsdp_size=2))`) of every CASAN family and head, against DDP from the same
start in two gloo processes, and its saved folder loaded in a fresh process with `trust_remote_code=True`; the
training scripts' `--fsdp_size` and their refusal of engines that would run as DDP without GPUs; accelerate's
config files in scripts/accelerate/."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin
from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env
from conftest import REPO_ROOT, load_script
from fresh_process import run_without_casan_hf
from glue_helpers import TINY_RUN, make_tiny_bert, read_json, run_glue
from test_translation_model import TINY_MARIAN
from tiny_models import TINY, assert_outputs_close, padded_batch, tiny_config
from transformers import BertConfig, BertModel, TrainingArguments
from transformers.distributed.parallel_utils import replace_layer_number_by_wildcard

from casan_hf import FAMILIES, HEADS, CasanMarianConfig, CasanMarianMTModel, casan_class
from casan_hf.cli.launch import (
    ScalingArguments,
    check_engines,
    check_sharding,
    check_signal_handling,
    padding_multiple,
    requested_engines,
)
from casan_hf.cli.run_inputs import run_model_class


TESTS = Path(__file__).resolve().parent

EVERY_MODEL = [
    *((family.name, head.name) for family in FAMILIES for head in HEADS),
    ("marian", "translation"),
]


def build(family, head, context_type, pooling="cls"):
    """A tiny model with random weights, without dropout; `pooling` for the heads that pool a sentence vector."""
    if family == "marian":
        dropouts = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
        return CasanMarianMTModel(CasanMarianConfig(**TINY_MARIAN, **dropouts, context_type=context_type))
    config = tiny_config(family, num_labels=2, context_type=context_type, classifier_pooling=pooling)
    return casan_class(family, head)(config)


# The layers of the CASAN models: each family's encoder's (its layer class, as its output capture records their
# hidden states), the translation model's encoder's and Marian's decoder's.
LAYER_CLASSES = (
    *dict.fromkeys(casan_class(family, "base")._can_record_outputs["hidden_states"].__name__ for family in FAMILIES),
    "CasanMarianEncoderLayer",
    "MarianDecoderLayer",
)


@pytest.mark.parametrize(("family", "head"), EVERY_MODEL)
def test_the_fsdp_plan_shards_every_layer_and_names_only_modules_that_exist(family, head):
    model = build(family, head, "deep_global")
    names = {replace_layer_number_by_wildcard(name) for name, _ in model.named_modules()}
    assert model.fsdp_plan and set(model.fsdp_plan) <= names, sorted(set(model.fsdp_plan) - names)
    expanded = model._expand_parallel_plan(model.fsdp_plan)
    layers = [name for name, module in model.named_modules() if type(module).__name__ in LAYER_CLASSES]
    assert layers and all(expanded.get(name) == "free_full_weight" for name in layers)
    # `_no_split_modules` names the layers (device_map and the accelerate wrap policies read it), and only classes
    # the model has.
    classes = {type(module).__name__ for module in model.modules()}
    assert classes >= set(model._no_split_modules) and set(model._no_split_modules) >= classes & set(LAYER_CLASSES)
    if model.all_tied_weights_keys:  # tied to the output layer, the word embeddings stay in the root's group
        return
    embeddings = model.get_input_embeddings()
    assert expanded[next(name for name, module in model.named_modules() if module is embeddings)] == "free_full_weight"


# Every context type, over several families and heads (masked LM and translation: tied output embeddings).
SHARDED_CASES = {
    "global-bert-sequence-classification": ("bert", "sequence-classification", "global", "structured"),
    "deep-roberta-masked-lm": ("roberta", "masked-lm", "deep", "cls"),
    "deep_global-electra-multiple-choice": ("electra", "multiple-choice", "deep_global", "cls"),
    "none-xlm-roberta-token-classification": ("xlm-roberta", "token-classification", "none", "cls"),
    "global-bert-question-answering": ("bert", "question-answering", "global", "cls"),
    "deep_global-modernbert-masked-lm": ("modernbert", "masked-lm", "deep_global", "cls"),
    "deep_global-marian-translation": ("marian", "translation", "deep_global", "cls"),
}


# A BERT checkpoint without a masked-LM head, converted as it loads: the head (its bias tied to the decoder's) and
# the context start at random, initialised shard by shard under FSDP2, so the two runs start apart.
CONVERTED = "converted-bert-masked-lm"


@pytest.fixture(scope="module")
def sharded_runs(tmp_path_factory):
    """One torchrun launch of tests/sharded_training.py over every case: {case: (folder, runs.json)}."""
    root = tmp_path_factory.mktemp("sharded")
    cases = []
    for name, (family, head, context_type, pooling) in SHARDED_CASES.items():
        torch.manual_seed(0)
        model = build(family, head, context_type, pooling)
        model.save_pretrained(root / name)
        cases.append({"folder": str(root / name), "model_class": type(model).__name__, "steps": 3})
    BertModel(BertConfig(**TINY)).save_pretrained(root / CONVERTED)
    cases.append({"folder": str(root / CONVERTED), "model_class": "CasanForMaskedLM", "steps": 3})
    (root / "cases.json").write_text(json.dumps(cases))
    # The tests' helpers, before whatever the caller's path holds (a checkout run without installing it).
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29571"]
    result = subprocess.run(
        [*launcher, str(TESTS / "sharded_training.py"), str(root / "cases.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert "match nothing" not in result.stdout + result.stderr
    return {
        name: (root / name, json.loads((root / name / "runs.json").read_text()))
        for name in [*SHARDED_CASES, CONVERTED]
    }


@pytest.mark.parametrize("case", SHARDED_CASES)
def test_fsdp2_trains_as_ddp_from_the_same_start(sharded_runs, case):
    _, runs = sharded_runs[case]
    assert len(runs["fsdp"]["loss"]) == len(runs["fsdp"]["grad_norm"]) == 3
    for measure in ("loss", "grad_norm"):
        assert runs["fsdp"][measure] == pytest.approx(runs["ddp"][measure], rel=1e-5, abs=1e-6), measure
    assert runs["ddp"]["loss"][-1] != runs["ddp"]["loss"][0]  # the weights moved
    assert runs["fsdp"].get("generated") == runs["ddp"].get("generated")  # the translation model's beam search


LOAD_SHARDED_SAVES = """
import json, sys
import torch
import transformers

for folder, auto_class in json.loads(sys.argv[1]):
    model = getattr(transformers, auto_class).from_pretrained(folder + "/fsdp", trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model)
    runs = json.load(open(folder + "/runs.json"))
    batch = {name: torch.tensor(value) for name, value in runs["ddp_inputs"].items()}
    with torch.no_grad():
        outputs = model(**batch)
    for name, expected in runs["ddp_outputs"].items():
        torch.testing.assert_close(outputs[name], torch.tensor(expected), rtol=1e-4, atol=1e-5)
print("loaded", len(json.loads(sys.argv[1])))
"""


def test_a_converted_checkpoint_without_the_head_trains_sharded(sharded_runs):
    """The head's bias, tied to the decoder's and missing from the checkpoint, is materialized and trains."""
    _, runs = sharded_runs[CONVERTED]
    for measure in ("loss", "grad_norm"):
        assert len(runs["fsdp"][measure]) == 3 and all(0 < value < float("inf") for value in runs["fsdp"][measure])


def test_the_fsdp2_saved_folder_loads_in_a_fresh_process_as_the_ddp_model(sharded_runs, tmp_path):
    heads = {head.name: head.auto_class for head in HEADS} | {"translation": "AutoModelForSeq2SeqLM"}
    folders = [(str(sharded_runs[case][0]), heads[head]) for case, (_, head, _, _) in SHARDED_CASES.items()]
    code = LOAD_SHARDED_SAVES.replace("sys.argv[1]", repr(json.dumps(folders)))
    assert run_without_casan_hf(code, tmp_path).strip() == f"loaded {len(folders)}"


# --- the scripts: the sharded path, and no engine that would silently run as DDP ---------------------------------

SCRIPTS = ("run_glue", "run_mlm", "run_translation")
cpu_only = pytest.mark.skipif(torch.accelerator.is_available(), reason="the refusals are for machines without GPUs")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


@pytest.fixture(scope="module")
def script_modules():
    return {name: load_script(name) for name in SCRIPTS}


@cpu_only
@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize(
    ("argv", "environment", "message"),
    [
        (["--fsdp", "full_shard"], {}, "--fsdp (accelerate's FSDP) needs GPUs"),
        (["--fsdp"], {}, "--fsdp (accelerate's FSDP) needs GPUs"),
        (["--deepspeed", "ds_config.json"], {}, "DeepSpeed needs GPUs"),
        ([], {"ACCELERATE_USE_FSDP": "true"}, "--fsdp (accelerate's FSDP) needs GPUs"),
        ([], {"ACCELERATE_USE_DEEPSPEED": "true"}, "DeepSpeed needs GPUs"),
    ],
)
def test_an_engine_that_would_run_as_ddp_is_refused_first(
    script_modules, script, argv, environment, message, monkeypatch
):
    """Before anything is parsed or loaded: TrainingArguments imports DeepSpeed, and accelerate would train DDP."""
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=f"^{script}.py: error: {re.escape(message)}.*--fsdp_size N"):
        script_modules[script].main()


def test_engines_are_read_from_the_flags_a_json_file_and_the_launcher(tmp_path, monkeypatch):
    arguments = tmp_path / "args.json"
    arguments.write_text(json.dumps({"deepspeed": "ds_config.json", "fsdp": "", "output_dir": "out"}))
    assert requested_engines([str(arguments)]) == {"deepspeed"}
    assert requested_engines(["--fsdp=full_shard", "--fsdp_config", "fsdp.json"]) == {"fsdp"}
    assert requested_engines(["--fsdp_size", "2"]) == set()
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "True")
    assert requested_engines([]) == {"deepspeed"}


def test_fsdp_size_is_one_fsdp2_run_over_the_launched_processes():
    def args(**overrides):
        return TrainingArguments(output_dir="unused", report_to="none", **overrides)

    check_sharding(ScalingArguments(), args(), 1)  # not asked for: nothing to check
    check_sharding(ScalingArguments(fsdp_size=2), args(save_only_model=True), 2)
    check_sharding(ScalingArguments(fsdp_size=2), args(save_strategy="no"), 2)
    refusals = [
        (ScalingArguments(fsdp_size=2), args(save_only_model=True), 1, "which are 1: launch with `torchrun"),
        (ScalingArguments(fsdp_size=4), args(save_only_model=True), 2, "--fsdp_size 4 shards over the launcher's"),
        (ScalingArguments(fsdp_size=2), args(), 2, "pass --save_only_model (or --save_strategy no)"),
    ]
    for scaling, training, world_size, message in refusals:
        with pytest.raises(ValueError, match=re.escape(message)):
            check_sharding(scaling, training, world_size)
    with pytest.raises(ValueError, match="--fsdp_size must be a positive number; got 0"):
        ScalingArguments(fsdp_size=0)
    assert ScalingArguments(fsdp_size=2).loading_kwargs()["distributed_config"].fsdp_size == 2


def test_transformers_jit_checkpoint_is_refused_for_the_scripts_own_save_on_a_signal():
    """Both would take SIGTERM; transformers' saves inside a step, each process on its own."""
    check_signal_handling(TrainingArguments(output_dir="unused", report_to="none"))
    with pytest.raises(ValueError, match="--enable_jit_checkpoint: this script saves a checkpoint on SIGTERM"):
        check_signal_handling(TrainingArguments(output_dir="unused", report_to="none", enable_jit_checkpoint=True))


def test_static_shapes_on_request(script_modules, tiny_bert, glue_dir, tmp_path, monkeypatch):
    """--pad_to_multiple_of rounds each batch's padding up (8 by default for 16-bit runs); run_glue refuses it
    where every input is padded to max_seq_length already."""
    training = TrainingArguments(output_dir="unused", report_to="none")
    assert padding_multiple(ScalingArguments(pad_to_multiple_of=32), training) == 32
    assert padding_multiple(ScalingArguments(), training) is None
    command = ["run_glue.py", "--model_name_or_path", tiny_bert, "--task_name", "rte", "--glue_dir", glue_dir,
               "--do_train", "--pad_to_multiple_of", "32", "--output_dir", tmp_path / "out"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", list(map(str, command)))
    with pytest.raises(SystemExit, match="--pad_to_multiple_of pads each batch .* pass --pad_to_max_length False"):
        script_modules["run_glue"].main()
    assert not (tmp_path / "out").exists()


def test_baseline_is_not_sharded(tmp_path):
    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="--baseline fine-tunes transformers' own model, whose FSDP2 plan"):
        run_model_class(str(tmp_path), "sequence-classification", True, {}, sharded=True)


@cpu_only
def test_torchrun_with_accelerates_fsdp_on_cpus_stops_and_fsdp_size_trains_sharded(tiny_bert, tmp_path, glue_dir):
    """The command that used to train DDP and exit 0 now stops with one line; `--fsdp_size 2` trains FSDP2."""
    command = ["--model_name_or_path", tiny_bert, "--context_type", "deep", "--task_name", "rte",
               "--glue_dir", glue_dir, "--do_train", "--do_eval", "--num_train_epochs", "2", *TINY_RUN]  # fmt: skip
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29572"]
    refused = run_glue(
        [*command, "--fsdp", "full_shard", "--output_dir", tmp_path / "fsdp"], tmp_path, launcher=launcher
    )
    assert refused.returncode != 0 and not (tmp_path / "fsdp").exists()
    assert "run_glue.py: error: --fsdp (accelerate's FSDP) needs GPUs" in refused.stderr
    output_dir = tmp_path / "fsdp_size"
    sharded = run_glue(  # transformers says how it sharded at the info level
        [*command, "--fsdp_size", "2", "--save_only_model", "--log_level", "info", "--output_dir", output_dir],
        tmp_path,
        launcher=launcher,
    )
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    log = sharded.stdout + sharded.stderr
    # The word embeddings, the two layers, the pooling and the classifier.
    assert "FSDP2 applied to model via _fsdp_plan: 5 entries" in log and "match nothing" not in log
    state = read_json(output_dir / "trainer_state.json")
    assert state["global_step"] == 2 and any("gates/layer_1/query" in entry for entry in state["log_history"])
    assert read_json(output_dir / "eval_results.json")["eval_samples"] == 16
    assert "| world_size | `2` |" in (output_dir / "README.md").read_text()


# --- accelerate's config files (scripts/accelerate/): what a machine without GPUs can check -----------------------

ACCELERATE_CONFIGS = sorted((REPO_ROOT / "scripts" / "accelerate").glob("*.yaml"))


def launcher_environment(config_file):
    """The variables `accelerate launch --config_file <config_file>` sets for the processes it starts."""
    args = launch_command_parser().parse_args(["--config_file", str(config_file), "scripts/run_glue.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:  # as launch_command does before it starts DeepSpeed's launcher
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        return defaults, prepare_deepspeed_cmd_env(args)[1]
    return defaults, prepare_multi_gpu_env(args)


def test_the_accelerate_configs_are_ddp_fsdp2_and_zero_2_and_3():
    types = {path.stem: load_config_from_file(str(path)).distributed_type for path in ACCELERATE_CONFIGS}
    assert types == {"ddp": "MULTI_GPU", "fsdp2": "FSDP", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED"}


@pytest.mark.parametrize("config_file", ACCELERATE_CONFIGS, ids=lambda path: path.stem)
def test_accelerate_takes_the_config_and_its_wrap_policy_finds_the_layers(config_file, monkeypatch):
    defaults, environment = launcher_environment(config_file)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    if defaults.distributed_type == "FSDP":
        assert environment["FSDP_VERSION"] == "2" and environment["FSDP_AUTO_WRAP_POLICY"] == "TRANSFORMER_BASED_WRAP"
        for family, head in [(family.name, "masked-lm") for family in FAMILIES] + [("marian", "translation")]:
            plugin = FullyShardedDataParallelPlugin()
            model = build(family, head, "deep_global")
            plugin.set_auto_wrap_policy(model)  # raises for a class `_no_split_modules` names that the model lacks
            wrapped = {
                layer_class.__name__ for layer_class in plugin.auto_wrap_policy.keywords["transformer_layer_cls"]
            }
            assert wrapped >= {type(module).__name__ for module in model.modules()} & set(LAYER_CLASSES)
    if defaults.distributed_type == "DEEPSPEED":
        plugin = DeepSpeedPlugin()
        assert plugin.zero_stage == int(config_file.stem.removeprefix("zero"))
        saves_whole = plugin.deepspeed_config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"]
        assert saves_whole == (plugin.zero_stage == 3)  # a ZeRO-3 run saves a folder from_pretrained loads
    if defaults.distributed_type in ("FSDP", "DEEPSPEED") and not torch.accelerator.is_available():
        with pytest.raises(ValueError, match="needs GPUs"):
            check_engines(requested_engines([]))
    else:
        check_engines(requested_engines([]))


# --- device_map: a memory budget that offloads some layers places whole layers, with the unsplit outputs -----------


@pytest.mark.parametrize(
    ("family", "head", "context_type"),
    [
        ("bert", "sequence-classification", "deep_global"),
        ("roberta", "masked-lm", "deep"),
        ("electra", "token-classification", "global"),
    ],
)
def test_device_map_auto_offloads_whole_layers_and_keeps_the_outputs(family, head, context_type, tmp_path):
    torch.manual_seed(0)
    model = build(family, head, context_type).eval()
    model.save_pretrained(tmp_path / "model")
    size = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
    placed = type(model).from_pretrained(
        tmp_path / "model", device_map="auto", max_memory={"cpu": int(size * 0.75)}, offload_folder=tmp_path / "off"
    )
    devices = placed.hf_device_map
    layers = [name for name, module in model.named_modules() if type(module).__name__ in LAYER_CLASSES]
    assert {"cpu", "disk"} <= set(devices.values())  # the budget splits the model between memory and disk
    assert any(devices.get(name) == "disk" for name in layers) and any(devices.get(name) == "cpu" for name in layers)
    split = [key for key in devices for layer in layers if key.startswith(f"{layer}.")]
    assert not split, f"layers split across devices: {split}"
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask)
        actual = placed(input_ids, attention_mask=attention_mask)
    # The placed weights are read in place from the folder and the offload files: other memory, other kernels.
    assert_outputs_close({"logits": actual.logits}, {"logits": expected.logits})
