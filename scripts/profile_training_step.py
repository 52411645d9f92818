"""Where a training step of BERT and of CASAN spends its time on a GPU: wall time against GPU busy time, per step.

    python scripts/profile_training_step.py                                   # BERT-base, bf16, 128 x 32, on CUDA
    python scripts/profile_training_step.py --trace-dir runs/traces           # also a chrome trace per model
    python scripts/profile_training_step.py --compile default                  # compiled: inductor's fused kernels
    python scripts/profile_training_step.py --device cpu --size small --seq-len 8 --batch-size 1   # a dry run

Each model (`--models`: bert and CASAN context types; BERT's weights in every one, as scripts/benchmark.py builds
them) runs `--warmup` steps unprofiled (their median wall time is printed: the step without the profiler's
overhead), then one profiler warm-up step and `--steps` profiled steps (torch.profiler, CPU and CUDA activities,
a step ending in a device synchronisation). Per step: wall time, GPU busy time (the union of the kernels'
intervals), busy over wall, kernels; then the kernels with most GPU time and the host operators with most self
CPU time. A GPU that is busy for most of the step is bound by the arithmetic; the rest of the wall time is the
GPU waiting on the host (casan_hf/benchmark/step_trace.py). On a CPU only the host side is traced.

On a GPU the CASAN models' mixers run the fused Triton kernels; `--pytorch-mixer` profiles each one's twin on the
mixer's PyTorch path after it, and each model's heading says which path its mixer ran.

`--compile MODE` profiles each model through `torch.compile(mode=MODE)` (compiled in the warm-up, so give it at
least 3 warm-up steps): with the launches gone, what CASAN adds to the GPU's busy time is what keeps compiled CASAN
from compiled BERT, and the kernel table names the fused kernels it runs. Under "reduce-overhead" the kernels run
inside CUDA graphs; "default" keeps each kernel a launch of its own.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from transformers import BertModel

from casan_hf.benchmark.operators import small_bert_config
from casan_hf.benchmark.runner import (
    BERT_BASE,
    PYTORCH_MIXER,
    SIZES,
    Variant,
    build_model,
    make_step,
    mixer_path,
    random_inputs,
    source_model,
)
from casan_hf.benchmark.step_trace import step_figures, top_host_operators, top_kernels
from casan_hf.cli.arguments import PositiveInt
from casan_hf.context import CONTEXT_KINDS


DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
NAME_WIDTH = 90  # kernel names run to hundreds of characters (templates)
# BERT-base's depth at width 64 (`small_bert_config`), beside the benchmark's sizes: the host-bound proxy's model.
SMALL = "small"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--models", nargs="+", default=["bert", "global"], choices=["bert", *CONTEXT_KINDS], help="bert or a context"
    )
    parser.add_argument(
        "--size",
        default=BERT_BASE,
        choices=[*SIZES, SMALL],
        help="small: BERT-base's depth at width 64 (the host-bound proxy's model)",
    )
    parser.add_argument("--seq-len", type=PositiveInt, default=128)
    parser.add_argument("--batch-size", type=PositiveInt, default=32)
    parser.add_argument("--mode", default="training", choices=["training", "inference"])
    parser.add_argument("--device", default="auto", help="auto (cuda when present, else cpu), cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="bfloat16", choices=list(DTYPES), help="the models' weights")
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--warmup", type=PositiveInt, default=3, help="unprofiled steps before the profiled ones")
    parser.add_argument("--steps", type=PositiveInt, default=3, help="profiled steps")
    parser.add_argument("--rows", type=PositiveInt, default=10, help="kernels and host operators shown per model")
    parser.add_argument(
        "--compile",
        dest="compile_mode",
        choices=["default", "reduce-overhead", "max-autotune"],
        help="profile each model compiled with torch.compile in this mode",
    )
    parser.add_argument("--compile-backend", default="inductor", help="torch.compile backend of --compile")
    parser.add_argument("--trace-dir", type=Path, help="write each model's chrome trace here (<model>.json.gz)")
    parser.add_argument(
        "--pytorch-mixer",
        action="store_true",
        help="also profile each CASAN model with its mixer on the PyTorch path, after the one with the fused kernels",
    )
    return parser.parse_args()


def profiled_variants(models, pytorch_mixer):
    """The `Variant` of each model name (bert or a context type), with each CASAN one's twin on the mixer's PyTorch
    path after it where `pytorch_mixer` asks for them."""
    variants = []
    for name in models:
        if name == "bert":
            variants.append(Variant(name))
            continue
        variants.append(Variant(f"casan {name}", name))
        if pytorch_mixer:
            variants.append(Variant(f"casan {name}{PYTORCH_MIXER}", name, fused_mixer="off"))
    return variants


def reference_model(size, attn, dtype):
    """The BertModel whose weights every model copies."""
    if size != SMALL:
        return source_model(size, attn, dtype)[0]
    torch.manual_seed(0)
    return BertModel._from_config(small_bert_config(), attn_implementation=attn, dtype=dtype)


def synchronized(step, device):
    """`step` followed by a wait for the device, so that a step's time holds its kernels."""

    def run():
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return run


def profile_model(step, device, warmup, steps, trace_path=None):
    """Unprofiled wall times of `warmup` steps (seconds), and the profiler's events of `steps` steps."""
    unprofiled = []
    for _ in range(warmup):
        start = time.perf_counter()
        step()
        unprofiled.append(time.perf_counter() - start)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
        for _ in range(1 + steps):
            step()
            prof.step()
    if trace_path is not None:
        prof.export_chrome_trace(str(trace_path))
    return unprofiled, prof.events()


def format_report(label, unprofiled, events, steps, rows):
    """The step table, the top kernels and the top host operators of one model."""
    figures = step_figures(events)
    settled = unprofiled[1:] or unprofiled  # the first step pays for lazy initialisation
    lines = [
        f"## {label}: unprofiled step {1000 * statistics.median(settled):.2f} ms (median of {len(settled)})",
        "",
        "| step | wall ms | GPU busy ms | busy / wall | GPU idle ms | kernels |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for index, figure in enumerate(figures, 1):
        wall, busy = figure["wall_us"] / 1000, figure["busy_us"]
        if busy is None:
            lines.append(f"| {index} | {wall:.2f} | n/a | n/a | n/a | n/a |")
        else:
            busy /= 1000
            lines.append(
                f"| {index} | {wall:.2f} | {busy:.2f} | {busy / wall:.2f} | {wall - busy:.2f} | {figure['kernels']} |"
            )
    for title, top in (
        ("kernel (GPU time)", top_kernels(events, steps, rows)),
        ("host operator (self CPU time)", top_host_operators(events, steps, rows)),
    ):
        lines += ["", f"| {title} | calls / step | us / step |", "| --- | ---: | ---: |"]
        lines += [f"| {name[:NAME_WIDTH]} | {calls:.1f} | {us:.0f} |" for name, calls, us in top] or ["| none | | |"]
    return "\n".join(lines)


def main():
    args = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    dtype = DTYPES[args.dtype]
    reference = reference_model(args.size, args.attn, dtype)
    inputs = random_inputs(reference.config.vocab_size, args.batch_size, args.seq_len, device)
    if args.trace_dir is not None:
        args.trace_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU traced"
    compiled = "" if args.compile_mode is None else f", compiled ({args.compile_mode}, {args.compile_backend})"
    print(
        f"{args.mode} step, {args.size}, seq {args.seq_len} x batch {args.batch_size}, {args.dtype}, {args.attn}, "
        f"{device} ({gpu}), torch {torch.__version__}{compiled}"
    )
    for variant in profiled_variants(args.models, args.pytorch_mixer):
        model = build_model(variant, reference, args.attn, dtype).to(device)
        mixer = mixer_path(model, device, dtype, compiled=args.compile_mode is not None)
        label = variant.label if mixer is None else f"{variant.label} (mixer: {mixer})"
        if args.compile_mode is not None:
            model = torch.compile(model, mode=args.compile_mode, backend=args.compile_backend)
        step = synchronized(make_step(model, inputs, args.mode), device)
        trace_name = variant.label.removeprefix("casan ").replace(PYTORCH_MIXER, "-pytorch-mixer")
        trace_path = None if args.trace_dir is None else args.trace_dir / f"{trace_name}.json.gz"
        unprofiled, events = profile_model(step, device, args.warmup, args.steps, trace_path)
        print("\n" + format_report(label, unprofiled, events, args.steps, args.rows))
        del model


if __name__ == "__main__":
    main()
