"""What a run received, written as it starts (`run_start.json`): the record a study keeps of what ran."""

import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers


RUN_START_NAME = "run_start.json"


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


def record_run_start(training_args, settings, resumed_from=None):
    """Writes `run_start.json` into the output folder as a run starts (first process only): the command line as
    the run received it, the `settings` it resolved it to (e.g. the model's options), the commit of the code, the
    versions it runs on, torch's CPU threads and the CPU kernels it picked (another thread count or instruction
    set sums in another order, and a run's weights drift apart from step one). A study's record keeps it, so it
    says what ran rather than what was meant to. A run `resumed_from` a checkpoint keeps the first start and adds
    this one to its `resumes`."""
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
    }
    path = Path(training_args.output_dir) / RUN_START_NAME
    if resumed_from is not None and path.is_file():
        first = json.loads(path.read_text(encoding="utf-8"))
        first.setdefault("resumes", []).append({**started, "checkpoint": str(resumed_from)})
        started = first
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(started, indent=2, default=str), encoding="utf-8")
