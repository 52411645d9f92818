#!/usr/bin/env python
"""Continued masked-LM pre-training of a CASAN model, or of its plain-BERT twin with the same recipe.

In the conventions of transformers' `examples/pytorch/language-modeling/run_mlm.py`: `HfArgumentParser`,
`TrainingArguments`, `Trainer` and `DataCollatorForLanguageModeling` (whole-word masking as an option). One
text per line (a sentence), truncated to --max_seq_length. What is added:

- `--model_name_or_path` may be a BERT, RoBERTa, XLM-RoBERTa or ELECTRA checkpoint (converted with the
  `--context_*` options) or a CASAN checkpoint (continued); `--baseline` trains the unmodified source model
  (`BertForMaskedLM`, ...) on the same text and steps;
- text from `--train_file` (.txt, one text a line; .csv/.tsv/.json with a `--text_column`), from the *training*
  sentences of GLUE tasks in `--glue_dir` (`--glue_tasks`; never their dev sets), or a Hub dataset when online;
  --validation_split_percentage of it is held out for the eval loss and perplexity;
- `--train_only_new_parameters` trains the context and the MLM head with every pretrained weight frozen,
  `--unfreeze_after_steps N` lets the rest train from step N on; `--context_learning_rate` as in run_glue;
- `--output_dir` ends up as a Hub folder that `run_glue.py` and `AutoModelFor...from_pretrained(...,
  trust_remote_code=True)` continue from. A checkpoint without an MLM head (a sentence encoder such as
  all-MiniLM-L6-v2) starts that head at random, for CASAN and the twin alike: the log and the card say so.

    python scripts/run_mlm.py --model_name_or_path <bert> --context_type deep_global --glue_dir ../shared/glue \
        --glue_tasks rte --do_train --do_eval --max_steps 1000 --output_dir out/mlm-rte
"""

import logging
import math
import os
from dataclasses import dataclass, field

from casan_hf.cli.extras import TRAINING, require_packages


require_packages("run_mlm.py", *TRAINING)

import torch
from datasets import Dataset, load_dataset
from transformers import (
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    set_seed,
)

from casan_hf import get_family
from casan_hf.cli.arguments import EncoderModelArguments, RunDataArguments, check_positive
from casan_hf.cli.console import (
    announce_run,
    count,
    model_words,
    saved_line,
)
from casan_hf.cli.launch import exit_when_preempted, padding_multiple, parse_run_args, prepare_or_exit, setup_logging
from casan_hf.cli.resume import find_checkpoint
from casan_hf.cli.run_inputs import check_tokenizer, first_examples, run_model_class, sequence_length
from casan_hf.cli.run_start import record_run_start, run_arguments
from casan_hf.compat import PreTrainedConfig
from casan_hf.glue.data import load_glue_data
from casan_hf.glue.files import FORMATS, read_data_file
from casan_hf.glue.tasks import GLUE_TASKS
from casan_hf.hub import untrained_heads, untrained_heads_warning
from casan_hf.modeling_casan import expected_warnings_dropped
from casan_hf.training import (
    CasanTrainer,
    card_hyperparameters,
    check_training_options,
    finish_run,
    freeze_pretrained,
    gate_monitor_for,
    train_and_save,
)


logger = logging.getLogger(__name__)

# A .txt file is one text a line; the others are the data files of run_glue, with a text column.
TEXT_FILE_TYPES = (".txt", *FORMATS)


@dataclass
class ModelArguments(EncoderModelArguments):
    """The checkpoint to start from (`EncoderModelArguments`), and which of its weights train when."""

    train_only_new_parameters: bool = field(
        default=False, metadata={"help": "Train the context and the MLM head only; every pretrained weight frozen."}
    )
    unfreeze_after_steps: int | None = field(
        default=None, metadata={"help": "With --train_only_new_parameters: let everything train from this step."}
    )


@dataclass
class DataArguments(RunDataArguments):
    """The text to train on, one text a line."""

    train_file: str | None = field(
        default=None, metadata={"help": "A .txt (one text a line), .csv, .tsv, .json or .jsonl file."}
    )
    text_column: str = field(default="text", metadata={"help": "The text column of a .csv, .tsv or .json file."})
    glue_dir: str | None = field(default=None, metadata={"help": "Folder of the original GLUE TSVs."})
    glue_tasks: list[str] | None = field(
        default=None,
        metadata={"help": "GLUE tasks whose training sentences are the text.", "choices": list(GLUE_TASKS)},
    )
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset (needs a connection)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration."})
    validation_split_percentage: float = field(
        default=5.0, metadata={"help": "Percent of the texts held out for the eval loss and perplexity."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Longer texts are truncated."})
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every text to max_seq_length: one batch shape (else each batch to its longest)."},
    )
    mlm_probability: float = field(default=0.15, metadata={"help": "Share of the tokens masked."})
    whole_word_mask: bool = field(default=False, metadata={"help": "Mask whole words rather than word pieces."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training texts."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N held-out texts."})

    def __post_init__(self):
        sources = [self.train_file, self.glue_dir, self.dataset_name]
        if sum(source is not None for source in sources) != 1:
            raise ValueError("Give exactly one source of text: --train_file, --glue_dir or --dataset_name.")
        if (self.glue_dir is None) != (self.glue_tasks is None):
            raise ValueError("--glue_dir and --glue_tasks go together: the tasks whose training sentences to use.")
        if self.train_file is not None and os.path.splitext(self.train_file)[1] not in TEXT_FILE_TYPES:
            raise ValueError(f"--train_file {self.train_file!r} must end in one of {', '.join(TEXT_FILE_TYPES)}.")
        if not 0 < self.validation_split_percentage < 100:
            raise ValueError(
                f"--validation_split_percentage must be in (0, 100); got {self.validation_split_percentage}."
            )
        check_positive(self, "max_train_samples", "max_eval_samples", unit="number of texts")


def load_texts(data_args, cache_dir):
    """Every text of the chosen source as a one-column ("text") dataset. A .txt file's empty lines and a Hub
    dataset's empty texts are dropped (they separate texts); a .csv, .tsv or .json file is checked value by value
    (`read_data_file`): a missing, null, blank, nested or non-text value in its text column is a row the user wrote
    wrong, refused in one line with the file and the line."""
    column = data_args.text_column
    if data_args.glue_dir is not None:
        texts = []
        for task in data_args.glue_tasks:
            train = load_glue_data(task, glue_dir=data_args.glue_dir, need_eval=False, cache_dir=cache_dir)
            texts += [text for column in train.text_columns for text in train.datasets["train"][column]]
        dataset, column = Dataset.from_dict({"text": texts}), "text"
    elif data_args.train_file is not None:
        if not os.path.isfile(data_args.train_file):
            raise ValueError(f"--train_file {data_args.train_file!r} does not exist.")
        if data_args.train_file.endswith(".txt"):
            dataset = load_dataset("text", data_files=data_args.train_file, cache_dir=cache_dir)["train"]
            column = "text"
        else:
            dataset = read_data_file(data_args.train_file, None, cache_dir, [column])
    else:
        dataset = load_dataset(
            data_args.dataset_name, data_args.dataset_config_name, split="train", cache_dir=cache_dir
        )
        column = "text" if dataset.column_names == ["text"] else column
    if column not in dataset.column_names:
        raise ValueError(f"The text has no column {column!r}; it has {dataset.column_names}. Pass --text_column.")
    dataset = dataset.select_columns([column])
    if column != "text":
        dataset = dataset.rename_column(column, "text")
    dataset = dataset.filter(lambda row: row["text"] is not None and row["text"].strip() != "")
    if len(dataset) < 2:
        raise ValueError(f"Masked-LM training needs at least two texts (one to hold out); got {len(dataset)}.")
    return dataset


def load_model(model_args, casan_args, scaling_args):
    """The source family's own masked LM for --baseline; otherwise CASAN, converted or continued. Returns it
    with the head modules the checkpoint had no weights for."""
    model_class, kwargs = run_model_class(
        model_args.model_name_or_path,
        "masked-lm",
        model_args.baseline,
        casan_args.casan_kwargs(),
        model_args.cache_dir,
        sharded=scaling_args.fsdp_size is not None,
    )
    # A checkpoint without an MLM head (a sentence encoder) starts one at random: the log says so once, below.
    saved = PreTrainedConfig.get_config_dict(model_args.model_name_or_path, cache_dir=model_args.cache_dir)[0]
    with expected_warnings_dropped(get_family(saved["model_type"]).base_model_prefix):
        model, loading = model_class.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=model_args.cache_dir,
            output_loading_info=True,
            **kwargs,
            **scaling_args.loading_kwargs(),
        )
    return model, untrained_heads(loading["missing_keys"])


def prepare(model_args, casan_args, casan_training, data_args, scaling_args, training_args):
    """Everything that can fail on bad input, before any training: output folder, text, model, options."""
    if not (training_args.do_train or training_args.do_eval):
        raise ValueError("Nothing to do: pass --do_train and/or --do_eval.")
    if model_args.unfreeze_after_steps is not None and not model_args.train_only_new_parameters:
        raise ValueError("--unfreeze_after_steps needs --train_only_new_parameters (nothing is frozen otherwise).")
    if model_args.unfreeze_after_steps is not None and training_args.world_size > 1:
        raise ValueError(
            "--unfreeze_after_steps runs in one process only: distributed training keeps in step only the "
            "parameters that train from the start."
        )
    arguments = run_arguments(model_args, casan_args, casan_training, data_args, scaling_args, training_args)
    checkpoint = find_checkpoint(
        training_args, data_args.overwrite_output_dir, data_args.resume_weights_only, arguments
    )
    with training_args.main_process_first(desc="loading the text"):
        texts = load_texts(data_args, model_args.cache_dir)
    set_seed(training_args.seed)
    model, new_heads = load_model(model_args, casan_args, scaling_args)
    check_training_options(model, casan_training)
    tokenizer_name = model_args.tokenizer_name or model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name, cache_dir=model_args.cache_dir)
    check_tokenizer(tokenizer, model, tokenizer_name)
    return checkpoint, texts, model, new_heads, tokenizer


class MaskOnceCollator(DataCollatorForLanguageModeling):
    """Masks each training batch anew, and passes through examples that come masked already (the held-out
    text, masked once with the run's seed), their labels padded with -100. Every evaluation then scores the
    same masks: the twins' perplexities differ by the model alone.

    With a `seed`, the masks of each batch are drawn from (seed, the batch's index in the run, the dataloader
    worker): they do not depend on when the dataloader draws the batch, and a resumed run (`resume_at`, called
    by CasanTrainer) masks its batches as the uninterrupted run did."""

    batches = 0  # batches masked so far in this process

    def resume_at(self, batches):
        """The next batch is the run's `batches`-th (0-based), as after that many training batches."""
        self.batches = batches

    def use_generator(self, seed):
        """Masks with a generator of `seed`, made in this process and marked as this process's own
        (`_generator_pid`): transformers 5.24 and later replace a generator marked as another process's, or not
        marked, with one of the collator's `seed` alone."""
        self.generator = self.get_generator(seed)
        self._generator_pid = os.getpid()

    def torch_call(self, examples):
        if "labels" not in examples[0]:
            if self.seed is not None:
                worker = torch.utils.data.get_worker_info()
                key = (self.seed, self.batches, -1 if worker is None else worker.id)
                self.use_generator(hash(key) & (2**63 - 1))
                self.batches += 1
            return super().torch_call(examples)
        labels = [example["labels"] for example in examples]
        inputs = [{name: value for name, value in example.items() if name != "labels"} for example in examples]
        batch = self.tokenizer.pad(inputs, return_tensors="pt", pad_to_multiple_of=self.pad_to_multiple_of)
        width = batch["input_ids"].shape[1]
        batch["labels"] = torch.tensor([list(row) + [-100] * (width - len(row)) for row in labels])
        return batch


def collator_for(tokenizer, data_args, scaling_args, training_args, seed=None):
    return MaskOnceCollator(
        tokenizer,
        mlm_probability=data_args.mlm_probability,
        whole_word_mask=data_args.whole_word_mask,
        pad_to_multiple_of=padding_multiple(scaling_args, training_args),
        seed=seed,
    )


def tokenize(texts, tokenizer, data_args, scaling_args, training_args):
    """Held-out split (seeded) and tokenised texts: `{"train": ..., "validation": ...}`; the held-out texts
    are masked once, with the run's seed."""
    split = texts.train_test_split(test_size=data_args.validation_split_percentage / 100, seed=training_args.seed)

    max_length = sequence_length(data_args.max_seq_length, tokenizer, logger)

    def encode(batch):
        return tokenizer(
            batch["text"],
            truncation=True,
            max_length=max_length,
            return_special_tokens_mask=True,
            return_offsets_mapping=data_args.whole_word_mask,
            # The collator pads every column but the word offsets, so whole-word masking pads here.
            padding="max_length" if data_args.pad_to_max_length or data_args.whole_word_mask else False,
        )

    with training_args.main_process_first(desc="tokenising the text"):
        tokenized = split.map(
            encode,
            batched=True,
            num_proc=data_args.preprocessing_num_workers,
            remove_columns=["text"],
            desc="Running tokenizer on the text",
        )
    masker = collator_for(tokenizer, data_args, scaling_args, training_args, seed=training_args.seed)

    def mask_once(example):
        # The masker pads (to a multiple of --pad_to_multiple_of); the example keeps its own length.
        length = len(example["input_ids"])
        masked = masker([example])
        return {
            "input_ids": masked["input_ids"][0, :length].tolist(),
            "labels": masked["labels"][0, :length].tolist(),
        }

    validation = first_examples(tokenized["test"], data_args.max_eval_samples).map(
        mask_once, desc="Masking the held-out text"
    )
    return {
        "train": first_examples(tokenized["train"], data_args.max_train_samples),
        "validation": validation.remove_columns(
            [name for name in ("special_tokens_mask", "offset_mapping") if name in validation.column_names]
        ),
    }


def main():
    arguments = parse_run_args("run_mlm.py", ModelArguments, DataArguments)
    model_args, casan_args, casan_training, data_args, scaling_args, training_args = arguments
    setup_logging(training_args, logger)
    checkpoint, texts, model, new_heads, tokenizer = prepare_or_exit(
        "run_mlm.py", logger, prepare, model_args, casan_args, casan_training, data_args, scaling_args, training_args
    )
    if new_heads:
        logger.warning(untrained_heads_warning(new_heads, "masked-lm"))

    frozen = freeze_pretrained(model) if model_args.train_only_new_parameters else []
    # The collator reads the special-token mask and the word offsets, which the model's forward does not take.
    training_args.remove_unused_columns = False
    splits = tokenize(texts, tokenizer, data_args, scaling_args, training_args)
    rows = [
        ("model", f"{model_words(model)}, from {model_args.model_name_or_path}"),
        (
            "text",
            f"{count(len(texts), 'text')}, {data_args.validation_split_percentage:g}% held out: training on "
            f"{len(splits['train']):,}, scoring {len(splits['validation']):,}",
        ),
    ]
    if announce_run(logger, "run_mlm.py", rows, training_args, splits["train"], checkpoint):
        return
    # Seeded: the training masks come from the collator's own generator, which CasanTrainer checkpoints, so an
    # interrupted run resumes with the masks of an uninterrupted one.
    collator = collator_for(tokenizer, data_args, scaling_args, training_args, seed=training_args.seed)
    trainer = CasanTrainer(
        model=model,
        args=training_args,
        train_dataset=splits["train"] if training_args.do_train else None,
        eval_dataset=splits["validation"],
        processing_class=tokenizer,
        data_collator=collator,
        context_learning_rate=casan_training.context_learning_rate,
        frozen=frozen,
        unfreeze_after=model_args.unfreeze_after_steps,
        gate_monitor=gate_monitor_for(model, casan_training),
        card_kwargs={
            "head": "masked-lm",
            "base_model": model_args.base_model or model_args.model_name_or_path,
            "dataset_id": data_args.dataset_name
            or (data_args.train_file and os.path.basename(data_args.train_file))  # its name, not this machine's path
            or f"GLUE training sentences: {', '.join(data_args.glue_tasks or [])}",
            "license": model_args.license,
            "untrained_heads": new_heads,
            "training": card_hyperparameters(
                training_args,
                casan_training,
                train_only_new_parameters=model_args.train_only_new_parameters,
                unfreeze_after_steps=model_args.unfreeze_after_steps,
                max_seq_length=data_args.max_seq_length,
                mlm_probability=data_args.mlm_probability,
                whole_word_mask=data_args.whole_word_mask,
            ),
        },
    )
    # Written once the trainer's checks passed: a run refused leaves the output folder as it was.
    record_run_start(
        training_args, model.config.to_diff_dict(), resumed_from=checkpoint, arguments=run_arguments(*arguments)
    )

    with exit_when_preempted(trainer):
        if training_args.do_train:
            train_and_save(trainer, checkpoint, len(splits["train"]))

        if training_args.do_eval:
            metrics = trainer.evaluate()
            metrics["eval_samples"] = len(splits["validation"])
            metrics["perplexity"] = math.exp(metrics["eval_loss"]) if metrics["eval_loss"] < 100 else float("inf")
            trainer.card_eval_metrics["validation"] = {"perplexity": metrics["perplexity"]}
            trainer.log_metrics("eval", metrics)
            trainer.save_metrics("eval", metrics)

        finish_run(trainer)
        if trainer.is_world_process_zero():
            logger.info(saved_line("run_mlm.py", training_args.output_dir))


if __name__ == "__main__":
    main()
