"""scripts/glue_sweep.py runs the study's grid end to end: each recipe's MLM pre-training and fine-tuning, the twin
once per recipe family and pooling as the CASAN variants pool, and a table of paired differences with the gates
and MLM perplexities; a failed run fails the sweep."""

import json
import re
import subprocess
import sys

import pytest
from conftest import load_script
from glue_helpers import REPO_ROOT, make_tiny_bert


SWEEP = REPO_ROOT / "scripts" / "glue_sweep.py"


def test_study_grid_pairs_each_variant_with_its_twin(tmp_path, minilm_path, glue_dir):
    tiny_bert = make_tiny_bert(tmp_path / "bert", minilm_path)
    output_dir = tmp_path / "study"
    tiny_run = ["--max_steps", "1", "--max_eval_samples", "8", "--max_seq_length", "32",
                "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8"]  # fmt: skip
    command = [sys.executable, str(SWEEP), "--model_name_or_path", tiny_bert, "--glue_dir", str(glue_dir),
               "--output_dir", str(output_dir), "--tasks", "rte", "--variants", "none", "global",
               "--classifier_pooling", "mean",
               "--recipes", "mlm_context_lr", "--seeds", "1", "2", "--max_train_samples", "rte=16",
               "--mlm_steps", "1", "--parallel", "2", *tiny_run]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    runs = json.loads((output_dir / "results.json").read_text())
    assert len(runs) == 4  # 2 variants x 2 seeds
    # The twin has no context: under mlm_context_lr it is its mlm run, run once.
    assert not (output_dir / "rte" / "mlm_context_lr" / "none").exists()
    assert (
        sorted((run["recipe"], run["variant"]) for run in runs)
        == [("mlm", "none")] * 2 + [("mlm_context_lr", "global")] * 2
    )
    for run in runs:  # the twin pools as CASAN does
        config = json.loads(
            (output_dir / "rte" / run["recipe"] / run["variant"] / f"seed{run['seed']}" / "config.json").read_text()
        )
        assert (config["context_type"], config["classifier_pooling"]) == (run["variant"], "mean")
    assert sorted(path.name for path in (output_dir / "rte" / "mlm" / "none").iterdir() if path.is_dir()) == [
        "seed1",
        "seed1-mlm",
        "seed2",
        "seed2-mlm",
    ]
    settings = {run["variant"]: run["settings"] for run in runs}
    assert settings["global"]["context_learning_rate"] == pytest.approx(5e-4)
    assert settings["none"]["context_learning_rate"] is None  # the twin's mlm run, paired with both recipes
    assert settings["none"]["mlm_steps"] == settings["global"]["mlm_steps"] == 1
    assert settings["global"]["max_train_samples"] == 16 and "--max_steps" in settings["global"]["run_glue_args"]
    casan = [run for run in runs if run["variant"] == "global"]
    assert all(set(run["gates"]) == {"query", "key"} and len(run["gates"]["query"]) == 2 for run in casan)
    assert all(run["gates"] is None for run in runs if run["variant"] == "none")
    assert all("mlm_perplexity" in run for run in runs if run["recipe"] == "mlm_context_lr")
    card = (output_dir / "rte" / "mlm_context_lr" / "global" / "seed1" / "README.md").read_text()
    assert "context_learning_rate" in card and "0.0005" in card

    table = (output_dir / "results.md").read_text()
    assert table.startswith("Twin: `none` (classifier_pooling `mean`).")
    rows = [line for line in table.splitlines() if line.startswith("| mlm_context_lr | global |")]
    assert len(rows) == 1 and "(n=2)" in rows[0] and "/2 (p=" in rows[0], table
    assert [line for line in table.splitlines() if line.startswith("| mlm_context_lr | none | ")], table

    # Last, the twin side by side with the arm: its score, the paired difference, the parameters the context adds to
    # the twin's, the time per step against the twin's.
    side_by_side = done.stdout.split("The twin side by side with each CASAN arm (same data, steps and seeds):")[-1]
    (row,) = [line for line in side_by_side.splitlines() if line.startswith("| rte: accuracy (%) | global (mlm_")]
    sweep = load_script("glue_sweep")
    added = sweep.parameter_count(output_dir / "rte" / "mlm_context_lr" / "global" / "seed1") - sweep.parameter_count(
        output_dir / "rte" / "mlm" / "none" / "seed1"
    )
    assert added > 0 and f"| +{added:,} (+" in row and "(n=2)" in row, side_by_side
    assert re.search(r"\| [+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] \|", row), row
    assert re.search(r"\| \d+ \(x\d+\.\d\d\) \|$", row), row
    assert [line for line in side_by_side.splitlines() if line.startswith("| rte: accuracy (%) | none (mlm) |")]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--variants", "baseline", "global", "--classifier_pooling", "mean"], "must include 'none', the twin of"),
        (["--variants", "none", "baseline", "global", "--classifier_pooling", "mean"], "'baseline' does not pool"),
        (["--variants", "none", "global"], "must include 'baseline', the twin of --classifier_pooling cls"),
    ],
)
def test_the_twin_must_pool_as_the_variants_do(flags, message, capsys):
    sweep = load_script("glue_sweep")
    with pytest.raises(SystemExit):
        sweep.parse_args(["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", "o", *flags])
    assert message in capsys.readouterr().err


def test_runs_pad_each_batch_by_default():
    sweep = load_script("glue_sweep")
    args = sweep.parse_args(["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", "o", "--tasks", "rte"])
    glue_command = sweep.study_runs(args)[0].commands[-1]
    assert glue_command[glue_command.index("--pad_to_max_length") + 1] == "false"


def test_records_made_with_other_hyper_parameters_are_not_taken_for_the_sweeps_runs(tmp_path, capsys):
    sweep = load_script("glue_sweep")
    results = tmp_path / "results.json"
    flags = ["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", str(tmp_path), "--results", str(results),
             "--tasks", "rte", "--variants", "baseline", "--seeds", "1", "--dry_run"]  # fmt: skip
    (run,) = sweep.study_runs(sweep.parse_args(flags))
    results.write_text(json.dumps([{**run.identity, "settings": run.settings, "eval_accuracy": 0.5, "gates": None}]))
    sweep.main(flags)
    assert "1 runs: 1 finished before, 0 to run" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="learning_rate 5e-05 there, 3e-05 here"):
        sweep.main([*flags, "--learning_rate", "3e-5"])


def test_the_figure_is_drawn_from_the_results_file(tmp_path, capsys):
    sweep = load_script("glue_sweep")
    results, figure = tmp_path / "results.json", tmp_path / "study.png"
    flags = ["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", str(tmp_path), "--results", str(results),
             "--tasks", "rte", "--variants", "none", "global", "--classifier_pooling", "mean", "--seeds", "1", "2",
             "--dry_run", "--figure", str(figure)]  # fmt: skip
    runs = sweep.study_runs(sweep.parse_args(flags))
    records = [
        {**run.identity, "settings": run.settings, "eval_accuracy": 0.5 + 0.01 * index, "gates": None}
        for index, run in enumerate(runs)
    ]
    results.write_text(json.dumps(records))
    sweep.main(flags)
    assert figure.read_bytes().startswith(b"\x89PNG") and f"Figure: {figure}" in capsys.readouterr().out
    results.write_text(json.dumps([record for record in records if record["variant"] == "none"]))
    with pytest.raises(SystemExit, match="--figure .*: no variant has runs of its twin"):
        sweep.main(flags)
    results.unlink()
    with pytest.raises(SystemExit, match=f"--figure .*: {results} has no records to draw"):
        sweep.main(flags)


def test_a_failed_run_fails_the_sweep(tmp_path, glue_dir):
    command = [sys.executable, str(SWEEP), "--model_name_or_path", str(tmp_path / "missing"), "--glue_dir",
               str(glue_dir), "--output_dir", str(tmp_path / "out"), "--tasks", "rte", "--variants", "baseline",
               "--seeds", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "1 run(s) failed; their logs: " in done.stderr
    assert str(tmp_path / "out" / "rte" / "finetune" / "baseline" / "seed1.log") in done.stderr
