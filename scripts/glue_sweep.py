#!/usr/bin/env python
"""Runs the grid behind docs/RESULTS.md: every task x recipe x variant x seed through scripts/run_glue.py (and,
for the recipes that pre-train, scripts/run_mlm.py first), same hyper-parameters for all, then writes the
per-run scores, gates and MLM perplexities (results.json) and, per task, a table with the paired difference of
each CASAN variant to its BERT twin of the same seed and recipe (results.md).

A recipe says how a variant is trained (`RECIPES`): `finetune` fine-tunes only; `context_lr` trains the
context parameters at `--context_lr_multiplier` times the learning rate; `mlm` first runs `--mlm_steps` of
continued masked-LM pre-training on the task's own training sentences, the twin the same steps on the same
text; `mlm_context_lr` both. The twin has no context parameters, so under `context_lr` its run is the
`finetune` one (and under `mlm_context_lr` the `mlm` one): it is run once and paired with both.

A run whose eval_results.json exists is not run again, so an interrupted sweep picks up where it stopped.

    python scripts/glue_sweep.py --model_name_or_path <MiniLM folder> --glue_dir ../shared/glue \
        --output_dir runs/study --tasks rte mrpc sst2 --seeds 42 43 44 45 46 \
        --variants baseline global deep_global_r64 deep --recipes finetune context_lr mlm mlm_context_lr \
        --max_train_samples sst2=20000 --parallel 8
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from scipy import stats


SCRIPTS = Path(__file__).resolve().parent
RUN_GLUE, RUN_MLM = SCRIPTS / "run_glue.py", SCRIPTS / "run_mlm.py"
# What each variant adds to the run_glue.py and run_mlm.py commands; the first four are the default grid.
VARIANT_FLAGS = {
    "baseline": ["--baseline"],
    "global": ["--context_type", "global"],
    "deep": ["--context_type", "deep"],
    "deep_global": ["--context_type", "deep_global"],
    "deep_r64": ["--context_type", "deep", "--context_rank", "64"],
    "deep_global_r64": ["--context_type", "deep_global", "--context_rank", "64"],
}
DEFAULT_VARIANTS = ["baseline", "global", "deep", "deep_global"]
TWIN = "baseline"


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
# The metrics shown in the table, per task (the GLUE ones; the others are in results.json).
TABLE_METRICS = {
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
}
TASKS = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli")


def task_values(items, convert):
    """Parses TASK=VALUE pairs."""
    values = {}
    for item in items:
        task, sep, value = item.partition("=")
        if not sep or task not in TASKS:
            raise argparse.ArgumentTypeError(f"expected TASK=VALUE with TASK in {', '.join(TASKS)}; got {item!r}")
        values[task] = convert(value)
    return values


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_name_or_path", required=True)
    parser.add_argument("--glue_dir", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=["rte", "mrpc", "sst2"])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANT_FLAGS), default=DEFAULT_VARIANTS)
    parser.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=["finetune"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument(
        "--single_seed_tasks", nargs="*", choices=TASKS, default=[], help="Tasks run with the first seed only."
    )
    parser.add_argument(
        "--max_train_samples", nargs="*", default=[], metavar="TASK=N", help="Train on the first N examples of TASK."
    )
    parser.add_argument("--learning_rate", type=float, default=5e-5, help="Of fine-tuning and MLM pre-training.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Of fine-tuning and MLM pre-training.")
    parser.add_argument("--context_lr_multiplier", type=float, default=10.0, help="The context's rate / the rate.")
    parser.add_argument("--mlm_steps", type=int, default=1000, help="Masked-LM steps of the mlm recipes.")
    parser.add_argument("--parallel", type=int, default=1, help="Runs at a time.")
    parser.add_argument(
        "--base_model", default="sentence-transformers/all-MiniLM-L6-v2", help="Hub id for the model cards."
    )
    parser.add_argument("--dry_run", action="store_true", help="Print the commands and the table of what exists.")
    args, run_glue_args = parser.parse_known_args(argv)
    try:
        args.max_train_samples = task_values(args.max_train_samples, int)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if TWIN not in args.variants and len(args.variants) > 0:
        parser.error(f"--variants must include {TWIN!r}: every CASAN run is paired with its twin of the same seed.")
    args.run_glue_args = run_glue_args or [
        "--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "128", "--num_train_epochs", "3",
    ]  # fmt: skip
    return args


def grid(args):
    for task in args.tasks:
        seeds = args.seeds[:1] if task in args.single_seed_tasks else args.seeds
        for recipe in args.recipes:
            for variant in args.variants:
                for seed in seeds:
                    yield task, recipe, variant, seed


def run_dir(args, task, recipe, variant, seed):
    """Where a run's fine-tuning writes; its MLM pre-training writes beside it (`seed42-mlm`). The twin's run
    under a context_lr recipe is its run under the same recipe without (it has no context to speed up)."""
    if variant == TWIN and RECIPES[recipe].context_lr:
        recipe = next(name for name, other in RECIPES.items() if other == Recipe(RECIPES[recipe].mlm, False))
    return Path(args.output_dir) / task / recipe / variant / f"seed{seed}"


def mlm_dir(fine_tuning_dir):
    return fine_tuning_dir.with_name(f"{fine_tuning_dir.name}-mlm")


def context_lr_flags(args, recipe, variant):
    if RECIPES[recipe].context_lr and variant != TWIN:
        return ["--context_learning_rate", str(args.learning_rate * args.context_lr_multiplier)]
    return []


def commands(args, task, recipe, variant, seed):
    """The run_mlm.py command (None without MLM pre-training) and the run_glue.py command of one run."""
    out = run_dir(args, task, recipe, variant, seed)
    common = ["--seed", str(seed), "--learning_rate", str(args.learning_rate), "--report_to", "none"]
    common += ["--max_seq_length", str(args.max_seq_length)]
    common += ["--overwrite_output_dir", "--save_strategy", "no", "--base_model", args.base_model]
    common += VARIANT_FLAGS[variant] + context_lr_flags(args, recipe, variant)
    mlm = None
    source = args.model_name_or_path
    if RECIPES[recipe].mlm:
        mlm = [sys.executable, str(RUN_MLM), "--model_name_or_path", source, "--glue_dir", args.glue_dir]
        mlm += ["--glue_tasks", task, "--do_train", "--do_eval", "--max_steps", str(args.mlm_steps)]
        mlm += ["--output_dir", str(mlm_dir(out)), *common]
        source = str(mlm_dir(out))
    glue = [sys.executable, str(RUN_GLUE), "--model_name_or_path", source, "--task_name", task]
    glue += ["--glue_dir", args.glue_dir, "--do_train", "--do_eval", "--output_dir", str(out), *common]
    if task in args.max_train_samples:
        glue += ["--max_train_samples", str(args.max_train_samples[task])]
    return mlm, glue + args.run_glue_args


def run_one(args, task, recipe, variant, seed):
    """Runs what is missing of one run; returns its commands and the log of a failed run (else None)."""
    out = run_dir(args, task, recipe, variant, seed)
    to_run = [cmd for cmd in commands(args, task, recipe, variant, seed) if cmd]
    if (out / "eval_results.json").exists() or args.dry_run:
        return to_run, None
    out.mkdir(parents=True, exist_ok=True)
    start, log_path, returncode = time.time(), out.with_suffix(".log"), 0
    with open(log_path, "w") as log:
        for cmd in to_run:
            returncode = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
            if returncode:
                break
    print(f"{task} {recipe} {variant} seed{seed}: exit {returncode} after {time.time() - start:.0f}s", flush=True)
    return to_run, log_path if returncode else None


def final_gates(folder):
    """The mean query and key gate over layers at the last evaluation of a run (None for the twin)."""
    state = folder / "trainer_state.json"
    if not state.exists():
        return None
    for entry in reversed(json.loads(state.read_text())["log_history"]):
        gates = {key: value for key, value in entry.items() if key.startswith("gates/")}
        if gates:
            return {
                target: statistics.mean(value for key, value in gates.items() if key.endswith(f"/{target}"))
                for target in ("query", "key")
            }
    return None


def collect(args):
    runs = []
    for task, recipe, variant, seed in grid(args):
        out = run_dir(args, task, recipe, variant, seed)
        results = out / "all_results.json"
        if results.exists():
            run = {"task": task, "recipe": recipe, "variant": variant, "seed": seed, "gates": final_gates(out)}
            if RECIPES[recipe].mlm and (mlm_dir(out) / "eval_results.json").exists():
                run["mlm_perplexity"] = json.loads((mlm_dir(out) / "eval_results.json").read_text())["perplexity"]
            runs.append({**run, **json.loads(results.read_text())})
    return runs


def mean_std(values):
    if not values:
        return "-"
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.2f}{spread} (n={len(values)})"


def paired(differences):
    """Mean ± std of the per-seed differences to the twin, their 95% t interval, the seeds won and the
    two-sided sign test's p, and whether the mean beats the spread (mean > std)."""
    if len(differences) < 2:
        return ["-"] * 4
    mean, std = statistics.mean(differences), statistics.stdev(differences)
    half = stats.t.ppf(0.975, len(differences) - 1) * std / math.sqrt(len(differences))
    wins, losses = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
    p = stats.binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    return [
        f"{mean:+.2f} ± {std:.2f}",
        f"[{mean - half:+.2f}, {mean + half:+.2f}]",
        f"{wins}/{len(differences)} (p={p:.2f})",
        "yes" if mean > std else "no",
    ]


def gates_cell(runs):
    gates = [run["gates"] for run in runs if run["gates"]]
    if not gates:
        return "-"
    return " / ".join(f"{statistics.mean(g[target] for g in gates):.3f}" for target in ("query", "key"))


def table(args, runs):
    """Per task and metric: each recipe and variant's score, its paired difference to the twin of the same
    seed and recipe, the final gates and the MLM perplexity."""
    header = (
        "| recipe | variant | score | paired diff to twin | 95% CI | seeds won (sign test) | mean > spread "
        "| final gates q / k | MLM perplexity |"
    )
    lines = []
    for task in args.tasks:
        for metric in TABLE_METRICS.get(task, ("accuracy",)):
            lines += [f"\n### {task}: {metric} (%)\n", header, "|" + " --- |" * 9]
            for recipe in args.recipes:
                cell_runs = {
                    variant: [
                        run for run in runs if (run["task"], run["recipe"], run["variant"]) == (task, recipe, variant)
                    ]
                    for variant in args.variants
                }
                twin = {run["seed"]: 100 * run[f"eval_{metric}"] for run in cell_runs[TWIN]}
                for variant, selected in cell_runs.items():
                    scores = {run["seed"]: 100 * run[f"eval_{metric}"] for run in selected}
                    differences = [score - twin[seed] for seed, score in scores.items() if seed in twin]
                    pair = ["(twin)"] * 4 if variant == TWIN else paired(differences)
                    perplexity = mean_std([run["mlm_perplexity"] for run in selected if "mlm_perplexity" in run])
                    cells = [recipe, variant, mean_std(list(scores.values())), *pair, gates_cell(selected), perplexity]
                    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    # One job per run folder: the twin's context_lr runs are its runs without.
    jobs = {run_dir(args, *job): job for job in grid(args)}
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        ran = list(pool.map(lambda job: run_one(args, *job), jobs.values()))
    if args.dry_run:
        print("\n".join(" ".join(cmd) for cmds, _ in ran for cmd in cmds))
    runs = collect(args)
    Path(args.output_dir, "results.json").write_text(json.dumps(runs, indent=2))
    Path(args.output_dir, "results.md").write_text(table(args, runs))
    print(table(args, runs))
    failed = [str(log) for _, log in ran if log]
    if failed:
        sys.exit(f"{len(failed)} run(s) failed; their logs: {', '.join(failed)}")


if __name__ == "__main__":
    main()
