"""scripts/run_glue.py end to end on small slices of the real GLUE files (and synthetic MNLI): training,
evaluation, the Hub folder and its model card, a fresh-process `trust_remote_code` load, two processes under
torchrun and accelerate, resuming, pushing (up to the upload) and every bad input."""

import re
import shutil
import sys

import pytest
import torch
from conftest import HUB_MODEL_FILES, load_script
from fresh_process import run_without_casan_hf
from glue_helpers import (
    TINY_RUN,
    card_metadata,
    make_tiny_bert,
    read_json,
    run_glue,
    tiny_run_args,
    write_synthetic_glue,
)
from hub_server import record_uploads
from tiny_models import OUTPUT_TOLERANCE
from transformers import AutoTokenizer

from casan_hf import CasanForSequenceClassification
from casan_hf.hub.checks import upload_files


HUB_FILES = HUB_MODEL_FILES | {
    "configuration_casan.py",
    "modeling_casan.py",
    "training_args.bin",
    "eval_results.json",
    "all_results.json",
}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


@pytest.fixture(scope="module")
def run_glue_module():
    return load_script("run_glue")


@pytest.fixture
def run_in_process(run_glue_module, monkeypatch):
    """Runs run_glue's main() in this process (no start-up cost) with the given command line."""

    def run(args):
        monkeypatch.setattr(sys, "argv", ["run_glue.py", *map(str, args)])
        run_glue_module.main()

    return run


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory, tiny_bert, glue_dir):
    """The main command, as a user types it: convert BERT to CASAN, train 3 steps on MRPC, evaluate."""
    output_dir = tmp_path_factory.mktemp("runs") / "mrpc-deep_global"
    result = run_glue(
        ["--model_name_or_path", tiny_bert, "--context_type", "deep_global", "--task_name", "mrpc",
         "--glue_dir", glue_dir, "--do_train", "--do_eval", "--max_steps", "3", "--output_dir", output_dir,
         "--base_model", "sentence-transformers/all-MiniLM-L6-v2", *TINY_RUN],
        cwd=output_dir.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


def test_output_folder_is_the_hub_folder(mrpc_run):
    output_dir, result = mrpc_run
    assert HUB_FILES <= {path.name for path in output_dir.iterdir()}
    config = read_json(output_dir / "config.json")
    assert config["model_type"] == "casan_bert" and config["context_type"] == "deep_global"
    assert config["auto_map"]["AutoModelForSequenceClassification"] == "modeling_casan.CasanForSequenceClassification"
    assert config["id2label"] == {"0": "not_equivalent", "1": "equivalent"}
    assert read_json(output_dir / "trainer_state.json")["global_step"] == 3
    assert "'loss'" in result.stdout + result.stderr  # Trainer's own logging of the training loss
    # Memory is pinned only for an accelerator: a CPU run has no torch warning about it (cli.launch).
    assert "'pin_memory' argument is set as true" not in result.stdout + result.stderr


def test_metrics_file_and_model_card(mrpc_run):
    output_dir, _ = mrpc_run
    scores = read_json(output_dir / "eval_results.json")
    assert {"eval_accuracy", "eval_f1", "eval_loss", "eval_samples"} <= set(scores) and scores["eval_samples"] == 16
    assert read_json(output_dir / "all_results.json")["eval_accuracy"] == scores["eval_accuracy"]
    meta = card_metadata(output_dir)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert {"casan", "casan-deep_global", "glue", "mrpc"} <= set(meta["tags"])
    assert meta["datasets"] == ["nyu-mll/glue"] and meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    # 16 of MRPC's 408 dev examples: the card says so, and the model-index holds no score of the split.
    card = (output_dir / "README.md").read_text()
    assert "validation: the first 16 of its 408 examples only" in card
    assert "model-index" not in meta and f"| validation | Accuracy | {scores['eval_accuracy']:.4f} |" in card
    assert 'AutoModelForSequenceClassification.from_pretrained("mrpc-deep_global", trust_remote_code=True)' in card
    assert 'AutoTokenizer.from_pretrained("mrpc-deep_global", trust_remote_code=True)' in card


def test_fresh_process_without_casan_hf_loads_the_output(mrpc_run, tmp_path):
    output_dir, _ = mrpc_run
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    inputs = tokenizer(["a fine film", "not at all"], ["it was good", "dull"], padding=True, return_tensors="pt")
    expected = CasanForSequenceClassification.from_pretrained(output_dir).eval()(**inputs).logits
    out = run_without_casan_hf(
        f"""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained({str(output_dir)!r}, trust_remote_code=True)
        model = AutoModelForSequenceClassification.from_pretrained({str(output_dir)!r}, trust_remote_code=True).eval()
        assert type(model).__name__ == "CasanForSequenceClassification", type(model)
        inputs = tokenizer(["a fine film", "not at all"], ["it was good", "dull"], padding=True, return_tensors="pt")
        with torch.no_grad():
            print(model(**inputs).logits.tolist())
        """,
        tmp_path,
    )
    torch.testing.assert_close(torch.tensor(eval(out.strip().splitlines()[-1])), expected.detach(), **OUTPUT_TOLERANCE)


def test_casan_checkpoint_is_continued_and_keeps_its_context(mrpc_run, run_in_process, tmp_path, glue_dir):
    output_dir, _ = mrpc_run
    run_in_process(tiny_run_args(output_dir, "mrpc", glue_dir, tmp_path / "eval", "--do_eval"))
    assert (
        read_json(tmp_path / "eval" / "eval_results.json")["eval_accuracy"]
        == read_json(output_dir / "eval_results.json")["eval_accuracy"]
    )
    with pytest.raises(
        SystemExit, match="trained with context_type='deep_global'; it cannot be loaded with context_type='global'"
    ):
        run_in_process(
            tiny_run_args(output_dir, "mrpc", glue_dir, tmp_path / "other", "--context_type", "global", "--do_eval")
        )


def test_baseline_is_plain_bert_with_the_same_settings(tiny_bert, run_in_process, tmp_path, glue_dir):
    output_dir = tmp_path / "baseline"
    train = ("--do_train", "--do_eval", "--max_steps", "1")
    run_in_process(tiny_run_args(tiny_bert, "rte", glue_dir, output_dir, "--baseline", *train))
    config = read_json(output_dir / "config.json")
    assert (
        config["model_type"] == "bert"
        and config["architectures"] == ["BertForSequenceClassification"]
        and "auto_map" not in config
    )
    meta = card_metadata(output_dir)
    assert "casan-baseline" in meta["tags"] and "casan" not in meta["tags"]
    assert "eval_accuracy" in read_json(output_dir / "eval_results.json")
    with pytest.raises(
        SystemExit, match=r"--baseline fine-tunes the plain source model; drop the context options \['context_type'\]"
    ):
        run_in_process(
            tiny_run_args(
                tiny_bert, "rte", glue_dir, tmp_path / "b2", "--baseline", "--context_type", "deep", "--do_eval"
            )
        )


def test_mnli_evaluates_matched_and_mismatched(tiny_bert, run_in_process, tmp_path):
    glue = write_synthetic_glue(tmp_path / "glue")
    output_dir = tmp_path / "mnli"
    train = ("--do_train", "--do_eval", "--max_steps", "1")
    run_in_process(tiny_run_args(tiny_bert, "mnli", glue, output_dir, "--context_type", "global", *train))
    scores = read_json(output_dir / "eval_results.json")
    assert {"eval_accuracy", "eval_accuracy_mm"} <= set(scores) and (
        scores["eval_samples"],
        scores["eval_samples_mm"],
    ) == (4, 3)
    # Each dev set whole: its scores are the split's, in the model-index.
    splits = [result["dataset"]["split"] for result in card_metadata(output_dir)["model-index"][0]["results"]]
    assert splits == ["validation_matched", "validation_mismatched"]
    card = (output_dir / "README.md").read_text()
    assert "validation_matched: all 4 examples. validation_mismatched: all 3 examples." in card


def test_resume_continues_from_the_last_checkpoint(tiny_bert, tmp_path, glue_dir):
    output_dir = tmp_path / "resume"
    common = [
        "--model_name_or_path",
        tiny_bert,
        "--context_type",
        "global",
        "--task_name",
        "sst2",
        "--glue_dir",
        glue_dir,
        "--do_train",
        "--output_dir",
        output_dir,
        "--save_steps",
        "2",
        *TINY_RUN,
    ]
    first = run_glue([*common, "--max_steps", "2"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (output_dir / "checkpoint-2").is_dir()
    # The interrupted run is picked up without --overwrite_output_dir: the last checkpoint is found and continued.
    second = run_glue([*common, "--max_steps", "4"], cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stdout + second.stderr
    assert f"Resuming from {output_dir / 'checkpoint-2'} (step 2 of 4); to train from the start instead, pass " in log
    state = read_json(output_dir / "trainer_state.json")
    assert state["global_step"] == 4 and [entry["step"] for entry in state["log_history"] if "loss" in entry] == [
        1,
        2,
        3,
        4,
    ]
    assert [resume["checkpoint"] for resume in read_json(output_dir / "run_start.json")["resumes"]] == [
        str(output_dir / "checkpoint-2")
    ]
    # The same command again: the run is finished, it says so and leaves every file as it was.
    snapshot = {path: path.stat().st_mtime_ns for path in output_dir.rglob("*")}
    third = run_glue([*common, "--max_steps", "4"], cwd=tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"{output_dir} holds this run, finished at step 4: nothing is left to do." in third.stdout
    assert {path: path.stat().st_mtime_ns for path in output_dir.rglob("*")} == snapshot


# accelerate's --cpu launcher runs one process (several need MPI); --multi_gpu is its torch.distributed launcher,
# which on a machine without GPUs starts CPU processes that Trainer joins with gloo.
DISTRIBUTED_LAUNCHERS = {
    "torchrun": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29561"],
    "accelerate": [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "29562",
    ],
}


# Each launcher's run: its context kind, and its flags beside the tiny run's. torchrun's has no --ddp_backend: on a
# machine without GPUs run_glue joins the CPU processes with gloo itself.
LAUNCHED_RUNS = {
    "torchrun": ("global", []),
    "accelerate": ("deep", ["--do_eval", "--ddp_backend", "gloo"]),
}


@pytest.mark.parametrize("launcher", DISTRIBUTED_LAUNCHERS)
def test_two_processes(launcher, tiny_bert, tmp_path, glue_dir):
    """Two CPU processes make one gloo group of two ranks, of which one writes: 16 examples, 8 per device, are one
    step per epoch (one process would take two)."""
    output_dir = tmp_path / launcher
    context_type, flags = LAUNCHED_RUNS[launcher]
    result = run_glue(
        ["--model_name_or_path", tiny_bert, "--context_type", context_type, "--task_name", "rte", "--glue_dir",
         glue_dir, "--do_train", "--num_train_epochs", "2", "--output_dir", output_dir, *flags, *TINY_RUN],
        cwd=tmp_path,
        launcher=DISTRIBUTED_LAUNCHERS[launcher],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_json(output_dir / "trainer_state.json")["global_step"] == 2
    ranks = [line for line in (result.stdout + result.stderr).splitlines() if "Process rank:" in line]
    assert len(ranks) == 2 and any("rank: 0 of world size 2" in line for line in ranks)
    assert any("rank: 1 of world size 2" in line for line in ranks)  # one rank 0: one process writes
    if "--do_eval" in flags:
        assert read_json(output_dir / "eval_results.json")["eval_samples"] == 16
    assert "| world_size | `2` |" in (output_dir / "README.md").read_text()


def test_one_process_for_several_cpu_processes_is_refused(tiny_bert, tmp_path, glue_dir):
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip
    result = run_glue(
        ["--model_name_or_path", tiny_bert, "--task_name", "rte", "--glue_dir", glue_dir, "--do_train",
         "--output_dir", tmp_path / "out", *TINY_RUN],
        cwd=tmp_path,
        launcher=launcher,
    )  # fmt: skip
    assert result.returncode != 0
    assert "`accelerate launch --cpu --num_processes N` started one process" in result.stderr
    assert not (tmp_path / "out").exists()


def test_run_glue_logs_the_gates_and_writes_them_on_the_card(mrpc_run):
    output_dir, _ = mrpc_run
    history = read_json(output_dir / "trainer_state.json")["log_history"]
    logged = [entry for entry in history if "gates/layer_0/query" in entry]
    assert logged and all(f"gates/layer_1/{t}" in logged[-1] for t in ("query", "key"))
    card = (output_dir / "README.md").read_text()
    assert "| layer | mean lambda_Q | mean lambda_K |" in card


def test_context_learning_rate_trains_and_is_refused_without_context(tiny_bert, run_in_process, tmp_path, glue_dir):
    common = ["--model_name_or_path", tiny_bert, "--task_name", "rte", "--glue_dir", glue_dir, "--do_train",
              "--max_steps", "1", "--context_learning_rate", "1e-3", *TINY_RUN]  # fmt: skip
    run_in_process([*common, "--context_type", "global", "--output_dir", tmp_path / "lr"])
    assert "| context_learning_rate | `0.001` |" in (tmp_path / "lr" / "README.md").read_text()
    for flags in (["--baseline"], ["--context_type", "none"]):
        with pytest.raises(SystemExit, match="--context_learning_rate needs a CASAN model with context"):
            run_in_process([*common, *flags, "--output_dir", tmp_path / "refused"])
        assert not (tmp_path / "refused").exists()


def test_push_to_hub_uploads_the_output_folder(tiny_bert, run_in_process, tmp_path, glue_dir, monkeypatch, caplog):
    """--push_to_hub: the folder checked (`casan_hf.hub.push`) and uploaded in one commit, less `_*`,
    `checkpoint-*` and `training_args.bin`; its card's scores are its results files'. From a local checkpoint
    without --base_model, whose card could name no Hub id, the run stops before it trains."""
    hub = record_uploads(monkeypatch)
    output_dir = tmp_path / "push"
    command = ["--model_name_or_path", tiny_bert, "--context_type", "global", "--task_name", "rte", "--glue_dir",
               glue_dir, "--do_train", "--do_eval", "--max_steps", "1", "--save_strategy", "no", "--push_to_hub",
               "--hub_model_id", "someone/casan-rte", "--output_dir", output_dir, *TINY_RUN]  # fmt: skip
    with pytest.raises(ValueError, match=f"--push_to_hub: .* and '{tiny_bert}' is a local folder; pass --base_model"):
        run_in_process(command)
    assert not (output_dir / "config.json").exists() and not hub.uploads
    bare = [{"someone/casan-rte": "casan-rte"}.get(value, value) for value in command]  # no owner
    bare += ["--base_model", "someone/tiny-bert"]
    with pytest.raises(ValueError, match="--push_to_hub: pass --hub_model_id you/name; 'casan-rte': not a repository"):
        run_in_process(bare)
    assert not (output_dir / "config.json").exists() and not hub.uploads
    run_in_process([*command, "--base_model", "someone/tiny-bert"])
    (upload,) = hub.uploads
    assert upload["repo_id"] == "someone/casan-rte" and upload["revision"] is None
    assert HUB_FILES - {"training_args.bin"} <= set(upload["files"]) and upload["files"] == upload_files(output_dir)
    assert "training_args.bin" not in upload["files"]  # Trainer's private pickle stays on the machine
    assert upload["card"] == (output_dir / "README.md").read_text()
    meta = card_metadata(output_dir)
    assert "casan-global" in meta["tags"]
    # 16 of RTE's 277 dev examples: no dev score is published, and the push says so.
    assert "model-index" not in meta and "validation: the first 16 of its 277 examples only" in upload["card"]
    assert "--push_to_hub: validation was scored on its first 16 examples only" in caplog.text
    assert 'from_pretrained("someone/casan-rte", trust_remote_code=True)' in upload["card"]


def test_a_baseline_run_pushes_with_a_true_card(tiny_bert, run_in_process, tmp_path, glue_dir, monkeypatch):
    """--baseline --push_to_hub: plain BERT, no auto_map and no code files, goes through the same checks but the
    remote-code ones, with the card that says no remote code is needed."""
    hub = record_uploads(monkeypatch)
    output_dir = tmp_path / "baseline-push"
    flags = ["--baseline", "--do_train", "--do_eval", "--max_steps", "1", "--save_strategy", "no", "--push_to_hub",
             "--hub_model_id", "someone/bert-rte", "--base_model", "someone/tiny-bert"]  # fmt: skip
    run_in_process(tiny_run_args(tiny_bert, "rte", glue_dir, output_dir, *flags))
    (upload,) = hub.uploads
    assert upload["repo_id"] == "someone/bert-rte" and not [name for name in upload["files"] if name.endswith(".py")]
    assert "A plain BERT checkpoint: no remote code is needed." in upload["card"]


def bad_input_cases(glue_dir, tmp_path):
    no_label = tmp_path / "no_label.csv"
    no_label.write_text("sentence1,sentence2,label\na,b,entailment\n")
    bad_columns = tmp_path / "bad_columns.csv"
    bad_columns.write_text("premise,hypothesis,label\na,b,entailment\n")
    bad_labels = tmp_path / "bad_labels.csv"
    bad_labels.write_text("sentence1,sentence2,label\na,b,entailment\nc,d,contradiction\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    tabs = tmp_path / "tabs.csv"
    tabs.write_text("sentence1\tsentence2\tlabel\na, b\tc\tentailment\n")
    return {
        "empty file": (
            ["--task_name", "rte", "--train_file", empty, "--validation_file", no_label],
            "'.*empty.csv' is empty: write a header row",
        ),
        "tab-separated file named .csv": (
            ["--task_name", "rte", "--train_file", tabs, "--validation_file", no_label],
            "'.*tabs.csv' looks tab-separated, not comma-separated .*: rename it to .tsv",
        ),
        "missing data folder": (
            ["--task_name", "rte", "--glue_dir", tmp_path / "nowhere"],
            "GLUE data folder .*nowhere' does not exist",
        ),
        "missing task folder": (
            ["--task_name", "cola", "--glue_dir", glue_dir],
            "has no 'CoLA' folder for task 'cola'",
        ),
        "missing file": (
            ["--task_name", "rte", "--train_file", tmp_path / "gone.csv", "--validation_file", no_label],
            "train file .*gone.csv' does not exist",
        ),
        "file without the task's columns": (
            ["--task_name", "rte", "--train_file", bad_columns, "--validation_file", no_label],
            r"lacks the column\(s\) \['sentence1', 'sentence2'\] that task 'rte' needs",
        ),
        "labels outside the label set": (
            ["--task_name", "rte", "--train_file", bad_labels, "--validation_file", no_label],
            r"labels outside the label set: \['contradiction'\]; allowed: \['entailment', 'not_entailment'\]",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "empty file",
        "tab-separated file named .csv",
        "missing data folder",
        "missing task folder",
        "missing file",
        "file without the task's columns",
        "labels outside the label set",
        "non-empty output folder",
    ],
)
def test_bad_input_stops_before_training_and_overwrites_nothing(
    case, tiny_bert, run_in_process, tmp_path, glue_dir, capsys
):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "keep.txt").write_text("mine")
    if case == "non-empty output folder":
        data_args, message = (
            ["--task_name", "rte", "--glue_dir", glue_dir],
            "Output folder .*out' already exists and is not empty; pass --overwrite_output_dir",
        )
    else:
        data_args, message = bad_input_cases(glue_dir, tmp_path)[case]
        data_args = [*data_args, "--overwrite_output_dir"]
    with pytest.raises(SystemExit, match="^run_glue.py: error: .*" + message):
        run_in_process(
            [
                "--model_name_or_path",
                tiny_bert,
                *data_args,
                "--do_train",
                "--do_eval",
                "--output_dir",
                output_dir,
                *TINY_RUN,
            ]
        )
    assert [path.name for path in output_dir.iterdir()] == ["keep.txt"] and (
        output_dir / "keep.txt"
    ).read_text() == "mine"


def test_unknown_task_is_a_usage_error(tiny_bert, run_in_process, tmp_path, capsys):
    """In this process: argparse's usage error is the script's own, with no start-up cost to pay for it."""
    with pytest.raises(SystemExit) as exit:
        run_in_process(["--model_name_or_path", tiny_bert, "--task_name", "sst5", "--do_eval", "--output_dir",
                        tmp_path / "out"])  # fmt: skip
    assert exit.value.code == 2
    assert (
        "invalid choice: 'sst5' (choose from 'cola', 'sst2', 'mrpc', 'qqp', 'stsb', 'mnli', 'qnli', 'rte', 'wnli')"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


def test_non_empty_output_folder_is_a_usage_error(mrpc_run, tiny_bert, glue_dir, run_in_process):
    """In this process, as the unknown task: the script's own error line, exit 1, and the folder untouched."""
    output_dir, _ = mrpc_run
    snapshot = {path.name: path.stat().st_mtime_ns for path in output_dir.iterdir()}
    shutil.rmtree(output_dir / "checkpoint-3", ignore_errors=True)  # without checkpoints nothing can be resumed
    snapshot.pop("checkpoint-3", None)
    with pytest.raises(SystemExit) as exit:
        run_in_process(["--model_name_or_path", tiny_bert, "--task_name", "mrpc", "--glue_dir", glue_dir,
                        "--do_train", "--output_dir", output_dir, *TINY_RUN])  # fmt: skip
    # A SystemExit with a message: Python prints it as the last line of stderr and exits with 1.
    assert exit.value.code == (
        f"run_glue.py: error: Output folder {str(output_dir)!r} already exists and is not empty; "
        "pass --overwrite_output_dir to write into it anyway."
    )
    assert {path.name: path.stat().st_mtime_ns for path in output_dir.iterdir()} == snapshot


def test_own_files_without_a_task(tiny_bert, run_in_process, tmp_path):
    import json

    rows = [("a fine film", "pos"), ("dull and slow", "neg"), ("i liked it", "pos"), ("not at all", "neg")]
    for name in ("train.json", "dev.json"):
        (tmp_path / name).write_text("\n".join(json.dumps({"text": text, "label": label}) for text, label in rows))
    output_dir = tmp_path / "own"
    run_in_process(["--model_name_or_path", tiny_bert, "--context_type", "global",
                    "--train_file", tmp_path / "train.json", "--validation_file", tmp_path / "dev.json",
                    "--do_train", "--do_eval", "--max_steps", "1", "--output_dir", output_dir, *TINY_RUN])  # fmt: skip
    assert read_json(output_dir / "config.json")["id2label"] == {"0": "neg", "1": "pos"}
    assert read_json(output_dir / "eval_results.json")["eval_samples"] == 4
    (result,) = card_metadata(output_dir)["model-index"][0]["results"]
    assert result["dataset"]["name"] == "train.json, dev.json" and [m["type"] for m in result["metrics"]] == [
        "accuracy"
    ]


def test_padding_each_batch_gives_the_scores_of_padding_to_max_length(tmp_path, tiny_bert, glue_dir, run_in_process):
    """The study pads each batch to its longest input (`--pad_to_max_length false`): masked means and attention
    make the padding invisible, so training and evaluation give what padding to max_seq_length gives."""
    results = {}
    for pad in ("true", "false"):
        run_in_process(
            ["--model_name_or_path", tiny_bert, "--context_type", "deep_global", "--classifier_pooling", "mean",
             "--task_name", "mrpc", "--glue_dir", glue_dir, "--do_train", "--do_eval", "--max_steps", "3",
             "--learning_rate", "1e-3", "--max_seq_length", "64", "--pad_to_max_length", pad,
             "--max_train_samples", "24", "--max_eval_samples", "32", "--per_device_train_batch_size", "8",
             "--per_device_eval_batch_size", "16", "--report_to", "none", "--seed", "3",
             "--output_dir", tmp_path / pad]
        )  # fmt: skip
        results[pad] = read_json(tmp_path / pad / "all_results.json")
    assert results["true"]["eval_accuracy"] == results["false"]["eval_accuracy"]
    for name in ("train_loss", "eval_loss"):
        assert results["false"][name] == pytest.approx(results["true"][name], rel=1e-5, abs=1e-6)


PROGRESS_BAR = re.compile(r"\d+%\||\[\d+:\d\d, ")  # tqdm's bars, with a total and without one


def printed_lines(result):
    """The lines a run prints to its stdout and stderr, but its progress bars, which a terminal redraws in place."""
    text = result.stdout + result.stderr
    lines = [part.rstrip() for line in text.splitlines() for part in line.split("\r")]
    return [line for line in lines if line.strip() and not PROGRESS_BAR.search(line)]


def test_a_short_run_s_console_fits_on_a_screen(tiny_bert, glue_dir, tmp_path):
    """A 10-step run without --logging_steps: the conversion in one line, a summary of what will run, a loss line
    a step, the scores, and where they went; no argument dump, no config, no line twice, on a CI machine too."""
    output_dir = tmp_path / "console"
    result = run_glue(
        ["--model_name_or_path", tiny_bert, "--context_type", "global", "--task_name", "rte", "--glue_dir", glue_dir,
         "--do_train", "--do_eval", "--max_steps", "10", "--max_seq_length", "32", "--max_train_samples", "40",
         "--max_eval_samples", "16", "--per_device_train_batch_size", "4", "--report_to", "none",
         "--output_dir", output_dir],
        cwd=tmp_path,
        env={"CI": "true"},  # where transformers' loggers propagate to the root logger unless told not to
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = printed_lines(result)
    assert len(lines) <= 45, "\n".join(lines)
    text = "\n".join(lines)
    assert sum("Converted the bert checkpoint" in line for line in lines) == 1
    assert sum("LOAD REPORT" in line for line in lines) == 1  # the classifier transformers starts afresh, once
    assert "You are using a model of type" not in text and "context_mixer" not in text
    assert "Training/evaluation parameters" not in text and '"architectures"' not in text
    assert "  model     CasanForSequenceClassification, 'global' context" in text
    assert "  data      GLUE RTE from " in text and "train 40 of 2,490 examples, validation 16 of 277 examples" in text
    assert "  training  10 steps of 4 examples (1 epoch, 1 process on cpu)" in text and "loss every step" in text
    assert f"  output    {output_dir} (every argument: run_start.json)" in text
    assert sum(line.startswith("{'loss'") for line in lines) == 10
    done = f"run_glue.py: done; {output_dir} holds the model, its card (README.md), the scores (eval_results.json)"
    assert result.stdout.strip().splitlines()[-1].endswith(f"{done}, the full arguments (run_start.json).")
    assert len(lines) == len(set(lines)), [line for line in lines if lines.count(line) > 1]
    arguments = read_json(output_dir / "run_start.json")["arguments"]
    assert (
        arguments["TrainingArguments"]["max_steps"] == 10 and arguments["CasanArguments"]["context_type"] == "global"
    )


def test_a_bad_data_file_is_one_line_printed_once_before_any_model_loads(tmp_path):
    """An empty .csv: `run_glue.py: error:` once, naming the file and what to do; the checkpoint named does not
    even exist, so the data was checked first."""
    empty = tmp_path / "train.csv"
    empty.write_text("")
    result = run_glue(
        ["--model_name_or_path", tmp_path / "no-model-here", "--train_file", empty, "--validation_file", empty,
         "--do_train", "--output_dir", tmp_path / "out"],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    error = f"run_glue.py: error: {str(empty)!r} is empty: write a header row naming the columns"
    lines = printed_lines(result)
    assert lines[-1].startswith(error) and sum(str(empty) in line for line in lines) == 1, lines
