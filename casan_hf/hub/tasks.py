"""The tasks a model card's scores measure, as data: the model-index entries (the Hub's task, dataset and metric
names) and what the card's Evaluation section says before the scores, for an encoder's run (a GLUE task, or a
run on its own files such as masked-LM pre-training) and for a translation run."""

from dataclasses import dataclass
from typing import NamedTuple

from huggingface_hub import EvalResult


class Metric(NamedTuple):
    name: str  # how the card and the model-index name it
    decimals: int  # the digits they keep after the point


# The scores a card reports, by the key of the run's metrics; others (loss, runtime) are left out.
METRICS = {
    "accuracy": Metric("Accuracy", 4),
    "f1": Metric("F1", 4),
    "matthews_correlation": Metric("Matthews correlation", 4),
    "pearson": Metric("Pearson correlation", 4),
    "spearmanr": Metric("Spearman correlation", 4),
    "perplexity": Metric("Perplexity", 4),
    "cross_entropy": Metric("Cross-entropy (nats per token)", 4),
    "bleu": Metric("BLEU", 2),
    "chrf": Metric("chrF", 2),
}


class ResultsKeys(NamedTuple):
    """The keys of a run's results files that hold one card split's scores: `<prefix>_<metric><suffix>`."""

    prefix: str  # the Trainer's metric key prefix, and the results file `<prefix>_results.json`
    suffix: str  # "" or a second split's mark among the prefix's keys
    splits: tuple  # the card splits these keys may be, the first where the card names none of them


# Where each split's scores are in a run's results files: `Trainer.save_metrics(prefix, ...)` writes
# `<prefix>_results.json`, and every prefix into all_results.json. The dev splits are under "eval" (MNLI's mismatched
# one marked "_mm", as run_glue.py writes it beside the matched one), the test split under "predict".
RESULTS_KEYS = (
    ResultsKeys("eval", "", ("validation", "validation_matched")),
    ResultsKeys("eval", "_mm", ("validation_mismatched",)),
    ResultsKeys("predict", "", ("test",)),
)
RESULTS_FILES = ("all_results.json", *dict.fromkeys(f"{keys.prefix}_results.json" for keys in RESULTS_KEYS))


def results_suffix(split):
    """The mark of `split`'s keys among its prefix's: "_mm" for MNLI's mismatched dev set, "" for the others."""
    suffixes = [keys.suffix for keys in RESULTS_KEYS if split in keys.splits]
    if not suffixes:
        splits = [split for keys in RESULTS_KEYS for split in keys.splits]
        raise ValueError(f"A results file holds the splits {', '.join(splits)}; got {split!r}.")
    return suffixes[0]


def results_keys(key):
    """`(keys, metric)`: the `ResultsKeys` that `key` of a results file is one of, and its metric without prefix
    and suffix ("eval_accuracy_mm": the mismatched row, "accuracy"); `(None, None)` for a key of no split."""
    prefix, _, metric = key.partition("_")
    rows = [keys for keys in RESULTS_KEYS if keys.prefix == prefix and metric.endswith(keys.suffix)]
    if not rows:
        return None, None
    keys = max(rows, key=lambda keys: len(keys.suffix))
    return keys, metric.removesuffix(keys.suffix)


@dataclass(frozen=True)
class CardTask:
    """What a card says about the task its scores measure: the model-index entries and the Evaluation section's
    opening with scores (`measured_on`, where `{dataset}` is the escaped `dataset_name`) and without."""

    hub_task: str  # the Hub's task type of the scores: text-classification, fill-mask, translation, ...
    name: str  # the task's name in the model-index
    dataset_id: str | None  # the model-index's dataset type: a Hub id, or the name of the run's own data
    dataset_name: str | None
    measured_on: str
    not_evaluated: str = "Not evaluated yet: the context parameters are untrained; fine-tune before use."
    dataset_config: str | None = None
    tags: tuple = ()  # after the model's own tags
    languages: tuple = ()

    def eval_results(self, eval_metrics):
        """`EvalResult`s from `{split: {metric: value}}`, the metrics of `METRICS` only."""
        return [
            EvalResult(
                task_type=self.hub_task,
                task_name=self.name,
                dataset_type=self.dataset_id,
                dataset_name=self.dataset_name,
                dataset_config=self.dataset_config,
                dataset_split=split,
                metric_type=metric,
                metric_value=round(float(value), METRICS[metric].decimals),
                metric_name=METRICS[metric].name,
            )
            for split, metrics in eval_metrics.items()
            for metric, value in metrics.items()
            if metric in METRICS
        ]


def encoder_task(hub_task, task_name=None, dataset_id=None):
    """The task of an encoder's run: the GLUE task `task_name` (from the Hub's GLUE or the original files), or
    the validation file of a run on its own data (masked-LM pre-training). `hub_task` is the Hub task the scores
    measure (`fill-mask` for masked-LM perplexity)."""
    name = hub_task.replace("-", " ").title()
    if task_name is None:
        return CardTask(
            hub_task, name, dataset_id, dataset_id, "Measured on the validation file at the end of training:"
        )
    return CardTask(
        hub_task,
        name,
        dataset_id,
        f"GLUE {task_name.upper()}",
        "Measured on the {dataset} dev set at the end of training:",
        dataset_config=task_name,
        tags=("glue", task_name),
    )


def translation_task(source_lang, target_lang, dataset_id, dataset_name=None):
    """The task of a translation run: its BLEU and chrF on `dataset_id` (called `dataset_name`, default the id)."""
    return CardTask(
        "translation",
        f"translation {source_lang} to {target_lang}",
        dataset_id,
        dataset_name or dataset_id,
        "sacreBLEU (13a tokenization, detokenized output) and chrF on {dataset}, beam search:",
        not_evaluated="Not evaluated.",
        tags=("translation",),
        languages=(source_lang, target_lang),
    )


def eval_results_for(task_name, dataset_id, eval_metrics, task_type="text-classification"):
    """The model-index entries of an encoder run's scores (`encoder_task`)."""
    return encoder_task(task_type, task_name, dataset_id).eval_results(eval_metrics)
