"""Every shell command of docs/*.md is one that casan-hf's programs take as written: its script, module, make
target, test or launcher config exists, and its flags parse with the program's own parser, in this process, which
stops each program once its command line is parsed (`stopping_once_parsed`): the usage errors, bad values and
option checks a user would meet first. Placeholders and `$MINILM` are filled with the real MiniLM's folder, loops
unrolled over their values, and a synopsis's `...` given the flags the program requires (`ELLIPSIS`). A pytest
command's tests and `-k` expression select collected tests. What the programs then do is tested at tiny sizes by
README's commands and then docs/TOOLS.md's, run here in their order (as tests/test_readme_commands.py runs them), and
by each program's own tests: the other pages' commands are the studies (hours each), the GPU's and the archive's."""

import argparse
import contextlib
import io
import os
import runpy
import shlex
import subprocess
import sys

import click
import pytest
import torch
from _pytest.mark.expression import Expression
from conftest import REPO_ROOT
from doc_commands import is_python, page_commands
from test_readme_commands import PLACEHOLDERS as README_PLACEHOLDERS
from test_readme_commands import readme_commands, run_as_written
from transformers import HfArgumentParser


PAGES = sorted((REPO_ROOT / "docs").glob("*.md"))
MINILM = "$MINILM"  # filled by `commands`
# What a user puts in the commands' placeholders, here.
PLACEHOLDERS = {
    "<bert folder or hub id>": MINILM,
    "<folder>": MINILM,
    "<checkpoint>": "runs/translation-model",
    "<CASAN folder>": "runs/casan-minilm",
    "FOLDER": "runs/casan-minilm",
    "USER/CASAN-MODEL": "you/casan-minilm",
    "USER/TWIN": "you/minilm",
    "SHARD": "glue",
}
# A synopsis's `...`: the flags the program requires, which the page's earlier command gave.
ELLIPSIS = {
    "scripts/run_glue.py": "--model_name_or_path $MINILM --task_name rte --glue_dir ../shared/glue --output_dir out/x",
    "scripts/run_mlm.py": "--model_name_or_path $MINILM --glue_dir ../shared/glue --glue_tasks rte --output_dir out/x",
    "scripts/run_translation.py": "--data_dir ../shared/mt/multi30k --output_dir out/x",
}
# What a command that needs a GPU (`--bf16` training) says where there is none, which is as far as it goes here.
GPU_REFUSALS = ("Your setup doesn't support bf16/gpu",)
# Python's own modules, which casan-hf does not check.
PYTHONS_OWN = ("pip", "venv")
PYTEST_VALUE_OPTIONS = ("-p", "--device", "--hypothesis-profile")
PYTEST_VERBOSITY = ("-q", "-v", "-s")
LAUNCHER_FLAGS = {"torchrun": {"--standalone": 0, "--nproc_per_node": 1}, "accelerate": {"--num_processes": 1}}


class Parsed(BaseException):
    """Raised once a program's command line is parsed: a BaseException, so that no `except Exception` takes it."""


@contextlib.contextmanager
def stopping_once_parsed():
    """Every parser a program asks for its whole command line raises `Parsed` once it has parsed it; a parser
    without `-h` (one that picks a flag out before the program's own parser, as `--study`) does not. A click (typer)
    command, as transformers' `serve` that `casan_hf.cli.serve` runs, raises it where it would run, its options
    parsed (a group goes on to its subcommand)."""
    parse_args = argparse.ArgumentParser.parse_args
    parse_known_args = argparse.ArgumentParser.parse_known_args
    into_dataclasses = HfArgumentParser.parse_args_into_dataclasses
    invoke = click.Command.invoke
    inside = []

    def whole(parse):
        def parsed(self, *args, **kwargs):
            inside.append(self)
            try:
                result = parse(self, *args, **kwargs)
            finally:
                inside.pop()
            if self.add_help and not inside:
                raise Parsed(result)
            return result

        return parsed

    def parsed_command(self, context):
        if isinstance(self, click.Group):
            return invoke(self, context)
        raise Parsed(context.params)

    argparse.ArgumentParser.parse_args = whole(parse_args)
    argparse.ArgumentParser.parse_known_args = whole(parse_known_args)
    HfArgumentParser.parse_args_into_dataclasses = whole(into_dataclasses)
    click.Command.invoke = parsed_command
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = parse_args
        argparse.ArgumentParser.parse_known_args = parse_known_args
        click.Command.invoke = invoke
        HfArgumentParser.parse_args_into_dataclasses = into_dataclasses


def commands(minilm):
    variables = {"MINILM": minilm}
    found = []
    for page in PAGES:
        found += page_commands(page.name, page.read_text(encoding="utf-8"), variables, PLACEHOLDERS)
    return found


def with_ellipsis(argv, minilm):
    """`argv` with its `...` replaced by what its program requires (`ELLIPSIS`)."""
    if "..." not in argv:
        return list(argv)
    script = next(word for word in argv if word.endswith(".py"))
    at = argv.index("...")
    return [*argv[:at], *shlex.split(ELLIPSIS[script].replace("$MINILM", minilm)), *argv[at + 1 :]]


def parse_in_this_process(argv, env, run):
    """Runs the program of `argv` (`run`: runpy's run_path or run_module) until its command line is parsed; the
    usage error it prints, if any, is the failure."""
    target, *args = argv
    stderr = io.StringIO()
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = [target, *args]
    os.environ.update(env)
    try:
        with stopping_once_parsed(), contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            run(target, run_name="__main__")
    except Parsed:
        return
    except SystemExit as error:
        if not torch.cuda.is_available() and any(refusal in stderr.getvalue() for refusal in GPU_REFUSALS):
            return  # a GPU's command, which stops here saying so
        pytest.fail(f"{shlex.join(argv)} does not parse (exit {error.code}):\n{stderr.getvalue()[-2000:]}")
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    pytest.fail(f"{shlex.join(argv)} ran to its end without parsing a command line")


def check_python(argv, env, collected):
    if argv[0] == "-c":
        compile(argv[1], "<-c>", "exec")
    elif argv[:2] == ["-m", "pytest"]:
        check_pytest(argv[2:], collected)
    elif argv[0] == "-m" and argv[1] in PYTHONS_OWN:
        pass
    elif argv[0] == "-m":
        parse_in_this_process(argv[1:], env, runpy.run_module)
    else:
        assert (REPO_ROOT / argv[0]).is_file(), f"{argv[0]}: no such script"
        parse_in_this_process(argv, env, runpy.run_path)


def pytest_parts(args):
    """A pytest command line's test paths, its `-k` expression (or None) and its other options."""
    paths, expression, options = [], None, []
    args = list(args)
    while args:
        word = args.pop(0)
        if word == "-k":
            expression = args.pop(0)
        elif word in PYTEST_VERBOSITY:
            continue
        elif word.startswith("-"):
            options.append((word, args.pop(0)) if word in PYTEST_VALUE_OPTIONS else (word,))
        else:
            paths.append(word)
    return paths, expression, options


def is_pytest(command):
    return is_python(command.program) and command.argv[1:3] == ("-m", "pytest")


@pytest.fixture(scope="module")
def collected_tests(minilm_path):
    """The suite's test ids, collected once with every option the docs' pytest commands give (an option pytest
    does not take fails the collection)."""
    options = {option for command in commands(minilm_path) if is_pytest(command)
               for option in pytest_parts(command.argv[3:])[2]}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *[word for option in options for word in option]],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def check_pytest(args, collected):
    """Each test path names collected tests, and the `-k` expression selects at least one of them."""
    paths, expression, _ = pytest_parts(args)
    named = {path: [test for test in collected if test == path or test.startswith((f"{path}::", f"{path}["))]
             for path in paths}  # fmt: skip
    missing = [path for path, tests in named.items() if not tests]
    assert not missing, f"no test at {missing}"
    if expression is not None:
        rule = Expression.compile(expression)
        selected = [
            test
            for tests in named.values()
            for test in tests
            if rule.evaluate(lambda name, test=test: name.lower() in test.lower())
        ]
        assert selected, f"-k {expression!r} selects none of the tests of {paths}"


def check_launcher(argv, env, collected):
    """A launcher's own flags (its config file there), then its script's."""
    launcher, *rest = argv
    if launcher == "accelerate":
        assert rest.pop(0) == "launch", argv
    while rest and rest[0].startswith("--"):
        flag = rest.pop(0)
        if flag == "--config_file":
            assert (REPO_ROOT / rest.pop(0)).is_file(), f"{shlex.join(argv)}: no such config file"
        else:
            assert flag in LAUNCHER_FLAGS[launcher], f"{launcher} flag {flag} is not one the docs use"
            del rest[: LAUNCHER_FLAGS[launcher][flag]]
    check_python(rest, env, collected)


def check(command, minilm, collected):
    argv = with_ellipsis(command.argv, minilm)
    program, *args = argv
    if is_python(program):
        check_python(args, command.env, collected)
    elif program in ("torchrun", "accelerate"):
        check_launcher(argv, command.env, collected)
    elif program == "make":
        dry = subprocess.run(["make", "-n", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
    elif program == "bash":
        script = REPO_ROOT / args[0]
        assert script.is_file(), f"{args[0]}: no such script"
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    else:
        pytest.fail(f"{command}: a program this test does not know")


def test_every_docs_command_parses(minilm_path, collected_tests, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    found = commands(minilm_path)
    assert {command.page for command in found} >= {"TOOLS.md", "RESULTS.md", "TRANSLATION.md", "SCALING.md"}
    failures = []
    for command in found:
        try:
            check(command, minilm_path, collected_tests)
        except (AssertionError, pytest.fail.Exception, KeyError) as error:
            failures.append(f"{command}\n    {str(error).strip()[-1500:]}")
    assert not failures, f"{len(failures)} of {len(found)} docs commands fail:\n" + "\n".join(failures)


def test_readme_then_the_fine_tuning_page_run_in_the_order_written(minilm_path, tmp_path):
    """README's commands in their order, then those of docs/TOOLS.md, the page a user follows step by step to
    fine-tune, compare, pre-train, export and plot, in the same folder, at README's tiny sizes. A page command that
    README ran word for word (its first three) is not run again: its outputs are in the folder, as they would be
    for the user who came from README."""
    ran = []
    for argv in readme_commands(dict.fromkeys(README_PLACEHOLDERS, minilm_path)):
        run_as_written(argv, tmp_path)
        ran.append(argv)
    page = REPO_ROOT / "docs" / "TOOLS.md"
    found = page_commands(page.name, page.read_text(encoding="utf-8"), {"MINILM": minilm_path}, PLACEHOLDERS)
    assert len(found) >= 6, found
    for command in found:
        if command.env or list(command.argv) not in ran:
            run_as_written(list(command.argv), tmp_path, command.env)
