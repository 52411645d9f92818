"""Studies as grids of runs: the one runner behind `scripts/glue_sweep.py` and `scripts/translation_sweep.py`.

A study is a list of `Run`s (each a few commands that write one folder) and a results file of one record per
finished run. The results file, not the run folders, says what is finished: it is what a study commits, so a
sweep started again, in this process, after a kill or on a fresh clone, runs only what has no record. A run cut
off before its record was written is run again from the start (its commands overwrite their folders). A record
keeps its run's settings (the hyper-parameters beside the grid's coordinates): a sweep whose runs have records,
at any seed, made with other settings stops and says so, rather than count those records as its own.
"""

import fcntl
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..cli.resume import last_complete_checkpoint
from .arms import Arm
from .figure import paired_figure


@dataclass(frozen=True)
class Run:
    """One run of a study: `identity` names it in the results file (e.g. task, recipe, variant, seed); its
    `commands` run in order and write into `folder`; `log` gets their output. `settings`: what else its result
    depends on (hyper-parameters, not paths), kept in its record; `data_files`: the local data it reads, whose
    sha256 its record keeps where the run's own script does not write it (`run_start.data_fingerprint`)."""

    identity: dict
    folder: Path
    commands: tuple
    settings: dict = field(default_factory=dict)
    data_files: tuple = ()

    @property
    def key(self):
        return tuple(sorted(self.identity.items()))

    @property
    def log(self):
        return self.folder.with_suffix(".log")


def parse_grid_args(parser, argv, twin):
    """One grid's flags parsed by a sweep's `parser` (a `--study` is expanded before), and the flags it does not
    know, which go to the training script; a usage error where the arms lack the `twin`."""
    args, extra = parser.parse_known_args(argv)
    if Arm(twin) not in args.arms:
        parser.error(f"--arms must include {twin!r}: every CASAN run is paired with its twin of the same seed.")
    return args, extra


def start_or_resume(out):
    """A run's flags of a training script that resume it from the last complete checkpoint its folder `out` holds
    (a run cut off by a kill loses at most the steps since), or start it anew over whatever an earlier attempt left
    there."""
    checkpoint = last_complete_checkpoint(out)[0] if out.is_dir() else None
    return ["--overwrite_output_dir"] if checkpoint is None else ["--resume_from_checkpoint", checkpoint]


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
    that sweeps sharing one results file (other seeds, another study's shard) keep each other's records. Returns
    the records the file now holds."""
    results_path = Path(results_path)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with open(results_path.with_name(f".{results_path.name}.lock"), "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        records = [*load_results(results_path), record]
        write_atomically(results_path, json.dumps(records, indent=2) + "\n")
        write_atomically(results_path.with_suffix(".md"), render_tables(records))
    return records


NOT_TIMED = (
    "not recorded: a segment cut off before its checkpoint kept the run's time, so the run's train and wall time, "
    "and its seconds per step, are unknown"
)


LAST_SEGMENT_LOSS = "the trainer's train_loss of a resumed run is the mean over its last segment's steps alone"


def checkpoint_step(checkpoint):
    """The training step of a `checkpoint-<step>` folder."""
    return int(Path(checkpoint).name.rpartition("-")[2])


def run_time(received, steps, train_seconds):
    """A run's time over its whole training: `steps`, and `train_runtime` with `seconds_per_step`. One process that
    trained it all: its `train_seconds`. A run resumed from a checkpoint (`received["resumes"]`, from
    `run_start.json`) is one segment per process, each from the step it started at to the checkpoint the next
    resumed from (steps trained after it were lost and trained again), in `resumed`; a segment cut off is timed by
    the time its checkpoint kept (`run_start.RunClock`, each resume's `before`), the last by its process's
    `train_seconds`. Where a checkpoint kept no time, the whole run's is None and `resumed` says why; it says too
    that the trainer's loss is the last segment's."""
    resumes = received.get("resumes", [])
    if not resumes:
        return {"train_runtime": train_seconds, "steps": steps, "seconds_per_step": train_seconds / steps}
    starts = [received["started"], *(resume["started"] for resume in resumes)]
    bounds = [0, *(checkpoint_step(resume["checkpoint"]) for resume in resumes), steps]
    spent = [{"train_seconds": 0.0, "wall_seconds": 0.0}, *(resume.get("before") for resume in resumes)]
    segments = []
    for started, first, last, before, after in zip(
        starts, bounds[:-1], bounds[1:], spent, [*spent[1:], None], strict=True
    ):
        timed = {
            name: after[name] - before[name] if before and after else None
            for name in ("train_seconds", "wall_seconds")
        }
        segments.append({"started": started, "first_step": first, "last_step": last, **timed})
    segments[-1]["train_seconds"] = train_seconds
    resumed = {"segments": segments, "train_loss": LAST_SEGMENT_LOSS}
    if any(segment["train_seconds"] is None for segment in segments):
        resumed["time"] = NOT_TIMED
        return {"train_runtime": None, "steps": steps, "seconds_per_step": None, "resumed": resumed}
    whole = spent[-1]["train_seconds"] + train_seconds
    return {
        "train_runtime": whole,
        "steps": steps,
        "seconds_per_step": whole / steps,
        "resumed": resumed,
    }


def with_wall_time(record, seconds):
    """`record` with the `wall_seconds` of the process that finished it: the run's, or where it was resumed its
    last segment's, the run's then the sum of its segments' (None where one is unknown)."""
    if "resumed" not in record:
        return {**record, "wall_seconds": seconds}
    segments = [*record["resumed"]["segments"][:-1], {**record["resumed"]["segments"][-1], "wall_seconds": seconds}]
    walls = [segment["wall_seconds"] for segment in segments]
    whole = None if None in walls else round(sum(walls))
    return {**record, "resumed": {**record["resumed"], "segments": segments}, "wall_seconds": whole}


def timed_whole(records):
    """The records whose train and wall time cover the whole run (not those resumed after a segment was cut off)."""
    return [record for record in records if record.get("seconds_per_step") is not None]


def run_sweep(
    runs, results_path, collect, render_tables, parallel=1, threads_per_run=None, dry_run=False, draw_figure=None
):
    """Runs the `runs` that have no record in `results_path`, `parallel` at a time, each with
    `threads_per_run` threads (default: the machine's cores shared out). As each finishes, `collect(run)` makes
    its record, which is added to the results file, `render_tables(records)` is written beside it (`.md`) and
    `draw_figure(records)`, if given, draws the figure, so that all three are current whenever the sweep stops; the
    tables are also written at the start (with `dry_run`, the only thing done beside printing the commands). Prints
    a progress line per finished run. Returns the logs of the runs that failed; raises `SettingsMismatch` before
    running anything where `check_settings` does."""
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
            record = with_wall_time(record, round(time.time() - began))
        with lock:
            done.append(run)
            run_seconds.append(time.time() - began)
            if record is None:
                failed.append(run.log)
            else:
                records = add_record(results_path, record, render_tables)
                if draw_figure is not None:
                    draw_figure(records)
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


def add_sweep_arguments(parser, studies):
    """The flags every study's sweep takes: one of `studies` (the names of the repository's committed studies of
    the sweep, `tooling/catalog.py`), where runs and results go, how many run at once, a dry run, a figure."""
    parser.add_argument(
        "--study",
        choices=studies,
        help="A committed study (tooling/catalog.py): its grids and results file; the other flags say where the "
        "data and runs are.",
    )
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
    `paired_figure(comparisons(records))` into `--figure` (also as each record lands), and exits with the logs of the
    runs that failed."""
    results = Path(args.results or Path(args.output_dir) / "results.json")

    def draw_figure(records):
        """The figure as the records stand; none yet where no arm has a seed of its twin's."""
        try:
            paired_figure(comparisons(records), args.figure)
        except ValueError as error:
            print(f"--figure {args.figure}: not drawn yet: {error}", flush=True)

    try:
        failed = run_sweep(
            runs,
            results,
            collect,
            render_tables,
            parallel=args.parallel,
            threads_per_run=args.threads_per_run,
            dry_run=args.dry_run,
            draw_figure=draw_figure if args.figure else None,
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
