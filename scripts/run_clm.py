#!/usr/bin/env python
"""Causal language modelling with context-aware self-attention: fine-tuning of a Llama, Qwen2, Qwen3 or GPT-2
checkpoint (converted) or of a CASAN one (continued), or training a new model from scratch, on raw text.

In the conventions of transformers' `examples/pytorch/language-modeling/run_clm.py`: `HfArgumentParser`,
`TrainingArguments`, `Trainer`; the text of each split tokenised line by line, concatenated and cut into blocks of
`--block_size` tokens (the remainder of each group of 1,000 lines dropped, as there); `--validation_split_percentage`
of a lone `--train_file` (its first lines, in order, as there) held out when no `--validation_file` is given;
`--model_type` with `--config_overrides` for a new model. What is added:

- `--model_name_or_path` may be a transformers checkpoint of a causal family (converted with the `--context_*`
  options; a conversion gives the source's logits exactly until it trains) or a CASAN one (continued); `--baseline`
  trains the unmodified source model (`LlamaForCausalLM`, ...), the twin, on the same text and steps;
- without it, a new model of `--model_type` (its config's defaults, the size flags given, then `--config_overrides`)
  with the tokenizer of `--tokenizer_name` and positions for `--block_size` tokens;
- `--test_file` with `--do_predict`: the test split's cross-entropy and perplexity beside the validation split's
  (`predict_results.json`); `--sample_prompt`: one greedy continuation of the final model (`sample.json`);
- `--output_dir` ends up as a Hub folder (weights, config with `auto_map`, code files, tokenizer, results) whose
  card holds the validation (and test) cross-entropy per token in nats and the perplexity;
- every evaluation of a model with context logs its mean query and key gates per layer (`GateMonitor`) into
  `trainer_state.json`, and the card holds the last.

    python scripts/run_clm.py --model_type llama --hidden_size 128 --num_hidden_layers 4 --num_attention_heads 4 \
        --intermediate_size 512 --tokenizer_name out/tokenizer --context_type global --train_file train.txt \
        --validation_file validation.txt --block_size 256 --do_train --do_eval --max_steps 1000 --output_dir out/clm
"""

import json
import logging
import math
import os
from dataclasses import dataclass, field
from itertools import chain

from casan_hf.cli.extras import TRAINING, require_packages


require_packages("run_clm.py", *TRAINING)

import torch
import transformers
from datasets import load_dataset
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoTokenizer, default_data_collator, set_seed

from casan_hf import CAUSAL_FAMILIES, casan_class, get_family, get_head
from casan_hf.cli.arguments import RunDataArguments, check_positive
from casan_hf.cli.console import announce_run, kept_of, model_words, saved_line
from casan_hf.cli.launch import exit_when_preempted, parse_run_args, prepare_or_exit, setup_logging
from casan_hf.cli.resume import find_checkpoint
from casan_hf.cli.run_inputs import check_tokenizer, first_examples, run_model_class
from casan_hf.cli.run_start import RunClock, record_run_start, run_arguments, time_before
from casan_hf.compat import PreTrainedConfig
from casan_hf.hub import is_hub_id
from casan_hf.training import (
    CasanTrainer,
    card_hyperparameters,
    check_training_options,
    finish_run,
    gate_monitor_for,
    train_and_save,
)


logger = logging.getLogger(__name__)

CAUSAL_TYPES = [family.name for family in CAUSAL_FAMILIES]
# The size flags of a new model: config fields every causal family's config names alike (GPT-2's through its
# `attribute_map`: hidden_size is n_embd), where the family has them.
SIZE_FLAGS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")
# The longest block a run cuts without --block_size, as transformers' example.
DEFAULT_BLOCK_SIZE = 1024
# Lines tokenised and concatenated together before they are cut into blocks (transformers' example: `map`'s batch).
LINES_PER_GROUP = 1000
SAMPLE_NAME = "sample.json"


@dataclass
class ModelArguments:
    """The model: a checkpoint to convert or continue, or the family and size of a new one."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "A Llama, Qwen2, Qwen3 or GPT-2 checkpoint (converted) or a CASAN one (continued): folder or Hub "
            "id. None: a new model of --model_type."
        },
    )
    model_type: str | None = field(
        default=None, metadata={"help": "The family of a new model.", "choices": CAUSAL_TYPES}
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "A new model's config fields over its family's defaults and the size flags: "
            "'rope_theta=10000,tie_word_embeddings=true'."
        },
    )
    hidden_size: int | None = field(default=None, metadata={"help": "A new model's width."})
    num_hidden_layers: int | None = field(default=None, metadata={"help": "A new model's depth."})
    num_attention_heads: int | None = field(default=None, metadata={"help": "A new model's query heads."})
    num_key_value_heads: int | None = field(default=None, metadata={"help": "Its key-value heads (not GPT-2)."})
    intermediate_size: int | None = field(default=None, metadata={"help": "Its feed-forward width (not GPT-2)."})
    baseline: bool = field(
        default=False,
        metadata={"help": "Train the unmodified source model (LlamaForCausalLM, ...), the twin, on the same run."},
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "Tokenizer: needed for a new model; default the checkpoint's own."}
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Where downloaded models and data are stored."})
    base_model: str | None = field(
        default=None,
        metadata={"help": "Hub id of the starting checkpoint, for the model card (default: --model_name_or_path)."},
    )
    license: str = field(default="apache-2.0", metadata={"help": "License written on the model card."})

    def __post_init__(self):
        check_positive(self, *SIZE_FLAGS, unit="size")
        new = [f"--{name}" for name in ("model_type", "config_overrides", *SIZE_FLAGS) if getattr(self, name)]
        if self.model_name_or_path is not None and new:
            raise ValueError(f"{', '.join(new)} shape a new model; --model_name_or_path loads one. Give one of them.")
        if self.model_name_or_path is None and self.model_type is None:
            raise ValueError("Give --model_name_or_path (a checkpoint) or --model_type (a new model).")
        if self.model_name_or_path is None and self.tokenizer_name is None:
            raise ValueError("A new model needs a tokenizer: pass --tokenizer_name (a folder or Hub id).")


@dataclass
class DataArguments(RunDataArguments):
    """The text: plain .txt files, tokenised line by line and cut into blocks."""

    train_file: str | None = field(default=None, metadata={"help": "The training text (.txt)."})
    validation_file: str | None = field(
        default=None, metadata={"help": "The validation text (.txt); without it, part of --train_file is held out."}
    )
    test_file: str | None = field(default=None, metadata={"help": "The test text (.txt), scored with --do_predict."})
    validation_split_percentage: float = field(
        default=5.0, metadata={"help": "Without --validation_file: the percent of --train_file's lines held out."}
    )
    block_size: int | None = field(
        default=None,
        metadata={
            "help": f"Tokens per block (default: the model's and tokenizer's longest, <= {DEFAULT_BLOCK_SIZE})."
        },
    )
    keep_linebreaks: bool = field(default=True, metadata={"help": "Keep each line's line break in the text."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training blocks."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N validation blocks."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test blocks."})
    sample_prompt: str | None = field(
        default=None, metadata={"help": f"Write the final model's greedy continuation of this text ({SAMPLE_NAME})."}
    )
    sample_max_new_tokens: int = field(default=100, metadata={"help": "Tokens of the greedy continuation."})

    def __post_init__(self):
        for name in ("train_file", "validation_file", "test_file"):
            path = getattr(self, name)
            if path is not None and not path.endswith(".txt"):
                raise ValueError(f"--{name} {path!r} must be a .txt file (raw text).")
        if not 0 < self.validation_split_percentage < 100:
            raise ValueError(
                f"--validation_split_percentage must be in (0, 100); got {self.validation_split_percentage}."
            )
        check_positive(self, "block_size", "max_train_samples", "max_eval_samples", "max_predict_samples", unit="size")
        check_positive(self, "sample_max_new_tokens", unit="number of tokens")


def data_files(data_args, training_args):
    """`{split: path}` of the files the run reads, each checked to exist; a ValueError for a split the run needs and
    has no text for."""
    if training_args.do_train and data_args.train_file is None:
        raise ValueError("--do_train needs --train_file.")
    if training_args.do_eval and data_args.validation_file is None and data_args.train_file is None:
        raise ValueError("--do_eval needs --validation_file, or --train_file to hold part of it out.")
    if training_args.do_predict and data_args.test_file is None:
        raise ValueError("--do_predict needs --test_file.")
    files = {
        split: path
        for split, path, wanted in (
            ("train", data_args.train_file, training_args.do_train or training_args.do_eval),
            ("validation", data_args.validation_file, training_args.do_eval),
            ("test", data_args.test_file, training_args.do_predict),
        )
        if path is not None and wanted
    }
    for split, path in files.items():
        if not os.path.isfile(path):
            raise ValueError(f"The {split} file {path!r} does not exist.")
    if "validation" in files and not training_args.do_train:
        files.pop("train", None)  # read for nothing else
    return files


def load_text(files, data_args, training, cache_dir):
    """The lines of each split (`{"train", "validation", "test"}` as the run needs them; "train" only when
    `training`), with the validation lines held out of the training file's start where no validation file is given,
    as transformers' example does, whether or not the run evaluates: the training lines do not depend on it."""
    raw = load_dataset("text", data_files=files, keep_linebreaks=data_args.keep_linebreaks, cache_dir=cache_dir)
    splits = dict(raw)
    if "train" in splits and "validation" not in files:
        lines = len(splits["train"])
        held_out = int(lines * data_args.validation_split_percentage / 100)
        if held_out == 0 or held_out == lines:
            raise ValueError(
                f"--validation_split_percentage {data_args.validation_split_percentage:g} of {lines} lines of "
                f"{files['train']!r} holds out {held_out}: give a --validation_file or another percentage."
            )
        splits["validation"] = splits["train"].select(range(held_out))
        splits["train"] = splits["train"].select(range(held_out, lines))
    if not training:
        splits.pop("train", None)
    return splits


def parse_overrides(text, config_class):
    """`--config_overrides` 'name=value,...' as config keyword arguments, each value read as JSON where it is JSON
    (`48`, `0.1`, `true`, `null`), else as text; a ValueError naming a field the family's config does not have."""
    defaults = config_class()
    overrides = {}
    for item in text.split(","):
        name, has_value, value = item.strip().partition("=")
        if not has_value or not hasattr(defaults, name):
            raise ValueError(
                f"--config_overrides {item!r}: give name=value with a field of {config_class.__name__} "
                f"(e.g. {', '.join(sorted(defaults.to_diff_dict())[:4])})."
            )
        try:
            overrides[name] = json.loads(value)
        except ValueError:
            overrides[name] = value
    return overrides


def new_model_class(model_args):
    """The class of a new model of `--model_type`: CASAN's language model, or for `--baseline` the family's own."""
    if model_args.baseline:
        family = get_family(model_args.model_type)
        return getattr(transformers, family.source_class_name(get_head("causal-lm")))
    return casan_class(model_args.model_type, "causal-lm")


def new_config(model_args, casan_args, tokenizer, block_size):
    """The config of a new model of `--model_type`: the family's defaults, the size flags given, the overrides, the
    tokenizer's vocabulary and special tokens, positions for `block_size` tokens; CASAN's with the context options,
    or the family's own for `--baseline`."""
    config_class = new_model_class(model_args).config_class
    defaults = config_class()
    sizes = {name: getattr(model_args, name) for name in SIZE_FLAGS if getattr(model_args, name) is not None}
    for name in sizes:
        if not hasattr(defaults, name):
            raise ValueError(f"--{name}: a {model_args.model_type} model has no {name}; use --config_overrides.")
    overrides = parse_overrides(model_args.config_overrides, config_class) if model_args.config_overrides else {}
    tokens = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    tokens["pad_token_id"] = tokenizer.pad_token_id
    context = {} if model_args.baseline else casan_args.casan_kwargs("context")
    try:
        return config_class(
            vocab_size=len(tokenizer), max_position_embeddings=block_size, **tokens, **sizes, **overrides, **context
        )
    except StrictDataclassError as error:  # the config's own check of a value's type
        raise ValueError(f"--config_overrides {model_args.config_overrides!r}: {error}".splitlines()[0]) from None


def model_positions(config):
    """The longest sequence a model takes (GPT-2's `n_positions` is `max_position_embeddings` by its attribute map)."""
    return getattr(config, "max_position_embeddings", None) or DEFAULT_BLOCK_SIZE


def run_block_size(requested, tokenizer, positions):
    """`--block_size`, or the longest block the tokenizer and model take, at most `DEFAULT_BLOCK_SIZE`; a ValueError
    for one longer than the model's positions."""
    if requested is None:
        return min(DEFAULT_BLOCK_SIZE, tokenizer.model_max_length, positions)
    if requested > positions:
        raise ValueError(f"--block_size {requested} is longer than the model's {positions} positions.")
    return requested


def load_model_and_tokenizer(model_args, casan_args, data_args, scaling_args):
    """The checkpoint (converted, continued, or for --baseline the family's own) and its tokenizer, or a new model of
    --model_type with the tokenizer of --tokenizer_name; and the block size the run cuts."""
    tokenizer_name = model_args.tokenizer_name or model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name, cache_dir=model_args.cache_dir)
    if model_args.model_name_or_path is None:
        if scaling_args.fsdp_size is not None:
            raise ValueError("--fsdp_size shards a checkpoint as it loads, and a new model has none: start from one.")
        block_size = data_args.block_size or min(DEFAULT_BLOCK_SIZE, tokenizer.model_max_length)
        config = new_config(model_args, casan_args, tokenizer, block_size)
        return new_model_class(model_args)(config), tokenizer, block_size
    model_class, kwargs = run_model_class(
        model_args.model_name_or_path,
        "causal-lm",
        model_args.baseline,
        casan_args.casan_kwargs("context"),
        model_args.cache_dir,
        sharded=scaling_args.fsdp_size is not None,
    )
    model = model_class.from_pretrained(
        model_args.model_name_or_path, cache_dir=model_args.cache_dir, **kwargs, **scaling_args.loading_kwargs()
    )
    check_tokenizer(tokenizer, model, tokenizer_name)
    return model, tokenizer, run_block_size(data_args.block_size, tokenizer, model_positions(model.config))


def check_causal_checkpoint(model_args):
    """A ValueError for a checkpoint that is not of a causal family (an encoder's, a translation model's)."""
    saved = PreTrainedConfig.get_config_dict(model_args.model_name_or_path, cache_dir=model_args.cache_dir)[0]
    model_type = saved.get("model_type")
    family = get_family(model_type)
    if family not in CAUSAL_FAMILIES:
        raise ValueError(
            f"{model_args.model_name_or_path!r} has model_type {model_type!r}; run_clm.py trains the causal families "
            f"{', '.join(CAUSAL_TYPES)}."
        )


def prepare(model_args, casan_args, casan_training, data_args, scaling_args, training_args):
    """Everything that can fail on bad input, before any training: options, output folder, text, model."""
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError("Nothing to do: pass --do_train, --do_eval and/or --do_predict.")
    pooling = sorted(casan_args.casan_kwargs("pooling"))
    if pooling:
        raise ValueError(f"{pooling} are pooling options of the encoders' classifiers; a causal LM takes none.")
    if model_args.baseline and casan_args.casan_kwargs():
        raise ValueError(
            f"--baseline trains the plain model; drop the context options {sorted(casan_args.casan_kwargs())}."
        )
    if training_args.label_smoothing_factor:
        raise ValueError(
            "--label_smoothing_factor: the card's cross-entropy and perplexity are the model's own loss; train "
            "without label smoothing."
        )
    files = data_files(data_args, training_args)
    if model_args.model_name_or_path is not None:
        check_causal_checkpoint(model_args)
    arguments = run_arguments(model_args, casan_args, casan_training, data_args, scaling_args, training_args)
    checkpoint = find_checkpoint(
        training_args, data_args.overwrite_output_dir, data_args.resume_weights_only, arguments
    )
    with training_args.main_process_first(desc="loading the text"):
        text = load_text(files, data_args, training_args.do_train, model_args.cache_dir)
    set_seed(training_args.seed)
    model, tokenizer, block_size = load_model_and_tokenizer(model_args, casan_args, data_args, scaling_args)
    check_training_options(model, casan_training)
    return checkpoint, files, text, model, tokenizer, block_size


def blocks(text, tokenizer, block_size, data_args, training_args):
    """Each split's text tokenised line by line, concatenated and cut into blocks of `block_size` tokens whose
    labels are their input ids (the model shifts them), as transformers' example makes them; the first
    `--max_*_samples` blocks of each split."""

    def tokenize(batch):
        return tokenizer(batch["text"])

    def group(batch):
        joined = {name: list(chain(*batch[name])) for name in batch}
        length = len(joined["input_ids"]) // block_size * block_size
        starts = range(0, length, block_size)
        grouped = {name: [ids[i : i + block_size] for i in starts] for name, ids in joined.items()}
        grouped["labels"] = [list(ids) for ids in grouped["input_ids"]]
        return grouped

    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    result = {}
    with training_args.main_process_first(desc="tokenising the text"):
        for split, lines in text.items():
            tokenized = lines.map(
                tokenize,
                batched=True,
                num_proc=data_args.preprocessing_num_workers,
                remove_columns=["text"],
                desc=f"Tokenising the {split} text",
            )
            grouped = tokenized.map(
                group,
                batched=True,
                batch_size=LINES_PER_GROUP,
                num_proc=data_args.preprocessing_num_workers,
                desc=f"Cutting the {split} text into blocks of {block_size}",
            )
            if len(grouped) == 0:
                raise ValueError(
                    f"The {split} text makes no block of {block_size} tokens: give more text or a lower --block_size."
                )
            result[split] = first_examples(grouped, limits[split])
            result[f"{split}_all"] = len(grouped)
    return result


def report_split(trainer, prefix, split, metrics, data):
    """`split`'s evaluation `metrics` (keyed `<prefix>_...`) with its cross-entropy per token (the loss: every block
    predicts `block_size - 1` tokens, so the mean over blocks is the mean over tokens) and perplexity, and how many
    of the split's blocks were scored: logged, saved, and kept for the card."""
    loss = metrics[f"{prefix}_loss"]
    metrics = {
        **metrics,
        f"{prefix}_cross_entropy": loss,
        f"{prefix}_perplexity": math.exp(loss) if loss < 100 else float("inf"),
        f"{prefix}_samples": len(data[split]),
        f"{prefix}_split_samples": data[f"{split}_all"],
    }
    trainer.card_eval_metrics[split] = {name.removeprefix(f"{prefix}_"): value for name, value in metrics.items()}
    trainer.log_metrics(prefix, metrics)
    trainer.save_metrics(prefix, metrics)


def write_sample(model, tokenizer, data_args, output_dir):
    """The final model's greedy continuation of `--sample_prompt` into `SAMPLE_NAME`."""
    training = model.training
    model.eval()
    inputs = tokenizer(data_args.sample_prompt, return_tensors="pt").to(model.device)
    with torch.no_grad():
        ids = model.generate(
            **inputs,
            max_new_tokens=data_args.sample_max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        )
    model.train(training)
    continuation = tokenizer.decode(ids[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    sample = {"prompt": data_args.sample_prompt, "max_new_tokens": data_args.sample_max_new_tokens}
    sample["continuation"] = continuation
    with open(os.path.join(output_dir, SAMPLE_NAME), "w", encoding="utf-8") as handle:
        json.dump(sample, handle, indent=2, ensure_ascii=False)


def tokenizer_files(model_args):
    """The local tokenizer file the run read, whose sha256 `run_start.json` keeps beside the text's: a tokenizer
    trained for a study is its data too."""
    folder = model_args.tokenizer_name or model_args.model_name_or_path
    path = os.path.join(folder, "tokenizer.json") if folder is not None else ""
    return [path] if os.path.isfile(path) else []


def card_arguments(model_args, casan_training, data_args, training_args, files, block_size):
    """What the card says besides the model, scores and gates: what the run started from, the text, the
    hyper-parameters."""
    started_from = model_args.base_model or model_args.model_name_or_path
    first = {"started_from": started_from if started_from is None or is_hub_id(started_from) else "a checkpoint"}
    if model_args.model_name_or_path is None:
        first = {"model_type": model_args.model_type, "started_from": "scratch"}
    return {
        "head": "causal-lm",
        "base_model": started_from,
        "dataset_id": os.path.basename(files.get("train") or files.get("validation") or files["test"]),
        "license": model_args.license,
        "training": card_hyperparameters(training_args, casan_training, first=first, block_size=block_size),
    }


def main():
    arguments = parse_run_args("run_clm.py", ModelArguments, DataArguments)
    model_args, casan_args, casan_training, data_args, scaling_args, training_args = arguments
    setup_logging(training_args, logger)
    checkpoint, files, text, model, tokenizer, block_size = prepare_or_exit(
        "run_clm.py", logger, prepare, model_args, casan_args, casan_training, data_args, scaling_args, training_args
    )
    data = blocks(text, tokenizer, block_size, data_args, training_args)
    started_from = model_args.model_name_or_path or f"scratch ({model_args.model_type})"
    splits = [split for split in ("train", "validation", "test") if split in data]
    rows = [
        ("model", f"{model_words(model)}, from {started_from}"),
        (
            "text",
            f"blocks of {block_size} tokens: "
            + ", ".join(f"{split} {kept_of(len(data[split]), data[f'{split}_all'], 'blocks')}" for split in splits),
        ),
    ]
    if announce_run(logger, "run_clm.py", rows, training_args, data.get("train"), checkpoint):
        return
    trainer = CasanTrainer(
        model=model,
        args=training_args,
        train_dataset=data.get("train") if training_args.do_train else None,
        eval_dataset=data.get("validation"),
        processing_class=tokenizer,
        data_collator=default_data_collator,
        context_learning_rate=casan_training.context_learning_rate,
        gate_monitor=gate_monitor_for(model, casan_training),
        card_kwargs=card_arguments(model_args, casan_training, data_args, training_args, files, block_size),
        callbacks=[RunClock(time_before(checkpoint) if checkpoint else None)],
    )
    # Written once the trainer's checks passed: a run refused leaves the output folder as it was.
    record_run_start(
        training_args,
        model.config.to_dict(),
        resumed_from=checkpoint,
        data_files=[*files.values(), *tokenizer_files(model_args)],
        arguments=run_arguments(*arguments),
    )

    with exit_when_preempted(trainer):
        if training_args.do_train:
            train_and_save(trainer, checkpoint, len(data["train"]))

        if training_args.do_eval:
            report_split(trainer, "eval", "validation", trainer.evaluate(metric_key_prefix="eval"), data)

        if training_args.do_predict:
            metrics = trainer.evaluate(data["test"], metric_key_prefix="predict")
            report_split(trainer, "predict", "test", metrics, data)

        if data_args.sample_prompt is not None and trainer.is_world_process_zero():
            write_sample(model, tokenizer, data_args, training_args.output_dir)

        if trainer.is_world_process_zero() and not training_args.do_train and not training_args.push_to_hub:
            trainer.save_model()  # an evaluated checkpoint: its folder holds the model its card describes
        finish_run(trainer)
        if trainer.is_world_process_zero():
            logger.info(saved_line("run_clm.py", training_args.output_dir))


if __name__ == "__main__":
    main()
