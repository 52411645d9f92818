"""`make glue` on a machine without ../shared/glue: it fetches GLUE from the Hub (the loader mocked at the
`datasets` boundary here, never the network), and without a connection it stops with one line saying where to
put the TSVs, having written nothing."""

import subprocess

import pytest
from conftest import REPO_ROOT, load_script, run_main
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value
from glue_helpers import TINY_RUN, card_metadata, make_tiny_bert, read_json


def make_glue_command(glue_dir):
    """The run_glue command `make glue` runs with GLUE_DIR=glue_dir (make -n prints it without running it)."""
    result = subprocess.run(
        ["make", "-n", "glue", f"GLUE_DIR={glue_dir}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    command = result.stdout.replace("\\\n", " ").splitlines()
    (line,) = [line for line in command if "scripts/run_glue.py" in line]
    return line.split()


def test_make_glue_reads_the_tsvs_offline_or_fetches_from_the_hub(tmp_path):
    offline = make_glue_command(tmp_path)
    assert offline[:2] == ["HF_HUB_OFFLINE=1", "HF_DATASETS_OFFLINE=1"]
    assert offline[offline.index("--glue_dir") + 1] == str(tmp_path)
    online = make_glue_command(tmp_path / "missing")
    assert online[0].endswith("/python") and "--glue_dir" not in online


def hub_mrpc(rows=12):
    """What `load_dataset("nyu-mll/glue", "mrpc")` returns: the Hub's columns and splits."""
    features = Features(
        {
            "sentence1": Value("string"),
            "sentence2": Value("string"),
            "label": ClassLabel(names=["not_equivalent", "equivalent"]),
            "idx": Value("int32"),
        }
    )
    sentences = ["the film was great .", "it was dull", "a gripping film", "not at all", "what a film !", "i liked it"]
    split = {
        "sentence1": [sentences[i % 6] for i in range(rows)],
        "sentence2": [sentences[(i + 1) % 6] for i in range(rows)],
        "label": [i % 2 for i in range(rows)],
        "idx": list(range(rows)),
    }
    return DatasetDict({name: Dataset.from_dict(split, features=features) for name in ("train", "validation", "test")})


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


@pytest.fixture(scope="module")
def run_glue_main():
    module = load_script("run_glue")
    return lambda args: run_main(module, args)


def test_without_a_glue_dir_the_run_fetches_glue_from_the_hub(tiny_bert, tmp_path, monkeypatch, run_glue_main):
    calls = []
    monkeypatch.setattr("casan_hf.glue.data.load_dataset", lambda *args, **kwargs: calls.append(args) or hub_mrpc())
    output_dir = tmp_path / "out"
    run_glue_main(["--model_name_or_path", tiny_bert, "--task_name", "mrpc", "--context_type", "global",
                   "--do_train", "--do_eval", "--max_steps", "1", "--output_dir", output_dir, *TINY_RUN])  # fmt: skip
    assert calls == [("nyu-mll/glue", "mrpc")]
    assert read_json(output_dir / "eval_results.json")["eval_samples"] == 12
    assert card_metadata(output_dir)["datasets"] == ["nyu-mll/glue"]


def test_without_a_glue_dir_or_a_connection_the_run_says_where_to_put_the_tsvs(
    tiny_bert, tmp_path, monkeypatch, run_glue_main
):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr("casan_hf.glue.data.load_dataset", offline)
    output_dir = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        run_glue_main(["--model_name_or_path", tiny_bert, "--task_name", "mrpc", "--do_train", "--do_eval",
                       "--output_dir", output_dir, *TINY_RUN])  # fmt: skip
    assert str(stopped.value) == (
        "run_glue.py: error: Could not fetch 'nyu-mll/glue' (mrpc) from the Hub (Couldn't reach 'nyu-mll/glue' on "
        "the Hub (OfflineModeIsEnabled)). Put the original GLUE TSVs in a folder (<dir>/MRPC/train.tsv and "
        "<dir>/MRPC/dev.tsv) and pass it as --glue_dir (make glue: GLUE_DIR=<dir>)."
    )
    assert not output_dir.exists()
