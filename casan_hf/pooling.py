"""The sentence vector of the heads that classify one (sequence classification, multiple choice), chosen by
`classifier_pooling`:

- `"cls"`: BERT's pooler on [CLS], which lives in the encoder (`bert.pooler.*`) so BERT classifiers load;
- `"mean"`: the masked mean of the last layer over the real tokens;
- `"structured"`: the structured self-attentive sentence embedding (Lin et al., ICLR 2017). Instead of one
  vector, r attention hops over the last layer's real tokens each pick out a part of the sentence:
  A = softmax(W_s2 tanh(W_s1 H^T)) (r x n) and M = A H (r x d), flattened for the classifier. The penalty
  ||A A^T - I||_F^2, added to the loss, pushes the hops towards different tokens.
"""

import torch
from torch import nn

from .context import masked_mean


class SentencePooling(nn.Module):
    """`(batch, n, d)` last hidden states -> `(batch, output_size)` sentence vector, and the structured hops
    A `(batch, r, n)` (None for the other poolings). Only `"structured"` has parameters (`hidden` = W_s1 and
    `hops` = W_s2)."""

    def __init__(self, config):
        super().__init__()
        self.config = config  # the penalty weight is read at each step, so that it may change after building
        self.kind = config.classifier_pooling
        self.output_size = config.hidden_size
        if self.kind == "structured":
            self.hidden = nn.Linear(config.hidden_size, config.pooling_hidden, bias=False)
            self.hops = nn.Linear(config.pooling_hidden, config.pooling_hops, bias=False)
            self.output_size = config.pooling_hops * config.hidden_size

    def forward(self, hidden_states, token_mask=None, pooler_output=None):
        if self.kind == "cls":
            return pooler_output, None
        if self.kind == "mean":
            return masked_mean(hidden_states, token_mask), None
        scores = self.hops(torch.tanh(self.hidden(hidden_states))).transpose(1, 2)
        if token_mask is not None:
            # The most negative finite score rather than -inf: padding still gets exactly 0 (exp underflows),
            # and a row without real tokens stays finite.
            padding = token_mask[:, None, :] == 0
            scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1)
        return torch.bmm(attention, hidden_states).flatten(1), attention

    def add_penalty(self, loss, hops):
        """The loss with the weighted hop penalty added; the penalty joins only a loss there is to train."""
        if loss is None or hops is None or self.config.pooling_penalty == 0:
            return loss
        return loss + self.config.pooling_penalty * hop_penalty(hops)


def hop_penalty(attention):
    """Lin et al.'s ||A A^T - I||_F^2, averaged over the batch; `attention` is `(batch, r, n)`."""
    gram = torch.bmm(attention, attention.transpose(1, 2))
    identity = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return (gram - identity).pow(2).sum(dim=(1, 2)).mean()
