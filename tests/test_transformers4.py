"""Saved folders load with transformers 4.x too: folders saved here (transformers 5) load with
`trust_remote_code=True` in a second environment that has transformers 4.56 and no casan_hf (`.venv-4x`,
pinned in constraints-transformers4.txt, made by `make test`), with the same outputs, for every head, every
context type and the options that build different parameters, with eager and sdpa attention. Older
transformers fail at import with a message that names the minimum."""

import json
import os
import sys

import pytest
import torch
from conftest import REPO_ROOT
from fresh_process import run_without_casan_hf
from tiny_models import (
    assert_outputs_close,
    attention_implementations,
    comparable_outputs,
    head_inputs,
    padded_batch,
    tiny_config,
)
from transformers import AutoTokenizer

from casan_hf import FAMILIES, HEAD_CLASSES, HEADS, casan_class
from casan_hf.compat import MINIMUM_TRANSFORMERS


PYTHON_4X = REPO_ROOT / ".venv-4x" / "bin" / "python"
IMPLEMENTATIONS = ("eager", "sdpa")

CONTEXTS = {
    "global": dict(context_type="global"),
    "deep": dict(context_type="deep"),
    "deep_global_rank": dict(context_type="deep_global", context_rank=4, context_layers=[1, 2]),
    "none": dict(context_type="none"),
    "fixed_key_gate": dict(context_type="global", gate="fixed", fixed_gate=0.3, context_targets=["key"]),
}
POOLINGS = {
    "mean": dict(classifier_pooling="mean"),
    "structured": dict(classifier_pooling="structured", pooling_hops=2, pooling_hidden=8),
    "generalized": dict(
        classifier_pooling="generalized",
        pooling_hops=3,
        pooling_hidden=8,
        pooling_parameter_penalty=0.5,
        pooling_attention_penalty=0.5,
        pooling_output_penalty=0.5,
    ),
}
POOLING_HEADS = [head.name for head in HEADS if head.pools_sentence]

# (family, head, context, options): BERT's every head with every context (cls pooling) and its pooling heads with
# every pooling (deep_global context); every other family's every head with deep_global and its own defaults (a
# config.json omits the values equal to the family's defaults, so 4.x must know them too). A family that needs a
# newer transformers (ModernBERT) is refused on 4.x instead (tests/test_modernbert.py).
CASES = (
    [("bert", head.name, context, {}) for head in HEADS for context in CONTEXTS]
    + [
        ("bert", head, f"deep_global_{pooling}", options)
        for head in POOLING_HEADS
        for pooling, options in POOLINGS.items()
    ]
    + [
        (family.name, head.name, "deep_global", {})
        for family in FAMILIES[1:]
        if not family.minimum_transformers
        for head in HEADS
    ]
)

LOAD_WITH_TRANSFORMERS_4 = """
import json, torch, transformers
assert transformers.__version__.startswith("4."), transformers.__version__
cases = json.load(open("cases.json"))
for case in cases:
    model = getattr(transformers, case["auto_class"]).from_pretrained(case["folder"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    inputs = torch.load(case["inputs"])
    for implementation, loaded_file in case["loaded"].items():
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs = model(**inputs, **case["requests"][implementation])
        recorded = {name: torch.stack(value) if isinstance(value, tuple) else value for name, value in outputs.items()}
        torch.save(recorded, loaded_file)
print(transformers.__version__, len(cases))
"""


def python_4x():
    """The interpreter of the transformers 4 environment; skipped without it, except in CI, where it must exist."""
    if not PYTHON_4X.is_file():
        message = f"no transformers 4 environment at {PYTHON_4X.parent.parent}: `make test` creates it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return PYTHON_4X


def requests(head_name, implementation):
    """The optional outputs a head is asked for: everything it can return (attentions with eager only)."""
    asked = dict(output_context_gates=True, output_hidden_states=True, output_attentions=implementation == "eager")
    if head_name in POOLING_HEADS:
        asked["output_pooling_attentions"] = True
    return asked


def recorded_outputs(outputs):
    """Every tensor of an output that the other version must reproduce; per-layer tuples stacked."""
    recorded = comparable_outputs(outputs)
    for name in ("context_gates", "hidden_states", "attentions", "pooling_attentions"):
        value = outputs.get(name)
        if value is not None:
            recorded[name] = torch.stack(value) if isinstance(value, tuple) else value
    return recorded


def save_cases(tmp_path):
    """Saves a tiny random folder per case, its inputs, and the outputs of the folder loaded here (transformers 5)
    with each attention backend."""
    cases = []
    for index, (family, head_name, context, options) in enumerate(CASES):
        model_class = casan_class(family, head_name)
        context_options = CONTEXTS[context] if context in CONTEXTS else {"context_type": "deep_global"}
        num_labels = 2 if head_name == "question-answering" else 3  # start and end
        torch.manual_seed(index)
        config = tiny_config(
            family, num_labels=num_labels, gate_bias_init=0.0, context_init_range=0.2, **context_options, **options
        )
        folder = tmp_path / f"{family}-{head_name}-{context}"
        model_class(config).save_pretrained(folder)
        model = model_class.from_pretrained(folder).eval()
        batch = padded_batch([6, 3, 5], seed=index, pad_token_id=config.pad_token_id)
        inputs = head_inputs(model_class, *batch, num_labels=num_labels)
        torch.save(inputs, folder / "inputs.pt")
        case = {
            "folder": str(folder),
            "auto_class": next(head.auto_class for head in HEADS if head.name == head_name),
            "inputs": str(folder / "inputs.pt"),
            "expected": {},
            "loaded": {},
            "requests": {},
        }
        for implementation in attention_implementations(model_class):
            model.set_attn_implementation(implementation)
            case["requests"][implementation] = requests(head_name, implementation)
            with torch.no_grad():
                outputs = model(**inputs, **case["requests"][implementation])
            case["expected"][implementation] = str(folder / f"expected-{implementation}.pt")
            case["loaded"][implementation] = str(folder / f"loaded-{implementation}.pt")
            torch.save(recorded_outputs(outputs), case["expected"][implementation])
        cases.append(case)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    return cases


def test_folders_saved_with_transformers_5_load_with_identical_outputs_on_transformers_4(tmp_path):
    python = python_4x()
    cases = save_cases(tmp_path)
    version, loaded = run_without_casan_hf(LOAD_WITH_TRANSFORMERS_4, tmp_path, python=python).split()
    assert version.startswith("4.") and int(loaded) == len(cases)
    for case in cases:
        for implementation, expected in case["expected"].items():
            actual = torch.load(case["loaded"][implementation])
            assert_outputs_close(actual, torch.load(expected), f"{case['folder']} {implementation}")


TOO_OLD = """
import transformers
transformers.__version__ = "4.55.4"  # as an older transformers reports itself
try:
    transformers.AutoConfig.from_pretrained("model", trust_remote_code=True)
except ImportError as error:
    print(error)
else:
    raise SystemExit("an older transformers loaded the folder")
"""


def test_an_older_transformers_is_refused_with_the_minimum_version(tmp_path):
    HEAD_CLASSES["base"](tiny_config()).save_pretrained(tmp_path / "model")
    message = run_without_casan_hf(TOO_OLD, tmp_path)
    assert f"casan-hf models need transformers >= {MINIMUM_TRANSFORMERS} (found 4.55.4)" in message, message


def test_this_process_runs_transformers_5():
    """The comparison above is between two versions only if the main environment has transformers 5."""
    import transformers

    assert transformers.__version__.startswith("5."), (transformers.__version__, sys.executable)


def test_a_translation_runs_tokenizer_loads_on_transformers_4(tmp_path):
    """A translation run's trained tokenizer is saved under a class name 4.x knows, with the model's inputs."""
    from casan_hf.translation import train_tokenizer

    pairs = [{"en": "A man rides a bike.", "de": "Ein Mann fährt Fahrrad."}] * 3
    train_tokenizer({"train": {"translation": pairs}}, "en", "de", 60, 64).save_pretrained(tmp_path / "tokenizer")
    code = """
import json
from transformers import AutoTokenizer
print(json.dumps(dict(AutoTokenizer.from_pretrained("tokenizer")("A man rides a bike."))))
"""
    expected = dict(AutoTokenizer.from_pretrained(tmp_path / "tokenizer")("A man rides a bike."))
    assert json.loads(run_without_casan_hf(code, tmp_path, python=python_4x())) == expected
