"""The GLUE study's recipes, records and tables: how a variant is trained (`RECIPES`), what a finished run of
`scripts/run_glue.py` (after `scripts/run_mlm.py` for the recipes that pre-train) leaves in its folder as a record
(`collect`), and the records of a results file as the paired tables of each recipe and variant against the twin of
the same seed (`tables`) and the drawn comparisons (`comparisons`). `scripts/glue_sweep.py` runs the grid."""

import json
import statistics
from dataclasses import dataclass

from ..cli.run_start import data_fingerprint
from ..glue.tasks import GLUE_TASKS
from .arms import CONTEXT_OPTIONS, arm_order, check_cells, study_variants
from .gates import final_gates, mean_gates
from .paired import Comparison, paired_table


TWINS = ("baseline", "none")  # the variants without context


def twin_variant(classifier_pooling):
    """`baseline` is the source model itself, which pools the first token; any other pooling needs `none`."""
    return "baseline" if classifier_pooling == "cls" else "none"


@dataclass(frozen=True)
class Recipe:
    mlm: bool  # continued masked-LM pre-training on the task's training sentences before fine-tuning
    context_lr: bool  # the context parameters at --context_lr_multiplier times the learning rate


RECIPES = {
    "finetune": Recipe(mlm=False, context_lr=False),
    "context_lr": Recipe(mlm=False, context_lr=True),
    "mlm": Recipe(mlm=True, context_lr=False),
    "mlm_context_lr": Recipe(mlm=True, context_lr=True),
}
# The metrics shown in the table, per task (the GLUE ones; the others are in the results file).
TABLE_METRICS = {
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
}
TASKS = tuple(GLUE_TASKS)


def run_recipe(twin, recipe, variant):
    """The recipe a run is made under: the `twin` has no context to speed up, so under a context_lr recipe its run
    is the one without."""
    if variant == twin and RECIPES[recipe].context_lr:
        return next(name for name, other in RECIPES.items() if other == Recipe(RECIPES[recipe].mlm, False))
    return recipe


def mlm_dir(fine_tuning_dir):
    return fine_tuning_dir.with_name(f"{fine_tuning_dir.name}-mlm")


def collect(run):
    """A finished run's record: every metric of all_results.json, the final gates per layer, after MLM
    pre-training its perplexity, and the sha256 of the GLUE files it read (`run.data_files`)."""
    record = {**json.loads((run.folder / "all_results.json").read_text())}
    record["gates"] = final_gates(run.folder / "trainer_state.json")
    config = json.loads((run.folder / "config.json").read_text())
    record["context_options"] = {name: config[name] for name in CONTEXT_OPTIONS if name in config} or None
    if RECIPES[run.identity["recipe"]].mlm:
        record["mlm_perplexity"] = json.loads((mlm_dir(run.folder) / "eval_results.json").read_text())["perplexity"]
    record["data"] = data_fingerprint(run.data_files)
    return record


def comparisons(classifier_pooling, records):
    """Per task and metric, the `Comparison` of each recipe and variant with the twin (`twin_variant` of the
    `classifier_pooling`) of the same seed and recipe; of every run in `records`, of one sweep or several."""
    twin = twin_variant(classifier_pooling)

    check_cells(records, ("task", "recipe", "variant"))

    def selected(task, recipe, variant):
        recipe = run_recipe(twin, recipe, variant.partition(":")[0])
        return [r for r in records if (r["task"], r["recipe"], r["variant"]) == (task, recipe, variant)]

    present = sorted({record["variant"] for record in records}, key=arm_order(study_variants(TWINS)))
    found = []
    for task in [task for task in TASKS if any(record["task"] == task for record in records)]:
        recipes = [name for name in RECIPES if any((r["task"], r["recipe"]) == (task, name) for r in records)]
        for metric in TABLE_METRICS.get(task, ("accuracy",)):
            rows = [
                (
                    [recipe, variant],
                    selected(task, recipe, variant),
                    None if variant == twin else selected(task, recipe, twin),
                )
                for recipe in recipes
                for variant in present
                if selected(task, recipe, variant)
            ]
            found.append(
                Comparison(
                    f"{task}: {metric} (%)",
                    ("recipe", "variant"),
                    rows,
                    lambda r, m=metric: 100 * r[f"eval_{m}"],
                    metric=f"{task}_{metric}",
                )
            )
    return found


def summary_of(name, digits, statistic=statistics.mean):
    """A table cell: the `statistic` of the record field `name` over the runs that have it, "-" where none has."""

    def cell(runs):
        values = [run[name] for run in runs if name in run]
        return f"{statistic(values):.{digits}f}" if values else "-"

    return cell


# The median: one run that shared the machine with more jobs than the others does not move it.
median_train_time = summary_of("train_runtime", 0, statistics.median)
mean_perplexity = summary_of("mlm_perplexity", 2)


def wall_times(records):
    """Per task and recipe: the runs, the wall time of a run (the range, minutes) and in all (hours)."""
    lines = [
        "| task | recipe | runs | wall time of a run (min) | wall time in all (h) |",
        "| --- | --- | --- | --- | --- |",
    ]
    groups = {}
    for record in records:
        groups.setdefault((record["task"], record["recipe"]), []).append(record["wall_seconds"] / 60)
    for (task, recipe), minutes in groups.items():
        lines.append(
            f"| {task} | {recipe} | {len(minutes)} | {min(minutes):.1f}-{max(minutes):.1f} | {sum(minutes) / 60:.1f} |"
        )
    return "\n".join(lines) + "\n"


def tables(classifier_pooling, records):
    """The paired table of each comparison, with the final gates, the MLM perplexity and the training time."""

    extra = [
        ("final gates q / k", mean_gates),
        ("MLM perplexity", mean_perplexity),
        ("train time (s, median)", median_train_time),
    ]
    text = f"Twin: `{twin_variant(classifier_pooling)}` (classifier_pooling `{classifier_pooling}`).\n"
    return text + "".join(paired_table(comparison, extra) for comparison in comparisons(classifier_pooling, records))
