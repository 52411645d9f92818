"""Look inside a model on one text: the context gates, the attention maps and the pooling hops, aligned
with the tokens, for users who want to see (or plot) what the context does.

Works for CASAN models of every family, context type and head, and for plain `transformers` models of the
same families (which have no gates and no pooling hops). `predict` reads each head's output the way its
pipeline would (labels, tags, an answer span, the tokens for a mask), for titles and the explorer's page.
"""

from collections import Counter
from dataclasses import dataclass, field

import torch
import transformers
from transformers import AutoConfig, AutoTokenizer

from ..configuration_casan import CasanConfig
from ..families import FAMILIES, HEADS, get_family
from ..options import ATTENTIVE_POOLINGS


# The most tokens a text is cut to for the plots and the explorer: beyond it a token's row in an attention map
# falls under the height of its label.
MAX_TOKENS = 64
# Longest answer span, in tokens, that `predict` considers for question answering (the pipeline's default is 15
# words; tokens run longer).
MAX_ANSWER_TOKENS = 30
# Class name -> head, for CASAN's classes and their transformers twins in every family: what a checkpoint's
# `architectures` may name.
ARCHITECTURE_HEADS = {
    name: head
    for family in FAMILIES
    for head in HEADS
    for name in (family.class_name(head), family.source_class_name(head))
}


@dataclass
class AttentionInspection:
    r"""
    What a model did with one text; every per-token axis follows `tokens`.

    Args:
        tokens (`list[str]`): the tokens, special tokens included, as the tokenizer wrote them.
        attentions (`torch.FloatTensor` of shape `(num_layers, num_heads, num_tokens, num_tokens)`):
            the attention weights; row i is where token i looks.
        query_gates, key_gates (`torch.FloatTensor` of shape `(num_layers, num_tokens)`):
            lambda_Q and lambda_K, how much the context shaped each token's query and key (the mean over the
            heads with `gate_per_head`); 0 where a layer takes no context. `None` for a model without context
            (plain BERT).
        pooling_attentions (`torch.FloatTensor` of shape `(pooling_hops, num_tokens)`):
            the hops of `classifier_pooling="structured"`, or the heads of `"generalized"` with each token's
            weights averaged over the hidden dimensions; `None` for other models.
        logits (`torch.FloatTensor`): the head's logits for this text, without the batch axis: `(num_labels,)`
            for sequence classification, `(1,)` for multiple choice (this text is one choice),
            `(num_tokens, num_labels)` for token classification, `(num_tokens, vocab_size)` for masked LM,
            `(num_tokens, 2)` (start, end) for question answering; `None` for a bare encoder.
        sequence_ids (`list[int | None]`): which text each token comes from (0, 1 for the pair; `None` for
            special tokens), as the tokenizer's `sequence_ids`.
    """

    tokens: list[str]
    attentions: torch.Tensor
    query_gates: torch.Tensor | None = None
    key_gates: torch.Tensor | None = None
    pooling_attentions: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    sequence_ids: list = field(default_factory=list)

    @property
    def layers_with_context(self):
        """Per layer, whether it takes context: its gates are all 0 where it does not. All False without gates."""
        if self.query_gates is None:
            return [False] * self.attentions.shape[0]
        return (self.query_gates != 0).any(-1).tolist()

    def gate_range(self):
        """(min, max) over the gates of the layers with context, the one scale of both gate heatmaps: gates
        near their initial value still vary. (0, 1) where no layer has context."""
        if self.query_gates is None:
            return 0.0, 1.0
        gates = torch.cat([self.query_gates, self.key_gates])
        gated = gates[gates != 0]
        return (float(gated.min()), float(gated.max())) if gated.numel() else (0.0, 1.0)


@dataclass
class Prediction:
    """What a head predicts for one text, as a person reads it: a one-line `summary` (for a title) and a
    table (`columns`, `rows`) with the detail (every label's probability, every token's tag, ...)."""

    summary: str
    columns: tuple = ()
    rows: list = field(default_factory=list)


def checkpoint_head(config):
    """The `Head` a checkpoint's `architectures` names (the base model when it names none), or a ValueError
    naming the architecture and the heads that can be inspected. Refuses model types outside CASAN's families
    (through `get_family`) first."""
    family = get_family(config.model_type)
    if not config.architectures:
        return HEADS[0]
    if config.architectures[0] not in ARCHITECTURE_HEADS:
        shown = [name for head in HEADS for name in (family.class_name(head), family.source_class_name(head))]
        raise ValueError(
            f"Checkpoint architecture {config.architectures[0]!r} is not a head that can be inspected; "
            f"a {config.model_type} checkpoint can be one of {', '.join(shown)}."
        )
    return ARCHITECTURE_HEADS[config.architectures[0]]


def model_head(model):
    """The `Head` of a loaded model, from its class name (`CasanRobertaForMaskedLM`, `BertModel`)."""
    return ARCHITECTURE_HEADS[type(model).__name__]


def load_for_inspection(name_or_path, tokenizer_name_or_path=None, **kwargs):
    """The model (with eager attention, which alone returns attention weights) and its tokenizer (from
    `tokenizer_name_or_path`, by default the checkpoint's). The checkpoint is loaded with the head its
    `architectures` names, for that head's prediction and pooling hops; a ValueError names a model type outside
    CASAN's families or a head that cannot be inspected, before any weights are read."""
    config = AutoConfig.from_pretrained(name_or_path, **kwargs)
    auto_class = getattr(transformers, checkpoint_head(config).auto_class)
    model = auto_class.from_pretrained(name_or_path, attn_implementation="eager", **kwargs).eval()
    return model, AutoTokenizer.from_pretrained(tokenizer_name_or_path or name_or_path, **kwargs)


@torch.no_grad()
def inspect_attention(model, tokenizer, text, text_pair=None, max_length=None):
    """Runs `model` in eval mode on `text` (and `text_pair`), truncated to `max_length` tokens if given,
    and returns an [`AttentionInspection`]. The model's attention implementation and training mode are
    switched to eager and eval for this call only."""
    encoded = tokenizer(text, text_pair, truncation=max_length is not None, max_length=max_length, return_tensors="pt")
    is_casan = isinstance(model.config, CasanConfig)
    pooling = getattr(model, "pooling", None) if is_casan else None
    attentive = pooling is not None and pooling.kind in ATTENTIVE_POOLINGS
    multiple_choice = type(model).__name__.endswith("ForMultipleChoice")
    inputs = {
        name: (tensor[:, None] if multiple_choice else tensor).to(model.device) for name, tensor in encoded.items()
    }
    if is_casan:
        inputs["output_context_gates"] = True
    if attentive:
        inputs["output_pooling_attentions"] = True

    attn_implementation, training = model.config._attn_implementation, model.training
    model.set_attn_implementation("eager")
    model.eval()
    try:
        outputs = model(**inputs, output_attentions=True)
    finally:
        model.set_attn_implementation(attn_implementation)
        model.train(training)

    gates = torch.stack(outputs.context_gates)[:, 0].float().cpu() if is_casan else None
    if gates is not None and gates.dim() == 4:  # a gate per head: (layers, 2, heads, n), shown as the heads' mean
        gates = gates.mean(2)
    hops = outputs.pooling_attentions if attentive else None
    if hops is not None and pooling.kind == "generalized":
        hops = hops.mean(-1)  # each token's weight per head, averaged over the hidden dimensions
    logits = outputs.get("logits")
    if logits is None and outputs.get("start_logits") is not None:  # question answering
        logits = torch.stack([outputs.start_logits, outputs.end_logits], dim=-1)
    return AttentionInspection(
        tokens=tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist()),
        attentions=torch.stack(outputs.attentions)[:, 0].float().cpu(),
        query_gates=None if gates is None else gates[:, 0],
        key_gates=None if gates is None else gates[:, 1],
        pooling_attentions=None if hops is None else hops.flatten(0, -3)[0].float().cpu(),
        logits=None if logits is None else logits[0].float().cpu(),
        sequence_ids=encoded.sequence_ids(0),
    )


def predict(model, tokenizer, inspection, top_k=5):
    """The [`Prediction`] of `model`'s head in `inspection`, read as its pipeline would: probabilities of each
    label (sigmoid for multi-label, the value for regression), a tag per token, the best answer spans in the
    pair's tokens (the question's, without a pair), the `top_k` tokens for each mask token."""
    head = model_head(model)
    config, logits = model.config, inspection.logits
    if logits is None:
        return Prediction(f"no prediction: {type(model).__name__} is a bare encoder")
    if head.name == "sequence-classification":
        if config.problem_type == "regression" or config.num_labels == 1:
            return Prediction(
                f"predicts {float(logits[0]):.3f}", ("output", "value"), [("regression", float(logits[0]))]
            )
        multi_label = config.problem_type == "multi_label_classification"
        probabilities = logits.sigmoid() if multi_label else logits.softmax(-1)
        rows = sorted(((label_name(config, i), float(p)) for i, p in enumerate(probabilities)), key=lambda r: -r[1])
        if multi_label:
            chosen = [f"{label} ({p:.2f})" for label, p in rows if p > 0.5] or ["no label above 0.5"]
            return Prediction(f"predicts {', '.join(chosen)}", ("label", "probability (sigmoid)"), rows)
        return Prediction(f"predicts {rows[0][0]} ({rows[0][1]:.2f})", ("label", "probability"), rows)
    if head.name == "multiple-choice":
        score = float(logits[0])
        return Prediction(f"scores this choice {score:.3f}", ("choice", "score (logit)"), [("this text", score)])
    text_tokens = [i for i, sequence in enumerate(inspection.sequence_ids) if sequence is not None]
    if head.name == "token-classification":
        probabilities, labels = logits.softmax(-1).max(-1)
        rows = [
            (inspection.tokens[i], label_name(config, int(labels[i])), float(probabilities[i])) for i in text_tokens
        ]
        counts = Counter(tag for _, tag, _ in rows)
        summary = "tags " + ", ".join(f"{tag} ×{count}" for tag, count in counts.most_common())
        return Prediction(summary, ("token", "tag", "probability"), rows)
    if head.name == "question-answering":
        return answer_spans(tokenizer, inspection, top_k)
    if head.name == "masked-lm":
        masks = [i for i, token in enumerate(inspection.tokens) if token == tokenizer.mask_token]
        if not masks:
            return Prediction(f"no prediction: put {tokenizer.mask_token} in the text where a token should be filled")
        rows = []
        for position in masks:
            probabilities, ids = logits[position].softmax(-1).topk(top_k)
            words = tokenizer.convert_ids_to_tokens(ids.tolist())
            rows += [(position, word, float(p)) for word, p in zip(words, probabilities, strict=True)]
        fills = [f"{word} ({p:.2f})" for position, word, p in rows[::top_k]]
        return Prediction(
            f"fills {tokenizer.mask_token} with {', '.join(fills)}", ("position", "token", "probability"), rows
        )
    return Prediction(f"no prediction: {type(model).__name__} is a bare encoder")


def answer_spans(tokenizer, inspection, top_k):
    """The `top_k` spans of at most `MAX_ANSWER_TOKENS` tokens in the context (the pair, else the text) by the
    probability start x end, each factor a softmax over the context's tokens."""
    context = 1 if 1 in inspection.sequence_ids else 0
    positions = torch.tensor([i for i, sequence in enumerate(inspection.sequence_ids) if sequence == context])
    start, end = (inspection.logits[positions, column].softmax(-1) for column in (0, 1))
    scores = start[:, None] * end[None, :]
    length = positions[None, :] - positions[:, None]
    scores = scores.masked_fill((length < 0) | (length >= MAX_ANSWER_TOKENS), 0.0)
    best = scores.flatten().topk(min(top_k, scores.numel()))
    rows = []
    for score, index in zip(best.values.tolist(), best.indices.tolist(), strict=True):
        first, last = int(positions[index // len(positions)]), int(positions[index % len(positions)])
        answer = tokenizer.convert_tokens_to_string(inspection.tokens[first : last + 1])
        rows.append((answer, first, last, score))
    return Prediction(
        f"answers {rows[0][0]!r} ({rows[0][3]:.2f})", ("answer", "first token", "last token", "probability"), rows
    )


def label_name(config, index):
    """The config's name of label `index` (transformers' default `LABEL_<index>` when it names none)."""
    return config.id2label.get(index, f"LABEL_{index}")


__all__ = [
    "MAX_TOKENS",
    "AttentionInspection",
    "Prediction",
    "checkpoint_head",
    "inspect_attention",
    "load_for_inspection",
    "model_head",
    "predict",
]
