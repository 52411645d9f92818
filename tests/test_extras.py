"""Every script checks the optional packages its requested work needs before it starts, and names the extra that
installs them: a missing package is one line and a pip command, with nothing written, never a
ModuleNotFoundError after training."""

import importlib.util

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


def test_run_translation_without_sacrebleu_stops_before_training(hide, multi30k_dir, tmp_path, monkeypatch):
    """It used to train to the end and die in its first evaluation with ModuleNotFoundError: 'sacrebleu'."""
    module = load_script("run_translation")
    hide("sacrebleu")
    output_dir = tmp_path / "out"
    argv = ["run_translation.py", "--data_dir", multi30k_dir, "--do_train", "--do_eval", "--predict_with_generate",
            "--max_steps", "1", "--output_dir", output_dir]  # fmt: skip
    monkeypatch.setattr("sys.argv", list(map(str, argv)))
    with pytest.raises(SystemExit) as stopped:
        module.main()
    assert str(stopped.value) == (
        "run_translation.py: error: Scoring BLEU and chrF (--predict_with_generate) needs sacrebleu, which is not "
        'installed: pip install "casan-hf[translation]"'
    )
    assert not output_dir.exists()


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
