"""How every shell command of README.md runs as written, in the order written, as a newcomer would type them in the
repository's root (tests/test_docs_commands.py runs them, then docs/TOOLS.md's, in one folder): the placeholders
filled with the real MiniLM's folder, the `out/` folders written under a temporary folder, the long jobs at tiny
sizes through their own documented flags (or `make glue`'s `GLUE_FLAGS`), appended after the command's. A command
that needs what CI lacks (the Hub) runs up to that point and must stop there with its one line saying so; two are
not run, each for the reason `RUNS` gives. A command README gains fails here until it has its row."""

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from conftest import REPO_ROOT
from doc_commands import page_commands


README = REPO_ROOT / "README.md"
PLACEHOLDERS = ("<bert folder or hub id>", "<checkpoint>")


@dataclass(frozen=True)
class Run:
    """How the test runs a command: flags appended (`flags`: a tiny size, or what a local checkpoint needs),
    environment variables (`env`, `{out}` the temporary folder), or not at all (`skip`, why); `needs_hub`, what the
    line it must stop with offline says."""

    flags: tuple = ()
    env: tuple = ()
    skip: str | None = None
    needs_hub: str | None = None


# Each README command by its first words (the program and its script or target).
RUNS = {
    "make glue": Run(
        env=(
            ("GLUE_FLAGS", "--max_train_samples 8 --max_eval_samples 8 --max_steps 1"),
            ("OUTPUT_DIR", "{out}/outputs/minilm-casan-deep_global-mrpc"),
        )
    ),
    "make test": Run(skip="the suite that runs this test"),
    "python scripts/glue_sweep.py": Run(
        flags=("--seeds", "42", "--max_train_samples", "rte=8", "--num_train_epochs", "0.05", "--max_seq_length", "32")
    ),
    "python scripts/run_glue.py": Run(
        flags=("--max_train_samples", "8", "--max_eval_samples", "8", "--max_steps", "1")
    ),
    "python scripts/run_mlm.py": Run(
        flags=("--max_train_samples", "8", "--max_eval_samples", "8", "--max_steps", "1")
    ),
    "python scripts/run_clm.py": Run(
        flags=("--max_train_samples", "4", "--max_eval_samples", "2", "--max_steps", "1")
    ),
    "python scripts/run_translation.py": Run(
        flags=(
            "--max_train_samples",
            "16",
            "--max_eval_samples",
            "4",
            "--max_predict_samples",
            "4",
            "--max_steps",
            "1",
            "--num_beams",
            "1",
            "--max_target_length",
            "8",
        )
    ),  # fmt: skip
    "python scripts/convert_bert_to_casan.py": Run(flags=("--base_model", "sentence-transformers/all-MiniLM-L6-v2")),
    "python scripts/export_onnx.py": Run(),
    "python scripts/plot_attention.py": Run(),
    "python scripts/benchmark.py": Run(flags=("--modes", "inference", "--rank", "0")),
    "make install-demo": Run(skip="the explorer's environment; tests/test_explorer_browser.py serves the explorer"),
    ".venv-demo/bin/python scripts/explore.py": Run(skip="a server that runs until stopped: test_explorer_browser.py"),
    "python scripts/push_to_hub.py": Run(needs_hub="the Hub's validation of README.md failed (OfflineModeIsEnabled"),
}
# The README's run_glue.py command that pushes: the checkpoint by Hub id, and --push_to_hub.
HUB_RUN_GLUE = "--hub_model_id"


def readme_commands(placeholders=None):
    """README's shell commands in order, each as its argv, `placeholders` filled (by default, left as written)."""
    fill = placeholders or {placeholder: placeholder for placeholder in PLACEHOLDERS}
    return [list(command.argv) for command in page_commands("README.md", README.read_text(encoding="utf-8"), {}, fill)]


def key(argv):
    return " ".join(argv[:2])


def test_every_readme_command_has_its_row():
    commands = readme_commands()
    assert len(commands) >= 12, commands
    unknown = sorted({key(argv) for argv in commands} - RUNS.keys())
    assert not unknown, f"README commands without a row in RUNS: {unknown}"


# The folders a command writes, which the tests put under a temporary folder.
WRITTEN = ("out/", "runs/", "docs/images/", "attention.png")


def as_run(argv, out):
    """The argv the test runs: what it writes under the temporary folder `out`, `python` this interpreter."""
    filled = [f"{out}/{word}" if word.startswith(WRITTEN) else word for word in argv]
    return [sys.executable if filled[0] == "python" else filled[0], *filled[1:]]


def run_as_written(argv, out, env=()):
    """Runs one command as a user would, at the tiny size of its row of `RUNS` (or not, saying why), with its
    `env` beside the offline environment; a command that needs the Hub must stop saying so."""
    run = RUNS[key(argv)]
    if run.skip:
        print(f"not run: {shlex.join(argv)} ({run.skip})")
        return
    needs_hub = run.needs_hub
    if key(argv) == "python scripts/run_glue.py" and HUB_RUN_GLUE in argv:
        needs_hub = "OfflineModeIsEnabled"  # the checkpoint and the data by Hub id
    command = as_run(argv, out) + list(run.flags if not needs_hub else ())
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg", **dict(env)}
    environment.update({name: value.format(out=out) for name, value in run.env})
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=600)
    took = f"{time.monotonic() - started:.0f} s"
    output = (done.stdout + done.stderr)[-3000:]
    if needs_hub:
        assert done.returncode != 0 and needs_hub in output, f"{shlex.join(argv)}:\n{output}"
        print(f"stops where it needs the Hub ({took}): {shlex.join(argv)}")
    else:
        assert done.returncode == 0, f"{shlex.join(command)}:\n{output}"
        print(f"ran ({took}): {shlex.join(argv)}")


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
def test_every_placeholder_is_one_readme_uses(placeholder):
    assert placeholder in README.read_text(encoding="utf-8")
