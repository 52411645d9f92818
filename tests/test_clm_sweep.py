"""scripts/clm_sweep.py at a tiny size: the text cut in order at blank lines and a tokenizer trained on its training
part, once, into the data folder every run reads; every arm and seed trained with run_clm.py, its record
(cross-entropies, greedy sample, time per step, the sha256 of the parts and tokenizer, what the run received) in the
results file, and the paired tables with each arm's verdict by docs/CAUSAL.md's rule."""

import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, load_script

from casan_hf.studies.causal import prepare_data, rule_verdict, split_at_blank_lines, tables


SWEEP = REPO_ROOT / "scripts" / "clm_sweep.py"
TINY = ["--max_steps", "2", "--vocab_size", "300", "--block_size", "16", "--batch_size", "4", "--save_steps", "1",
        "--sample_max_new_tokens", "4", "--hidden_size", "16", "--num_hidden_layers", "2", "--num_attention_heads",
        "2", "--intermediate_size", "32"]  # fmt: skip
ARM = "global:gate_per_head,gate_bias_init=0"
ARM_NAME = "global:gate_bias_init=0.0,gate_per_head=true"  # the options sorted, their values as JSON


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """Blocks of dialogue separated by blank lines, each a speaker and two lines."""
    speakers = ["ROMEO", "JULIET", "NURSE", "FRIAR", "TYBALT"]
    words = "night light window breaks rose name sweet sorrow parting fair sun moon".split()
    blocks = [
        f"{speakers[i % 5]}:\n{' '.join(words[(i + j) % 12] for j in range(8))}\n{' '.join(words[(3 * i) % 12 :])}\n"
        for i in range(120)
    ]
    path = tmp_path_factory.mktemp("text") / "input.txt"
    path.write_text("\n".join(blocks))
    return path


def test_the_text_is_cut_in_order_at_blank_lines_and_the_data_folder_is_written_once(text_file, tmp_path):
    text = text_file.read_text()
    parts = split_at_blank_lines(text, (0.8, 0.1, 0.1))
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")  # every block, in order
    assert all(part.endswith("\n") and not part.startswith("\n") for part in parts)
    assert 0.75 < len(parts[0]) / len(text) <= 0.8
    paths = prepare_data(text_file, tmp_path / "data", (0.8, 0.1, 0.1), 300, 16)
    assert [open(paths[split]).read() for split in ("train", "validation", "test")] == parts
    assert prepare_data(text_file, tmp_path / "data", (0.8, 0.1, 0.1), 300, 16) == paths  # there already, as it is
    with pytest.raises(ValueError, match="is not the train part this study cuts"):
        prepare_data(text_file, tmp_path / "data", (0.7, 0.2, 0.1), 300, 16)
    with pytest.raises(ValueError, match="is not the tokenizer this study trains"):
        prepare_data(text_file, tmp_path / "data", (0.8, 0.1, 0.1), 290, 16)
    with pytest.raises(ValueError, match="must be positive and sum to 1"):
        split_at_blank_lines(text, (0.9, 0.2))


def test_the_sweep_trains_every_arm_and_seed_and_tables_the_rule(text_file, tmp_path, capsys):
    results = tmp_path / "results" / "clm.json"
    command = [sys.executable, str(SWEEP), "--text_file", str(text_file), "--output_dir", str(tmp_path / "runs"),
               "--results", str(results), "--arms", "none", ARM, "--seeds", "1", "2", "--parallel", "2",
               "--shares", "0.8", "0.1", "0.1", *TINY]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 runs: 0 finished before, 4 to run, 2 at a time" in done.stdout
    records = json.loads(results.read_text())
    assert sorted((r["variant"], r["seed"]) for r in records) == [(ARM_NAME, 1), (ARM_NAME, 2),
                                                                  ("none", 1), ("none", 2)]  # fmt: skip
    for record in records:
        assert record["steps"] == 2 and record["seconds_per_step"] > 0 and record["max_steps"] == 2
        assert record["test_cross_entropy"] > 0 and record["validation_cross_entropy"] > 0
        assert record["sample"]["prompt"] == "ROMEO:\n" and record["sample"]["max_new_tokens"] == 4
        assert sorted(record["data"]["files"]) == ["test.txt", "tokenizer.json", "train.txt", "validation.txt"]
        options = record["context_options"]
        assert options["context_type"] == record["variant"].partition(":")[0]
        assert (options["gate_per_head"], options["gate_bias_init"]) == (
            (False, -4.0) if record["variant"] == "none" else (True, 0.0)
        )
        assert record["received"]["settings"]["hidden_size"] == 16  # the extra flags come last and win
    assert len({record["data"]["sha256"] for record in records}) == 1
    table = results.with_suffix(".md").read_text()
    assert "### micro, 2 steps: test cross-entropy per token (nats; lower is better)" in table
    assert f"| micro | 2 | {ARM_NAME} | " in table and "/2 (p=" in table
    assert f"### By the rule (docs/CAUSAL.md)\n\n- `{ARM_NAME}`: " in table
    assert "### Greedy samples (micro, 2 steps)\n\n`none`, seed 1:\n\n```text\nROMEO:\n" in table

    sweep = load_script("clm_sweep")  # started again here: nothing to run, or other settings refused
    sweep.main(command[2:])
    assert "4 runs: 4 finished before, 0 to run" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="learning_rate 0.001 there, 0.0003 here"):
        sweep.main([*command[2:], "--learning_rate", "3e-4"])


def test_runs_go_seed_by_seed_and_a_run_cut_off_resumes_from_its_last_complete_checkpoint(tmp_path):
    sweep = load_script("clm_sweep")
    args = sweep.parse_args(["--text_file", "t", "--output_dir", str(tmp_path), "--seeds", "1", "2", "--arms",
                             "none", ARM])  # fmt: skip
    runs = sweep.study_runs(args)
    assert [(run.identity["seed"], run.identity["variant"]) for run in runs] == [
        (1, "none"), (1, ARM_NAME), (2, "none"), (2, ARM_NAME)]  # fmt: skip
    [train] = runs[0].commands
    assert train[train.index("--hidden_size") + 1] == "128" and train[train.index("--max_steps") + 1] == "1500"
    assert train[train.index("--tokenizer_name") + 1] == str(tmp_path / "data" / "tokenizer")
    assert "--overwrite_output_dir" in train and "--resume_from_checkpoint" not in train
    (runs[0].folder / "checkpoint-250").mkdir(parents=True)
    (runs[0].folder / "checkpoint-250" / "trainer_state.json").write_text("{}")
    [train] = sweep.study_runs(args)[0].commands
    assert train[train.index("--resume_from_checkpoint") + 1] == str(runs[0].folder / "checkpoint-250")


def record(variant, seed, test, validation):
    return {"model_size": "micro", "max_steps": 1500, "variant": variant, "seed": seed, "test_cross_entropy": test,
            "validation_cross_entropy": validation, "sample": {"prompt": "A", "continuation": f"{variant}{seed}"},
            "seconds_per_step": 1.0, "wall_seconds": 1500,
            "received": {"commit": "a" * 40, "started": "2026-12-02"}}  # fmt: skip


@pytest.mark.parametrize(
    "differences, validation, verdict",
    [([-0.02, -0.03, -0.025], -0.01, "pays"), ([-0.02, -0.03, -0.025], 0.01, "level"),
     ([0.02, 0.03, 0.025], 0.01, "worse"), ([0.02, -0.03, 0.01], -0.01, "level")],
)  # fmt: skip
def test_the_rule_reads_the_test_interval_and_the_validation_mean(differences, validation, verdict):
    sweep = load_script("clm_sweep")
    records = []
    for seed, difference in enumerate(differences, start=1):
        records += [record("none", seed, 3.0, 3.1), record("global", seed, 3.0 + difference, 3.1 + validation)]
    scored = sweep.comparisons(records)
    assert rule_verdict(scored, ["micro", "1500", "global"]) == verdict
    assert f"- `global`: {verdict}" in tables(records)


def test_the_budget_is_the_step_of_the_twin_s_lowest_validation_cross_entropy(tmp_path, capsys):
    """scripts/clm_budget.py on a finished run that evaluated every 50 steps: the curve, the step of its lowest point
    and what the run received go into the JSON file; a run stopped early counts from its last complete checkpoint once
    four evaluations in a row lie above its lowest; a run stopped sooner, one that logged no evaluation and an
    existing file are refused in one line."""
    run = tmp_path / "run"
    run.mkdir()
    losses = {50: 5.0, 100: 4.4, 150: 4.2, 200: 4.3, 250: 4.3, 300: 4.4, 350: 4.5}
    history = [{"step": step, "eval_loss": loss} for step, loss in losses.items()] + [{"step": 350, "loss": 3.9}]
    state = {"global_step": 350, "max_steps": 350, "log_history": history}
    (run / "trainer_state.json").write_text(json.dumps(state))
    (run / "run_start.json").write_text(json.dumps({"argv": ["run_clm.py"], "commit": "abc"}))
    script = load_script("clm_budget")

    def refusal(name):
        """What the script says as it stops: a usage error on stderr, or its `sys.exit` message."""
        with pytest.raises(SystemExit) as stopped:
            script.main(["--run_dir", str(run), "--out", str(tmp_path / name)])
        return f"{capsys.readouterr().err}{stopped.value.code}"

    script.main(["--run_dir", str(run), "--out", str(tmp_path / "budget.json")])
    chosen = json.loads((tmp_path / "budget.json").read_text())
    assert chosen["lowest"] == {"step": 150, "validation_cross_entropy": 4.2} and chosen["max_steps"] == 350
    assert [point["step"] for point in chosen["curve"]] == list(losses)
    assert chosen["received"]["commit"] == "abc" and "at step 150 of 350" in capsys.readouterr().out
    assert "exists: give another file" in refusal("budget.json")
    (run / "trainer_state.json").unlink()  # stopped: read from the last complete checkpoint
    checkpoint = run / "checkpoint-350"
    checkpoint.mkdir()
    (checkpoint / "rng_state_0.pth").write_bytes(b"")
    (checkpoint / "trainer_state.json").write_text(json.dumps({**state, "max_steps": 1500}))
    script.main(["--run_dir", str(run), "--out", str(tmp_path / "stopped.json")])
    assert json.loads((tmp_path / "stopped.json").read_text())["steps"] == 350
    (checkpoint / "trainer_state.json").write_text(
        json.dumps({**state, "max_steps": 1500, "log_history": history[:6]})
    )
    assert "with 3 evaluations past its lowest, not 4: let it run on" in refusal("soon.json")
    (checkpoint / "trainer_state.json").write_text(json.dumps({**state, "log_history": history[-1:]}))
    assert "logged no evaluation during training" in refusal("none.json")
