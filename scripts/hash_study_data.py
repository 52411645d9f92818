#!/usr/bin/env python
"""Adds the sha256 of the data files to the committed studies' records that were made before a run kept it
(`tooling/data_hashes.py`): the files each run's command read, under the shared data folder, hashed as they
are now. Records that have a hash, or whose files are not there, are left as they are; it prints, per results
file, how many records it hashed and why it left the others.

    python scripts/hash_study_data.py --shared ../shared
"""

import argparse
import sys
from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.append(str(REPOSITORY))  # the repository's tooling (tooling/, beside scripts/)
from tooling.data_hashes import add_data_hashes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", default=str(REPOSITORY.parent / "shared"), help="The shared data folder.")
    args = parser.parse_args(argv)
    if not Path(args.shared).is_dir():
        parser.error(f"--shared {args.shared!r} is not a folder.")
    for results, (hashed, skipped) in add_data_hashes(REPOSITORY, args.shared).items():
        reasons = "; ".join(f"{count} not: {reason}" for reason, count in skipped.items())
        print(f"{results}: {hashed} hashed" + (f"; {reasons}" if reasons else ""))


if __name__ == "__main__":
    main()
