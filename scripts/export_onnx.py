#!/usr/bin/env python
"""Exports a CASAN folder to ONNX and checks onnxruntime against PyTorch on a padded batch.

The export is transformers' own (`transformers.exporters.OnnxExporter`, torch.export and torch.onnx with its
patches for ONNX Runtime), with the batch and sequence axes dynamic. torch.export fixes any axis whose example
size is 1, so the example is always two sentences of different lengths, padded: the exported graph takes any
batch size and length. The check runs a different padded batch (three sentences, one longer than any in the
example) through both and prints the largest difference of every output; it fails above --tolerance.

    python scripts/export_onnx.py --model_name_or_path outputs/minilm-casan-deep_global-mrpc \
        --output_dir outputs/minilm-casan-deep_global-mrpc-onnx
"""

import sys
from dataclasses import dataclass, field

from casan_hf.cli.extras import require_packages


require_packages("export_onnx.py", "onnx", "onnxruntime", "onnxscript")

import numpy as np
import onnxruntime
import torch
from transformers import AutoConfig, AutoTokenizer, HfArgumentParser
from transformers.exporters.configs import OnnxConfig
from transformers.exporters.exporter_onnx import OnnxExporter

from casan_hf import FAMILIES, HEADS, casan_class
from casan_hf.hub import check_output_dir


EXAMPLE = ["A short example.", "A longer example sentence, so that the batch is padded."]
CHECK = [
    "The check batch differs from the example.",
    "Short.",
    "Its longest sentence is longer than any sentence of the example batch, so the sequence axis must really "
    "be dynamic for the exported graph to run it.",
]


@dataclass
class ExportArguments:
    model_name_or_path: str = field(metadata={"help": "A CASAN folder or Hub id (any head)."})
    output_dir: str = field(metadata={"help": "Where model.onnx, its weights, config and tokenizer are written."})
    overwrite: bool = field(default=False, metadata={"help": "Write into a non-empty --output_dir."})
    tolerance: float = field(
        default=1e-4,
        metadata={
            "help": "Largest difference onnxruntime may show, in units of 1 + |PyTorch's value| (absolute for "
            "small outputs, relative for large ones, such as a real checkpoint's hidden states)."
        },
    )


def head_of(config):
    """The HEADS row of the folder's architecture."""
    architecture = (config.architectures or ["CasanModel"])[0]
    for family in FAMILIES:
        for head in HEADS:
            if family.class_name(head) == architecture:
                return head
    raise ValueError(f"{architecture!r} is not a CASAN architecture; CASAN folders hold one of the HEADS.")


def encode(tokenizer, texts, head):
    """The model's inputs for `texts`, padded; a head that takes choices gets each text as a choice of every
    example."""
    inputs = dict(tokenizer(texts, padding=True, return_tensors="pt"))
    if head.takes_choices:
        inputs = {name: tensor[None].expand(len(texts), -1, -1).contiguous() for name, tensor in inputs.items()}
    return inputs


def max_differences(session, model, inputs):
    """`{output name: largest difference}` between onnxruntime and PyTorch on `inputs`, each in units of
    1 + |PyTorch's value|."""
    feed = {item.name: inputs[item.name].numpy() for item in session.get_inputs()}
    ort_outputs = session.run(None, feed)
    with torch.no_grad():
        torch_outputs = model(**inputs)
    return {
        item.name: float((np.abs(value - reference) / (1 + np.abs(reference))).max())
        for item, value in zip(session.get_outputs(), ort_outputs, strict=True)
        for reference in [torch_outputs[item.name].numpy()]
    }


def main(argv=None):
    parser = HfArgumentParser(ExportArguments, description=__doc__.split("\n\n")[0])
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    try:
        check_output_dir(args.output_dir, args.overwrite, flag="--overwrite")
        config = AutoConfig.from_pretrained(args.model_name_or_path)
        head = head_of(config)
    except ValueError as error:
        parser.error(str(error))
    model = casan_class(config.model_type, head.name).from_pretrained(args.model_name_or_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)

    print(f"Exporting {type(model).__name__} ({model.config.context_type} context) with dynamic batch and length")
    exported = OnnxExporter().export(model, encode(tokenizer, EXAMPLE, head), OnnxConfig(dynamic=True))
    exported.save_pretrained(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)

    session = onnxruntime.InferenceSession(f"{args.output_dir}/model.onnx", providers=["CPUExecutionProvider"])
    inputs = encode(tokenizer, CHECK, head)
    differences = max_differences(session, model, inputs)
    shape = "x".join(map(str, inputs["input_ids"].shape))
    for name, difference in differences.items():
        print(
            f"onnxruntime vs PyTorch, {name}, padded batch {shape}: max difference {difference:.2e} (of 1 + |value|)"
        )
    if not all(difference <= args.tolerance for difference in differences.values()):  # NaN fails too
        sys.exit(f"export_onnx.py: error: onnxruntime differs from PyTorch by more than {args.tolerance}")
    print(f"Saved {args.output_dir}/model.onnx")


if __name__ == "__main__":
    main()
