"""What a run received, written as it starts (`run_start.json`): the record a study keeps of what ran; and the time
it has spent, written into each checkpoint (`RunClock`), so that a run cut off and resumed is timed whole."""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..hub.folder import RUN_START_NAME


RUN_TIME_NAME = "run_time.json"


def time_before(checkpoint):
    """The train and wall seconds a run had spent up to `checkpoint` (its `RUN_TIME_NAME`), over every segment
    before it; None for a checkpoint saved without them."""
    path = Path(checkpoint) / RUN_TIME_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


class RunClock(TrainerCallback):
    """Writes into each checkpoint the train and wall seconds the run has spent up to it: those `before` this
    process (`time_before` the checkpoint it resumed from) and this process's, its train time from the start of
    training and its wall time from the clock's making (with the trainer). A run resumed from that checkpoint
    then knows the time of the part that was cut off, short of the steps after the checkpoint, which are trained
    again."""

    def __init__(self, before=None):
        self.before = before or {"train_seconds": 0.0, "wall_seconds": 0.0}
        self.made = self.began = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.monotonic()

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if not state.is_world_process_zero or not folder.is_dir():
            return
        now = time.monotonic()
        spent = {
            "step": state.global_step,
            "train_seconds": self.before["train_seconds"] + now - self.began,
            "wall_seconds": self.before["wall_seconds"] + now - self.made,
        }
        (folder / RUN_TIME_NAME).write_text(json.dumps(spent), encoding="utf-8")


def code_commit():
    """The git commit of the code this process runs, with "+changes" where tracked files differ from it, or None
    outside a git checkout (an installed package)."""
    package = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}+changes" if changes else commit


def data_fingerprint(paths):
    """The sha256 of each data file a run read (by name) and of them all together: two runs read the same data
    exactly when their `sha256` is equal, wherever the files lay."""
    files = {}
    for path in sorted(paths):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        files[os.path.basename(path)] = digest.hexdigest()
    return {"sha256": hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest(), "files": files}


def run_arguments(*groups):
    """Every argument of a run, by the dataclass that holds it (`TrainingArguments` as its `to_dict`, which
    masks the Hub token)."""
    return {
        type(group).__name__: group.to_dict() if hasattr(group, "to_dict") else dataclasses.asdict(group)
        for group in groups
    }


def record_run_start(training_args, settings, resumed_from=None, data_files=(), arguments=None):
    """Writes `run_start.json` into the output folder as a run starts (first process only): the command line as
    the run received it, the `settings` it resolved it to (e.g. the model's options), the commit of the code, the
    versions it runs on, torch's CPU threads and the CPU kernels it picked (another thread count or instruction
    set sums in another order, and a run's weights drift apart from step one). A study's record keeps it, so it
    says what ran rather than what was meant to, with the `data_fingerprint` of the local `data_files` it reads
    (None for data from the Hub), and every one of its `arguments` (`run_arguments`: the console shows a summary
    only). A run `resumed_from` a checkpoint keeps the first start and adds
    this one to its `resumes`, with the time the run had spent `before` it (`time_before`)."""
    if not training_args.should_save:
        return
    started = {
        "argv": sys.argv,
        "settings": settings,
        "commit": code_commit(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "data": data_fingerprint(data_files) if data_files else None,
        "arguments": arguments,
    }
    path = Path(training_args.output_dir) / RUN_START_NAME
    if resumed_from is not None and path.is_file():
        first = json.loads(path.read_text(encoding="utf-8"))
        resume = {**started, "checkpoint": str(resumed_from), "before": time_before(resumed_from)}
        first.setdefault("resumes", []).append(resume)
        started = first
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(started, indent=2, default=str), encoding="utf-8")
