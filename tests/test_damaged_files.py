"""Damaged and mismatched files are refused with one line naming the file and what is wrong, and nothing is
written: a truncated model.safetensors, a config.json whose context options do not fit the weights' shapes, a
folder missing one of its code files, a tokenizer of another family."""

import json
import shutil

import pytest
import torch
from conftest import load_script, run_main
from fresh_process import run_without_casan_hf
from glue_helpers import TINY_RUN, make_tiny_bert, make_tiny_source
from safetensors.torch import load_file, save_file
from tiny_models import tiny_config

from casan_hf import CasanForSequenceClassification, CasanMarianConfig, CasanMarianMTModel


def snapshot(folder):
    """Every file under `folder` with its bytes: what must be left as it was."""
    return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved") / "casan"
    CasanForSequenceClassification(tiny_config(context_type="deep_global", num_labels=2)).save_pretrained(folder)
    return folder


def damaged_copy(saved, tmp_path, name="damaged"):
    copy = tmp_path / name
    shutil.copytree(saved, copy)
    return copy


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


def test_a_truncated_weights_file_is_refused_naming_it(saved, tmp_path):
    folder = damaged_copy(saved, tmp_path)
    truncate(folder / "model.safetensors")
    before = snapshot(folder)
    with pytest.raises(ValueError) as refused:
        CasanForSequenceClassification.from_pretrained(folder)
    message = str(refused.value)
    assert message.startswith(f"{folder / 'model.safetensors'} is cut short: its header lists ")
    assert "\n" not in message and snapshot(folder) == before
    # A header cut short too, and a header that is not JSON.
    (folder / "model.safetensors").write_bytes(before[folder / "model.safetensors"][:20])
    with pytest.raises(ValueError, match=r"model.safetensors is cut short \(20 bytes, not even its header\)"):
        CasanForSequenceClassification.from_pretrained(folder)
    data = bytearray(before[folder / "model.safetensors"])
    data[8:12] = b"\xff\xfe{{"
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model.safetensors is damaged: its header is not valid JSON"):
        CasanForSequenceClassification.from_pretrained(folder)


@pytest.mark.parametrize(
    "changes, offender",
    [
        ({"context_type": "global"}, "encoder.layer.1.attention.self.context_mixer.context_weight is 64x64 in the "
         "weights but 64x32"),
        ({"context_type": "deep"}, "encoder.layer.1.attention.self.context_mixer."
         "context_weight is 64x64 in the weights but 64x32"),
        ({"context_rank": 4}, "encoder.layer.0.attention.self.context_mixer.context_weight is 64x32 in the weights "
         "but 8x32"),
    ],
)  # fmt: skip
def test_a_config_whose_context_weights_have_other_shapes_is_refused(saved, tmp_path, changes, offender):
    folder = damaged_copy(saved, tmp_path)
    edit_config(folder, **changes)
    before = snapshot(folder)
    for kwargs in ({}, {"ignore_mismatched_sizes": True}):  # never re-initialised without a word
        with pytest.raises(ValueError) as refused:
            CasanForSequenceClassification.from_pretrained(folder, **kwargs)
        message = str(refused.value)
        assert message.startswith(f"{folder / 'config.json'} does not fit {folder / 'model.safetensors'}: ")
        assert offender in message and "the config was edited, or belongs to other weights" in message
    assert snapshot(folder) == before


def test_a_config_whose_pooling_does_not_fit_the_heads_weights_is_refused_naming_the_options(saved, tmp_path):
    """The classifier reads a sentence vector twice as wide with two structured hops: refused naming the pooling
    options, where transformers stopped with a table. `ignore_mismatched_sizes` re-initialises the head, as asked."""
    folder = damaged_copy(saved, tmp_path)
    edit_config(folder, classifier_pooling="structured", pooling_hops=2)
    with pytest.raises(ValueError) as refused:
        CasanForSequenceClassification.from_pretrained(folder)
    assert str(refused.value).startswith(
        f"{folder / 'config.json'} does not fit {folder / 'model.safetensors'}: classifier.weight is 2x32 in the "
        "weights but 2x64 for the config's pooling options and label count (classifier_pooling='structured', "
        "pooling_hops=2, pooling_hidden=128, num_labels=2)"
    )
    model = CasanForSequenceClassification.from_pretrained(folder, ignore_mismatched_sizes=True)
    assert model.classifier.weight.shape == (2, 64)


def layer_context(weights, layer):
    """The names of layer `layer`'s context weights among `weights`."""
    return {name for name in weights if name.startswith(f"bert.encoder.layer.{layer}.") and "context_mixer" in name}


def test_context_weights_absent_on_one_side_load_and_are_reported_as_transformers_does(saved, tmp_path):
    """As for any model (transformers' own test_model_weights_reload_no_missing_tied_weights): what the file
    lacks is a missing key, what the model has no place for an unexpected one, and the rest loads."""
    folder = damaged_copy(saved, tmp_path)
    weights = load_file(folder / "model.safetensors")
    layer_1 = layer_context(weights, 1)
    save_file({name: tensor for name, tensor in weights.items() if name not in layer_1}, folder / "model.safetensors",
              metadata={"format": "pt"})  # fmt: skip
    edit_config(folder, context_layers=[1, 2])
    model, info = CasanForSequenceClassification.from_pretrained(folder, output_loading_info=True)
    assert set(info["missing_keys"]) == layer_1 and not info["mismatched_keys"]
    assert set(info["unexpected_keys"]) == layer_context(weights, 0)
    loaded = model.state_dict()
    assert all(torch.equal(loaded[name], weights[name]) for name in loaded.keys() & weights.keys() - layer_1)


def test_a_translation_model_with_damaged_weights_is_refused(tmp_path):
    sizes = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2)
    sizes.update(encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32)
    config = CasanMarianConfig(
        vocab_size=40, d_model=16, pad_token_id=0, decoder_start_token_id=0, context_type="deep", **sizes
    )
    CasanMarianMTModel(config).save_pretrained(tmp_path / "mt")
    edit_config(tmp_path / "mt", context_type="deep_global")  # layer 1's context is twice as wide
    with pytest.raises(ValueError, match=r"config.json does not fit .*model.safetensors: .*context_mixer"):
        CasanMarianMTModel.from_pretrained(tmp_path / "mt")


REMOTE_LOAD = """
from transformers import AutoModelForSequenceClassification
for folder in ("truncated", "edited", "no_code_file"):
    try:
        AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
    except Exception as error:
        print(type(error).__name__, str(error).splitlines()[-1])
"""


def test_trust_remote_code_loads_refuse_them_too(saved, tmp_path):
    """With only transformers: the checks live in the code files the folder carries; a missing code file is
    transformers' own refusal, which names it."""
    truncate(damaged_copy(saved, tmp_path, "truncated") / "model.safetensors")
    edit_config(damaged_copy(saved, tmp_path, "edited"), context_type="global")
    (damaged_copy(saved, tmp_path, "no_code_file") / "context.py").unlink()
    before = {name: snapshot(tmp_path / name) for name in ("truncated", "edited", "no_code_file")}
    lines = run_without_casan_hf(REMOTE_LOAD, tmp_path).splitlines()
    assert lines[0].startswith("ValueError truncated/model.safetensors is cut short")
    assert lines[1].startswith("ValueError edited/config.json does not fit edited/model.safetensors")
    assert lines[2] == "FileNotFoundError [Errno 2] No such file or directory: 'no_code_file/context.py'"
    assert {name: snapshot(tmp_path / name) for name in before} == before


@pytest.fixture(scope="module")
def run_glue_main():
    module = load_script("run_glue")
    return lambda args: run_main(module, args)


def refused_run(run_glue_main, model, output_dir, glue_dir, *extra):
    with pytest.raises(SystemExit) as stopped:
        run_glue_main(["--model_name_or_path", model, "--task_name", "rte", "--glue_dir", glue_dir, "--do_train",
                       "--max_steps", "1", "--output_dir", output_dir, *TINY_RUN, *extra])  # fmt: skip
    assert not output_dir.exists()
    return str(stopped.value)


def test_run_glue_refuses_damaged_weights_before_writing(saved, tmp_path, glue_dir, run_glue_main, minilm_path):
    bert = make_tiny_bert(tmp_path / "bert", minilm_path)
    truncate(tmp_path / "bert" / "model.safetensors")
    message = refused_run(run_glue_main, bert, tmp_path / "out", glue_dir)
    assert message.startswith(f"run_glue.py: error: {tmp_path / 'bert' / 'model.safetensors'} is cut short")


def test_a_tokenizer_of_another_family_is_refused_before_writing(tmp_path, glue_dir, run_glue_main, minilm_path):
    bert = make_tiny_bert(tmp_path / "bert", minilm_path)
    roberta = make_tiny_source(tmp_path / "roberta", "roberta", minilm_path, glue_dir)
    message = refused_run(run_glue_main, bert, tmp_path / "out", glue_dir, "--tokenizer_name", roberta)
    assert message == (
        f"run_glue.py: error: The tokenizer of {roberta!r} pads with id 1 ('<pad>') but the model with id 0 "
        "(config.json pad_token_id): it is a tokenizer of another family."
    )
    message = refused_run(run_glue_main, roberta, tmp_path / "out", glue_dir, "--tokenizer_name", bert)
    assert message == (
        f"run_glue.py: error: The tokenizer of {bert!r} has 30522 tokens but the model's embeddings hold 1000 "
        "(config.json vocab_size): it is not this checkpoint's tokenizer."
    )
