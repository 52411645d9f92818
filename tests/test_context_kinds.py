"""A context kind is one row of `CONTEXT_KINDS`: a made-up kind, added as one row with the layers its context
reads, is taken by the config's checks and widths, the model (with padding invariance), the benchmark's counts,
and both study sweeps, with nothing else changed."""

import pytest
import torch
from conftest import glue_sweep_runs, load_script
from tiny_models import padded_batch, tiny_config

from casan_hf import CasanConfig, CasanModel
from casan_hf.benchmark.flops import context_forward_flops, context_param_count, memory_bound_bytes
from casan_hf.benchmark.runner import default_variants
from casan_hf.context import CONTEXT_KINDS, ContextKind, masked_mean


# The masked mean of the previous layer's input (a kind the paper does not have): layer 0 has no context.
PREVIOUS = ContextKind(
    "previous",
    per_token=False,
    reads=lambda layer: range(layer - 1, layer) if layer else range(0),
    description="the masked mean of the previous layer's input",
)


@pytest.fixture
def previous_kind(monkeypatch):
    monkeypatch.setitem(CONTEXT_KINDS, PREVIOUS.name, PREVIOUS)


def test_the_config_checks_and_sizes_a_new_kind(previous_kind):
    config = tiny_config(context_type="previous")
    assert [config.layer_has_context(index) for index in range(3)] == [False, True, True]
    assert [config.context_size(index) for index in range(3)] == [0, 32, 32]
    with pytest.raises(ValueError, match="'deep_global', 'none', 'previous'; got 'local'"):
        CasanConfig(context_type="local")


def test_the_model_builds_the_new_kinds_context_and_ignores_padding(previous_kind):
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type="previous", gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    seen = []
    model.encoder.layer[2].attention.self.context_mixer.register_forward_hook(
        lambda module, inputs, output: seen.append(inputs[2])
    )
    with torch.no_grad():
        outputs = model(input_ids, attention_mask=attention_mask, output_hidden_states=True, output_context_gates=True)
        alone = model(input_ids[1:, :3], attention_mask=attention_mask[1:, :3])
    (context,) = seen[0]
    torch.testing.assert_close(context, masked_mean(outputs.hidden_states[1], attention_mask))  # layer 1's input
    assert torch.all(outputs.context_gates[0] == 0) and torch.all(outputs.context_gates[2] > 0)
    torch.testing.assert_close(outputs.last_hidden_state[1, :3], alone.last_hidden_state[0], atol=1e-5, rtol=1e-5)


def test_the_benchmark_counts_the_new_kind(previous_kind):
    config = tiny_config(context_type="previous")
    d = 32
    per_layer = 2 * d * d + 2 * (2 * d + 1)  # U_Q and U_K of d x d, and v^H, v^C, b of both targets
    assert context_param_count(config) == 2 * per_layer
    n = 10  # sentence-level: C U once per sentence, the gate on every token
    assert context_forward_flops(config, n) == 2 * (2 * 2 * d * d + 2 * (2 * n * d + 2 * d))
    assert memory_bound_bytes(config, "inference", 4) == 4 * context_param_count(config)
    assert "casan previous" in [variant.label for variant in default_variants(rank=0)]


def test_both_sweeps_take_the_new_kind_as_an_arm(previous_kind):
    (command,) = glue_sweep_runs("none", "previous:gate_bias_init=0")[1].commands
    assert command[command.index("--context_type") + 1] == "previous"
    translation = load_script("translation_sweep")
    args = translation.parse_args(
        ["--data_dir", "d", "--output_dir", "o", "--arms", "none", "previous", "--seeds", "1"]
    )
    train, _ = translation.study_runs(args)[1].commands
    assert train[train.index("--context_type") + 1] == "previous"
