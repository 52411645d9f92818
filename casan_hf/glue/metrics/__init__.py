"""Metric modules that ship with casan_hf, so that evaluation needs no connection to the Hub."""

from pathlib import Path

import evaluate


# `evaluate.load` takes a folder holding a script of the same name.
GLUE_METRIC_PATH = str(Path(__file__).parent / "glue")


def load_glue_metric(config_name, **kwargs):
    """`evaluate.load` of the shipped GLUE metric: a GLUE task name, or `accuracy` / `regression`."""
    return evaluate.load(GLUE_METRIC_PATH, config_name, **kwargs)


__all__ = ["GLUE_METRIC_PATH", "load_glue_metric"]
