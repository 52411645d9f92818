"""What is checked before a folder goes up (`casan_hf.hub.checks`, `scripts/push_to_hub.py`): a folder failing a
check is refused in one line before anything is sent or any repository created, the message naming the file or
field (one case per fault); what is left out of an upload, at any depth; a plain transformers folder (a `--baseline`
run) and a checked CASAN folder pass; `--dry_run` lists, line by line, what the commit adds, changes and deletes
against the branch, and sends nothing; a commit the Hub refuses leaves no repository the push created;
`--render_card` sends a converted folder's card rendered for the repository. tests/test_hub.py pushes to a Hub
server and loads by repo id."""

import bz2
import gzip
import json
import lzma
import os
import pickle
import re
import shutil
import zipfile

import numpy
import pytest
import torch
from conftest import load_script
from glue_helpers import make_tiny_bert
from hub_server import RecordingHubApi, record_uploads
from transformers import BertConfig, BertForSequenceClassification

from casan_hf import casan_class
from casan_hf.hub import render_model_card
from casan_hf.hub.checks import FolderCheckError, check_folder, results_scores, upload_files
from casan_hf.hub.push import push_folder
from casan_hf.hub.tasks import RESULTS_FILES, RESULTS_KEYS, results_suffix


SOURCE = "someone/tiny-bert"
REPO = "you/x"


@pytest.fixture(scope="module")
def converted(tmp_path_factory, minilm_path):
    """A tiny BERT converted to a CASAN classifier by scripts/convert_bert_to_casan.py, naming its source's Hub id."""
    root = tmp_path_factory.mktemp("push")
    bert = make_tiny_bert(root / "bert", minilm_path)
    torch.manual_seed(0)
    load_script("convert_bert_to_casan").main(
        ["--model_name_or_path", bert, "--output_dir", str(root / "casan"), "--context_type", "deep_global",
         "--head", "sequence-classification", "--num_labels", "2", "--base_model", SOURCE, "--model_name", REPO]
    )  # fmt: skip
    return root / "casan"


@pytest.fixture
def folder(converted, tmp_path):
    shutil.copytree(converted, tmp_path / "folder")
    return tmp_path / "folder"


def scored_card(folder, accuracy, model_name=REPO):
    """The folder's card as run_glue writes it after evaluation, with `accuracy` on the RTE dev set."""
    model = casan_class("bert", "sequence-classification").from_pretrained(folder)
    scores = {"validation": {"accuracy": accuracy}}
    return render_model_card(model, model_name, base_model=SOURCE, task_name="rte", dataset_id="nyu-mll/glue",
                             eval_metrics=scores, training={"seed": 1})  # fmt: skip


def limit(folder):
    """The file size limit of the cases: the folder's weights pass it."""
    return (folder / "model.safetensors").stat().st_size


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def replace_in(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def damage(folder, case, tmp_path):
    """Makes `folder` fail one check; returns what the refusal must say."""
    card = folder / "README.md"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hf_token\n")
    if case == "pickled weights":
        torch.save({}, folder / "pytorch_model.bin")
        return "pytorch_model.bin: unpickles when loaded, and no pickle goes up"
    if case == "a joblib pickle":
        (folder / "scaler.joblib").write_bytes(pickle.dumps({"mean": 0.0}))
        return "scaler.joblib: unpickles when loaded"
    if case == "a pickle under another name, in a subfolder":
        (folder / "extra").mkdir()
        (folder / "extra" / "state.dat").write_bytes(pickle.dumps([1, 2], protocol=4))
        return "extra/state.dat: unpickles when loaded"
    if case == "torch.save under another name":
        torch.save({"x": torch.ones(2)}, folder / "weights.data")
        return "weights.data: unpickles when loaded"
    if case == "a pickle named .safetensors":
        torch.save({"x": torch.ones(2)}, folder / "extra.safetensors")
        return "extra.safetensors: not a readable safetensors file ("
    if case == "a protocol 0 pickle under a neutral name":
        (folder / "state.dat").write_bytes(pickle.dumps({"mean": [0.5]}, protocol=0))
        return "state.dat: unpickles when loaded"
    if case == "a protocol 1 pickle":
        (folder / "state.dat").write_bytes(pickle.dumps({"mean": [0.5]}, protocol=1))
        return "state.dat: unpickles when loaded"
    if case in COMPRESSED:
        name, compress = COMPRESSED[case]
        (folder / name).write_bytes(compress(pickle.dumps({"mean": [0.5]}, protocol=0)))
        return f"{name}: unpickles when loaded"
    if case == "a zip holding a protocol 0 pickle":
        with zipfile.ZipFile(folder / "state.zip", "w") as archive:
            archive.writestr("state", pickle.dumps([1, 2], protocol=0))
        return "state.zip: unpickles when loaded"
    if case == "a .npy of objects":
        numpy.save(folder / "labels.npy", numpy.array([{"a": 1}], dtype=object), allow_pickle=True)
        return "labels.npy: unpickles when loaded"
    if case == "a file symlink to outside":
        (folder / "notes.txt").symlink_to(outside / "secret.txt")
        return f"notes.txt: a symbolic link (to '{outside / 'secret.txt'}'); an upload sends nothing from outside"
    if case == "a hard link to a file outside":
        os.link(outside / "secret.txt", folder / "notes.txt")
        return (
            "notes.txt: a hard link (2 links to its bytes, 1 of them among the files sent); an upload sends nothing "
            "from outside the folder"
        )
    if case in CREDENTIALS:
        name, text, said = CREDENTIALS[case]
        (folder / name).write_text(f"# notes\n{text}\n")
        return f"{name} line 2: holds a credential ({said}), and none goes up"
    if case == "a folder symlink to outside":
        (folder / "extra").symlink_to(outside)
        return "extra: a symbolic link"
    if case == "a file over the limit":
        (folder / "big.txt").write_text("x" * (limit(folder) + 1))
        return (
            f"big.txt: {limit(folder) + 1} bytes, over the {limit(folder)} bytes a file goes up with unless allowed "
            "(--allow_large_files)."
        )
    if case == "no safetensors":
        (folder / "model.safetensors").unlink()
        return "model.safetensors: the folder has no safetensors weights"
    if case == "truncated safetensors":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
        return "model.safetensors: not a readable safetensors file ("
    if case == "broken config.json":
        (folder / "config.json").write_text('{"model_type": "casan",')
        return "config.json: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 24"
    if case == "no auto_map":
        edit_json(folder / "config.json", lambda config: config.pop("auto_map"))
        return "config.json: no auto_map, and its model_type 'casan_bert' is not one of transformers' own"
    if case == "a code file missing":
        (folder / "context.py").unlink()
        return "context.py: missing;"
    if case == "an auto_map entry naming a missing class":
        edit_json(
            folder / "config.json",
            lambda config: config["auto_map"].update(AutoModelForTokenClassification="modeling_casan.NoSuchClass"),
        )
        return (
            "config.json: auto_map's AutoModelForTokenClassification entry 'modeling_casan.NoSuchClass' does not load"
        )
    if case == "broken YAML in the card":
        replace_in(card, "library_name: transformers", "library_name: [transformers")
        return "README.md: its metadata does not parse ("
    if case == "base_model a folder":
        replace_in(card, f"base_model: {SOURCE}", f"base_model: {tmp_path}")
        return f"README.md: base_model '{tmp_path}' is not a Hub id"
    if case == "base_model a relative path":
        replace_in(card, f"base_model: {SOURCE}", "base_model: ../all-MiniLM-L6-v2")
        return "README.md: base_model '../all-MiniLM-L6-v2' is not a Hub id"
    if case == "base_model ./x":
        replace_in(card, f"base_model: {SOURCE}", "base_model: ./x")
        return "README.md: base_model './x' is not a Hub id"
    if case == "no base_model":
        replace_in(card, f"base_model: {SOURCE}\n", "")
        return "README.md: no base_model"
    if case == "scores not the results file's":
        card.write_text(scored_card(folder, 0.625))
        (folder / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.6, "eval_loss": 0.7}))
        return "README.md: accuracy on validation is 0.625 in the card and 0.6 in eval_results.json."
    if case == "all_results.json contradicting the card":
        card.write_text(scored_card(folder, 0.625))
        (folder / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.625}))
        (folder / "all_results.json").write_text(json.dumps({"eval_accuracy": 0.5, "train_loss": 0.7}))
        return "README.md: accuracy on validation is 0.625 in the card and 0.5 in all_results.json."
    if case == "scores without a results file":
        card.write_text(scored_card(folder, 0.625))
        return "README.md: accuracy on validation is 0.625 in the card and in no results file (none)."
    if case == "a card loading the folder's name":
        card.write_text(card.read_text().replace(f'"{REPO}"', '"ft_rte"'))
        return f"README.md: its load example names 'ft_rte', not the repository pushed to '{REPO}'"
    if case == "a card showing a tokenizer the folder lacks":
        for name in ("tokenizer_config.json", "tokenizer.json", "vocab.txt", "special_tokens_map.json"):
            (folder / name).unlink(missing_ok=True)
        return "README.md: its load example loads a tokenizer and the folder has none (tokenizer_config.json)"
    if case == "a local path":
        (folder / "notes.txt").write_text(f"trained in {tmp_path}/runs\n")
        return f"notes.txt: names the local path '{tmp_path}/runs'"
    if case == "another machine's home folder":
        (folder / "notes.txt").write_text("trained in /Users/alice/runs/rte\n")
        return "notes.txt: names the local path '/Users/alice'"
    if case == "a Windows drive with forward slashes":
        (folder / "notes.txt").write_text("trained in C:/Users/alice/runs\n")
        return "notes.txt: names the local path 'C:/Users'"
    raise ValueError(case)


# A compressed pickle, as joblib and pandas write and open it: the file's name, and how it is compressed.
COMPRESSED = {
    "a gzipped pickle": ("scaler.pkl.gz", gzip.compress),
    "a bz2 pickle": ("state.bz2", bz2.compress),
    "an xz pickle under a neutral name": ("state.dat", lzma.compress),
}
# Made-up credentials of the forms the push refuses (built here, so that no scanner takes this file for a leak): the
# file, its line, and how the refusal names and masks it.
HUB_TOKEN = "hf_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3h"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
PRIVATE_KEY = "-----BEGIN RSA " + "PRIVATE KEY-----"
CREDENTIALS = {
    "a Hub token in env": ("env", f"HF_TOKEN={HUB_TOKEN}", "Hugging Face Token: hf_a" + "*" * 33),
    "a Hub token in notes": ("notes.txt", f"pushed with {HUB_TOKEN} on Monday", "Hugging Face Token: hf_a" + "*" * 33),
    "an AWS key": ("notes.txt", f"aws_access_key_id = {AWS_KEY}", "AWS Access Key: AKIA" + "*" * 16),
    "a private key": ("deploy.pem", PRIVATE_KEY, "Private Key: BEGI" + "*" * 17),
}

CASES = [
    "pickled weights",
    "a joblib pickle",
    "a pickle under another name, in a subfolder",
    "torch.save under another name",
    "a pickle named .safetensors",
    "a protocol 0 pickle under a neutral name",
    "a protocol 1 pickle",
    *COMPRESSED,
    "a zip holding a protocol 0 pickle",
    "a .npy of objects",
    "a file symlink to outside",
    "a hard link to a file outside",
    *CREDENTIALS,
    "a folder symlink to outside",
    "a file over the limit",
    "no safetensors",
    "truncated safetensors",
    "broken config.json",
    "no auto_map",
    "a code file missing",
    "an auto_map entry naming a missing class",
    "broken YAML in the card",
    "base_model a folder",
    "base_model a relative path",
    "base_model ./x",
    "no base_model",
    "scores not the results file's",
    "all_results.json contradicting the card",
    "scores without a results file",
    "a card loading the folder's name",
    "a card showing a tokenizer the folder lacks",
    "a local path",
    "another machine's home folder",
    "a Windows drive with forward slashes",
]


@pytest.mark.parametrize("case", CASES)
def test_a_folder_failing_a_check_is_refused_in_one_line_naming_the_file(folder, tmp_path, monkeypatch, case):
    """Refused before any repository is created or anything is sent, the message one line."""
    size_limit = limit(folder)
    said = damage(folder, case, tmp_path)
    hub = record_uploads(monkeypatch)
    with pytest.raises(FolderCheckError) as refused:
        push_folder(folder, REPO, max_file_bytes=size_limit)
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert hub.created == [] and hub.uploads == []


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("missing", "{folder}: no such folder."),
        ("empty", "{folder}: empty (or only files an upload leaves out); nothing to push."),
        ("hidden files only", "{folder}: empty (or only files an upload leaves out); nothing to push."),
    ],
)
def test_a_missing_or_empty_folder_is_refused_in_one_line(tmp_path, capsys, case, said):
    folder = tmp_path / "folder"
    if case != "missing":
        folder.mkdir()
    if case == "hidden files only":
        (folder / ".env").write_text("TOKEN=1\n")
    with pytest.raises(SystemExit):
        load_script("push_to_hub").main([str(folder), "--repo_id", REPO, "--dry_run"])
    assert capsys.readouterr().err == f"push_to_hub.py: {folder} is not pushed: {said.format(folder=folder)}\n"


def test_hidden_private_and_run_files_are_left_out_at_any_depth(folder):
    """Hidden files and folders, Trainer's private files and the run record, at the top and below it."""
    left_out = [".env", "sub/.env", "sub/.git/config", "1_Pooling/.DS_Store", "training_args.bin", "sub/_private",
                "checkpoint-1/model.safetensors", "run_start.json", ".cache/huggingface/x"]  # fmt: skip
    kept = ["1_Pooling/config.json", "sub/notes.txt"]
    for name in left_out + kept:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("{}")
    files = upload_files(folder)
    assert set(kept) <= set(files) and not set(left_out) & set(files)


@pytest.mark.parametrize("repo_id", ["ft_rte", "../x", "you/x/y"])
def test_a_repository_id_without_its_owner_is_refused_first(folder, monkeypatch, repo_id):
    """A bare name would become `<user>/ft_rte` on the Hub while the card loads `ft_rte`."""
    hub = record_uploads(monkeypatch)
    with pytest.raises(FolderCheckError, match=f"^'{re.escape(repo_id)}': not a repository id with its owner"):
        push_folder(folder, repo_id)
    assert hub.created == []


def test_a_large_file_goes_up_when_allowed_and_a_shebang_is_no_path(folder):
    (folder / "big.txt").write_text("x" * (limit(folder) + 1))
    (folder / "helper.py").write_text("#!/usr/bin/env python\nprint('hello')\n")
    assert {"big.txt", "helper.py"} <= set(check_folder(folder, REPO, max_file_bytes=None))


def test_safetensors_whose_header_length_reads_as_a_pickle_start_pass(folder):
    """A 1408-byte header: the file starts with `80 05`, a pickle's protocol-5 start, and is safetensors all the
    same. A .npy of numbers (no objects) passes too."""
    data = numpy.ones(2, dtype=numpy.float32).tobytes()
    header = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, len(data)]}, "__metadata__": {"note": ""}}
    padding = 1408 - len(json.dumps(header, separators=(",", ":")))
    header["__metadata__"]["note"] = "x" * padding
    text = json.dumps(header, separators=(",", ":")).encode()
    (folder / "extra.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + data)
    assert (folder / "extra.safetensors").read_bytes()[:2] == b"\x80\x05"
    numpy.save(folder / "numbers.npy", numpy.arange(3.0))
    assert {"extra.safetensors", "numbers.npy"} <= set(check_folder(folder, REPO))


def test_a_card_whose_scores_are_every_results_files_passes(folder):
    (folder / "README.md").write_text(scored_card(folder, 0.625))
    (folder / "eval_results.json").write_text(json.dumps({"eval_accuracy": 0.62500004, "eval_loss": 0.7}))
    (folder / "all_results.json").write_text(json.dumps({"eval_accuracy": 0.625, "train_loss": 0.7}))
    check_folder(folder, REPO)


def test_each_split_of_the_results_table_reads_back_as_its_card_split(tmp_path):
    """A split's scores as run_glue.py writes them (its prefix, `results_suffix(split)`) read back as that split,
    by the same table (`hub.tasks.RESULTS_KEYS`), whose prefixes name the results files."""
    for keys in RESULTS_KEYS:
        for split in keys.splits:
            scores = {f"{keys.prefix}_accuracy{results_suffix(split)}": 0.5, f"{keys.prefix}_loss": 0.7}
            (tmp_path / "all_results.json").write_text(json.dumps(scores))
            assert results_scores(tmp_path, "all_results.json", {split}) == {(split, "accuracy"): 0.5}, split
    assert RESULTS_FILES == ("all_results.json", "eval_results.json", "predict_results.json")
    with pytest.raises(ValueError, match="A results file holds the splits validation, .*; got 'train'."):
        results_suffix("train")


def test_a_baseline_folder_passes_without_the_remote_code_checks(folder, tmp_path):
    """A `--baseline` run's plain BERT: no auto_map, no code files; it loads as transformers' own model."""
    baseline = tmp_path / "baseline"
    vocab_size = json.loads((folder / "config.json").read_text())["vocab_size"]
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64)  # fmt: skip
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    model.save_pretrained(baseline)
    for name in ("tokenizer_config.json", "tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        if (folder / name).exists():
            shutil.copy(folder / name, baseline / name)
    card = render_model_card(model, REPO, base_model=SOURCE, task_name="rte", dataset_id="nyu-mll/glue")
    assert "A plain BERT checkpoint: no remote code is needed." in card
    (baseline / "README.md").write_text(card)
    assert not list(baseline.glob("*.py"))
    check_folder(baseline, REPO)


def test_every_auto_map_entry_loads_on_the_oldest_transformers_the_card_promises(folder):
    """The fresh process of transformers 4.56 (.venv-4x), the card's minimum: the folder passes, and an auto_map
    entry naming a class its code lacks is refused there as on the pinned release."""
    from test_transformers4 import python_4x

    python = python_4x()
    check_folder(folder, REPO, python=python)
    edit_json(
        folder / "config.json",
        lambda config: config["auto_map"].update(AutoModelForTokenClassification="modeling_casan.NoSuchClass"),
    )
    with pytest.raises(FolderCheckError, match="auto_map's AutoModelForTokenClassification entry .* does not load"):
        check_folder(folder, REPO, python=python)


def test_code_that_gives_other_outputs_without_casan_hf_is_refused(folder):
    """The folder's own code runs in the fresh process; here it shifts the logits, which casan_hf's does not."""
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
        check_folder(folder, REPO)


def test_dry_run_lists_what_the_commit_adds_changes_and_deletes(folder, capsys, monkeypatch):
    """Against a branch holding a stale `.bin`, an old card, the same weights and `.gitattributes`: one line per
    file added, changed or deleted, nothing sent; `--keep` keeps what it matches."""
    remote = {
        ".gitattributes": b"*.safetensors filter=lfs\n",
        "pytorch_model.bin": b"stale",
        "README.md": b"an old card",
        "model.safetensors": (folder / "model.safetensors").read_bytes(),
    }
    hub = record_uploads(monkeypatch, RecordingHubApi(remote))
    load_script("push_to_hub").main([str(folder), "--repo_id", REPO, "--dry_run"])
    files = upload_files(folder)
    added = [f"added {name}" for name in files if name not in ("README.md", "model.safetensors")]
    assert capsys.readouterr().out.splitlines() == [
        f"Would commit to {REPO} (main), nothing sent yet:",
        *added,
        "changed README.md",
        "deleted pytorch_model.bin",
    ]
    load_script("push_to_hub").main([str(folder), "--repo_id", REPO, "--dry_run", "--keep", "*.bin"])
    assert "deleted pytorch_model.bin" not in capsys.readouterr().out
    assert hub.created == [] and hub.uploads == []


def test_a_push_deletes_what_the_folder_does_not_hold(folder, monkeypatch):
    hub = record_uploads(monkeypatch, RecordingHubApi({"pytorch_model.bin": b"stale", "old_module.py": b"x = 1\n"}))
    plan, _ = push_folder(folder, REPO, keep_patterns=["old_*"])
    (upload,) = hub.uploads
    assert upload["deleted"] == plan.deleted == ["pytorch_model.bin"]
    assert upload["files"] == upload_files(folder) == plan.added


def test_what_is_sent_is_the_copy_that_was_checked(folder, monkeypatch):
    """The folder changes after the file list is decided: the upload sends the staged bytes, not the new ones."""
    import casan_hf.hub.checks

    hub = record_uploads(monkeypatch)
    check = casan_hf.hub.checks.check_no_local_paths

    def change_the_folder_meanwhile(stage, files, original):
        check(stage, files, original)
        (folder / "README.md").write_text(f"written after the checks, naming {folder}\n")

    monkeypatch.setattr(casan_hf.hub.checks, "check_no_local_paths", change_the_folder_meanwhile)
    card = (folder / "README.md").read_text()
    push_folder(folder, REPO)
    assert hub.uploads[0]["card"] == card


def test_a_refused_commit_leaves_no_repository_behind(folder, monkeypatch):
    hub = record_uploads(monkeypatch, RecordingHubApi(refuse_commits=True))
    with pytest.raises(FolderCheckError) as refused:
        push_folder(folder, REPO)
    assert str(refused.value) == (
        f"{REPO}: the commit failed (HfHubHTTPError: 400 Bad Request: the commit is refused). The repository this "
        "push created is deleted again."
    )
    assert hub.created == hub.deleted_repos == [REPO]


def test_a_hub_out_of_reach_is_one_line(folder, capsys):
    """Offline (HF_HUB_OFFLINE=1, as the tests run), the Hub's validation cannot be asked: one line, no traceback."""
    with pytest.raises(SystemExit):
        load_script("push_to_hub").main([str(folder), "--repo_id", REPO, "--dry_run"])
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(
            f"push_to_hub.py: {folder} is not pushed: {REPO}: the Hub's validation of README.md failed "
            "(OfflineModeIsEnabled: Cannot reach"
        )
    )


def test_left_out_files_and_links_never_reach_the_stage(folder, tmp_path):
    """A link inside a left-out folder is not followed or sent: the hidden folder is not read at all."""
    (folder / ".git").mkdir()
    os.symlink(tmp_path, folder / ".git" / "outside")
    assert not any(name.startswith(".git") for name in upload_files(folder))


def test_render_card_sends_a_card_naming_the_folder_rendered_for_the_repository(folder, capsys, monkeypatch):
    """A card that names the folder (the converter's default, --model_name unset) is refused with the flag as the way
    out; with `--render_card` the card sent is the one the converter renders for the repository, and the folder's
    own card is left as it is."""
    model = casan_class("bert", "sequence-classification").from_pretrained(folder)
    folder_card = render_model_card(model, folder.name, base_model=SOURCE)
    (folder / "README.md").write_text(folder_card)
    hub = record_uploads(monkeypatch)
    with pytest.raises(SystemExit):
        load_script("push_to_hub").main([str(folder), "--repo_id", REPO])
    assert capsys.readouterr().err.endswith(
        f"README.md: its load example names '{folder.name}', not the repository pushed to '{REPO}'; push with "
        f"--render_card, which renders the card's name and examples for '{REPO}' in what is sent (the folder's own "
        "card stays as it is), or render the card with that model name (--hub_model_id, --model_name).\n"
    )
    load_script("push_to_hub").main([str(folder), "--repo_id", REPO, "--render_card"])
    assert hub.uploads[0]["card"] == render_model_card(model, REPO, base_model=SOURCE)
    assert (folder / "README.md").read_text() == folder_card
