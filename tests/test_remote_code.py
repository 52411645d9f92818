"""A saved folder works for people who only have transformers: every head of every family loads with
trust_remote_code=True in a fresh process where casan_hf cannot be imported, with identical weights and the same
outputs."""

import ast
import json

import torch
from conftest import REPO_ROOT
from fresh_process import run_without_casan_hf
from tiny_models import (
    assert_outputs_close,
    assert_same_weights,
    comparable_outputs,
    head_inputs,
    padded_batch,
    tiny_config,
)
from transformers import AutoTokenizer

from casan_hf import FAMILIES, HEADS, CasanForSequenceClassification, casan_class
from casan_hf.configuration_casan_marian import AUTO_MAP as MARIAN_AUTO_MAP
from casan_hf.families import CAUSAL_FAMILIES


# (CASAN class, its family, the auto class that loads it) for every family and head.
EVERY_CLASS = [(casan_class(family, head.name), family, head.auto_class) for family in FAMILIES for head in HEADS]

LOAD_EVERY_HEAD = """
import json, sys, torch, transformers
cases = json.load(open("cases.json"))
for case in cases:
    auto_class = getattr(transformers, case["auto_class"])
    model = auto_class.from_pretrained(case["folder"], trust_remote_code=True).eval()
    assert type(model).__name__ == case["class_name"], type(model)
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    with torch.no_grad():
        outputs = model(**torch.load(case["inputs"]), output_context_gates=True)
    outputs = {**outputs, "context_gates": torch.stack(outputs.context_gates)}
    torch.save({"weights": model.state_dict(), "outputs": outputs}, case["loaded"])
print("loaded", len(cases))
"""


def test_every_head_loads_in_a_fresh_process_without_casan_hf(tmp_path):
    """The fresh process loads every weight exactly and gives the same outputs, to `OUTPUT_TOLERANCE`: its weights are
    read in place from the folder's file, not from the memory of the model saved."""
    cases, models = [], {}
    for index, (model_class, family, auto_class) in enumerate(EVERY_CLASS):
        torch.manual_seed(0)
        # every other class with a gate per head, so that each family and both gates are loaded
        gate_per_head = index % 2 == 1
        config = tiny_config(
            family.name, context_type="deep_global", num_labels=2, gate_bias_init=0.0, gate_per_head=gate_per_head
        )
        model = model_class(config).eval()
        folder = tmp_path / model_class.__name__
        model.save_pretrained(folder)
        inputs = head_inputs(model_class, *padded_batch([6, 3]))
        torch.save(inputs, folder / "inputs.pt")
        models[str(folder)] = (model, inputs)
        cases.append(
            {
                "folder": str(folder),
                "auto_class": auto_class,
                "class_name": model_class.__name__,
                "inputs": str(folder / "inputs.pt"),
                "loaded": str(folder / "loaded.pt"),
            }
        )
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    assert run_without_casan_hf(LOAD_EVERY_HEAD, tmp_path).strip() == f"loaded {len(EVERY_CLASS)}"
    for case in cases:
        model, inputs = models[case["folder"]]
        loaded = torch.load(case["loaded"])
        assert_same_weights(loaded["weights"], model)
        with torch.no_grad():
            outputs = model(**inputs, output_context_gates=True)
        expected = {**comparable_outputs(outputs), "context_gates": torch.stack(outputs.context_gates)}
        assert_outputs_close(loaded["outputs"], expected, case["class_name"])


PIPELINE = """
from transformers import pipeline
classify = pipeline("text-classification", model="converted", trust_remote_code=True)
results = classify(["What a wonderful film.", "Dull and far too long."])
assert [r["label"] for r in results] and all(r["label"] in ("negative", "positive") for r in results), results
assert all(0.0 <= r["score"] <= 1.0 for r in results)
print(type(classify.model).__module__.split(".")[0], len(results))
"""


def test_pipeline_classifies_text_from_a_converted_minilm(tmp_path, minilm_path):
    model = CasanForSequenceClassification.from_pretrained(
        minilm_path, context_type="deep", num_labels=2, id2label={0: "negative", 1: "positive"}
    )
    model.save_pretrained(tmp_path / "converted")
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(tmp_path / "converted")
    assert run_without_casan_hf(PIPELINE, tmp_path).split() == ["transformers_modules", "2"]


PACKAGE = REPO_ROOT / "casan_hf"


def relative_imports(module):
    """The modules of the package that `module`'s file imports itself (`from .name import`), anywhere in it, as
    transformers reads a remote code file's imports."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}


def test_every_folder_s_code_files_are_imported_by_its_auto_map_modules_themselves():
    """A local folder's `auto_map` modules (its config's and its model's) must between them import, themselves, every
    code file they need: transformers before 5.10 (5.5 at least) copies into its module cache only the files that a
    local folder's config or model file imports itself, not those that these import in turn, and the load stops on
    the first file missing (a causal folder on 5.2 stopped at local_bias.py). transformers loads the config's module
    first, so the two share the cache."""
    auto_maps = [family.auto_map() for family in (*FAMILIES, *CAUSAL_FAMILIES)] + [MARIAN_AUTO_MAP]
    missing = {}
    for auto_map in auto_maps:
        entries = {reference.split(".")[0] for reference in auto_map.values()}
        copied = set().union(*(relative_imports(entry) for entry in entries))
        needed, frontier = set(), copied
        while frontier:
            needed |= frontier
            frontier = set().union(*(relative_imports(module) for module in frontier)) - needed
        if needed - copied:
            missing[", ".join(sorted(entries))] = sorted(needed - copied)
    assert missing == {}, f"import these in one of the entry files themselves: {missing}"
