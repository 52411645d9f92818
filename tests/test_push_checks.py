"""What is checked before a folder goes up (`casan_hf.hub.push`, `scripts/push_to_hub.py`): a folder failing a check is
refused before anything is sent, the message naming the file or field; a folder whose code gives other outputs
without casan_hf than with it is refused by the fresh-process load; `--dry_run` lists exactly the files an upload
sends and sends nothing. tests/test_hub.py pushes to a Hub server and loads by repo id."""

import json
import shutil

import pytest
import torch
from conftest import load_script
from glue_helpers import make_tiny_bert

from casan_hf import casan_class
from casan_hf.hub import render_model_card
from casan_hf.hub.push import FolderCheckError, check_folder, upload_files


SOURCE = "someone/tiny-bert"


@pytest.fixture(scope="module")
def converted(tmp_path_factory, minilm_path):
    """A tiny BERT converted to a CASAN classifier by scripts/convert_bert_to_casan.py, naming its source's Hub id."""
    root = tmp_path_factory.mktemp("push")
    bert = make_tiny_bert(root / "bert", minilm_path)
    torch.manual_seed(0)
    load_script("convert_bert_to_casan").main(
        ["--model_name_or_path", bert, "--output_dir", str(root / "casan"), "--context_type", "deep_global",
         "--head", "sequence-classification", "--num_labels", "2", "--base_model", SOURCE, "--model_name", "you/x"]
    )  # fmt: skip
    return root / "casan"


def scored_card(folder, accuracy):
    """The folder's card as run_glue writes it after evaluation, with `accuracy` on the RTE dev set."""
    model = casan_class("bert", "sequence-classification").from_pretrained(folder)
    scores = {"validation": {"accuracy": accuracy}}
    return render_model_card(model, "you/x", base_model=SOURCE, task_name="rte", dataset_id="nyu-mll/glue",
                             eval_metrics=scores, training={"seed": 1})  # fmt: skip


def damage(folder, case, tmp_path):
    """Makes `folder` fail one check; returns what the refusal must name."""
    card = folder / "README.md"
    if case == "pickled weights":
        torch.save({}, folder / "pytorch_model.bin")
        return "pytorch_model.bin: weights go up in safetensors only"
    if case == "no safetensors":
        (folder / "model.safetensors").unlink()
        return "model.safetensors: the folder has no safetensors weights"
    if case == "no auto_map":
        config = json.loads((folder / "config.json").read_text())
        del config["auto_map"]
        (folder / "config.json").write_text(json.dumps(config))
        return "config.json: no auto_map"
    if case == "a code file missing":
        (folder / "context.py").unlink()
        return "context.py: missing"
    if case == "base_model a folder":
        card.write_text(card.read_text().replace(f"base_model: {SOURCE}", f"base_model: {tmp_path}"))
        return f"README.md: base_model '{tmp_path}' is not a Hub id"
    if case == "no base_model":
        card.write_text(card.read_text().replace(f"base_model: {SOURCE}\n", ""))
        return "README.md: no base_model"
    if case == "scores not the results file's":
        card.write_text(scored_card(folder, 0.625))
        (folder / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.6, "eval_loss": 0.7}))
        return "README.md: its scores {('validation', 'accuracy'): 0.625} are not those of the folder's results"
    if case == "scores without a results file":
        card.write_text(scored_card(folder, 0.625))
        return "results files (none: {})"
    if case == "a local path":
        (folder / "notes.txt").write_text(f"trained in {tmp_path}/runs\n")
        return f"notes.txt: names the local path '{tmp_path}/runs'"
    raise ValueError(case)


CASES = [
    "pickled weights",
    "no safetensors",
    "no auto_map",
    "a code file missing",
    "base_model a folder",
    "no base_model",
    "scores not the results file's",
    "scores without a results file",
    "a local path",
]


@pytest.mark.parametrize("case", CASES)
def test_a_folder_failing_a_check_is_refused_naming_the_file(converted, tmp_path, case):
    folder = tmp_path / "folder"
    shutil.copytree(converted, folder)
    named = damage(folder, case, tmp_path)
    with pytest.raises(FolderCheckError) as refused:
        check_folder(folder)
    assert named in str(refused.value)


def test_a_card_whose_scores_are_the_results_files_passes_its_check(converted, tmp_path):
    from casan_hf.hub.push import check_card, check_code

    folder = tmp_path / "folder"
    shutil.copytree(converted, folder)
    (folder / "README.md").write_text(scored_card(folder, 0.625))
    (folder / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.62500004, "eval_loss": 0.7}))
    files = upload_files(folder)
    check_card(folder, files, check_code(folder, files))


def test_code_that_gives_other_outputs_without_casan_hf_is_refused(converted, tmp_path):
    """The folder's own code runs in the fresh process; here it shifts the logits, which casan_hf's does not."""
    folder = tmp_path / "folder"
    shutil.copytree(converted, folder)
    with open(folder / "modeling_casan.py", "a") as handle:
        handle.write(
            "\n_forward = CasanForSequenceClassification.forward\n\n\n"
            "def _shifted(self, *args, **kwargs):\n"
            "    outputs = _forward(self, *args, **kwargs)\n"
            "    outputs.logits = outputs.logits + 1\n"
            "    return outputs\n\n\n"
            "CasanForSequenceClassification.forward = _shifted\n"
        )
    with pytest.raises(FolderCheckError, match="AutoModelForSequenceClassification loaded without casan_hf gives"):
        check_folder(folder)


def test_dry_run_lists_exactly_the_files_and_sends_nothing(converted, tmp_path, capsys, monkeypatch):
    import casan_hf.hub.push

    folder = tmp_path / "folder"
    shutil.copytree(converted, folder)
    for name in ("_private.txt", "checkpoint-1/model.safetensors", ".cache/huggingface/x", "run_start.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("{}")
    monkeypatch.setattr(casan_hf.hub.push, "HfApi", None)  # any use of the Hub API fails
    load_script("push_to_hub").main([str(folder), "--repo_id", "you/x", "--dry_run"])
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == "Would upload to you/x (main), in one commit:"
    assert (
        listed[1:]
        == upload_files(folder)
        == sorted(path.relative_to(converted).as_posix() for path in converted.rglob("*") if path.is_file())
    )
