"""Structured self-attentive sentence embedding (Lin et al., ICLR 2017), a classifier pooling for CASAN.

Instead of one [CLS] vector, r attention hops over the last layer's real tokens each pick out a part of the
sentence: A = softmax(W_s2 tanh(W_s1 H^T)) (r x n) and M = A H (r x d), flattened for the classifier. The
penalty ||A A^T - I||_F^2 pushes the hops towards different tokens.
"""

import torch
from torch import nn


class StructuredSelfAttentivePooling(nn.Module):
    """`(batch, n, d)` hidden states -> `(batch, r * d)` sentence vector and the hops A `(batch, r, n)`."""

    def __init__(self, config):
        super().__init__()
        self.hidden = nn.Linear(config.hidden_size, config.pooling_hidden, bias=False)  # W_s1
        self.hops = nn.Linear(config.pooling_hidden, config.pooling_hops, bias=False)  # W_s2

    def forward(self, hidden_states, token_mask=None):
        scores = self.hops(torch.tanh(self.hidden(hidden_states))).transpose(1, 2)
        if token_mask is not None:
            # The most negative finite score rather than -inf: padding still gets exactly 0 (exp underflows),
            # and a row without real tokens stays finite.
            padding = token_mask[:, None, :] == 0
            scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1)
        return torch.bmm(attention, hidden_states).flatten(1), attention


def hop_penalty(attention):
    """Lin et al.'s ||A A^T - I||_F^2, averaged over the batch; `attention` is `(batch, r, n)`."""
    gram = torch.bmm(attention, attention.transpose(1, 2))
    identity = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return (gram - identity).pow(2).sum(dim=(1, 2)).mean()
