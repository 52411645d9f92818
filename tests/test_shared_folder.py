"""A shared folder is safe to load: weights only as safetensors (no pickle in what `save_pretrained`, the converter
and the training scripts write for loading; `training_args.bin` is transformers' own record of the run), and the
model card escapes what a user passes in, so a model or dataset name cannot inject markup into the card, code into
its how-to-load snippet, or keys into its model-index YAML. (That the code files import only torch, transformers
and each other: test_remote_code.py.)"""

import ast
import subprocess
import sys

import pytest
from glue_helpers import CONVERT, make_tiny_bert
from huggingface_hub import ModelCard
from tiny_models import tiny_config

from casan_hf import CasanForSequenceClassification, CasanMarianConfig, CasanMarianMTModel, casan_class
from casan_hf.hub import escape_for_card, render_model_card
from casan_hf.translation import render_translation_card


# The starts of a pickle (protocol 2 or later) and of torch.save's zip archive.
PICKLE_MAGIC = (b"\x80", b"PK\x03\x04")
TRANSFORMERS_OWN = {"training_args.bin"}


def pickled_files(folder):
    """The files of `folder` (checkpoint-* folders aside: the resume state Trainer writes for itself) that hold a
    pickle, by their first bytes."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not any(part.startswith("checkpoint-") for part in path.relative_to(folder).parts):
            with open(path, "rb") as handle:
                if handle.read(4).startswith(PICKLE_MAGIC) and path.name not in TRANSFORMERS_OWN:
                    found.append(path.name)
    return found


def tiny_marian():
    sizes = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2)
    sizes.update(encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32)
    config = CasanMarianConfig(vocab_size=40, d_model=16, pad_token_id=0, decoder_start_token_id=0, **sizes)
    return CasanMarianMTModel(config)


@pytest.mark.parametrize("head", ["base", "sequence-classification", "masked-lm", "multiple-choice"])
def test_save_pretrained_writes_weights_only_as_safetensors(head, tmp_path):
    casan_class("bert", head)(tiny_config(context_type="deep_global")).save_pretrained(tmp_path / head)
    assert (tmp_path / head / "model.safetensors").is_file() and pickled_files(tmp_path / head) == []


def test_the_translation_model_and_the_converter_write_only_safetensors(tmp_path, minilm_path):
    tiny_marian().save_pretrained(tmp_path / "mt")
    assert (tmp_path / "mt" / "model.safetensors").is_file() and pickled_files(tmp_path / "mt") == []
    bert = make_tiny_bert(tmp_path / "bert", minilm_path)
    subprocess.run(
        [sys.executable, CONVERT, "--model_name_or_path", bert, "--output_dir", tmp_path / "converted",
         "--context_type", "global"],
        check=True, capture_output=True,
    )  # fmt: skip
    assert (tmp_path / "converted" / "model.safetensors").is_file() and pickled_files(tmp_path / "converted") == []


# A name that tries every way out: a quote that would close the snippet's string and run code, new lines that
# would start a heading or a second metadata block, HTML, a table cell, a code span, YAML keys.
HOSTILE = 'x", trust_remote_code=True); import os; os.system("echo pwned"); ("\n---\nlicense: mit\n<script>`|'
HOSTILE_DATASET = "data\nmodel-index: []\n# Injected | cell"


def card_body(card):
    return card.split("\n---\n", 1)[1]


def snippet_arguments(card):
    """The string arguments of every `from_pretrained` call in the card's Python snippet, as Python reads them."""
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]
    return [
        call.args[0].value
        for call in calls
        if getattr(call.func, "attr", None) == "from_pretrained" and isinstance(call.args[0], ast.Constant)
    ], len([node for node in ast.parse(code).body if isinstance(node, ast.Expr | ast.Assign)])


def assert_nothing_escapes(card, statements):
    metadata = ModelCard(card).data.to_dict()
    assert metadata["license"] == "apache-2.0" and metadata["model-index"][0]["name"] == HOSTILE
    assert metadata["model-index"][0]["results"][0]["dataset"]["name"] == HOSTILE_DATASET
    body = card_body(card)
    assert "<script" not in body and "\n---\n" not in body and "# Injected" not in body
    heading = next(line for line in body.splitlines() if line.startswith("# "))
    assert heading == f"# {escape_for_card(HOSTILE)}"
    arguments, count = snippet_arguments(card)
    # The name read back whole in every call (one of them pinned to a commit), and no statement added.
    assert arguments == [HOSTILE] * 3 and count == statements


def test_the_model_card_escapes_user_strings():
    model = CasanForSequenceClassification(tiny_config(context_type="global", num_labels=2))
    card = render_model_card(
        model,
        HOSTILE,
        base_model="org/base`\n## Injected",
        dataset_id=HOSTILE_DATASET,
        eval_metrics={"validation": {"accuracy": 0.5}},
        training={"seed": 1, "started_from": "a|b\n# Injected"},
    )
    assert_nothing_escapes(card, statements=3)
    assert "## Injected" not in card_body(card)


def test_the_translation_card_escapes_user_strings():
    card = render_translation_card(
        tiny_marian(),
        HOSTILE,
        "en",
        "de",
        HOSTILE_DATASET,
        {"validation": {"bleu": 1.0, "chrf": 2.0}},
        {"started_from": "a|b\n# Injected"},
        "apache-2.0",
    )
    assert_nothing_escapes(card, statements=5)


@pytest.mark.parametrize(
    "name", ["org/model-v2.1", "runs/minilm_casan (v2)", "über", "a\\b", 'q"', "\n\t<\x00\U0001f600"]
)
def test_escape_for_card_reads_back_as_python_and_keeps_plain_names(name):
    assert ast.literal_eval(f'"{escape_for_card(name)}"') == name
    if name in ("org/model-v2.1", "runs/minilm_casan (v2)", "über"):
        assert escape_for_card(name) == name
