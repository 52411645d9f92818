"""GLUE data from three places, one schema after loading.

- the Hub's `nyu-mll/glue` (needs a connection),
- `glue_dir`: the original GLUE TSV files, each task in its own format (see `tasks.TsvLayout`),
- `train_file` / `validation_file`: the user's own .csv, .tsv or .json(l) files (`files`), their text and label
  columns named by `text_columns` and `label_column` where they are not the task's (or `label`).

All three are read with `datasets` and brought to the Hub's columns: the task's text columns plus `label`
(a `ClassLabel`, or a float for regression). Every problem with the input (unknown task, missing folder or
file, missing columns, labels outside the label set) is a ValueError raised here, before any model is
built, naming the file and the bad value.
"""

import csv
import os
from dataclasses import dataclass

from datasets import ClassLabel, DatasetDict, Features, Value, load_dataset

from .files import FORMATS, read_data_file
from .tasks import GLUE_HUB_ID, STSB_RANGE, get_task


# How many offending values an error message shows.
_SHOWN = 5


@dataclass
class GlueData:
    """Loaded, checked data and what the rest of a run needs to know about it."""

    datasets: DatasetDict  # "train" and the evaluation splits, in the Hub's schema
    text_columns: tuple
    label_names: list | None  # None: regression
    eval_splits: tuple
    dataset_id: str  # for the model card: a Hub id, or the local files' names
    dataset_config: str | None  # the GLUE task on the Hub, when there is one

    @classmethod
    def for_task(cls, task, datasets, eval_splits, dataset_id):
        """The data of a GLUE task: its text columns and label set come from the task."""
        label_names = None if task.is_regression else list(task.label_names)
        return cls(datasets, task.text_columns, label_names, eval_splits, dataset_id, task.name)

    @property
    def is_regression(self):
        return self.label_names is None


def load_glue_data(
    task_name=None,
    glue_dir=None,
    train_file=None,
    validation_file=None,
    need_train=True,
    need_eval=True,
    cache_dir=None,
    text_columns=None,
    label_column=None,
):
    """Loads the splits a run needs (`train` when `need_train`, the evaluation splits when `need_eval`).
    `text_columns` and `label_column` name the columns of the user's own files that hold the text (the task's, in
    its order) and the label (None: the task's text columns, or read off the data; `label`)."""
    if not (need_train or need_eval):
        raise ValueError("Nothing to load: ask for the training split, the evaluation split(s), or both.")
    task = get_task(task_name) if task_name is not None else None
    user_files = train_file is not None or validation_file is not None
    if glue_dir is not None and user_files:
        raise ValueError("Give either `glue_dir` (original GLUE TSVs) or `train_file`/`validation_file`, not both.")
    if user_files:
        columns = _own_columns(task, text_columns, label_column)
        return _load_files(task, train_file, validation_file, need_train, need_eval, cache_dir, columns)
    if text_columns is not None or label_column is not None:
        raise ValueError(
            "`text_columns` and `label_column` name the columns of your own files; give them with "
            "`train_file`/`validation_file`."
        )
    if task is None:
        raise ValueError("Name a GLUE task (`task_name`), or give your own `train_file`/`validation_file`.")
    if glue_dir is not None:
        return _load_glue_dir(task, glue_dir, need_train, need_eval, cache_dir)
    return _load_hub(task, need_train, need_eval, cache_dir)


def _wanted_splits(task, need_train, need_eval):
    return (("train",) if need_train else ()) + (task.eval_splits if need_eval else ())


def _load_hub(task, need_train, need_eval, cache_dir):
    try:
        raw = load_dataset(GLUE_HUB_ID, task.name, cache_dir=cache_dir)
    except ConnectionError as error:  # offline, or the Hub out of reach: datasets says ConnectionError for both
        files = " and ".join(f"<dir>/{task.tsv.folder}/{name}" for name in task.tsv_names)
        raise ValueError(
            f"Could not fetch {GLUE_HUB_ID!r} ({task.name}) from the Hub ({error}). Put the original GLUE TSVs in "
            f"a folder ({files}) and pass it as --glue_dir (make glue: GLUE_DIR=<dir>)."
        ) from error
    splits = DatasetDict({split: raw[split] for split in _wanted_splits(task, need_train, need_eval)})
    keep = [*task.text_columns, "label"]
    splits = splits.remove_columns(
        [
            column
            for column in splits["train" if need_train else task.eval_splits[0]].column_names
            if column not in keep
        ]
    )
    return GlueData.for_task(task, splits, task.eval_splits if need_eval else (), GLUE_HUB_ID)


def _load_glue_dir(task, glue_dir, need_train, need_eval, cache_dir):
    folder = os.path.join(glue_dir, task.tsv.folder)
    if not os.path.isdir(glue_dir):
        raise ValueError(f"GLUE data folder {glue_dir!r} does not exist.")
    if not os.path.isdir(folder):
        raise ValueError(f"GLUE data folder {glue_dir!r} has no {task.tsv.folder!r} folder for task {task.name!r}.")
    files = {
        split: os.path.join(folder, task.tsv.eval_files.get(split, "train.tsv"))
        for split in _wanted_splits(task, need_train, need_eval)
    }
    splits = DatasetDict({split: _read_tsv(task, path, cache_dir) for split, path in files.items()})
    splits = _normalise(task, splits, files)
    return GlueData.for_task(task, splits, task.eval_splits if need_eval else (), GLUE_HUB_ID)


def _read_tsv(task, path, cache_dir):
    """One original GLUE TSV: no quoting (sentences hold stray quotes), no NA guessing, all text."""
    if not os.path.isfile(path):
        raise ValueError(f"GLUE file {path!r} for task {task.name!r} does not exist.")
    layout = task.tsv
    wanted = list(layout.columns.values())
    header_names = layout.header_names
    if layout.has_header:
        # utf-8-sig drops the byte-order mark that starts MRPC's header.
        with open(path, encoding="utf-8-sig") as handle:
            header_names = handle.readline().rstrip("\n").split("\t")
    missing = [name for name in wanted if name not in header_names]
    if missing:
        raise ValueError(f"{path!r} is not a GLUE {task.name!r} file: its header {header_names} lacks {missing}.")
    dataset = load_dataset(
        "csv",
        data_files={"data": path},
        sep="\t",
        quoting=csv.QUOTE_NONE,
        encoding="utf-8-sig",
        header=0 if layout.has_header else None,
        column_names=None if layout.has_header else list(header_names),
        usecols=wanted,
        keep_default_na=False,
        features=Features({name: Value("string") for name in wanted}),
        cache_dir=cache_dir,
    )["data"]
    return dataset.rename_columns(
        {file_name: hub_name for hub_name, file_name in layout.columns.items() if file_name != hub_name}
    )


@dataclass(frozen=True)
class OwnColumns:
    """Which columns of the user's files hold the text and the label: `text` None reads them off the data."""

    text: tuple | None
    label: str

    def renames(self, task):
        """The file's column names to the task's (the label's to `label`)."""
        renames = {self.label: "label"}
        if task is not None and self.text is not None:
            renames.update(zip(self.text, task.text_columns, strict=True))
        return {name: new for name, new in renames.items() if name != new}


def _own_columns(task, text_columns, label_column):
    """The columns the user's files are read by, or a ValueError for a count of text columns the task (or a
    sentence-pair model) does not take."""
    if text_columns is not None:
        text_columns = tuple(text_columns)
        wanted = len(task.text_columns) if task is not None else None
        if wanted is not None and len(text_columns) != wanted:
            raise ValueError(
                f"Task {task.name!r} takes {wanted} text column(s) ({', '.join(task.text_columns)}); "
                f"`text_columns` names {len(text_columns)}: {list(text_columns)}."
            )
        if not 1 <= len(text_columns) <= 2:
            raise ValueError(f"`text_columns` names one column or a pair; got {list(text_columns)}.")
    return OwnColumns(text_columns, label_column or "label")


def _load_files(task, train_file, validation_file, need_train, need_eval, cache_dir, columns):
    files = {}
    for split, path, needed in (("train", train_file, need_train), ("validation", validation_file, need_eval)):
        if not needed:
            continue
        if path is None:
            raise ValueError(
                f"No {split} file: give `{split}_file` ({', '.join(FORMATS)}) or skip the "
                f"{'training' if split == 'train' else 'evaluation'}."
            )
        if not os.path.isfile(path):
            raise ValueError(f"{split} file {path!r} does not exist.")
        files[split] = path
    text_columns = columns.text or (task.text_columns if task is not None else None)
    splits = DatasetDict(
        {
            split: _own_file_columns(read_data_file(path, columns.label, cache_dir, text_columns), path, task, columns)
            for split, path in files.items()
        }
    )
    if task is not None:
        eval_splits = ("validation",) if need_eval else ()
        return GlueData.for_task(task, _normalise(task, splits, files), eval_splits, _files_id(files))
    return _normalise_untasked(splits, files, need_eval, columns.text)


def _own_file_columns(dataset, path, task, columns):
    """`dataset` (read from `path`) with the columns of `columns` renamed to the task's, or a ValueError for one it
    lacks."""
    named = [*(columns.text or ()), columns.label]
    missing = [name for name in named if name not in dataset.column_names]
    if missing:
        flags = "--label_column" if missing == [columns.label] else "--text_columns and --label_column"
        raise ValueError(
            f"{path!r} has no column(s) {missing}; it has {dataset.column_names}: name yours with {flags}."
        )
    renames = columns.renames(task)
    clashing = [new for name, new in renames.items() if new in dataset.column_names and new not in renames]
    if clashing:
        raise ValueError(
            f"{path!r} has a column {clashing[0]!r} besides the one renamed to it ({renames}); rename or drop it."
        )
    return dataset.rename_columns(renames)


def _files_id(files):
    return ", ".join(os.path.basename(path) for path in files.values())


def _normalise(task, splits, files):
    """Keeps the task's columns and turns every label into the task's label id (or a float for STS-B)."""
    wanted = [*task.text_columns, "label"]
    for split, dataset in splits.items():
        missing = [column for column in wanted if column not in dataset.column_names]
        if missing:
            raise ValueError(
                f"{files[split]!r} lacks the column(s) {missing} that task {task.name!r} needs; "
                f"it has {dataset.column_names}."
            )
        _check_text(dataset, task.text_columns, files[split])
    splits = splits.select_columns(wanted)
    if task.is_regression:
        return DatasetDict({split: _to_scores(dataset, files[split], STSB_RANGE) for split, dataset in splits.items()})
    return DatasetDict(
        {
            split: _to_label_ids(dataset, task.label_names, files[split], task.text_columns)
            for split, dataset in splits.items()
        }
    )


def _check_text(dataset, text_columns, path):
    for column in text_columns:
        if dataset.features[column] != Value("string") and dataset.features[column] != Value("large_string"):
            raise ValueError(f"Column {column!r} of {path!r} must hold text; it holds {dataset.features[column]}.")


def _label_lookup(label_names, accept_ids):
    """A GLUE label may be given as its name, its id, or its id written as text (the TSVs write '0'/'1');
    the user's own labels only by name, since their names may themselves be numbers."""
    lookup = {name: index for index, name in enumerate(label_names)}
    if accept_ids:
        lookup.update({str(index): index for index in range(len(label_names))})
    return lookup


def _to_label_ids(dataset, label_names, path, text_columns, accept_ids=True):
    lookup = _label_lookup(label_names, accept_ids)
    seen = set(dataset.unique("label"))
    bad = sorted((value for value in seen if _key(value) not in lookup), key=repr)
    if bad:
        raise ValueError(
            f"{path!r} has labels outside the label set: {bad[:_SHOWN]}{' ...' if len(bad) > _SHOWN else ''}; "
            f"allowed: {list(label_names)}{f' (or their ids 0..{len(label_names) - 1})' if accept_ids else ''}."
        )
    features = Features(
        {**{column: Value("string") for column in text_columns}, "label": ClassLabel(names=list(label_names))}
    )
    return dataset.map(
        lambda batch: {"label": [lookup[_key(value)] for value in batch["label"]]},
        batched=True,
        features=features,
        desc="Mapping labels",
    )


def _key(value):
    """A label value as the lookup knows it: ints (not bools, not floats) by their text."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return str(value)


def _to_scores(dataset, path, bounds=None):
    values = dataset.unique("label")
    bad = []
    for value in values:
        try:
            score = float(value)
        except (TypeError, ValueError):
            bad.append(value)
            continue
        if score != score or (bounds is not None and not bounds[0] <= score <= bounds[1]):
            bad.append(value)
    if bad:
        allowed = f"numbers in [{bounds[0]}, {bounds[1]}]" if bounds is not None else "numbers"
        raise ValueError(
            f"{path!r} has labels outside the label set: {sorted(bad, key=repr)[:_SHOWN]}; allowed: {allowed}."
        )
    return dataset.cast_column("label", Value("float32"))


def _guess_text_columns(others, path):
    """The text columns of a file whose columns besides the label are `others`: sentence1 and sentence2 where it
    has them, else its first two."""
    if "sentence1" in others and "sentence2" in others:
        return ("sentence1", "sentence2")
    if not others:
        raise ValueError(f"{path!r} has no text column besides the label.")
    return tuple(others[:2])


def _normalise_untasked(splits, files, need_eval, text_columns=None):
    """The user's own task: the label set read off the data, as transformers' run_glue does, and the text columns
    too where `text_columns` (None) does not name them."""
    reference = "train" if "train" in splits else "validation"
    columns = splits[reference].column_names
    if text_columns is None:
        text_columns = _guess_text_columns([column for column in columns if column != "label"], files[reference])
    for split, dataset in splits.items():
        missing = [column for column in (*text_columns, "label") if column not in dataset.column_names]
        if missing:
            raise ValueError(f"{files[split]!r} lacks the column(s) {missing} that {files[reference]!r} has.")
        _check_text(dataset, text_columns, files[split])
    splits = splits.select_columns([*text_columns, "label"])
    dtype = splits[reference].features["label"].dtype
    eval_splits = ("validation",) if need_eval else ()
    if dtype in ("float32", "float64"):
        scored = DatasetDict({split: _to_scores(dataset, files[split]) for split, dataset in splits.items()})
        return GlueData(scored, text_columns, None, eval_splits, _files_id(files), None)
    # The names as the labels read once cast to text (a .csv's true/false, which pandas reads as booleans, are
    # 'true' and 'false' there, not Python's 'True' and 'False'), in order of their numbers where they are integers.
    as_text = {split: dataset.cast_column("label", Value("string")) for split, dataset in splits.items()}
    numeric = splits[reference].features["label"].dtype.startswith("int")
    label_names = sorted(as_text[reference].unique("label"), key=int if numeric else str)
    labelled = DatasetDict(
        {
            split: _to_label_ids(
                as_text[split],
                label_names,
                files[split],
                text_columns,
                accept_ids=False,
            )
            for split in splits
        }
    )
    return GlueData(labelled, text_columns, label_names, eval_splits, _files_id(files), None)


__all__ = ["GlueData", "load_glue_data"]
