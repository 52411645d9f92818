"""The docs' results, rendered from the committed records (`make docs`): in README.md, docs/RESULTS.md,
docs/TRANSLATION.md (and the quotes of docs/METHOD.md and docs/TESTS.md), each block between
`<!-- render: NAME ARGS -->` and `<!-- /render -->` is what `BLOCKS[NAME](root, *ARGS)` writes from the records
under `root` (a table whole: row labels, per-seed scores, means and spreads, paired intervals, seeds won, p-values,
powers, verdicts, run times), and each `<!-- quote: SPEC -->TEXT<!-- /quote -->` in the prose is `quotes.quoted`.
Every figure comes from the functions the studies' own tables use (`paired`, `glue`, `translation`, `gates`).
docs/TESTS.md, "Figures in the docs", says what the tests hold the docs to."""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .catalog import STUDIES
from .glue import wall_times
from .grid import load_results
from .quotes import (
    ARM_KINDS,
    EARLIER_RESULTS,
    QUOTE_PATTERN,
    VERDICT,
    arm_row,
    metric_comparison,
    paired_text,
    quoted,
)
from .quotes import study_comparisons as quoted_comparisons
from .translation import budgets, gates_per_layer, present_variants, rule_verdict, runs_by_commit


DOCS = ("README.md", "docs/RESULTS.md", "docs/TRANSLATION.md", "docs/METHOD.md", "docs/TESTS.md")
# A block takes its opening marker's indentation, so that a list rendered inside a bullet stays in that bullet.
RENDER = re.compile(r"^([ \t]*)(<!-- render: (.+?) -->\n)(.*?)(^[ \t]*<!-- /render -->)", re.DOTALL | re.MULTILINE)
QUOTE = re.compile(QUOTE_PATTERN, re.DOTALL)
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def study_records(name, root):
    return load_results(Path(root) / (EARLIER_RESULTS[name] if name in EARLIER_RESULTS else STUDIES[name].results))


@dataclass(frozen=True)
class ArmTable:
    """A table of a study's arms, one row each in `arms` (`(arm, label)`: the arm as a quote names it, its row's
    label, under the heading `title`) and one column per `columns` (`(header, metric, kind)`: a quote kind of the
    metric's comparison); the twin's paired cells are `twin_cell`."""

    study: str
    title: str
    arms: tuple
    columns: tuple
    twin_cell: str = "(twin)"

    def cell(self, root, arm, metric, kind):
        comparison = metric_comparison(self.study, metric, root)
        labels, runs, twin_runs = arm_row(comparison, arm)
        if kind in ARM_KINDS:
            return ARM_KINDS[kind](comparison, runs)
        if twin_runs is None:
            return self.twin_cell
        if kind == VERDICT:
            return rule_verdict(quoted_comparisons(self.study, Path(root)), labels)
        return paired_text(comparison, kind, runs, twin_runs) or "-"

    def render(self, root):
        header = [self.title, *(header for header, *_ in self.columns)]
        lines = [markdown_row(header), "|" + " --- |" * len(header)]
        for arm, label in self.arms:
            lines.append(markdown_row([label, *(self.cell(root, arm, *column[1:]) for column in self.columns)]))
        return "\n".join(lines) + "\n"


def markdown_row(cells):
    return "| " + " | ".join(cells) + " |"


@dataclass(frozen=True)
class RunsTable:
    """One row per run of each arm (`(arm, label)`), seed by seed: `columns` are `(header, metric)`."""

    study: str
    arms: tuple
    columns: tuple

    def render(self, root):
        header = ["arm", "seed", *(name for name, _ in self.columns)]
        lines = [markdown_row(header), "|" + " --- |" * len(header)]
        for arm, label in self.arms:
            per_metric = []
            for _, metric in self.columns:
                comparison = metric_comparison(self.study, metric, root)
                scores = comparison.scores(arm_row(comparison, arm)[1])
                per_metric.append({seed: f"{score:.{comparison.digits}f}" for seed, score in scores.items()})
            for seed in sorted(per_metric[0]):
                lines.append(markdown_row([label, str(seed), *(scores[seed] for scores in per_metric)]))
        return "\n".join(lines) + "\n"


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

    def render(self, root):
        header = [self.title, "`none`", self.arm_header, *(name for name, _ in self.columns)]
        lines = [markdown_row(header), "|" + " --- |" * len(header)]
        for label, metric in self.metrics:
            comparison = metric_comparison(self.study, metric, root)
            _, runs, twin_runs = arm_row(comparison, self.arm)
            cells = [ARM_KINDS["score"](comparison, twin_runs), ARM_KINDS["score"](comparison, runs)]
            cells += [paired_text(comparison, kind, runs, twin_runs) or "-" for _, kind in self.columns]
            lines.append(markdown_row([label, *cells]))
        return "\n".join(lines) + "\n"


H100_VARIANTS = ("baseline", "global", "deep", "deep_global")
H100_METRICS = (
    ("sst2_accuracy", "SST-2 (accuracy)"),
    ("mrpc_accuracy", "MRPC (accuracy)"),
    ("mrpc_f1", "MRPC (F1)"),
    ("rte_accuracy", "RTE (accuracy)"),
)


def h100_block(root, kind):
    """The H100 GLUE grid (`cls` pooling, 3 seeds): per task and metric, each variant's `ARM_KINDS[kind]` (its
    mean ± std, `score`; its scores seed by seed, `seeds`)."""
    lines = [
        "| task (metric) | BERT baseline | CASAN global | CASAN deep | CASAN deep_global |",
        "| --- | --- | --- | --- | --- |",
    ]
    for metric, name in H100_METRICS:
        comparison = metric_comparison("glue-minilm-h100", metric, root)
        runs = [arm_row(comparison, f"finetune/{variant}")[1] for variant in H100_VARIANTS]
        lines.append(markdown_row([name, *(ARM_KINDS[kind](comparison, of_variant) for of_variant in runs)]))
    return "\n".join(lines) + "\n"


def one_budget(name, root):
    found = budgets(study_records(name, root))
    if len(found) != 1:
        raise ValueError(f"{name} has {len(found)} budgets; name one.")
    return found[0][2]


def runs_block(root, name):
    """The runs of a study per commit: how many, when, how long (`translation.runs_by_commit`)."""
    return runs_by_commit(one_budget(name, root))


def gates_block(root, name, task=None):
    """The final gates per layer of each arm (`translation.gates_per_layer`), of one GLUE `task`'s fine-tuning."""
    if task is None:
        records = one_budget(name, root)
    else:
        records = [r for r in study_records(name, root) if (r["task"], r["recipe"]) == (task, "finetune")]
    return gates_per_layer(records, present_variants(records))


def lengths_block(root, name, arm):
    """Test BLEU by source length of `arm` against the twin: each bucket's sentences, paired difference, seeds."""
    lines = [
        "| source words | sentences | paired diff in BLEU [95% interval] | seeds won |",
        "| --- | --- | --- | --- |",
    ]
    counts = next(record["test_by_length"] for record in one_budget(name, root) if "test_by_length" in record)
    for bucket, count in counts.items():
        spec = f"{name} {arm} test_bleu_{bucket}"
        lines.append(
            markdown_row(
                [bucket, str(count["sentences"]), quoted(f"{spec} paired", root), quoted(f"{spec} won", root)]
            )
        )
    return "\n".join(lines) + "\n"


def beyond_summary(root, name, *metrics):
    """Which arms of the study `name` are beyond the spread (95% interval excluding 0) on `metrics`, and which way:
    "no arm beyond the spread" where none is."""
    found = []
    for metric in metrics:
        comparison = metric_comparison(name, metric, root)
        for labels, runs, twin_runs in comparison.rows:
            pair = comparison.paired(runs, twin_runs) if twin_runs is not None else None
            if pair is not None and len(pair.differences) > 1 and pair.beyond != "no":
                found.append(f"`{labels[-1]}` on {metric} ({pair.beyond.removeprefix('yes, ')})")
    return "beyond the spread: " + ", ".join(found) if found else "no arm beyond the spread"


def verdicts_summary(root, name):
    """Each arm's verdict by the translation studies' rule: "`arm` level, `arm` worse"."""
    scored = quoted_comparisons(name, Path(root))
    primary = metric_comparison(name, "test_cross_entropy", root)
    return ", ".join(
        f"`{labels[-1]}` {rule_verdict(scored, labels)}"
        for labels, _, twin_runs in primary.rows
        if twin_runs is not None
    )


# The placeholders of a template beside the quotes: `{runs STUDY}` (its records), `{beyond STUDY METRIC ...}`,
# `{verdicts STUDY}`.
SUMMARIES = {
    "runs": lambda root, name: str(len(study_records(name, root))),
    "beyond": beyond_summary,
    "verdicts": verdicts_summary,
}


def seed_gates_block(root, name, arm, layer):
    """Per seed of `arm`: its final query and key gate of encoder layer `layer`, and its test BLEU."""
    comparison = metric_comparison(name, "test_bleu", root)
    runs = sorted(arm_row(comparison, arm)[1], key=lambda run: run["seed"])
    lines = [
        f"| seed | query gate, layer {layer} | key gate, layer {layer} | test BLEU |",
        "| --- | --- | --- | --- |",
    ]
    for run in runs:
        gates = [f"{run['gates'][target][int(layer)]:.3f}" for target in ("query", "key")]
        lines.append(markdown_row([str(run["seed"]), *gates, f"{comparison.score(run):.{comparison.digits}f}"]))
    return "\n".join(lines) + "\n"


def fill(template, root):
    """`template` with each `{SPEC}` a quote (`quotes.quoted`) or one of `SUMMARIES`."""

    return PLACEHOLDER.sub(lambda match: filled(match.group(1), root), template)


def filled(spec, root):
    """A placeholder's or an inline quote's text: a `SUMMARIES` entry, or a quote (`quotes.quoted`)."""
    words = spec.split()
    if words[0] in SUMMARIES:
        return SUMMARIES[words[0]](root, *words[1:])
    return quoted(spec, root)


@dataclass(frozen=True)
class Template:
    """Markdown lines whose `{SPEC}` placeholders `fill` renders."""

    lines: tuple

    def render(self, root):
        return "\n".join(fill(line, root) for line in self.lines) + "\n"


def table_block(root, name):
    from .pages import PAGES  # the docs' tables, made of the classes above

    if name not in PAGES:
        raise ValueError(f"{name!r} is not a table of casan_hf/studies/pages.py: {', '.join(PAGES)}.")
    return PAGES[name].render(root)


BLOCKS = {
    "table": table_block,
    "h100": h100_block,
    "runs": runs_block,
    "gates": gates_block,
    "lengths": lengths_block,
    "seed-gates": seed_gates_block,
    "wall-times": lambda root, name: wall_times(study_records(name, root)),
}


def block(spec, root):
    """What the block `spec` (`NAME ARGS`) renders; a ValueError naming the blocks there are."""
    name, *args = spec.split()
    if name not in BLOCKS:
        raise ValueError(f"render {spec!r}: {name!r} is not a block; the blocks: {', '.join(BLOCKS)}.")
    try:
        return BLOCKS[name](root, *args)
    except (TypeError, ValueError) as error:
        raise ValueError(f"render {spec!r}: {error}") from None


def indented(lines, indentation):
    """`lines` with `indentation` before each line that is not blank."""
    return "".join(indentation + line if line.strip() else line for line in lines.splitlines(keepends=True))


def render(text, root):
    """`text` with every block and quote as the records under `root` give it."""

    def rendered_block(match):
        indentation, opening, spec, _, closing = match.groups()
        return indentation + opening + indented(block(spec, root), indentation) + indentation + closing.lstrip()

    text = RENDER.sub(rendered_block, text)
    return QUOTE.sub(
        lambda match: f"<!-- quote: {match.group(1)} -->{filled(match.group(1), root)}<!-- /quote -->", text
    )


REPOSITORY = Path(__file__).resolve().parents[2]


def main(repository=REPOSITORY):
    """`make docs`: writes each doc as its render; prints the docs it changed."""
    for doc in DOCS:
        path = repository / doc
        text = path.read_text()
        rendered = render(text, repository)
        if rendered != text:
            path.write_text(rendered)
            print(f"rendered {doc}")


if __name__ == "__main__":
    sys.exit(main())
