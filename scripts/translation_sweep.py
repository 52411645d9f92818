#!/usr/bin/env python
"""Runs the translation studies behind docs/TRANSLATION*.md: arms x seeds of a model trained from scratch with
scripts/run_translation.py, the same data, steps and hyper-parameters for all; each finished run's scores,
times, final encoder gates and what it received as it started go into the results file (`--results`, default
`<output_dir>/results.json`) and the paired tables (each arm against `none`, the same Marian without context, of
the same seed) into the `.md` beside it (`casan_hf.studies`, shared with the GLUE sweep).

An arm is a context type with the context options it sets (`casan_hf.studies.arms`): `--arms none deep_global
deep_global:gate_bias_init=0,gate_per_head`. Nothing is selected on the test set: each run's final model is scored
on the validation set and on the test set, by its teacher-forced cross-entropy per target token (without label
smoothing) and by BLEU and chrF of its translations, decoded with beam search (`--num_beams`, the paper's 5) and
greedily; test BLEU also per source length.

A run with a record in the results file is not run again: the sweep can be stopped and started again, on this
machine or on a fresh clone holding the committed results file. A run cut off on this machine resumes from the
checkpoint of its last finished epoch.

    python scripts/translation_sweep.py --data_dir ../shared/mt/multi30k --output_dir runs/translation \
        --results docs/results/translation_micro_cpu.json --arms none global deep deep_global \
        --seeds 1 2 3 --model_size micro --num_train_epochs 5 --parallel 2
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
from casan_hf.studies.translation import TWIN, collect, comparisons, tables
from casan_hf.translation import MODEL_SIZES


# The repository's tooling (tooling/, beside scripts/): the catalog of its committed studies.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from tooling.catalog import run_sweep_command_line, study_names


RUN_TRANSLATION = Path(__file__).resolve().parent / "run_translation.py"
REPOSITORY = RUN_TRANSLATION.parents[1]  # where a --study's results file lives


def make_parser():
    variants = study_variants((TWIN,))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sweep_arguments(parser, study_names("translation"))
    parser.add_argument("--data_dir", required=True, help="Plain-text <prefix>.<lang> files (Multi30k's layout).")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument(
        "--arms",
        "--variants",
        nargs="+",
        type=arm_argument(variants, option_free=(TWIN,)),
        default=[Arm(variant) for variant in variants],
        metavar="VARIANT[:OPTION=VALUE,...]",
        help=f"The arms: a context type ({', '.join(variants)}) with the context options it sets, e.g. "
        "deep_global:gate_bias_init=0,gate_per_head=true.",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--model_size", choices=list(MODEL_SIZES), default="micro")
    parser.add_argument("--num_train_epochs", type=float, default=5.0)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="Peak of the inverse-sqrt schedule.")
    parser.add_argument("--warmup_steps", type=int, default=400)
    parser.add_argument("--label_smoothing_factor", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--num_beams", type=int, default=5, help="Beam of the validation and test scores.")
    return parser


def parse_args(argv=None):
    """One grid's flags, checked (a `--study` is expanded by `main` first)."""
    args, args.run_translation_args = parse_grid_args(make_parser(), argv, TWIN)
    return args


def run_settings(args):
    """What a run's result depends on beside its identity (size, epochs, variant, seed) and the data's path: its
    record keeps them, and its commands are made from them."""
    return {
        "source_lang": args.source_lang,
        "target_lang": args.target_lang,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "label_smoothing_factor": args.label_smoothing_factor,
        "dropout": args.dropout,
        "num_beams": args.num_beams,
        "run_translation_args": args.run_translation_args,
    }


def commands(args, settings, arm, seed, out):
    """Training with validation and beam-search test scores (a checkpoint each epoch, the last one kept, to resume
    from), then the greedy test scores of the final model, with the run's `settings`; the extra flags go to both."""
    data = ["--data_dir", args.data_dir]
    data += ["--source_lang", settings["source_lang"], "--target_lang", settings["target_lang"]]
    common = ["--predict_with_generate", "--per_device_eval_batch_size", "128", "--report_to", "none"]
    common += ["--disable_tqdm", "true"]
    train = [sys.executable, str(RUN_TRANSLATION), "--model_size", args.model_size, "--context_type", arm.variant]
    train += arm.flags()
    train += ["--seed", str(seed), *data, "--do_train", "--do_eval", "--do_predict", *common]
    train += ["--num_train_epochs", str(args.num_train_epochs)]
    train += ["--per_device_train_batch_size", str(settings["batch_size"])]
    train += ["--learning_rate", str(settings["learning_rate"]), "--lr_scheduler_type", "inverse_sqrt"]
    train += ["--warmup_steps", str(settings["warmup_steps"])]
    train += ["--label_smoothing_factor", str(settings["label_smoothing_factor"])]
    train += ["--dropout", str(settings["dropout"]), "--num_beams", str(settings["num_beams"])]
    train += ["--save_strategy", "epoch", "--save_total_limit", "1", *start_or_resume(out)]
    train += ["--logging_steps", "100", "--output_dir", str(out)]
    train += settings["run_translation_args"]
    greedy = [sys.executable, str(RUN_TRANSLATION), "--model_name_or_path", str(out), *data, "--do_predict"]
    greedy += [*common, "--num_beams", "1", "--overwrite_output_dir", "--output_dir", str(out / "greedy")]
    greedy += settings["run_translation_args"]
    return train, greedy


def study_runs(args):
    """Seed by seed, so that each seed's arms and twin finish together."""
    runs = []
    for seed in args.seeds:
        for arm in args.arms:
            identity = {
                "model_size": args.model_size,
                "epochs": args.num_train_epochs,
                "variant": arm.name,
                "seed": seed,
            }
            out = Path(args.output_dir) / f"{args.model_size}-{args.num_train_epochs:g}ep" / arm.name / f"seed{seed}"
            settings = run_settings(args)
            runs.append(Run(identity, out, commands(args, settings, arm, seed, out), settings))
    return runs


def run_grid(args):
    """Runs one grid: what it lacks, then its tables and figure."""
    require_packages("translation_sweep.py", *TRAINING, "sacrebleu", what="Each run of run_translation.py")
    if args.figure:
        require_packages("translation_sweep.py", "matplotlib", what="--figure")
    run_study(args, study_runs(args), collect, tables, comparisons)


def main(argv=None):
    run_sweep_command_line(argv, "translation", make_parser, parse_args, run_grid, REPOSITORY)


if __name__ == "__main__":
    main()
