"""A result the docs quote from a study, tied to its study, arm, metric and sign: in the docs' source it is written
`<!-- quote: STUDY ARM METRIC KIND [against ARM] -->TEXT<!-- /quote -->` (invisible on the rendered page), and
`quoted` renders, from the study's records, the TEXT it must be, character for character (docs/TESTS.md, "Figures
in the docs").

STUDY is a row of `catalog.STUDIES`; ARM names one row of the study's tables by its labels joined with `/`, or their
end (`none:output_gate="elementwise"`, `finetune/deep_global`); METRIC is a comparison's `metric` (a translation
record's score, `test_bleu_1-10`, `rte_accuracy`); KIND is one of `KINDS` or `verdict`, the translation studies'
decision rule (`translation.rule_verdict`). The difference is to the twin, or with `against ARM` to another arm."""

import functools

from .catalog import STUDIES
from .glue import comparisons as glue_comparisons
from .grid import load_results
from .translation import budget_comparisons, budgets, rule_verdict


# How each kind of figure of the paired differences is written; the formats are `paired.Paired`'s, the tables'.
KINDS = {
    "diff": lambda pair: pair.difference,  # +0.008
    "interval": lambda pair: pair.interval,  # [-0.002, +0.017]
    "paired": lambda pair: f"{pair.difference} {pair.interval}",  # +0.008 [-0.002, +0.017]
    "spread": lambda pair: pair.spread,  # +0.008 ± 0.008
    "won": lambda pair: f"{pair.wins} of {len(pair.differences)}",  # 0 of 5: the seeds better than the other arm
    "power": lambda pair: pair.power,  # 0.013: the detectable difference (80% power)
}
VERDICT = "verdict"


@functools.cache
def study_comparisons(name, root):
    """Every comparison of the study `name` (each metric of each budget or task), from its records under `root`."""
    study = STUDIES[name]
    records = load_results(root / study.results)
    if study.sweep == "translation":
        return tuple(comparison for budget in budgets(records) for comparison in budget_comparisons(*budget))
    return tuple(glue_comparisons(records[0]["settings"]["classifier_pooling"], records))


def arm_row(comparison, arm):
    """The one row of `comparison` that `arm` names: its labels joined with `/`, or their end."""
    found = [row for row in comparison.rows if "/".join(row[0]) == arm or "/".join(row[0]).endswith("/" + arm)]
    if len(found) != 1:
        named = ", ".join("/".join(labels) for labels, *_ in comparison.rows)
        raise ValueError(f"arm {arm!r} names {len(found)} rows of {comparison.title!r}, not one; its rows: {named}.")
    return found[0]


def quoted(spec, root):
    """The text the quote `spec` (`STUDY ARM METRIC KIND [against ARM]`) must be, from the records under `root`; a
    ValueError naming what is wrong and what is allowed."""
    words = spec.split()
    if len(words) not in (4, 6) or (len(words) == 6 and words[4] != "against"):
        raise ValueError(f"quote {spec!r}: write STUDY ARM METRIC KIND [against ARM].")
    name, arm, metric, kind = words[:4]
    if name not in STUDIES:
        raise ValueError(f"quote {spec!r}: {name!r} is not a study; the studies: {', '.join(STUDIES)}.")
    if kind not in (*KINDS, VERDICT):
        raise ValueError(f"quote {spec!r}: the kind {kind!r} is not one of {', '.join((*KINDS, VERDICT))}.")
    scored = study_comparisons(name, root)
    found = [comparison for comparison in scored if comparison.metric == metric]
    if len(found) != 1:
        metrics = sorted({comparison.metric for comparison in scored})
        raise ValueError(f"quote {spec!r}: {name} has {len(found)} comparisons of {metric!r}; its metrics: {metrics}.")
    comparison = found[0]
    labels, runs, twin_runs = arm_row(comparison, arm)
    if kind == VERDICT:
        if len(words) == 6 or STUDIES[name].sweep != "translation":
            raise ValueError(f"quote {spec!r}: a verdict is the translation studies' rule, against the twin.")
        return rule_verdict(scored, labels)
    other_runs = arm_row(comparison, words[5])[1] if len(words) == 6 else twin_runs
    if other_runs is None:
        raise ValueError(f"quote {spec!r}: {arm!r} is the twin; name an arm that differs from it.")
    pair = comparison.paired(runs, other_runs)
    if len(pair.differences) < (1 if kind == "diff" else 2):
        raise ValueError(f"quote {spec!r}: {len(pair.differences)} seed(s) paired, too few for a {kind}.")
    return KINDS[kind](pair)
