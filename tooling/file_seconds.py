"""tests/file_seconds.txt from a pytest log with `--durations=0`: each test file's time (its tests' setup, call and
teardown added up), longest first. tests/conftest.py hands the files to the two pytest processes in that order, so
that the longest start first and the run does not end with one process idle beside the other's last long file.

    python -m tooling.file_seconds LOG   # LOG: the output of `make test`'s pytest command with --durations=0
"""

import re
import sys
from collections import Counter
from pathlib import Path


FILE_SECONDS = Path(__file__).resolve().parents[1] / "tests" / "file_seconds.txt"
DURATION = re.compile(r"^(?P<seconds>[0-9.]+)s (?:setup|call|teardown)\s+(?P<file>tests/[^:\s]+\.py)::")
HEADER = (
    "# Each test file's time in `make test`'s pytest run with --durations=0, longest first: tests/conftest.py starts\n"
    "# the longest files first (docs/TESTS_TIME.md). Written by `python -m tooling.file_seconds LOG`.\n"
)


def file_seconds(log_text):
    """`{test file: seconds}` from a pytest log's durations."""
    seconds = Counter()
    for line in log_text.splitlines():
        match = DURATION.match(line)
        if match:
            seconds[match["file"]] += float(match["seconds"])
    if not seconds:
        raise ValueError("the log holds no durations: run pytest with --durations=0")
    return seconds


def read(path=FILE_SECONDS):
    """`{test file: seconds}` as tests/file_seconds.txt lists them (what `main` writes)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return {name: float(seconds) for seconds, name in (line.split() for line in lines if line and line[0] != "#")}


def main(argv):
    if len(argv) != 1:
        raise SystemExit("usage: python -m tooling.file_seconds LOG")
    seconds = file_seconds(Path(argv[0]).read_text(encoding="utf-8"))
    lines = [f"{value:.0f} {name}" for name, value in sorted(seconds.items(), key=lambda item: (-item[1], item[0]))]
    FILE_SECONDS.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{FILE_SECONDS}: {len(lines)} files, {sum(seconds.values()):.0f} s in all")


if __name__ == "__main__":
    main(sys.argv[1:])
