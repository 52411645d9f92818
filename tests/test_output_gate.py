"""The output gate (`output_gate`, Qiu et al. 2025): each head's attention output times sigmoid(X W + C W_C + b),
headwise or elementwise, from the token alone or with the layer's context, with or without the query/key mixing.
Its formula in float64 (forward and gradients), the converted start that keeps a checkpoint's outputs exactly, the
from-scratch start, padding invariance, save and load (and in a fresh process without casan_hf), eager = sdpa, a
whole compiled graph, the translation encoder, and the checks of its options."""

import itertools

import pytest
import torch
from fresh_process import run_without_casan_hf
from test_translation_model import TINY_MARIAN
from tiny_models import assert_outputs_close, assert_same_weights, padded_batch, tiny_config, tiny_source_config
from transformers import BertModel

from casan_hf import CasanConfig, CasanMarianConfig, CasanMarianMTModel, CasanModel, casan_twin
from casan_hf.context import OUTPUT_GATE_MODULE
from casan_hf.training import gate_means


OPTIONS = [
    dict(context_type=context_type, output_gate=granularity, output_gate_context=with_context, **targets)
    for context_type, granularity, with_context, targets in itertools.product(
        ("global", "deep", "deep_global"), ("headwise", "elementwise"), (False, True), ({}, {"context_targets": []})
    )
    if with_context or targets == {}
] + [dict(context_type="none", output_gate=granularity) for granularity in ("headwise", "elementwise")]


def options_id(options):
    return "-".join(f"{key}={value}" for key, value in options.items() if key != "output_gate_context" or value)


def gated_model(start="half", dtype=torch.float64, **options):
    """A tiny model whose gate parameters are large enough for the gate to vary (zero at the start "one")."""
    torch.manual_seed(0)
    model = CasanModel(tiny_config(gate_bias_init=0.0, output_gate_start=start, **options)).to(dtype)
    for name, parameter in model.named_parameters():
        if "output_gate" in name or "context_mixer" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    return model


def reference_gate(gate, hidden_states, context, start):
    """sigmoid(X W^T + C W_C^T + b), C the explicit concatenation of the layer's context (broadcast for sentence
    context); twice that for the start "one"."""
    logits = hidden_states @ gate.weight.T + gate.bias
    if gate.context_weight is not None and context:
        concatenated = torch.cat(context, dim=-1)
        if concatenated.dim() == 2:
            concatenated = concatenated[:, None, :]
        logits = logits + concatenated @ gate.context_weight.T
    return torch.sigmoid(logits) * (2 if start == "one" else 1)


@pytest.mark.parametrize("start", ["one", "half"])
@pytest.mark.parametrize("options", OPTIONS, ids=options_id)
def test_the_gated_attention_equals_the_formula_with_its_gradients(options, start):
    model = gated_model(start, **options)
    layer = model.encoder.layer[2].attention.self
    config = model.config
    hidden = torch.randn(2, 5, config.hidden_size, dtype=torch.float64, requires_grad=True)
    if config.context_type == "deep":
        context = tuple(torch.randn(2, 5, config.hidden_size, dtype=torch.float64) for _ in range(2))
    elif config.context_type == "deep_global":
        context = (torch.randn(2, 3 * config.hidden_size, dtype=torch.float64),)
    elif config.context_type == "global":
        context = (torch.randn(2, config.hidden_size, dtype=torch.float64),)
    else:
        context = ()
    gate_module = layer.output_gate
    parameters = [hidden, *gate_module.parameters()]

    fast = layer(hidden, None, context)[0]
    layer.output_gate = None
    plain = layer(hidden, None, context)[0]
    layer.output_gate = gate_module
    gate = reference_gate(gate_module, hidden, context, start)
    heads = config.num_attention_heads
    reference = (plain.unflatten(-1, (heads, -1)) * gate.view(2, 5, heads, -1)).flatten(-2)
    torch.testing.assert_close(fast, reference, rtol=0, atol=1e-12)
    weights = torch.randn_like(fast)
    for fast_grad, reference_grad in zip(
        torch.autograd.grad((fast * weights).sum(), parameters),
        torch.autograd.grad((reference * weights).sum(), parameters),
        strict=True,
    ):
        torch.testing.assert_close(fast_grad, reference_grad, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "options",
    [
        dict(context_type="none", output_gate="headwise"),
        dict(context_type="global", output_gate="elementwise", output_gate_context=True, context_targets=[]),
        dict(context_type="deep", output_gate="headwise", output_gate_context=True, context_targets=[]),
    ],
    ids=options_id,
)
def test_a_converted_checkpoint_keeps_its_outputs_exactly(options, tmp_path):
    """From a BERT folder the gate starts at exactly 1 (2 sigmoid(0), zero weights): BERT's outputs, bit for bit
    (BERT loads the folder too: the same weights read in place from the same file, the same arithmetic), and the
    gates returned are 1."""
    torch.manual_seed(0)
    BertModel(tiny_source_config("bert")).save_pretrained(tmp_path / "bert")
    bert = BertModel.from_pretrained(tmp_path / "bert").eval()
    converted = CasanModel.from_pretrained(tmp_path / "bert", **options).eval()
    assert converted.config.output_gate_start == "one"
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = bert(input_ids, attention_mask=attention_mask).last_hidden_state
        outputs = converted(input_ids, attention_mask=attention_mask, output_head_gates=True)
    assert torch.equal(outputs.last_hidden_state, expected)
    assert all(torch.equal(gate, torch.ones_like(gate)) for gate in outputs.head_gates)


def test_a_model_from_scratch_starts_with_the_papers_gate_near_one_half():
    model = CasanModel(tiny_config(context_type="none", output_gate="elementwise")).eval()
    assert model.config.output_gate_start == "half"
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        gates = torch.stack(model(input_ids, attention_mask=attention_mask, output_head_gates=True).head_gates)
    assert 0.4 < float(gates.mean()) < 0.6 and float(gates.std()) > 0


@pytest.mark.parametrize(
    "options", [options for options in OPTIONS if options.get("output_gate_context")], ids=options_id
)
def test_padding_changes_no_real_token(options):
    model = gated_model(dtype=torch.float32, **options).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        padded = model(input_ids, attention_mask=attention_mask, output_head_gates=True)
        alone = model(input_ids[1:, :3], attention_mask=attention_mask[1:, :3], output_head_gates=True)
    torch.testing.assert_close(padded.last_hidden_state[1, :3], alone.last_hidden_state[0], atol=1e-5, rtol=1e-5)
    for gates, gates_alone in zip(padded.head_gates, alone.head_gates, strict=True):
        torch.testing.assert_close(gates[1, :3], gates_alone[0], atol=1e-5, rtol=1e-5)


def test_save_load_and_a_fresh_process_give_the_same_outputs(tmp_path):
    model = gated_model(
        dtype=torch.float32, context_type="deep_global", output_gate="headwise", output_gate_context=True
    )
    model.eval().save_pretrained(tmp_path / "gated")
    input_ids, attention_mask = padded_batch([6, 3])
    reloaded = CasanModel.from_pretrained(tmp_path / "gated").eval()
    assert_same_weights(reloaded, model)
    with torch.no_grad():
        expected = {"last_hidden_state": model(input_ids, attention_mask=attention_mask).last_hidden_state}
        assert_outputs_close(reloaded(input_ids, attention_mask=attention_mask), expected)
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask}, tmp_path / "inputs.pt")
    code = """
import torch, transformers
model = transformers.AutoModel.from_pretrained("gated", trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
with torch.no_grad():
    torch.save({"last_hidden_state": model(**torch.load("inputs.pt")).last_hidden_state}, "outputs.pt")
"""
    run_without_casan_hf(code, tmp_path)
    assert_outputs_close(torch.load(tmp_path / "outputs.pt"), expected)
    with pytest.raises(ValueError, match="trained with output_gate='headwise'"):
        CasanModel.from_pretrained(tmp_path / "gated", output_gate="elementwise")


def test_eager_and_sdpa_agree_and_the_graph_compiles_whole():
    model = gated_model(
        dtype=torch.float32, context_type="global", output_gate="elementwise", output_gate_context=True
    )
    input_ids, attention_mask = padded_batch([6, 3])
    model.eval()
    with torch.no_grad():
        outputs = {}
        for implementation in ("eager", "sdpa"):
            model.set_attn_implementation(implementation)
            outputs[implementation] = model(input_ids, attention_mask=attention_mask).last_hidden_state
        torch.testing.assert_close(outputs["eager"], outputs["sdpa"], atol=1e-5, rtol=1e-5)
        compiled = torch.compile(model, backend="eager", fullgraph=True)  # a graph break raises
        torch.testing.assert_close(
            compiled(input_ids, attention_mask=attention_mask).last_hidden_state, outputs["sdpa"]
        )
    torch._dynamo.reset()


def test_the_translation_encoder_takes_the_gate():
    torch.manual_seed(0)
    config = CasanMarianConfig(**TINY_MARIAN, context_type="global", output_gate="headwise", output_gate_context=True)
    model = CasanMarianMTModel(config).eval()
    input_ids, attention_mask = padded_batch([6, 3], vocab_size=60)
    with torch.no_grad():
        encoded = model.get_encoder()(input_ids, attention_mask=attention_mask, output_head_gates=True)
    assert len(encoded.head_gates) == config.encoder_layers
    assert encoded.head_gates[0].shape == (2, 6, config.encoder_attention_heads)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            dict(output_gate="channelwise"),
            "`output_gate` must be one of None, 'headwise', 'elementwise'; got 'channelwise'",
        ),
        (dict(output_gate_start="zero"), "`output_gate_start` must be one of 'one', 'half'; got 'zero'"),
        (dict(output_gate_context=True), "`output_gate_context` lets the context drive the output gate"),
        (
            dict(context_type="none", output_gate="headwise", output_gate_context=True),
            "context_type other than 'none'",
        ),
        (dict(context_type="global", context_targets=[]), r"context_targets=\[\] mixes the 'global' context"),
    ],
)
def test_bad_options_are_refused_naming_the_value(options, message):
    with pytest.raises(ValueError, match=message):
        CasanConfig(**options)


def test_the_gate_monitor_logs_each_layers_output_gate_and_its_closed_share():
    """`gate_means` logs the mean output gate of each layer and its share of values under 0.1, over the real
    tokens: a layer whose gate is closed (bias -10) reads share 1, one at exactly 1 (start "one") share 0."""
    model = CasanModel(tiny_config(context_type="none", output_gate="headwise", output_gate_start="one")).eval()
    with torch.no_grad():
        model.encoder.layer[0].attention.self.output_gate.bias.fill_(-10.0)
    input_ids, attention_mask = padded_batch([6, 3])
    logged = gate_means(model, [{"input_ids": input_ids, "attention_mask": attention_mask}])
    assert logged["head_gates/layer_0/sparse"] == 1.0 and logged["head_gates/layer_0/mean"] < 1e-3
    assert logged["head_gates/layer_1/sparse"] == 0.0 and logged["head_gates/layer_1/mean"] == 1.0


def test_a_twin_converted_in_memory_keeps_its_outputs_exactly():
    torch.manual_seed(0)
    bert = BertModel(tiny_source_config("bert")).eval()
    twin = casan_twin(bert, context_type="none", output_gate="elementwise")
    assert twin.config.output_gate_start == "one"
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = bert(input_ids, attention_mask=attention_mask).last_hidden_state
        assert torch.equal(twin(input_ids, attention_mask=attention_mask).last_hidden_state, expected)


def test_the_explorer_shows_each_layers_output_gate(tmp_path):
    """`inspect_attention` keeps the model's own output gates (the mean over the channels), and the gate view draws
    them beside the query and key gates, on their scale."""
    pytest.importorskip("matplotlib")
    from tiny_tokenizer import tiny_tokenizer

    from casan_hf.explorer.views import Exploration, gates_html
    from casan_hf.inspection import inspect_attention

    tokenizer = tiny_tokenizer(tmp_path)
    options = dict(context_type="global", output_gate="elementwise", output_gate_context=True)
    model = gated_model(dtype=torch.float32, **options)
    inspection = inspect_attention(model.eval(), tokenizer, "The film was gripping.")
    with torch.no_grad():
        expected = model(**tokenizer("The film was gripping.", return_tensors="pt"), output_head_gates=True)
    torch.testing.assert_close(inspection.output_gates, torch.cat(expected.head_gates).mean(-1))
    exploration = Exploration("tiny", "CasanModel", inspection, None, len(inspection.tokens), 64)
    html = gates_html(exploration)
    assert "g_O 2" in html and "output gate of layer 0" in html and "output gates g_O" in html


def test_gates_come_back_when_the_config_asks_for_them():
    """`config.output_context_gates = True` returns every layer's gates, as transformers' output capture reads it."""
    model = CasanModel(tiny_config(context_type="deep")).eval()
    model.config.output_context_gates = True
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        gates = model(input_ids, attention_mask=attention_mask).context_gates
    assert len(gates) == model.config.num_hidden_layers and torch.all(gates[0] == 0) and gates[1].abs().sum() > 0


def test_the_output_gate_is_new_for_freezing_and_the_context_learning_rate(tmp_path):
    """The output gate is a parameter CASAN adds: it trains while the pretrained weights are frozen, takes the
    context's learning rate, and a conversion without one keeps the config's start."""
    from casan_hf.training import freeze_pretrained, give_context_its_learning_rate

    model = CasanModel(tiny_config(context_type="none", output_gate="headwise"))
    groups = give_context_its_learning_rate([{"params": list(model.parameters())}], model, 1e-3)
    gate_parameters = {id(p) for name, p in model.named_parameters() if OUTPUT_GATE_MODULE in name}
    assert {id(p) for p in groups[-1]["params"]} == gate_parameters and groups[-1]["lr"] == 1e-3
    freeze_pretrained(model)
    assert {id(p) for p in model.parameters() if p.requires_grad} == gate_parameters
    BertModel(tiny_source_config("bert")).save_pretrained(tmp_path / "bert")
    assert CasanModel.from_pretrained(tmp_path / "bert", context_type="global").config.output_gate_start == "half"
