"""What a run received, written as it starts (`run_start.json`): the record a study keeps of what ran."""

import json
import os
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


def record_run_start(training_args, settings):
    """Writes `run_start.json` into the output folder as a run starts (first process only): the command line as
    the run received it, the `settings` it resolved it to (e.g. the model's options), the commit of the code and
    the versions it runs on. A study's record keeps it, so it says what ran rather than what was meant to."""
    if not training_args.should_save:
        return
    started = {
        "argv": sys.argv,
        "settings": settings,
        "commit": code_commit(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    os.makedirs(training_args.output_dir, exist_ok=True)
    with open(os.path.join(training_args.output_dir, RUN_START_NAME), "w", encoding="utf-8") as handle:
        json.dump(started, handle, indent=2, default=str)
