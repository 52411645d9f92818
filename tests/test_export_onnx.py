"""scripts/export_onnx.py: any CASAN folder (BERT's heads, a ModernBERT and a DeBERTa-v2 classifier) to ONNX with
dynamic batch and length, checked against PyTorch."""

import onnxruntime
import pytest
import torch
from conftest import load_script
from glue_helpers import make_tiny_bert, make_tiny_source

from casan_hf import casan_class


@pytest.fixture(scope="module")
def export_main():
    return load_script("export_onnx").main


@pytest.mark.parametrize(
    "family, head, context_type",
    [
        ("bert", "sequence-classification", "deep_global"),
        ("bert", "token-classification", "deep"),
        ("bert", "multiple-choice", "global"),
        # ModernBERT's window is 8 tokens: the check batch's longest sentence runs its sliding-window layer.
        ("modernbert", "sequence-classification", "deep_global"),
    ],
)
def test_export_takes_any_batch_and_length(export_main, minilm_path, tmp_path, capsys, family, head, context_type):
    from transformers import AutoTokenizer

    if family == "bert":
        source = make_tiny_bert(tmp_path / family, minilm_path)
    else:
        source = make_tiny_source(tmp_path / family, family, minilm_path, glue_dir=None)
    casan = casan_class(family, head).from_pretrained(source, context_type=context_type, gate_bias_init=0.0)
    casan.save_pretrained(tmp_path / "casan")
    AutoTokenizer.from_pretrained(source).save_pretrained(tmp_path / "casan")

    export_main(["--model_name_or_path", str(tmp_path / "casan"), "--output_dir", str(tmp_path / "onnx")])
    printed = capsys.readouterr().out
    assert "max difference" in printed and f"Saved {tmp_path / 'onnx'}/model.onnx" in printed
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx"))
    for item in session.get_inputs():
        assert all(isinstance(axis, str) for axis in item.shape), item  # batch and length are symbolic
    checked = printed.split("padded batch ")[1].split(":")[0]
    assert checked.startswith("3x")  # the example had 2 rows: the batch axis is not fixed to the example's


def test_a_deberta_v2_model_exports(export_main, minilm_path, tmp_path, capsys):
    """transformers' exporter takes DeBERTa-v2 (v3's relative attention, its buckets and the convolution of the
    tiny config): onnxruntime runs a longer, larger padded batch than the example and matches PyTorch."""
    from tiny_models import tiny_config
    from transformers import AutoTokenizer

    from casan_hf import casan_class

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    config = tiny_config("deberta-v2", vocab_size=len(tokenizer), context_type="deep_global", gate_bias_init=0.0)
    casan_class("deberta-v2", "sequence-classification")(config).save_pretrained(tmp_path / "casan")
    tokenizer.save_pretrained(tmp_path / "casan")

    export_main(["--model_name_or_path", str(tmp_path / "casan"), "--output_dir", str(tmp_path / "onnx")])
    printed = capsys.readouterr().out
    assert "Exporting CasanDebertaV2ForSequenceClassification (deep_global context)" in printed
    assert "padded batch 3x" in printed and f"Saved {tmp_path / 'onnx'}/model.onnx" in printed
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx"))
    for item in session.get_inputs():
        assert all(isinstance(axis, str) for axis in item.shape), item


def test_a_non_empty_output_folder_is_refused(export_main, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("mine")
    with pytest.raises(SystemExit):
        export_main(["--model_name_or_path", str(tmp_path), "--output_dir", str(tmp_path / "out")])
    assert "already exists and is not empty; pass --overwrite" in capsys.readouterr().err
