"""The sentence vector of the heads that classify one (sequence classification, multiple choice), chosen by
`classifier_pooling`:

- `"cls"`: the family's own sentence vector: the pooler's output where the head reads a pooler (BERT; RoBERTa's
  multiple choice; the pooler lives in the encoder, `bert.pooler.*`, so the source's classifiers load), else
  the first token itself, to which RoBERTa's and ELECTRA's heads apply their own dense layer;
- `"mean"`: the masked mean of the last layer over the real tokens, in ModernBERT's arithmetic (the masked sum
  over the count), so that its twin gives ModernBERT's "mean" bit for bit;
- `"structured"`: the structured self-attentive sentence embedding (Lin et al., ICLR 2017). Instead of one
  vector, r attention hops over the last layer's real tokens each pick out a part of the sentence:
  A = softmax(W_s2 tanh(W_s1 H^T)) (r x n) and M = A H (r x d), flattened for the classifier. The penalty
  ||A A^T - I||_F^2, added to the loss, pushes the hops towards different tokens.
- `"generalized"`: vector-based multi-head pooling (Chen, Ling and Zhu, COLING 2018). Head i weighs every
  hidden dimension of every token on its own, A^i = softmax over tokens of W_2^i ReLU(W_1^i H^T + b_1^i) +
  b_2^i (d x n), and pools v^i = sum_t a^i_t * h_t (element-wise); the classifier reads [v^1; ...; v^r].
  Three hinge penalties push the heads apart, on their first-layer weights, their attention and their
  outputs, as in the authors' code: each pair of heads i < j once, the distance averaged over the batch
  inside the hinge.
"""

import torch
from torch import nn


class SentencePooling(nn.Module):
    """`(batch, n, d)` last hidden states -> `(batch, output_size)` sentence vector, and the attention of the
    attentive poolings (None for the others): the hops `(batch, r, n)` of "structured", the per-dimension
    weights `(batch, r, n, d)` of "generalized". Parameters: "structured" has `hidden` (W_s1) and `hops`
    (W_s2); "generalized" has `hidden` (the W_1^i and b_1^i of all heads) and `heads` (W_2^i and b_2^i)."""

    def __init__(self, config):
        super().__init__()
        self.config = config  # the penalty weights are read at each step, so that they may change after building
        self.kind = config.classifier_pooling
        self.output_size = config.hidden_size
        if self.kind == "structured":
            self.hidden = nn.Linear(config.hidden_size, config.pooling_hidden, bias=False)
            self.hops = nn.Linear(config.pooling_hidden, config.pooling_hops, bias=False)
        elif self.kind == "generalized":
            self.hidden = nn.Linear(config.hidden_size, config.pooling_hops * config.pooling_hidden)
            self.heads = nn.ModuleList(
                nn.Linear(config.pooling_hidden, config.hidden_size) for _ in range(config.pooling_hops)
            )
        if self.kind in ("structured", "generalized"):
            self.output_size = config.pooling_hops * config.hidden_size

    def forward(self, hidden_states, token_mask=None, pooler_output=None):
        if self.kind == "cls":
            return (hidden_states[:, 0] if pooler_output is None else pooler_output), None
        if self.kind == "mean":
            return mean_of_real_tokens(hidden_states, token_mask), None
        if self.kind == "structured":
            scores = self.hops(torch.tanh(self.hidden(hidden_states))).transpose(1, 2)  # (batch, r, n)
            padding = None if token_mask is None else token_mask[:, None, :] == 0
        else:
            hidden = torch.relu(self.hidden(hidden_states)).unflatten(-1, (len(self.heads), -1))
            scores = torch.stack([head(hidden[..., i, :]) for i, head in enumerate(self.heads)], dim=1)
            padding = None if token_mask is None else token_mask[:, None, :, None] == 0  # (batch, r, n, d)
        if padding is not None:
            # The most negative finite score rather than -inf: padding still gets exactly 0 (exp underflows),
            # and a row without real tokens stays finite.
            scores = scores.masked_fill(padding, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=2)
        if self.kind == "structured":
            return torch.bmm(attention, hidden_states).flatten(1), attention
        return (attention * hidden_states[:, None]).sum(dim=2).flatten(1), attention

    def add_penalty(self, loss, attention, sentence):
        """The loss with the pooling's weighted penalties added (`attention` and `sentence` as `forward`
        returned them); they join only a loss there is to train."""
        if loss is None or attention is None:
            return loss
        if self.kind == "structured":
            if self.config.pooling_penalty:
                loss = loss + self.config.pooling_penalty * hop_penalty(attention)
            return loss
        heads = len(self.heads)
        distances = {
            "parameter": lambda: pairwise_distances(self.hidden.weight.unflatten(0, (heads, -1))[None]),
            "attention": lambda: pairwise_distances(attention),
            "output": lambda: pairwise_distances(sentence.unflatten(1, (heads, -1))),
        }
        for name, distance in distances.items():
            weight = getattr(self.config, f"pooling_{name}_penalty")
            if weight:
                margin = getattr(self.config, f"pooling_{name}_margin")
                loss = loss + weight * torch.relu(margin - distance()).sum()
        return loss


def mean_of_real_tokens(hidden_states, token_mask):
    """`(batch, n, d) -> (batch, d)`, the mean over the tokens where `token_mask` `(batch, n)` is 1 (all where it is
    None), as ModernBERT's heads compute it (a row without real tokens gives 0). Not `context.masked_mean`, a
    product with weights built once per forward for every layer's context, which rounds differently (~1e-7)."""
    if token_mask is None:
        return hidden_states.mean(dim=1)
    count = token_mask.sum(dim=1, keepdim=True).clamp(min=1)
    return (hidden_states * token_mask.unsqueeze(-1)).sum(dim=1) / count


def hop_penalty(attention):
    """Lin et al.'s ||A A^T - I||_F^2, averaged over the batch; `attention` is `(batch, r, n)`."""
    gram = torch.bmm(attention, attention.transpose(1, 2))
    identity = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return (gram - identity).pow(2).sum(dim=(1, 2)).mean()


def pairwise_distances(per_head):
    """The squared distance between every pair of heads i < j, averaged over the batch: `per_head` is
    `(batch, heads, ...)`; returns `(heads * (heads - 1) / 2,)`."""
    flat = per_head.flatten(2)
    first, second = torch.triu_indices(flat.shape[1], flat.shape[1], offset=1, device=flat.device)
    return (flat[:, first] - flat[:, second]).pow(2).sum(-1).mean(0)
