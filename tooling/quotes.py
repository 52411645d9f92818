"""A result the docs quote from a study, tied to its study, arm, metric and sign: in the docs' source it is written
`<!-- quote: STUDY ARM METRIC KIND [against ARM] -->TEXT<!-- /quote -->` (invisible on the rendered page), and
`quoted` renders, from the study's records, the TEXT it must be, character for character (docs/TESTS.md, "Figures
in the docs"); `make docs` writes it there (`render`). `figure` is the one resolver of a figure, which the quotes and
the tables' cells (`tables`) both show; `filled` adds the summaries of a study's arms (`SUMMARIES`).

STUDY is a row of `catalog.STUDIES`; ARM names one row of the study's tables by its labels
joined with `/`, or their end (`none:output_gate="elementwise"`, `finetune/deep_global`); METRIC is a comparison's
`metric` (a translation record's score, `test_bleu_1-10`, `rte_accuracy`); KIND is one of `ARM_KINDS` (the arm's
own scores), `PAIRED_KINDS` (its per-seed differences to the twin, or with `against ARM` to another arm) or
`verdict`, the decision rule its study's sweep wrote before its runs (`RULES`)."""

import functools

from casan_hf.benchmark.runner import PYTORCH_MIXER
from casan_hf.studies import causal, translation
from casan_hf.studies.arms import arm_words
from casan_hf.studies.gates import mean_gates, mean_output_gates
from casan_hf.studies.glue import mean_perplexity, median_train_time
from casan_hf.studies.paired import detectable_difference, mean_std, percent_of, score_spread

from .catalog import STUDIES


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
# Each sweep whose studies have a decision rule -> the rule (written before their runs): the translation studies'
# (docs/TRANSLATION_DEEP.md) and the causal LMs' (docs/CAUSAL.md).
RULES = {"translation": translation.rule_verdict, "clm": causal.rule_verdict}


def study_rule(name):
    """The decision rule of the study `name` (`RULES`), or a ValueError where its sweep has none."""
    sweep = STUDIES[name].sweep
    if sweep not in RULES:
        raise ValueError(f"{name} is a {sweep} study, with no decision rule; the rules: {', '.join(RULES)} studies'.")
    return RULES[sweep]


def arm_row(comparison, arm):
    """The one row of `comparison` that `arm` names: its labels joined with `/`, or their end."""
    found = [row for row in comparison.rows if "/".join(row[0]) == arm or "/".join(row[0]).endswith("/" + arm)]
    if len(found) != 1:
        named = ", ".join("/".join(labels) for labels, *_ in comparison.rows)
        raise ValueError(f"arm {arm!r} names {len(found)} rows of {comparison.title!r}, not one; its rows: {named}.")
    return found[0]


def is_twin(comparison, arm):
    """Whether `arm` is the twin of `comparison`: the row the other arms are paired with."""
    return arm_row(comparison, arm)[2] is None


def figure(results, name, arm, metric, kind, against=None):
    """The text of the figure `kind` of `arm`'s `metric` in the study `name` (`results`: a `StudyResults`), against
    the twin or the arm `against`: what a quote and a table cell show. None where too few seeds are paired; a
    ValueError naming what is wrong and what is allowed."""
    if kind not in KINDS:
        raise ValueError(f"the kind {kind!r} is not one of {', '.join(KINDS)}.")
    comparison = results.comparison(name, metric)
    labels, runs, twin_runs = arm_row(comparison, arm)
    if kind in ARM_KINDS:
        if against is not None:
            raise ValueError(f"a {kind} is the arm's own; it is against no arm.")
        return ARM_KINDS[kind](comparison, runs)
    if kind == VERDICT:
        if against is not None:
            raise ValueError("a verdict is the study's rule, against the twin.")
        return study_rule(name)(results.comparisons(name), labels)
    other_runs = twin_runs if against is None else arm_row(comparison, against)[1]
    if other_runs is None:
        raise ValueError(f"{arm!r} is the twin; name an arm that differs from it.")
    return paired_text(comparison, kind, runs, other_runs)


def quoted(spec, results):
    """The text the quote `spec` (`STUDY ARM METRIC KIND [against ARM]`) must be, from `results` (a
    `StudyResults`); a ValueError naming what is wrong and what is allowed."""
    words = spec.split()
    if len(words) not in (4, 6) or (len(words) == 6 and words[4] != "against"):
        raise ValueError(f"quote {spec!r}: write STUDY ARM METRIC KIND [against ARM].")
    name, arm, metric, kind = words[:4]
    try:
        text = figure(results, name, arm, metric, kind, against=words[5] if len(words) == 6 else None)
    except ValueError as error:
        raise ValueError(f"quote {spec!r}: {error}") from None
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


def beyond_summary(results, name, *metrics, in_words=False):
    """Which arms of the study `name` are beyond the spread (95% interval excluding 0) on `metrics`, and which way,
    each arm by its name ("`deep` on sst2_accuracy (better)") or `in_words` (`arms.arm_words`, "; " between arms):
    "no arm beyond the spread" where none is."""
    found = []
    for metric in metrics:
        comparison = results.comparison(name, metric)
        for labels, runs, twin_runs in comparison.rows:
            pair = comparison.paired(runs, twin_runs) if twin_runs is not None else None
            if pair is not None and len(pair.differences) > 1 and pair.beyond != "no":
                arm = arm_words(labels[-1]) if in_words else f"`{labels[-1]}`"
                found.append(f"{arm} on {metric} ({pair.beyond.removeprefix('yes, ')})")
    if not found:
        return "no arm beyond the spread"
    return "beyond the spread: " + ("; " if in_words else ", ").join(found)


def verdicts_summary(results, name, in_words=False):
    """Each arm's verdict by its study's rule (`RULES`), each arm by its name ("`arm` level, `arm` worse") or
    `in_words` (`arms.arm_words`: "global context (gate per head): worse; deep_global context: level")."""
    rule = study_rule(name)
    primary = results.comparison(name, "test_cross_entropy")
    verdicts = [
        (labels[-1], rule(results.comparisons(name), labels))
        for labels, _, twin_runs in primary.rows
        if twin_runs is not None
    ]
    if in_words:
        return "; ".join(f"{arm_words(arm)}: {verdict}" for arm, verdict in verdicts)
    return ", ".join(f"`{arm}` {verdict}" for arm, verdict in verdicts)


def seeds_done(results, name):
    """The seeds every arm of the translation study `name` has run, the fewest any arm has ("2"): what an interim
    verdict rests on."""
    return str(min(len(runs) for _, runs, _ in results.comparison(name, "test_cross_entropy").rows))


def benchmark_cost(results, file, kind, field):
    """A cost of the eager CASAN model `kind` (a context type, `+local` for the local bias beside it:
    `deep_global+local`; `none` is the control) from the benchmark record `file` of `docs/results/`
    (`scripts/benchmark.py --json`): `params`, the parameters it adds in % of BERT's ("+13.0%"); `inference` or
    `training`, its median speed over BERT's in that record, wall clock and process CPU time ("0.98 (0.97)")."""
    records = results.benchmark(file)
    context_type, local = kind.removesuffix("+local"), kind.endswith("+local")
    modes = ("inference", "training")
    if field not in ("params", *modes):
        raise ValueError(f"cost {field!r} is not one of params, {', '.join(modes)}.")
    found = {
        record["mode"]: record
        for record in records
        if record["context_type"] == context_type
        and (record.get("local_params", 0) > 0) == local
        and record.get("compile_mode") is None
        and not record["model"].endswith(PYTORCH_MIXER)  # a GPU run's twin on the mixer's PyTorch path
    }
    if not found:
        kinds = sorted({f"{r['context_type']}{'+local' * (r.get('local_params', 0) > 0)}" for r in records})
        raise ValueError(f"{file} has no eager {kind!r}; its kinds: {', '.join(kinds)}.")
    if field == "params":
        record = next(iter(found.values()))
        reference = next(r for r in records if r["context_type"] is None)  # the family's own model: "bert"
        return f"+{100 * (record['params'] - reference['params']) / reference['params']:.1f}%"
    if field not in found:
        raise ValueError(f"{file} has no {field} run of {kind!r}.")
    return f"{found[field]['ratio_vs_bert']:.2f} ({found[field]['cpu_ratio_vs_bert']:.2f})"


# The summaries of a study's arms that a template or a quote names beside the figures: `{runs STUDY}` (its records),
# `{seeds-done STUDY}`, `{beyond STUDY METRIC ...}`, `{verdicts STUDY}`, the arms by their names (as the detail docs
# name them, with their options as a sweep's `--arms` spells them) or in words (README: `beyond-in-words`,
# `verdicts-in-words`).
SUMMARIES = {
    "runs": lambda results, name: str(len(results.records(name))),
    "seeds-done": seeds_done,
    "beyond": beyond_summary,
    "beyond-in-words": functools.partial(beyond_summary, in_words=True),
    "verdicts": verdicts_summary,
    "verdicts-in-words": functools.partial(verdicts_summary, in_words=True),
    "cost": benchmark_cost,  # `{cost FILE KIND FIELD}`: a model's cost in a benchmark record, not a study's
}


def filled(spec, results):
    """A placeholder's or an inline quote's text: a `SUMMARIES` entry, or a quote (`quoted`)."""
    words = spec.split()
    if words[0] in SUMMARIES:
        return SUMMARIES[words[0]](results, *words[1:])
    return quoted(spec, results)
