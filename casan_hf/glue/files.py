"""The user's own data files (`--train_file`/`--validation_file`), read by their extension, each checked row by row
before `datasets` reads it.

- `.csv`: comma-separated, a header row first, fields quoted with `"` where they hold a comma;
- `.tsv`: tab-separated, a header row first, nothing quoted (as GLUE ships its files);
- `.json` / `.jsonl`: one JSON object a line (a `.json` file may also hold one JSON array of objects).

What `datasets` and pandas would stop on with a traceback (an empty file, a header alone, a row that does not
parse, a comma file named `.tsv` or a tab file named `.csv`), and a row without a label, which they would read as
a missing value, is a ValueError here in one line naming the file, the line and what to do.
"""

import csv
import json
import os
from dataclasses import dataclass

from datasets import load_dataset


@dataclass(frozen=True)
class FileFormat:
    """How files of one extension are written: `delimiter` None for JSON."""

    name: str
    delimiter: str | None = None
    quoting: int = csv.QUOTE_MINIMAL
    separated: str = ""  # how its fields are separated, in words

    def reader(self, handle):
        return csv.reader(handle, delimiter=self.delimiter, quoting=self.quoting, strict=True)


CSV = FileFormat("csv", ",", separated="comma-separated")
TSV = FileFormat("tsv", "\t", csv.QUOTE_NONE, separated="tab-separated")
JSON = FileFormat("json")

# The formats by file extension; everything else derives from this table.
FORMATS = {".csv": CSV, ".tsv": TSV, ".json": JSON, ".jsonl": JSON}

# How many further offending lines an error message names after the first.
_SHOWN = 5


def file_format(path):
    """The `FileFormat` of `path` by its extension, or a ValueError naming the extensions taken."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in FORMATS:
        raise ValueError(
            f"{path!r}: data files are read by their extension, one of {', '.join(FORMATS)}; "
            f"{extension or 'none'} is not one of them."
        )
    return FORMATS[extension]


def read_data_file(path, label_column="label", cache_dir=None):
    """The examples of `path` as a `Dataset`, its columns as the file names them, once `check_data_file` passed."""
    data_format = file_format(path)
    check_data_file(path, label_column)
    if data_format is JSON:
        return load_dataset("json", data_files={"data": path}, cache_dir=cache_dir)["data"]
    return load_dataset(
        "csv",
        data_files={"data": path},
        sep=data_format.delimiter,
        quoting=data_format.quoting,
        encoding="utf-8-sig",
        keep_default_na=False,  # a sentence "NA" or "null" is text, not a missing value
        cache_dir=cache_dir,
    )["data"]


def check_data_file(path, label_column="label"):
    """A ValueError, in one line naming `path`, the line and what to do, for a file that cannot be read as its
    extension says or holds an example without a value in `label_column`."""
    data_format = file_format(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            if data_format is JSON:
                _check_json(path, handle.read(), label_column)
            else:
                _check_delimited(path, data_format, handle, label_column)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path!r} is not UTF-8 text ({error}): save it as UTF-8.") from None


def _other_format(data_format):
    return TSV if data_format is CSV else CSV


def _check_delimited(path, data_format, handle, label_column):
    other = _other_format(data_format)
    rows = data_format.reader(handle)
    try:
        header = next((row for row in rows if row), None)
        if header is None:
            raise ValueError(
                f"{path!r} is empty: write a header row naming the columns (e.g. sentence{data_format.delimiter}"
                "label), then one example a line."
            )
        if len(header) == 1 and other.delimiter in header[0]:
            raise ValueError(
                f"{path!r} looks {other.separated}, not {data_format.separated} (its header is {header[0]!r}): "
                f"rename it to .{other.name}."
            )
        width, label_at = len(header), header.index(label_column) if label_column in header else None
        examples, unlabelled = 0, []
        for row in rows:
            if not row:
                continue
            examples += 1
            if len(row) != width:
                raise ValueError(
                    f"{path!r} line {rows.line_num}: {len(row)} field(s) where the header has {width} ({header}): "
                    + _fix_fields(data_format)
                )
            if label_at is not None and not row[label_at].strip():
                unlabelled.append(rows.line_num)
    except csv.Error as error:
        raise ValueError(
            f"{path!r} line {rows.line_num} does not parse as {data_format.name.upper()} ({error}): "
            + _fix_fields(data_format)
        ) from None
    if not examples:
        raise ValueError(f"{path!r} has a header row but no examples: add one example a line below it.")
    _refuse_unlabelled(path, unlabelled, label_column)


def _fix_fields(data_format):
    """What to do about a row of a delimited file that has too few or too many fields."""
    if data_format is CSV:
        return 'quote a field that holds a comma ("a, b"); a tab-separated file must be named .tsv.'
    return "a field may not hold a tab (nothing is quoted in a .tsv); a comma-separated file must be named .csv."


def _check_json(path, text, label_column):
    example = f'e.g. {{"sentence": "a fine film", "{label_column}": "positive"}}'
    if not text.strip():
        raise ValueError(f"{path!r} is empty: write one JSON object a line, {example}.")
    if text.lstrip().startswith("["):
        try:
            rows = [(f"example {index}", row) for index, row in enumerate(json.loads(text), 1)]
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{path!r} does not parse as a JSON array ({error}): write one JSON object a line, {example}."
            ) from None
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{path!r} line {number} is not JSON ({error.msg}, column {error.colno}): write one JSON object "
                    f"a line, {example}."
                ) from None
    if not rows:
        raise ValueError(f"{path!r} holds no examples: write one JSON object a line, {example}.")
    unlabelled = []
    for where, row in rows:
        if not isinstance(row, dict):
            raise ValueError(
                f"{path!r} {where} is a JSON {type(row).__name__}, not an object: write one object an example, "
                f"{example}."
            )
        if row.get(label_column) is None or (isinstance(row[label_column], str) and not row[label_column].strip()):
            unlabelled.append(where.removeprefix("line ").removeprefix("example "))
    _refuse_unlabelled(path, unlabelled, label_column, where="example" if text.lstrip().startswith("[") else "line")


def _refuse_unlabelled(path, unlabelled, label_column, where="line"):
    if not unlabelled:
        return
    first, others = unlabelled[0], unlabelled[1:]
    more = f" (and {where}s {', '.join(map(str, others[:_SHOWN]))}{' ...' if len(others) > _SHOWN else ''})"
    raise ValueError(
        f"{path!r} {where} {first} has no label in column {label_column!r}{more if others else ''}: label it or "
        "remove it (a file of another label column: name it with --label_column)."
    )


__all__ = ["FORMATS", "FileFormat", "check_data_file", "file_format", "read_data_file"]
