"""Studies as grids of runs: the one runner and the one paired table behind `scripts/glue_sweep.py` and
`scripts/translation_sweep.py`.

A study is a list of `Run`s (each a few commands that write one folder) and a results file of one record per
finished run. The results file, not the run folders, says what is finished: it is what a study commits, so a
sweep started again, in this process, after a kill or on a fresh clone, runs only what has no record. A run cut
off before its record was written is run again from the start (its commands overwrite their folders). A record
keeps its run's settings (the hyper-parameters beside the grid's coordinates): a sweep whose runs have records,
at any seed, made with other settings stops and says so, rather than count those records as its own.

Every CASAN variant is compared with its twin (the same data, steps, hyper-parameters and seed, without context):
per metric (a `Comparison`), the mean and spread of each variant, and the per-seed difference to the twin with its
mean, 95% t interval and the seeds won, as a markdown table (`paired_table`) and as a figure (`paired_figure`).
"""

import fcntl
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats


@dataclass(frozen=True)
class Run:
    """One run of a study: `identity` names it in the results file (e.g. task, recipe, variant, seed); its
    `commands` run in order and write into `folder`; `log` gets their output. `settings`: what else its result
    depends on (hyper-parameters, not paths), kept in its record."""

    identity: dict
    folder: Path
    commands: tuple
    settings: dict = field(default_factory=dict)

    @property
    def key(self):
        return tuple(sorted(self.identity.items()))

    @property
    def log(self):
        return self.folder.with_suffix(".log")


def load_results(path):
    """The records of the finished runs (an empty list before the first)."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else []


def identity_fields(runs):
    """The names of a sweep's grid coordinates (e.g. task, recipe, variant, seed), which every run's identity has."""
    return list(runs[0].identity) if runs else []


def record_key(record, fields):
    return tuple(sorted((name, record[name]) for name in fields))


class SettingsMismatch(ValueError):
    """A results file holds records of the sweep's runs made with other settings."""


def arm_key(identity, fields):
    """The identity without the seed: the runs of one arm (e.g. a task's variant) are paired seed by seed with the
    twin's, so every seed of an arm must have the same settings."""
    return tuple(sorted((name, identity.get(name)) for name in fields if name != "seed"))


def check_settings(runs, records, results_path):
    """Raises `SettingsMismatch` where a record of one of the sweep's arms, at any seed, was made with other
    settings than the sweep's runs of that arm, naming every setting that differs: such a record is not the
    run's result, and beside the sweep's other seeds it would pool two studies in one table."""
    fields = identity_fields(runs)
    # The settings as a record keeps them (a tuple as a list).
    expected = {arm_key(run.identity, fields): json.loads(json.dumps(run.settings)) for run in runs}
    mismatched, differences = 0, {}
    for record in records:
        arm, there = arm_key(record, fields), record.get("settings")
        if arm not in expected or there == expected[arm]:
            continue
        mismatched += 1
        here = expected[arm]
        if there is None:
            differences.setdefault("settings", "not recorded there")
            continue
        for name in sorted({*there, *here}):
            if there.get(name) != here.get(name):
                differences.setdefault(name, f"{there.get(name)!r} there, {here.get(name)!r} here")
    if mismatched:
        listed = "; ".join(f"{name} {difference}" for name, difference in differences.items())
        raise SettingsMismatch(
            f"{results_path} holds {mismatched} record(s) of this sweep's runs (at any seed) made with other "
            f"settings: {listed}. A results file holds one study: give this sweep another results file, or that "
            "file's settings."
        )


def write_atomically(path, text):
    """Writes `text` to `path` through a temporary file and a rename, so that a kill never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def time_left(run_seconds, runs_left, parallel):
    """The estimate of a sweep's remaining wall time: the mean time of its finished runs, for the runs left, `parallel`
    at a time (by elapsed time over runs done, the first runs of a parallel sweep would count `parallel` times)."""
    if not runs_left:
        return 0.0
    return statistics.mean(run_seconds) * runs_left / min(parallel, runs_left)


def add_record(results_path, record, render_tables):
    """Adds `record` to the results file and rewrites its tables, under a lock and from the file as it is now, so
    that sweeps sharing one results file (other seeds, another study's shard) keep each other's records."""
    results_path = Path(results_path)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with open(results_path.with_name(f".{results_path.name}.lock"), "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        records = [*load_results(results_path), record]
        write_atomically(results_path, json.dumps(records, indent=2) + "\n")
        write_atomically(results_path.with_suffix(".md"), render_tables(records))


def run_sweep(runs, results_path, collect, render_tables, parallel=1, threads_per_run=None, dry_run=False):
    """Runs the `runs` that have no record in `results_path`, `parallel` at a time, each with
    `threads_per_run` threads (default: the machine's cores shared out). As each finishes, `collect(run)` makes
    its record, which is added to the results file, and `render_tables(records)` is written beside it (`.md`),
    so that both are current whenever the sweep stops; the tables are also written at the start (with
    `dry_run`, the only thing done beside printing the commands). Prints a progress line per finished run. Returns the
    logs of the runs that failed; raises `SettingsMismatch` before running anything where `check_settings` does."""
    results_path = Path(results_path)
    records = load_results(results_path)
    check_settings(runs, records, results_path)
    fields = identity_fields(runs)
    finished = {record_key(record, fields) for record in records}
    todo = [run for run in runs if run.key not in finished]
    print(f"{len(runs)} runs: {len(runs) - len(todo)} finished before, {len(todo)} to run, {parallel} at a time")
    if records:  # the tables of what is recorded, in this version of the table code
        write_atomically(results_path.with_suffix(".md"), render_tables(records))
    if dry_run:
        for run in todo:
            print("\n".join(" ".join(map(str, command)) for command in run.commands))
        return []
    environment = dict(os.environ)
    threads = threads_per_run or max(1, (os.cpu_count() or 1) // parallel)
    environment["OMP_NUM_THREADS"] = environment["MKL_NUM_THREADS"] = str(threads)
    lock, start, done, failed, run_seconds = threading.Lock(), time.time(), [], [], []

    def execute(run):
        run.folder.parent.mkdir(parents=True, exist_ok=True)
        began, returncode = time.time(), 0
        with open(run.log, "w") as log:
            for command in run.commands:
                returncode = subprocess.run(
                    [str(part) for part in command], stdout=log, stderr=subprocess.STDOUT, env=environment
                ).returncode
                if returncode:
                    break
        record = None
        if not returncode:
            record = {**run.identity, "settings": run.settings, **collect(run)}
            record["wall_seconds"] = round(time.time() - began)
        with lock:
            done.append(run)
            run_seconds.append(time.time() - began)
            if record is None:
                failed.append(run.log)
            else:
                add_record(results_path, record, render_tables)
            elapsed, left = time.time() - start, time_left(run_seconds, len(todo) - len(done), parallel)
            name = " ".join(str(value) for value in run.identity.values())
            status = "finished" if record else f"FAILED (exit {returncode}; log {run.log})"
            print(
                f"[{len(done)}/{len(todo)}] {name}: {status} in {duration(run_seconds[-1])}; "
                f"elapsed {duration(elapsed)}, about {duration(left)} left",
                flush=True,
            )

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(execute, todo))
    return failed


def add_sweep_arguments(parser):
    """The flags every study's sweep takes: where runs and results go, how many run at once, a dry run, a figure."""
    parser.add_argument("--output_dir", required=True, help="Where the runs write (their folders, not committed).")
    parser.add_argument("--results", help="The results file (default <output_dir>/results.json); tables beside.")
    parser.add_argument("--parallel", type=int, default=1, help="Runs at a time.")
    parser.add_argument("--threads_per_run", type=int, help="Default: the machine's cores shared by the runs.")
    parser.add_argument("--dry_run", action="store_true", help="Print the commands of the runs still to do.")
    parser.add_argument(
        "--figure",
        help="A PNG to draw, when the sweep stops, of every variant's per-seed differences to its twin with their "
        "mean and 95%% interval (with --dry_run: of the results file as it is). Needs matplotlib.",
    )


def run_study(args, runs, collect, render_tables, comparisons):
    """A sweep's main step, with the flags of `add_sweep_arguments`: runs what is missing, prints the tables, draws
    `paired_figure(comparisons(records))` into `--figure`, and exits with the logs of the runs that failed."""
    results = Path(args.results or Path(args.output_dir) / "results.json")
    try:
        failed = run_sweep(
            runs,
            results,
            collect,
            render_tables,
            parallel=args.parallel,
            threads_per_run=args.threads_per_run,
            dry_run=args.dry_run,
        )
    except SettingsMismatch as error:
        sys.exit(f"error: {error}")
    if results.with_suffix(".md").exists():
        print(results.with_suffix(".md").read_text())
    if args.figure:
        records = load_results(results)
        if not records:
            sys.exit(f"error: --figure {args.figure}: {results} has no records to draw")
        try:
            paired_figure(comparisons(records), args.figure)
        except ValueError as error:
            sys.exit(f"error: --figure {args.figure}: {error}")
        print(f"Figure: {args.figure}")
    if failed:
        sys.exit(f"{len(failed)} run(s) failed; their logs: {', '.join(map(str, failed))}")


def final_gates(trainer_state):
    """The mean query and key gate of every layer (`{"query": [...], "key": [...]}`) at the last evaluation
    logged in a `trainer_state.json` by `GateMonitor`, and with a gate per head each head's (`"query_per_head"`,
    `"key_per_head"`: per layer, a list over the heads); None when no gates were logged (a model without context)."""
    trainer_state = Path(trainer_state)
    if not trainer_state.exists():
        return None
    for entry in reversed(json.loads(trainer_state.read_text())["log_history"]):
        layers = sorted({int(key.split("/")[1].removeprefix("layer_")) for key in entry if key.startswith("gates/")})
        if not layers:
            continue
        gates = {target: [entry[f"gates/layer_{layer}/{target}"] for layer in layers] for target in ("query", "key")}
        heads = sorted({int(key.rsplit("_", 1)[1]) for key in entry if key.startswith("gates/") and "/head_" in key})
        for target in ("query", "key") if heads else ():
            gates[f"{target}_per_head"] = [
                [entry[f"gates/layer_{layer}/{target}/head_{head}"] for head in heads] for layer in layers
            ]
        return gates
    return None


def mean_gates(gates_of_runs):
    """`query / key`: the mean gate over the runs and over the layers with context (a layer without reads 0)."""
    gates = [gates for gates in gates_of_runs if gates]
    if not gates:
        return "-"
    return " / ".join(
        f"{statistics.mean(value for g in gates for value in g[target] if value):.3f}" for target in ("query", "key")
    )


def mean_std(values, digits=2):
    if not values:
        return "-"
    spread = f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.{digits}f}{spread} (n={len(values)})"


def paired_interval(differences):
    """The mean and std of the per-seed differences to the twin and the half-width of their 95% t interval."""
    mean, std = statistics.mean(differences), statistics.stdev(differences)
    return mean, std, stats.t.ppf(0.975, len(differences) - 1) * std / math.sqrt(len(differences))


def won(difference, lower_is_better=False):
    """Whether a difference to the twin is a win: above zero, or below it for a metric where lower is better."""
    return difference < 0 if lower_is_better else difference > 0


def beyond_the_spread(mean, half):
    """The one meaning of "beyond the spread" in every study: the 95% interval of the mean difference excludes 0."""
    return abs(mean) > half


def paired(differences, lower_is_better=False, digits=2):
    """Mean ± std of the per-seed differences to the twin, their 95% t interval, the seeds won with the
    two-sided sign test's p, and whether the difference is beyond the spread (its interval excludes 0), and
    which way: "better" or "worse" than the twin."""
    if len(differences) < 2:
        return ["-"] * 4
    mean, std, half = paired_interval(differences)
    wins = sum(won(d, lower_is_better) for d in differences)
    losses = sum(won(-d, lower_is_better) for d in differences)
    p = stats.binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    if not beyond_the_spread(mean, half):
        verdict = "no"
    else:
        verdict = "yes, better" if won(mean, lower_is_better) else "yes, worse"
    return [
        f"{mean:+.{digits}f} ± {std:.{digits}f}",
        f"[{mean - half:+.{digits}f}, {mean + half:+.{digits}f}]",
        f"{wins}/{len(differences)} (p={p:.2f})",
        verdict,
    ]


@dataclass(frozen=True)
class Comparison:
    """One metric of a study. `rows`: `(labels, runs, twin_runs)` per variant (`labels` fill `label_columns`;
    `twin_runs` is None for the twin's own row); `score(record)`: the metric, None for a record without it (made
    before it was recorded). `lower_is_better` for a loss; `digits` of the table's numbers."""

    title: str
    label_columns: tuple
    rows: list
    score: Callable
    lower_is_better: bool = False
    digits: int = 2

    def scores(self, runs):
        """`{seed: score}`: one score per seed that has it."""
        scores = {run["seed"]: self.score(run) for run in runs}
        return {seed: score for seed, score in scores.items() if score is not None}

    def differences(self, runs, twin_runs):
        """`{seed: score - the twin's score}` over the seeds both have."""
        twin = self.scores(twin_runs)
        return {seed: score - twin[seed] for seed, score in self.scores(runs).items() if seed in twin}


PAIRED_COLUMNS = [
    "score",
    "paired diff to twin",
    "95% CI",
    "seeds won (sign test)",
    "beyond the spread (CI excludes 0)",
]


def paired_table(comparison, extra_columns=()):
    """A markdown table of `comparison`: each row's score and its paired difference to the twin; `extra_columns`:
    `(name, cell(runs))` pairs, e.g. the gates."""
    header = [*comparison.label_columns, *PAIRED_COLUMNS, *(name for name, _ in extra_columns)]
    lines = [f"\n### {comparison.title}\n", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for labels, runs, twin_runs in comparison.rows:
        if twin_runs is None:
            pair = ["(twin)"] * 4
        else:
            differences = list(comparison.differences(runs, twin_runs).values())
            pair = paired(differences, comparison.lower_is_better, comparison.digits)
        score_cell = mean_std(list(comparison.scores(runs).values()), comparison.digits)
        cells = [*labels, score_cell, *pair, *(cell(runs) for _, cell in extra_columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def paired_figure(comparisons, path):
    """Draws each comparison in a panel of its own: per variant with runs of its twin's seeds, its differences to
    the twin seed by seed (dots), their mean and 95% t interval (a diamond and a bar), and zero, where the variant
    ties its twin; a bar that holds zero is no win. Saves the PNG at `path` and returns the figure."""
    from matplotlib.figure import Figure  # the plot extra, checked by the scripts; no pyplot, no global backend

    panels = []
    for comparison in comparisons:
        paired_rows = [
            (labels, list(comparison.differences(runs, twin_runs).values()))
            for labels, runs, twin_runs in comparison.rows
            if twin_runs is not None
        ]
        paired_rows = [(labels, differences) for labels, differences in paired_rows if differences]
        if paired_rows:
            panels.append((comparison, paired_rows))
    if not panels:
        raise ValueError("no variant has runs of its twin's seeds to be compared with: nothing to draw")
    heights = [0.9 + 0.45 * len(paired_rows) for _, paired_rows in panels]
    figure = Figure(figsize=(7.5, sum(heights)))
    axes = figure.subplots(len(panels), 1, height_ratios=heights, squeeze=False)[:, 0]
    for axis, (comparison, paired_rows) in zip(axes, panels, strict=True):
        # Rows are named by the labels that tell them apart (the variant, not the size every row shares).
        columns = range(len(comparison.label_columns))
        all_labels = [labels for labels, *_ in comparison.rows]
        varying = [i for i in columns if len({str(labels[i]) for labels in all_labels}) > 1] or list(columns)

        def name(labels, varying=varying):
            return " ".join(str(labels[i]) for i in varying)

        twins = "; ".join(
            f"{name(labels)}: {mean_std(list(comparison.scores(runs).values()))}"
            for labels, runs, twin_runs in comparison.rows
            if twin_runs is None
        )
        for position, (_, differences) in enumerate(paired_rows):
            spread = [0.25 * (index / max(1, len(differences) - 1) - 0.5) for index in range(len(differences))]
            axis.scatter(differences, [position + offset for offset in spread], s=14, color="0.55", zorder=2)
            if len(differences) > 1:
                mean, _, half = paired_interval(differences)
                axis.errorbar(mean, position, xerr=half, fmt="D", color="C3", markersize=6, capsize=4, zorder=3)
                wins = sum(won(difference, comparison.lower_is_better) for difference in differences)
                label = f"{mean:+.2f}, won {wins}/{len(differences)}"
                axis.annotate(label, (1.01, position), xycoords=("axes fraction", "data"), va="center", fontsize=8)
        axis.axvline(0.0, color="0.1", linewidth=1.2, zorder=1.5)
        axis.set_yticks(range(len(paired_rows)), [name(labels) for labels, _ in paired_rows])
        axis.set_ylim(len(paired_rows) - 0.5, -0.5)
        axis.set_title(f"{comparison.title}; twin {twins}", fontsize=9, loc="left")
        axis.grid(axis="x", color="0.9", zorder=0)
    axes[-1].set_xlabel("difference to the twin of the same seed (dots: seeds; diamond and bar: mean, 95% interval)")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return figure


__all__ = [
    "Comparison",
    "Run",
    "SettingsMismatch",
    "add_sweep_arguments",
    "duration",
    "final_gates",
    "load_results",
    "mean_gates",
    "mean_std",
    "beyond_the_spread",
    "paired",
    "paired_figure",
    "paired_interval",
    "paired_table",
    "run_study",
    "run_sweep",
    "won",
    "write_atomically",
]
