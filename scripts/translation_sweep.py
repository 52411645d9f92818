#!/usr/bin/env python
"""Runs the translation study behind docs/TRANSLATION.md: arms x seeds of a model trained from scratch with
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
import json
import statistics
import sys
from pathlib import Path

from casan_hf.cli.extras import TRAINING, require_packages
from casan_hf.cli.resume import last_complete_checkpoint
from casan_hf.context import CONTEXT_KINDS
from casan_hf.studies import (
    CONTEXT_OPTIONS,
    Arm,
    Comparison,
    Run,
    add_sweep_arguments,
    arm_argument,
    arm_order,
    check_cells,
    final_gates,
    mean_gates,
    paired_table,
    run_study,
)
from casan_hf.translation import LENGTH_BUCKETS, MODEL_SIZES, bucket_name


RUN_TRANSLATION = Path(__file__).resolve().parent / "run_translation.py"
TWIN = "none"
VARIANTS = (TWIN, *(context_type for context_type in CONTEXT_KINDS if context_type != TWIN))  # the table's order
CROSS_ENTROPY = "cross-entropy per target token (nats, no label smoothing; lower is better)"
# (title, record field, lower is better): the paired tables, one per score; the first four are drawn.
SCORES = (
    (f"test {CROSS_ENTROPY}", "test_cross_entropy", True),
    (f"validation {CROSS_ENTROPY}", "validation_cross_entropy", True),
    ("test BLEU (beam)", "test_bleu", False),
    ("test chrF (beam)", "test_chrf", False),
    ("test BLEU (greedy)", "greedy_test_bleu", False),
    ("test chrF (greedy)", "greedy_test_chrf", False),
    ("validation BLEU (beam)", "validation_bleu", False),
)
DRAWN = 4


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sweep_arguments(parser)
    parser.add_argument("--data_dir", required=True, help="Plain-text <prefix>.<lang> files (Multi30k's layout).")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument(
        "--arms",
        "--variants",
        nargs="+",
        type=arm_argument(VARIANTS, option_free=(TWIN,)),
        default=[Arm(variant) for variant in VARIANTS],
        metavar="VARIANT[:OPTION=VALUE,...]",
        help=f"The arms: a context type ({', '.join(VARIANTS)}) with the context options it sets, e.g. "
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
    args, args.run_translation_args = parser.parse_known_args(argv)
    if Arm(TWIN) not in args.arms:
        parser.error(f"--arms must include {TWIN!r}: every CASAN run is paired with its twin of the same seed.")
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


def start_or_resume(out):
    """The flags that resume a run from the last complete checkpoint its folder holds (a run cut off by a kill
    loses at most an epoch), or start it anew over whatever an earlier attempt left there."""
    checkpoint = last_complete_checkpoint(out)[0] if out.is_dir() else None
    return ["--overwrite_output_dir"] if checkpoint is None else ["--resume_from_checkpoint", checkpoint]


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


def read(path):
    return json.loads(Path(path).read_text())


def collect(run):
    """A finished run's record: validation and test cross-entropy and scores (beam and greedy), test scores per
    source length, training time and steps, the encoder's final gates per layer (and head), the context options
    its model had, and what it received as it started (`run_start.json`: command line, commit, versions)."""
    train = read(run.folder / "train_results.json")
    steps = read(run.folder / "trainer_state.json")["global_step"]
    validation, test = read(run.folder / "eval_results.json"), read(run.folder / "predict_results.json")
    greedy = read(run.folder / "greedy" / "predict_results.json")
    started = read(run.folder / "run_start.json")
    return {
        "validation_cross_entropy": validation["eval_cross_entropy"],
        "validation_bleu": validation["eval_bleu"],
        "validation_chrf": validation["eval_chrf"],
        "test_cross_entropy": test["predict_cross_entropy"],
        "test_bleu": test["predict_bleu"],
        "test_chrf": test["predict_chrf"],
        "test_by_length": read(run.folder / "predict_by_source_length.json"),
        "greedy_test_bleu": greedy["predict_bleu"],
        "greedy_test_chrf": greedy["predict_chrf"],
        "train_loss": train["train_loss"],
        "train_runtime": train["train_runtime"],
        "steps": steps,
        "seconds_per_step": train["train_runtime"] / steps,
        "gates": final_gates(run.folder / "trainer_state.json"),
        "context_options": {name: started["settings"][name] for name in CONTEXT_OPTIONS},
        "received": started,
    }


def gates_per_layer(records, variants):
    """The final mean query / key gate of each encoder layer, per arm, over its seeds; with a gate per head, each
    head's too."""
    lines = ["\n### Final encoder gates per layer (query / key, mean over seeds)\n"]
    for variant in variants:
        gates = [record["gates"] for record in records if record["variant"] == variant and record["gates"]]
        if not gates:
            continue
        layers = range(len(gates[0]["query"]))
        cells = [
            f"{statistics.mean(g['query'][layer] for g in gates):.3f} / "
            f"{statistics.mean(g['key'][layer] for g in gates):.3f}"
            for layer in layers
        ]
        lines.append(f"- `{variant}`: " + ", ".join(f"layer {i}: {cell}" for i, cell in enumerate(cells)))
        if "query_per_head" in gates[0]:
            for target in ("query", "key"):
                per_head = [
                    " ".join(
                        f"{statistics.mean(g[f'{target}_per_head'][layer][head] for g in gates):.3f}"
                        for head in range(len(gates[0][f"{target}_per_head"][layer]))
                    )
                    for layer in layers
                ]
                lines.append(
                    f"  - {target} gate per head: "
                    + "; ".join(f"layer {i}: {cell}" for i, cell in enumerate(per_head))
                )
    return "\n".join(lines) + "\n"


def budgets(records):
    """Each (size, epochs) of the records with its records: every table compares runs of one budget."""
    found = sorted({(record["model_size"], record["epochs"]) for record in records})
    return [
        (size, epochs, [record for record in records if (record["model_size"], record["epochs"]) == (size, epochs)])
        for size, epochs in found
    ]


def present_variants(records):
    """The arms of `records`, by name, in the table's order."""
    return sorted({record["variant"] for record in records}, key=arm_order(VARIANTS))


def length_score(first, last):
    """A record's test BLEU on the sentences whose source has first..last words, None where not recorded."""
    return lambda record: record.get("test_by_length", {}).get(bucket_name(first, last), {}).get("bleu")


def budget_comparisons(size, epochs, of_budget):
    """Per score (and test BLEU per source length), the `Comparison` of each arm of one budget with `none` of the
    same seed; a score no record of the budget has is left out."""
    check_cells(of_budget, ("model_size", "epochs", "variant"))

    def selected(variant):
        return [record for record in of_budget if record["variant"] == variant]

    rows = [
        ([size, f"{epochs:g}", variant], selected(variant), None if variant == TWIN else selected(TWIN))
        for variant in present_variants(of_budget)
    ]
    labels = ("size", "epochs", "variant")
    scores = [
        Comparison(
            f"{size}, {epochs:g} epochs: {title}", labels, rows, lambda r, f=field: r.get(f), lower, 3 if lower else 2
        )
        for title, field, lower in SCORES
    ]
    counts = next((record["test_by_length"] for record in of_budget if "test_by_length" in record), {})
    scores += [
        Comparison(
            f"{size}, {epochs:g} epochs: test BLEU (beam), sources of {bucket_name(first, last)} words "
            f"({counts[bucket_name(first, last)]['sentences']} sentences)",
            labels,
            rows,
            length_score(first, last),
        )
        for first, last in LENGTH_BUCKETS
        if bucket_name(first, last) in counts
    ]
    return [comparison for comparison in scores if any(comparison.scores(runs) for _, runs, _ in rows)]


def comparisons(records):
    """The drawn comparisons: cross-entropy and beam-search scores of each budget."""
    return [
        comparison
        for budget in budgets(records)
        for comparison in budget_comparisons(*budget)
        if comparison.title.split(": ", 1)[1] in {title for title, *_ in SCORES[:DRAWN]}
    ]


def tables(records):
    def time_per_step(runs):
        """The median: one run that shared the machine with more jobs than the others does not move it."""
        return f"{statistics.median(run['seconds_per_step'] for run in runs):.3f}" if runs else "-"

    extra = [
        ("s / step (median)", time_per_step),
        ("final gates q / k", lambda runs: mean_gates(run["gates"] for run in runs)),
    ]
    text = (
        f"Twin: `{TWIN}`. Scores in %, sacreBLEU (13a) and chrF on detokenized output; cross-entropy in nats per "
        "target token. Beyond the spread: the 95% interval of the paired difference excludes 0.\n"
    )
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
