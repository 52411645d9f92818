#!/usr/bin/env python
"""Runs the causal language-model study behind docs/CAUSAL.md: arms x seeds of a small Llama trained from scratch
with scripts/run_clm.py on one text, the same data, tokenizer, steps and hyper-parameters for all; each finished
run's cross-entropies, greedy sample, times and what it received as it started go into the results file
(`--results`, default `<output_dir>/results.json`) and the paired tables (each arm against `none`, the same Llama
without context, of the same seed) into the `.md` beside it (`casan_hf.studies`).

The text (`--text_file`) is cut in order at blank lines into training, validation and test parts (`--shares`), and a
byte-level BPE tokenizer of `--vocab_size` pieces is trained on the training part alone, once, into
`<output_dir>/data`, which every run reads (its record keeps the sha256 of the files and of the tokenizer); a folder
holding other parts or another tokenizer is refused. Nothing is selected on the test part: each run's final model is
scored on the validation and test parts, by its cross-entropy per token, and writes its greedy continuation of
`--sample_prompt`.

A run with a record in the results file is not run again: the sweep can be stopped and started again, on this
machine or on a fresh clone holding the committed results file. A run cut off on this machine resumes from its last
complete checkpoint (one every `--save_steps`).

    python scripts/clm_sweep.py --study clm-tinyshakespeare-cpu --text_file ../shared/lm/tinyshakespeare/input.txt \
        --output_dir runs/clm --parallel 2
"""

import argparse
import sys
from pathlib import Path

from casan_hf.cli.extras import TRAINING, require_packages
from casan_hf.studies import (
    Arm,
    Run,
    add_sweep_arguments,
    arm_argument,
    parse_grid_args,
    run_study,
    start_or_resume,
    study_variants,
)
from casan_hf.studies.causal import MODEL_SIZES, TWIN, collect, comparisons, data_paths, prepare_data, tables


# The repository's tooling (tooling/, beside scripts/): the catalog of its committed studies.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from tooling.catalog import run_sweep_command_line, study_names


RUN_CLM = Path(__file__).resolve().parent / "run_clm.py"
REPOSITORY = RUN_CLM.parents[1]  # where a --study's results file lives


def make_parser():
    variants = study_variants((TWIN,))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sweep_arguments(parser, study_names("clm"))
    parser.add_argument("--text_file", required=True, help="The text, blocks separated by blank lines.")
    parser.add_argument(
        "--shares", nargs=3, type=float, default=[0.9, 0.05, 0.05], help="Training, validation, test characters."
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        type=arm_argument(variants, option_free=(TWIN,)),
        default=[Arm(TWIN)],
        metavar="VARIANT[:OPTION=VALUE,...]",
        help=f"The arms: a context type ({', '.join(variants)}) with the context options it sets, e.g. "
        "global:gate_bias_init=0,gate_per_head=true.",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--model_size", choices=list(MODEL_SIZES), default="micro")
    parser.add_argument("--max_steps", type=int, default=1500)
    parser.add_argument("--vocab_size", type=int, default=2048)
    parser.add_argument("--block_size", type=int, default=256)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="Peak of the cosine schedule.")
    parser.add_argument("--warmup_steps", type=int, default=100)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--save_steps", type=int, default=250, help="A checkpoint every N steps, to resume from.")
    parser.add_argument("--sample_prompt", default="ROMEO:\n", help="The greedy sample's prompt.")
    parser.add_argument("--sample_max_new_tokens", type=int, default=100)
    return parser


def parse_args(argv=None):
    """One grid's flags, checked (a `--study` is expanded by `main` first)."""
    args, args.run_clm_args = parse_grid_args(make_parser(), argv, TWIN)
    return args


def run_settings(args):
    """What a run's result depends on beside its identity (size, steps, variant, seed) and the data's path: its
    record keeps them, and its commands are made from them."""
    return {
        "shares": args.shares,
        "vocab_size": args.vocab_size,
        "block_size": args.block_size,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "weight_decay": args.weight_decay,
        "sample_prompt": args.sample_prompt,
        "sample_max_new_tokens": args.sample_max_new_tokens,
        "run_clm_args": args.run_clm_args,
    }


def command(args, settings, data, arm, seed, out):
    """Training from scratch, then the validation and test cross-entropy and the greedy sample of the final model,
    with the run's `settings`; the extra flags go last."""
    sizes = [item for name, value in MODEL_SIZES[args.model_size].items() for item in (f"--{name}", str(value))]
    train = [sys.executable, str(RUN_CLM), "--model_type", "llama", *sizes, "--tokenizer_name", data["tokenizer"]]
    train += ["--context_type", arm.variant, *arm.flags(), "--seed", str(seed)]
    train += ["--train_file", data["train"], "--validation_file", data["validation"], "--test_file", data["test"]]
    train += ["--block_size", str(settings["block_size"]), "--do_train", "--do_eval", "--do_predict"]
    train += ["--max_steps", str(args.max_steps), "--per_device_train_batch_size", str(settings["batch_size"])]
    train += ["--per_device_eval_batch_size", str(settings["batch_size"])]
    train += ["--learning_rate", str(settings["learning_rate"]), "--lr_scheduler_type", "cosine"]
    train += ["--warmup_steps", str(settings["warmup_steps"]), "--weight_decay", str(settings["weight_decay"])]
    train += ["--save_strategy", "steps", "--save_steps", str(args.save_steps), "--save_total_limit", "1"]
    train += ["--sample_prompt", settings["sample_prompt"]]
    train += ["--sample_max_new_tokens", str(settings["sample_max_new_tokens"])]
    train += ["--logging_steps", "50", "--report_to", "none", "--disable_tqdm", "true", *start_or_resume(out)]
    train += ["--output_dir", str(out), *settings["run_clm_args"]]
    return (train,)


def study_runs(args):
    """Seed by seed, so that each seed's arms and twin finish together; every run reads the data of
    `<output_dir>/data` (`study_data`)."""
    data = data_paths(data_folder(args))
    runs = []
    for seed in args.seeds:
        for arm in args.arms:
            identity = {"model_size": args.model_size, "max_steps": args.max_steps, "variant": arm.name, "seed": seed}
            out = Path(args.output_dir) / f"{args.model_size}-{args.max_steps}steps" / arm.name / f"seed{seed}"
            settings = run_settings(args)
            runs.append(Run(identity, out, command(args, settings, data, arm, seed, out), settings))
    return runs


def data_folder(args):
    return Path(args.output_dir) / "data"


def study_data(args):
    """The study's text parts and tokenizer in `data_folder` (written there the first time, checked after)."""
    return prepare_data(args.text_file, data_folder(args), tuple(args.shares), args.vocab_size, args.block_size)


def run_grid(args):
    """Runs one grid: what it lacks, then its tables and figure."""
    require_packages("clm_sweep.py", *TRAINING, what="Each run of run_clm.py")
    if args.figure:
        require_packages("clm_sweep.py", "matplotlib", what="--figure")
    try:
        study_data(args)
    except (OSError, ValueError) as error:
        sys.exit(f"clm_sweep.py: error: {error}")
    run_study(args, study_runs(args), collect, tables, comparisons)


def main(argv=None):
    run_sweep_command_line(argv, "clm", make_parser, parse_args, run_grid, REPOSITORY)


if __name__ == "__main__":
    main()
