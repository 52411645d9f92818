"""scripts/translation_sweep.py end to end on a slice of Multi30k: every arm and seed trained, scored with beam
search and greedily, its record (cross-entropy, scores, scores by length, time per step, the encoder's gates, what
the run received) in the results file, and the paired tables against `none`, the primary metric relative to the
twin and between the other arms, and the runs' time per commit."""

import json
import subprocess
import sys

from conftest import REPO_ROOT, load_script

from casan_hf.cli.run_start import data_fingerprint
from casan_hf.studies import detectable_difference
from casan_hf.studies.grid import run_time, with_wall_time
from casan_hf.studies.translation import tables


SWEEP = REPO_ROOT / "scripts" / "translation_sweep.py"
TINY = ["--max_steps", "2", "--d_model", "32", "--encoder_layers", "2", "--attention_heads", "4", "--ffn_dim", "64",
        "--vocab_size", "300", "--max_target_length", "16", "--max_eval_samples", "8",
        "--max_predict_samples", "8"]  # fmt: skip


ARM = "deep_global:gate_per_head,gate_bias_init=0"
ARM_NAME = "deep_global:gate_bias_init=0.0,gate_per_head=true"  # the options sorted, their values as JSON


def test_study_pairs_each_variant_with_none(tmp_path, multi30k_dir):
    results = tmp_path / "results" / "micro.json"
    command = [sys.executable, str(SWEEP), "--data_dir", str(multi30k_dir), "--output_dir", str(tmp_path / "runs"),
               "--results", str(results), "--arms", "none", ARM, "--seeds", "1", "2",
               "--parallel", "2", *TINY]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 runs: 0 finished before, 4 to run, 2 at a time" in done.stdout
    assert done.stdout.count("finished in") == 4

    records = json.loads(results.read_text())
    assert sorted((r["variant"], r["seed"]) for r in records) == [(ARM_NAME, 1), (ARM_NAME, 2),
                                                                  ("none", 1), ("none", 2)]  # fmt: skip
    for record in records:
        assert record["steps"] == 2 and record["seconds_per_step"] > 0
        assert {"test_bleu", "greedy_test_bleu", "validation_bleu", "test_chrf", "greedy_test_chrf"} <= set(record)
        assert record["test_cross_entropy"] > 0 and record["validation_cross_entropy"] > 0
        assert sum(bucket["sentences"] for bucket in record["test_by_length"].values()) == 8
        received = record["received"]
        assert "--encoder_layers" in received["argv"] and received["settings"]["encoder_layers"] == 2
        gates, options = record["gates"], record["context_options"]
        if record["variant"] == "none":
            assert gates is None and options["context_type"] == "none"
        else:
            assert len(gates["query"]) == len(gates["key"]) == 2 and len(gates["key_per_head"][1]) == 4
            assert options["gate_per_head"] is True and options["gate_bias_init"] == 0.0
            assert "--gate_per_head" in received["argv"]
        folder = tmp_path / "runs" / "micro-5ep" / record["variant"] / f"seed{record['seed']}"
        beams = json.loads((folder / "generation_config.json").read_text())["num_beams"]
        assert beams == 5 and (folder / "greedy" / "generated_predictions.txt").exists()

    table = results.with_suffix(".md").read_text()
    for title in ("test BLEU (beam)", "test BLEU (greedy)", "validation BLEU (beam)", "test cross-entropy"):
        assert f"### micro, 5 epochs: {title}" in table
    assert "### micro, 5 epochs: test BLEU (beam), sources of 11-15 words (" in table
    assert f"| micro | 5 | {ARM_NAME} | " in table and "/2 (p=" in table
    assert f"- `{ARM_NAME}`: layer 0: " in table and "  - key gate per head: layer 0: " in table

    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert "4 runs: 4 finished before, 0 to run" in again.stdout
    assert all(record["settings"]["dropout"] == 0.1 for record in records)
    other = subprocess.run([*command, "--dropout", "0.3"], capture_output=True, text=True, timeout=300)
    assert other.returncode == 1 and "dropout 0.1 there, 0.3 here" in other.stderr


def test_runs_go_seed_by_seed_with_the_studys_settings():
    sweep = load_script("translation_sweep")
    args = sweep.parse_args(["--data_dir", "d", "--output_dir", "o", "--seeds", "1", "2"])
    runs = sweep.study_runs(args)
    assert [(run.identity["seed"], run.identity["variant"]) for run in runs][:5] == [
        (1, "none"), (1, "global"), (1, "deep"), (1, "deep_global"), (2, "none")]  # fmt: skip
    train, greedy = runs[0].commands
    assert train[train.index("--model_size") + 1] == "micro" and train[train.index("--num_beams") + 1] == "5"
    assert train[train.index("--lr_scheduler_type") + 1] == "inverse_sqrt" and "--do_predict" in train
    assert greedy[greedy.index("--num_beams") + 1] == "1" and "--do_train" not in greedy


def test_a_run_cut_off_resumes_from_its_last_complete_checkpoint(tmp_path):
    sweep = load_script("translation_sweep")
    args = sweep.parse_args(["--data_dir", "d", "--output_dir", str(tmp_path), "--seeds", "1", "--arms", "none"])
    [run] = sweep.study_runs(args)
    train, greedy = run.commands
    assert "--overwrite_output_dir" in train and "--resume_from_checkpoint" not in train
    assert train[train.index("--save_strategy") + 1] == "epoch" and "--overwrite_output_dir" in greedy
    for step, complete in ((100, True), (200, False)):
        (run.folder / f"checkpoint-{step}").mkdir(parents=True)
        if complete:
            (run.folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    [run] = sweep.study_runs(args)
    train = run.commands[0]
    assert "--overwrite_output_dir" not in train
    assert train[train.index("--resume_from_checkpoint") + 1] == str(run.folder / "checkpoint-100")


def test_the_tables_give_the_primary_metric_relative_to_the_twin_and_the_runs_per_commit():
    def record(variant, seed, cross_entropy, commit, started, minutes):
        received = {"commit": commit, "started": started}
        return {"model_size": "micro", "epochs": 5, "variant": variant, "seed": seed, "gates": None,
                "test_cross_entropy": cross_entropy, "seconds_per_step": minutes * 60 / 100,
                "wall_seconds": minutes * 60, "received": received}  # fmt: skip

    first, second = "a" * 40, "b" * 40 + "+changes"
    records = [
        record("none", 1, 2.0, first, "2026-11-25T23:00:00+0000", 60),
        record("none", 2, 2.0, second, "2026-11-26T01:00:00+0000", 30),
        record("deep", 1, 2.02, first, "2026-11-25T23:00:00+0000", 66),
        record("deep", 2, 2.04, second, "2026-11-26T01:00:00+0000", 33),
    ]
    table = tables(records)
    assert "lower is better): as % of the twin's mean" in table
    detectable = 100 * detectable_difference([0.02, 0.04]) / 2.0
    assert f"| deep | +1.50% | {detectable:.2f}% |" in table
    assert "| aaaaaaa | 2026-11-25 | 2 | 60.0-66.0 | 36.000-39.600 | 2.1 |" in table
    assert "| bbbbbbb+changes | 2026-11-26 | 2 | 30.0-33.0 | 18.000-19.800 | 1.1 |" in table

    # A run resumed from a checkpoint: its process's time covers only the part after the resume, the part before
    # was not kept, so the record says so and the tables' times leave it out rather than count it short.
    resumes = [{"started": "2026-11-26T02:00:00+0000", "checkpoint": "/runs/none/seed3/checkpoint-60"}]
    received = {"commit": second, "started": "2026-11-26T01:00:00+0000", "resumes": resumes}
    timed = run_time(received, 100, 600.0)
    assert timed["train_runtime"] is None and timed["seconds_per_step"] is None and timed["steps"] == 100
    resumed = with_wall_time({**record("none", 3, 2.0, second, "", 0), **timed, "received": received}, 700)
    first_part, last_part = resumed["resumed"]["segments"]
    assert (first_part["first_step"], first_part["last_step"], first_part["train_seconds"]) == (0, 60, None)
    assert (last_part["first_step"], last_part["last_step"], last_part["train_seconds"]) == (60, 100, 600.0)
    assert last_part["wall_seconds"] == 700 and resumed["wall_seconds"] is None
    table = tables([*records, resumed])
    assert "| bbbbbbb+changes | 2026-11-26 | 3 (1 resumed) | 30.0-33.0 | 18.000-19.800 | 1.1 |" in table
    assert "1 run resumed from a checkpoint kept no time of the part before the resume" in table
    assert "read different data" not in table  # none recorded its data
    # Its checkpoint kept the time spent up to it (run_start.RunClock): the run is timed whole.
    resumes[0]["before"] = {"train_seconds": 500.0, "wall_seconds": 550.0}
    timed = run_time(received, 100, 600.0)
    assert (timed["train_runtime"], timed["seconds_per_step"]) == (1100.0, 11.0)
    resumed = with_wall_time({**record("none", 3, 2.0, second, "", 0), **timed, "received": received}, 700)
    assert [part["wall_seconds"] for part in resumed["resumed"]["segments"]] == [550.0, 700]
    assert resumed["wall_seconds"] == 1250 and "time" not in resumed["resumed"]
    assert "| bbbbbbb+changes | 2026-11-26 | 3 | 20.8-33.0 | 11.000-19.800 | 1.4 |" in tables([*records, resumed])


def test_the_tables_say_when_the_arms_read_different_data(tmp_path):
    (tmp_path / "train.en").write_text("a cat\n")
    (tmp_path / "train.de").write_text("eine Katze\n")
    data = data_fingerprint([tmp_path / "train.en", tmp_path / "train.de"])
    assert set(data["files"]) == {"train.en", "train.de"}
    (tmp_path / "train.de").write_text("ein Hund\n")
    other = data_fingerprint([tmp_path / "train.de", tmp_path / "train.en"])
    assert other["files"]["train.en"] == data["files"]["train.en"] and other["sha256"] != data["sha256"]

    def record(variant, seed, data):
        return {"model_size": "micro", "epochs": 5, "variant": variant, "seed": seed, "gates": None,
                "test_cross_entropy": 2.0 + seed / 100, "seconds_per_step": 1.0, "wall_seconds": 60,
                "data": data}  # fmt: skip

    same = [record(variant, seed, data) for variant in ("none", "deep") for seed in (1, 2)]
    assert "read different data" not in tables(same)
    table = tables([*same[:3], record("deep", 2, other)])
    head = "**The runs read different data** (sha256 of the data files, first 12 digits)"
    assert f"{head}: `none` {data['sha256'][:12]};" in table
    assert f"`deep` {', '.join(sorted([data['sha256'][:12], other['sha256'][:12]]))}." in table


def test_the_primary_metric_is_paired_between_the_arms_other_than_the_twin():
    """Each arm but the twin against each arm before it, over the seeds both ran: the context-driven output gate
    against the token-only one is the output-gate study's second question. A pair with one shared seed has no
    interval and no row."""

    def record(variant, seed, cross_entropy):
        return {"model_size": "micro", "epochs": 5, "variant": variant, "seed": seed, "gates": None,
                "test_cross_entropy": cross_entropy, "seconds_per_step": 1.0, "wall_seconds": 60}  # fmt: skip

    token, context, lone = "none:output_gate=elementwise", "global:output_gate=elementwise", "deep"
    scores = {"none": [2.0, 2.1, 2.2], token: [2.01, 2.12, 2.2], context: [2.0, 2.09, 2.18], lone: [2.3]}
    records = [record(arm, seed, score) for arm, seeds in scores.items() for seed, score in enumerate(seeds, 1)]
    table = tables(records)
    section = table.split("lower is better): between the arms")[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith(f"| {context} ")]
    assert len(rows) == 1 and rows[0].startswith(f"| {context} | {token} | -0.020 ± 0.010 | ")
    detectable = detectable_difference([-0.01, -0.03, -0.02])
    assert rows[0].endswith(f" | 3/3 (p=0.25) | no | {detectable:.3f} |")
    assert f"| {lone} |" not in section
