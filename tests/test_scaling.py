"""Training at scale on this machine's CPUs: transformers' FSDP2 loading (`from_pretrained(...,
distributed_config=DistributedConfig(fsdp_size=2))`) of every CASAN family and head, against DDP from the same
start in two gloo processes, and its saved folder loaded in a fresh process with `trust_remote_code=True`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fresh_process import run_without_casan_hf
from test_translation_model import TINY_MARIAN
from tiny_models import tiny_config
from transformers.distributed.parallel_utils import replace_layer_number_by_wildcard

from casan_hf import FAMILIES, HEADS, CasanMarianConfig, CasanMarianMTModel, casan_class


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


# The layers of the CASAN models: the encoders' (BERT families, Marian) and Marian's decoder's.
LAYER_CLASSES = ("CasanLayer", "CasanMarianEncoderLayer", "MarianDecoderLayer")


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
    "deep_global-marian-translation": ("marian", "translation", "deep_global", "cls"),
}


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
    (root / "cases.json").write_text(json.dumps(cases))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(TESTS))
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
    return {name: (root / name, json.loads((root / name / "runs.json").read_text())) for name in SHARDED_CASES}


@pytest.mark.parametrize("case", SHARDED_CASES)
def test_fsdp2_trains_as_ddp_from_the_same_start(sharded_runs, case):
    _, runs = sharded_runs[case]
    assert len(runs["fsdp"]["loss"]) == len(runs["fsdp"]["grad_norm"]) == 3
    for measure in ("loss", "grad_norm"):
        assert runs["fsdp"][measure] == pytest.approx(runs["ddp"][measure], rel=1e-5, abs=1e-6), measure
    assert runs["ddp"]["loss"][-1] != runs["ddp"]["loss"][0]  # the weights moved


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


def test_the_fsdp2_saved_folder_loads_in_a_fresh_process_as_the_ddp_model(sharded_runs, tmp_path):
    heads = {head.name: head.auto_class for head in HEADS} | {"translation": "AutoModelForSeq2SeqLM"}
    folders = [(str(folder), heads[SHARDED_CASES[case][1]]) for case, (folder, _) in sharded_runs.items()]
    code = LOAD_SHARDED_SAVES.replace("sys.argv[1]", repr(json.dumps(folders)))
    assert run_without_casan_hf(code, tmp_path).strip() == f"loaded {len(folders)}"
