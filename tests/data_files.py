"""Writing the examples of a data-file test in the format its file's extension names."""

import csv
import json


def write_examples(path, rows):
    """`rows` (dicts) one example a row: a .csv with a header of every key (a key a row lacks: an empty field), a
    .jsonl one object a line, a .json one array. Returns `path`."""
    if path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, list(dict.fromkeys(key for row in rows for key in row)))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        path.write_text(json.dumps(rows))
    return path
