"""Speed and memory of CasanModel next to transformers' BertModel, with the theoretical floor beside each.

    python scripts/benchmark.py --json runs/benchmark.json            # the full table (docs/BENCHMARKS.md)
    python scripts/benchmark.py --quick                               # a small subset, about a minute
    python scripts/benchmark.py --quick --family deberta-v2           # DebertaV2Model next to CasanDebertaV2Model
    python scripts/benchmark.py --device cuda --dtype bfloat16        # on a GPU
    python scripts/benchmark.py --compile reduce-overhead --device cuda   # each model also compiled (CUDA graphs)
    OMP_NUM_THREADS=1 python scripts/benchmark.py --proxy             # the host-bound proxy of a GPU step
    python scripts/benchmark.py --causal --repeats 5 --json runs/causal.json   # causal LMs: prefill and decode

For each size and sequence length the models are built once with the same weights; for each mode they
run round-robin after warm-up. `ratio` is CASAN's median tokens/s over BERT's (`cpu ratio`: the same
with process CPU time, steadier on a shared machine); `flop floor` is BERT's
FLOPs over CASAN's, and `floor` also charges the memory-bound reads of a sentence-level U (see
casan_hf/benchmark/flops.py): the best ratio an implementation can reach.

`--family NAME` compares another family's transformers base model with its CASAN base model instead (RobertaModel
and CasanRobertaModel, ModernBertModel and CasanModernBertModel, ...): the same sizes' shape on the family's config,
rows labelled by the family. A family without sdpa (DeBERTa-v2) runs eager, and refuses `--attn sdpa`. The floor
columns are left out for a family whose arithmetic casan_hf/benchmark/flops.py does not count (ModernBERT,
DeBERTa-v2), and the table says so.

On a GPU the CASAN models' mixers run the fused Triton kernels (casan_hf/fused_mixer.py); `--pytorch-mixer` adds
each kind's twin on the mixer's PyTorch path (labelled "[pytorch mixer]"), and each record says which path ran
(`mixer`).

`--compile MODE` adds each model's compiled twin (`torch.compile(mode=MODE)`, the same weights) to the
round-robin; compiled models take their ratio over compiled BERT, and `x eager` is each one's speed over its
own eager run. Compilation (and CUDA-graph recording) happens in the warm-up rounds, outside the timing.

`--proxy` measures instead the host work per layer that a host-bound GPU step pays (casan_hf/benchmark/proxy.py):
BERT-base's depth at width 64, batch 1 x sequence 8, one thread, thread CPU time, in eager inference, eager
training and compiled inference, `--proxy-runs` times; it takes the `--proxy-*` flags, `--compile-backend` and
`--json`, and none of the others; it measures BERT only, and refuses another `--family`.

`--causal` measures instead what CASAN costs a causal language model (casan_hf/benchmark/causal.py): a random Llama
(`LlamaForCausalLM`, by default hidden 512, 8 layers, 8 heads, 4 key-value heads, feed-forward 1536, vocabulary 8192:
the `--causal-*` flags) beside a copy of it and its CASAN models with the same weights (`none`, the control, `global`,
`deep_global` at full rank and at `--rank`, `deep` at `--rank`), at batch 1 in two phases: prefill (tokens/s over a
`--causal-context`-token prompt, filling the cache) and decode (tokens/s over `--causal-new-tokens` single-token steps
through the cache at that context), with the issue's targets beside the ratios, and the cache state one sequence holds
(keys and values, and CASAN's running context sums, per layer). Beside the `--causal-*` flags it takes `--rank`,
`--attn`, `--device`, `--dtype`, `--threads`, `--warmup`, `--repeats`, `--json` and `--compile` (each model's
compiled twin, with dynamic shapes, its ratio over compiled Llama's; compiled before the timing, which counts the
graphs each makes: its prefill's, its first decoded token's, and any over the 64 tokens decoded after it).
"""

import argparse
import dataclasses
import json
import logging
import os
import platform
from pathlib import Path

import torch
from tqdm.auto import tqdm

from casan_hf.benchmark import causal, proxy
from casan_hf.benchmark.flops import counts_floor
from casan_hf.benchmark.runner import (
    DEFAULT_FAMILY,
    MINILM,
    SIZES,
    attention_backends,
    benchmark_group,
    build_model,
    compiled_twins,
    default_variants,
    local_variants,
    machine_balance,
    random_inputs,
    records_for_group,
    source_model,
)
from casan_hf.cli.arguments import PositiveInt
from casan_hf.cli.run_start import code_commit
from casan_hf.context import CONTEXT_KINDS
from casan_hf.families import FAMILIES


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Batch sizes that keep a BERT-base step near 512 tokens: a full CPU run fits in about 15 minutes.
DEFAULT_BATCH = {128: 4, 512: 1}
DEFAULT_RANK = 64
# Untimed rounds a compiled model needs: the compile, then the CUDA-graph warm-up and recording of reduce-overhead.
COMPILED_WARMUP = 3

logger = logging.getLogger("benchmark")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--modes", nargs="+", default=["inference", "training"], choices=["inference", "training"])
    parser.add_argument("--batch-size", type=int, help="default: 4 at sequence 128, 1 at 512, else 512 // seq")
    parser.add_argument("--device", default="auto", help="auto (cuda when present, else cpu), cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="float32", choices=list(DTYPES))
    parser.add_argument(
        "--family",
        default=DEFAULT_FAMILY,
        choices=[family.name for family in FAMILIES],
        help="the family whose transformers and CASAN base models are compared (default: bert)",
    )
    parser.add_argument(
        "--attn",
        choices=["sdpa", "eager"],
        help="attention backend of every model (default: sdpa, eager for a family without sdpa)",
    )
    parser.add_argument(
        "--context-types", nargs="+", choices=CONTEXT_KINDS, help="default: every kind, the control none first"
    )
    parser.add_argument("--rank", type=int, default=DEFAULT_RANK, help="context_rank of the low-rank rows (0: none)")
    parser.add_argument(
        "--local",
        nargs="+",
        default=[],
        choices=list(CONTEXT_KINDS),
        metavar="CONTEXT_TYPE",
        help="also time each of these context types with the local bias (local_bias='query' on the lower half of the "
        "layers, started at 0 as a conversion starts it): e.g. --local none global deep_global",
    )
    parser.add_argument(
        "--pytorch-mixer",
        action="store_true",
        help="also time each CASAN kind with its mixer on the PyTorch path, beside the fused kernels (on a GPU)",
    )
    parser.add_argument(
        "--compile",
        choices=["default", "reduce-overhead", "max-autotune"],
        help="also time every model compiled in this torch.compile mode",
    )
    parser.add_argument(
        "--compile-backend",
        default="inductor",
        help="torch.compile backend of --compile and of --proxy's compiled mode",
    )
    parser.add_argument(
        "--warmup", type=int, help=f"untimed rounds before the memory round (1; {COMPILED_WARMUP} with --compile)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed round-robin rounds")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", type=Path, help="write one record per measurement here")
    parser.add_argument("--quick", action="store_true", help="minilm, sequence 128, batch 1, 2 rounds")
    shape = proxy.ProxyShape()
    group = parser.add_argument_group("the host-bound proxy (--proxy)")
    group.add_argument("--proxy", action="store_true", help="measure the host-bound proxy of a GPU step instead")
    group.add_argument("--proxy-layers", type=PositiveInt, default=shape.layers, help="BERT layers")
    group.add_argument(
        "--proxy-hidden", type=PositiveInt, default=shape.hidden, help="hidden size (a head per 64, FFN 4x)"
    )
    group.add_argument("--proxy-batch", type=PositiveInt, default=shape.batch, help="batch size")
    group.add_argument("--proxy-seq", type=PositiveInt, default=shape.seq, help="sequence length (at most 512)")
    group.add_argument("--proxy-rounds", type=PositiveInt, default=300, help="timed rounds per mode and run")
    group.add_argument(
        "--proxy-block", type=PositiveInt, default=proxy.BLOCK, help="steps of one model in a row in each round"
    )
    group.add_argument("--proxy-runs", type=PositiveInt, default=3, help="whole measurements; medians over them")
    add_causal_args(parser)
    args = parser.parse_args()
    check_own_setups(parser, args)
    check_proxy_shape(parser, args)
    check_causal_shape(parser, args)
    check_attention(parser, args)
    if args.quick:
        args.sizes, args.seq_lens, args.batch_size, args.repeats = [MINILM], [128], 1, 2
    if args.warmup is None:
        args.warmup = COMPILED_WARMUP if args.compile else 1
    elif args.compile and args.warmup < COMPILED_WARMUP:
        parser.error(
            f"--compile needs --warmup {COMPILED_WARMUP} or more: the first call compiles, and CUDA graphs "
            "(reduce-overhead) are recorded on the calls after it; timing them would time the compiler."
        )
    return args


def add_causal_args(parser):
    """`--causal` and its `--causal-*` flags, one per field of `causal.CausalShape`, with its default and help."""
    group = parser.add_argument_group("the causal language models (--causal)")
    group.add_argument("--causal", action="store_true", help="measure a Llama's prefill and decode instead")
    for field in dataclasses.fields(causal.CausalShape):
        flag = "--causal-" + field.name.replace("_", "-")
        group.add_argument(
            flag, type=PositiveInt, default=field.default, help=f"{field.metadata['help']} (default {field.default})"
        )


# The measurements with a setup of their own, by flag: the family each measures, and the flags it shares with the
# others (the rest of its setup are its own `--NAME-*` flags).
OWN_SETUPS = {
    "proxy": ("BERT", {"json", "compile_backend"}),
    "causal": (
        "Llama",
        {"json", "rank", "attn", "device", "dtype", "threads", "warmup", "repeats", "compile", "compile_backend"},
    ),
}


def check_own_setups(parser, args):
    """The proxy and the causal models have setups of their own: the other measurement flags beside `--proxy` or
    `--causal`, or their own flags without it, are refused rather than ignored."""
    changed = {
        action.dest: action.option_strings[0]
        for action in parser._actions
        if action.dest != "help" and getattr(args, action.dest) != action.default
    }
    own_flags = {name: [flag for dest, flag in changed.items() if dest.startswith(f"{name}_")] for name in OWN_SETUPS}
    for name, flags in own_flags.items():
        if flags and not getattr(args, name):
            parser.error(f"{' '.join(flags)}: only with --{name}")
    for name, (family, shared) in OWN_SETUPS.items():
        if not getattr(args, name):
            continue
        if args.family != DEFAULT_FAMILY:
            parser.error(f"--{name} measures {family} only; it does not take --family {args.family}")
        other_flags = [
            flag
            for dest, flag in changed.items()
            if dest != name and flag not in own_flags[name] and dest not in shared
        ]
        if other_flags:
            parser.error(f"--{name} has a setup of its own and does not take {' '.join(other_flags)} (see --{name}-*)")


def check_proxy_shape(parser, args):
    """`--proxy`'s BERT must fit its positions, and its heads (one per 64) must split its width."""
    if not args.proxy:
        return
    if args.proxy_seq > 512:
        parser.error(f"--proxy-seq {args.proxy_seq}: at most 512 (BERT's positions)")
    heads = max(1, args.proxy_hidden // 64)
    if args.proxy_hidden % heads:
        parser.error(f"--proxy-hidden {args.proxy_hidden}: not a multiple of its {heads} heads (one per 64)")


def check_causal_shape(parser, args):
    """`--causal`'s Llama must be one: its heads split the hidden size, its key-value heads the heads, and each head's
    width is even (rotary positions turn pairs of features)."""
    if not args.causal:
        return
    if args.rank == 0:
        parser.error("--causal times deep and deep_global at --rank: give a positive rank, not 0")
    if args.causal_hidden % args.causal_heads or args.causal_hidden // args.causal_heads % 2:
        parser.error(
            f"--causal-hidden {args.causal_hidden}: not an even width per head of its {args.causal_heads} heads"
        )
    if args.causal_heads % args.causal_kv_heads:
        parser.error(
            f"--causal-kv-heads {args.causal_kv_heads}: does not divide the {args.causal_heads} heads (--causal-heads)"
        )


def check_attention(parser, args):
    """`--attn` must be a backend the family has; left out, it is the family's first (sdpa where it has it)."""
    if args.proxy:
        return
    family = causal.FAMILY if args.causal else args.family
    allowed = attention_backends(family)
    if args.attn is None:
        args.attn = allowed[0]
    elif args.attn not in allowed:
        parser.error(
            f"--attn {args.attn}: the {family} family has no {args.attn} attention in transformers; "
            f"use --attn {' or '.join(allowed)}"
        )


def run_proxy(args):
    """The proxy's table (medians over the runs, then each run's ratios) and, with `--json`, its raw records."""
    shape = proxy.ProxyShape(args.proxy_layers, args.proxy_hidden, args.proxy_batch, args.proxy_seq)
    steps = proxy.progress_steps(args.proxy_rounds, args.proxy_runs, args.proxy_block)
    progress = tqdm(total=steps, unit="step", desc="proxy")
    records = proxy.measure(
        shape, args.proxy_rounds, args.proxy_runs, args.compile_backend, progress, block=args.proxy_block
    )
    progress.close()
    print(proxy.format_summary(records))
    return records


def run_causal(args, device, dtype):
    """The causal language models' tables (`causal.format_tables`); returns their records."""
    fields = dataclasses.fields(causal.CausalShape)
    shape = causal.CausalShape(**{field.name: getattr(args, f"causal_{field.name}") for field in fields})
    variants = causal.causal_variants(args.rank, args.compile)
    progress = tqdm(total=causal.progress_steps(shape, variants, args.warmup, args.repeats), unit="call")
    records = causal.measure(
        shape,
        args.rank,
        args.attn,
        dtype,
        device,
        args.warmup,
        args.repeats,
        progress,
        args.compile,
        args.compile_backend,
    )
    progress.close()
    for phase in causal.PHASES:
        group = [record for record in records if record["mode"] == phase]
        print(f"\n{causal.phase_title(group[0])}:\n{format_table(group)}")
    print(f"\n{causal.format_cache_table(records)}")
    print(f"\n{causal.format_operator_table(records)}")
    if args.compile:
        print(f"\n{causal.format_graph_table(records)}")
    return records


def format_table(records):
    """The group's table; with compiled models, `x eager` is each one's speed over its own eager run, and with targets
    (the causal models' records), each row's target ratio. Where flops.py does not count the family's arithmetic
    (the records' floors are None), the floor columns are left out and a last line says why."""
    compiled = any(record["compile_mode"] for record in records)
    floors = records[0]["flop_floor"] is not None
    targets = "target" in records[0]
    header = (
        f"{'model':<40} {'params':>8} {'+params':>8} {'tokens/s':>9} {'ms':>8} {'cpu ms':>8} "
        f"{'peak MB':>8} {'ratio':>6} {'cpu ratio':>9}"
        + (f" {'flop floor':>10} {'floor':>6}" if floors else "")
        + (f" {'x eager':>7}" if compiled else "")
        + (f" {'target':>6}" if targets else "")
    )
    source_params = records[0]["params"]
    lines = [header]
    for record in records:
        peak = "n/a" if record["peak_mem_mb"] is None else f"{record['peak_mem_mb']:.0f}"
        target = "" if record.get("target") is None else f"{record['target']:.2f}"
        lines.append(
            f"{record['model']:<40} {record['params'] / 1e6:>7.1f}M {record['params'] / source_params - 1:>+8.1%} "
            f"{record['tokens_per_s']:>9.0f} {record['ms_per_step']:>8.1f} {record['cpu_ms_per_step']:>8.1f} "
            f"{peak:>8} {record['ratio_vs_bert']:>6.3f} {record['cpu_ratio_vs_bert']:>9.3f}"
            + (f" {record['flop_floor']:>10.3f} {record['floor']:>6.3f}" if floors else "")
            + (f" {record['speedup_vs_eager']:>7.3f}" if compiled else "")
            + (f" {target:>6}" if targets else "")
        )
    if not floors:
        lines.append(
            f"(no floor columns: casan_hf/benchmark/flops.py counts BERT-style layers, not {records[0]['family']}'s "
            "own arithmetic; see docs/BENCHMARKS.md)"
        )
    return "\n".join(lines)


def cpu_name():
    """The CPU's model name as Linux gives it (another CPU's kernels time otherwise), else what Python knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def write_json(path, records):
    """The records, each naming the commit of the code that timed it and the machine it ran on."""
    machine = {
        "commit": code_commit(),
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{**record, **machine} for record in records], indent=1))
    logger.info(f"wrote {len(records)} records to {path}")


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.proxy:
        records = run_proxy(args)
        if args.json:
            write_json(args.json, records)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    device = (
        torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if args.device == "auto"
        else torch.device(args.device)
    )
    dtype = DTYPES[args.dtype]
    if args.causal:
        records = run_causal(args, device, dtype)
        if args.json:
            write_json(args.json, records)
        return
    variants = default_variants(
        args.rank,
        args.context_types,
        args.compile,
        extra=local_variants(args.local),
        family=args.family,
        pytorch_mixer=args.pytorch_mixer,
    )
    source = variants[0].label
    named = "" if args.family == DEFAULT_FAMILY else f"{args.family}, "  # BERT's output reads as it always has
    # The machine's balance serves the floor alone: not measured for a family whose floor is not counted.
    balance = machine_balance(device, dtype) if counts_floor(args.family) else None
    logger.info(
        f"{'family ' if named else ''}{named}device {device}, dtype {args.dtype}, attention {args.attn}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, balance "
        + ("n/a (no floor)" if balance is None else f"{balance:.1f} FLOP/byte")
    )

    groups = [(size, seq_len) for size in args.sizes for seq_len in args.seq_lens]
    rounds = args.warmup + 1 + args.repeats
    progress = tqdm(total=len(groups) * len(args.modes) * rounds * len(variants), unit="step")
    records = []
    for size, seq_len in groups:
        progress.set_description(f"{size} seq {seq_len}: building")
        reference, weights = source_model(size, args.attn, dtype, args.family)
        eager = [variant for variant in variants if variant.compile_mode is None]
        models = {variant.label: build_model(variant, reference, args.attn, dtype).to(device) for variant in eager}
        models = compiled_twins(models, variants, args.compile_backend)
        del reference
        batch_size = args.batch_size or DEFAULT_BATCH.get(seq_len, max(1, 512 // seq_len))
        inputs = random_inputs(models[source].config.vocab_size, batch_size, seq_len, device)
        for mode in args.modes:
            progress.set_description(f"{size} seq {seq_len} {mode}")
            results = benchmark_group(models, variants, inputs, mode, device, args.warmup, args.repeats, progress)
            group = records_for_group(
                results, models, variants, size, seq_len, batch_size, mode, device, dtype, args.attn, balance, weights
            )
            records.extend(group)
            progress.write(
                f"\n{named}{size} ({weights} weights), seq {seq_len}, batch {batch_size}, {mode}, "
                f"{device} {args.dtype} {args.attn}:\n{format_table(group)}"
            )
        del models
    progress.close()
    if args.json:
        write_json(args.json, records)


if __name__ == "__main__":
    main()
