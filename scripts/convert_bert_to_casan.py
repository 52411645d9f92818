#!/usr/bin/env python
"""Converts a BERT checkpoint into a Hub-ready CASAN folder.

The folder holds the weights (safetensors), a config with `auto_map`, the model's code files, the tokenizer
and a model card, so that `AutoModel...from_pretrained(folder, trust_remote_code=True)` loads it without
casan_hf installed and `huggingface-cli upload` can publish it as is. The context parameters are new
(initialised so that the model starts close to the BERT it came from); fine-tune before use.

    python scripts/convert_bert_to_casan.py --model_name_or_path bert-base-uncased \
        --output_dir casan-bert-base --context_type deep_global --head sequence-classification --num_labels 2
"""

import argparse
import os
from pathlib import Path

from transformers import AutoTokenizer

import casan_hf
from casan_hf.configuration_casan import (
    CLASSIFIER_POOLINGS,
    CONTEXT_OPTIONS,
    CONTEXT_TARGETS,
    CONTEXT_TYPES,
    GATE_KINDS,
    POOLING_OPTIONS,
)
from casan_hf.hub_export import check_output_dir, save_hub_folder
from casan_hf.model_card import PIPELINE_TAGS, POOLING_HEADS, render_model_card


TEMPLATE_PATH = Path(__file__).resolve().parents[1] / "model_cards" / "README_TEMPLATE.md"

HEAD_CLASSES = {
    "base": casan_hf.CasanModel,
    "sequence-classification": casan_hf.CasanForSequenceClassification,
    "token-classification": casan_hf.CasanForTokenClassification,
    "question-answering": casan_hf.CasanForQuestionAnswering,
    "multiple-choice": casan_hf.CasanForMultipleChoice,
    "masked-lm": casan_hf.CasanForMaskedLM,
}


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_name_or_path", required=True, help="A BERT checkpoint: local folder or Hub id.")
    parser.add_argument("--output_dir", required=True, help="Where the Hub-ready folder is written.")
    parser.add_argument("--overwrite", action="store_true", help="Write into a non-empty --output_dir.")
    parser.add_argument("--head", choices=list(HEAD_CLASSES), default="base", help="Which model class to save (default: base).")
    parser.add_argument("--num_labels", type=positive_int, help="Labels of a classification head.")
    parser.add_argument("--context_type", choices=CONTEXT_TYPES, default="deep_global")
    parser.add_argument("--context_targets", nargs="+", choices=CONTEXT_TARGETS, help="Default: query key.")
    parser.add_argument("--context_layers", nargs="+", type=int, help="0-based layers that get context (default: all).")
    parser.add_argument("--gate", choices=GATE_KINDS, help="Default: dynamic.")
    parser.add_argument("--fixed_gate", type=float, help="The constant gate of --gate fixed, in [0, 1].")
    parser.add_argument("--gate_bias_init", type=float, help="Initial gate bias (a logit); default -4.")
    parser.add_argument("--context_rank", type=positive_int, help="Rank of a low-rank U (default: full rank).")
    parser.add_argument("--context_init_range", type=float, help="Std of the context parameters' initialisation.")
    parser.add_argument("--classifier_pooling", choices=CLASSIFIER_POOLINGS, help="Sentence vector of a sequence-classification or multiple-choice head: cls (BERT's pooler, default), mean or structured.")
    parser.add_argument("--pooling_hops", type=positive_int, help="Attention hops r of --classifier_pooling structured (default: 4).")
    parser.add_argument("--pooling_hidden", type=positive_int, help="Hidden width d_a of the structured pooling's scorer (default: 128).")
    parser.add_argument("--pooling_penalty", type=float, help="Weight of the structured pooling's ||AA^T - I||^2 penalty (default: 1.0).")
    parser.add_argument("--base_model", help="Hub id of the source checkpoint for the card (default: --model_name_or_path if it is a Hub id).")
    parser.add_argument("--model_name", help="Name on the card and in its code snippet (default: the output folder's name).")
    parser.add_argument("--license", default="apache-2.0", help="License on the card (default: apache-2.0).")
    args = parser.parse_args(argv)
    if args.num_labels is not None and args.head not in ("sequence-classification", "token-classification"):
        parser.error(f"--num_labels needs --head sequence-classification or token-classification, not {args.head!r}")
    pooling_flags = [f"--{name}" for name in POOLING_OPTIONS if getattr(args, name) is not None]
    if pooling_flags and args.head not in POOLING_HEADS:
        parser.error(f"{' '.join(pooling_flags)} needs --head {' or '.join(POOLING_HEADS)}, not {args.head!r}")
    try:
        check_output_dir(args.output_dir, args.overwrite, flag="--overwrite")
    except ValueError as error:
        parser.error(str(error))
    return parser, args


def casan_options(args):
    """The CASAN options given on the command line; the rest keep CasanConfig's defaults."""
    return {name: getattr(args, name) for name in CONTEXT_OPTIONS + POOLING_OPTIONS if getattr(args, name) is not None}


def main(argv=None):
    parser, args = parse_args(argv)
    kwargs = casan_options(args)
    if args.num_labels is not None:
        kwargs["num_labels"] = args.num_labels
    try:
        model = HEAD_CLASSES[args.head].from_pretrained(args.model_name_or_path, **kwargs)
    except ValueError as error:
        parser.error(str(error))
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    model_name = args.model_name or os.path.basename(os.path.normpath(args.output_dir))
    card = render_model_card(
        TEMPLATE_PATH,
        model,
        model_name,
        head=args.head,
        base_model=args.base_model or args.model_name_or_path,
        license=args.license,
    )
    save_hub_folder(args.output_dir, model, tokenizer, card, overwrite=args.overwrite)
    print(f"Saved {type(model).__name__} ({args.context_type} context, pipeline {PIPELINE_TAGS[args.head]}) to {args.output_dir}")


if __name__ == "__main__":
    main()
