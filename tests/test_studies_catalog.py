"""The committed studies (`tooling/catalog.py`): each redraws its committed tables and figure byte for
byte from its committed results file with `--study NAME --dry_run`, and a study's grid cannot be changed by a flag
beside `--study`."""

import importlib.util
import shutil

import pytest
from conftest import REPO_ROOT, load_script

from tooling.catalog import STUDIES, study_command_lines, swept_studies


# The machine's flags each sweep needs. A GLUE or translation dry run reads neither path; the causal LMs' rebuilds its
# data folder (the parts and the tokenizer) from the text, as its records' command does, so it takes the shared one.
MACHINE_FLAGS = {
    "glue": ["--model_name_or_path", "minilm", "--glue_dir", "glue"],
    "translation": ["--data_dir", "multi30k"],
    "clm": ["--text_file", str(REPO_ROOT.parent / "shared" / "lm" / "tinyshakespeare" / "input.txt")],
}


@pytest.mark.parametrize("name", [study.name for study in swept_studies() if (REPO_ROOT / study.results).exists()])
def test_a_committed_study_redraws_its_tables_and_figure_byte_for_byte(name, tmp_path):
    study = STUDIES[name]
    committed = REPO_ROOT / study.results
    results = tmp_path / committed.name
    shutil.copy(committed, results)
    arguments = ["--study", name, *MACHINE_FLAGS[study.sweep], "--output_dir", str(tmp_path / "runs"),
                 "--results", str(results), "--dry_run"]  # fmt: skip
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    if has_matplotlib:
        arguments += ["--figure", str(tmp_path / "figure.png")]
    # The sweep's `main()` in this process: its figure is a `Figure` of its own, with no pyplot state to inherit.
    load_script(f"{study.sweep}_sweep").main(arguments)
    assert results.with_suffix(".md").read_bytes() == committed.with_suffix(".md").read_bytes()
    if has_matplotlib:
        assert (tmp_path / "figure.png").read_bytes() == (REPO_ROOT / study.figure).read_bytes()


def test_every_study_parses_as_its_sweep_takes_it():
    for study in swept_studies():
        sweep = load_script(f"{study.sweep}_sweep")
        machine = [*MACHINE_FLAGS[study.sweep], "--output_dir", "o"]
        for grid in study_command_lines(sweep.make_parser(), ["--study", study.name, *machine], study.sweep, "/r"):
            assert sweep.study_runs(sweep.parse_args(grid))


def test_a_study_is_its_grids_with_the_machines_flags():
    sweep = load_script("translation_sweep")
    lines = study_command_lines(
        sweep.make_parser(),
        ["--study", "translation-micro", "--data_dir", "d", "--output_dir", "o", "--parallel", "2"],
        "translation",
        "/r",
    )
    assert len(lines) == len(STUDIES["translation-micro"].grids)
    args = sweep.parse_args(lines[0])
    assert (args.model_size, args.seeds, args.parallel, args.data_dir) == ("micro", [1, 2, 3], 2, "d")
    assert args.results == "/r/docs/results/translation_micro_cpu.json" and args.figure is None
    assert study_command_lines(sweep.make_parser(), ["--data_dir", "d"], "translation", "/r") == [["--data_dir", "d"]]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--study", "translation-micro", "--variants", "none"], "--study translation-micro fixes --variants;"),
        (["--study", "translation-micro", "--seeds=4"], "--study translation-micro fixes --seeds"),
        (["--study", "glue-minilm-cpu-mean"], "'glue-minilm-cpu-mean' is not a study of this sweep"),
    ],
)
def test_a_flag_that_would_change_the_study_is_refused(argv, message, capsys):
    sweep = load_script("translation_sweep")
    with pytest.raises(SystemExit):
        sweep.main([*argv, "--data_dir", "d", "--output_dir", "o", "--dry_run"])
    assert message in capsys.readouterr().err
