"""Context-aware self-attention: BERT's self-attention with context mixed into the query and key.

For a layer input H and a context C (one row per sentence, or one row per token for deep context):

    Q^ = (1 - lam_Q) * Q + lam_Q * (C U_Q),    lam_Q = sigmoid(Q v_Q^H + (C U_Q) v_Q^C + b_Q)

and the same for K. Mixing happens on the full d-dimensional Q and K, before the head split, and the
1/sqrt(d_head) scaling is left to the attention function, as in BERT.
"""

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward

from .configuration_casan import CONTEXT_TARGETS


class CasanContextMixer(nn.Module):
    """Projects a layer's context (C U) and gates it into the query and/or key.

    The targets share one projection matrix, so both come out of a single matmul. Sentence-level context
    (global, deep_global) is a `(batch, d_c)` tensor and costs one small matmul per sentence; deep context
    is the tuple of earlier layer inputs, projected as a sum of per-layer products so that the
    `n x (l-1)d` concatenation is never built.
    """

    def __init__(self, config, context_size):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.targets = config.context_targets
        self.rank = config.context_rank
        self.dynamic = config.gate == "dynamic"
        self.fixed_gate = config.fixed_gate
        num_targets = len(self.targets)

        # Full rank: U_Q and U_K stacked, (T * d) x d_c. Low rank (U = A B): A_Q and A_K stacked,
        # (T * r) x d_c, then one B (r x d) per target in `context_up`.
        width = self.hidden_size if self.rank is None else self.rank
        self.context_weight = nn.Parameter(torch.empty(num_targets * width, context_size))
        if self.rank is not None:
            self.context_up = nn.Parameter(torch.empty(num_targets, self.rank, self.hidden_size))
        if self.dynamic:
            self.gate_hidden = nn.Parameter(torch.empty(num_targets, self.hidden_size))  # v^H per target
            self.gate_context = nn.Parameter(torch.empty(num_targets, self.hidden_size))  # v^C per target
            self.gate_bias = nn.Parameter(torch.empty(num_targets))

    def project(self, context):
        """C U for every target: `(batch, 1, T, d)` for sentence context, `(batch, n, T, d)` for deep."""
        if isinstance(context, torch.Tensor):
            projected = F.linear(context, self.context_weight).unsqueeze(1)
        else:
            rows = context[0].shape[:-1]
            weights = self.context_weight.split(self.hidden_size, dim=1)
            projected = F.linear(context[0].flatten(0, -2), weights[0])
            for hidden_states, weight in zip(context[1:], weights[1:]):
                # addmm adds each source layer's product into the running sum: no temporary, no extra pass.
                projected = torch.addmm(projected, hidden_states.flatten(0, -2), weight.t())
            projected = projected.unflatten(0, rows)
        projected = projected.unflatten(-1, (len(self.targets), -1))
        if self.rank is not None:
            projected = torch.einsum("bntr,trd->bntd", projected, self.context_up)
        return projected

    def forward(self, states, context):
        """Mixes the context into `states` (a dict target -> `(batch, n, d)`), returns the gates per target."""
        projected = self.project(context)
        if self.dynamic:
            # The context side of every target's gate logit, (C U) v^C + b, in one product: (batch, 1 or n, T).
            context_logits = torch.einsum("bntd,td->bnt", projected, self.gate_context) + self.gate_bias
        gates = {}
        for index, target in enumerate(self.targets):
            plain, contextual = states[target], projected[:, :, index]
            if self.dynamic:
                # Few, larger kernels matter on a GPU: baddbmm adds Q v^H to the context side in one.
                gate_hidden = self.gate_hidden[index, :, None].expand(plain.shape[0], -1, -1)
                gate = torch.sigmoid(torch.baddbmm(context_logits[..., index, None], plain, gate_hidden))
            else:
                gate = plain.new_full((*plain.shape[:-1], 1), self.fixed_gate)
            states[target] = torch.lerp(plain, contextual, gate)
            gates[target] = gate.squeeze(-1)
        return gates


class CasanSelfAttention(nn.Module):
    """BERT's self-attention (same `query`/`key`/`value` names, so BERT weights load) plus a context mixer."""

    def __init__(self, config, layer_idx):
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError(
                f"The hidden size ({config.hidden_size}) is not a multiple of the number of attention "
                f"heads ({config.num_attention_heads})"
            )
        self.config = config
        self.layer_idx = layer_idx
        self.is_causal = False
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.attention_head_size**-0.5

        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.context_mixer = (
            CasanContextMixer(config, config.context_size(layer_idx)) if config.layer_has_context(layer_idx) else None
        )

    def forward(self, hidden_states, attention_mask=None, context=None, **kwargs):
        """Returns the attention output, the attention weights (eager only) and the gates `(batch, 2, n)`:
        channel 0 the query gate, channel 1 the key gate, 0 where that target gets no context."""
        hidden_shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        states = {"query": self.query(hidden_states), "key": self.key(hidden_states)}
        gates = {}
        if self.context_mixer is not None and context is not None:
            gates = self.context_mixer(states, context)
        if len(gates) == len(CONTEXT_TARGETS):
            context_gates = torch.stack([gates[target] for target in CONTEXT_TARGETS], dim=1)
        else:
            context_gates = hidden_states.new_zeros((hidden_states.shape[0], len(CONTEXT_TARGETS), hidden_states.shape[1]))
            for channel, target in enumerate(CONTEXT_TARGETS):
                if target in gates:
                    context_gates[:, channel] = gates[target]

        query = states["query"].view(hidden_shape).transpose(1, 2)
        key = states["key"].view(hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(hidden_shape).transpose(1, 2)

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=0.0 if not self.training else self.dropout.p,
            scaling=self.scaling,
            **kwargs,
        )
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        return attn_output, attn_weights, context_gates
