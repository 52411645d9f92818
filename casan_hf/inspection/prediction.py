"""What a model's head predicts for one text, read as its pipeline would (labels, tags, an answer span, the tokens
for a mask, the next token), for the titles of the plots and the explorer's page."""

from collections import Counter
from dataclasses import dataclass, field

import torch

from .heads import model_head


# Longest answer span, in tokens, that `predict` considers for question answering (the pipeline's default is 15
# words; tokens run longer).
MAX_ANSWER_TOKENS = 30


@dataclass
class Prediction:
    """What a head predicts for one text, as a person reads it: a one-line `summary` (for a title) and a
    table (`columns`, `rows`) with the detail (every label's probability, every token's tag, ...)."""

    summary: str
    columns: tuple = ()
    rows: list = field(default_factory=list)


def predict(model, tokenizer, inspection, top_k=5):
    """The [`Prediction`] of `model`'s head in `inspection`, read as its pipeline would (the head's `prediction`
    names the reading, `READINGS`): probabilities of each label (sigmoid for multi-label, the value for
    regression), a tag per token, the best answer spans in the pair's tokens (the question's, without a pair), the
    `top_k` tokens for each mask token, a causal LM's `top_k` next tokens after the text."""
    head = model_head(model)
    if inspection.logits is None or head.prediction is None:
        return Prediction(f"no prediction: {type(model).__name__} is a bare model, without a head")
    return READINGS[head.prediction](model.config, tokenizer, inspection, top_k)


def label_probabilities(config, tokenizer, inspection, top_k):
    """A sequence classifier's labels by probability (sigmoid for multi-label), or its value for regression."""
    logits = inspection.logits
    if config.problem_type == "regression" or config.num_labels == 1:
        return Prediction(f"predicts {float(logits[0]):.3f}", ("output", "value"), [("regression", float(logits[0]))])
    multi_label = config.problem_type == "multi_label_classification"
    probabilities = logits.sigmoid() if multi_label else logits.softmax(-1)
    rows = sorted(((label_name(config, i), float(p)) for i, p in enumerate(probabilities)), key=lambda r: -r[1])
    if multi_label:
        chosen = [f"{label} ({p:.2f})" for label, p in rows if p > 0.5] or ["no label above 0.5"]
        return Prediction(f"predicts {', '.join(chosen)}", ("label", "probability (sigmoid)"), rows)
    return Prediction(f"predicts {rows[0][0]} ({rows[0][1]:.2f})", ("label", "probability"), rows)


def choice_score(config, tokenizer, inspection, top_k):
    """A multiple-choice head's score of the text as one choice."""
    score = float(inspection.logits[0])
    return Prediction(f"scores this choice {score:.3f}", ("choice", "score (logit)"), [("this text", score)])


def token_tags(config, tokenizer, inspection, top_k):
    """A token classifier's most probable tag of every token of the texts (special tokens left out)."""
    probabilities, labels = inspection.logits.softmax(-1).max(-1)
    text_tokens = [i for i, sequence in enumerate(inspection.sequence_ids) if sequence is not None]
    rows = [(inspection.tokens[i], label_name(config, int(labels[i])), float(probabilities[i])) for i in text_tokens]
    counts = Counter(tag for _, tag, _ in rows)
    summary = "tags " + ", ".join(f"{tag} ×{count}" for tag, count in counts.most_common())
    return Prediction(summary, ("token", "tag", "probability"), rows)


def answer_spans(config, tokenizer, inspection, top_k):
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


def mask_fills(config, tokenizer, inspection, top_k):
    """A masked LM's `top_k` tokens for each mask token of the text."""
    masks = [i for i, token in enumerate(inspection.tokens) if token == tokenizer.mask_token]
    if not masks:
        return Prediction(f"no prediction: put {tokenizer.mask_token} in the text where a token should be filled")
    rows = []
    for position in masks:
        probabilities, ids = inspection.logits[position].softmax(-1).topk(top_k)
        words = tokenizer.convert_ids_to_tokens(ids.tolist())
        rows += [(position, word, float(p)) for word, p in zip(words, probabilities, strict=True)]
    fills = [f"{word} ({p:.2f})" for position, word, p in rows[::top_k]]
    return Prediction(
        f"fills {tokenizer.mask_token} with {', '.join(fills)}", ("position", "token", "probability"), rows
    )


def next_tokens(config, tokenizer, inspection, top_k):
    """A causal LM's `top_k` next tokens after the text: its logits at the text's last token (the special tokens a
    tokenizer appends, such as an end of text, left out), each token decoded as generation would write it."""
    last = max(i for i, sequence in enumerate(inspection.sequence_ids) if sequence is not None)
    probabilities, ids = inspection.logits[last].softmax(-1).topk(top_k)
    rows = [(tokenizer.decode([i]), float(p)) for i, p in zip(ids.tolist(), probabilities, strict=True)]
    summary = "next token " + ", ".join(f"{token!r} ({p:.2f})" for token, p in rows)
    return Prediction(summary, ("next token", "probability"), rows)


def label_name(config, index):
    """The config's name of label `index` (transformers' default `LABEL_<index>` when it names none)."""
    return config.id2label.get(index, f"LABEL_{index}")


# A head's `prediction` (casan_hf.families.HEADS) -> how its logits for one text are read: a function of the model's
# config, the tokenizer, the `AttentionInspection` and `top_k`.
READINGS = {
    "labels": label_probabilities,
    "choice": choice_score,
    "tags": token_tags,
    "answer": answer_spans,
    "fills": mask_fills,
    "next-tokens": next_tokens,
}
