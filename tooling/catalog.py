"""The repository's committed studies, one row each: the sweep that runs a study, its grids (arms, seeds, sizes and
settings, as that sweep's flags), and the results file and figure its records make. `--study NAME` on a sweep runs
exactly that study into its results file (or, with `--dry_run`, rewrites its tables from it; with `--figure`, e.g.
the study's `figure`, draws the figure too); the flags left to the user are the machine's: data, checkpoint, output
folder, parallelism. A new study is a row here. `study_records` is the one reader of a study's records."""

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from casan_hf.studies.grid import load_results


@dataclass(frozen=True)
class Study:
    """`sweep` (`scripts/<sweep>_sweep.py`) runs each of `grids` (a tuple of its flags) into one results file,
    `results`, relative to the repository; `figure` is where its figure, drawn from all its records, is kept. A
    study with no grids was run before this catalog: its records are quoted, not run again, and `recorded` holds
    the fields its records leave out, which the sweep's tables read."""

    name: str
    sweep: str
    results: str
    grids: tuple
    figure: str | None = None
    recorded: dict = field(default_factory=dict)


def flags(text):
    return tuple(text.split())


STUDIES = {
    study.name: study
    for study in (
        Study(
            "glue-minilm-cpu-mean",
            "glue",
            "docs/results/glue_minilm_cpu_mean.json",
            grids=(
                flags(
                    "--tasks rte mrpc sst2 --seeds 42 43 44 45 46 --arms none global deep_global "
                    "--classifier_pooling mean --max_train_samples sst2=20000"
                ),
                flags(
                    "--tasks rte mrpc --recipes mlm --mlm_steps 300 --seeds 42 43 44 45 46 --arms none deep_global "
                    "--classifier_pooling mean"
                ),
            ),
            figure="docs/images/glue_study_cpu.png",
        ),
        Study(
            "translation-micro",
            "translation",
            "docs/results/translation_micro_cpu.json",
            grids=(
                flags("--model_size micro --num_train_epochs 5 --seeds 1 2 3 --arms none global deep deep_global"),
                flags("--model_size micro --num_train_epochs 5 --seeds 4 5 --arms none deep_global"),
                flags("--model_size micro --num_train_epochs 10 --seeds 1 2 --arms none deep_global"),
            ),
            figure="docs/images/translation_study_cpu.png",
        ),
        Study(
            "translation-micro-deep",
            "translation",
            "docs/results/translation_micro_deep_cpu.json",
            grids=(
                flags(
                    "--model_size micro-deep --num_train_epochs 5 --seeds 1 2 3 4 5 --arms none deep_global "
                    "deep_global:gate_bias_init=0,gate_per_head global:gate_bias_init=0,gate_per_head"
                ),
            ),
            figure="docs/images/translation_study_micro_deep_cpu.png",
        ),
        # The gates' start at micro's depth, beside micro-deep: the twin is run again, since the micro study's
        # records predate the cross-entropy fields.
        Study(
            "translation-micro-start",
            "translation",
            "docs/results/translation_micro_start_cpu.json",
            grids=(
                flags(
                    "--model_size micro --num_train_epochs 5 --seeds 1 2 3 4 5 "
                    "--arms none deep_global:gate_bias_init=0"
                ),
            ),
            figure="docs/images/translation_study_micro_start_cpu.png",
        ),
        # An output gate (Qiu et al. 2025) from the token alone and driven by the sentence context, at micro-deep;
        # the second grid, with the authors' query/key gate as well, runs after the first's 15 runs.
        Study(
            "translation-micro-deep-output-gate",
            "translation",
            "docs/results/translation_micro_deep_output_gate_cpu.json",
            grids=(
                flags(
                    "--model_size micro-deep --num_train_epochs 5 --seeds 1 2 3 4 5 --arms none "
                    "none:output_gate=elementwise "
                    "global:context_targets=[],output_gate=elementwise,output_gate_context"
                ),
                flags(
                    "--model_size micro-deep --num_train_epochs 5 --seeds 1 2 3 4 5 --arms none "
                    "deep_global:gate_bias_init=0,gate_per_head,output_gate=elementwise,output_gate_context"
                ),
            ),
            figure="docs/images/translation_study_micro_deep_output_gate_cpu.png",
        ),
        # The local context of Yang et al. (EMNLP 2018) at micro-deep: the query-specific Gaussian bias on the lower
        # three encoder layers, alone and with deep_global at the authors' gate start (the journal version's
        # combination), against the twin run again in this results file.
        Study(
            "translation-micro-deep-local",
            "translation",
            "docs/results/translation_micro_deep_local_cpu.json",
            grids=(
                flags(
                    "--model_size micro-deep --num_train_epochs 5 --seeds 1 2 3 4 5 --arms none "
                    "none:local_bias=query deep_global:gate_bias_init=0,gate_per_head,local_bias=query"
                ),
            ),
            figure="docs/images/translation_study_micro_deep_local_cpu.png",
        ),
        # The same study's first grid on a GPU (one job, every run at once), records of their own.
        Study(
            "translation-micro-deep-output-gate-gpu",
            "translation",
            "docs/results/translation_micro_deep_output_gate_gpu.json",
            grids=(
                flags(
                    "--model_size micro-deep --num_train_epochs 5 --seeds 1 2 3 4 5 --arms none "
                    "none:output_gate=elementwise "
                    "global:context_targets=[],output_gate=elementwise,output_gate_context"
                ),
            ),
            figure="docs/images/translation_study_micro_deep_output_gate_gpu.png",
        ),
        # Sized for a GPU (docs/GPU.md).
        Study(
            "translation-small-gpu",
            "translation",
            "docs/results/translation_small_gpu.json",
            grids=(
                flags(
                    "--model_size small --num_train_epochs 30 --seeds 1 2 3 --arms none deep_global "
                    "deep_global:gate_bias_init=0,gate_per_head global:gate_bias_init=0,gate_per_head "
                    "--batch_size 128 --learning_rate 5e-4 --warmup_steps 2000 --dropout 0.3 --weight_decay 0.0001 "
                    "--bf16"
                ),
            ),
            figure="docs/images/translation_study_small_gpu.png",
        ),
        # A small Llama from scratch on TinyShakespeare (docs/CAUSAL.md): the prefix context at the authors' start.
        Study(
            "clm-tinyshakespeare-cpu",
            "clm",
            "docs/results/clm_tinyshakespeare_cpu.json",
            grids=(
                flags(
                    "--model_size micro --max_steps 1500 --seeds 1 2 3 4 5 --arms none "
                    "global:gate_bias_init=0,gate_per_head deep_global:gate_bias_init=0,gate_per_head"
                ),
            ),
            figure="docs/images/clm_study_tinyshakespeare_cpu.png",
        ),
        # The confirmatory causal study (docs/CAUSAL.md): `global` at full rank and at rank 64 against the twin, at
        # the budget the twin's seed-0 validation curve chose, over twenty new seeds.
        Study(
            "clm-tinyshakespeare-confirm",
            "clm",
            "docs/results/clm_tinyshakespeare_confirm.json",
            grids=(
                flags(
                    "--model_size micro --max_steps 550 --seeds " + " ".join(map(str, range(6, 26))) + " --arms none "
                    "global:gate_bias_init=0,gate_per_head global:gate_bias_init=0,gate_per_head,context_rank=64"
                ),
            ),
            figure="docs/images/clm_study_tinyshakespeare_confirm.png",
        ),
        # The GLUE grid at `cls` pooling on an H100 (docs/RESULTS.md), every run fine-tuned only, made by a sweep
        # before its records kept their recipe and settings.
        Study(
            "glue-minilm-h100",
            "glue",
            "docs/results/glue_minilm_h100.json",
            grids=(),
            recorded={"recipe": "finetune", "settings": {"classifier_pooling": "cls"}},
        ),
        Study(
            "glue-minilm-gpu-teaching",
            "glue",
            "docs/results/glue_minilm_gpu_teaching.json",
            grids=(
                flags(
                    "--tasks rte mrpc --seeds 42 43 44 45 46 --arms none global deep_global:context_rank=64 deep "
                    "--recipes finetune context_lr --classifier_pooling mean "
                    "--base_model sentence-transformers/all-MiniLM-L6-v2"
                ),
            ),
            figure="docs/images/glue_study_gpu_teaching.png",
        ),
    )
}


def swept_studies():
    """The studies the sweeps run from this catalog: the rows with grids."""
    return [study for study in STUDIES.values() if study.grids]


def study_names(sweep):
    """The names of the studies `sweep` runs."""
    return [study.name for study in swept_studies() if study.sweep == sweep]


def study_records(name, repository):
    """The records of the study `name` from its results file under `repository`, each with the fields its study
    states for them (`Study.recorded`); a ValueError naming the studies."""
    if name not in STUDIES:
        raise ValueError(f"{name!r} is not a study; the studies: {', '.join(STUDIES)}.")
    study = STUDIES[name]
    return [{**study.recorded, **record} for record in load_results(Path(repository) / study.results)]


def study_command_lines(parser, argv, sweep, repository):
    """The sweep command lines `argv` stands for: itself, or with `--study NAME`, one per grid of that study: the
    grid's flags, the study's results file under `repository` (unless `argv` names another), and the rest of `argv`
    (the machine's paths, parallelism, `--figure`: drawing needs matplotlib, which a GPU node may lack). A flag the
    study fixes is refused in `argv`: the study would silently be another one."""
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--study")
    chosen, rest = chooser.parse_known_args(argv)
    if chosen.study is None:
        return [rest]
    if chosen.study not in study_names(sweep):
        parser.error(f"--study {chosen.study!r} is not a study of this sweep; its studies: {study_names(sweep)}.")
    study = STUDIES[chosen.study]
    in_grids = {token for grid in study.grids for token in grid if token.startswith("--")}
    fixed = {
        option
        for action in parser._actions
        if in_grids & set(action.option_strings)
        for option in action.option_strings
    }
    given = {token.partition("=")[0] for token in rest if token.startswith("--")}
    if given & fixed:
        parser.error(
            f"--study {study.name} fixes {', '.join(sorted(given & fixed))}; leave them out, or give the sweep its "
            "grid without --study."
        )
    where = [] if "--results" in given else ["--results", str(Path(repository) / study.results)]
    return [[*grid, *where, *rest] for grid in study.grids]


def run_sweep_command_line(argv, sweep, make_parser, parse_args, run_grid, repository):
    """A sweep script's `main`: each grid that `argv` (None: the process's) stands for, parsed and run."""
    argv = sys.argv[1:] if argv is None else argv
    for grid in study_command_lines(make_parser(), argv, sweep, repository):
        run_grid(parse_args(grid))
