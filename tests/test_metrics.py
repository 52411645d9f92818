"""The shipped GLUE metric: loads offline with `evaluate.load`, gives the official metric of each task, and is
package data so that an installed casan_hf has it."""

from pathlib import Path

import evaluate
import numpy as np
import pytest
import tomllib
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score, matthews_corrcoef

import casan_hf
from casan_hf.glue.metrics import GLUE_METRIC_PATH, load_glue_metric


RNG = np.random.default_rng(0)
LABELS = RNG.integers(0, 2, 50)
PREDICTIONS = np.where(RNG.random(50) < 0.8, LABELS, 1 - LABELS)


@pytest.mark.parametrize("task", ["sst2", "mnli", "mnli_mismatched", "qnli", "rte", "wnli", "accuracy"])
def test_accuracy_tasks(task):
    assert load_glue_metric(task).compute(predictions=PREDICTIONS, references=LABELS) == {
        "accuracy": pytest.approx((PREDICTIONS == LABELS).mean())
    }


@pytest.mark.parametrize("task", ["mrpc", "qqp"])
def test_accuracy_and_f1_tasks(task):
    result = load_glue_metric(task).compute(predictions=PREDICTIONS, references=LABELS)
    assert result == {
        "accuracy": pytest.approx((PREDICTIONS == LABELS).mean()),
        "f1": pytest.approx(f1_score(LABELS, PREDICTIONS)),
    }


def test_cola_is_matthews_correlation():
    result = load_glue_metric("cola").compute(predictions=PREDICTIONS, references=LABELS)
    assert result == {"matthews_correlation": pytest.approx(matthews_corrcoef(LABELS, PREDICTIONS))}


@pytest.mark.parametrize("task", ["stsb", "regression"])
def test_stsb_is_pearson_and_spearman(task):
    gold = RNG.uniform(0, 5, 40)
    predicted = gold + RNG.normal(0, 1, 40)
    result = load_glue_metric(task).compute(predictions=predicted, references=gold)
    assert result["pearson"] == pytest.approx(pearsonr(predicted, gold)[0], rel=1e-5)
    assert result["spearmanr"] == pytest.approx(spearmanr(predicted, gold)[0], rel=1e-5)


def test_evaluate_load_by_path_works_offline():
    metric = evaluate.load(GLUE_METRIC_PATH, "mrpc")
    assert metric.compute(predictions=[0, 1, 1], references=[0, 1, 0]) == {
        "accuracy": pytest.approx(2 / 3),
        "f1": pytest.approx(2 / 3),
    }


def test_unknown_configuration_is_refused():
    with pytest.raises(ValueError, match="Unknown GLUE metric configuration 'sts'; choose one of cola, mrpc"):
        load_glue_metric("sts")


def test_metric_script_is_package_data():
    root = Path(casan_hf.__file__).resolve().parents[1]
    package_data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "casan_hf"
    ]
    shipped = Path(GLUE_METRIC_PATH) / "glue.py"
    assert shipped.is_file() and str(shipped.relative_to(Path(casan_hf.__file__).parent)) in package_data
