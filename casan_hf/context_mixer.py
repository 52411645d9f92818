"""The mixer of context-aware self-attention: the gates that take a layer's context C into its query and key,
and the self-attention that uses them (BERT's and Marian's encoders share `self_attention_with_context`).

    Q^ = (1 - lam_Q) * Q + lam_Q * (C U_Q),    lam_Q = sigmoid(Q v_Q^H + (C U_Q) v_Q^C + b_Q)

and the same for K, on the full d-dimensional Q and K before the head split (`gate_per_head`: a gate per head,
`CasanContextMixer.forward`); the 1/sqrt(d_head) scaling is left to the attention function, as in BERT. The gate
and the mix are plain operators, so autograd differentiates them; deep context's C U has a hand-written backward
(`_SplitProjection`). On a GPU the gate and the mix run as fused Triton kernels instead (`fused_mixer.py`), where
Triton imports, in eager mode; `FUSED_MIXER_MODES` says when, set by `CASAN_FUSED_MIXER` or `set_fused_mixer`.
"""

import os

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .compat import attention_function, eager_attention_forward, init
from .context import CONTEXT_TARGETS, context_kind
from .fused_mixer import (
    FUSED_MIX_OPERATOR,
    _autocast_dtype,
    fused_mix_apply,
    fused_mix_available,
    mix_kernels,
    mix_with_operators,
    prepare,
)
from .local_bias import attend_with_local_bias


# When a mixer runs the fused kernels, where they take the tensors (CUDA, Triton): one of these, the first the default.
# "eager": in eager mode, while torch.compile traces the PyTorch path (inductor fuses it itself; the kernels inside a
# compiled graph have not yet been timed on a GPU: docs/BENCHMARKS.md); "compiled": in compiled graphs too, as the
# fused operator (`FUSED_MIX_OPERATOR`, on any device: its kernel on the CPU is the PyTorch path); "off": never (the
# PyTorch path everywhere, the reference).
FUSED_MIXER_MODES = ("eager", "compiled", "off")
# The environment variable that sets the mode of every mixer built.
FUSED_MIXER_VARIABLE = "CASAN_FUSED_MIXER"


def check_fused_mixer_mode(mode, source):
    """`mode` if it is one of `FUSED_MIXER_MODES`, else a ValueError naming `source`, the value and the modes."""
    if mode not in FUSED_MIXER_MODES:
        raise ValueError(f"{source}={mode!r}: use one of {', '.join(map(repr, FUSED_MIXER_MODES))}")
    return mode


def fused_mixer_default():
    """The mode new mixers take: `CASAN_FUSED_MIXER`, or "eager" where it is not set."""
    return check_fused_mixer_mode(os.environ.get(FUSED_MIXER_VARIABLE, FUSED_MIXER_MODES[0]), FUSED_MIXER_VARIABLE)


def runs_fused(mode, states, compiling):
    """Whether a mixer in `mode` takes the fused kernels for `states`: in a compiled graph (`compiling`), the mode
    "compiled" where the operator `FUSED_MIX_OPERATOR` exists (on tensors the kernels do not take, the CPU's, it runs
    the PyTorch path inside the graph); in eager mode, any mode but "off" where the kernels take the tensors."""
    if compiling:
        return mode == "compiled" and FUSED_MIX_OPERATOR is not None
    return mode != "off" and fused_mix_available(states)


def set_fused_mixer(model, mode):
    """Sets when every context mixer of `model` runs the fused kernels (`mode`, one of `FUSED_MIXER_MODES`): "off"
    keeps the PyTorch path, for comparison and debugging. Returns the number of mixers set."""
    check_fused_mixer_mode(mode, "set_fused_mixer: mode")
    mixers = [module for module in model.modules() if isinstance(module, CasanContextMixer)]
    for mixer in mixers:
        mixer.fused = mode
    return len(mixers)


def _sum_of_products(weight, sources):
    """sum_j H_j W_j^T over the source layers, W_j the j-th `d`-wide column block of `weight`, accumulated in
    place into one output (`sources`: each `(rows, d)`)."""
    d = sources[0].shape[-1]
    projected = torch.mm(sources[0], weight[:, :d].t())
    for index, hidden_states in enumerate(sources[1:], start=1):
        projected.addmm_(hidden_states, weight[:, index * d : (index + 1) * d].t())
    return projected


class _SplitProjection(torch.autograd.Function):
    """Deep context's C U = sum_j H_j U_j with U one parameter split in column blocks, for training.

    Autograd would give each block's gradient separately and concatenate them (`split`'s backward: an extra
    pass over U's gradient and a second U-sized allocation); this backward writes each block's gradient in
    place into the one gradient tensor. Under autocast, the products run in the autocast dtype, as `mm` and
    `addmm` would, and so does the backward. Its backward is not differentiable again (no double backward).
    """

    @staticmethod
    def forward(ctx, weight, *sources):
        device_type = weight.device.type
        dtype = _autocast_dtype(device_type)
        if dtype is not None:
            weight, sources = weight.to(dtype), tuple(source.to(dtype) for source in sources)
        with torch.autocast(device_type, enabled=False):
            projected = _sum_of_products(weight, sources)
        ctx.save_for_backward(weight, *sources)
        return projected

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        weight, *sources = ctx.saved_tensors
        d = sources[0].shape[-1]
        grad = grad.to(weight.dtype)
        grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_weight = weight.new_empty(weight.shape)
            grad_t = grad.t()
            for index, hidden_states in enumerate(sources):
                torch.mm(grad_t, hidden_states, out=grad_weight[:, index * d : (index + 1) * d])
        grad_sources = [
            grad.mm(weight[:, index * d : (index + 1) * d]) if ctx.needs_input_grad[index + 1] else None
            for index in range(len(sources))
        ]
        return grad_weight, *grad_sources


# `config._attn_implementation` -> the attention function, resolved at every call as transformers' layers do (the
# implementation may be changed on a built model).
attention_interface = attention_function(ALL_ATTENTION_FUNCTIONS)


def gates_shape(config, batch, n):
    """The shape of a layer's gates: `(batch, 2, n)`, or `(batch, 2, heads, n)` with `gate_per_head`."""
    heads = (config.num_attention_heads,) if config.gate_per_head else ()
    return (batch, len(CONTEXT_TARGETS), *heads, n)


def self_attention_with_context(attention, projections, hidden_states, attention_mask, context, dropout, **kwargs):
    """A context-aware layer's self-attention (BERT's and Marian's): its query and key `projections` take the
    `context` (the layer's `ContextPlan.layer_context`, empty where it takes none) through the `attention` module's
    `context_mixer`, then `config._attn_implementation` attends (with `dropout` in training), and the `output_gate`,
    where there is one, gates each head's output. Returns the heads' outputs joined `(batch, n, d)`, the weights
    (eager only) and the gates (`gates_shape`; zero where a layer mixes none), these only when
    `output_context_gates` asks for them (else None: nothing is computed for them; the models' forward puts the
    config's `output_context_gates` into the keyword arguments when they are not given it)."""
    query_projection, key_projection, value_projection = projections
    positions = kwargs.pop("token_positions", None)
    query, key = query_projection(hidden_states), key_projection(hidden_states)
    query, key, gates = mix_context(attention, query, key, context, kwargs.get("output_context_gates", False))
    windows = local_windows(attention, query, key, positions)
    hidden_shape = (*hidden_states.shape[:-1], -1, attention.head_dim)
    query = query.view(hidden_shape).transpose(1, 2)
    key = key.view(hidden_shape).transpose(1, 2)
    value = value_projection(hidden_states).view(hidden_shape).transpose(1, 2)
    interface = attention_interface(attention.config._attn_implementation, eager_attention_forward)
    kwargs.update(dropout=dropout if attention.training else 0.0, scaling=attention.scaling)
    if windows is None:
        output, weights = interface(attention, query, key, value, attention_mask, **kwargs)
    else:
        output, weights = attend_with_local_bias(
            attention, interface, query, key, value, attention_mask, windows, positions, **kwargs
        )  # output: (batch, n, heads, d_head)
    output = gate_head_outputs(attention, output, hidden_states, context)
    return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights, gates


def mix_context(attention, query, key, context, return_gates):
    """The first step of a context-aware self-attention, for attentions that do more between the projections and the
    attention than `self_attention_with_context` (ModernBERT's rotary embedding): the full-width `query` and `key`
    `(batch, n, d)` with the layer's `context` mixed in by the `attention` module's `context_mixer` (as they were
    where it has none, or the layer takes no context), and the gates (`gates_shape`, zero where nothing is mixed)
    when `return_gates`, else None."""
    if attention.context_mixer is not None and context:
        return attention.context_mixer(query, key, context, return_gates)
    gates = query.new_zeros(gates_shape(attention.config, *query.shape[:2])) if return_gates else None
    return query, key, gates


def local_windows(attention, query, key, positions):
    """The `LocalWindows` of the `attention` module's `local_bias` from its full-width (mixed) `query` and `key`
    `(batch, n, d)` and the batch's `TokenPositions`, or None where the layer adds no local bias."""
    if attention.local_bias is None:
        return None
    (predicted,) = attention.local_bias(query, key, positions)
    return attention.local_bias.windows_of(predicted)


def gate_head_outputs(attention, output, hidden_states, context):
    """The heads' outputs `(batch, n, heads, d_head)` through the `attention` module's `output_gate`, driven by the
    attention's input `hidden_states` (and the layer's `context`), or unchanged where it has none."""
    if attention.output_gate is None:
        return output
    (head_gate,) = attention.output_gate(hidden_states, context)
    return output * head_gate.view(*output.shape[:3], -1)


class CasanOutputGate(nn.Module):
    """A sigmoid gate on each head's attention output, before the output projection (Qiu et al. 2025, "Gated
    Attention for Large Language Models"), driven by the layer input X and, with `output_gate_context`, by the
    layer's context C: sigmoid(X W^T + C W_C^T + b), one gate per head and token ("headwise") or per channel and
    token ("elementwise"). With `output_gate_start="one"` the gate is 2 sigmoid(...) from zero weights, exactly 1
    at the start, so that a converted checkpoint keeps its outputs; with "half" the plain sigmoid from normal
    weights, as the paper trains from scratch.

    Returns a 1-tuple, so that transformers' output recorder (`head_gates`) takes the gate itself:
    `(batch, n, heads)` or `(batch, n, d)`."""

    def __init__(self, config, context_size):
        super().__init__()
        width = config.num_attention_heads if config.output_gate == "headwise" else config.hidden_size
        self.hidden_size = config.hidden_size
        self.doubled = config.output_gate_start == "one"
        self.per_token = context_kind(config).per_token
        self.weight = nn.Parameter(torch.empty(width, config.hidden_size))
        self.bias = nn.Parameter(torch.empty(width))
        # W_C: one product per sentence (sentence context) or a sum of per-layer products (deep), as C U is.
        self.context_weight = nn.Parameter(torch.empty(width, context_size)) if context_size else None

    @torch.no_grad()
    def initialize(self, std):
        """Zero weights for the start "one" (the gate is exactly 1), else W and W_C ~ N(0, std) and b = 0."""
        weights = (self.weight,) if self.context_weight is None else (self.weight, self.context_weight)
        for weight in weights:
            if self.doubled:
                init.zeros_(weight)
            else:
                init.normal_(weight, mean=0.0, std=std)
        init.zeros_(self.bias)

    def forward(self, hidden_states, context=()):
        logits = F.linear(hidden_states, self.weight, self.bias)
        if self.context_weight is not None and context:
            if self.per_token:
                blocks = self.context_weight.split(self.hidden_size, dim=1)
                for source, block in zip(context, blocks, strict=True):
                    logits = logits + F.linear(source, block)
            else:
                (sentence,) = context
                logits = logits + F.linear(sentence, self.context_weight).unsqueeze(1)
        gate = torch.sigmoid(logits)
        return (2 * gate if self.doubled else gate,)


def attention_head_dim(config):
    """The width of one attention head, or a ValueError where the hidden size does not split into the heads."""
    if config.hidden_size % config.num_attention_heads != 0:
        raise ValueError(
            f"The hidden size ({config.hidden_size}) is not a multiple of the number of attention "
            f"heads ({config.num_attention_heads})"
        )
    return config.hidden_size // config.num_attention_heads


def layer_context_mixer(config, layer_idx):
    """Layer `layer_idx`'s `CasanContextMixer`, None where the layer mixes no context into its query or key."""
    return CasanContextMixer(config, config.context_size(layer_idx)) if config.mixes_context(layer_idx) else None


def output_gate(config, layer_idx):
    """Layer `layer_idx`'s `CasanOutputGate` (None without `output_gate`), taking the layer's context where the
    config says so and the layer has one."""
    if config.output_gate is None:
        return None
    takes_context = config.output_gate_context and config.layer_has_context(layer_idx)
    return CasanOutputGate(config, config.context_size(layer_idx) if takes_context else 0)


class CasanContextMixer(nn.Module):
    """Projects a layer's context (C U) and gates it into the query and/or key.

    The targets share one projection matrix, so both come out of a single matmul. Sentence-level context is a
    `(batch, d_c)` tensor, one small matmul per sentence; per-token context is the tuple of earlier layer inputs,
    projected as a sum of per-layer products so that their `n x d_c` concatenation is never built. Everything the
    config decides is fixed in `__init__`: a forward reads no config.

    An encoder's mixer mixes both targets at the hidden size, with a gate per head of the config's heads. A causal
    model's attention (`modeling_casan_causal.py`) builds one mixer per target, where the query and the key differ
    in width (grouped-query attention, a `head_dim` of its own): `targets`, `width` (of the mixed states) and
    `heads` (the heads a per-head gate follows) say so, and `per_token` that its context is per token (prefix
    means) whatever the kind.
    """

    def __init__(self, config, context_size, targets=None, width=None, heads=None, per_token=None):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.width = config.hidden_size if width is None else width
        self.per_token = context_kind(config).per_token if per_token is None else per_token
        wanted = config.context_targets if targets is None else targets
        self.targets = tuple(target for target in CONTEXT_TARGETS if target in wanted)
        self.rank = config.context_rank
        self.dynamic = config.gate == "dynamic"
        self.fixed_gate = config.fixed_gate
        self.gate_heads = (config.num_attention_heads if heads is None else heads) if config.gate_per_head else 1
        self.gate_per_head = config.gate_per_head
        # The gate channels a lone target leaves empty, as F.pad's (before, after) on the channel dimension.
        channel = CONTEXT_TARGETS.index(self.targets[0])
        self.missing_channels = (channel, len(CONTEXT_TARGETS) - len(self.targets) - channel)
        num_targets = len(self.targets)
        # When the fused kernels run (`FUSED_MIXER_MODES`): `set_fused_mixer`.
        self.fused = fused_mixer_default()

        # Full rank: U_Q and U_K stacked, (T * width) x d_c. Low rank (U = A B): A_Q and A_K stacked,
        # (T * r) x d_c, then one B (r x width) per target in `context_up`.
        rows = self.width if self.rank is None else self.rank
        self.context_weight = nn.Parameter(torch.empty(num_targets * rows, context_size))
        if self.rank is not None:
            self.context_up = nn.Parameter(torch.empty(num_targets, self.rank, self.width))
        if self.dynamic:
            # v^H and v^C per target: of the mixed width, or d_head with `gate_per_head` (one vector for every head).
            gate_width = self.width // self.gate_heads
            self.gate_hidden = nn.Parameter(torch.empty(num_targets, gate_width))
            self.gate_context = nn.Parameter(torch.empty(num_targets, gate_width))
            self.gate_bias = nn.Parameter(torch.empty(num_targets))
        # `context_start="zero"`: each target's gate times a learned factor that starts at 0, so that the mixed
        # states are the plain ones exactly until it trains (a converted checkpoint keeps its outputs).
        self.context_scale = nn.Parameter(torch.empty(num_targets)) if config.context_start == "zero" else None

    @torch.no_grad()
    def initialize(self, std, gate_bias_init):
        """U (or A and B) and the gate vectors ~ N(0, std), the gate bias at `gate_bias_init`: every gate starts
        near sigmoid(gate_bias_init), so a converted checkpoint starts near its source; the gates' factor
        (`context_start="zero"`) at 0. The models' `_init_weights` call it with their config's values."""
        init.normal_(self.context_weight, mean=0.0, std=std)
        if self.rank is not None:
            init.normal_(self.context_up, mean=0.0, std=std)
        if self.dynamic:
            init.normal_(self.gate_hidden, mean=0.0, std=std)
            init.normal_(self.gate_context, mean=0.0, std=std)
            init.constant_(self.gate_bias, gate_bias_init)
        if self.context_scale is not None:
            init.zeros_(self.context_scale)

    def project(self, context):
        """C U for every target from the layer's context tuple, targets first: `(T, batch, 1, width)` for sentence
        context, `(T, batch, n, width)` per token (full rank: a view of the product's `(batch, rows, T * width)`
        layout)."""
        if not self.per_token:
            (sentence,) = context
            batch, rows = sentence.shape[0], 1
            projected = F.linear(sentence, self.context_weight)
        else:
            # addmm adds each source's product into the running sum. Compiled, the plain operators are traced: dynamo
            # cannot trace the custom backward's writes into column blocks of the gradient (`out=` a view).
            batch, rows = context[0].shape[:2]
            sources = [hidden_states.view(batch * rows, -1) for hidden_states in context]
            custom_backward = torch.is_grad_enabled() and not torch.compiler.is_compiling()
            if custom_backward and any(t.requires_grad for t in (self.context_weight, *sources)):
                projected = _SplitProjection.apply(self.context_weight, *sources)
            else:
                weights = self.context_weight.split(self.hidden_size, dim=1)
                projected = F.linear(sources[0], weights[0])
                for hidden_states, weight in zip(sources[1:], weights[1:], strict=True):
                    projected = torch.addmm(projected, hidden_states, weight.t())
        num_targets = len(self.targets)
        if self.rank is None:
            return projected.view(batch, rows, num_targets, self.width).permute(2, 0, 1, 3)
        # (T, batch * rows, r) @ (T, r, d): one batched product for every target.
        low = projected.view(batch * rows, num_targets, self.rank).transpose(0, 1)
        return torch.bmm(low, self.context_up).view(num_targets, batch, rows, self.width)

    def forward(self, query, key, context, return_gates=True):
        """Mixes the context into the targets among `query` and `key` (each `(batch, n, d)`).

        Returns the mixed query and key (a target without context comes back as it was) and the gates `(batch, 2,
        n)`, or `(batch, 2, heads, n)` with `gate_per_head`, in the mixed states' dtype: channel 0 lambda_Q, channel
        1 lambda_K (times the gates' factor with `context_start="zero"`), 0 for a target that takes no context
        (None with `return_gates=False`: the attention asks for them only when they are returned).

        The fused kernels (`FusedMix`, or compiled the operator `FUSED_MIX_OPERATOR`) mix every target in one pass
        where they take the tensors; otherwise `mix_with_operators` does it with PyTorch operators (the PyTorch
        path).
        """
        targets = tuple(query if target == "query" else key for target in self.targets)
        projected = self.project(context)  # (T, batch, 1 or n, d)
        compiling = torch.compiler.is_compiling()
        if runs_fused(self.fused, query, compiling):
            mixed, gate = self.fused_mix(targets, projected, return_gates, compiling)
        else:  # the PyTorch path
            mixed, gate = mix_with_operators(
                projected, targets, *self.parameters_of_gate(), self.fixed_gate, self.gate_heads, self.per_token
            )
            mixed = mixed.unbind()
        if self.context_scale is not None:  # plain + s (mixed - plain): the plain states exactly while s is 0
            scales = self.context_scale.to(query.dtype)
            mixed = tuple(
                plain + scale * (states - plain) for plain, states, scale in zip(targets, mixed, scales, strict=True)
            )
            if gate is not None:
                gate = gate * self.context_scale.view(-1, 1, 1, 1)
        for target, states in zip(self.targets, mixed, strict=True):
            if target == "query":
                query = states
            else:
                key = states
        if not return_gates:
            return query, key, None
        if gate is None:
            gate = query.new_full((len(self.targets), *query.shape[:2], 1), self.fixed_gate)
            if self.context_scale is not None:
                gate = gate * self.context_scale.view(-1, 1, 1, 1)
        gates = gate.to(query.dtype).permute(1, 0, 3, 2)  # (batch, T, heads, n)
        if not self.gate_per_head:
            gates = gates.squeeze(2)
        if len(self.targets) < len(CONTEXT_TARGETS):
            gates = F.pad(gates, (0, 0) * (gates.dim() - 2) + self.missing_channels)
        return query, key, gates

    def parameters_of_gate(self):
        """v^H, v^C and b, or three None for the fixed gate."""
        return (self.gate_hidden, self.gate_context, self.gate_bias) if self.dynamic else (None, None, None)

    def fused_mix(self, targets, projected, return_gates, compiling):
        """The fused path: the mixed states and the gate `(T, batch, n, heads)` in fp32 (None for the fixed gate),
        written only where they are returned or a gradient needs them. Compiled, through the operator; eager,
        through `FusedMix` (`fused_mix_apply`) where a gradient will be asked for, else the kernel alone (no
        autograd's bookkeeping)."""
        projected, targets, parameters = prepare(projected, targets, self.parameters_of_gate())
        tracked = False
        if torch.is_grad_enabled():  # a loop, not a generator: no Python frame of its own
            for tensor in (projected, *parameters, *targets):
                if tensor is not None and tensor.requires_grad:
                    tracked = True
                    break
        second = targets[1] if len(targets) > 1 else None
        arguments = (projected, targets[0], second, *parameters, self.fixed_gate, self.gate_heads)
        if compiling:
            mixed, gate = FUSED_MIX_OPERATOR(*arguments, return_gates or tracked)
        elif tracked:
            mixed, gate = fused_mix_apply(*arguments, True)
        else:
            mixed, gate = mix_kernels(*arguments, return_gates)
        return mixed.unbind(), gate if self.dynamic else None
