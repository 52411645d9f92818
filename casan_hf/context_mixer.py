"""The mixer of context-aware self-attention: the gates that take a layer's context C into its query and key,
and the self-attention that uses them (BERT's and Marian's encoders share `self_attention_with_context`).

    Q^ = (1 - lam_Q) * Q + lam_Q * (C U_Q),    lam_Q = sigmoid(Q v_Q^H + (C U_Q) v_Q^C + b_Q)

and the same for K, on the full d-dimensional Q and K before the head split (`gate_per_head`: a gate per head,
`CasanContextMixer.forward`); the 1/sqrt(d_head) scaling is left to the attention function, as in BERT. Two fused
autograd functions (`_SplitProjection`, `_GateAndMix`) compute it with a hand-written backward.
"""

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .compat import attention_function, eager_attention_forward, init
from .context import CONTEXT_TARGETS, context_kind


def _autocast_dtype(device_type):
    """The dtype autocast computes products in on `device_type`, or None where autocast is off."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


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


def _gate_and_mix(plain, projected, gate_hidden, gate_context, gate_bias):
    """The dynamic gate and the mix of every target at once: `plain` `(T, batch, n, d)`, `projected` (C U)
    `(T, batch, rows, d)` with rows 1 (sentence context, broadcast) or n. Returns the mixed states and the gates
    `(T, batch, n, 1)`.

    lambda = sigmoid(X v^H + (C U) v^C + b): the context side once per sentence (or token) by one batched
    matrix-vector product with the bias, the hidden side by a second one, which adds the first when both
    have a row per token.
    """
    num_targets, batch, n, d = plain.shape
    rows = projected.shape[2]
    context_logits = torch.baddbmm(
        gate_bias[:, None, None], projected.reshape(num_targets, batch * rows, d), gate_context[..., None]
    )
    hidden = plain.view(num_targets, batch * n, d)
    if rows == n:
        logits = torch.baddbmm(context_logits, hidden, gate_hidden[..., None])
    else:
        logits = torch.bmm(hidden, gate_hidden[..., None]).view(num_targets, batch, n)
        logits = logits + context_logits.view(num_targets, batch, 1)
    gate = torch.sigmoid(logits.view(num_targets, batch, n, 1))
    return torch.lerp(plain, projected, gate), gate


class _GateAndMix(torch.autograd.Function):
    """`_gate_and_mix` with a backward of its own, for training: the gradients of lerp, sigmoid and both
    logit products in 11-12 operators for all targets, where autograd runs about 18 (lerp's backward alone
    is 7, each broadcast input's gradient reduced on its own). Under autocast it computes in the autocast
    dtype, as the operators would. Its backward is not differentiable again (no double backward)."""

    @staticmethod
    def forward(ctx, plain, projected, gate_hidden, gate_context, gate_bias):
        device_type = plain.device.type
        dtype = _autocast_dtype(device_type)
        if dtype is not None:
            plain, projected = plain.to(dtype), projected.to(dtype)
            gate_hidden, gate_context, gate_bias = gate_hidden.to(dtype), gate_context.to(dtype), gate_bias.to(dtype)
        with torch.autocast(device_type, enabled=False):
            mixed, gate = _gate_and_mix(plain, projected, gate_hidden, gate_context, gate_bias)
        ctx.save_for_backward(plain, projected, gate, gate_hidden, gate_context)
        ctx.set_materialize_grads(False)
        return mixed, gate

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_mixed, grad_gate):
        plain, projected, gate, gate_hidden, gate_context = ctx.saved_tensors
        num_targets, batch, n, d = plain.shape
        rows = projected.shape[2]
        if grad_mixed is None:
            grad_mixed = torch.zeros_like(plain)
        grad_mixed = grad_mixed.to(plain.dtype).contiguous()
        # d lambda = <dY, C U - X>, then through the sigmoid
        grad_logits = (grad_mixed * (projected - plain)).sum(-1, keepdim=True)
        if grad_gate is not None:
            grad_logits = grad_logits + grad_gate.to(grad_logits.dtype)
        grad_logits = torch.ops.aten.sigmoid_backward(grad_logits, gate).view(num_targets, batch * n, 1)
        # dX = (1 - lambda) dY + dz v^H
        grad_plain = torch.addcmul(grad_mixed, grad_mixed, gate, value=-1).view(num_targets, batch * n, d)
        grad_plain.baddbmm_(grad_logits, gate_hidden[:, None, :])
        # d(C U) = sum over the broadcast rows of lambda dY, plus dz_context v^C
        if rows == n:
            grad_projected = (grad_mixed * gate).view(num_targets, batch * n, d)
            grad_context_logits = grad_logits
        else:
            grad_projected = torch.bmm(
                gate.view(num_targets * batch, 1, n), grad_mixed.view(num_targets * batch, n, d)
            )
            grad_projected = grad_projected.view(num_targets, batch, d)
            grad_context_logits = grad_logits.view(num_targets, batch, n).sum(-1, keepdim=True)
        grad_projected.baddbmm_(grad_context_logits, gate_context[:, None, :])
        grad_gate_hidden = torch.bmm(grad_logits.transpose(1, 2), plain.view(num_targets, batch * n, d))
        flat_projected = projected.reshape(num_targets, batch * rows, d)
        grad_gate_context = torch.bmm(grad_context_logits.transpose(1, 2), flat_projected)
        grad_gate_bias = grad_context_logits.sum((1, 2))
        return (
            grad_plain.view_as(plain),
            grad_projected.view(projected.shape),
            grad_gate_hidden.squeeze(1),
            grad_gate_context.squeeze(1),
            grad_gate_bias,
        )


def gates_shape(config, batch, n):
    """The shape of a layer's gates: `(batch, 2, n)`, or `(batch, 2, heads, n)` with `gate_per_head`."""
    heads = (config.num_attention_heads,) if config.gate_per_head else ()
    return (batch, len(CONTEXT_TARGETS), *heads, n)


def self_attention_with_context(attention, projections, hidden_states, attention_mask, context, dropout, **kwargs):
    """A context-aware layer's self-attention (BERT's and Marian's): its query and key `projections` take the
    `context` through the `attention` module's `context_mixer`, then `config._attn_implementation` attends (with
    `dropout` in training). Returns the heads' outputs joined `(batch, n, d)`, the weights (eager only) and the
    gates (`gates_shape`; zero where a layer takes none: no mixer, or deep's first layer with its empty context)."""
    query_projection, key_projection, value_projection = projections
    query, key = query_projection(hidden_states), key_projection(hidden_states)
    if attention.context_mixer is not None and context:
        query, key, gates = attention.context_mixer(query, key, context)
    else:
        gates = query.new_zeros(gates_shape(attention.config, query.shape[0], query.shape[1]))
    hidden_shape = (*hidden_states.shape[:-1], -1, attention.head_dim)
    query, key, value = (
        states.view(hidden_shape).transpose(1, 2) for states in (query, key, value_projection(hidden_states))
    )
    interface = attention_function(
        ALL_ATTENTION_FUNCTIONS, attention.config._attn_implementation, eager_attention_forward
    )
    dropout = dropout if attention.training else 0.0
    output, weights = interface(
        attention, query, key, value, attention_mask, dropout=dropout, scaling=attention.scaling, **kwargs
    )
    return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights, gates


def _heads_as_batch(states, heads):
    """`(T, batch, rows, d) -> (T, batch * heads, rows, d / heads)`: each head's slice as a sentence of its own,
    so that the gate and the mix, written for one gate per row, give one gate per row and head (`states` itself
    when `heads` is 1)."""
    if heads == 1:
        return states
    num_targets, batch, rows, d = states.shape
    per_head = states.view(num_targets, batch, rows, heads, d // heads).transpose(2, 3).contiguous()
    return per_head.view(num_targets, batch * heads, rows, d // heads)


def _heads_back(states, heads):
    """The inverse of `_heads_as_batch`: `(T, batch * heads, n, d / heads) -> (T, batch, n, d)`."""
    if heads == 1:
        return states
    num_targets, batch_heads, n, head_size = states.shape
    per_head = states.view(num_targets, batch_heads // heads, heads, n, head_size).transpose(2, 3)
    return per_head.reshape(num_targets, batch_heads // heads, n, heads * head_size)


class CasanContextMixer(nn.Module):
    """Projects a layer's context (C U) and gates it into the query and/or key.

    The targets share one projection matrix, so both come out of a single matmul. Sentence-level context is a
    `(batch, d_c)` tensor, one small matmul per sentence; per-token context is the tuple of earlier layer inputs,
    projected as a sum of per-layer products so that their `n x d_c` concatenation is never built.
    """

    def __init__(self, config, context_size):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.per_token = context_kind(config).per_token
        self.targets = config.context_targets
        self.rank = config.context_rank
        self.dynamic = config.gate == "dynamic"
        self.fixed_gate = config.fixed_gate
        self.gate_heads = config.num_attention_heads if config.gate_per_head else 1
        self.gate_per_head = config.gate_per_head
        num_targets = len(self.targets)

        # Full rank: U_Q and U_K stacked, (T * d) x d_c. Low rank (U = A B): A_Q and A_K stacked,
        # (T * r) x d_c, then one B (r x d) per target in `context_up`.
        width = self.hidden_size if self.rank is None else self.rank
        self.context_weight = nn.Parameter(torch.empty(num_targets * width, context_size))
        if self.rank is not None:
            self.context_up = nn.Parameter(torch.empty(num_targets, self.rank, self.hidden_size))
        if self.dynamic:
            # v^H and v^C per target: of width d, or d_head with `gate_per_head` (one vector for every head).
            gate_width = self.hidden_size // self.gate_heads
            self.gate_hidden = nn.Parameter(torch.empty(num_targets, gate_width))
            self.gate_context = nn.Parameter(torch.empty(num_targets, gate_width))
            self.gate_bias = nn.Parameter(torch.empty(num_targets))

    @torch.no_grad()
    def initialize(self, std, gate_bias_init):
        """U (or A and B) and the gate vectors ~ N(0, std), the gate bias at `gate_bias_init`: every gate starts
        near sigmoid(gate_bias_init), so a converted checkpoint starts near its source. The models'
        `_init_weights` call it with their config's values."""
        init.normal_(self.context_weight, mean=0.0, std=std)
        if self.rank is not None:
            init.normal_(self.context_up, mean=0.0, std=std)
        if self.dynamic:
            init.normal_(self.gate_hidden, mean=0.0, std=std)
            init.normal_(self.gate_context, mean=0.0, std=std)
            init.constant_(self.gate_bias, gate_bias_init)

    def project(self, context):
        """C U for every target from `layer_context`'s tuple, targets first: `(T, batch, 1, d)` for sentence
        context, `(T, batch, n, d)` for deep (a view of the product's `(batch, rows, T * d)` layout)."""
        if not self.per_token:
            (sentence,) = context
            projected = F.linear(sentence, self.context_weight).unsqueeze(1)
        else:
            # addmm adds each source's product into the running sum. Compiled, the plain operators are traced: dynamo
            # cannot trace the custom backward's writes into column blocks of the gradient (`out=` a view).
            rows = context[0].shape[:-1]
            sources = [hidden_states.flatten(0, -2) for hidden_states in context]
            custom_backward = torch.is_grad_enabled() and not torch.compiler.is_compiling()
            if custom_backward and any(t.requires_grad for t in (self.context_weight, *sources)):
                projected = _SplitProjection.apply(self.context_weight, *sources)
            else:
                weights = self.context_weight.split(self.hidden_size, dim=1)
                projected = F.linear(sources[0], weights[0])
                for hidden_states, weight in zip(sources[1:], weights[1:], strict=True):
                    projected = torch.addmm(projected, hidden_states, weight.t())
            projected = projected.unflatten(0, rows)
        batch, rows = projected.shape[:2]
        num_targets = len(self.targets)
        if self.rank is None:
            return projected.unflatten(-1, (num_targets, -1)).permute(2, 0, 1, 3)
        # (T, batch * rows, r) @ (T, r, d): one batched product for every target.
        low = projected.reshape(batch * rows, num_targets, self.rank).transpose(0, 1)
        return torch.bmm(low, self.context_up).unflatten(1, (batch, rows))

    def forward(self, query, key, context):
        """Mixes the context into the targets among `query` and `key` (each `(batch, n, d)`).

        Returns the mixed query and key (a target without context comes back as it was) and the gates
        `(batch, 2, n)`, or `(batch, 2, heads, n)` with `gate_per_head`: channel 0 lambda_Q, channel 1 lambda_K,
        0 for a target that takes no context.

        The targets' states are stacked first, `(T, batch, n, d)`, so that each step of the gate and the mix (and
        its backward) is one operator for both and the mixed query and key are contiguous slices of one tensor.
        With `gate_per_head` (the authors' code), each head's d_head-slice of Q (or K) and of C U is gated as a
        sentence of its own (`_heads_as_batch`), by the same kernels, with v^H and v^C of d_head shared by the heads.
        """
        states = {"query": query, "key": key}
        if len(self.targets) == 1:
            plain = states[self.targets[0]].unsqueeze(0)
        else:
            plain = torch.stack([states[target] for target in self.targets])
        num_targets, batch, n, _ = plain.shape
        projected = self.project(context)  # (T, batch, 1 or n, d)
        if self.dynamic:
            heads = self.gate_heads
            parameters = (self.gate_hidden, self.gate_context, self.gate_bias)
            plain_rows, projected_rows = _heads_as_batch(plain, heads), _heads_as_batch(projected, heads)
            if torch.is_grad_enabled() and any(t.requires_grad for t in (plain, projected, *parameters)):
                mixed, gate = _GateAndMix.apply(plain_rows, projected_rows, *parameters)
            else:
                mixed, gate = _gate_and_mix(plain_rows, projected_rows, *parameters)
            mixed, gate = _heads_back(mixed, heads), gate.view(num_targets, batch, heads, n)
        else:
            gate = plain.new_full((num_targets, batch, 1, n), self.fixed_gate)
            mixed = torch.lerp(plain, projected, self.fixed_gate)
        for target, state in zip(self.targets, mixed.unbind(0), strict=True):
            states[target] = state
        gates = gate.transpose(0, 1)  # (batch, T, heads, n)
        if not self.gate_per_head:
            gates = gates.squeeze(2)
        if len(self.targets) < len(CONTEXT_TARGETS):
            channel = CONTEXT_TARGETS.index(self.targets[0])
            gates = F.pad(gates, (0, 0) * (gates.dim() - 2) + (channel, len(CONTEXT_TARGETS) - 1 - channel))
        return states["query"], states["key"], gates
