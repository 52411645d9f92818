"""Where a CasanModel step spends its time, next to BertModel's: torch.profiler's operator table for each.

    python scripts/profile_context.py --size bert-base --seq-len 128 --batch-size 4 --mode training

Run it with `OMP_NUM_THREADS=1` on a shared machine: one thread is not slowed by a descheduled partner, so
each operator's self time is its own work. The forward of every context mixer is labelled
`casan.context_mixer` (its CPU total is C U, the gate and the mix); the context's other costs show as
operators BERT does not have or has fewer of: `aten::addmm`/`aten::mm` for C U and its backward,
`aten::addmv_` for the gate, `aten::lerp` for the mix, `aten::bmm` for the masked means, `aten::cat` for the
gradient of the split U.
"""

import argparse
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from casan_hf.benchmark.runner import Variant, build_model, make_step, random_inputs, reference_bert
from casan_hf.context import CasanContextMixer


def label_context_mixers(model):
    """Wraps every context mixer's forward in a profiler range, so that its total time is one row."""
    ranges = []  # one stack: a mixer's range opens and closes before the next mixer runs
    for module in model.modules():
        if isinstance(module, CasanContextMixer):
            module.register_forward_pre_hook(
                lambda *_: ranges.append(record_function("casan.context_mixer").__enter__())
            )
            module.register_forward_hook(lambda *_: ranges.pop().__exit__(None, None, None))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="bert-base", choices=["minilm", "bert-base"])
    parser.add_argument("--context-types", nargs="+", default=["bert", "global", "deep", "deep_global"])
    parser.add_argument("--rank", type=int, help="context_rank of the CASAN models")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--mode", default="inference", choices=["inference", "training"])
    parser.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    parser.add_argument("--rows", type=int, default=12, help="operators shown per model")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    reference, _ = reference_bert(args.size, args.attn, torch.float32)
    inputs = random_inputs(reference.config.vocab_size, args.batch_size, args.seq_len, torch.device("cpu"))
    for context_type in args.context_types:
        variant = Variant(context_type, None if context_type == "bert" else context_type, args.rank)
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
