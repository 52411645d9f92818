"""A result the docs quote from a study, tied to its study, arm, metric and sign: in the docs' source it is written
`<!-- quote: STUDY ARM METRIC KIND [against ARM] -->TEXT<!-- /quote -->` (invisible on the rendered page), and
`quoted` renders, from the study's records, the TEXT it must be, character for character (docs/TESTS.md, "Figures
in the docs"); `make docs` writes it there (`render`).

STUDY is a row of `catalog.STUDIES` or of `EARLIER_RESULTS`; ARM names one row of the study's tables by its labels
joined with `/`, or their end (`none:output_gate="elementwise"`, `finetune/deep_global`); METRIC is a comparison's
`metric` (a translation record's score, `test_bleu_1-10`, `rte_accuracy`); KIND is one of `ARM_KINDS` (the arm's
own scores), `PAIRED_KINDS` (its per-seed differences to the twin, or with `against ARM` to another arm) or
`verdict`, the translation studies' decision rule (`translation.rule_verdict`)."""

import functools
from pathlib import Path

from .catalog import STUDIES
from .gates import mean_gates, mean_output_gates
from .glue import comparisons as glue_comparisons
from .glue import mean_perplexity, median_train_time
from .grid import load_results
from .paired import detectable_difference, mean_std, percent_of, score_spread
from .translation import budget_comparisons, budgets, rule_verdict


# Results of a sweep made before the catalog, quoted as its studies are: the GLUE grid at `cls` pooling on an H100
# (docs/RESULTS.md), every run fine-tuned only.
EARLIER_RESULTS = {"glue-minilm-h100": "docs/results/glue_minilm_h100.json"}


QUOTE_PATTERN = r"<!-- quote: (.+?) -->(.*?)<!-- /quote -->"


def in_seed_order(scores, digits):
    return ", ".join(f"{score:.{digits}f}" for _, score in sorted(scores.items()))


# How each kind of figure is written; the formats are `paired`'s, the tables'. An arm's own scores:
ARM_KINDS = {
    "score": lambda comparison, runs: score_spread(list(comparison.scores(runs).values()), comparison.digits),
    "score-n": lambda comparison, runs: mean_std(list(comparison.scores(runs).values()), comparison.digits),
    "seeds": lambda comparison, runs: in_seed_order(comparison.scores(runs), comparison.digits),  # 57.04, 58.48
    "gates": lambda comparison, runs: mean_gates(runs),  # 0.018 / 0.017: the final query / key gates
    "output-gates": lambda comparison, runs: mean_output_gates(runs),  # 0.163 / 0.548: mean / share under 0.1
    "train-time": lambda comparison, runs: f"{median_train_time(runs)} s",  # 1134 s: the median
    "perplexity": lambda comparison, runs: mean_perplexity(runs),  # the masked-LM perplexity before fine-tuning
}
# Its paired differences (`paired.Paired`) to the other arm, whose scores are `base`:
PAIRED_KINDS = {
    "diff": lambda pair, base: pair.difference,  # +0.008
    "interval": lambda pair, base: pair.interval,  # [-0.002, +0.017]
    "paired": lambda pair, base: f"{pair.difference} {pair.interval}",  # +0.008 [-0.002, +0.017]
    "spread": lambda pair, base: pair.spread,  # +0.008 ± 0.008
    "won": lambda pair, base: f"{pair.wins} of {len(pair.differences)}",  # 0 of 5: the seeds better than the other
    "p": lambda pair, base: pair.sign_test,  # 0.06: the sign test's p of the seeds won
    "power": lambda pair, base: pair.power,  # 0.013: the detectable difference (80% power)
    "beyond": lambda pair, base: pair.beyond,  # no / yes, better / yes, worse: the interval excludes 0
    "diffs": lambda pair, base: pair.per_seed,  # +1.96, +0.74, -0.49: each seed's, in the seeds' order
    "extent": lambda pair, base: pair.extent,  # -1.08 to +5.05
    "percent": lambda pair, base: percent_of(pair.mean, base),  # +0.64%: of the other arm's mean
    "power-percent": lambda pair, base: percent_of(detectable_difference(pair.differences), base, sign=False),
}
VERDICT = "verdict"
KINDS = (*ARM_KINDS, *PAIRED_KINDS, VERDICT)


def study_names():
    return (*STUDIES, *EARLIER_RESULTS)


@functools.cache
def study_comparisons(name, root):
    """Every comparison of the study `name` (each metric of each budget or task), from its records under `root`."""
    if name in EARLIER_RESULTS:
        records = load_results(Path(root) / EARLIER_RESULTS[name])
        return tuple(glue_comparisons("cls", [{"recipe": "finetune", **record} for record in records]))
    study = STUDIES[name]
    records = load_results(Path(root) / study.results)
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


def metric_comparison(name, metric, root):
    """The comparison of `metric` in the study `name`; a ValueError naming the study's metrics."""
    if name not in study_names():
        raise ValueError(f"{name!r} is not a study; the studies: {', '.join(study_names())}.")
    scored = study_comparisons(name, Path(root))
    found = [comparison for comparison in scored if comparison.metric == metric]
    if len(found) != 1:
        metrics = sorted({comparison.metric for comparison in scored})
        raise ValueError(f"{name} has {len(found)} comparisons of {metric!r}; its metrics: {metrics}.")
    return found[0]


def quoted(spec, root):
    """The text the quote `spec` (`STUDY ARM METRIC KIND [against ARM]`) must be, from the records under `root`; a
    ValueError naming what is wrong and what is allowed."""
    words = spec.split()
    if len(words) not in (4, 6) or (len(words) == 6 and words[4] != "against"):
        raise ValueError(f"quote {spec!r}: write STUDY ARM METRIC KIND [against ARM].")
    name, arm, metric, kind = words[:4]
    if kind not in KINDS:
        raise ValueError(f"quote {spec!r}: the kind {kind!r} is not one of {', '.join(KINDS)}.")
    try:
        comparison = metric_comparison(name, metric, root)
    except ValueError as error:
        raise ValueError(f"quote {spec!r}: {error}") from None
    labels, runs, twin_runs = arm_row(comparison, arm)
    if kind in ARM_KINDS:
        if len(words) == 6:
            raise ValueError(f"quote {spec!r}: a {kind} is the arm's own; it is against no arm.")
        return ARM_KINDS[kind](comparison, runs)
    if kind == VERDICT:
        if len(words) == 6 or name not in STUDIES or STUDIES[name].sweep != "translation":
            raise ValueError(f"quote {spec!r}: a verdict is the translation studies' rule, against the twin.")
        return rule_verdict(study_comparisons(name, Path(root)), labels)
    other_runs = arm_row(comparison, words[5])[1] if len(words) == 6 else twin_runs
    if other_runs is None:
        raise ValueError(f"quote {spec!r}: {arm!r} is the twin; name an arm that differs from it.")
    text = paired_text(comparison, kind, runs, other_runs)
    if text is None:
        raise ValueError(f"quote {spec!r}: too few seeds paired for a {kind}.")
    return text


def paired_text(comparison, kind, runs, other_runs):
    """The `PAIRED_KINDS` figure `kind` of `runs` against `other_runs`; None where too few seeds are paired (one
    for a difference, two for the rest)."""
    pair = comparison.paired(runs, other_runs)
    if len(pair.differences) < (1 if kind in ("diff", "diffs") else 2):
        return None
    return PAIRED_KINDS[kind](pair, list(comparison.scores(other_runs).values()))
