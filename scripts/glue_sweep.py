#!/usr/bin/env python
"""Runs the grid behind docs/RESULTS.md: every task x variant x seed through scripts/run_glue.py, same
hyper-parameters for all, then writes the per-run scores (results.json) and a mean ± std table (results.md).

A run whose eval_results.json exists is not run again, so an interrupted sweep picks up where it stopped.

    python scripts/glue_sweep.py --model_name_or_path <MiniLM folder> --glue_dir ../shared/glue \
        --output_dir runs/sweep --tasks rte mrpc sst2 --seeds 42 43 44 --single_seed_tasks sst2 --parallel 4
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


RUN_GLUE = Path(__file__).resolve().parent / "run_glue.py"
# What each variant adds to the run_glue.py command; the first four are the default grid.
VARIANT_FLAGS = {
    "baseline": ["--baseline"],
    "global": ["--context_type", "global"],
    "deep": ["--context_type", "deep"],
    "deep_global": ["--context_type", "deep_global"],
    "deep_r64": ["--context_type", "deep", "--context_rank", "64"],
    "deep_global_r64": ["--context_type", "deep_global", "--context_rank", "64"],
}
DEFAULT_VARIANTS = ["baseline", "global", "deep", "deep_global"]
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
    parser.add_argument("--seeds", nargs="+", type=int, default=[42, 43, 44])
    parser.add_argument(
        "--single_seed_tasks", nargs="*", choices=TASKS, default=[], help="Tasks run with the first seed only."
    )
    parser.add_argument(
        "--max_train_samples", nargs="*", default=[], metavar="TASK=N", help="Train on the first N examples of TASK."
    )
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
    args.run_glue_args = run_glue_args or [
        "--max_seq_length", "128", "--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "128",
        "--learning_rate", "5e-5", "--num_train_epochs", "3",
    ]  # fmt: skip
    return args


def grid(args):
    for task in args.tasks:
        seeds = args.seeds[:1] if task in args.single_seed_tasks else args.seeds
        for variant in args.variants:
            for seed in seeds:
                yield task, variant, seed


def command(args, task, variant, seed, run_dir):
    cmd = [sys.executable, str(RUN_GLUE), "--model_name_or_path", args.model_name_or_path, "--task_name", task]
    cmd += ["--glue_dir", args.glue_dir, "--do_train", "--do_eval", "--seed", str(seed), "--output_dir", str(run_dir)]
    cmd += VARIANT_FLAGS[variant]
    if task in args.max_train_samples:
        cmd += ["--max_train_samples", str(args.max_train_samples[task])]
    cmd += ["--overwrite_output_dir", "--save_strategy", "no", "--report_to", "none", "--base_model", args.base_model]
    return cmd + args.run_glue_args


def run_one(args, task, variant, seed):
    run_dir = Path(args.output_dir) / task / variant / f"seed{seed}"
    cmd = command(args, task, variant, seed, run_dir)
    if (run_dir / "eval_results.json").exists() or args.dry_run:
        return cmd
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with open(run_dir.with_suffix(".log"), "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    print(f"{task} {variant} seed{seed}: exit {done.returncode} after {time.time() - start:.0f}s", flush=True)
    return cmd


def collect(args):
    runs = []
    for task, variant, seed in grid(args):
        run_dir = Path(args.output_dir) / task / variant / f"seed{seed}"
        results = run_dir / "all_results.json"
        if results.exists():
            runs.append({"task": task, "variant": variant, "seed": seed, **json.loads(results.read_text())})
    return runs


def table(args, runs):
    lines = [
        "| task | metric | " + " | ".join(args.variants) + " |",
        "| --- | --- | " + " | ".join("---" for _ in args.variants) + " |",
    ]
    for task in args.tasks:
        for metric in TABLE_METRICS.get(task, ("accuracy",)):
            cells = []
            for variant in args.variants:
                values = [
                    100 * run[f"eval_{metric}"] for run in runs if run["task"] == task and run["variant"] == variant
                ]
                if not values:
                    cells.append("-")
                elif len(values) == 1:
                    cells.append(f"{values[0]:.2f} (n=1)")
                else:
                    cells.append(f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n={len(values)})")
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        commands = list(pool.map(lambda job: run_one(args, *job), list(grid(args))))
    if args.dry_run:
        print("\n".join(" ".join(cmd) for cmd in commands))
    runs = collect(args)
    Path(args.output_dir, "results.json").write_text(json.dumps(runs, indent=2))
    Path(args.output_dir, "results.md").write_text(table(args, runs))
    print(table(args, runs))


if __name__ == "__main__":
    main()
