"""The translation study's records and tables: what a finished run of `scripts/run_translation.py` leaves in its
folder becomes a record (`collect`), and the records of a results file become the paired tables of each arm
against `none` of the same seed, per score and source length, with the primary metric relative to the twin and
between the other arms, the final gates and the runs' time per commit (`tables`: the figures a study's prose
quotes), and the drawn comparisons (`comparisons`). `scripts/translation_sweep.py` runs the grid."""

import itertools
import json
import statistics
from pathlib import Path

from ..cli.run_start import RUN_START_NAME
from ..training.gates import SPARSE_BELOW
from ..translation import LENGTH_BUCKETS, bucket_name
from .arms import CONTEXT_OPTIONS, arm_order, check_cells, study_variants
from .gates import final_gates, has_output_gate, mean_gates, mean_output_gates
from .grid import run_time, timed_whole
from .paired import (
    PAIRED_COLUMNS,
    Comparison,
    detectable_difference,
    paired_cells,
    paired_interval,
    paired_table,
    percent_of,
)


TWIN = "none"


CROSS_ENTROPY = "cross-entropy per target token (nats, no label smoothing; lower is better)"
# (title, record field, lower is better): the paired tables, one per score; the first four are drawn.
SCORES = (
    (f"test {CROSS_ENTROPY}", "test_cross_entropy", True),
    (f"validation {CROSS_ENTROPY}", "validation_cross_entropy", True),
    ("test BLEU (beam)", "test_bleu", False),
    ("test chrF (beam)", "test_chrf", False),
    ("test BLEU (greedy)", "greedy_test_bleu", False),
    ("test chrF (greedy)", "greedy_test_chrf", False),
    ("validation BLEU (beam)", "validation_bleu", False),
)
DRAWN = 4
PRIMARY = SCORES[0][0]  # the metric of the studies' decision rule (docs/TRANSLATION_DEEP.md)


def read(path):
    return json.loads(Path(path).read_text())


def collect(run):
    """A finished run's record: validation and test cross-entropy and scores (beam and greedy), test scores per
    source length, training time and steps over the whole run (`grid.run_time`), the encoder's final gates per
    layer (and head), the context options its model had, the hash of the data it read, and what it received as it
    started (`run_start.json`: command line, commit, versions)."""
    train = read(run.folder / "train_results.json")
    steps = read(run.folder / "trainer_state.json")["global_step"]
    validation, test = read(run.folder / "eval_results.json"), read(run.folder / "predict_results.json")
    greedy = read(run.folder / "greedy" / "predict_results.json")
    started = read(run.folder / RUN_START_NAME)
    return {
        "validation_cross_entropy": validation["eval_cross_entropy"],
        "validation_bleu": validation["eval_bleu"],
        "validation_chrf": validation["eval_chrf"],
        "test_cross_entropy": test["predict_cross_entropy"],
        "test_bleu": test["predict_bleu"],
        "test_chrf": test["predict_chrf"],
        "test_by_length": read(run.folder / "predict_by_source_length.json"),
        "greedy_test_bleu": greedy["predict_bleu"],
        "greedy_test_chrf": greedy["predict_chrf"],
        "train_loss": train["train_loss"],
        **run_time(started, steps, train["train_runtime"]),
        "gates": final_gates(run.folder / "trainer_state.json"),
        "context_options": {name: started["settings"][name] for name in CONTEXT_OPTIONS},
        "data": started["data"],
        "received": started,
    }


def gates_per_layer(records, variants):
    """The final mean query / key gate of each encoder layer, per arm, over its seeds; with a gate per head, each
    head's too."""
    lines = []
    for variant in variants:
        gates = [record["gates"] for record in records if record["variant"] == variant and record["gates"]]
        if not gates:
            continue
        layers = range(len(gates[0]["query"]))
        cells = [
            f"{statistics.mean(g['query'][layer] for g in gates):.3f} / "
            f"{statistics.mean(g['key'][layer] for g in gates):.3f}"
            for layer in layers
        ]
        lines.append(f"- `{variant}`: " + ", ".join(f"layer {i}: {cell}" for i, cell in enumerate(cells)))
        if "output_mean" in gates[0]:
            output = [
                f"{statistics.mean(g['output_mean'][layer] for g in gates):.3f} / "
                f"{statistics.mean(g['output_sparse'][layer] for g in gates):.3f}"
                for layer in layers
            ]
            lines.append(
                f"  - output gate (mean / share < {SPARSE_BELOW}): "
                + ", ".join(f"layer {i}: {cell}" for i, cell in enumerate(output))
            )
        if "query_per_head" in gates[0]:
            for target in ("query", "key"):
                per_head = [
                    " ".join(
                        f"{statistics.mean(g[f'{target}_per_head'][layer][head] for g in gates):.3f}"
                        for head in range(len(gates[0][f"{target}_per_head"][layer]))
                    )
                    for layer in layers
                ]
                lines.append(
                    f"  - {target} gate per head: "
                    + "; ".join(f"layer {i}: {cell}" for i, cell in enumerate(per_head))
                )
    return "\n".join(lines) + "\n" if lines else ""


def budgets(records):
    """Each (size, epochs) of the records with its records: every table compares runs of one budget."""
    found = sorted({(record["model_size"], record["epochs"]) for record in records})
    return [
        (size, epochs, [record for record in records if (record["model_size"], record["epochs"]) == (size, epochs)])
        for size, epochs in found
    ]


def present_variants(records):
    """The arms of `records`, by name, in the table's order."""
    return sorted({record["variant"] for record in records}, key=arm_order(study_variants((TWIN,))))


def length_score(first, last):
    """A record's test BLEU on the sentences whose source has first..last words, None where not recorded."""
    return lambda record: record.get("test_by_length", {}).get(bucket_name(first, last), {}).get("bleu")


def budget_comparisons(size, epochs, of_budget):
    """Per score (and test BLEU per source length), the `Comparison` of each arm of one budget with `none` of the
    same seed; a score no record of the budget has is left out."""
    check_cells(of_budget, ("model_size", "epochs", "variant"))

    def selected(variant):
        return [record for record in of_budget if record["variant"] == variant]

    rows = [
        ([size, f"{epochs:g}", variant], selected(variant), None if variant == TWIN else selected(TWIN))
        for variant in present_variants(of_budget)
    ]
    labels = ("size", "epochs", "variant")
    scores = [
        Comparison(
            f"{size}, {epochs:g} epochs: {title}",
            labels,
            rows,
            lambda r, f=field: r.get(f),
            lower,
            3 if lower else 2,
            metric=field,
        )
        for title, field, lower in SCORES
    ]
    counts = next((record["test_by_length"] for record in of_budget if "test_by_length" in record), {})
    scores += [
        Comparison(
            f"{size}, {epochs:g} epochs: test BLEU (beam), sources of {bucket_name(first, last)} words "
            f"({counts[bucket_name(first, last)]['sentences']} sentences)",
            labels,
            rows,
            length_score(first, last),
            metric=f"test_bleu_{bucket_name(first, last)}",
        )
        for first, last in LENGTH_BUCKETS
        if bucket_name(first, last) in counts
    ]
    return [comparison for comparison in scores if any(comparison.scores(runs) for _, runs, _ in rows)]


RULE_METRICS = ("test_cross_entropy", "validation_cross_entropy", "test_bleu")  # the primary metric first


def rule_verdict(scored, labels):
    """The studies' decision rule, written before their runs (docs/TRANSLATION_DEEP.md), for the arm of the rows
    labelled `labels` (size, epochs, variant) in the comparisons `scored`, against the twin: it *pays* if its
    paired difference in test cross-entropy has a 95% interval entirely below zero and its validation cross-entropy
    and test BLEU move the same way on the mean; it is *worse* if that interval lies entirely above zero; otherwise
    it is *level*."""
    pairs = {
        comparison.metric: comparison.paired(runs, twin_runs)
        for comparison in scored
        if comparison.metric in RULE_METRICS
        for row_labels, runs, twin_runs in comparison.rows
        if row_labels == list(labels) and twin_runs is not None
    }
    if len(pairs) < len(RULE_METRICS) or len(pairs[RULE_METRICS[0]].differences) < 2:
        raise ValueError(
            f"The rule needs two seeds of {'/'.join(labels)} and its twin in each of {', '.join(RULE_METRICS)}; the "
            f"records have {', '.join(pairs) or 'none of them'}."
        )
    primary, validation, bleu = (pairs[metric] for metric in RULE_METRICS)
    mean, _, half = paired_interval(primary.differences)
    if mean + half < 0 and validation.mean < 0 and bleu.mean > 0:
        return "pays"
    return "worse" if mean - half > 0 else "level"


def comparisons(records):
    """The drawn comparisons: cross-entropy and beam-search scores of each budget."""
    return [
        comparison
        for budget in budgets(records)
        for comparison in budget_comparisons(*budget)
        if comparison.title.split(": ", 1)[1] in {title for title, *_ in SCORES[:DRAWN]}
    ]


def relative_to_twin(comparison):
    """Each arm's mean paired difference to the twin and its detectable difference (80% power) as % of the twin's
    mean score: the scale of a difference in cross-entropy. Empty where no arm has two seeds of its twin's."""
    lines = []
    for labels, runs, twin_runs in comparison.rows:
        differences = list(comparison.differences(runs, twin_runs).values()) if twin_runs is not None else []
        if len(differences) < 2:
            continue
        twin = list(comparison.scores(twin_runs).values())
        lines.append(
            f"| {labels[-1]} | {percent_of(statistics.mean(differences), twin)} | "
            f"{percent_of(detectable_difference(differences), twin, sign=False)} |"
        )
    if not lines:
        return ""
    header = "| variant | paired diff to twin | detectable diff (80% power) |\n| --- | --- | --- |\n"
    return f"\n### {comparison.title}: as % of the twin's mean\n\n" + header + "\n".join(lines) + "\n"


def between_arms(comparison):
    """The paired difference of each arm but the twin to each one before it in the table, over the seeds both ran:
    what one arm adds to another (the output-gate study's rule asks it of the context-driven gate against the
    token-only one). Empty where no two arms share two seeds."""
    arms = [(labels[-1], runs) for labels, runs, twin_runs in comparison.rows if twin_runs is not None]
    lines = []
    for (base, base_runs), (arm, runs) in itertools.combinations(arms, 2):
        if len(comparison.differences(runs, base_runs)) > 1:
            lines.append("| " + " | ".join([arm, base, *paired_cells(comparison, runs, base_runs)]) + " |")
    if not lines:
        return ""
    header = ["variant", "against", *(column.replace("twin", "the other") for column in PAIRED_COLUMNS[1:])]
    return (
        f"\n### {comparison.title}: between the arms\n\n| "
        + " | ".join(header)
        + " |\n|"
        + " --- |" * len(header)
        + "\n"
        + "\n".join(lines)
        + "\n"
    )


def runs_by_commit(of_budget):
    """The runs of a budget per commit they ran (records made before it was kept: one group): how many (and how
    many were resumed), when the first started, each one's wall time and seconds per training step (the range),
    and their wall time in all; the times over the runs timed whole (`grid.timed_whole`)."""
    groups = {}
    for record in sorted(of_budget, key=lambda record: record.get("received", {}).get("started", "")):
        groups.setdefault(record.get("received", {}).get("commit"), []).append(record)
    lines = [
        "| commit | first started | runs | wall time of a run (min) | s / step | wall time in all (h) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    untimed = 0
    for commit, runs in groups.items():
        whole = timed_whole(runs)
        untimed += len(runs) - len(whole)
        minutes = [run["wall_seconds"] / 60 for run in whole]
        per_step = [run["seconds_per_step"] for run in whole]
        started = runs[0].get("received", {}).get("started", "")[:10] or "not recorded"
        name = "not recorded" if commit is None else commit[:7] + commit[40:]  # the short hash, and "+changes"
        count = f"{len(runs)}" + (f" ({len(runs) - len(whole)} resumed)" if len(whole) < len(runs) else "")
        times = "- | - | -"
        if whole:
            times = f"{min(minutes):.1f}-{max(minutes):.1f} | {min(per_step):.3f}-{max(per_step):.3f} | "
            times += f"{sum(minutes) / 60:.1f}"
        lines.append(f"| {name} | {started} | {count} | {times} |")
    if untimed:
        lines.append(
            f"\nThe times are over the runs timed whole: {untimed} {'run' if untimed == 1 else 'runs'} resumed from "
            "a checkpoint kept no time of the part before the resume, and are left out of them."
        )
    return "\n".join(lines) + "\n"


def differing_data(of_budget):
    """A note naming each arm's data (the sha256 of its files, `run_start.data_fingerprint`) where the runs of a
    budget read different data; empty where they read the same, or none recorded its data."""
    hashes = {}
    for record in of_budget:
        data = record.get("data") or {}
        hashes.setdefault(record["variant"], set()).add((data.get("sha256") or "not recorded")[:12])
    found = set().union(*hashes.values())
    if len(found) < 2:
        return ""
    arms = "; ".join(f"`{variant}` {', '.join(sorted(seen))}" for variant, seen in hashes.items())
    return f"\n**The runs read different data** (sha256 of the data files, first 12 digits): {arms}.\n"


def tables(records):
    def time_per_step(runs):
        """The median over the runs timed whole: one run that shared the machine with more jobs than the others
        does not move it."""
        whole = timed_whole(runs)
        return f"{statistics.median(run['seconds_per_step'] for run in whole):.3f}" if whole else "-"

    extra = [
        ("s / step (median)", time_per_step),
        ("final gates q / k", mean_gates),
        *(
            [(f"output gate / share < {SPARSE_BELOW}", mean_output_gates)]
            if any(map(has_output_gate, records))
            else []
        ),
    ]
    text = (
        f"Twin: `{TWIN}`. Scores in %, sacreBLEU (13a) and chrF on detokenized output; cross-entropy in nats per "
        "target token. Beyond the spread: the 95% interval of the paired difference excludes 0.\n"
    )
    for size, epochs, of_budget in budgets(records):
        scored = budget_comparisons(size, epochs, of_budget)
        text += "".join(paired_table(comparison, extra) for comparison in scored)
        primary = [comparison for comparison in scored if comparison.title.split(": ", 1)[1] == PRIMARY]
        text += "".join(relative_to_twin(comparison) + between_arms(comparison) for comparison in primary)
        text += "\n### Final encoder gates per layer (query / key, mean over seeds)\n\n"
        text += gates_per_layer(of_budget, present_variants(records))
        text += "\n### Runs per commit (wall time of a run, seconds per training step)\n\n" + runs_by_commit(of_budget)
        text += differing_data(of_budget)
    return text
