"""The local context of self-attention (Yang et al., "Modeling Localness for Self-Attention Networks", EMNLP 2018;
combined with the global context in "Context-aware Self-Attention Networks for Natural Language Processing",
Neurocomputing 2021): a learnable Gaussian bias on the attention logits of query i, per head,

    G_ij = -(j - P_i)^2 / (2 sigma_i^2),    sigma_i = D_i / 2,
    P_i = (I - 1) sigmoid(v_p^T tanh(W_p Q_i)),    D_i = I sigmoid(v_d^T tanh(W_p Q_i))   ("query")

where I is the number of real tokens and j a real token's 0-based position among them; the window D is instead
`local_window` tokens ("fixed"), or one per sentence and head, I sigmoid(v_d^T tanh(W_d mean_j K_j)), from the layer's
mean key ("layer"). With `local_bias_start="zero"` the bias is scaled by a learned factor per head that starts at 0,
so that a converted checkpoint keeps its outputs.

`CasanLocalBias` predicts each query's centre and window (`LocalWindows`); `attend_with_local_bias` attends with the
bias: eager and sdpa take it in their float mask, beside the padding; flex_attention takes it in a `score_mod`, so no
(n x n) bias is stored; an implementation that takes no bias (flash attention) is refused by name.
"""

from dataclasses import dataclass

import torch
from torch import nn

from .compat import init


# The attention implementations that add the local bias to their logits, and how.
LOCAL_BIAS_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
# The narrowest window taken, in tokens: a window that rounds to 0 (sigmoid underflowing) would divide by 0.
SMALLEST_WINDOW = 1e-3


@dataclass(frozen=True)
class LocalWindows:
    """What a layer's `CasanLocalBias` predicts, float32: `centres` P and `windows` D `(batch, heads, n)` in tokens
    (a window per sentence and head broadcast over the queries for "layer", the constant for "fixed"), and the
    per-head `scale` of the bias `(heads,)`, None where it is not scaled."""

    centres: torch.Tensor
    windows: torch.Tensor
    scale: torch.Tensor | None

    def weights(self):
        """-1 / (2 sigma^2) = -2 / D^2 per query and head `(batch, heads, n, 1)`, times the scale: G_ij is this
        times (j - P_i)^2."""
        weight = -2.0 / self.windows.clamp(min=SMALLEST_WINDOW).square()
        if self.scale is not None:
            weight = weight * self.scale.view(-1, 1)
        return weight.unsqueeze(-1)

    def bias(self, positions):
        """The bias G `(batch, heads, n, n)` on the logits of every query (rows) and key (columns), float32."""
        distances = positions.positions[:, None, None, :] - self.centres.unsqueeze(-1)
        return self.weights() * distances.square()


class CasanLocalBias(nn.Module):
    """Predicts a layer's local windows from its query (and, for "layer", its mean key): W_p and v_p (with v_d for
    "query", one product for both) as the paper writes them, with biases as the authors' code has them.

    Returns a 1-tuple, so that transformers' output recorder (`local_windows`) takes the tensor itself: `(batch, 2,
    heads, n)` float32, channel 0 each query's centre P and channel 1 its window D, in tokens (`windows_of` reads it
    with the scale)."""

    def __init__(self, config):
        super().__init__()
        hidden_size, self.heads = config.hidden_size, config.num_attention_heads
        self.kind = config.local_bias
        self.fixed_window = config.local_window
        self.position_hidden = nn.Linear(hidden_size, hidden_size)
        # v_p, and for "query" v_d beside it: one output per head each.
        self.position_out = nn.Linear(hidden_size, self.heads * (2 if self.kind == "query" else 1))
        if self.kind == "layer":
            self.window_hidden = nn.Linear(hidden_size, hidden_size)
            self.window_out = nn.Linear(hidden_size, self.heads)
        self.scale = nn.Parameter(torch.empty(self.heads)) if config.local_bias_start == "zero" else None

    @torch.no_grad()
    def initialize(self, std):
        """Weights ~ N(0, std), biases 0 (every centre starts mid-sentence, every window at half of it), the scale
        at 0."""
        for module in self.children():
            init.normal_(module.weight, mean=0.0, std=std)
            init.zeros_(module.bias)
        if self.scale is not None:
            init.zeros_(self.scale)

    def forward(self, query, key, positions):
        """`query` and `key` `(batch, n, d)`, full width (the heads' slices side by side); `positions` the batch's
        `context.TokenPositions`."""
        batch, n = query.shape[:2]
        dtype = torch.promote_types(query.dtype, torch.float32)  # the Gaussian in float32 at least
        predicted = self.position_out(torch.tanh(self.position_hidden(query))).to(dtype)
        predicted = predicted.view(batch, n, -1, self.heads).permute(2, 0, 3, 1)  # (1 or 2, batch, heads, n)
        lengths = positions.lengths.unsqueeze(-1)  # (batch, 1, 1)
        centres = (lengths - 1) * torch.sigmoid(predicted[0])
        if self.kind == "query":
            windows = lengths * torch.sigmoid(predicted[1])
        elif self.kind == "layer":
            mean_key = key.mean(dim=1) if positions.mean_weights is None else self.masked_mean(key, positions)
            window = self.window_out(torch.tanh(self.window_hidden(mean_key))).to(dtype)  # (batch, heads)
            windows = (lengths * torch.sigmoid(window).unsqueeze(-1)).expand(-1, -1, n)
        else:
            windows = centres.new_full((), self.fixed_window).expand_as(centres)
        return (torch.stack((centres, windows), dim=1),)

    def windows_of(self, predicted):
        """The `LocalWindows` of what `forward` returned."""
        return LocalWindows(predicted[:, 0], predicted[:, 1], self.scale)

    @staticmethod
    def masked_mean(key, positions):
        return torch.bmm(positions.mean_weights.to(key.dtype), key).squeeze(1)


def local_bias(config, layer_idx):
    """Layer `layer_idx`'s `CasanLocalBias`, None where the layer adds none (`has_local_bias`)."""
    return CasanLocalBias(config) if config.has_local_bias(layer_idx) else None


def check_local_bias_implementation(implementation):
    """Refuses, naming it, an attention implementation that cannot add the bias to its logits."""
    if implementation not in LOCAL_BIAS_IMPLEMENTATIONS:
        raise ValueError(
            f"The local bias (`local_bias`) is added to the attention logits, which attn_implementation="
            f"{implementation!r} does not take; use one of {', '.join(map(repr, LOCAL_BIAS_IMPLEMENTATIONS))}."
        )


def additive_mask(attention_mask, bias, dtype):
    """The float mask that adds `bias` `(batch, heads, n, n)` (float32) to the logits beside the padding of
    `attention_mask` (None, a boolean mask that is True where a key is attended, or transformers' additive float
    mask), in `dtype`, floored at its lowest value (a row of huge negative biases stays finite)."""
    lowest = torch.finfo(dtype).min
    if attention_mask is None:
        combined = bias
    elif attention_mask.dtype == torch.bool:
        combined = bias.masked_fill(~attention_mask[..., : bias.shape[-1]], lowest)
    else:
        combined = bias + attention_mask[..., : bias.shape[-1]].float()
    return combined.clamp(min=lowest).to(dtype)


def flex_attention_with_local_bias(module, query, key, value, block_mask, windows, positions, scaling):
    """flex_attention with the bias computed inside its `score_mod` from the per-query centres and weights (no
    (n x n) tensor): `block_mask` is transformers' padding mask (a `BlockMask`, or None)."""
    from transformers.integrations.flex_attention import compile_friendly_flex_attention

    centres, weights = windows.centres, windows.weights().squeeze(-1)
    key_positions = positions.positions

    def score_mod(score, batch_index, head_index, query_index, key_index):
        distance = key_positions[batch_index, key_index] - centres[batch_index, head_index, query_index]
        return score + (weights[batch_index, head_index, query_index] * distance * distance).to(score.dtype)

    output = compile_friendly_flex_attention(
        query, key, value, score_mod=score_mod, block_mask=block_mask, scale=scaling, training=module.training
    )
    return output.transpose(1, 2).contiguous(), None


def attend_with_local_bias(module, interface, query, key, value, attention_mask, windows, positions, **kwargs):
    """`interface` (the attention function of `module.config._attn_implementation`) on the heads' `query`, `key`,
    `value` `(batch, heads, n, d_head)` with the local bias of `windows` added to the logits. Returns what the
    interface returns: the output `(batch, n, heads, d_head)` and the weights (eager only)."""
    implementation = module.config._attn_implementation
    check_local_bias_implementation(implementation)
    if implementation == "flex_attention":
        if kwargs.get("dropout", 0.0) > 0:
            raise ValueError(
                "flex_attention takes no attention dropout: train with attn_implementation 'eager' or 'sdpa', or "
                "set the attention dropout to 0."
            )
        return flex_attention_with_local_bias(
            module, query, key, value, attention_mask, windows, positions, kwargs.get("scaling")
        )
    mask = additive_mask(attention_mask, windows.bias(positions), query.dtype)
    return interface(module, query, key, value, mask, **kwargs)


__all__ = ["CasanLocalBias", "LocalWindows", "attend_with_local_bias", "local_bias"]
