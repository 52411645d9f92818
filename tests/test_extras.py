"""Every script checks the optional packages its requested work needs before it starts, and names the extra that
installs them: a missing package is one line and a pip command, with nothing written, never a
ModuleNotFoundError after training. A package that is installed but fails to import (a broken install, a missing
dependency of its own) is found by importing it, and stops the script the same way."""

import importlib.util
import sys

import pytest
import tomllib
from conftest import REPO_ROOT, load_script

from casan_hf.cli.extras import PACKAGES, missing_packages_message


@pytest.fixture
def hide(monkeypatch):
    """Makes `importlib.util.find_spec` find none of the given modules, as in an environment without them."""
    find_spec = importlib.util.find_spec

    def hide_modules(*names):
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, *args: None if name in names else find_spec(name, *args)
        )

    return hide_modules


@pytest.fixture
def break_on_import(tmp_path_factory, monkeypatch):
    """Puts packages of the given names first on the path whose import raises ImportError, as a broken install
    does; `importlib.util.find_spec` finds them."""

    folder = tmp_path_factory.mktemp("broken")

    def break_modules(*names):
        for name in names:
            package = folder / name
            package.mkdir()
            (package / "__init__.py").write_text(f"raise ImportError('No module named {name}_dependency')\n")
            monkeypatch.delitem(sys.modules, name, raising=False)
        monkeypatch.syspath_prepend(folder)

    return break_modules


def broken_message(what, *modules):
    """The check's line for `modules` broken by `break_on_import`."""
    distributions = [PACKAGES[module][0] for module in modules]
    names = " and ".join(
        f"{PACKAGES[module][0]} (ImportError: No module named {module}_dependency)" for module in modules
    )
    verb = "is" if len(modules) == 1 else "are"
    return (
        f"{what} needs {names}, which {verb} installed but cannot be imported: "
        f"pip install --force-reinstall {' '.join(distributions)}"
    )


# Each script, a package its work needs, and the extra that installs it.
SCRIPT_NEEDS = [
    ("run_glue", "datasets", "train"),
    ("run_mlm", "datasets", "train"),
    ("run_translation", "accelerate", "train"),
    ("export_onnx", "onnxruntime", "export"),
    ("plot_attention", "matplotlib", "plot"),
]


@pytest.mark.parametrize("script, module, extra", SCRIPT_NEEDS)
def test_a_script_without_its_package_stops_at_once_naming_the_extra(script, module, extra, hide):
    hide(module)
    with pytest.raises(SystemExit) as stopped:
        load_script(script)
    distribution = PACKAGES[module][0]
    assert str(stopped.value) == (
        f"{script}.py: error: {script}.py needs {distribution}, which is not installed: "
        f'pip install "casan-hf[{extra}]"'
    )


def translation_run_stop(module, multi30k_dir, tmp_path, monkeypatch):
    """How `run_translation.py` stops when asked to train and score BLEU; it must stop before writing anything."""
    output_dir = tmp_path / "out"
    argv = ["run_translation.py", "--data_dir", multi30k_dir, "--do_train", "--do_eval", "--predict_with_generate",
            "--max_steps", "1", "--output_dir", output_dir]  # fmt: skip
    monkeypatch.setattr("sys.argv", list(map(str, argv)))
    with pytest.raises(SystemExit) as stopped:
        module.main()
    assert not output_dir.exists()
    return str(stopped.value)


def test_run_translation_without_sacrebleu_stops_before_training(hide, multi30k_dir, tmp_path, monkeypatch):
    """It used to train to the end and die in its first evaluation with ModuleNotFoundError: 'sacrebleu'."""
    module = load_script("run_translation")
    hide("sacrebleu")
    assert translation_run_stop(module, multi30k_dir, tmp_path, monkeypatch) == (
        "run_translation.py: error: Scoring BLEU and chrF (--predict_with_generate) needs sacrebleu, which is not "
        'installed: pip install "casan-hf[translation]"'
    )


# Each script and a package it needs that is otherwise imported only once the work is under way.
SCRIPT_NEEDS_LATE = [("run_glue", "evaluate"), ("run_glue", "sklearn"), ("run_mlm", "datasets")]


@pytest.mark.parametrize("script, module", SCRIPT_NEEDS_LATE)
def test_a_script_with_a_package_that_fails_to_import_stops_at_once(script, module, break_on_import):
    break_on_import(module)
    with pytest.raises(SystemExit) as stopped:
        load_script(script)
    assert str(stopped.value) == f"{script}.py: error: {broken_message(f'{script}.py', module)}"


def test_run_translation_with_a_broken_sacrebleu_stops_before_training(
    break_on_import, multi30k_dir, tmp_path, monkeypatch
):
    """It used to train every step and die in its first evaluation with ImportError: sacrebleu."""
    module = load_script("run_translation")
    break_on_import("sacrebleu")
    assert translation_run_stop(module, multi30k_dir, tmp_path, monkeypatch) == "run_translation.py: error: " + (
        broken_message("Scoring BLEU and chrF (--predict_with_generate)", "sacrebleu")
    )


def test_every_package_that_fails_to_import_is_named_with_its_error(break_on_import):
    break_on_import("evaluate", "sacrebleu")
    assert missing_packages_message("x", ["evaluate", "scipy", "sacrebleu"]) == broken_message(
        "x", "evaluate", "sacrebleu"
    )


# Each sweep, its required flags, and the extras its runs need.
SWEEPS = [
    ("glue_sweep", ["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", "o"], "train"),
    ("translation_sweep", ["--data_dir", "d", "--output_dir", "o"], "train,translation"),
]


@pytest.mark.parametrize("script, argv, extras", SWEEPS)
def test_the_sweeps_check_what_their_runs_need(script, argv, extras, hide, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hide("datasets", "sacrebleu")
    with pytest.raises(SystemExit) as stopped:
        load_script(script).main(argv)
    assert str(stopped.value).endswith(f'pip install "casan-hf[{extras}]"')
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "script, argv, broken, runs",
    [(*SWEEPS[0][:2], "evaluate", "run_glue.py"), (*SWEEPS[1][:2], "sacrebleu", "run_translation.py")],
)
def test_the_sweeps_import_what_their_runs_need_before_they_start(
    script, argv, broken, runs, break_on_import, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    module = load_script(script)
    break_on_import(broken)
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)
    assert str(stopped.value) == f"{script}.py: error: {broken_message(f'Each run of {runs}', broken)}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("script, argv, extras", SWEEPS)
def test_a_sweep_asked_for_a_figure_checks_for_matplotlib_before_it_runs(
    script, argv, extras, hide, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    hide("matplotlib")
    with pytest.raises(SystemExit) as stopped:
        load_script(script).main([*argv, "--figure", "study.png"])
    assert str(stopped.value) == (
        f'{script}.py: error: --figure needs matplotlib, which is not installed: pip install "casan-hf[plot]"'
    )
    assert list(tmp_path.iterdir()) == []


def test_every_extra_is_pinned_in_pyproject():
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, (distribution, extra) in PACKAGES.items():
        names = {requirement.split(">")[0].split("=")[0].split("<")[0] for requirement in declared[extra]}
        assert distribution in names, (module, extra)
    assert missing_packages_message("x", list(PACKAGES)) is None  # the test environment has them all
