#!/usr/bin/env python
"""Packs all-MiniLM-L6-v2 into half its size for the GPU shards, and unpacks it on the GPU node.

The checkpoint's float32 weights are 87 MiB, more than fits beside the GLUE data under the 64 MiB a shard is
sized for (scripts/device/prepare.sh, LIMIT_MIB), so they travel as float16 (43 MiB) and are widened back to a
float32 `model.safetensors` before any run reads them. The widened
weights are the original ones rounded to float16 (the largest change, which `pack` prints, is 0.00098 on a weight of
2.0), the same for every variant and its twin.

    python scripts/device/minilm_fp16.py pack "$MINILM" .device/minilm      # here
    python3 scripts/device/minilm_fp16.py unpack .device/minilm /tmp/minilm  # on the node
"""

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


WEIGHTS = "model.safetensors"
# What run_glue.py reads besides the weights: the model's config and its tokenizer.
FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def copy_files(source, target):
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy2(source / name, target / name)


def convert(tensor, source_dtype, target_dtype):
    """Floating-point weights change width; integer buffers (BERT's position_ids) travel as they are."""
    return tensor.to(target_dtype) if tensor.dtype == source_dtype else tensor


def pack(source, target):
    weights = load_file(source / WEIGHTS)
    if any(tensor.dtype == torch.float16 for tensor in weights.values()):
        raise SystemExit(f"minilm_fp16.py: error: {source / WEIGHTS} is float16 already; unpack widens every one")
    halves = {name: convert(tensor, torch.float32, torch.float16) for name, tensor in weights.items()}
    largest = max(((halves[name].double() - tensor).abs().max().item(), name) for name, tensor in weights.items())
    copy_files(source, target)
    save_file(halves, target / WEIGHTS, metadata={"format": "pt"})
    print(f"packed {len(halves)} tensors into {target / WEIGHTS}; largest change {largest[0]:.3g} ({largest[1]})")


def unpack(source, target):
    copy_files(source, target)
    weights = {
        name: convert(tensor, torch.float16, torch.float32) for name, tensor in load_file(source / WEIGHTS).items()
    }
    save_file(weights, target / WEIGHTS, metadata={"format": "pt"})
    print(f"unpacked float32 weights into {target / WEIGHTS}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    {"pack": pack, "unpack": unpack}[args.action](args.source, args.target)


if __name__ == "__main__":
    main()
