"""scripts/plot_attention.py writes one valid PNG of the planned size for CASAN checkpoints of every kind (DeBERTa
and ModernBERT classifiers and the causal LMs Llama and GPT-2 among them) and plain BERT, and refuses bad flags with
usage errors that name the allowed range."""

import re
import struct
import subprocess
import sys

import pytest
import torch
from conftest import REPO_ROOT, load_script
from tiny_models import TINY, tiny_causal_config, tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import BertConfig, BertModel

from casan_hf import CasanForSequenceClassification, CasanModel, casan_class


SCRIPT = REPO_ROOT / "scripts" / "plot_attention.py"
TEXT, PAIR = "The film was gripping, funny and not at all dull!", "I liked it."


plot_attention = load_script("plot_attention")


PRINTED = re.compile(r"Wrote .*: (\d+) tokens, (\d+x\d+) pixels\.")


def planned_pixels(width, height, dpi):
    """matplotlib's PNG of a `width` x `height` inch figure: whole pixels, the fraction dropped."""
    return int(width * dpi), int(height * dpi)


def png_size(path):
    """(width, height) from the PNG header, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def saved(folder, model):
    torch.manual_seed(0)
    model.save_pretrained(folder)
    tiny_tokenizer(folder, token_types=getattr(model, "has_token_types", True))  # transformers' BertModel: True
    return folder


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    return {
        "structured": saved(
            root / "structured", CasanForSequenceClassification(tiny_config(classifier_pooling="structured"))
        ),
        "deep": saved(root / "deep", CasanModel(tiny_config(context_type="deep"))),
        "deberta-v2": saved(
            root / "deberta-v2",
            casan_class("deberta-v2", "sequence-classification")(
                tiny_config("deberta-v2", context_type="deep_global", classifier_pooling="structured")
            ),
        ),
        "global": saved(root / "global", CasanModel(tiny_config(context_type="global", context_layers=[1]))),
        "bert": saved(root / "bert", BertModel(BertConfig(**TINY))),
        "modernbert": saved(
            root / "modernbert",
            casan_class("modernbert", "sequence-classification")(
                tiny_config("modernbert", classifier_pooling="structured")
            ),
        ),
        "llama": saved(
            root / "llama",
            casan_class("llama", "causal-lm")(tiny_causal_config("llama", context_type="global", gate_bias_init=0.0)),
        ),
        "gpt2": saved(
            root / "gpt2",
            casan_class("gpt2", "causal-lm")(
                tiny_causal_config("gpt2", context_type="deep_global", gate_bias_init=0.0, gate_per_head=True)
            ),
        ),
    }


@pytest.mark.parametrize(
    "kind,flags,num_maps,num_hops,has_gates",
    [
        ("structured", ["--text-pair", PAIR], 4, 4, True),
        ("deep", ["--layers", "0", "2", "--heads", "1"], 2, 0, True),
        ("deberta-v2", ["--text-pair", PAIR, "--layers", "1", "--heads", "0", "3"], 2, 4, True),
        ("global", ["--layers", "1", "--heads", "0", "3", "--dpi", "60"], 2, 0, True),
        ("bert", ["--text-pair", PAIR, "--heads", "2"], 1, 0, False),
        ("modernbert", ["--text-pair", PAIR, "--heads", "1"], 1, 4, True),
        ("llama", [], 4, 0, True),
        ("gpt2", ["--layers", "0", "2", "--heads", "1"], 2, 0, True),
    ],
)
def test_writes_a_png_of_the_planned_size(tmp_path, capsys, checkpoints, kind, flags, num_maps, num_hops, has_gates):
    out = tmp_path / "plot.png"
    plot_attention.main(["--model", str(checkpoints[kind]), "--text", TEXT, "--out", str(out), *flags])
    num_tokens, pixels = PRINTED.fullmatch(capsys.readouterr().out.strip()).groups()
    dpi = int(flags[flags.index("--dpi") + 1]) if "--dpi" in flags else 100
    width, height = plot_attention.figure_size(
        int(num_tokens), TINY["num_hidden_layers"], num_maps, num_hops, has_gates
    )
    assert png_size(out) == planned_pixels(width, height, dpi)
    assert pixels == "x".join(map(str, png_size(out)))


def test_64_tokens_keep_a_readable_cell_per_token(tmp_path, capsys, checkpoints):
    out = tmp_path / "figures" / "new" / "long.png"  # folders the figure's own: made for it
    long_text = " ".join(["the film was funny and gripping ,"] * 20)
    plot_attention.main(["--model", str(checkpoints["structured"]), "--text", long_text, "--out", str(out)])
    assert " 64 tokens" in capsys.readouterr().out
    width, height = plot_attention.figure_size(64, TINY["num_hidden_layers"], TINY["num_attention_heads"], 4)
    assert png_size(out) == planned_pixels(width, height, 100)
    assert plot_attention.token_inches(64) * 100 >= 16  # pixels per token row at the default dpi


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--layers", "3"], "--layers 3 out of range: the model has 3 layers (allowed 0..2)"),
        (["--layers", "0", "-1"], "--layers -1 out of range"),
        (["--heads", "4", "7"], "--heads 4 7 out of range: the model has 4 heads (allowed 0..3)"),
        (["--dpi", "0"], "--dpi must be positive"),
        (["--heads", "two"], "argument --heads: invalid int value: 'two'"),
        (["--max-tokens", "2"], "--max-tokens must be at least 3"),
    ],
)
def test_bad_flags_are_usage_errors(tmp_path, capsys, checkpoints, flags, message):
    out = tmp_path / "never.png"
    with pytest.raises(SystemExit) as exit_info:
        plot_attention.main(["--model", str(checkpoints["deep"]), "--text", TEXT, "--out", str(out), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_head_it_cannot_show_is_a_usage_error(tmp_path, capsys):
    BertConfig(**TINY, architectures=["BertForPreTraining"]).save_pretrained(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        plot_attention.main(["--model", str(tmp_path), "--text", TEXT, "--out", str(tmp_path / "never.png")])
    assert exit_info.value.code == 2
    assert (
        "Checkpoint architecture 'BertForPreTraining' is not a head that can be inspected" in capsys.readouterr().err
    )


def test_runs_as_a_script_without_a_display(tmp_path, checkpoints):
    out = tmp_path / "cli.png"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", str(checkpoints["global"]), "--text", TEXT, "--out", str(out)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "MPLBACKEND": "TkAgg"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert png_size(out)[0] > 0


def test_gates_on_a_fixed_scale_and_one_scale_for_every_attention_map(checkpoints):
    """Gates near their start (0.018) look pale on the 0 to 1 scale, not vivid; `zoom_gates` spreads their own
    range; the attention maps share one scale (0 to the largest weight drawn, one colour bar); the title reads."""
    from casan_hf.inspection import inspect_attention, load_for_inspection

    model, tokenizer = load_for_inspection(str(checkpoints["deep"]))
    inspection = inspect_attention(model, tokenizer, TEXT)
    heads = list(range(TINY["num_attention_heads"]))

    def scales(figure):
        images = [(ax.get_title(), image.get_clim()) for ax in figure.axes for image in ax.get_images()]
        gates = {clim for title, clim in images if title.endswith(("λ_Q", "λ_K"))}
        maps = {clim for title, clim in images if title.startswith("layer ")}
        return gates, maps, len(figure.axes) - len(images)  # the axes without an image are colour bars

    gates, maps, colour_bars = scales(plot_attention.plot(inspection, [2], heads, "a title"))
    largest = float(inspection.attentions[2].max())
    assert gates == {(0.0, 1.0)} and maps == {(0.0, largest)} and colour_bars == 2
    zoomed, _, _ = scales(plot_attention.plot(inspection, [2], heads, "a title", zoom_gates=True))
    assert zoomed == {inspection.gate_range()}
    figure = plot_attention.plot(inspection, [2], heads, "a title")
    assert figure.get_suptitle() == "a title" and figure._suptitle.get_fontsize() == plot_attention.TITLE_POINTS
