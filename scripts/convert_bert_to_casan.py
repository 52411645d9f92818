#!/usr/bin/env python
"""Converts a checkpoint of a family CASAN converts (BERT, RoBERTa, XLM-RoBERTa, ELECTRA, ModernBERT, DeBERTa-v2/v3;
the causal LMs Llama, Qwen2, Qwen3, GPT-2) into a Hub-ready CASAN folder.

The folder holds the weights (safetensors), a config with `auto_map`, the model's code files, the tokenizer
and a model card, so that `AutoModel...from_pretrained(folder, trust_remote_code=True)` loads it without
casan_hf installed and `scripts/push_to_hub.py` publishes it once it has checked it. The context parameters are new
(initialised so that the model starts close to the checkpoint it came from); fine-tune before use.

    python scripts/convert_bert_to_casan.py --model_name_or_path bert-base-uncased \
        --output_dir casan-bert-base --context_type deep_global --head sequence-classification --num_labels 2
    python scripts/convert_bert_to_casan.py --model_name_or_path Qwen/Qwen3-0.6B --output_dir casan-qwen3 \
        --context_type deep_global --context_rank 64 --head causal-lm

A causal LM's context gates start scaled by exactly 0 (`context_start="zero"`), so its logits equal the source's
until it is fine-tuned.
"""

import os
import sys
from dataclasses import dataclass, field

from transformers import AutoTokenizer, HfArgumentParser, PreTrainedConfig

from casan_hf import CAUSAL_FAMILIES, CAUSAL_HEADS, FAMILIES, HEADS, casan_class, get_head
from casan_hf.cli import CasanArguments, PositiveInt
from casan_hf.hub import (
    check_output_dir,
    copy_into,
    render_model_card,
    save_hub_folder,
    sentence_transformers_pipeline,
    untrained_heads,
    untrained_heads_warning,
)


# The files of which a saved tokenizer has at least one: its config, or its fast tokenizer alone.
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json")


@dataclass
class ConvertArguments:
    """What to convert, into which head, and where to write the Hub folder."""

    model_name_or_path: str = field(
        metadata={
            "help": "A checkpoint of a family CASAN converts (model_type "
            f"{', '.join(family.name for family in (*FAMILIES, *CAUSAL_FAMILIES))}), or a CASAN one: local folder or "
            "Hub id."
        }
    )
    output_dir: str = field(metadata={"help": "Where the Hub-ready folder is written."})
    overwrite: bool = field(default=False, metadata={"help": "Write into a non-empty --output_dir."})
    head: str = field(
        default="base",
        metadata={
            "help": "Which model class to save (a causal LM's: base, causal-lm, sequence-classification).",
            "choices": [head.name for head in (*HEADS, *CAUSAL_HEADS)],
        },
    )
    num_labels: PositiveInt | None = field(default=None, metadata={"help": "Labels of a classification head."})
    base_model: str | None = field(
        default=None,
        metadata={"help": "Hub id of the source checkpoint for the card (--model_name_or_path if it is a Hub id)."},
    )
    model_name: str | None = field(
        default=None, metadata={"help": "Name on the card and in its code snippet (the output folder's name)."}
    )
    license: str = field(default="apache-2.0", metadata={"help": "License on the card."})
    sentence_transformers: bool = field(
        default=False,
        metadata={
            "help": "Also copy the source's sentence-transformers pipeline (modules.json, pooling, normalisation), "
            "so that SentenceTransformer(output_dir, trust_remote_code=True) loads the CASAN encoder in it. "
            "Needs --head base."
        },
    )


class UnderscoreFlagParser(HfArgumentParser):
    """HfArgumentParser without its dashed aliases (`--context-type`): one spelling per flag, so that a usage
    error names the flag as it was typed."""

    def add_argument(self, *option_strings, **kwargs):
        return super().add_argument(*[name for name in option_strings if "-" not in name[2:]], **kwargs)


def heads_with(attribute):
    return " or ".join(head.name for head in HEADS if getattr(head, attribute))


def parse_args(argv=None):
    parser = UnderscoreFlagParser((ConvertArguments, CasanArguments), description=__doc__.split("\n\n")[0])
    try:
        args, casan_args, unknown = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    except ValueError as error:  # a CASAN option's value, checked by the config's own check
        parser.error(str(error))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    head = get_head(args.head)
    if args.num_labels is not None and not head.takes_num_labels:
        parser.error(f"--num_labels needs --head {heads_with('takes_num_labels')}, not {args.head!r}")
    pooling_flags = [f"--{name}" for name in casan_args.casan_kwargs("pooling")]
    if pooling_flags and not head.pools_sentence:
        parser.error(f"{' '.join(pooling_flags)} needs --head {heads_with('pools_sentence')}, not {args.head!r}")
    if args.sentence_transformers and not head.bare:
        parser.error(f"--sentence_transformers needs --head {heads_with('bare')} (the encoder), not {args.head!r}")
    try:
        check_output_dir(args.output_dir, args.overwrite, flag="--overwrite")
    except ValueError as error:
        parser.error(str(error))
    return parser, args, casan_args


def source_tokenizer(name_or_path):
    """The tokenizer of the checkpoint `name_or_path`, which the folder carries beside the model; a ValueError in one
    line for a local folder that holds none, where transformers would try to build one from the config alone (a
    traceback from a missing backend, or a tokenizer of no vocabulary)."""
    if os.path.isdir(name_or_path) and not any(
        os.path.isfile(os.path.join(name_or_path, name)) for name in TOKENIZER_FILES
    ):
        raise ValueError(
            f"{name_or_path} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}), and the folder needs one: "
            "save the source model's tokenizer into it (tokenizer.save_pretrained) and convert again."
        )
    return AutoTokenizer.from_pretrained(name_or_path)


def main(argv=None):
    parser, args, casan_args = parse_args(argv)
    try:
        pipeline = sentence_transformers_pipeline(args.model_name_or_path) if args.sentence_transformers else []
    except ValueError as error:
        parser.error(str(error))
    kwargs = casan_args.casan_kwargs()
    if args.num_labels is not None:
        kwargs["num_labels"] = int(args.num_labels)
    try:
        tokenizer = source_tokenizer(args.model_name_or_path)
        model_type = PreTrainedConfig.get_config_dict(args.model_name_or_path)[0].get("model_type")
        model, loading = casan_class(model_type, args.head).from_pretrained(
            args.model_name_or_path, output_loading_info=True, **kwargs
        )
    except ValueError as error:
        parser.error(str(error))
    new_heads = untrained_heads(loading["missing_keys"])
    model_name = args.model_name or os.path.basename(os.path.normpath(args.output_dir))
    card = render_model_card(
        model,
        model_name,
        head=args.head,
        base_model=args.base_model or args.model_name_or_path,
        license=args.license,
        untrained_heads=new_heads,
    )
    save_hub_folder(args.output_dir, model, tokenizer, card, overwrite=args.overwrite)
    if pipeline:
        print(f"Copied the sentence-transformers pipeline: {', '.join(copy_into(pipeline, args.output_dir))}")
    print(f"Saved {type(model).__name__} ({model.config.context_type} context) to {args.output_dir}")
    if new_heads:
        print(f"WARNING: {untrained_heads_warning(new_heads, args.head)}", file=sys.stderr)


if __name__ == "__main__":
    main()
