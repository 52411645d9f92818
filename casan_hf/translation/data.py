"""The parallel data of a translation run (`scripts/run_translation.py`).

Data comes from three places and is brought to one schema, transformers' translation examples' `translation`
column of `{source_lang: ..., target_lang: ...}` pairs:

- `data_dir`: plain text, one sentence a line, `<prefix>.<lang>` (Multi30k's `train.en` / `train.de`);
- `train_file` / `validation_file` / `test_file`: .csv or .tsv (one column per language), .json or .jsonl (a
  `translation` object with both languages, or one key per language), each checked value by value before
  `datasets` reads it (`glue.files`: one line naming the file, the line and the value);
- a Hub dataset with a `translation` column (needs a connection).

Every problem with the input is a ValueError raised here, before any model is built, naming the file and what
is wrong with it.
"""

import os
from dataclasses import dataclass

from datasets import Dataset, DatasetDict, load_dataset

from ..glue.files import check_values, data_file_rows, load_data_file


# The splits a run can read: run_translation's name for each, and the split a Hub dataset calls it.
SPLITS = ("train", "validation", "test")


@dataclass
class ParallelData:
    datasets: DatasetDict  # the requested splits, each with a `translation` column
    dataset_id: str  # for the model card: a Hub id, or the local files
    files: tuple = ()  # the local files read (none from the Hub), whose hash a run's record keeps


def load_parallel_data(
    source_lang,
    target_lang,
    splits,
    data_dir=None,
    prefixes=None,
    files=None,
    dataset_name=None,
    dataset_config_name=None,
    cache_dir=None,
):
    """The `splits` (a subset of `SPLITS`) from exactly one of `data_dir` (with `prefixes`: split -> file
    prefix), `files` (split -> .csv/.tsv/.json/.jsonl path) or `dataset_name`."""
    if source_lang == target_lang:
        raise ValueError(f"--source_lang and --target_lang must differ; both are {source_lang!r}.")
    sources = [
        name
        for name, given in (("--data_dir", data_dir), ("--*_file", files), ("--dataset_name", dataset_name))
        if given
    ]
    if len(sources) != 1:
        raise ValueError(
            f"Give exactly one data source: --data_dir (plain text), --train_file/--validation_file/--test_file "
            f"(.csv, .tsv, .json or .jsonl) or --dataset_name (Hub); got {sources or 'none'}."
        )
    if data_dir:
        return _load_text_dir(data_dir, source_lang, target_lang, {split: prefixes[split] for split in splits})
    if files:
        missing = [split for split in splits if split not in files]
        if missing:
            raise ValueError(f"The run needs the {missing} split(s): give --{missing[0]}_file.")
        return _load_files({split: files[split] for split in splits}, source_lang, target_lang, cache_dir)
    loaded = load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir)
    hub_names = {"validation": ("validation", "valid", "dev"), "train": ("train",), "test": ("test",)}
    datasets = DatasetDict()
    for split in splits:
        name = next((name for name in hub_names[split] if name in loaded), None)
        if name is None:
            raise ValueError(f"{dataset_name!r} has no {split} split; it has {list(loaded)}.")
        datasets[split] = _check_translation_column(loaded[name], source_lang, target_lang, dataset_name)
    return ParallelData(datasets, dataset_name)


def _load_text_dir(data_dir, source_lang, target_lang, prefixes):
    if not os.path.isdir(data_dir):
        raise ValueError(f"--data_dir {data_dir!r} is not a folder.")
    present = sorted(os.listdir(data_dir))
    languages = {name.rsplit(".", 1)[1] for name in present if "." in name}
    unknown = [lang for lang in (source_lang, target_lang) if lang not in languages]
    if unknown:
        raise ValueError(
            f"--data_dir {data_dir!r} does not hold the <prefix>.<lang> layout for {source_lang}-{target_lang}: "
            f"no file ends in .{unknown[0]} (it holds {present[:8]}{' ...' if len(present) > 8 else ''})."
        )
    datasets, read = DatasetDict(), []
    for split, prefix in prefixes.items():
        paths = [os.path.join(data_dir, f"{prefix}.{lang}") for lang in (source_lang, target_lang)]
        for path in paths:
            if not os.path.isfile(path):
                raise ValueError(f"Missing {split} file {path!r} (--{split}_prefix {prefix!r}).")
        source, target = (_read_lines(path) for path in paths)
        if len(source) != len(target):
            raise ValueError(
                f"{paths[0]!r} has {len(source)} lines but {paths[1]!r} has {len(target)}: line i of one must "
                "translate line i of the other."
            )
        pairs = [{source_lang: s, target_lang: t} for s, t in zip(source, target, strict=True)]
        datasets[split] = Dataset.from_dict({"translation": pairs})
        read += paths
    return ParallelData(datasets, data_dir_name(data_dir, source_lang, target_lang), tuple(read))


def data_dir_name(data_dir, source_lang, target_lang):
    """What a model card calls the data of `--data_dir`: the folder's name and the pair, never its path."""
    return f"{os.path.basename(os.path.normpath(data_dir))} ({source_lang}-{target_lang})"


def _read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def _load_files(files, source_lang, target_lang, cache_dir):
    for split, path in files.items():
        if not os.path.isfile(path):
            raise ValueError(f"--{split}_file {path!r} does not exist.")
    for path in files.values():
        _check_pair_file(path, source_lang, target_lang)
    datasets = DatasetDict()
    for split, path in files.items():
        dataset = load_data_file(path, cache_dir)
        if "translation" not in dataset.column_names:
            dataset = dataset.map(
                lambda row: {"translation": {source_lang: row[source_lang], target_lang: row[target_lang]}},
                remove_columns=dataset.column_names,
            )
        datasets[split] = dataset.select_columns(["translation"])
    return ParallelData(datasets, ", ".join(os.path.basename(path) for path in files.values()), tuple(files.values()))


def _check_pair_file(path, source_lang, target_lang):
    """A ValueError in one line naming `path`, the line and the value for a file that is not one pair a row: a
    `translation` object holding both languages, or one column per language, each sentence one string."""
    languages = [source_lang, target_lang]
    rows, where = data_file_rows(path, text_columns=languages)
    columns = list(dict.fromkeys(name for _, row in rows for name in row))
    example = f'{{"translation": {{"{source_lang}": "...", "{target_lang}": "..."}}}}'
    if "translation" in columns:
        pairs = []
        for number, row in rows:
            pair = row.get("translation")
            if not isinstance(pair, dict) or any(lang not in pair for lang in languages):
                shown = "missing" if "translation" not in row else "null" if pair is None else repr(pair)
                raise ValueError(
                    f"{path!r} {where} {number} has the translation {shown}, not an object with both languages "
                    f"{languages}: write one pair a row, e.g. {example}."
                )
            pairs.append((number, pair))
        rows = pairs
    elif any(lang not in columns for lang in languages):
        raise ValueError(
            f"{path!r} needs a 'translation' column or one column per language ({source_lang!r}, "
            f"{target_lang!r}); it has {columns}."
        )
    check_values(path, rows, None, languages, where)


def _check_translation_column(dataset, source_lang, target_lang, where):
    if "translation" not in dataset.column_names:
        raise ValueError(f"{where!r} has no 'translation' column; it has {dataset.column_names}.")
    first = dataset[0]["translation"] if len(dataset) else {}
    missing = [lang for lang in (source_lang, target_lang) if lang not in first]
    if missing:
        raise ValueError(
            f"The translations of {where!r} have the languages {sorted(first)}; {missing} is not among them."
        )
    return dataset.select_columns(["translation"])
