#!/usr/bin/env python
"""Runs the grid behind docs/RESULTS.md: every task x recipe x variant x seed through scripts/run_glue.py (and,
for the recipes that pre-train, scripts/run_mlm.py first), same hyper-parameters for all; each finished run's
scores, gates, MLM perplexity and times go into the results file (`--results`, default
`<output_dir>/results.json`) and, per task, a table of the paired difference of each CASAN variant to its twin of
the same seed and recipe into the `.md` beside it (`casan_hf.studies`, shared with the translation sweep).

The twin pools as the CASAN variants pool: with `--classifier_pooling cls` (the default) it is `baseline`
(`--baseline`, the source family's own model); with any other pooling it is `none` (CASAN without context, which
is the source model exactly, pooling the same way).

A recipe says how a variant is trained (`RECIPES`): `finetune` fine-tunes only; `context_lr` trains the
context parameters at `--context_lr_multiplier` times the learning rate; `mlm` first runs `--mlm_steps` of
continued masked-LM pre-training on the task's own training sentences, the twin the same steps on the same
text; `mlm_context_lr` both. The twin has no context parameters, so under `context_lr` its run is the
`finetune` one (and under `mlm_context_lr` the `mlm` one): it is run once and paired with both.

A run with a record in the results file is not run again: the sweep can be stopped and started again, on this
machine or on a fresh clone holding the committed results file.

    python scripts/glue_sweep.py --model_name_or_path <MiniLM folder> --glue_dir ../shared/glue \
        --output_dir runs/glue-cpu --results docs/results/glue_minilm_cpu_mean.json \
        --tasks rte mrpc sst2 --seeds 42 43 44 45 46 --arms none global deep_global \
        --classifier_pooling mean --max_train_samples sst2=20000 --parallel 2
"""

import argparse
import math
import statistics
import sys
from pathlib import Path

from casan_hf.cli.extras import GLUE, require_packages
from casan_hf.configuration_casan import SAFETENSORS_NAME, safetensors_shapes
from casan_hf.glue.tasks import glue_files
from casan_hf.options import CLASSIFIER_POOLINGS
from casan_hf.studies import Arm, Run, add_sweep_arguments, arm_argument, run_study, study_variants
from casan_hf.studies.glue import (
    RECIPES,
    TASKS,
    TWINS,
    collect,
    comparisons,
    mlm_dir,
    run_recipe,
    tables,
    twin_variant,
)
from casan_hf.studies.grid import load_results
from casan_hf.studies.paired import mean_std


# The repository's tooling (tooling/, beside scripts/): the catalog of its committed studies.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from tooling.catalog import run_sweep_command_line, study_names


SCRIPTS = Path(__file__).resolve().parent
REPOSITORY = SCRIPTS.parent  # where a --study's results file lives
RUN_GLUE, RUN_MLM = SCRIPTS / "run_glue.py", SCRIPTS / "run_mlm.py"
DEFAULT_POOLING = "cls"  # the source model's own: the default twin is `baseline`


def variant_flags(arm):
    """What an arm adds to the run_glue.py and run_mlm.py commands."""
    return ["--baseline"] if arm.variant == "baseline" else ["--context_type", arm.variant, *arm.flags()]


def task_values(items, convert):
    """Parses TASK=VALUE pairs."""
    values = {}
    for item in items:
        task, sep, value = item.partition("=")
        if not sep or task not in TASKS:
            raise argparse.ArgumentTypeError(f"expected TASK=VALUE with TASK in {', '.join(TASKS)}; got {item!r}")
        values[task] = convert(value)
    return values


def default_arms(variants):
    """The twin of `DEFAULT_POOLING` and every variant with context: each kind of `CONTEXT_KINDS` but `none`, as
    the table is when the parser is made."""
    twin = twin_variant(DEFAULT_POOLING)
    return [Arm(variant) for variant in variants if variant == twin or variant not in TWINS]


def make_parser():
    variants = study_variants(TWINS)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sweep_arguments(parser, study_names("glue"))
    parser.add_argument("--model_name_or_path", required=True)
    parser.add_argument("--glue_dir", required=True)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=["rte", "mrpc", "sst2"])
    parser.add_argument(
        "--arms",
        "--variants",
        nargs="+",
        type=arm_argument(variants, option_free=TWINS),
        default=default_arms(variants),
        metavar="VARIANT[:OPTION=VALUE,...]",
        help=f"The arms: a variant ({', '.join(variants)}) with the context options it sets, e.g. "
        "deep:context_rank=64 or deep_global:gate_bias_init=0,gate_per_head=true.",
    )
    parser.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=["finetune"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument(
        "--single_seed_tasks", nargs="*", choices=TASKS, default=[], help="Tasks run with the first seed only."
    )
    parser.add_argument(
        "--max_train_samples", nargs="*", default=[], metavar="TASK=N", help="Train on the first N examples of TASK."
    )
    parser.add_argument(
        "--classifier_pooling",
        choices=CLASSIFIER_POOLINGS,
        default=DEFAULT_POOLING,
        help="Of every variant but baseline.",
    )
    parser.add_argument("--learning_rate", type=float, default=5e-5, help="Of fine-tuning and MLM pre-training.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Of fine-tuning and MLM pre-training.")
    parser.add_argument("--batch_size", type=int, default=32, help="Of fine-tuning.")
    parser.add_argument("--num_train_epochs", type=float, default=3.0, help="Of fine-tuning.")
    parser.add_argument(
        "--pad_to_max_length",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Pad every input to --max_seq_length (default: each batch to its longest; the same logits).",
    )
    parser.add_argument("--context_lr_multiplier", type=float, default=10.0, help="The context's rate / the rate.")
    parser.add_argument("--mlm_steps", type=int, default=1000, help="Masked-LM steps of the mlm recipes.")
    parser.add_argument(
        "--base_model", default="sentence-transformers/all-MiniLM-L6-v2", help="Hub id for the model cards."
    )
    return parser


def parse_args(argv=None):
    """One grid's flags, checked (a `--study` is expanded by `main` first)."""
    parser = make_parser()
    args, args.run_glue_args = parser.parse_known_args(argv)
    try:
        args.max_train_samples = task_values(args.max_train_samples, int)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    args.twin = twin_variant(args.classifier_pooling)
    if Arm(args.twin) not in args.arms:
        parser.error(
            f"--arms must include {args.twin!r}, the twin of --classifier_pooling {args.classifier_pooling}: "
            "every CASAN run is paired with its twin of the same seed."
        )
    wrong_twin = next((arm.variant for arm in args.arms if arm.variant in TWINS and arm.variant != args.twin), None)
    if wrong_twin:
        parser.error(
            f"--arms {wrong_twin!r} does not pool as --classifier_pooling {args.classifier_pooling} does; "
            f"the twin is {args.twin!r}."
        )
    return args


def run_settings(args, task, recipe, variant):
    """What a run's result depends on beside its identity (task, recipe, variant, seed): its record keeps them, and
    its commands are made from them. Paths differ from machine to machine and are left out: `base_model`, the
    Hub id the model cards name, stands for the weights."""
    return {
        "base_model": args.base_model,
        "learning_rate": args.learning_rate,
        "max_seq_length": args.max_seq_length,
        "batch_size": args.batch_size,
        "num_train_epochs": args.num_train_epochs,
        "max_train_samples": args.max_train_samples.get(task),
        "classifier_pooling": None if variant == "baseline" else args.classifier_pooling,
        "context_learning_rate": (
            args.learning_rate * args.context_lr_multiplier
            if RECIPES[recipe].context_lr and variant != args.twin
            else None
        ),
        "mlm_steps": args.mlm_steps if RECIPES[recipe].mlm else None,
        "run_glue_args": args.run_glue_args,
    }


def commands(args, settings, task, arm, seed, out):
    """The run_mlm.py command (without MLM pre-training: none) and the run_glue.py command of one run, with its
    `settings`; padding to --max_seq_length or not gives the same logits, so it is not among them."""
    common = ["--seed", str(seed), "--learning_rate", str(settings["learning_rate"]), "--report_to", "none"]
    common += ["--max_seq_length", str(settings["max_seq_length"])]
    common += ["--overwrite_output_dir", "--save_strategy", "no", "--base_model", settings["base_model"]]
    common += variant_flags(arm)
    if settings["context_learning_rate"] is not None:
        common += ["--context_learning_rate", str(settings["context_learning_rate"])]
    runs, source = [], args.model_name_or_path
    if settings["mlm_steps"] is not None:
        mlm = [sys.executable, str(RUN_MLM), "--model_name_or_path", source, "--glue_dir", args.glue_dir]
        mlm += ["--glue_tasks", task, "--do_train", "--do_eval", "--max_steps", str(settings["mlm_steps"])]
        runs.append([*mlm, "--output_dir", str(mlm_dir(out)), *common])
        source = str(mlm_dir(out))
    glue = [sys.executable, str(RUN_GLUE), "--model_name_or_path", source, "--task_name", task]
    glue += ["--glue_dir", args.glue_dir, "--do_train", "--do_eval", "--output_dir", str(out), *common]
    glue += ["--per_device_train_batch_size", str(settings["batch_size"]), "--per_device_eval_batch_size", "128"]
    glue += ["--num_train_epochs", str(settings["num_train_epochs"])]
    glue += ["--pad_to_max_length", str(args.pad_to_max_length).lower()]
    if settings["classifier_pooling"] is not None:
        glue += ["--classifier_pooling", settings["classifier_pooling"]]
    if settings["max_train_samples"] is not None:
        glue += ["--max_train_samples", str(settings["max_train_samples"])]
    return [*runs, glue + settings["run_glue_args"]]


def study_runs(args):
    """Every run of the grid once (the twin's context_lr runs are its runs without), seed by seed, so that each
    seed's variants and twin finish together."""
    runs = {}
    for task in args.tasks:
        seeds = args.seeds[:1] if task in args.single_seed_tasks else args.seeds
        for recipe in args.recipes:
            for seed in seeds:
                for arm in args.arms:
                    made_under = run_recipe(args.twin, recipe, arm.variant)
                    out = Path(args.output_dir) / task / made_under / arm.name / f"seed{seed}"
                    identity = {"task": task, "recipe": made_under, "variant": arm.name, "seed": seed}
                    settings = run_settings(args, task, made_under, arm.variant)
                    run_commands = tuple(commands(args, settings, task, arm, seed, out))
                    data = tuple(glue_files(args.glue_dir, task))
                    runs[out] = Run(identity, out, run_commands, settings, data)
    return list(runs.values())


def parameter_count(folder):
    """The parameters a run's saved model holds (its `model.safetensors`, read from the header alone), or None
    where the folder does not hold it (a record of a committed results file, run elsewhere)."""
    path = Path(folder) / SAFETENSORS_NAME
    return sum(math.prod(shape) for shape in safetensors_shapes(path).values()) if path.is_file() else None


def median_step_seconds(runs):
    """The median over `runs` of the seconds one training step took (1 / Trainer's `train_steps_per_second`)."""
    times = [1 / run["train_steps_per_second"] for run in runs if run.get("train_steps_per_second")]
    return statistics.median(times) if times else None


def side_by_side(comparisons, folders):
    """The twin side by side with each CASAN arm, one row per arm and metric: its score (mean ± std over seeds),
    the paired difference to the twin of the same seed with its 95% interval, the parameters it adds to the twin's
    (its saved model's, in `folders` by (task, recipe, variant, seed)) and its time per training step against
    the twin's (median over seeds; runs side by side with --parallel share the cores)."""
    lines = [
        "| task: metric | arm | score | paired difference [95% CI] | parameters added | time per step (ms) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for comparison in comparisons:
        for (recipe, variant), runs, twin_runs in comparison.rows:
            step = median_step_seconds(runs)
            step_text = "-" if step is None else f"{1000 * step:.0f}"
            if twin_runs is None:
                difference, added = "(twin)", "(twin)"
            else:
                pair = comparison.paired(runs, twin_runs)
                difference = f"{pair.difference} {pair.interval}" if len(pair.differences) > 1 else pair.difference
                twin_step = median_step_seconds(twin_runs)
                if step is not None and twin_step:
                    step_text += f" (x{step / twin_step:.2f})"
                counts = [
                    parameter_count(folders.get((run["task"], run["recipe"], run["variant"], run["seed"])) or "")
                    for run in (runs[0], twin_runs[0])
                ]
                added = (
                    "-"
                    if None in counts
                    else f"+{counts[0] - counts[1]:,} (+{100 * (counts[0] / counts[1] - 1):.2f}%)"
                )
            arm = variant if recipe == "finetune" else f"{variant} ({recipe})"
            scores = mean_std(list(comparison.scores(runs).values()), comparison.digits)
            lines.append(f"| {comparison.title} | {arm} | {scores} | {difference} | {added} | {step_text} |")
    return "\n".join(lines)


def run_grid(args):
    """Runs one grid: what it lacks, then its tables and figure, and last the twin side by side with each arm."""
    require_packages("glue_sweep.py", *GLUE, what="Each run of run_glue.py")
    if args.figure:
        require_packages("glue_sweep.py", "matplotlib", what="--figure")
    runs = study_runs(args)
    run_study(
        args,
        runs,
        collect,
        lambda records: tables(args.classifier_pooling, records),
        lambda records: comparisons(args.classifier_pooling, records),
    )
    records = load_results(Path(args.results or Path(args.output_dir) / "results.json"))
    if records and not args.dry_run:
        folders = {
            tuple(run.identity[key] for key in ("task", "recipe", "variant", "seed")): run.folder for run in runs
        }
        print("The twin side by side with each CASAN arm (same data, steps and seeds):\n")
        print(side_by_side(comparisons(args.classifier_pooling, records), folders))


def main(argv=None):
    run_sweep_command_line(argv, "glue", make_parser, parse_args, run_grid, REPOSITORY)


if __name__ == "__main__":
    main()
