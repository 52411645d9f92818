#!/usr/bin/env python
"""Runs the translation study behind docs/TRANSLATION.md: context variants x seeds of a model trained from scratch
with scripts/run_translation.py, the same data, steps and hyper-parameters for all; each finished run's scores,
times and final encoder gates go into the results file (`--results`, default `<output_dir>/results.json`) and
the paired tables (each variant against `none`, the same Marian without context, of the same seed) into the
`.md` beside it (`casan_hf.training.sweep`, shared with the GLUE sweep).

Nothing is selected on the test set: each run's final model is scored on the validation set and on the test set,
decoded with beam search (`--num_beams`, the paper's 5) and greedily.

A run with a record in the results file is not run again: the sweep can be stopped and started again, on this
machine or on a fresh clone holding the committed results file.

    python scripts/translation_sweep.py --data_dir ../shared/mt/multi30k --output_dir runs/translation \
        --results docs/results/translation_micro_cpu.json --variants none global deep deep_global \
        --seeds 1 2 3 --model_size micro --num_train_epochs 5 --parallel 2
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

from casan_hf.cli.extras import TRAINING, require_packages
from casan_hf.options import CONTEXT_TYPES
from casan_hf.training.sweep import (
    Comparison,
    Run,
    add_sweep_arguments,
    final_gates,
    mean_gates,
    paired_table,
    run_study,
)
from casan_hf.translation import MODEL_SIZES


RUN_TRANSLATION = Path(__file__).resolve().parent / "run_translation.py"
TWIN = "none"
VARIANTS = (TWIN, *(context_type for context_type in CONTEXT_TYPES if context_type != TWIN))  # the table's order
# (title, record field): the paired tables, one per score.
SCORES = (
    ("test BLEU (beam)", "test_bleu"),
    ("test chrF (beam)", "test_chrf"),
    ("test BLEU (greedy)", "greedy_test_bleu"),
    ("test chrF (greedy)", "greedy_test_chrf"),
    ("validation BLEU (beam)", "validation_bleu"),
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sweep_arguments(parser)
    parser.add_argument("--data_dir", required=True, help="Plain-text <prefix>.<lang> files (Multi30k's layout).")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument("--variants", nargs="+", choices=CONTEXT_TYPES, default=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--model_size", choices=list(MODEL_SIZES), default="micro")
    parser.add_argument("--num_train_epochs", type=float, default=5.0)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="Peak of the inverse-sqrt schedule.")
    parser.add_argument("--warmup_steps", type=int, default=400)
    parser.add_argument("--label_smoothing_factor", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--num_beams", type=int, default=5, help="Beam of the validation and test scores.")
    args, args.run_translation_args = parser.parse_known_args(argv)
    if TWIN not in args.variants:
        parser.error(f"--variants must include {TWIN!r}: every CASAN run is paired with its twin of the same seed.")
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


def commands(args, settings, variant, seed, out):
    """Training with validation and beam-search test scores, then the greedy test scores of the final model, with
    the run's `settings`; the extra flags go to both."""
    data = ["--data_dir", args.data_dir]
    data += ["--source_lang", settings["source_lang"], "--target_lang", settings["target_lang"]]
    common = ["--predict_with_generate", "--per_device_eval_batch_size", "128", "--report_to", "none"]
    common += ["--disable_tqdm", "true", "--overwrite_output_dir"]
    train = [sys.executable, str(RUN_TRANSLATION), "--model_size", args.model_size, "--context_type", variant]
    train += ["--seed", str(seed), *data, "--do_train", "--do_eval", "--do_predict", *common]
    train += ["--num_train_epochs", str(args.num_train_epochs)]
    train += ["--per_device_train_batch_size", str(settings["batch_size"])]
    train += ["--learning_rate", str(settings["learning_rate"]), "--lr_scheduler_type", "inverse_sqrt"]
    train += ["--warmup_steps", str(settings["warmup_steps"])]
    train += ["--label_smoothing_factor", str(settings["label_smoothing_factor"])]
    train += ["--dropout", str(settings["dropout"]), "--num_beams", str(settings["num_beams"])]
    train += ["--save_strategy", "no", "--logging_steps", "100", "--output_dir", str(out)]
    train += settings["run_translation_args"]
    greedy = [sys.executable, str(RUN_TRANSLATION), "--model_name_or_path", str(out), *data, "--do_predict"]
    greedy += [*common, "--num_beams", "1", "--output_dir", str(out / "greedy"), *settings["run_translation_args"]]
    return train, greedy


def study_runs(args):
    """Seed by seed, so that each seed's variants and twin finish together."""
    runs = []
    for seed in args.seeds:
        for variant in args.variants:
            identity = {
                "model_size": args.model_size,
                "epochs": args.num_train_epochs,
                "variant": variant,
                "seed": seed,
            }
            out = Path(args.output_dir) / f"{args.model_size}-{args.num_train_epochs:g}ep" / variant / f"seed{seed}"
            settings = run_settings(args)
            runs.append(Run(identity, out, commands(args, settings, variant, seed, out), settings))
    return runs


def read(path):
    return json.loads(Path(path).read_text())


def collect(run):
    """A finished run's record: validation and test scores (beam and greedy), training time and steps, and the
    encoder's final gates per layer."""
    train = read(run.folder / "train_results.json")
    steps = read(run.folder / "trainer_state.json")["global_step"]
    validation, test = read(run.folder / "eval_results.json"), read(run.folder / "predict_results.json")
    greedy = read(run.folder / "greedy" / "predict_results.json")
    return {
        "validation_bleu": validation["eval_bleu"],
        "validation_chrf": validation["eval_chrf"],
        "test_bleu": test["predict_bleu"],
        "test_chrf": test["predict_chrf"],
        "greedy_test_bleu": greedy["predict_bleu"],
        "greedy_test_chrf": greedy["predict_chrf"],
        "train_loss": train["train_loss"],
        "train_runtime": train["train_runtime"],
        "steps": steps,
        "seconds_per_step": train["train_runtime"] / steps,
        "gates": final_gates(run.folder / "trainer_state.json"),
    }


def gates_per_layer(records, variants):
    """The final mean query / key gate of each encoder layer, per variant, over its seeds."""
    lines = ["\n### Final encoder gates per layer (query / key, mean over seeds)\n"]
    for variant in variants:
        gates = [record["gates"] for record in records if record["variant"] == variant and record["gates"]]
        if gates:
            cells = [
                f"{statistics.mean(g['query'][layer] for g in gates):.3f} / "
                f"{statistics.mean(g['key'][layer] for g in gates):.3f}"
                for layer in range(len(gates[0]["query"]))
            ]
            lines.append(f"- `{variant}`: " + ", ".join(f"layer {i}: {cell}" for i, cell in enumerate(cells)))
    return "\n".join(lines) + "\n"


def budgets(records):
    """Each (size, epochs) of the records with its records: every table compares runs of one budget."""
    found = sorted({(record["model_size"], record["epochs"]) for record in records})
    return [
        (size, epochs, [record for record in records if (record["model_size"], record["epochs"]) == (size, epochs)])
        for size, epochs in found
    ]


def present_variants(records):
    return [variant for variant in VARIANTS if any(record["variant"] == variant for record in records)]


def budget_comparisons(size, epochs, of_budget):
    """Per score, the `Comparison` of each variant of one budget with `none` of the same seed."""

    def selected(variant):
        return [record for record in of_budget if record["variant"] == variant]

    rows = [
        ([size, f"{epochs:g}", variant], selected(variant), None if variant == TWIN else selected(TWIN))
        for variant in present_variants(of_budget)
    ]
    return [
        Comparison(f"{size}, {epochs:g} epochs: {title}", ("size", "epochs", "variant"), rows, lambda r, f=field: r[f])
        for title, field in SCORES
    ]


def comparisons(records):
    return [comparison for budget in budgets(records) for comparison in budget_comparisons(*budget)]


def tables(records):
    def time_per_step(runs):
        """The median: one run that shared the machine with more jobs than the others does not move it."""
        return f"{statistics.median(run['seconds_per_step'] for run in runs):.3f}" if runs else "-"

    extra = [
        ("s / step (median)", time_per_step),
        ("final gates q / k", lambda runs: mean_gates(run["gates"] for run in runs)),
    ]
    text = f"Twin: `{TWIN}`. Scores in %, sacreBLEU (13a) and chrF on detokenized output.\n"
    for size, epochs, of_budget in budgets(records):
        text += "".join(paired_table(comparison, extra) for comparison in budget_comparisons(size, epochs, of_budget))
        text += gates_per_layer(of_budget, present_variants(records))
    return text


def main(argv=None):
    args = parse_args(argv)
    require_packages("translation_sweep.py", *TRAINING, "sacrebleu", what="Each run of run_translation.py")
    if args.figure:
        require_packages("translation_sweep.py", "matplotlib", what="--figure")
    run_study(args, study_runs(args), collect, tables, comparisons)


if __name__ == "__main__":
    main()
