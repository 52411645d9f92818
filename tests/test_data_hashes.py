"""The data a study's runs read, by its sha256: new GLUE records carry it (`glue.collect`), and
`scripts/hash_study_data.py` adds it to committed records made before runs kept it, from the files their command
named under the shared data folder; a record that names other data is left as it is, with the reason."""

import json

import pytest
from conftest import REPO_ROOT

from casan_hf.cli.run_start import data_fingerprint
from casan_hf.studies import Run, load_results
from casan_hf.studies.glue import collect
from tooling.catalog import swept_studies
from tooling.data_hashes import TRANSLATION_FILES, with_data_hash


def test_every_committed_study_record_carries_the_hash_of_its_data():
    for study in swept_studies():
        for record in load_results(REPO_ROOT / study.results):
            assert len(record["data"]["sha256"]) == 64, (study.name, record.get("seed"))


@pytest.fixture
def shared(tmp_path):
    for name in TRANSLATION_FILES:
        (tmp_path / "mt" / "multi30k").mkdir(parents=True, exist_ok=True)
        (tmp_path / "mt" / "multi30k" / name).write_text(f"{name}\n")
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv"):
        (tmp_path / "glue" / "RTE" / name).write_text(f"{name}\n")
    return tmp_path


def test_a_record_without_a_hash_gets_that_of_the_files_its_command_read(shared):
    old = {"seed": 1, "data": {"sha256": None, "not_recorded": "the run predates the data hash"}}
    new = with_data_hash("translation", old, shared)
    expected = data_fingerprint([shared / "mt" / "multi30k" / name for name in TRANSLATION_FILES])
    assert new == {**old, "data": {**old["data"], **expected, "hashed_later": new["data"]["hashed_later"]}}
    glue = with_data_hash("glue", {"task": "rte"}, shared)
    assert glue["data"]["files"].keys() == {"train.tsv", "dev.tsv"}
    assert with_data_hash("glue", glue, shared) is glue  # a record with its hash is left as it is


def test_a_record_that_read_other_data_is_left_with_the_reason(shared):
    record = {"data": {"sha256": None}, "received": {"argv": ["run_translation.py", "--data_dir", "elsewhere"]}}
    with pytest.raises(ValueError, match="it read --data_dir 'elsewhere'"):
        with_data_hash("translation", record, shared)
    record["received"]["argv"] = ["run_translation.py", "--data_dir", ".device/multi30k", "--test_prefix", "test_2017"]
    with pytest.raises(ValueError, match="other files"):
        with_data_hash("translation", record, shared)
    (shared / "glue" / "RTE" / "dev.tsv").unlink()
    with pytest.raises(ValueError, match="dev.tsv"):
        with_data_hash("glue", {"task": "rte"}, shared)


def test_a_new_glue_record_carries_the_hash_of_the_files_the_run_read(shared, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "all_results.json").write_text(json.dumps({"eval_accuracy": 0.5}))
    (folder / "config.json").write_text(json.dumps({"context_type": "none"}))
    files = (shared / "glue" / "RTE" / "train.tsv", shared / "glue" / "RTE" / "dev.tsv")
    run = Run({"task": "rte", "recipe": "finetune", "variant": "none", "seed": 1}, folder, (), {}, files)
    assert collect(run)["data"] == data_fingerprint(files)
