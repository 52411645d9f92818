"""Every study's comparison with its twin (the same data, steps, hyper-parameters and seed, without context): per
metric (a `Comparison`), the mean and spread of each arm, and the per-seed difference to the twin with its mean,
95% t interval, the seeds won, whether it is beyond the spread and the smallest difference the pairs could detect
(their power), as a markdown table (`paired_table`)."""

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from scipy import stats


def score_spread(values, digits=2):
    """The mean ± std of an arm's scores (the mean alone for one): `56.10 ± 2.18`."""
    spread = f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.{digits}f}{spread}"


def mean_std(values, digits=2):
    """`score_spread` with the count: `56.10 ± 2.18 (n=5)`; "-" without scores."""
    return f"{score_spread(values, digits)} (n={len(values)})" if values else "-"


def paired_interval(differences):
    """The mean and std of the per-seed differences to the twin and the half-width of their 95% t interval."""
    mean, std = statistics.mean(differences), statistics.stdev(differences)
    return mean, std, stats.t.ppf(0.975, len(differences) - 1) * std / math.sqrt(len(differences))


POWER = 0.80


def detectable_difference(differences):
    """The study's power: the smallest true mean difference that pairs of this spread find beyond the spread
    (their 95% interval excluding 0) with probability `POWER`, (t(0.975, n-1) + t(POWER, n-1)) / sqrt(n) x sd.
    A difference of the interval's half-width is found little more than half the time."""
    n = len(differences)
    return (stats.t.ppf(0.975, n - 1) + stats.t.ppf(POWER, n - 1)) / math.sqrt(n) * statistics.stdev(differences)


def won(difference, lower_is_better=False):
    """Whether a difference to the twin is a win: above zero, or below it for a metric where lower is better."""
    return difference < 0 if lower_is_better else difference > 0


def beyond_the_spread(mean, half):
    """The one meaning of "beyond the spread" in every study: the 95% interval of the mean difference excludes 0."""
    return abs(mean) > half


@dataclass(frozen=True)
class Paired:
    """The per-seed differences of an arm to another (the twin) as every table and quoted figure writes them, at
    `digits`; one place for their format, so a figure quoted in the docs is the table's to the character."""

    differences: tuple
    lower_is_better: bool = False
    digits: int = 2

    def signed(self, value):
        return f"{value:+.{self.digits}f}"

    @property
    def mean(self):
        return statistics.mean(self.differences)

    @property
    def difference(self):
        """The mean difference with its sign: `+0.008`."""
        return self.signed(self.mean)

    @property
    def interval(self):
        """Its 95% t interval: `[-0.002, +0.017]`."""
        mean, _, half = paired_interval(self.differences)
        return f"[{self.signed(mean - half)}, {self.signed(mean + half)}]"

    @property
    def spread(self):
        """Mean ± std: `+0.008 ± 0.008`."""
        return f"{self.difference} ± {statistics.stdev(self.differences):.{self.digits}f}"

    @property
    def wins(self):
        return sum(won(d, self.lower_is_better) for d in self.differences)

    @property
    def sign_test(self):
        """The two-sided sign test's p of the seeds won against those lost (ties count for neither): `0.38`."""
        losses = sum(won(-d, self.lower_is_better) for d in self.differences)
        p = stats.binomtest(self.wins, self.wins + losses).pvalue if self.wins + losses else 1.0
        return f"{p:.2f}"

    @property
    def seeds_won(self):
        """The seeds won with the two-sided sign test's p: `4/5 (p=0.38)`."""
        return f"{self.wins}/{len(self.differences)} (p={self.sign_test})"

    @property
    def per_seed(self):
        """Each seed's difference, in the seeds' order: `+1.96, +0.74, -0.49`."""
        return ", ".join(self.signed(difference) for difference in self.differences)

    @property
    def extent(self):
        """The smallest and the largest per-seed difference: `-1.08 to +5.05`."""
        return f"{self.signed(min(self.differences))} to {self.signed(max(self.differences))}"

    @property
    def beyond(self):
        """Whether the difference is beyond the spread (its interval excludes 0), and which way."""
        mean, _, half = paired_interval(self.differences)
        if not beyond_the_spread(mean, half):
            return "no"
        return "yes, better" if won(mean, self.lower_is_better) else "yes, worse"

    @property
    def power(self):
        """The detectable difference (`detectable_difference`): `0.013`."""
        return f"{detectable_difference(self.differences):.{self.digits}f}"


def percent_of(value, scores, sign=True):
    """`value` as a percentage of the mean of `scores` (a difference to the twin, of the twin's mean): `+0.64%`."""
    return f"{100 * value / statistics.mean(scores):{'+' if sign else ''}.2f}%"


def paired(differences, lower_is_better=False, digits=2):
    """Mean ± std of the per-seed differences to the twin, their 95% t interval, the seeds won with the
    two-sided sign test's p, and whether the difference is beyond the spread (its interval excludes 0), and
    which way: "better" or "worse" than the twin."""
    if len(differences) < 2:
        return ["-"] * 4
    pair = Paired(tuple(differences), lower_is_better, digits)
    return [pair.spread, pair.interval, pair.seeds_won, pair.beyond]


@dataclass(frozen=True)
class Comparison:
    """One metric of a study. `rows`: `(labels, runs, twin_runs)` per variant (`labels` fill `label_columns`;
    `twin_runs` is None for the twin's own row); `score(record)`: the metric, None for a record without it (made
    before it was recorded). `lower_is_better` for a loss; `digits` of the table's numbers."""

    title: str
    label_columns: tuple
    rows: list
    score: Callable
    lower_is_better: bool = False
    digits: int = 2
    metric: str | None = None  # its short name, by which the docs quote it: a record field, `rte_accuracy`

    def scores(self, runs):
        """`{seed: score}`: one score per seed that has it."""
        scores = {run["seed"]: self.score(run) for run in runs}
        return {seed: score for seed, score in scores.items() if score is not None}

    def differences(self, runs, twin_runs):
        """`{seed: score - the twin's score}` over the seeds both have."""
        twin = self.scores(twin_runs)
        return {seed: score - twin[seed] for seed, score in self.scores(runs).items() if seed in twin}

    def paired(self, runs, other_runs):
        """The `Paired` differences of `runs` to `other_runs` over the seeds both have, in the seeds' order."""
        differences = tuple(difference for _, difference in sorted(self.differences(runs, other_runs).items()))
        return Paired(differences, self.lower_is_better, self.digits)


PAIRED_COLUMNS = [
    "score",
    "paired diff to twin",
    "95% CI",
    "seeds won (sign test)",
    "beyond the spread (CI excludes 0)",
    f"detectable diff ({POWER:.0%} power)",
]


def paired_cells(comparison, runs, other_runs):
    """The cells of `PAIRED_COLUMNS` but the score for `runs` against `other_runs` over the seeds both have: the
    paired difference, its interval, the seeds won, beyond the spread, and the power ("-" under two seeds)."""
    pair = comparison.paired(runs, other_runs)
    if len(pair.differences) < 2:
        return ["-"] * (len(PAIRED_COLUMNS) - 1)
    return [pair.spread, pair.interval, pair.seeds_won, pair.beyond, pair.power]


def paired_table(comparison, extra_columns=()):
    """A markdown table of `comparison`: each row's score and its paired difference to the twin; `extra_columns`:
    `(name, cell(runs))` pairs, e.g. the gates."""
    header = [*comparison.label_columns, *PAIRED_COLUMNS, *(name for name, _ in extra_columns)]
    lines = [f"\n### {comparison.title}\n", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for labels, runs, twin_runs in comparison.rows:
        if twin_runs is None:
            pair = ["(twin)"] * (len(PAIRED_COLUMNS) - 1)  # every column but the score
        else:
            pair = paired_cells(comparison, runs, twin_runs)
        score_cell = mean_std(list(comparison.scores(runs).values()), comparison.digits)
        cells = [*labels, score_cell, *pair, *(cell(runs) for _, cell in extra_columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
