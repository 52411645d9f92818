"""The local bias (`local_bias`, Yang et al. EMNLP 2018) against a reference written from the paper's equations, token
by token: each layer's attention weights, for every window kind, padded and unpadded; the implementations that take
it (eager, sdpa, flex_attention) agree, flash attention is refused by name; a converted checkpoint keeps its outputs
exactly; the options' checks."""

import math
import re

import pytest
import torch
from tiny_models import OUTPUT_TOLERANCE, TINY, assert_same_weights, padded_batch, tiny_config

from casan_hf import FAMILIES, CasanModel, casan_class, get_family
from casan_hf.configuration_casan_marian import CasanMarianConfig
from casan_hf.local_bias import LOCAL_BIAS_IMPLEMENTATIONS
from casan_hf.modeling_casan_marian import CasanMarianEncoder


WINDOWS = ("fixed", "layer", "query")
# Right padding, and a sentence of one real token (its centre and window are 0 and 1 token wide).
LENGTHS = [7, 4, 1]
# Outputs of two attention implementations, or of a padded and an unpadded batch, differ by float rounding alone, in
# other arithmetic (another kernel, other sums); a reloaded folder is held to the suite's OUTPUT_TOLERANCE.
TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def reference_bias(bias_module, query, key, length, heads, window_kind, fixed_window):
    """The bias G `(heads, I, I)` of one sentence of `length` real tokens, from its query and key `(I, d)`, by the
    paper's equations, one query and key at a time: P_i = (I - 1) sigmoid(v_p^T tanh(W_p Q_i)), D_i =
    I sigmoid(v_d^T tanh(W_p Q_i)) (query), I sigmoid(v_d^T tanh(W_d mean_j K_j)) (layer) or the constant (fixed),
    G_ij = -(j - P_i)^2 / (2 sigma_i^2) with sigma_i = D_i / 2, times the head's scale where there is one."""
    w_p, b_p = bias_module.position_hidden.weight.double(), bias_module.position_hidden.bias.double()
    v, c = bias_module.position_out.weight.double(), bias_module.position_out.bias.double()
    query, key = query.double(), key.double()
    bias = torch.zeros(heads, length, length, dtype=torch.float64)
    for h in range(heads):
        if window_kind == "layer":
            mean_key = key.mean(dim=0)
            hidden = torch.tanh(bias_module.window_hidden.weight.double() @ mean_key + bias_module.window_hidden.bias)
            z = bias_module.window_out.weight.double()[h] @ hidden + bias_module.window_out.bias.double()[h]
            layer_window = length * torch.sigmoid(z)
        for i in range(length):
            hidden = torch.tanh(w_p @ query[i] + b_p)
            centre = (length - 1) * torch.sigmoid(v[h] @ hidden + c[h])
            if window_kind == "query":
                window = length * torch.sigmoid(v[heads + h] @ hidden + c[heads + h])
            elif window_kind == "layer":
                window = layer_window
            else:
                window = torch.tensor(fixed_window, dtype=torch.float64)
            sigma = window / 2
            for j in range(length):
                bias[h, i, j] = -((j - centre) ** 2) / (2 * sigma**2)
        if bias_module.scale is not None:
            bias[h] *= bias_module.scale.double()[h]
    return bias


def reference_weights(bias_module, query, key, length, scaling, heads, window_kind, fixed_window):
    """The attention weights `(heads, I, I)` of one sentence: softmax over the keys of the scaled dot products of each
    head's slices of the query and key, plus `reference_bias`."""
    d_head = query.shape[1] // heads
    bias = reference_bias(bias_module, query, key, length, heads, window_kind, fixed_window)
    query, key = query.double(), key.double()
    weights = torch.zeros(heads, length, length, dtype=torch.float64)
    for h in range(heads):
        for i in range(length):
            logits = [
                query[i, h * d_head : (h + 1) * d_head] @ key[j, h * d_head : (h + 1) * d_head] * scaling
                + bias[h, i, j]
                for j in range(length)
            ]
            weights[h, i] = torch.softmax(torch.stack(logits), dim=0)
    return weights


def captured_projections(model, names):
    """Forward hooks that keep the output of each module named in `names` (the query and key projections)."""
    kept = {}
    modules = dict(model.named_modules())
    for name in names:
        modules[name].register_forward_hook(lambda module, inputs, output, name=name: kept.__setitem__(name, output))
    return kept


def bert_model(window, **options):
    torch.manual_seed(0)
    config = tiny_config(context_type="none", local_bias=window, attn_implementation="eager", **options)
    return CasanModel(config).eval(), "encoder.layer.{}.attention.self", ("query", "key")


def marian_encoder(window, **options):
    torch.manual_seed(0)
    config = CasanMarianConfig(
        vocab_size=99, d_model=32, encoder_layers=4, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0, pad_token_id=0, context_type="none", local_bias=window, attn_implementation="eager",
        **options,
    )  # fmt: skip
    return CasanMarianEncoder(config).eval(), "layers.{}.self_attn", ("q_proj", "k_proj")


MODELS = {"bert": bert_model, "marian": marian_encoder}


def narrow_window(window):
    """A fixed window of 3 tokens where the local bias `window` reads one (`local_window`), else no option."""
    return {"local_window": 3.0} if window == "fixed" else {}


def randomise_scale(model):
    """Moves every local scale off its start of 0, so that the bias shows."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("local_bias.scale"):
                parameter.uniform_(0.5, 1.5)


@pytest.mark.parametrize("start", ["full", "zero"])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("family", MODELS)
def test_attention_weights_are_the_papers_equations_token_by_token(family, window, start):
    model, attention_name, projections = MODELS[family](window, local_bias_start=start, **narrow_window(window))
    randomise_scale(model)
    config = model.config
    layers = config.num_hidden_layers
    names = [f"{attention_name.format(layer)}.{projection}" for layer in range(layers) for projection in projections]
    kept = captured_projections(model, names)
    input_ids, attention_mask = padded_batch(LENGTHS)
    attentions = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    scaling = (config.hidden_size // config.num_attention_heads) ** -0.5
    for layer in range(layers):
        attention = dict(model.named_modules())[attention_name.format(layer)]
        assert (attention.local_bias is not None) == (layer < layers // 2)  # the lower half by default
        if attention.local_bias is None:
            continue
        query, key = (kept[f"{attention_name.format(layer)}.{projection}"] for projection in projections)
        for row, length in enumerate(LENGTHS):
            expected = reference_weights(
                attention.local_bias, query[row, :length], key[row, :length], length, scaling,
                config.num_attention_heads, window, config.local_window,
            )  # fmt: skip
            got = attentions[layer][row, :, :length, :length].double()
            torch.testing.assert_close(got, expected, **TOLERANCE)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("family", MODELS)
def test_a_padded_sentence_gets_the_unpadded_sentences_outputs(family, window):
    model, _, _ = MODELS[family](window)
    input_ids, attention_mask = padded_batch(LENGTHS)
    padded = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    for row, length in enumerate(LENGTHS):
        alone = model(input_ids=input_ids[row : row + 1, :length]).last_hidden_state
        torch.testing.assert_close(padded[row, :length], alone[0], **TOLERANCE)


@pytest.mark.parametrize("family", MODELS)
def test_a_float64_model_s_layer_windows_are_float64_s(family):
    """The "layer" window of a padded sentence averages its keys with weights in the model's dtype: in float64 its
    windows are the unpadded sentence's (a plain mean of the keys) to float64's rounding, where float32 weights
    moved them by 3e-11 here."""
    model, _, _ = MODELS[family]("layer")
    model.double()
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        padded = model(input_ids=input_ids, attention_mask=attention_mask, output_local_windows=True)
        for row, length in enumerate(LENGTHS):
            alone = model(input_ids=input_ids[row : row + 1, :length], output_local_windows=True)
            for padded_windows, windows in zip(padded.local_windows, alone.local_windows, strict=True):
                assert padded_windows.dtype == torch.float64
                torch.testing.assert_close(padded_windows[row, 1, :, :length], windows[0, 1], atol=1e-13, rtol=1e-13)


def test_positions_count_the_real_tokens_on_either_side_of_the_padding():
    """Left padding too: the bias's positions and length are those of the unpadded sentence (the model's own position
    embeddings are another matter: BERT's and Marian's count the padding)."""
    from casan_hf.context import TokenPositions

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    positions = TokenPositions.of(mask, 3, 5, "cpu", torch.float32)
    assert positions.positions[0, 2:].tolist() == positions.positions[1, :3].tolist() == [0.0, 1.0, 2.0]
    assert positions.lengths.flatten().tolist() == [3.0, 3.0, 5.0]
    unpadded = TokenPositions.of(None, 1, 5, "cpu", torch.float32)
    assert torch.equal(unpadded.positions[0], positions.positions[2]) and unpadded.lengths.item() == 5.0


@pytest.mark.parametrize("implementation", [name for name in LOCAL_BIAS_IMPLEMENTATIONS if name != "eager"])
@pytest.mark.parametrize("family", MODELS)
def test_every_implementation_that_takes_the_bias_gives_eagers_outputs(family, implementation):
    model, _, _ = MODELS[family]("query", local_bias_start="zero")
    randomise_scale(model)
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():  # flex_attention has no backward on the CPU
        eager = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        model.set_attn_implementation(implementation)
        other = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    for row, length in enumerate(LENGTHS):
        torch.testing.assert_close(other[row, :length], eager[row, :length], **TOLERANCE)


@pytest.mark.parametrize("family", MODELS)
def test_flash_attention_is_refused_by_name(family):
    model, _, _ = MODELS[family]("query")
    model.config._attn_implementation = "flash_attention_2"
    input_ids, attention_mask = padded_batch(LENGTHS)
    with pytest.raises(ValueError, match="attn_implementation='flash_attention_2' does not take; use one of 'eager'"):
        model(input_ids=input_ids, attention_mask=attention_mask)


def test_flex_attention_builds_no_bias_the_size_of_the_logits(monkeypatch):
    """flex_attention takes the bias in its score_mod, from per-query centres and weights: the (n x n) bias is never
    built (building it fails here), and the outputs are eager's."""
    from casan_hf.local_bias import LocalWindows

    model, _, _ = bert_model("query")
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        eager = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        model.set_attn_implementation("flex_attention")

        def refuse(windows, positions):
            raise AssertionError("the (n x n) bias was built")

        monkeypatch.setattr(LocalWindows, "bias", refuse)
        flex = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    for row, length in enumerate(LENGTHS):
        torch.testing.assert_close(flex[row, :length], eager[row, :length], **TOLERANCE)


@pytest.mark.parametrize("window", WINDOWS)
def test_gradients_reach_every_parameter_of_the_bias(window):
    model, _, _ = bert_model(window, local_bias_start="zero")
    randomise_scale(model)
    input_ids, attention_mask = padded_batch(LENGTHS)
    model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.square().sum().backward()
    for name, parameter in model.named_parameters():
        if ".local_bias." in name:
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_the_local_scale_and_centre_gradients_match_finite_differences():
    """torch.autograd.gradcheck on the bias as the attention adds it, in float64."""
    from casan_hf.context import TokenPositions
    from casan_hf.local_bias import CasanLocalBias

    config = tiny_config(context_type="none", local_bias="query", local_bias_start="zero")
    torch.manual_seed(0)
    module = CasanLocalBias(config).double()
    module.initialize(0.5)
    with torch.no_grad():
        module.scale.uniform_(0.5, 1.5)
    positions = TokenPositions.of(torch.tensor([[1, 1, 1, 1, 0]]), 1, 5, "cpu", torch.float64)
    query = torch.randn(1, 5, config.hidden_size, dtype=torch.float64, requires_grad=True)

    def bias(query, scale):
        module.scale.data = scale
        (predicted,) = module(query, query, positions)
        return module.windows_of(predicted).bias(positions)

    scale = module.scale.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda q: bias(q, scale.detach()), (query,))


def test_a_converted_checkpoint_keeps_its_outputs_exactly(tmp_path):
    """A BERT checkpoint converted with the local bias starts with its scale at 0 (`local_bias_start="zero"`, as
    `from_pretrained` of a source checkpoint sets it): the same outputs, bit for bit, where the same kernels run. That
    is eager always, and sdpa in inference: where the bias needs a gradient (its scale), the CPU's fused sdpa kernel,
    which takes no gradient of a mask, gives way to sdpa's math kernel, whose rounding differs (`TOLERANCE`)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path / "bert")
    input_ids, attention_mask = padded_batch(LENGTHS)
    for implementation in ("eager", "sdpa"):
        source = BertModel.from_pretrained(tmp_path / "bert", attn_implementation=implementation).eval()
        converted = CasanModel.from_pretrained(
            tmp_path / "bert", context_type="none", local_bias="query", attn_implementation=implementation
        ).eval()
        assert converted.config.local_bias_start == "zero"
        for name, parameter in source.named_parameters():
            assert torch.equal(converted.get_parameter(name), parameter), name
        with torch.no_grad():
            expected = source(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            assert torch.equal(
                converted(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state, expected
            )
        tracked = converted(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if implementation == "eager":
            assert torch.equal(tracked, expected)
        else:
            torch.testing.assert_close(tracked, expected, **TOLERANCE)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(local_bias="gaussian"), "`local_bias` must be one of None, 'fixed', 'layer', 'query'; got 'gaussian'"),
        (dict(local_bias="query", local_layers=[]), "`local_layers` must be None (the lower half) or a non-empty"),
        (dict(local_bias="query", local_layers=[3]), "`local_layers` [3] out of range: the model has 3 layers"),
        (dict(local_layers=[0]), "`local_layers` [0] chooses the layers of the local bias, which is off"),
        (dict(local_bias="fixed", local_window=0.0), "`local_window` must be a number in [1, 4096]"),
        (dict(local_bias="fixed", local_window=math.nan), "`local_window` must be a number in [1, 4096]"),
        (dict(local_bias="query", local_bias_start="half"), "`local_bias_start` must be one of 'full', 'zero'"),
        (dict(local_bias="query", num_hidden_layers=1), "local_bias='query' reaches no layer: `local_layers` None"),
        (
            dict(local_bias="query", local_layers=[0], num_hidden_layers=1, local_window=5.0),
            "`local_window` 5.0 has no effect with local_bias='query' (only local_bias='fixed' reads a window)",
        ),
        (dict(local_bias="layer", local_window=5.0), "`local_window` 5.0 has no effect with local_bias='layer'"),
        (dict(local_window=5.0), "`local_window` 5.0 has no effect with local_bias=None"),
        (dict(local_bias_start="zero"), "`local_bias_start` 'zero' has no effect with local_bias=None (the bias"),
    ],
)
def test_bad_local_options_are_refused_naming_the_value_and_what_is_allowed(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CasanModel(tiny_config(context_type="none", **options))


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_every_family_adds_the_papers_bias_to_its_own_logits(family, window):
    """In every family (DeBERTa's disentangled scores, ModernBERT's rotary and sliding-window layers included), the
    attention weights with the bias are the weights without it times exp(G), renormalised, with G from the paper's
    equations on the layer's (mixed) query and key: layer 0, whose input is the same with and without the bias."""
    torch.manual_seed(0)
    config = tiny_config(
        family, context_type="global", local_layers=[0], attn_implementation="eager", local_bias=window,
        **narrow_window(window),
    )  # fmt: skip
    model = casan_class(get_family(family), "base")(config).eval()
    attention = next(module for module in model.modules() if getattr(module, "local_bias", None) is not None)
    inputs = {}
    attention.local_bias.register_forward_hook(lambda module, args, output: inputs.update(query=args[0], key=args[1]))
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        with_bias = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True).attentions[0]
        bias_module, attention.local_bias = attention.local_bias, None
        without = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True).attentions[0]
        attention.local_bias = bias_module
    heads = config.num_attention_heads
    for row, length in enumerate(LENGTHS):
        query, key = inputs["query"][row, :length], inputs["key"][row, :length]
        bias = reference_bias(bias_module, query, key, length, heads, window, config.local_window)
        expected = without[row, :, :length, :length].double() * bias.exp()
        expected = expected / expected.sum(dim=-1, keepdim=True)
        torch.testing.assert_close(with_bias[row, :, :length, :length].double(), expected, **TOLERANCE)


FRESH_LOAD = """
    import sys, torch
    from pathlib import Path
    from transformers import AutoModel
    for folder in sorted(Path(sys.argv[1]).iterdir()):
        model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
        batch = torch.load(folder / "batch.pt")
        with torch.no_grad():
            outputs = model(**batch, output_local_windows=True)
        torch.save((outputs.last_hidden_state, outputs.local_windows), folder / "fresh.pt")
        print(folder.name, type(model).__module__.split(".")[0])
"""


@pytest.fixture(scope="module")
def saved_folders(tmp_path_factory):
    """Every family's base model with the local bias (and deep_global), saved, with its batch, outputs and weights."""
    root = tmp_path_factory.mktemp("local")
    outputs, states = {}, {}
    for family in FAMILIES:
        torch.manual_seed(0)
        config = tiny_config(family.name, context_type="deep_global", local_bias="query", local_bias_start="zero")
        model = casan_class(family, "base")(config).eval()
        randomise_scale(model)
        input_ids, attention_mask = padded_batch(LENGTHS)
        with torch.no_grad():
            outputs[family.name] = model(input_ids=input_ids, attention_mask=attention_mask, output_local_windows=True)
        model.save_pretrained(root / family.name)
        states[family.name] = model.state_dict()
        torch.save({"input_ids": input_ids, "attention_mask": attention_mask}, root / family.name / "batch.pt")
    return root, outputs, states


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_the_windows_are_returned_per_layer_and_a_saved_folder_reloads(family, saved_folders):
    """`output_local_windows` returns each biased layer's centres and windows; the saved folder reloads with the same
    weights and outputs (within `OUTPUT_TOLERANCE`: a reloaded model reads memory-mapped weights)."""
    root, outputs, states = saved_folders
    outputs = outputs[family]
    config = casan_class(get_family(family), "base").config_class.from_pretrained(root / family)
    assert len(outputs.local_windows) == config.num_hidden_layers // 2
    for windows in outputs.local_windows:
        assert windows.shape == (len(LENGTHS), 2, config.num_attention_heads, max(LENGTHS))
        for row, length in enumerate(LENGTHS):
            centres, widths = windows[row, :, :, :length]
            assert (centres >= 0).all() and (centres <= length - 1).all()
            assert (widths > 0).all() and (widths <= length).all()
    model_class = casan_class(get_family(family), "base")
    reloaded = model_class.from_pretrained(root / family).eval()
    assert_same_weights(reloaded, states[family])
    batch = torch.load(root / family / "batch.pt")
    with torch.no_grad():
        again = reloaded(**batch).last_hidden_state
    torch.testing.assert_close(again, outputs.last_hidden_state, **OUTPUT_TOLERANCE)


def test_every_family_s_folder_loads_without_casan_hf(saved_folders, tmp_path):
    """Each saved folder loads by `trust_remote_code` in one process where casan_hf cannot be imported, and gives the
    same outputs and windows (within `OUTPUT_TOLERANCE`)."""
    from fresh_process import run_without_casan_hf

    root, outputs, _ = saved_folders
    printed = run_without_casan_hf(FRESH_LOAD, tmp_path, args=(root,)).split()
    assert printed == [word for family in sorted(outputs) for word in (family, "transformers_modules")]
    for family, expected in outputs.items():
        hidden, windows = torch.load(root / family / "fresh.pt")
        torch.testing.assert_close(hidden, expected.last_hidden_state, **OUTPUT_TOLERANCE)
        torch.testing.assert_close(windows, expected.local_windows, **OUTPUT_TOLERANCE)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("family", ["bert", "marian"])
def test_training_compiles_whole_with_the_bias(family, window):
    """forward and backward in one graph (`fullgraph=True`: a break raises), once for two batches of one padded
    shape."""
    from torch._dynamo.testing import CompileCounterWithBackend

    model, _, _ = MODELS[family](window, local_bias_start="zero")
    model.train()
    batches = [padded_batch(lengths, seed=seed) for seed, lengths in enumerate(([6, 3], [4, 6]))]
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    for input_ids, attention_mask in batches:
        compiled(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.square().mean().backward()
    assert counter.frame_count == 1
    torch._dynamo.reset()


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("start", ["full", "zero"])
def test_the_local_parameter_count_is_the_model_s(window, start):
    """`flops.local_param_count` (docs/MODELS.md's table) counts what the model holds beyond the one without it."""
    from casan_hf.benchmark.flops import local_param_count

    config = tiny_config(context_type="global", local_bias=window, local_bias_start=start, num_hidden_layers=4)
    without = tiny_config(context_type="global", num_hidden_layers=4)
    count = sum(parameter.numel() for parameter in CasanModel(config).parameters())
    assert count - sum(parameter.numel() for parameter in CasanModel(without).parameters()) == local_param_count(
        config
    )
