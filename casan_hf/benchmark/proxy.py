"""The host-bound proxy: what a model costs the host per layer, the cost a GPU step pays when it waits on launches.

On a GPU, BERT-base in bf16 at 32 x 128 is itself bound by the host (an H200: 7.3 ms a step for about 2 ms of
arithmetic), so whatever a model adds on the host (Python, dispatch, autograd bookkeeping) adds to the step
nearly one for one. The proxy measures that host work on a CPU, where the arithmetic can be made negligible:
BERT-base's depth with a width of 64 (`operators.small_bert_config`), batch 1 x sequence 8, fp32, sdpa, one
thread, and each step's CPU time of the calling thread (`time.thread_time`: on the CPU the autograd backward
runs on the calling thread), so that the other jobs of a shared machine barely count.

Every model holds BERT's weights (`runner.build_model`) and all run in one process, interleaved step by step
(`runner.benchmark_group`; or in blocks of steps, `block`), in three modes: eager inference, eager training, and
inference compiled by `torch.compile` (inductor's default mode) against compiled BERT. The controls (BERT's copy,
CASAN `none`) show the noise. Beside the times: the compute operators per layer CASAN adds over BERT
(`operators.count_table`), forward from an inference step, backward from a training step.
"""

import statistics
import time
from dataclasses import dataclass

import torch
from transformers import BertModel

from .operators import count_table, small_bert_config
from .runner import Variant, benchmark_group, build_model, compiled_twins, default_variants, random_inputs


# mode -> (the step `runner.make_step` runs, the torch.compile mode of the models timed; None: as they are)
PROXY_MODES = {
    "eager inference": ("inference", None),
    "eager training": ("training", None),
    "compiled inference": ("inference", "default"),
}
# The output gate's rows (docs/BEYOND.md, "The output gate"): from the token alone, and driven by the global context
# without query/key mixing, the two gated arms of the translation study.
OUTPUT_GATE_VARIANTS = (
    Variant("casan none, output gate", "none", options=(("output_gate", "elementwise"),)),
    Variant(
        "casan global, output gate only",
        "global",
        options=(("context_targets", ()), ("output_gate", "elementwise"), ("output_gate_context", True)),
    ),
)
# Untimed rounds of each mode in each run: the first compiles (in the first run), the rest settle caches.
WARMUP_ROUNDS = 5
# Steps of one model in a row in each timed round. One step at a time (the default), a model whose code no other
# model runs could find it cold more often than BERT, whose control copy runs BERT's own code (compiled, BERT's very
# graph); in blocks, all but a block's first step find their code warm, as a training run's steps do. The two agree
# (docs/BENCHMARKS_HISTORY.md, "Interleaved or in blocks").
BLOCK = 1
ATTENTION = "sdpa"


@dataclass(frozen=True)
class ProxyShape:
    """The proxy's model and batch: BERT-base's depth at a width where the host, not the arithmetic, costs."""

    layers: int = 12
    hidden: int = 64
    batch: int = 1
    seq: int = 8


def proxy_variants():
    """The proxy's models: BERT, its control copy, CASAN of every context kind (none, the control, first) and the
    output gate's two rows, each followed by its compiled twin."""
    compile_mode = PROXY_MODES["compiled inference"][1]
    return default_variants(0, compile_mode=compile_mode, extra=OUTPUT_GATE_VARIANTS)


def proxy_models(shape, compile_backend="inductor"):
    """`proxy_variants()` and `{label: model}`, every model with the weights of one BertModel of `shape`."""
    config = small_bert_config(shape.layers, shape.hidden)
    torch.manual_seed(0)
    reference = BertModel._from_config(config, attn_implementation=ATTENTION)
    variants = proxy_variants()
    eager = [variant for variant in variants if variant.compile_mode is None]
    models = {variant.label: build_model(variant, reference, ATTENTION, torch.float32) for variant in eager}
    return variants, compiled_twins(models, variants, compile_backend)


def operators_per_layer(shape, variants, inputs):
    """`{label: (forward, backward)}`: compute operators per layer each model runs over BertModel, forward in an
    inference step, backward in a training step (BertModel's copy runs BertModel's)."""
    config = small_bert_config(shape.layers, shape.hidden)
    casan = [
        (variant.label, variant.casan_options())
        for variant in variants
        if variant.context_type is not None and variant.compile_mode is None
    ]
    forward = {row[0]: row[3] for row in count_table(config, casan, inputs, "inference", ATTENTION)}
    backward = {row[0]: row[4] for row in count_table(config, casan, inputs, "training", ATTENTION)}
    counted = {
        variant.label: "bert" if variant.context_type is None else variant.label
        for variant in variants
        if variant.compile_mode is None
    }
    return {label: (forward[key], backward[key]) for label, key in counted.items()}


def run_records(models, variants, inputs, shape, rounds, run, progress=None, block=BLOCK):
    """One run of every mode (`rounds` rounds of `block` steps in a row per model): per mode and model a record with
    its step's median thread CPU time, the ratio BERT's median over it, and the extra host time per layer over BERT;
    `step_us` keeps every timed step."""
    records = []
    for mode, (step_mode, compile_mode) in PROXY_MODES.items():
        group = [variant for variant in variants if variant.compile_mode == compile_mode]
        results = benchmark_group(
            models,
            group,
            inputs,
            step_mode,
            torch.device("cpu"),
            WARMUP_ROUNDS,
            rounds,
            progress,
            cpu_clock=time.thread_time,
            seed=run,
            block=block,
        )
        seconds = {variant.eager_label: results[variant.label][1] for variant in group}
        bert_s = statistics.median(seconds["bert"])
        for label, steps in seconds.items():
            median_s = statistics.median(steps)
            records.append(
                {
                    "run": run,
                    "mode": mode,
                    "model": label,
                    "host_us": 1e6 * median_s,
                    "ratio_vs_bert": bert_s / median_s,
                    "extra_us_per_layer": 1e6 * (median_s - bert_s) / shape.layers,
                    "step_us": [round(1e6 * step, 1) for step in steps],
                }
            )
    return records


def measure(shape=ProxyShape(), rounds=300, runs=3, compile_backend="inductor", progress=None, block=BLOCK):
    """The proxy's raw records: `runs` runs of `rounds` timed rounds of `block` steps per model and mode, one
    thread, after warm-up; each record also carries the model's operators per layer and the setup."""
    torch.set_num_threads(1)  # before compiling: inductor's CPU kernels take the thread count it sees
    variants, models = proxy_models(shape, compile_backend)
    config = models["bert"].config
    inputs = random_inputs(config.vocab_size, shape.batch, shape.seq, torch.device("cpu"))
    operators = operators_per_layer(shape, variants, inputs)
    setup = {
        **vars(shape),
        "rounds": rounds,
        "block": block,
        "warmup_rounds": WARMUP_ROUNDS,
        "compile_backend": compile_backend,
        "attn_implementation": ATTENTION,
        "dtype": "float32",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    records = []
    for run in range(1, runs + 1):
        for record in run_records(models, variants, inputs, shape, rounds, run, progress, block):
            forward, backward = operators[record["model"]]
            records.append({**record, "forward_ops_per_layer": forward, "backward_ops_per_layer": backward, **setup})
    return records


def progress_steps(rounds, runs, block=BLOCK):
    """How many steps `measure` runs (its progress bar's total)."""
    models = sum(variant.compile_mode is None for variant in proxy_variants())
    return runs * len(PROXY_MODES) * (WARMUP_ROUNDS + 1 + rounds * block) * models


def summary(records):
    """`{(model, mode): {figure: median over the runs}}` of host_us, ratio_vs_bert and extra_us_per_layer, with
    `runs_ratio`, each run's ratio."""
    table = {}
    for record in records:
        table.setdefault((record["model"], record["mode"]), []).append(record)
    return {
        key: {
            **{
                figure: statistics.median(record[figure] for record in group)
                for figure in ("host_us", "ratio_vs_bert", "extra_us_per_layer")
            },
            "runs_ratio": [record["ratio_vs_bert"] for record in sorted(group, key=lambda record: record["run"])],
            "forward_ops_per_layer": group[0]["forward_ops_per_layer"],
            "backward_ops_per_layer": group[0]["backward_ops_per_layer"],
        }
        for key, group in table.items()
    }


def format_summary(records):
    """Two markdown tables: per model and mode the medians over the runs (host time per step, ratio to BERT,
    extra host time per layer) with the operators per layer over BERT; then each run's ratios."""
    figures = summary(records)
    models = list(dict.fromkeys(record["model"] for record in records))
    first = records[0]
    title = (
        f"host-bound proxy: {first['layers']} layers, hidden {first['hidden']}, batch {first['batch']} x seq "
        f"{first['seq']}, {first['dtype']}, {first['attn_implementation']}, {first['threads']} thread, thread CPU "
        f"time; medians of {len({record['run'] for record in records})} runs of {first['rounds']} rounds of "
        f"{first['block']} steps in a row"
    )
    header = "| model |" + "".join(f" {mode}: us | ratio | +us/layer |" for mode in PROXY_MODES)
    header += " +ops/layer forward | +ops/layer backward |"
    lines = [title, "", header, "| --- |" + " ---: |" * (3 * len(PROXY_MODES) + 2)]
    for model in models:
        cells = []
        for mode in PROXY_MODES:
            figure = figures[model, mode]
            cells.append(
                f" {figure['host_us']:.0f} | {figure['ratio_vs_bert']:.2f} | {figure['extra_us_per_layer']:+.0f} |"
            )
        forward = figures[model, "eager inference"]["forward_ops_per_layer"]
        backward = figures[model, "eager inference"]["backward_ops_per_layer"]
        lines.append(f"| {model} |" + "".join(cells) + f" {forward:+.2f} | {backward:+.2f} |")
    lines += ["", "each run's ratio to BERT:", "", "| model |" + "".join(f" {mode} |" for mode in PROXY_MODES)]
    lines.append("| --- |" + " ---: |" * len(PROXY_MODES))
    for model in models:
        runs = (" / ".join(f"{ratio:.2f}" for ratio in figures[model, mode]["runs_ratio"]) for mode in PROXY_MODES)
        lines.append(f"| {model} |" + "".join(f" {cell} |" for cell in runs))
    return "\n".join(lines)
