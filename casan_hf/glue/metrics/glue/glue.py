"""The official GLUE dev-set metrics as an `evaluate` module that ships with casan_hf (no Hub needed).

Per task: Matthews correlation for CoLA; Pearson and Spearman correlation for STS-B; accuracy and F1 of the
positive class for MRPC and QQP; accuracy for SST-2, MNLI (matched and mismatched), QNLI, RTE and WNLI.
Two extra configurations serve the user's own data: `accuracy` (classification) and `regression`
(Pearson and Spearman, as STS-B).
"""

import datasets
import evaluate
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score, matthews_corrcoef


_CITATION = """\
@inproceedings{wang2019glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}
"""

_DESCRIPTION = "The GLUE benchmark's metric for each task, computed on dev-set predictions."

_KWARGS_DESCRIPTION = """
Args:
    predictions: predicted label ids (ints), or scores (floats) for `stsb` and `regression`.
    references: gold label ids, or gold scores for `stsb` and `regression`.
Returns: a dict with, depending on the configuration,
    "accuracy", "f1" (mrpc, qqp), "matthews_correlation" (cola), "pearson" and "spearmanr" (stsb, regression).
Example:
    >>> metric = evaluate.load(casan_hf.glue.metrics.GLUE_METRIC_PATH, "mrpc")
    >>> metric.compute(predictions=[0, 1], references=[0, 1])
    {'accuracy': 1.0, 'f1': 1.0}
"""

ACCURACY_TASKS = ("sst2", "mnli", "mnli_mismatched", "mnli_matched", "qnli", "rte", "wnli", "accuracy")
ACCURACY_F1_TASKS = ("mrpc", "qqp")
CORRELATION_TASKS = ("stsb", "regression")
CONFIGS = ("cola", *ACCURACY_F1_TASKS, *CORRELATION_TASKS, *ACCURACY_TASKS)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Glue(evaluate.Metric):
    def _info(self):
        if self.config_name not in CONFIGS:
            raise ValueError(
                f"Unknown GLUE metric configuration {self.config_name!r}; choose one of {', '.join(CONFIGS)}."
            )
        value = datasets.Value("float32" if self.config_name in CORRELATION_TASKS else "int64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": value, "references": value}),
            format="numpy",
        )

    def _compute(self, predictions, references):
        if self.config_name == "cola":
            return {"matthews_correlation": float(matthews_corrcoef(references, predictions))}
        if self.config_name in CORRELATION_TASKS:
            return {
                "pearson": float(pearsonr(predictions, references)[0]),
                "spearmanr": float(spearmanr(predictions, references)[0]),
            }
        accuracy = float((predictions == references).mean())
        if self.config_name in ACCURACY_F1_TASKS:
            return {"accuracy": accuracy, "f1": float(f1_score(y_true=references, y_pred=predictions))}
        return {"accuracy": accuracy}
