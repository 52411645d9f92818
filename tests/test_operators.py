"""The compute-operator count of casan_hf/benchmark/operators.py: what it counts, on modules whose operators
are known, and how many the context adds per layer (a ceiling, so that a change that adds kernels shows)."""

import runpy
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_config
from torch import nn
from transformers import BertConfig

from casan_hf.benchmark.operators import count_table, operator_counts, small_bert_config


class LinearSigmoid(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        # linear is composite (counts as its addmm); views are not counted; lerp counts once.
        hidden = torch.sigmoid(self.linear(x)).view(2, 3, 8).transpose(1, 2)
        return torch.lerp(hidden, torch.zeros_like(hidden), 0.5).sum()


def test_counts_kernels_not_views_nor_composites():
    model = LinearSigmoid()
    counts = operator_counts(model, {"x": torch.randn(6, 8)}, mode="training", loss=lambda out: out)
    assert dict(counts["forward"]) == {
        "aten::addmm": 1,
        "aten::sigmoid": 1,
        "aten::zero_": 1,  # zeros_like
        "aten::lerp": 1,
        "aten::sum": 1,
    }
    # the loss's seed gradient, lerp's grad * (1 - w), the copy that makes the transposed gradient
    # contiguous for view's backward, sigmoid's backward, the weight's product and the bias's sum.
    assert dict(counts["backward"]) == {
        "aten::fill_": 1,
        "aten::mul": 1,
        "aten::copy_": 1,
        "aten::sigmoid_backward": 1,
        "aten::mm": 1,
        "aten::sum": 1,
    }


def test_casan_none_runs_exactly_berts_operators():
    """context_type="none" runs BERT's operators and no others: a context-free layer's zero gates are made only
    when `output_context_gates` asks for them."""
    bert_options = BertConfig().to_dict()
    config = BertConfig(**{key: value for key, value in tiny_config().to_dict().items() if key in bert_options})
    inputs = {"input_ids": torch.randint(1, 99, (2, 5)), "attention_mask": torch.ones(2, 5, dtype=torch.long)}
    rows = count_table(config, [("none", {"context_type": "none"})], inputs)
    (_, *bert), (_, *none) = rows
    assert none[2:] == [0.0, 0.0] and none[1] == bert[1]


# What the context adds per layer, forward and backward, at most: on the mixer's PyTorch path, and on the fused
# mixer's (a GPU's), each Triton launch one kernel (global: 10.33 a layer, as the H200's profiler counted).
OPERATOR_CEILINGS = {
    "pytorch": {"global": (8.5, 22.0), "deep_global": (9.5, 27.5), "deep": (10.5, 31.5)},
    "fused": {"global": (3.5, 7.0), "deep_global": (4.5, 12.5), "deep": (6.5, 18.5)},
}


@pytest.mark.parametrize("path", OPERATOR_CEILINGS)
def test_context_operators_per_layer_stay_under_their_ceilings(path):
    """What the context adds per layer (BERT-base's depth, a small width), forward and backward of a training
    step: at most today's counts (docs/BENCHMARKS_HISTORY.md), so that a change that adds kernels to every layer
    shows here. The gate and mix are differentiated by autograd (5 operators a layer more in the backward than the
    hand-written backward it replaced, for less host time: docs/BENCHMARKS_HISTORY.md, "The host-bound proxy")."""
    if path == "fused":
        pytest.importorskip("triton", reason="triton is in the test extra: `make install` installs it")
    config = small_bert_config(hidden_size=32)
    inputs = {"input_ids": torch.randint(1, 99, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    ceilings = OPERATOR_CEILINGS[path]
    variants = [(name, {"context_type": name}) for name in ceilings]
    for label, _, _, forward, backward in count_table(config, variants, inputs, fused=path == "fused")[1:]:
        assert forward <= ceilings[label][0] and backward <= ceilings[label][1], (label, forward, backward)


def test_fused_mixer_without_operators_is_refused(monkeypatch, capsys):
    """`profile_context.py --fused-mixer` names what it counts; without `--operators` it would be ignored."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "profile_context.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--fused-mixer"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_info.value.code == 2
    assert "--fused-mixer counts the fused path's operators: give it with --operators" in capsys.readouterr().err
