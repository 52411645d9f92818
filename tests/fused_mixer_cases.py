"""The fused gate-and-mix kernels (casan_hf/fused_mixer.py) against the paper's formulas in float64 and against the
mixer's PyTorch path: outputs, gates and every gradient, for every form of the mixer, in fp32, fp16 and bf16.

They need the kernels to run: on the CPU through Triton's interpreter, in a process of its own, which
tests/test_fused_mixer.py starts (`TRITON_INTERPRET=1 pytest tests/fused_mixer_cases.py`); on a GPU directly
(`pytest tests/fused_mixer_cases.py --device cuda`, scripts/device/shard.sh speed)."""

import copy
import functools
import warnings

import pytest
import torch
from test_context_kernels import CONFIGS, config_id, reference_mixer
from test_translation_model import TINY_MARIAN
from tiny_models import padded_batch, tiny_config
from torch.utils._python_dispatch import TorchDispatchMode

from casan_hf import CasanMarianConfig, CasanMarianMTModel, casan_class, context_mixer, fused_mixer, get_family
from casan_hf.context_mixer import CasanContextMixer, set_fused_mixer
from casan_hf.fused_mixer import FUSED_MIX_OPERATOR, FusedMix, fused_mix_available, prepare


# The largest error allowed, relative to the float64 result's norm: one rounding to the dtype (bf16 keeps 8 bits,
# fp16 11), as the kernels compute in fp32 and round where they write; fp32's own rounding for fp32.
RELATIVE_ERROR = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
# Tokens per sentence: more than one forward block of rows (8), and a ragged last block in each pass.
TOKENS = 11
LAYER = 2


@pytest.fixture(autouse=True)
def kernels_run(device):
    """Every case here runs the kernels: a CPU outside Triton's interpreter would only test the PyTorch path."""
    probe = torch.zeros(1, device=device)
    if not fused_mix_available(probe):
        pytest.fail(f"the fused kernels do not run on {device}: on a CPU, set TRITON_INTERPRET=1 (and install triton)")


@pytest.fixture
def fused_calls(monkeypatch):
    """How many times the kernels ran, through `FusedMix` (`fused_mix_apply`) or, where no gradient is asked for,
    `mix_kernels`."""
    calls = []

    def counted(function):
        def run(*args):
            calls.append(1)
            return function(*args)

        return run

    monkeypatch.setattr(context_mixer, "fused_mix_apply", counted(context_mixer.fused_mix_apply))
    monkeypatch.setattr(context_mixer, "mix_kernels", counted(context_mixer.mix_kernels))
    return calls


def assert_close_in_norm(actual, expected, name, relative_error=RELATIVE_ERROR[torch.float32]):
    """`actual` within `relative_error` of `expected`, in norm: sums over many terms, summed in another order, differ
    in their last digits element by element."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, name
    error = (actual.double() - expected.double()).norm() / expected.double().norm().clamp(min=1e-12)
    assert error <= relative_error, f"{name}: relative error {error:.2e}"


def mixer_and_inputs(options, dtype, device, batch=2, tokens=TOKENS):
    """A mixer of layer 2 with large parameters in `dtype`, and its query, key and context, each a leaf."""
    torch.manual_seed(0)
    config = tiny_config(**options)
    mixer = CasanContextMixer(config, config.context_size(LAYER))
    for parameter in mixer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    mixer.to(device=device, dtype=dtype)
    d = config.hidden_size
    if config.context_type == "deep":
        context = [torch.randn(batch, tokens, d) for _ in range(LAYER)]
    elif config.context_type == "deep_global":
        context = [torch.randn(batch, d) for _ in range(LAYER + 1)]
    else:
        context = [torch.randn(batch, d)]
    query, key = torch.randn(batch, tokens, d), torch.randn(batch, tokens, d)
    inputs = [tensor.to(device=device, dtype=dtype).requires_grad_() for tensor in (query, key, *context)]
    return mixer, inputs


def mixer_context(mixer, context):
    """The context as a layer hands it to the mixer: deep's inputs as they are, sentence means concatenated."""
    return tuple(context) if mixer.per_token else (torch.cat(context, dim=-1),)


def weighted_loss(outputs):
    """A fixed random weighting of every output, summed in float64. The weights are bf16 numbers, so that the
    incoming gradients are exact in every dtype and the float64 formulas see the same ones."""
    generator = torch.Generator().manual_seed(1)
    weights = [torch.randn(output.shape, generator=generator).bfloat16().double() for output in outputs]
    pairs = zip(outputs, weights, strict=True)
    return sum((output.double() * weight.to(output.device)).sum() for output, weight in pairs)


def formula_mix(projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, *states):
    """The gate and the mix as the paper writes them, target by target, on each gate head's slice (float64)."""
    mixed, gates = [], []
    for index, plain in enumerate(states):
        plain_heads = plain.unflatten(-1, (heads, -1))  # (batch, n, heads, d / heads)
        context_heads = projected[index].unflatten(-1, (heads, -1))
        if gate_hidden is None:
            lam = torch.full(plain_heads.shape[:-1], fixed_gate, dtype=plain.dtype, device=plain.device)
        else:
            lam = torch.sigmoid(
                plain_heads @ gate_hidden[index] + context_heads @ gate_context[index] + gate_bias[index]
            )
        mixed.append(((1 - lam[..., None]) * plain_heads + lam[..., None] * context_heads).flatten(-2))
        gates.append(lam)
    return *mixed, torch.stack(gates)


KERNEL_FORMS = [
    dict(targets=targets, heads=heads, per_token=per_token, dynamic=dynamic)
    for targets in (2, 1)
    for heads in (1, 4)
    for per_token in (False, True)
    for dynamic in (True, False)
    if dynamic or heads == 1
]


def kernel_form_id(form):
    return "-".join(f"{name}={value}" for name, value in form.items())


def kernel_inputs(form, dtype, parameter_dtype, device, batch=2, tokens=TOKENS, d=32):
    """The function's inputs, each a leaf: C U, the gate's vectors and bias (None for the fixed gate), the states."""
    torch.manual_seed(0)
    targets, heads = form["targets"], form["heads"]
    projected = torch.randn(targets, batch, tokens if form["per_token"] else 1, d)
    parameters = [torch.randn(targets, d // heads), torch.randn(targets, d // heads), torch.randn(targets)]
    states = [torch.randn(batch, tokens, d) for _ in range(targets)]
    leaves = [projected.to(dtype), *(p.to(parameter_dtype) for p in parameters), *(s.to(dtype) for s in states)]
    leaves = [tensor.to(device).requires_grad_() for tensor in leaves]
    if not form["dynamic"]:
        leaves[1:4] = [None, None, None]
    return leaves


def fused(projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, *states, function=None):
    """`FusedMix` (or `function`, of its arguments) called as `formula_mix` is: C U and the states laid out as the
    kernels read them, the gates stored, and the mixed states one tensor per target."""
    projected, states, parameters = prepare(projected, states, (gate_hidden, gate_context, gate_bias))
    second = states[1] if len(states) > 1 else None
    mixed, gates = (function or FusedMix.apply)(projected, states[0], second, *parameters, fixed_gate, heads, True)
    return *mixed.unbind(), gates


def call(function, leaves, heads, fixed_gate=0.3):
    projected, gate_hidden, gate_context, gate_bias, *states = leaves
    return function(projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, *states)


# Every form in fp32 and in bf16 states with fp32 parameters (autocast's mix); the two-target dynamic forms, which
# run every load and store of both targets, in fp16 and bf16 too (the dtype changes only the loads and the stores).
KERNEL_CASES = [
    (form, dtypes)
    for form in KERNEL_FORMS
    for dtypes in ((torch.float32,) * 2, (torch.bfloat16, torch.float32))
    + (((torch.float16,) * 2, (torch.bfloat16,) * 2) if form["targets"] == 2 and form["dynamic"] else ())
]


def kernel_case_id(case):
    form, (dtype, parameter_dtype) = case
    dtypes = str(dtype).removeprefix("torch.") + ("" if dtype == parameter_dtype else "-fp32-parameters")
    return f"{kernel_form_id(form)}-{dtypes}"


@pytest.mark.parametrize("case", KERNEL_CASES, ids=kernel_case_id)
def test_kernels_equal_the_formulas(case, device):
    """`FusedMix` on the same inputs as the float64 formulas: the mixed states, the gates and the gradients of every
    input within one rounding to their dtype (the kernels compute in fp32 and round where they write), for a
    shared gate and a gate per head, one target or two, sentence and token context, the fixed gate, in fp32, fp16,
    bf16 and bf16 states with fp32 parameters (autocast's mix)."""
    form, (dtype, parameter_dtype) = case
    leaves = kernel_inputs(form, dtype, parameter_dtype, device)
    leaves_64 = [None if leaf is None else leaf.detach().double().requires_grad_() for leaf in leaves]
    heads = form["heads"]
    outputs = call(fused, leaves, heads)
    expected = call(formula_mix, leaves_64, heads)
    if not form["dynamic"]:  # the fixed gate's gates are not the kernel's to write
        outputs, expected = outputs[:-1], expected[:-1]
    inputs = [leaf for leaf in leaves if leaf is not None]
    grads = torch.autograd.grad(weighted_loss(outputs), inputs)
    expected_grads = torch.autograd.grad(weighted_loss(expected), [leaf for leaf in leaves_64 if leaf is not None])
    names = [*(f"mixed {i}" for i in range(form["targets"])), "gates"]
    input_names = ["projected", "gate_hidden", "gate_context", "gate_bias"][: 4 if form["dynamic"] else 1]
    input_names += [f"states {i}" for i in range(form["targets"])]
    for name, actual, reference, leaf in zip(
        [*names[: len(outputs)], *(f"d {name}" for name in input_names)],
        [*outputs, *grads],
        [*expected, *expected_grads],
        [*outputs, *inputs],
        strict=True,
    ):
        assert actual.shape == reference.shape, name
        assert actual.dtype == (torch.float32 if name == "gates" else leaf.dtype), name
        error = (actual.double() - reference).norm() / reference.norm()
        assert error <= RELATIVE_ERROR[actual.dtype], f"{name}: {error:.2e} from the formulas in {actual.dtype}"


def run(function, inputs, parameters):
    """The outputs of `function(query, key, context)` and the gradients of every input and parameter on
    `weighted_loss` of them (the gates included: a loss on the gates reaches their logits on every path)."""
    query, key, *context = inputs
    outputs = function(query, key, context)
    grads = torch.autograd.grad(weighted_loss(outputs), [*inputs, *parameters], allow_unused=True)
    return [output.detach() for output in outputs], grads


def assert_fused_matches(mixer, inputs, dtype, fused_calls):
    """`mixer` run fused on `inputs` against the paper's formulas (`reference_mixer`, on a float64 copy of the mixer
    and of the inputs) and against its own PyTorch path: outputs, gates and every gradient. Upstream of the kernels
    C U is a product in the dtype on both paths, so the fused path is held to being as close to the formulas as
    the PyTorch path, or twice as close as that, whichever is looser than one rounding of the dtype."""
    mixer_64 = copy.deepcopy(mixer).double()
    inputs_64 = [tensor.detach().double().requires_grad_() for tensor in inputs]
    fused = run(lambda q, k, c: mixer(q, k, mixer_context(mixer, c)), inputs, list(mixer.parameters()))
    assert fused_calls, "the fused kernels did not run"
    formulas = run(lambda q, k, c: reference_mixer(mixer_64, q, k, c), inputs_64, list(mixer_64.parameters()))
    set_fused_mixer(mixer, "off")
    pytorch = run(lambda q, k, c: mixer(q, k, mixer_context(mixer, c)), inputs, list(mixer.parameters()))
    set_fused_mixer(mixer, "eager")
    output_names = ["query", "key", "gates"]
    grad_names = ["query", "key", *(f"context {i}" for i in range(len(inputs) - 2)), *dict(mixer.named_parameters())]
    for names, (fused_results, formula_results, pytorch_results) in (
        (output_names, (fused[0], formulas[0], pytorch[0])),
        ([f"d {name}" for name in grad_names], (fused[1], formulas[1], pytorch[1])),
    ):
        for name, actual, formula, path in zip(names, fused_results, formula_results, pytorch_results, strict=True):
            if formula is None or not formula.any():  # a gradient the loss does not reach, or a target's zero gate
                assert actual is None or not actual.any(), name
                continue
            assert actual.dtype == path.dtype == dtype and actual.shape == formula.shape, name
            scale = formula.double().norm()
            error = (actual.double() - formula).norm() / scale
            path_error = (path.double() - formula).norm() / scale
            bound = max(RELATIVE_ERROR[dtype], 2 * path_error)
            assert error <= bound, f"{name}: {error:.2e} from the formulas in {dtype}, PyTorch's {path_error:.2e}"


# The mixer's forms as its C U reaches the kernels: each context kind at full rank (C U token-major) and low rank
# (target-major), both targets with each gate shape and the key alone with the fixed gate, in fp32; each kind with
# both gate shapes in bf16 (the kernels' every form and dtype are test_kernels_equal_the_formulas').
MIXER_CASES = [
    (options, torch.float32)
    for options in CONFIGS
    if (options["context_targets"] == ["query", "key"] and options["gate"] == "dynamic")
    or (options["context_targets"] == ["key"] and options["gate"] == "fixed")
] + [
    (dict(context_type=context_type, gate_per_head=per_head), torch.bfloat16)
    for context_type in ("global", "deep", "deep_global")
    for per_head in (False, True)
]


@pytest.mark.parametrize(
    ("options", "dtype"), MIXER_CASES, ids=[f"{config_id(o)}-{str(d).removeprefix('torch.')}" for o, d in MIXER_CASES]
)
def test_fused_mixer_equals_the_formulas_and_the_pytorch_path(options, dtype, device, fused_calls):
    """Every form (targets, gate shape, fixed gate, each context kind, low rank): outputs, gates and gradients."""
    mixer, inputs = mixer_and_inputs(options, dtype, device)
    assert_fused_matches(mixer, inputs, dtype, fused_calls)


@pytest.mark.parametrize(
    ("batch", "tokens"), [(1, TOKENS), (2, 1), (2, 16)], ids=["one-sentence", "one-token", "whole-blocks"]
)
@pytest.mark.parametrize("context_type", ["global", "deep"])
def test_fused_mixer_at_edge_sizes(context_type, batch, tokens, device, fused_calls):
    """A batch of one, sentences of one token, and lengths that fill the kernels' blocks exactly."""
    mixer, inputs = mixer_and_inputs(dict(context_type=context_type), torch.float32, device, batch, tokens)
    assert_fused_matches(mixer, inputs, torch.float32, fused_calls)


def gradients_of(mixer, inputs, loss):
    query, key, *context = inputs
    query, key, gates = mixer(query, key, mixer_context(mixer, context))
    return torch.autograd.grad(loss(query, key, gates), [*inputs, *mixer.parameters()], allow_unused=True)


@pytest.mark.parametrize(
    "loss",
    [
        lambda query, key, gates: query.sum() + key.sum(),  # incoming gradients of stride 0
        lambda query, key, gates: (query * 2).sum(),  # the key's output unused: its gradient is None
        lambda query, key, gates: gates.square().sum(),  # the gates alone
    ],
    ids=["broadcast-gradient", "one-output-used", "gates-only"],
)
def test_fused_mixer_takes_every_incoming_gradient(loss, device, fused_calls):
    mixer, inputs = mixer_and_inputs(dict(context_type="deep_global", gate_per_head=True), torch.float32, device)
    fused = gradients_of(mixer, inputs, loss)
    assert fused_calls
    set_fused_mixer(mixer, "off")
    for name, actual, expected in zip(range(len(fused)), fused, gradients_of(mixer, inputs, loss), strict=True):
        if expected is None:
            assert actual is None or not actual.any(), name
        else:
            assert_close_in_norm(actual, expected, name)


def test_fused_mixer_reads_strided_states(device, fused_calls):
    """Query and key as slices of one projection's output (rows of 3 d, as a fused QKV projection gives them)."""
    mixer, (query, key, *context) = mixer_and_inputs(dict(context_type="global"), torch.float32, device)
    packed = torch.cat([query.detach(), key.detach(), torch.randn_like(query)], dim=-1).requires_grad_()
    d = query.shape[-1]
    strided = [packed[..., :d], packed[..., d : 2 * d]]
    assert not strided[0].is_contiguous()
    results = []
    for mode in ("eager", "off"):
        set_fused_mixer(mixer, mode)
        outputs = mixer(*strided, mixer_context(mixer, context))
        loss = sum((output * torch.linspace(-1, 1, output.shape[-1], device=device)).sum() for output in outputs)
        results.append((outputs, torch.autograd.grad(loss, [packed, *context])))
    assert fused_calls
    for name, actual, expected in zip(
        ("query", "key", "gates", "d packed", "d context"),
        (*results[0][0], *results[0][1]),
        (*results[1][0], *results[1][1]),
        strict=True,
    ):
        assert_close_in_norm(actual, expected, name)


def family_model(family, context_type):
    """A tiny float32 base model of `family` (or the translation model's encoder, "marian") with large context
    parameters."""
    torch.manual_seed(0)
    if family == "marian":
        config = CasanMarianConfig(**TINY_MARIAN, context_type=context_type, gate_bias_init=0.0, gate_per_head=True)
        model = CasanMarianMTModel(config).get_encoder()
    else:
        config = tiny_config(family, context_type=context_type, gate_bias_init=0.0, gate_per_head=True)
        model = casan_class(get_family(family), "base")(config)
    for name, parameter in model.named_parameters():
        if "context_mixer" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    return model.eval()  # no dropout (gradients flow all the same)


@pytest.mark.parametrize(
    ("family", "context_type"),
    [("bert", "global"), ("bert", "deep"), ("modernbert", "global"), ("deberta-v2", "global"), ("marian", "deep")],
)
def test_models_run_the_fused_kernels_as_their_pytorch_path(family, context_type, device, fused_calls):
    """Whole models on a padded batch, the families whose attention calls `mix_context` (ModernBERT, DeBERTa-v2) and
    the translation model's encoder among them: outputs, gates and every parameter's gradient equal the PyTorch
    path's, and the kernels ran in every layer that mixes."""
    model = family_model(family, context_type).to(device)
    pad = model.config.pad_token_id or 0
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3, 5], 50, pad_token_id=pad))

    def step():
        model.zero_grad(set_to_none=True)
        outputs = model(input_ids=input_ids, attention_mask=attention_mask, output_context_gates=True)
        hidden = outputs.last_hidden_state
        generator = torch.Generator().manual_seed(1)
        (hidden * torch.randn(hidden.shape, generator=generator).to(device)).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        return hidden.detach(), torch.stack(outputs.context_gates).detach(), grads

    fused = step()
    mixing_layers = sum(bool(model.config.layer_has_context(layer)) for layer in range(3))
    assert len(fused_calls) == mixing_layers
    assert set_fused_mixer(model, "off") == mixing_layers
    reference = step()
    assert_close_in_norm(fused[0], reference[0], "outputs")
    assert_close_in_norm(fused[1], reference[1], "gates")
    assert fused[2].keys() == reference[2].keys()
    # Every gradient at once (a few are zero but for rounding: the first layer's key bias, which softmax ignores),
    # and the context parameters' one by one.
    assert_close_in_norm(
        *(torch.cat([grad.flatten() for grad in grads.values()]) for grads in (fused[2], reference[2])), "gradients"
    )
    for name, grad in fused[2].items():
        if "context_mixer" in name:  # sums over every token of fp32 products, in another order
            assert_close_in_norm(grad, reference[2][name], name, relative_error=1e-4)


@pytest.mark.parametrize("context_type", ["global", "deep"])
def test_compiled_mixer_on_the_cpu_keeps_the_pytorch_path(context_type, device, fused_calls):
    """torch.compile cannot trace interpreted kernels: compiled on the CPU in the mode "compiled", the mixer's graph
    holds the operator, traced as the PyTorch path, and never the eager doors to the kernels; its outputs are the
    PyTorch path's (on a GPU inductor compiles the operator's kernels: test_compiled_fused_mixer_on_a_gpu)."""
    if device.type != "cpu":
        pytest.skip("the CPU's compiled path")
    torch._dynamo.reset()
    mixer, (query, key, *context) = mixer_and_inputs(dict(context_type=context_type), torch.float32, device)
    set_fused_mixer(mixer, "compiled")
    compiled = torch.compile(mixer, backend="eager", fullgraph=True)
    actual = compiled(query, key, mixer_context(mixer, context))
    assert not fused_calls
    set_fused_mixer(mixer, "off")
    expected = mixer(query, key, mixer_context(mixer, context))
    for name, output, reference in zip(("query", "key", "gates"), actual, expected, strict=True):
        assert_close_in_norm(output, reference, name)  # compiled, the gate's logits are products and sums


@pytest.mark.parametrize(("context_type", "mode"), [("global", "default"), ("deep_global", "reduce-overhead")])
def test_compiled_fused_mixer_on_a_gpu(context_type, mode, device, fused_calls):
    """On a GPU, in the mode "compiled", torch.compile traces the fused function (its kernels are user-defined Triton
    kernels to inductor) in one graph, also under CUDA graphs: a training step's outputs, gates and gradients equal
    eager's (a parameter the loss does not reach gets a gradient of zeros when compiled, None in eager)."""
    if device.type != "cuda":
        pytest.skip("inductor compiles the kernels on a GPU only")
    torch._dynamo.reset()
    model = family_model("bert", context_type).to(device)
    set_fused_mixer(model, "compiled")
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3, 5]))
    compiled = torch.compile(model, mode=mode, fullgraph=True)
    results = []
    for forward in (model, compiled, compiled):  # the second compiled step replays the recorded graph
        torch.compiler.cudagraph_mark_step_begin()
        model.zero_grad(set_to_none=True)
        outputs = forward(input_ids=input_ids, attention_mask=attention_mask, output_context_gates=True)
        weighted_loss([outputs.last_hidden_state]).backward()
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        results.append(
            (outputs.last_hidden_state.detach().clone(), torch.stack(outputs.context_gates).detach(), grads)
        )
    assert fused_calls
    hidden, gates, grads = results[0]
    for compiled_hidden, compiled_gates, compiled_grads in results[1:]:
        assert_close_in_norm(compiled_hidden, hidden, "outputs", relative_error=1e-4)
        assert_close_in_norm(compiled_gates, gates, "gates", relative_error=1e-4)
        for name, grad in compiled_grads.items():
            if name in grads:
                assert_close_in_norm(grad, grads[name], name, relative_error=1e-4)
            else:
                assert not grad.any(), name


def test_second_order_gradients_are_refused_by_name(device, fused_calls):
    """The kernels' backward is not differentiable: with `create_graph=True` the first-order gradients are the
    PyTorch path's, and differentiating them again (a Hessian-vector product) raises an error that names the fused
    mixer and the switch to its PyTorch path, which gives it."""
    mixer, inputs = mixer_and_inputs(dict(context_type="deep_global", gate_per_head=True), torch.float32, device)
    parameters = list(mixer.parameters())
    results = {}
    for mode in ("eager", "off"):
        set_fused_mixer(mixer, mode)
        query, key, *context = inputs
        outputs = mixer(query, key, mixer_context(mixer, context))
        grads = torch.autograd.grad(weighted_loss(outputs), parameters, create_graph=True)
        results[mode] = grads
        second = sum((grad * torch.ones_like(grad)).sum() for grad in grads)
        if mode == "eager":
            with pytest.raises(
                RuntimeError, match=r"fused mixer.*set_fused_mixer\(model, 'off'\).*CASAN_FUSED_MIXER=off"
            ):
                torch.autograd.grad(second, parameters, allow_unused=True)
        else:
            assert any(grad is not None for grad in torch.autograd.grad(second, parameters, allow_unused=True))
    assert fused_calls
    for index, (actual, expected) in enumerate(zip(results["eager"], results["off"], strict=True)):
        assert_close_in_norm(actual.detach(), expected.detach(), f"d parameter {index}")


# gradcheck's steps and tolerances for functions that compute in fp32 (the kernels take no float64): a central
# difference of step 1e-3 is off by about 1e-4 (fp32's rounding over the step); a wrong formula by about 1.
FP32_GRADCHECK = dict(eps=1e-3, atol=1e-3, rtol=1e-2, fast_mode=True)


def gradcheck_function(form, leaves, function=FusedMix.apply):
    """`function` (`FusedMix.apply` or the operator) of `leaves`' present inputs, as torch.autograd's checks call it:
    every output but the fixed gate's gates, which are not differentiable."""
    present = [index for index, leaf in enumerate(leaves) if leaf is not None]

    def mixed(*inputs):
        full = list(leaves)
        for index, tensor in zip(present, inputs, strict=True):
            full[index] = tensor
        outputs = call(functools.partial(fused, function=function), full, form["heads"])
        return outputs if form["dynamic"] else outputs[:-1]

    return mixed, [leaves[index] for index in present]


@pytest.mark.filterwarnings("ignore:Input #.* is not a double precision")
@pytest.mark.parametrize("form", KERNEL_FORMS, ids=kernel_form_id)
def test_gradcheck(form, device):
    """torch.autograd.gradcheck on every form: the backward kernel is the derivative of the forward kernel, against
    finite differences of the forward itself. (The operator's backward is `FusedMix`'s to the bit:
    test_the_operator_runs_the_kernels_with_fused_mixs_gradients.)"""
    mixed, inputs = gradcheck_function(form, kernel_inputs(form, torch.float32, torch.float32, device, tokens=3, d=8))
    assert torch.autograd.gradcheck(mixed, inputs, **FP32_GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #.* is not a double precision")
@pytest.mark.parametrize("door", ["FusedMix", "operator"])
def test_gradgradcheck_is_refused_by_name(door, device):
    """torch.autograd.gradgradcheck through either door raises the refusal, which names the switch to the PyTorch
    path: the kernels' backward is computed once, never differentiated."""
    form = dict(targets=1, heads=1, per_token=False, dynamic=True)
    leaves = kernel_inputs(form, torch.float32, torch.float32, device, tokens=3, d=8)
    mixed, inputs = gradcheck_function(form, leaves, FusedMix.apply if door == "FusedMix" else FUSED_MIX_OPERATOR)
    with pytest.raises(RuntimeError, match=r"fused mixer.*set_fused_mixer\(model, 'off'\)"):
        torch.autograd.gradgradcheck(mixed, inputs, **FP32_GRADCHECK)


def test_unstored_gates_are_refused_where_a_gradient_needs_them(device):
    form = dict(targets=2, heads=1, per_token=False, dynamic=True)
    leaves = kernel_inputs(form, torch.float32, torch.float32, device)
    projected, gate_hidden, gate_context, gate_bias, first, second = leaves
    with pytest.raises(ValueError, match="store_gates=False where a gradient is asked for"):
        FusedMix.apply(projected, first, second, gate_hidden, gate_context, gate_bias, 0.3, 1, False)


class RecordOperators(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.operators = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.operators.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_unused_outputs_get_no_gradient_made_of_zeros(device, fused_calls):
    """Gradient materialisation is off: where the gates reach no loss (training), the backward makes no zeros for
    them and equals the PyTorch path's."""
    mixer, inputs = mixer_and_inputs(dict(context_type="global"), torch.float32, device)
    query, key, *context = inputs
    mixed_query, mixed_key, _ = mixer(query, key, mixer_context(mixer, context), return_gates=False)
    loss = weighted_loss([mixed_query, mixed_key])
    with RecordOperators() as record:
        grads = torch.autograd.grad(loss, [*inputs, *mixer.parameters()])
    assert fused_calls
    assert not {"zeros", "zeros_like", "new_zeros", "zero_", "fill_"} & set(record.operators), record.operators
    set_fused_mixer(mixer, "off")
    mixed_query, mixed_key, _ = mixer(query, key, mixer_context(mixer, context), return_gates=False)
    expected = torch.autograd.grad(weighted_loss([mixed_query, mixed_key]), [*inputs, *mixer.parameters()])
    for index, (actual, reference) in enumerate(zip(grads, expected, strict=True)):
        assert_close_in_norm(actual, reference, f"gradient {index}")


@pytest.mark.parametrize("per_token", [False, True], ids=["per-sentence", "per-token"])
def test_an_empty_batch_gives_empty_outputs_and_zero_gradients(per_token, device):
    """A batch of no sentence (or sentences of no token) launches nothing: empty mixed states, and the parameters'
    gradients zero, as on the PyTorch path."""
    form = dict(targets=2, heads=4, per_token=per_token, dynamic=True)
    for batch, tokens in ((0, TOKENS), (2, 0)):
        leaves = kernel_inputs(form, torch.float32, torch.float32, device, batch=batch, tokens=tokens)
        outputs = call(fused, leaves, 4)
        assert [tuple(output.shape) for output in outputs[:2]] == [(batch, tokens, 32)] * 2
        grads = torch.autograd.grad(weighted_loss(outputs), [leaf for leaf in leaves if leaf is not None])
        assert all(not grad.any() for grad in grads)


def test_gate_parameters_of_any_layout(device):
    """The gate's vectors as strided views (a transposed parameter) give what contiguous ones give."""
    form = dict(targets=2, heads=1, per_token=True, dynamic=True)
    leaves = kernel_inputs(form, torch.float32, torch.float32, device)
    strided = [leaf.detach().t().contiguous().t().requires_grad_() for leaf in leaves[1:3]]
    assert not strided[0].is_contiguous()
    expected = call(fused, leaves, 1)
    actual = call(fused, [leaves[0], *strided, *leaves[3:]], 1)
    for name, output, reference in zip(("query", "key", "gates"), actual, expected, strict=True):
        assert_close_in_norm(output, reference, name)
    grads = torch.autograd.grad(weighted_loss(actual), strided)
    expected_grads = torch.autograd.grad(weighted_loss(expected), leaves[1:3])
    for grad, reference in zip(grads, expected_grads, strict=True):
        assert_close_in_norm(grad, reference, "d gate vector")


def test_the_operator_runs_the_kernels_with_fused_mixs_gradients(device):
    """The compiled graphs' operator called eagerly: the kernels run (here interpreted), and outputs and every
    gradient equal `FusedMix`'s."""
    form = dict(targets=2, heads=4, per_token=True, dynamic=True)
    leaves = kernel_inputs(form, torch.float32, torch.float32, device)
    results = []
    for function in (FusedMix.apply, FUSED_MIX_OPERATOR):
        outputs = call(functools.partial(fused, function=function), leaves, 4)
        results.append((outputs, torch.autograd.grad(weighted_loss(outputs), leaves)))
    for index, (actual, reference) in enumerate(
        zip([*results[0][0], *results[0][1]], [*results[1][0], *results[1][1]], strict=True)
    ):
        assert_close_in_norm(actual, reference, f"output or gradient {index}", relative_error=0)


class RefusedJIT:
    def __getitem__(self, grid):
        pytest.fail("a launch went through the JIT where the compiled kernel of its specialization was cached")


@pytest.mark.parametrize(
    "form",
    [dict(targets=2, heads=4, per_token=True, dynamic=True), dict(targets=2, heads=1, per_token=False, dynamic=False)],
    ids=kernel_form_id,
)
def test_cached_launches_equal_the_jits_on_a_gpu(form, device, monkeypatch):
    """On a GPU, `CachedLaunches`: a forward and backward launched through the JIT (the caches emptied), then again
    through the compiled kernels the JIT returned (the JIT refused), give the same outputs and gradients to the
    bit, for a gate per head on per-token context and for the fixed gate (its absent parameters None)."""
    if device.type != "cuda":
        pytest.skip("Triton's interpreter returns no compiled kernel: every launch goes through it")
    leaves = kernel_inputs(form, torch.bfloat16, torch.float32, device)
    inputs = [leaf for leaf in leaves if leaf is not None]
    launches = (fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES)
    for launch in launches:
        monkeypatch.setattr(launch, "compiled", {})
    results = []
    for _ in range(2):
        outputs = call(fused, leaves, form["heads"])
        outputs = outputs if form["dynamic"] else outputs[:-1]
        results.append([*outputs, *torch.autograd.grad(weighted_loss(outputs), inputs)])
        assert all(len(launch.compiled) == 1 for launch in launches)
        for launch in launches:
            monkeypatch.setattr(launch, "kernel", RefusedJIT())
    for index, (actual, reference) in enumerate(zip(*results, strict=True)):
        assert torch.equal(actual, reference), f"output or gradient {index}"


class FakeDriver:
    """Triton's driver on a GPU, for `CachedLaunches`: the current device (0, or what a test sets), its stream
    named."""

    def __init__(self):
        self.device = 0

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device):
        return f"stream of {device}"


# What a cached launch calls of Triton, each removed as a later release might: the compiled kernel's public call,
# the runtime knobs that hold the launch hooks, the driver's current stream, the JIT kernel's argument names.
TRITON_NAMES = ["compiled call", "knobs", "stream", "argument names"]


def remove_triton_name(name, jits, monkeypatch):
    """Removes `name` (one of `TRITON_NAMES`) for the length of a test, from Triton or from each of `jits` (stand-in
    JIT kernels whose launches return their `compiled`)."""
    import triton

    if name == "knobs":
        monkeypatch.delattr(triton.knobs, "runtime")
    elif name == "stream":
        monkeypatch.delattr(FakeDriver, "get_current_stream")
    for jit in jits:
        if name == "compiled call":
            jit.compiled = object()
        elif name == "argument names":
            del jit.arg_names


class InterpretedCompiled:
    """A compiled kernel whose public call launches `kernel` through Triton's interpreter with the arguments as given,
    in the kernel's order, constexprs included: as a GPU's compiled kernel takes them."""

    def __init__(self, kernel):
        self.kernel, self.runs = kernel, 0

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.runs += 1
            self.kernel[grid[:2]](*args)

        return runner


class InterpretedJIT:
    """Triton's interpreted JIT kernel, which returns a compiled kernel of itself (`InterpretedCompiled`), as a GPU's
    JIT does."""

    def __init__(self, kernel):
        self.kernel, self.arg_names, self.launches = kernel, kernel.arg_names, 0
        self.compiled = InterpretedCompiled(kernel)

    def __getitem__(self, grid):
        def launch(*args, **options):
            self.launches += 1
            self.kernel[grid](*args, **options)
            return self.compiled

        return launch


# Every form with what a cached launch calls of Triton, and two forms (the fixed gate on sentence context, a gate per
# head on per-token context) with each name removed.
CACHED_LAUNCH_CASES = [(form, None) for form in KERNEL_FORMS] + [
    (form, removed)
    for form in (
        dict(targets=2, heads=1, per_token=False, dynamic=False),
        dict(targets=2, heads=4, per_token=True, dynamic=True),
    )
    for removed in TRITON_NAMES
]


@pytest.mark.parametrize(
    ("form", "removed"),
    CACHED_LAUNCH_CASES,
    ids=[f"{kernel_form_id(form)}-{removed or 'all names'}" for form, removed in CACHED_LAUNCH_CASES],
)
def test_cached_launches_give_the_jits_results(form, removed, device, monkeypatch):
    """`CachedLaunches` as on a GPU (a stand-in driver, compiled kernels that run the interpreted kernels with the
    arguments a compiled kernel is called with): every form's outputs and gradients, launched a second and a third
    time through the compiled kernels, equal the JIT's to the bit; with a name a cached launch calls removed (as a
    later Triton might), every launch goes through the JIT, with a warning and the same results."""
    if device.type != "cpu":
        pytest.skip("a GPU's compiled kernels: test_cached_launches_equal_the_jits_on_a_gpu")
    leaves = kernel_inputs(form, torch.float32, torch.float32, device)
    inputs = [leaf for leaf in leaves if leaf is not None]

    def results():
        outputs = call(fused, leaves, form["heads"])
        outputs = outputs if form["dynamic"] else outputs[:-1]
        return [*outputs, *torch.autograd.grad(weighted_loss(outputs), inputs)]

    expected = results()  # through the interpreted JIT
    monkeypatch.setattr(fused_mixer, "INTERPRETED", False)
    jits = []
    for name in ("FORWARD_LAUNCHES", "BACKWARD_LAUNCHES"):
        jits.append(InterpretedJIT(getattr(fused_mixer, name).kernel))
        monkeypatch.setattr(fused_mixer, name, fused_mixer.CachedLaunches(jits[-1], FakeDriver()))
    if removed is not None:
        remove_triton_name(removed, jits, monkeypatch)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        launched = [results() for _ in range(3)]
    for actual in launched:
        for index, (output, reference) in enumerate(zip(actual, expected, strict=True)):
            assert torch.equal(output, reference), f"output or gradient {index}"
    if removed is None:
        assert not warned and all((jit.launches, jit.compiled.runs) == (1, 2) for jit in jits)
    else:
        assert len(warned) == 2 and "through Triton's JIT from now on" in str(warned[0].message)
        assert all(jit.launches == 3 for jit in jits)
