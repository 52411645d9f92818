"""The context itself: the paper's formulas, padding invariance, backends, gates and parameter counts."""

import pytest
import torch
import transformers
from tiny_models import CONTEXT_TYPES, attention_implementations, padded_batch, tiny_config
from torch.nn import functional as F

from casan_hf import FAMILIES, CasanConfig, CasanModel, casan_class
from casan_hf.context import ContextPlan
from casan_hf.context_mixer import CasanContextMixer


LENGTHS = [11, 4, 7, 1]


def run(model, input_ids, attention_mask, **kwargs):
    with torch.no_grad():
        return model(input_ids, attention_mask=attention_mask, output_context_gates=True, **kwargs)


@pytest.mark.parametrize("rank", [None, 4])
@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_mixer_follows_the_paper(context_type, rank):
    """Q^ = (1 - lam) Q + lam C U, lam = sigmoid(Q v^H + C U v^C + b), with C the explicit concatenation."""
    torch.manual_seed(0)
    config = tiny_config(context_type=context_type, context_rank=rank)
    layer, d = 2, config.hidden_size
    mixer = CasanContextMixer(config, config.context_size(layer))
    for parameter in mixer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    batch, n = 2, 5
    if context_type == "deep":
        context = tuple(torch.randn(batch, n, d) for _ in range(layer))
        concatenated = torch.cat(context, dim=-1)
    else:
        context = torch.randn(batch, config.context_size(layer))
        concatenated = context[:, None, :].expand(batch, n, -1)
    original = {"query": torch.randn(batch, n, d), "key": torch.randn(batch, n, d)}
    query, key, gates = mixer(original["query"], original["key"], context if context_type == "deep" else (context,))
    states = {"query": query, "key": key}
    for index, target in enumerate(("query", "key")):
        width = d if rank is None else rank
        u = mixer.context_weight[index * width : (index + 1) * width].T
        if rank is not None:
            u = u @ mixer.context_up[index]
        cu = concatenated @ u
        x = original[target]
        lam = torch.sigmoid(x @ mixer.gate_hidden[index] + cu @ mixer.gate_context[index] + mixer.gate_bias[index])
        torch.testing.assert_close(gates[:, index], lam)
        torch.testing.assert_close(states[target], (1 - lam[..., None]) * x + lam[..., None] * cu)


def test_fixed_gate_mixes_with_a_constant():
    config = tiny_config(context_type="global", gate="fixed", fixed_gate=0.3, context_targets=["key"])
    mixer = CasanContextMixer(config, config.hidden_size)
    torch.nn.init.normal_(mixer.context_weight)
    assert not hasattr(mixer, "gate_bias")
    context, query, key = torch.randn(2, 32), torch.randn(2, 5, 32), torch.randn(2, 5, 32)
    mixed_query, mixed_key, gates = mixer(query, key, (context,))
    assert torch.equal(mixed_query, query) and torch.all(gates[:, 0] == 0) and torch.all(gates[:, 1] == 0.3)
    torch.testing.assert_close(mixed_key, 0.7 * key + 0.3 * F.linear(context, mixer.context_weight)[:, None])


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize(
    ("attn_implementation", "family"),
    [
        (implementation, family.name)
        for implementation in ("eager", "sdpa")
        for family in FAMILIES
        if implementation in attention_implementations(casan_class(family, "base"))
    ],
)
@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_padding_does_not_change_real_tokens(context_type, attn_implementation, family, gate_per_head):
    torch.manual_seed(0)
    config = tiny_config(family, context_type=context_type, gate_bias_init=0.0, gate_per_head=gate_per_head)
    model = casan_class(family, "base")(config).eval()
    model.set_attn_implementation(attn_implementation)
    assert model.config._attn_implementation == attn_implementation
    input_ids, attention_mask = padded_batch(LENGTHS)
    batched = run(model, input_ids, attention_mask)
    # Different padding content must not matter either: the global means ignore padding.
    noisy_ids = input_ids.masked_fill(attention_mask == 0, 42)
    noisy = run(model, noisy_ids, attention_mask)
    for row, length in enumerate(LENGTHS):
        alone = run(model, input_ids[row : row + 1, :length], attention_mask[row : row + 1, :length])
        for outputs in (batched, noisy):
            diff = (outputs.last_hidden_state[row, :length] - alone.last_hidden_state[0]).abs().max()
            assert diff <= 1e-5, f"row {row}: {diff}"
            for layer_gates, alone_gates in zip(outputs.context_gates, alone.context_gates, strict=True):
                assert (layer_gates[row, ..., :length] - alone_gates[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_eager_and_sdpa_agree(context_type, gate_per_head):
    torch.manual_seed(0)
    config = tiny_config(context_type=context_type, gate_bias_init=0.0, gate_per_head=gate_per_head)
    model = CasanModel(config).eval()
    input_ids, attention_mask = padded_batch(LENGTHS)
    outputs = {}
    for backend in ("eager", "sdpa"):
        model.set_attn_implementation(backend)
        assert model.config._attn_implementation == backend
        outputs[backend] = run(model, input_ids, attention_mask)
    real = attention_mask.bool()
    diff = (outputs["eager"].last_hidden_state - outputs["sdpa"].last_hidden_state)[real].abs().max()
    assert diff <= 1e-5


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_flex_attention_where_the_family_s_transformers_class_takes_it_agrees_with_sdpa(family):
    """Every family whose transformers class takes `attn_implementation="flex_attention"` (all but DeBERTa-v2) takes
    it too, with the context, and gives sdpa's outputs (on the CPU as well); the others refuse it, as transformers'."""
    model_class = casan_class(family, "base")
    source_class = getattr(transformers, model_class.family.source_class_name(model_class.casan_head))
    assert model_class._supports_flex_attn == source_class._supports_flex_attn
    if not model_class._supports_flex_attn:
        with pytest.raises(ValueError, match="flex_attention"):
            model_class._from_config(tiny_config(family), attn_implementation="flex_attention")
        return
    torch.manual_seed(0)
    model = model_class(tiny_config(family, context_type="deep_global", gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch(LENGTHS)
    outputs = {}
    for backend in ("sdpa", "flex_attention"):
        model.set_attn_implementation(backend)
        assert model.config._attn_implementation == backend
        outputs[backend] = run(model, input_ids, attention_mask).last_hidden_state
    real = attention_mask.bool()
    assert (outputs["flex_attention"] - outputs["sdpa"])[real].abs().max() <= 1e-5


def test_attentions_are_returned_with_eager():
    model = CasanModel(tiny_config(context_type="deep_global", attn_implementation="eager")).eval()
    input_ids, attention_mask = padded_batch([5, 3])
    outputs = run(model, input_ids, attention_mask, output_attentions=True, output_hidden_states=True)
    assert len(outputs.attentions) == 3 and outputs.attentions[0].shape == (2, 4, 5, 5)
    assert len(outputs.hidden_states) == 4
    torch.testing.assert_close(outputs.attentions[1].sum(-1), torch.ones(2, 4, 5))


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_gate_shapes_and_ranges(context_type, gate_per_head):
    config = tiny_config(context_type=context_type, gate_bias_init=0.0, gate_per_head=gate_per_head)
    model = CasanModel(config).eval()
    input_ids, attention_mask = padded_batch([6, 2])
    gates = run(model, input_ids, attention_mask).context_gates
    assert len(gates) == 3
    for layer, layer_gates in enumerate(gates):
        assert layer_gates.shape == ((2, 2, 4, 6) if gate_per_head else (2, 2, 6))
        if context_type == "deep" and layer == 0:
            assert torch.all(layer_gates == 0), "deep context: the first layer attends as BERT"
        else:
            assert torch.all((layer_gates > 0) & (layer_gates < 1))


def test_gates_are_zero_where_there_is_no_context():
    config = tiny_config(context_type="global", context_targets=["key"], context_layers=[1])
    gates = run(CasanModel(config).eval(), *padded_batch([4])).context_gates
    assert torch.all(gates[0] == 0) and torch.all(gates[2] == 0)
    assert torch.all(gates[1][:, 0] == 0) and torch.all(gates[1][:, 1] > 0)


def test_fixed_gate_is_reported():
    config = tiny_config(context_type="deep_global", gate="fixed", fixed_gate=0.25)
    gates = run(CasanModel(config).eval(), *padded_batch([4])).context_gates
    assert all(torch.all(layer_gates == 0.25) for layer_gates in gates)


def test_gates_start_small():
    """gate_bias_init=-4 and small gate vectors: a converted model starts with lambda near sigmoid(-4)."""
    torch.manual_seed(0)
    gates = run(CasanModel(tiny_config(context_type="deep_global")).eval(), *padded_batch([8])).context_gates
    assert all(layer_gates.max() < 0.05 for layer_gates in gates)


def context_parameters(context_type, rank=None, **size):
    config = CasanConfig(context_type=context_type, context_rank=rank, **size)
    with torch.device("meta"):
        model = CasanModel(config, add_pooling_layer=False)
    return sum(p.numel() for n, p in model.named_parameters() if "context_mixer" in n)


def test_parameter_counts_match_the_method():
    """BERT-base: global about 14M, deep about 78M, deep_global about 92M extra (full-rank U_Q and U_K)."""
    d, layers = 768, 12
    gates = layers * (4 * d + 2)
    assert context_parameters("global") == layers * 2 * d * d + gates
    assert context_parameters("deep") == sum(2 * d * layer * d for layer in range(layers)) + (layers - 1) * (4 * d + 2)
    assert context_parameters("deep_global") == sum(2 * d * (layer + 1) * d for layer in range(layers)) + gates
    assert round(context_parameters("deep_global") / 1e6) == 92
    assert round(context_parameters("deep") / 1e6) == 78


def test_low_rank_keeps_bert_base_overhead_small():
    bert_base = 109_482_240  # BertModel(BertConfig()) parameters, pooler included
    for context_type in ("deep", "deep_global"):
        assert context_parameters(context_type, rank=64) < 0.15 * bert_base


@pytest.mark.parametrize("rank", [None, 3])
def test_low_rank_runs_for_every_context(rank):
    for context_type in CONTEXT_TYPES:
        model = CasanModel(tiny_config(context_type=context_type, context_rank=rank)).eval()
        outputs = run(model, *padded_batch([5, 3]))
        assert torch.isfinite(outputs.last_hidden_state).all()


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_a_mask_other_than_the_token_mask_is_refused(family):
    """A 4D mask, or a dict of precomputed masks by layer type (which transformers' ModernBERT takes), says nothing
    of which tokens are real, which the context's means need: every family refuses it with a clear error."""
    model = casan_class(family, "base")(tiny_config(family, context_type="global")).eval()
    input_ids, attention_mask = padded_batch([4, 2])
    with pytest.raises(ValueError, match="2D attention_mask.*got 4D"):
        model(input_ids, attention_mask=attention_mask[:, None, None, :])
    masks = {"full_attention": attention_mask[:, None, None, :], "sliding_attention": attention_mask[:, None, None, :]}
    with pytest.raises(ValueError, match="2D attention_mask.*got a dict"):
        model(input_ids, attention_mask=masks)


@pytest.mark.parametrize("context_type", ["deep", "deep_global"])
def test_layers_without_context_still_feed_later_layers(context_type):
    """`context_layers` chooses which layers mix; every layer input still reaches later layers' context."""
    config = tiny_config(context_type=context_type, context_layers=[2])
    model = CasanModel(config)
    assert [layer.attention.self.context_mixer is None for layer in model.encoder.layer] == [True, True, False]
    assert model.encoder.layer[2].attention.self.context_mixer.context_weight.shape[1] == config.context_size(2)
    sources = [torch.full((1, 4, 32), float(index)) for index in range(3)]
    if context_type == "deep_global":
        sources = [source[:, 0] for source in sources]
    plan = ContextPlan.from_config(config)
    context = plan.layer_context(2, sources)
    if context_type == "deep":
        assert len(context) == 2 and [float(part[0, 0, 0]) for part in context] == [0.0, 1.0]
    else:
        assert torch.equal(context[0], torch.cat(sources, dim=-1))
    assert plan.layer_context(1, sources) == ()


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
@pytest.mark.parametrize("gate", ["dynamic", "fixed"])
def test_a_context_starting_at_zero_gives_the_model_without_it_exactly(family, gate):
    """`context_start="zero"` scales every gate by a learned factor from 0: an encoder's outputs are those of the same
    weights without the context, to the bit, and its gates are reported as 0; the factor then trains."""
    torch.manual_seed(0)
    model_class = casan_class(family, "base")
    casan = model_class(tiny_config(family, context_type="deep_global", context_start="zero", gate=gate)).eval()
    plain = model_class(tiny_config(family, context_type="none")).eval()
    plain.load_state_dict(casan.state_dict(), strict=False)
    input_ids, attention_mask = padded_batch(LENGTHS)
    outputs = run(casan, input_ids, attention_mask)
    assert torch.equal(outputs.last_hidden_state, run(plain, input_ids, attention_mask).last_hidden_state)
    assert all(not gates.any() for gates in outputs.context_gates)
    casan.train()
    casan(input_ids, attention_mask=attention_mask).last_hidden_state.sum().backward()
    scales = [p.grad for name, p in casan.named_parameters() if name.endswith("context_scale")]
    assert scales and all(grad.abs().sum() > 0 for grad in scales)
