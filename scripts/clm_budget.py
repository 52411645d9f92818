#!/usr/bin/env python
"""Chooses a causal study's training budget from its twin's validation curve (docs/CAUSAL.md, the confirmatory
study): the run of scripts/clm_sweep.py in `--run_dir`, trained with `--eval_strategy steps`, is read back (its
`trainer_state.json` and `run_start.json`), and its validation cross-entropy at every evaluation, the step of the
lowest, the command line and commit it ran with go into `--out` (JSON), with the curve drawn into `--figure`.
Nothing is trained and nothing but the validation part is read: the test part plays no part in the choice.

    python scripts/clm_budget.py --run_dir runs/clm/micro-1500steps/none/seed0 \
        --out docs/results/clm_tinyshakespeare_confirm_budget.json --figure docs/images/clm_confirm_budget.png
"""

import argparse
import json
import sys
from pathlib import Path

from casan_hf.cli.extras import require_packages
from casan_hf.studies.causal import budget_from_curve


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run_dir", type=Path, required=True, help="A finished run of the twin that evaluated.")
    parser.add_argument("--out", type=Path, required=True, help="The JSON file to write (refused if it exists).")
    parser.add_argument("--figure", type=Path, help="A PNG of the curve and the chosen step. Needs matplotlib.")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists: give another file (nothing is overwritten).")
    if args.figure is not None:
        require_packages("clm_budget.py", "matplotlib", what="--figure")
    try:
        budget = budget_from_curve(args.run_dir)
    except (OSError, ValueError) as error:
        sys.exit(f"clm_budget.py: error: {error}")
    args.out.write_text(json.dumps(budget, indent=1) + "\n", encoding="utf-8")
    if args.figure is not None:
        draw_curve(budget, args.figure)
    print(f"Lowest validation cross-entropy {budget['lowest']['validation_cross_entropy']:.4f} at step "
          f"{budget['lowest']['step']} of {budget['max_steps']}: the budget. Written to {args.out}.")  # fmt: skip


def draw_curve(budget, path):
    """The validation cross-entropy against the step, the lowest point marked."""
    from matplotlib.figure import Figure

    steps = [point["step"] for point in budget["curve"]]
    values = [point["validation_cross_entropy"] for point in budget["curve"]]
    figure = Figure(figsize=(6, 3.5))
    axes = figure.add_subplot()
    axes.plot(steps, values, marker=".", color="tab:blue", label="the twin, seed 0")
    lowest = budget["lowest"]
    axes.axvline(lowest["step"], color="tab:red", linestyle="--", label=f"lowest: step {lowest['step']}")
    axes.set_xlabel("training step")
    axes.set_ylabel("validation cross-entropy (nats)")
    axes.set_title(f"The twin alone, seed 0, on a {budget['max_steps']:,}-step cosine schedule", fontsize=10)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
