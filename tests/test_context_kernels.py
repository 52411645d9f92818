"""The context mixer's kernels change nothing: outputs, gates and every gradient equal those of the mixer
written straightforwardly (one target at a time, C concatenated, the paper's formulas), in float64.

Every test runs on the `device` fixture: the CPU here, a GPU with `pytest tests/test_context_kernels.py --device
cuda` (scripts/device/shard.sh speed), where the bf16 autocast tests check the CUDA kernels' rounding."""

import itertools

import pytest
import torch
from tiny_models import padded_batch, tiny_config

from casan_hf import CasanModel
from casan_hf.context_mixer import CasanContextMixer, _SplitProjection, set_fused_mixer


TOLERANCE = dict(rtol=0, atol=1e-10)
CONFIGS = [
    dict(context_type=context_type, context_rank=rank, context_targets=targets, gate=gate)
    for context_type, rank, targets, gate in itertools.product(
        ("global", "deep", "deep_global"), (None, 3), (["query", "key"], ["query"], ["key"]), ("dynamic", "fixed")
    )
] + [
    dict(context_type=context_type, context_rank=rank, context_targets=targets, gate="dynamic", gate_per_head=True)
    for context_type, rank, targets in itertools.product(
        ("global", "deep", "deep_global"), (None, 3), (["query", "key"], ["key"])
    )
]


def config_id(options):
    return "-".join(str(value if not isinstance(value, list) else "+".join(value)) for value in options.values())


def reference_mixer(mixer, query, key, context):
    """The mixer as the method states it: C the explicit concatenation (broadcast for sentence context), then
    per target C U, lambda = sigmoid(X v^H + (C U) v^C + b) and (1 - lambda) X + lambda C U; with a gate per
    head, the same for each head's slice of X and C U, with the one v^H and v^C every head shares (the authors'
    code)."""
    if mixer.gate_per_head:
        return reference_per_head_mixer(mixer, query, key, context)
    n = query.shape[1]
    concatenated = torch.cat(context, dim=-1)
    if not mixer.per_token:
        concatenated = concatenated[:, None, :].expand(-1, n, -1)
    width = mixer.hidden_size if mixer.rank is None else mixer.rank
    states = {"query": query, "key": key}
    gates = [query.new_zeros(query.shape[:-1]), key.new_zeros(key.shape[:-1])]
    for index, target in enumerate(mixer.targets):
        u = mixer.context_weight[index * width : (index + 1) * width].T
        if mixer.rank is not None:
            u = u @ mixer.context_up[index]
        cu = concatenated @ u
        plain = states[target]
        if mixer.dynamic:
            lam = torch.sigmoid(
                plain @ mixer.gate_hidden[index] + cu @ mixer.gate_context[index] + mixer.gate_bias[index]
            )
        else:
            lam = torch.full(plain.shape[:-1], mixer.fixed_gate, dtype=plain.dtype, device=plain.device)
        states[target] = (1 - lam[..., None]) * plain + lam[..., None] * cu
        gates[("query", "key").index(target)] = lam
    return states["query"], states["key"], torch.stack(gates, dim=1)


def reference_per_head_mixer(mixer, query, key, context):
    n, heads = query.shape[1], mixer.gate_heads
    concatenated = torch.cat(context, dim=-1)
    if not mixer.per_token:
        concatenated = concatenated[:, None, :].expand(-1, n, -1)
    width = mixer.hidden_size if mixer.rank is None else mixer.rank
    states = {"query": query, "key": key}
    gates = [query.new_zeros((query.shape[0], heads, n)) for _ in range(2)]
    for index, target in enumerate(mixer.targets):
        u = mixer.context_weight[index * width : (index + 1) * width].T
        if mixer.rank is not None:
            u = u @ mixer.context_up[index]
        cu = (concatenated @ u).unflatten(-1, (heads, -1))  # (batch, n, heads, d_head)
        plain = states[target].unflatten(-1, (heads, -1))
        lam = torch.sigmoid(plain @ mixer.gate_hidden[index] + cu @ mixer.gate_context[index] + mixer.gate_bias[index])
        states[target] = ((1 - lam[..., None]) * plain + lam[..., None] * cu).flatten(-2)
        gates[("query", "key").index(target)] = lam.transpose(1, 2)
    return states["query"], states["key"], torch.stack(gates, dim=1)


def context_model(context_type, device, **options):
    """A tiny float32 model whose context parameters are large enough for their gradients to be compared, its mixers on
    their PyTorch path on every device (the fused kernels are tests/fused_mixer_cases.py's)."""
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type=context_type, gate_bias_init=0.0, **options))
    for name, parameter in model.named_parameters():
        if "context_mixer" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    set_fused_mixer(model, "off")
    return model.to(device)


def random_like(tensor):
    """Standard normal numbers of `tensor`'s shape, dtype and device, drawn on the CPU from a fixed seed: the same
    on every device, and for every tensor of that shape whatever its strides."""
    generator = torch.Generator().manual_seed(1)
    return torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype).to(tensor.device)


def weighted_sum(tensor):
    """A loss whose gradient reaches the context (a square's mean would not: LayerNorm fixes it)."""
    return (tensor * random_like(tensor)).sum()


def reference_forward(self, query, key, context, return_gates=True):
    """`CasanContextMixer.forward` replaced by `reference_mixer` (deep_global's context split into its means)."""
    if self.per_token:
        return reference_mixer(self, query, key, context)
    (sentence,) = context
    return reference_mixer(self, query, key, sentence.split(self.hidden_size, dim=-1))


def mixer_inputs(config, layer, device, batch=3, n=5):
    d = config.hidden_size
    if config.context_type == "deep":
        context = tuple(torch.randn(batch, n, d, dtype=torch.float64) for _ in range(layer))
    elif config.context_type == "deep_global":
        context = tuple(torch.randn(batch, d, dtype=torch.float64) for _ in range(layer + 1))
    else:
        context = (torch.randn(batch, d, dtype=torch.float64),)
    query, key = torch.randn(batch, n, d, dtype=torch.float64), torch.randn(batch, n, d, dtype=torch.float64)
    return [tensor.to(device).requires_grad_() for tensor in (query, key, *context)]


def assert_mixer_equals_the_reference(device, forward=None, **options):
    """A float64 mixer of layer 2 with large parameters (`options`: the config's), run as it is or through
    `forward(mixer)`, against `reference_mixer`: its outputs and the gradients of every input and parameter on one
    weighted loss."""
    torch.manual_seed(0)
    config = tiny_config(**options)
    layer = 2
    mixer = CasanContextMixer(config, config.context_size(layer)).double()
    for parameter in mixer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    mixer.to(device)
    query, key, *context = mixer_inputs(config, layer, device)
    # the fast mixer takes deep_global's context concatenated, as layer_context builds it
    fast_context = tuple(context) if config.context_type == "deep" else (torch.cat(context, dim=-1),)
    fast = mixer if forward is None else forward(mixer)
    results = {}
    for name, function in (("fast", fast), ("reference", lambda q, k, c: reference_mixer(mixer, q, k, context))):
        outputs = function(query, key, fast_context)
        loss = sum(weighted_sum(output) for output in outputs)
        inputs = [query, key, *context, *mixer.parameters()]
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
        results[name] = (outputs, grads)
    for fast_output, reference in zip(results["fast"][0], results["reference"][0], strict=True):
        torch.testing.assert_close(fast_output, reference, **TOLERANCE)
    for fast_grad, reference in zip(results["fast"][1], results["reference"][1], strict=True):
        if reference is None:
            assert fast_grad is None or not fast_grad.any()
        else:
            torch.testing.assert_close(fast_grad, reference, **TOLERANCE)


@pytest.mark.parametrize("options", CONFIGS, ids=config_id)
def test_mixer_forward_and_gradients_equal_the_reference(options, device):
    assert_mixer_equals_the_reference(device, **options)


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", ["global", "deep", "deep_global"])
def test_compiled_mixer_forward_and_gradients_equal_the_reference(context_type, gate_per_head, device):
    """Traced by torch.compile, the gate's logits are products and sums (`_row_dots`), not matrix-vector products:
    the same outputs and gradients as the paper's formulas, in float64 (dynamo's eager backend runs the traced
    operators as they are)."""
    torch._dynamo.reset()
    assert_mixer_equals_the_reference(
        device,
        lambda mixer: torch.compile(mixer, backend="eager", fullgraph=True),
        context_type=context_type,
        gate_per_head=gate_per_head,
    )


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", ["global", "deep", "deep_global"])
@pytest.mark.parametrize("rank", [None, 3])
def test_model_outputs_and_gradients_equal_the_reference(context_type, rank, gate_per_head, device, monkeypatch):
    """A whole model (padded batch, every layer): its outputs, gates and every parameter's gradient, computed
    with the fast mixer and with the reference in its place."""
    torch.manual_seed(0)
    config = tiny_config(context_type=context_type, context_rank=rank, gate_bias_init=0.0, gate_per_head=gate_per_head)
    model = CasanModel(config).double()
    for name, parameter in model.named_parameters():
        if "context_mixer" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    model.to(device)
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3, 5]))

    def step():
        model.zero_grad(set_to_none=True)
        outputs = model(input_ids, attention_mask=attention_mask, output_context_gates=True)
        hidden = outputs.last_hidden_state
        weighted_sum(hidden).backward()
        gates = torch.stack(outputs.context_gates).detach()
        return (
            hidden.detach(),
            gates,
            {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None},
        )

    fast = step()
    original_forward = CasanContextMixer.forward
    monkeypatch.setattr(CasanContextMixer, "forward", reference_forward)
    reference = step()
    monkeypatch.setattr(CasanContextMixer, "forward", original_forward)
    torch.testing.assert_close(fast[0], reference[0], **TOLERANCE)
    torch.testing.assert_close(fast[1], reference[1], **TOLERANCE)
    assert fast[2].keys() == reference[2].keys()
    for name, grad in fast[2].items():
        torch.testing.assert_close(grad, reference[2][name], **TOLERANCE, msg=name)


def autograd_split_projection(weight, sources):
    """Deep context's C U as autograd sees it without the custom function: split U, one product per source."""
    d = sources[0].shape[-1]
    return sum(source @ block.t() for source, block in zip(sources, weight.split(d, dim=1), strict=True))


def test_split_projection_follows_autocast(device):
    """Under bf16 autocast the custom function computes in bf16 as mm would, and returns float32 gradients."""
    torch.manual_seed(0)
    weight = torch.randn(8, 12).to(device).requires_grad_()
    sources = [torch.randn(5, 4).to(device).requires_grad_() for _ in range(3)]
    results = []
    for function in (_SplitProjection.apply, lambda w, *s: autograd_split_projection(w, s)):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            projected = function(weight, *sources)
        assert projected.dtype == torch.bfloat16
        grads = torch.autograd.grad(projected.float().square().sum(), [weight, *sources])
        assert all(grad.dtype == torch.float32 for grad in grads)
        results.append((projected, grads))
    (fast, fast_grads), (reference, reference_grads) = results
    torch.testing.assert_close(fast, reference, rtol=2e-2, atol=2e-2)
    for grad, expected in zip(fast_grads, reference_grads, strict=True):
        torch.testing.assert_close(grad, expected, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("context_type", ["global", "deep"])
def test_compiled_training_step_matches_eager(context_type, device):
    """torch.compile traces the mixer's training step, the custom function's backward included."""
    model = context_model(context_type, device)
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3]))
    grads = []
    for forward in (model, torch.compile(model, backend="aot_eager")):
        model.zero_grad(set_to_none=True)
        hidden = forward(input_ids, attention_mask=attention_mask).last_hidden_state
        weighted_sum(hidden).backward()
        grads.append({name: p.grad for name, p in model.named_parameters() if "context_mixer" in name})
    for name, grad in grads[0].items():
        assert grad.norm() > 1e-5, name
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", ["global", "deep", "deep_global"])
def test_compiled_training_step_under_autocast_matches_eager(context_type, gate_per_head, device):
    """float32 weights under bf16 autocast (Trainer's `--bf16`), compiled: the gate logits are computed in bf16 as
    eager's matrix-vector products are, so the mix of bf16 states runs, and the gates, outputs and context gradients
    are eager's within bf16 rounding."""
    torch._dynamo.reset()
    model = context_model(context_type, device, gate_per_head=gate_per_head)
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3]))
    results = []
    for forward in (model, torch.compile(model, backend="eager", fullgraph=True)):
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            outputs = forward(input_ids, attention_mask=attention_mask, output_context_gates=True)
        weighted_sum(outputs.last_hidden_state.float()).backward()
        grads = {name: p.grad for name, p in model.named_parameters() if "context_mixer" in name}
        results.append((outputs.last_hidden_state, torch.stack(outputs.context_gates), grads))
    (hidden, gates, grads), (compiled_hidden, compiled_gates, compiled_grads) = results
    assert compiled_gates.dtype == gates.dtype == torch.bfloat16
    torch.testing.assert_close(compiled_gates, gates, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(compiled_hidden, hidden, rtol=2e-2, atol=2e-2)
    for name, grad in grads.items():
        assert grad.norm() > 1e-5, name
        torch.testing.assert_close(compiled_grads[name], grad, rtol=5e-2, atol=5e-2, msg=name)


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", ["global", "deep"])
def test_training_under_autocast_is_as_close_as_autograd(context_type, gate_per_head, device, monkeypatch):
    """bf16 autocast: the mixer computes in bf16 and returns float32 gradients, the custom function of deep's C U
    about as far from the float32 gradients as autograd's through the same operators under the same autocast (bf16
    rounding, both)."""
    model = context_model(context_type, device, gate_per_head=gate_per_head)
    input_ids, attention_mask = (tensor.to(device) for tensor in padded_batch([6, 3]))

    def grads(autocast):
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            hidden = model(input_ids, attention_mask=attention_mask).last_hidden_state
        weighted_sum(hidden.float()).backward()
        return {name: p.grad for name, p in model.named_parameters() if "context_mixer" in name}

    exact, fast = grads(autocast=False), grads(autocast=True)
    assert all(grad.dtype == torch.float32 for grad in fast.values())
    monkeypatch.setattr(_SplitProjection, "apply", lambda weight, *sources: autograd_split_projection(weight, sources))
    reference = grads(autocast=True)
    for name, grad in exact.items():
        assert grad.norm() > 1e-5, name
        fast_error = (fast[name] - grad).norm() / grad.norm()
        reference_error = (reference[name] - grad).norm() / grad.norm()
        assert fast_error <= 1.5 * reference_error + 0.01, (name, fast_error, reference_error)
