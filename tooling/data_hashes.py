"""The sha256 of the data that a committed study's runs read, for records made before a run kept it: the files its
command named, under the shared data folder (`../shared` beside the repository), hashed as they are now.

A GLUE run read its task's original TSVs from `--glue_dir ../shared/glue` (`glue.tasks.glue_files`); a translation
run read `<prefix>.<lang>` of `--data_dir` at the prefixes and languages of `run_translation.py`'s defaults, from
`../shared/mt/multi30k` or, on a GPU node, `.device/multi30k`, the copy `scripts/device/prepare.sh` makes of it. A
record that names other data is left as it is, and `add_data_hashes` says why."""

import json
import os
from pathlib import Path

from casan_hf.cli.run_start import data_fingerprint
from casan_hf.glue.tasks import glue_files
from casan_hf.studies.grid import load_results, write_atomically

from .catalog import swept_studies


# Where each sweep's runs read their data, relative to the shared folder, and the data folders a record may name
# for it (the device's copy included).
SHARED_DATA = {"glue": "glue", "translation": "mt/multi30k"}
TRANSLATION_DIRS = ("../shared/mt/multi30k", "/work/shared/mt/multi30k", ".device/multi30k")
# run_translation.py's defaults, which name the files a run read.
TRANSLATION_DEFAULTS = {
    "--train_prefix": "train",
    "--validation_prefix": "val",
    "--test_prefix": "test_2016_flickr",
    "--source_lang": "en",
    "--target_lang": "de",
}
TRANSLATION_FILES = tuple(
    f"{prefix}.{lang}"
    for prefix in ("train", "val", "test_2016_flickr")
    for lang in (TRANSLATION_DEFAULTS["--source_lang"], TRANSLATION_DEFAULTS["--target_lang"])
)


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def read_files(sweep, record, shared):
    """The data files the run of `record` read, under `shared`; a ValueError saying why they are not known."""
    folder = Path(shared) / SHARED_DATA[sweep]
    if sweep == "glue":
        return glue_files(folder, record["task"])
    argv = record.get("received", {}).get("argv")
    if argv is not None:
        if flag_value(argv, "--data_dir") not in TRANSLATION_DIRS:
            raise ValueError(
                f"it read --data_dir {flag_value(argv, '--data_dir')!r}, none of {', '.join(TRANSLATION_DIRS)}"
            )
        other = [
            flag for flag, default in TRANSLATION_DEFAULTS.items() if flag_value(argv, flag) not in (None, default)
        ]
        if other:
            raise ValueError(f"it named other files ({', '.join(other)})")
    return [folder / name for name in TRANSLATION_FILES]


def with_data_hash(sweep, record, shared):
    """`record` with the sha256 of its data where it has none (`data` kept, `sha256` and `files` added, and where
    they come from); unchanged where it has one; a ValueError where its files are not known or not there."""
    data = record.get("data") or {}
    if data.get("sha256"):
        return record
    paths = read_files(sweep, record, shared)
    missing = [str(path) for path in paths if not os.path.isfile(path)]
    if missing:
        raise ValueError(f"its data files are not there: {', '.join(missing)}")
    fingerprint = data_fingerprint(paths)
    where = f"as {SHARED_DATA[sweep]} of the shared data folder holds them now"
    hashed = {**fingerprint, "hashed_later": f"the files its command read, {where}"}
    return {**record, "data": {**data, **hashed}}


def add_data_hashes(repository, shared):
    """Adds the data hash to every record of every study a sweep ran from the catalog (its commands name its data)
    that has none and whose data is under `shared`, rewriting its results file. Returns `{results file: (records
    hashed, {reason: records not hashed})}`."""
    report = {}
    for study in swept_studies():
        path = Path(repository) / study.results
        records = load_results(path)
        hashed, skipped, updated = 0, {}, []
        for record in records:
            try:
                new = with_data_hash(study.sweep, record, shared)
            except ValueError as error:
                skipped[str(error)] = skipped.get(str(error), 0) + 1
                new = record
            hashed += new is not record
            updated.append(new)
        if hashed:
            write_atomically(path, json.dumps(updated, indent=2) + "\n")
        report[study.results] = (hashed, skipped)
    return report
