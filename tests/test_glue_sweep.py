"""scripts/glue_sweep.py runs the study's grid end to end: each recipe's MLM pre-training and fine-tuning, the twin
once per recipe family, and a table of paired differences with the gates and MLM perplexities; a failed run
fails the sweep."""

import json
import subprocess
import sys

from glue_helpers import REPO_ROOT, make_tiny_bert


SWEEP = REPO_ROOT / "scripts" / "glue_sweep.py"


def test_study_grid_pairs_each_variant_with_its_twin(tmp_path, minilm_path, glue_dir):
    tiny_bert = make_tiny_bert(tmp_path / "bert", minilm_path)
    output_dir = tmp_path / "study"
    tiny_run = ["--max_steps", "1", "--max_eval_samples", "8", "--max_seq_length", "32",
                "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8"]  # fmt: skip
    command = [sys.executable, str(SWEEP), "--model_name_or_path", tiny_bert, "--glue_dir", str(glue_dir),
               "--output_dir", str(output_dir), "--tasks", "rte", "--variants", "baseline", "global",
               "--recipes", "mlm_context_lr", "--seeds", "1", "2", "--max_train_samples", "rte=16",
               "--mlm_steps", "1", "--parallel", "2", *tiny_run]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    runs = json.loads((output_dir / "results.json").read_text())
    assert len(runs) == 4  # 2 variants x 2 seeds
    # The twin has no context: under mlm_context_lr it is its mlm run, run once.
    assert not (output_dir / "rte" / "mlm_context_lr" / "baseline").exists()
    assert sorted(path.name for path in (output_dir / "rte" / "mlm" / "baseline").iterdir() if path.is_dir()) == [
        "seed1",
        "seed1-mlm",
        "seed2",
        "seed2-mlm",
    ]
    casan = [run for run in runs if run["variant"] == "global"]
    assert all(set(run["gates"]) == {"query", "key"} for run in casan)
    assert all(run["gates"] is None for run in runs if run["variant"] == "baseline")
    assert all("mlm_perplexity" in run for run in runs if run["recipe"] == "mlm_context_lr")
    card = (output_dir / "rte" / "mlm_context_lr" / "global" / "seed1" / "README.md").read_text()
    assert "context_learning_rate" in card and "0.0005" in card

    table = (output_dir / "results.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| mlm_context_lr | global |")]
    assert len(rows) == 1 and "(n=2)" in rows[0] and "/2 (p=" in rows[0], table


def test_a_failed_run_fails_the_sweep(tmp_path, glue_dir):
    command = [sys.executable, str(SWEEP), "--model_name_or_path", str(tmp_path / "missing"), "--glue_dir",
               str(glue_dir), "--output_dir", str(tmp_path / "out"), "--tasks", "rte", "--variants", "baseline",
               "--seeds", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "1 run(s) failed; their logs: " in done.stderr
    assert str(tmp_path / "out" / "rte" / "finetune" / "baseline" / "seed1.log") in done.stderr
