"""The kinds of results table the docs render (`pages.PAGES` names each one): a study's arms by rows
(`ArmTable`), its runs seed by seed (`RunsTable`), one arm against the twin metric by metric (`MetricTable`), its
metrics by rows and arms by columns (`MetricRowsTable`), and a template whose placeholders are figures
(`Template`). Every cell is a figure of `quotes.figure`, the quotes' own, or a run's score."""

import re
from dataclasses import dataclass

from .quotes import ARM_KINDS, arm_row, figure, filled, is_twin


PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def markdown_row(cells):
    return "| " + " | ".join(cells) + " |"


def markdown_table(header, rows):
    """A markdown table: the `header` cells, a rule, then `rows` (lists of cells)."""
    lines = [markdown_row(header), "|" + " --- |" * len(header), *(markdown_row(row) for row in rows)]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ArmTable:
    """A table of a study's arms, one row each in `arms` (`(arm, label)`: the arm as a quote names it, its row's
    label, under the heading `title`) and one column per `columns` (`(header, metric, kind)`: a quote kind of the
    metric's comparison); the twin's paired cells are `twin_cell`, a cell with too few seeds paired "-"."""

    study: str
    title: str
    arms: tuple
    columns: tuple
    twin_cell: str = "(twin)"

    def cell(self, results, arm, metric, kind):
        if kind not in ARM_KINDS and is_twin(results.comparison(self.study, metric), arm):
            return self.twin_cell
        return figure(results, self.study, arm, metric, kind) or "-"

    def render(self, results):
        return markdown_table(
            [self.title, *(header for header, *_ in self.columns)],
            [[label, *(self.cell(results, arm, *column[1:]) for column in self.columns)] for arm, label in self.arms],
        )


@dataclass(frozen=True)
class RunsTable:
    """One row per run of each arm (`(arm, label)`), seed by seed: `columns` are `(header, metric)`."""

    study: str
    arms: tuple
    columns: tuple

    def render(self, results):
        rows = []
        for arm, label in self.arms:
            per_metric = []
            for _, metric in self.columns:
                comparison = results.comparison(self.study, metric)
                scores = comparison.scores(arm_row(comparison, arm)[1])
                per_metric.append({seed: f"{score:.{comparison.digits}f}" for seed, score in scores.items()})
            rows += [[label, str(seed), *(scores[seed] for scores in per_metric)] for seed in sorted(per_metric[0])]
        return markdown_table(["arm", "seed", *(name for name, _ in self.columns)], rows)


@dataclass(frozen=True)
class MetricTable:
    """One arm against the twin, one row per metric in `metrics` (`(label, metric)`): the twin's and the arm's mean
    ± std, then the paired `columns` (`(header, kind)`)."""

    study: str
    arm: str
    title: str
    arm_header: str
    metrics: tuple
    columns: tuple
    twin: str = "none"

    def render(self, results):
        rows = [
            [
                label,
                figure(results, self.study, self.twin, metric, "score"),
                figure(results, self.study, self.arm, metric, "score"),
                *(figure(results, self.study, self.arm, metric, kind) or "-" for _, kind in self.columns),
            ]
            for label, metric in self.metrics
        ]
        return markdown_table(
            [self.title, f"`{self.twin}`", self.arm_header, *(name for name, _ in self.columns)], rows
        )


@dataclass(frozen=True)
class MetricRowsTable:
    """One row per metric of `metrics` (`(metric, label)`), one column per arm of `arms` (`(arm, header)`), each
    cell the arm's `ARM_KINDS` figure `kind` (its mean ± std, `score`; its scores seed by seed, `seeds`)."""

    study: str
    title: str
    arms: tuple
    metrics: tuple
    kind: str

    def render(self, results):
        return markdown_table(
            [self.title, *(header for _, header in self.arms)],
            [
                [label, *(figure(results, self.study, arm, metric, self.kind) for arm, _ in self.arms)]
                for metric, label in self.metrics
            ],
        )


@dataclass(frozen=True)
class Template:
    """Markdown lines whose `{SPEC}` placeholders are figures or summaries (`quotes.filled`)."""

    lines: tuple

    def render(self, results):
        return (
            "\n".join(PLACEHOLDER.sub(lambda match: filled(match.group(1), results), line) for line in self.lines)
            + "\n"
        )
