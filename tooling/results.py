"""The committed studies' records and comparisons as one render reads them: a `StudyResults` reads each study's
records once (`catalog.study_records`), and each benchmark record once, and draws its comparisons once, for the life
of the object (one `make docs`, one test), so that the many figures a doc quotes of one study cost one read, and a
changed results file is read again by the next render."""

import json
from pathlib import Path

from casan_hf.studies import causal
from casan_hf.studies.glue import comparisons as glue_comparisons
from casan_hf.studies.translation import budget_comparisons, budgets

from .catalog import STUDIES, study_records


# Each sweep's comparisons of a study's records: every metric of each budget (translation, the causal LMs) or task
# (GLUE).
SWEEP_COMPARISONS = {
    "translation": lambda records: [
        comparison for budget in budgets(records) for comparison in budget_comparisons(*budget)
    ],
    "glue": lambda records: glue_comparisons(records[0]["settings"]["classifier_pooling"], records),
    "clm": causal.comparisons,
}


class StudyResults:
    """The records and comparisons of the studies under `repository` (a checkout: its `docs/results/`)."""

    def __init__(self, repository):
        self.repository = Path(repository)
        self._records = {}
        self._comparisons = {}
        self._benchmarks = {}

    def records(self, name):
        """The records of the study `name` (`catalog.study_records`)."""
        if name not in self._records:
            self._records[name] = study_records(name, self.repository)
        return self._records[name]

    def benchmark(self, file):
        """The records of the benchmark run `file` of `docs/results/` (`scripts/benchmark.py --json`)."""
        if file not in self._benchmarks:
            path = self.repository / "docs" / "results" / file
            self._benchmarks[file] = json.loads(path.read_text(encoding="utf-8"))
        return self._benchmarks[file]

    def comparisons(self, name):
        """Every comparison of the study `name` (`SWEEP_COMPARISONS`)."""
        if name not in self._comparisons:
            records = self.records(name)  # first: a name that is no study is refused by name
            self._comparisons[name] = tuple(SWEEP_COMPARISONS[STUDIES[name].sweep](records))
        return self._comparisons[name]

    def comparison(self, name, metric):
        """The comparison of `metric` in the study `name`; a ValueError naming the study's metrics."""
        drawn = self.comparisons(name)
        found = [comparison for comparison in drawn if comparison.metric == metric]
        if len(found) != 1:
            metrics = sorted({comparison.metric for comparison in drawn})
            raise ValueError(f"{name} has {len(found)} comparisons of {metric!r}; its metrics: {metrics}.")
        return found[0]
