"""A translation model's scores: sacreBLEU's BLEU and chrF, the same by source length, and the cross-entropy per
target token."""

import torch
from torch.nn import functional as F


# The source lengths (in words, split at white space) that test BLEU is also given for: (first, last or None).
LENGTH_BUCKETS = ((1, 10), (11, 15), (16, 20), (21, None))


def translation_scores(predictions, references):
    """sacreBLEU's corpus BLEU and chrF of detokenized `predictions` against one reference each."""
    import sacrebleu

    return {
        "bleu": sacrebleu.corpus_bleu(predictions, [references]).score,
        "chrf": sacrebleu.corpus_chrf(predictions, [references]).score,
    }


def bucket_name(first, last):
    return f"{first}-{last}" if last is not None else f"{first}+"


def scores_by_source_length(sources, predictions, references):
    """`translation_scores` of the sentences whose source has the words of each of `LENGTH_BUCKETS`, with their
    count: `{"1-10": {"sentences": n, "bleu": ..., "chrf": ...}, ...}` (an empty bucket has only its count)."""
    scores = {}
    for first, last in LENGTH_BUCKETS:
        chosen = [
            index
            for index, source in enumerate(sources)
            if first <= len(source.split()) and (last is None or len(source.split()) <= last)
        ]
        bucket = {"sentences": len(chosen)}
        if chosen:
            bucket.update(translation_scores([predictions[i] for i in chosen], [references[i] for i in chosen]))
        scores[bucket_name(first, last)] = bucket
    return scores


@torch.no_grad()
def token_cross_entropy(trainer, dataset):
    """The teacher-forced cross-entropy per target token of `trainer.model` on `dataset`, in nats, without label
    smoothing (the Trainer's loss has it when `label_smoothing_factor` is set): the measure that tells two models
    apart with far less seed noise than BLEU. Every process scores its share; the sums are gathered."""
    model, training = trainer.model, trainer.model.training
    model.eval()
    sums, tokens = [], []
    try:
        for batch in trainer.get_eval_dataloader(dataset):
            batch = trainer._prepare_inputs(batch)
            labels = batch.pop("labels")
            logits = model(**batch).logits.float()
            losses = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none")
            gathered = trainer.accelerator.gather_for_metrics((losses.sum(-1), (labels != -100).sum(-1)))
            sums.append(gathered[0].double())
            tokens.append(gathered[1])
    finally:
        model.train(training)
    return float(torch.cat(sums).sum() / torch.cat(tokens).sum())
