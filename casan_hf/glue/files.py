"""The user's own data files (run_glue's and run_translation's `--train_file`/`--validation_file`/`--test_file`,
run_mlm's `--train_file`), read by their extension, each checked row by row before `datasets` reads it.

- `.csv`: comma-separated, a header row first, fields quoted with `"` where they hold a comma;
- `.tsv`: tab-separated, a header row first, nothing quoted (as GLUE ships its files);
- `.json` / `.jsonl`: one JSON object a line (a `.json` file may also hold one JSON array of objects).

What `datasets`, pandas or the tokenizer would stop on with a traceback (an empty file, a header alone, a row that
does not parse, a comma file named `.tsv` or a tab file named `.csv`, a missing, null or nested value, labels of
mixed types), and what they would read as something else (a row without a label, a missing value; a NaN label), is
a ValueError here in one line naming the file, the line, the value and what to do. A JSON boolean is no label (a
file of `true`/`false` labels writes them as text, which a .csv or .tsv file does already). A file without labels
(run_mlm's texts, run_translation's pairs) is checked with `label_column=None`.
"""

import csv
import json
import math
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


def read_data_file(path, label_column="label", cache_dir=None, text_columns=None):
    """The examples of `path` as a `Dataset`, its columns as the file names them, once `check_data_file` passed."""
    check_data_file(path, label_column, text_columns)
    return load_data_file(path, cache_dir)


def load_data_file(path, cache_dir=None):
    """The examples of `path` as `datasets` reads its format, every value of a .csv or .tsv file as its text: for
    a file its caller has checked (`check_data_file`, or `data_file_rows` and `check_values`)."""
    data_format = file_format(path)
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


def check_data_file(path, label_column="label", text_columns=None):
    """A ValueError, in one line naming `path`, the line and what to do, for a file that cannot be read as its
    extension says, holds an example without a value in `label_column` (None: the file has no labels), or a value
    the training cannot take (`check_values`; `text_columns` None: every column but the label is text)."""
    rows, where = data_file_rows(path, label_column, text_columns)
    check_values(path, rows, label_column, text_columns, where)


def data_file_rows(path, label_column=None, text_columns=None):
    """`(rows, where)`: the examples of `path` as `(number, row)` pairs, each row a dict of a delimited file's
    fields (text) or a JSON value, and what `number` counts ("line", or "example" in a JSON array); a ValueError
    for a file that does not parse as its extension says, or an example without a label in `label_column`.
    `text_columns` only shape the example an error message gives."""
    data_format = file_format(path)
    columns = [*(text_columns or ["sentence"]), *([label_column] if label_column is not None else [])]
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            if data_format is JSON:
                return _check_json(path, handle.read(), label_column, columns)
            return _check_delimited(path, data_format, handle, label_column, columns), "line"
    except UnicodeDecodeError as error:
        raise ValueError(f"{path!r} is not UTF-8 text ({error}): save it as UTF-8.") from None


def _other_format(data_format):
    return TSV if data_format is CSV else CSV


def _check_delimited(path, data_format, handle, label_column, columns):
    other = _other_format(data_format)
    rows = data_format.reader(handle)
    try:
        header = next((row for row in rows if row), None)
        if header is None:
            raise ValueError(
                f"{path!r} is empty: write a header row naming the columns (e.g. {data_format.delimiter.join(columns)}"
                "), then one example a line."
            )
        if len(header) == 1 and other.delimiter in header[0]:
            raise ValueError(
                f"{path!r} looks {other.separated}, not {data_format.separated} (its header is {header[0]!r}): "
                f"rename it to .{other.name}."
            )
        width, label_at = len(header), header.index(label_column) if label_column in header else None
        examples, unlabelled = [], []
        for row in rows:
            if not row:
                continue
            examples.append((rows.line_num, dict(zip(header, row, strict=False))))
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
    return examples


def _fix_fields(data_format):
    """What to do about a row of a delimited file that has too few or too many fields."""
    if data_format is CSV:
        return 'quote a field that holds a comma ("a, b"); a tab-separated file must be named .tsv.'
    return "a field may not hold a tab (nothing is quoted in a .tsv); a comma-separated file must be named .csv."


def _check_json(path, text, label_column, columns):
    example = "e.g. " + json.dumps({name: "positive" if name == label_column else "a fine film" for name in columns})
    if not text.strip():
        raise ValueError(f"{path!r} is empty: write one JSON object a line, {example}.")
    if text.lstrip().startswith("["):
        try:
            rows = [(index, row) for index, row in enumerate(json.loads(text), 1)]
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
                rows.append((number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{path!r} line {number} is not JSON ({error.msg}, column {error.colno}): write one JSON object "
                    f"a line, {example}."
                ) from None
    if not rows:
        raise ValueError(f"{path!r} holds no examples: write one JSON object a line, {example}.")
    where = "example" if text.lstrip().startswith("[") else "line"
    unlabelled = []
    for number, row in rows:
        if not isinstance(row, dict):
            raise ValueError(
                f"{path!r} {where} {number} is a JSON {type(row).__name__}, not an object: write one object an "
                f"example, {example}."
            )
        if label_column is None:
            continue
        if row.get(label_column) is None or (isinstance(row[label_column], str) and not row[label_column].strip()):
            unlabelled.append(number)
    _refuse_unlabelled(path, unlabelled, label_column, where)
    return rows, where


def _label_kind(value):
    """What a label is written as: "text" or "number"; or, for a value that is no label, why not."""
    if isinstance(value, bool):
        return 'a JSON boolean, which is no label name: write it as text ("true") or as a number'
    if isinstance(value, (dict, list)):
        return f"a nested JSON {type(value).__name__}, where a label is one name or number"
    try:
        finite = math.isfinite(float(value))
    except ValueError:
        return "text"
    if not finite:
        return "not a finite number: write a number or a label name"
    return "text" if isinstance(value, str) else "number"


def check_values(path, rows, label_column, text_columns, where="line"):
    """Every example's values are what the training reads: each text column the file has (`text_columns`; None:
    every column but the label, which may also hold numbers) holds text, and each label is text or a finite number,
    written alike on every line (a file mixing `1` and `"0"` fails in `datasets`' JSON reader), not a JSON boolean,
    not nested. A ValueError names the first offending line and its value."""
    present = dict.fromkeys(name for _, row in rows for name in row)  # a column absent throughout: the reader's
    named = text_columns is not None
    columns = [name for name in text_columns or present if name in present and name != label_column]
    first = None
    for number, row in rows:
        for column in columns:
            value = row.get(column)
            blank = value is None or isinstance(value, (dict, list)) or (isinstance(value, str) and not value.strip())
            if blank or (named and not isinstance(value, str)):
                shown = "missing" if column not in row else "null" if value is None else repr(value)
                raise ValueError(
                    f"{path!r} {where} {number} has no text in column {column!r} ({shown}): write its text, one "
                    "string, or remove the example."
                )
        if label_column not in row:
            continue
        label = row[label_column]
        kind = _label_kind(label)
        if kind not in ("text", "number"):
            raise ValueError(f"{path!r} {where} {number} has the label {label!r}, {kind}.")
        first = first or (number, label, kind)
        if kind != first[2]:
            raise ValueError(
                f"{path!r} {where} {number} has the label {label!r} ({kind}) where {where} {first[0]} has "
                f"{first[1]!r} ({first[2]}): write every label alike, all as text or all as numbers."
            )


def _refuse_unlabelled(path, unlabelled, label_column, where="line"):
    if not unlabelled:
        return
    first, others = unlabelled[0], unlabelled[1:]
    more = f" (and {where}s {', '.join(map(str, others[:_SHOWN]))}{' ...' if len(others) > _SHOWN else ''})"
    raise ValueError(
        f"{path!r} {where} {first} has no label in column {label_column!r}{more if others else ''}: label it or "
        "remove it (a file of another label column: name it with --label_column)."
    )


__all__ = [
    "FORMATS",
    "FileFormat",
    "check_data_file",
    "check_values",
    "data_file_rows",
    "file_format",
    "load_data_file",
    "read_data_file",
]
