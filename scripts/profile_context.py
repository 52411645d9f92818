"""Where a CasanModel step spends its time, next to BertModel's: torch.profiler's operator table for each.

    python scripts/profile_context.py --size bert-base --seq-len 128 --batch-size 4 --mode training
    python scripts/profile_context.py --operators --mode training   # compute operators per layer, forward and backward

Run it with `OMP_NUM_THREADS=1` on a shared machine: one thread is not slowed by a descheduled partner, so
each operator's self time is its own work. The forward of every context mixer is labelled
`casan.context_mixer` (its CPU total is C U, the gate and the mix); the context's other costs show as
operators BERT does not have or has fewer of: `aten::addmm`/`aten::mm` for C U and its backward,
`aten::addmv_` for the gate, `aten::lerp` for the mix, `aten::bmm` for the masked means, `aten::cat` for the
gradient of the split U.

`--operators` prints instead how many compute operators (casan_hf/benchmark/operators.py) one step of `--mode`
runs, forward and backward, for BertModel and each CASAN context type, and per layer what the context adds: the
figure that matters where every operator is a kernel launch (a GPU). `--fused-mixer` counts the path a GPU takes,
the fused mixer's, whose Triton kernels launch here as stubs that compute nothing, one operator each. It needs no
quiet machine. By default the models have BERT-base's depth and a width of 64 (`--size bert-base` for the real
width: the same counts for the context, slower; BERT's own differ a little, as sdpa picks another path).
"""

import argparse
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from casan_hf.benchmark.operators import count_table, format_count_table, small_bert_config
from casan_hf.benchmark.runner import (
    BERT_BASE,
    DEFAULT_FAMILY,
    SIZES,
    Variant,
    build_model,
    default_variants,
    make_step,
    random_inputs,
    source_model,
)
from casan_hf.context import CONTEXT_KINDS
from casan_hf.context_mixer import CasanContextMixer


# The low rank of the operator counts' low-rank rows (the kinds whose context grows with depth).
OPERATOR_RANK = 64


def label_context_mixers(model):
    """Wraps every context mixer's forward in a profiler range, so that its total time is one row."""
    ranges = []  # one stack: a mixer's range opens and closes before the next mixer runs
    for module in model.modules():
        if isinstance(module, CasanContextMixer):
            module.register_forward_pre_hook(
                lambda *_: ranges.append(record_function("casan.context_mixer").__enter__())
            )
            module.register_forward_hook(lambda *_: ranges.pop().__exit__(None, None, None))


def print_operator_counts(args):
    """The operator table of `--operators`: `--size` is the width (default 64), the depth is BERT-base's."""
    if args.size is None:
        config = small_bert_config()
    else:
        config = source_model(args.size, args.attn, torch.float32)[0].config
    inputs = random_inputs(config.vocab_size, args.batch_size, args.seq_len, torch.device("cpu"))
    casan = [(v.label, v.casan_options()) for v in default_variants(OPERATOR_RANK) if v.context_type is not None]
    rows = count_table(config, casan, inputs, args.mode, args.attn, fused=args.fused_mixer)
    path = "the fused mixer's path, each Triton launch one operator" if args.fused_mixer else "the PyTorch path"
    print(
        f"compute operators of one {args.mode} step, hidden {config.hidden_size}, {config.num_hidden_layers} "
        f"layers, seq {args.seq_len}, batch {args.batch_size}, {args.attn}, {path}; per layer: over the layers; "
        "context: what CASAN adds over BertModel"
    )
    print(format_count_table(rows, config.num_hidden_layers))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=list(SIZES), help=f"default: {BERT_BASE} (--operators: width 64)")
    parser.add_argument(
        "--context-types",
        nargs="+",
        default=[DEFAULT_FAMILY, *(name for name, kind in CONTEXT_KINDS.items() if kind.gives_context)],
        help="bert or a context type (default: bert and every kind but the control, which runs BERT's numbers)",
    )
    parser.add_argument("--rank", type=int, help="context_rank of the CASAN models")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--mode", default="inference", choices=["inference", "training"])
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--rows", type=int, default=12, help="operators shown per model")
    parser.add_argument("--operators", action="store_true", help="count compute operators instead (see above)")
    parser.add_argument(
        "--fused-mixer",
        action="store_true",
        help="with --operators: count the fused mixer's path, its Triton kernels launched as stubs, one operator each",
    )
    args = parser.parse_args()
    if args.fused_mixer and not args.operators:
        parser.error("--fused-mixer counts the fused path's operators: give it with --operators")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.operators:
        print_operator_counts(args)
        return
    args.size = args.size or BERT_BASE

    reference, _ = source_model(args.size, args.attn, torch.float32)
    inputs = random_inputs(reference.config.vocab_size, args.batch_size, args.seq_len, torch.device("cpu"))
    for context_type in args.context_types:
        variant = Variant(context_type, None if context_type == DEFAULT_FAMILY else context_type, args.rank)
        model = build_model(variant, reference, args.attn, torch.float32)
        label_context_mixers(model)
        step = make_step(model, inputs, args.mode)
        step()  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        print(f"\n## {context_type}, {args.size}, seq {args.seq_len}, batch {args.batch_size}, {args.mode}")
        events = prof.key_averages()
        print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
        mixer = sum(event.cpu_time_total for event in events if event.key == "casan.context_mixer")
        total = sum(event.self_cpu_time_total for event in events)
        print(f"context mixer forward: {mixer / 1e3:.1f} ms of {total / 1e3:.1f} ms ({mixer / total:.1%})")


if __name__ == "__main__":
    main()
