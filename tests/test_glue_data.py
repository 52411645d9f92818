"""GLUE data from the original TSVs (real SST-2, MRPC, RTE; synthetic files in the other tasks' formats), from
the user's csv/json files and from the Hub (a stand-in for `load_dataset`, no network): one schema, and a
clear ValueError for every bad input."""

import json
import math
import re

import pytest
from datasets import ClassLabel, Dataset, DatasetDict
from glue_helpers import write_synthetic_glue, write_tsv

from casan_hf.glue import data as glue_data
from casan_hf.glue.data import load_glue_data
from casan_hf.glue.tasks import GLUE_TASKS, get_task


@pytest.fixture(scope="module")
def synthetic_glue(tmp_path_factory):
    return write_synthetic_glue(tmp_path_factory.mktemp("glue"))


@pytest.mark.parametrize(
    "task, rows, labels",
    [
        ("sst2", (67349, 872), ("negative", "positive")),
        ("mrpc", (3668, 408), ("not_equivalent", "equivalent")),
        ("rte", (2490, 277), ("entailment", "not_entailment")),
    ],
)
def test_real_glue_tsvs_load_with_the_hub_schema(glue_dir, task, rows, labels):
    data = load_glue_data(task, glue_dir=str(glue_dir))
    assert (len(data.datasets["train"]), len(data.datasets["validation"])) == rows
    assert data.datasets["train"].column_names == [*GLUE_TASKS[task].text_columns, "label"]
    assert data.datasets["train"].features["label"] == ClassLabel(names=list(labels))
    assert data.eval_splits == ("validation",) and data.label_names == list(labels)


def test_mrpc_byte_order_mark_and_quotes_are_read_as_in_the_file(glue_dir):
    first = load_glue_data("mrpc", glue_dir=str(glue_dir)).datasets["train"][0]
    assert first["label"] == 1  # "equivalent": the BOM-prefixed "Quality" header was recognised
    assert first["sentence1"].startswith('Amrozi accused his brother, whom he called "the witness"')


def test_label_counts_match_the_published_ones(glue_dir):
    # SOURCES.md: RTE dev 146 entailment / 131 not_entailment; MRPC dev 129 x 0 / 279 x 1.
    rte = load_glue_data("rte", glue_dir=str(glue_dir), need_train=False).datasets["validation"]["label"]
    mrpc = load_glue_data("mrpc", glue_dir=str(glue_dir), need_train=False).datasets["validation"]["label"]
    assert (rte.count(0), rte.count(1)) == (146, 131)
    assert (mrpc.count(0), mrpc.count(1)) == (129, 279)


def test_cola_without_header_and_na_kept_as_text(synthetic_glue):
    data = load_glue_data("cola", glue_dir=str(synthetic_glue))
    assert data.datasets["train"]["sentence"][3] == "NA"
    assert data.datasets["train"]["label"] == [0, 1, 0, 1, 0, 1]


def test_stsb_is_regression(synthetic_glue):
    data = load_glue_data("stsb", glue_dir=str(synthetic_glue))
    assert data.is_regression and data.label_names is None
    assert data.datasets["train"]["label"] == pytest.approx([0.0, 0.8, 1.6, 2.4, 3.2, 4.0])


def test_mnli_has_matched_and_mismatched_dev_sets(synthetic_glue):
    data = load_glue_data("mnli", glue_dir=str(synthetic_glue))
    assert data.eval_splits == ("validation_matched", "validation_mismatched")
    assert [len(data.datasets[split]) for split in ("train", *data.eval_splits)] == [6, 4, 3]
    assert data.datasets["validation_matched"].column_names == ["premise", "hypothesis", "label"]
    assert data.datasets["train"]["label"] == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("task", ["qqp", "qnli", "wnli"])
def test_other_tasks_load(synthetic_glue, task):
    data = load_glue_data(task, glue_dir=str(synthetic_glue))
    assert data.datasets["train"]["label"] == [0, 1, 0, 1, 0, 1]
    assert data.datasets["validation"].column_names == [*GLUE_TASKS[task].text_columns, "label"]


def test_user_files_for_a_task_accept_label_names_and_ids(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text('sentence1,sentence2,label,extra\n"a, b",c,entailment,x\nd,e,1,y\n')
    valid = tmp_path / "dev.json"
    valid.write_text("\n".join(json.dumps({"sentence1": "f", "sentence2": "g", "label": label}) for label in (0, 1)))
    mixed = load_glue_data("rte", train_file=str(train), validation_file=str(valid))  # each file by its extension
    assert mixed.datasets["validation"]["label"] == [0, 1]
    valid_csv = tmp_path / "dev.csv"
    valid_csv.write_text("sentence1,sentence2,label\nf,g,not_entailment\n")
    data = load_glue_data("rte", train_file=str(train), validation_file=str(valid_csv))
    assert data.datasets["train"]["label"] == [0, 1] and data.datasets["validation"]["label"] == [1]
    assert data.datasets["train"].column_names == ["sentence1", "sentence2", "label"]


def test_user_files_without_a_task_read_the_label_set_off_the_data(tmp_path):
    train = tmp_path / "train.json"
    train.write_text(
        "\n".join(
            json.dumps({"text": text, "label": label}) for text, label in (("a", "pos"), ("b", "neg"), ("c", "pos"))
        )
    )
    valid = tmp_path / "dev.json"
    valid.write_text(json.dumps({"text": "d", "label": "neg"}))
    data = load_glue_data(train_file=str(train), validation_file=str(valid))
    assert data.label_names == ["neg", "pos"] and data.text_columns == ("text",)
    assert data.datasets["train"]["label"] == [1, 0, 1]
    valid.write_text(json.dumps({"text": "d", "label": "neutral"}))
    with pytest.raises(ValueError, match=r"labels outside the label set: \['neutral'\]; allowed: \['neg', 'pos'\]"):
        load_glue_data(train_file=str(train), validation_file=str(valid))


def test_hub_glue_keeps_the_task_splits(monkeypatch):
    """What `nyu-mll/glue` returns (an idx column, a test split with label -1) becomes the common schema."""
    labels = ClassLabel(names=["entailment", "neutral", "contradiction"])

    def split(n):
        return Dataset.from_dict(
            {"premise": ["p"] * n, "hypothesis": ["h"] * n, "label": [0] * n, "idx": list(range(n))}
        ).cast_column("label", labels)

    calls = []

    def fake_load_dataset(path, name, cache_dir=None):
        calls.append((path, name))
        names = ["train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"]
        return DatasetDict({name: split(2 + index) for index, name in enumerate(names)})

    monkeypatch.setattr(glue_data, "load_dataset", fake_load_dataset)
    data = load_glue_data("mnli")
    assert calls == [("nyu-mll/glue", "mnli")]
    assert list(data.datasets) == ["train", "validation_matched", "validation_mismatched"]
    assert data.datasets["train"].column_names == ["premise", "hypothesis", "label"]
    assert data.dataset_id == "nyu-mll/glue" and data.dataset_config == "mnli"


def test_unknown_task():
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'sst5'; choose one of cola, sst2, mrpc"):
        get_task("sst5")
    with pytest.raises(ValueError, match="Unknown GLUE task 'sst5'"):
        load_glue_data("sst5", glue_dir="anywhere")


def test_missing_folder_and_files(tmp_path, synthetic_glue):
    with pytest.raises(ValueError, match=f"GLUE data folder '{tmp_path / 'nope'}' does not exist"):
        load_glue_data("rte", glue_dir=str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="has no 'RTE' folder for task 'rte'"):
        load_glue_data("rte", glue_dir=str(synthetic_glue))
    (synthetic_glue / "QQP" / "dev.tsv").rename(synthetic_glue / "QQP" / "dev.bak")
    try:
        with pytest.raises(ValueError, match=r"QQP/dev.tsv' for task 'qqp' does not exist"):
            load_glue_data("qqp", glue_dir=str(synthetic_glue))
        assert len(load_glue_data("qqp", glue_dir=str(synthetic_glue), need_eval=False).datasets["train"]) == 6
    finally:
        (synthetic_glue / "QQP" / "dev.bak").rename(synthetic_glue / "QQP" / "dev.tsv")
    with pytest.raises(ValueError, match="validation file .* does not exist"):
        load_glue_data("rte", validation_file=str(tmp_path / "missing.csv"), need_train=False)
    with pytest.raises(ValueError, match="No train file"):
        load_glue_data("rte", validation_file=str(tmp_path / "missing.csv"))
    with pytest.raises(ValueError, match="either `glue_dir`"):
        load_glue_data("rte", glue_dir=str(synthetic_glue), train_file="x.csv")
    with pytest.raises(ValueError, match="Name a GLUE task"):
        load_glue_data()


def test_file_without_the_task_columns(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\nhello,0\n")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['sentence1', 'sentence2'\] that task 'rte' needs"):
        load_glue_data("rte", train_file=str(train), need_eval=False)
    write_tsv(
        tmp_path / "RTE" / "train.tsv", ("index", "premise", "hypothesis", "label"), [(0, "a", "b", "entailment")]
    )
    with pytest.raises(
        ValueError, match=r"is not a GLUE 'rte' file: its header .* lacks \['sentence1', 'sentence2'\]"
    ):
        load_glue_data("rte", glue_dir=str(tmp_path), need_eval=False)


def test_labels_outside_the_label_set(tmp_path, synthetic_glue):
    write_tsv(
        tmp_path / "RTE" / "train.tsv",
        ("index", "sentence1", "sentence2", "label"),
        [(0, "a", "b", "entailment"), (1, "c", "d", "maybe")],
    )
    with pytest.raises(
        ValueError,
        match=r"train.tsv' has labels outside the label set: \['maybe'\]; allowed: \['entailment', 'not_entailment'\]",
    ):
        load_glue_data("rte", glue_dir=str(tmp_path), need_eval=False)
    write_tsv(
        tmp_path / "STS-B" / "train.tsv", ("sentence1", "sentence2", "score"), [("a", "b", "2.5"), ("c", "d", "7")]
    )
    with pytest.raises(ValueError, match=r"labels outside the label set: \['7'\]; allowed: numbers in \[0.0, 5.0\]"):
        load_glue_data("stsb", glue_dir=str(tmp_path), need_eval=False)
    train = tmp_path / "train.csv"
    train.write_text("sentence,label\nfine,2\n")
    with pytest.raises(
        ValueError,
        match=r"labels outside the label set: \[2\]; allowed: \['negative', 'positive'\] \(or their ids 0..1\)",
    ):
        load_glue_data("sst2", train_file=str(train), need_eval=False)


def test_tsv_files_as_glue_ships_them_and_columns_named_by_flags(tmp_path):
    """A .tsv is read tab-separated and unquoted (a stray quote is text, "NA" is a sentence); `text_columns` and
    `label_column` map the file's own column names onto the task's."""
    write_tsv(tmp_path / "train.tsv", ("premise", "hypothesis", "gold"), [('a "quoted', "NA", "entailment")])
    data = load_glue_data(
        "rte",
        train_file=str(tmp_path / "train.tsv"),
        need_eval=False,
        text_columns=["premise", "hypothesis"],
        label_column="gold",
    )
    assert data.datasets["train"][0] == {"sentence1": 'a "quoted', "sentence2": "NA", "label": 0}
    untasked = load_glue_data(
        train_file=str(tmp_path / "train.tsv"), need_eval=False, text_columns=["hypothesis"], label_column="gold"
    )
    assert untasked.text_columns == ("hypothesis",) and untasked.label_names == ["entailment"]
    with pytest.raises(ValueError, match=r"has no column\(s\) \['label'\]; .*: name yours with --label_column"):
        load_glue_data(train_file=str(tmp_path / "train.tsv"), need_eval=False)
    with pytest.raises(ValueError, match=r"Task 'rte' takes 2 text column\(s\) \(sentence1, sentence2\)"):
        load_glue_data("rte", train_file=str(tmp_path / "train.tsv"), need_eval=False, text_columns=["premise"])
    with pytest.raises(ValueError, match="name the columns of your own files"):
        load_glue_data("rte", glue_dir=str(tmp_path), label_column="gold")


# Each bad file, as a user writes it, and the one line that refuses it: the file, the line, what to do.
BAD_FILES = {
    "empty": ("train.csv", "", r"'{path}' is empty: write a header row naming the columns"),
    "header only": ("train.csv", "sentence,label\n", r"'{path}' has a header row but no examples: add one example"),
    "row that does not parse": (
        "train.csv",
        "sentence,label\nfine,pos\nslow, dull,neg\n",
        r"'{path}' line 3: 3 field\(s\) where the header has 2 .*: quote a field that holds a comma",
    ),
    "tab-separated file named .csv": (
        "train.csv",
        "sentence\tlabel\nfine, really\tpos\n",
        r"'{path}' looks tab-separated, not comma-separated .*: rename it to .tsv",
    ),
    "comma-separated file named .tsv": (
        "train.tsv",
        "sentence,label\nfine,pos\n",
        r"'{path}' looks comma-separated, not tab-separated .*: rename it to .csv",
    ),
    "missing label": (
        "train.csv",
        "sentence,label\nfine,pos\nslow,\ndull, \n",
        r"'{path}' line 3 has no label in column 'label' \(and lines 4\): label it or remove it",
    ),
    "json line that does not parse": (
        "train.jsonl",
        '{{"sentence": "fine", "label": "pos"}}\n{{"sentence": "slow"\n',
        r"'{path}' line 2 is not JSON \(.*\): write one JSON object a line",
    ),
    "json line without its label": (
        "train.jsonl",
        '{{"sentence": "fine", "label": "pos"}}\n{{"sentence": "slow", "label": null}}\n',
        r"'{path}' line 2 has no label in column 'label'",
    ),
    "unknown extension": ("train.txt", "fine\tpos\n", r"'{path}': data files are read by their extension"),
    "csv text missing": (
        "train.csv",
        "sentence,label\nfine,pos\n ,neg\n",
        r"'{path}' line 3 has no text in column 'sentence' \(' '\): write its text, one string, or remove the example",
    ),
    "tsv text missing": ("train.tsv", "sentence\tlabel\nfine\tpos\n\tneg\n", r"'{path}' line 3 has no text in column"),
    "csv NaN label": (
        "train.csv",
        "sentence,label\nfine,0.5\nslow,NaN\n",
        r"'{path}' line 3 has the label 'NaN', not a finite number: write a number or a label name",
    ),
    "tsv NaN label": (
        "train.tsv",
        "sentence\tlabel\nfine\t0.5\nslow\tinf\n",
        r"'{path}' line 3 has the label 'inf', not",
    ),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_data_files_are_refused_in_one_line(tmp_path, case):
    name, text, message = BAD_FILES[case]
    path = tmp_path / name
    path.write_text(text.replace("{{", "{").replace("}}", "}"))
    with pytest.raises(ValueError, match="^" + message.format(path=re.escape(str(path)))) as error:
        load_glue_data(train_file=str(path), need_eval=False)
    assert "\n" not in str(error.value)


# Each value of a JSON file that the training cannot take, as the second example of a JSON-lines file and of a JSON
# array: the two examples, and what the refusal says of it (after "'<file>' line 2 " or "example 2 ").
BAD_JSON_VALUES = {
    "null text": ({"sentence": None, "label": "neg"}, "has no text in column 'sentence' (null): write its text"),
    "missing text": ({"label": "neg"}, "has no text in column 'sentence' (missing)"),
    "nested text": ({"sentence": ["slow", "dull"], "label": "neg"}, "has no text in column 'sentence' (['slow', "),
    "mixed label types": (
        {"sentence": "slow", "label": "0"},
        "has the label '0' (text) where {where} 1 has 1 (number): write every label alike, all as text or all as",
    ),
    "boolean label": ({"sentence": "slow", "label": False}, "has the label False, a JSON boolean, which is no label"),
    "nested label": ({"sentence": "slow", "label": {"name": "neg"}}, "has the label {{'name': 'neg'}}, a nested"),
    "NaN label": ({"sentence": "slow", "label": math.nan}, "has the label nan, not a finite number"),
}


@pytest.mark.parametrize("extension", [".jsonl", ".json"])
@pytest.mark.parametrize("case", BAD_JSON_VALUES)
def test_json_values_the_training_cannot_take_are_refused_in_one_line(tmp_path, case, extension):
    """Before: `AttributeError: 'Json' object has no attribute 'dtype'` (mixed label types), the tokenizer's
    `TypeError` (a null text), a contradictory label set (booleans)."""
    second, said = BAD_JSON_VALUES[case]
    first = {"sentence": "fine", "label": 1 if case == "mixed label types" else "pos"}
    path = tmp_path / f"train{extension}"
    lines = extension == ".jsonl"
    path.write_text("\n".join(map(json.dumps, (first, second))) if lines else json.dumps([first, second]))
    where = "line" if lines else "example"
    with pytest.raises(ValueError) as error:
        load_glue_data(train_file=str(path), need_eval=False)
    assert str(error.value).startswith(f"'{path}' {where} 2 {said.format(where=where)}"), str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("extension", [".csv", ".tsv"])
def test_true_and_false_labels_of_a_delimited_file_are_its_label_names(tmp_path, extension):
    """pandas reads them as booleans; before, `labels outside the label set: ['false', 'true']; allowed: ['False',
    'True']`."""
    separator = "," if extension == ".csv" else "\t"
    path = tmp_path / f"train{extension}"
    path.write_text(f"sentence{separator}label\nfine{separator}true\nslow{separator}false\n")
    data = load_glue_data(train_file=str(path), need_eval=False)
    assert data.label_names == ["false", "true"] and data.datasets["train"]["label"] == [1, 0]
