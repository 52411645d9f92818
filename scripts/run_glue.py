#!/usr/bin/env python
"""Fine-tunes a context-aware self-attention (CASAN) model, or its plain-BERT twin, on a GLUE task.

In the conventions of transformers' `examples/pytorch/text-classification/run_glue.py`: `HfArgumentParser`,
`TrainingArguments` and `Trainer`, the same flags where they exist. What is added:

- `--model_name_or_path` may be a BERT checkpoint (converted to CASAN with the `--context_*` options) or a
  CASAN checkpoint (continued as it was trained); `--baseline` fine-tunes the unmodified BERT instead;
- data from the Hub (`nyu-mll/glue`), from `--glue_dir` (the original GLUE TSVs) or from your own
  `--train_file`/`--validation_file` (.csv, .tsv, .json lines; `--text_columns`, `--label_column`), each checked
  before any model is loaded;
- the GLUE metrics ship with casan_hf, so evaluation runs offline;
- `--output_dir` ends up as the Hub folder: weights, config with `auto_map`, code files, tokenizer,
  `training_args.bin`, results and a model card whose `model-index` holds the measured dev scores.

    python scripts/run_glue.py --model_name_or_path <bert> --context_type deep_global --task_name rte \
        --glue_dir ../shared/glue --do_train --do_eval --max_seq_length 128 \
        --per_device_train_batch_size 32 --learning_rate 2e-5 --num_train_epochs 3 --output_dir out/rte
"""

import logging
from dataclasses import dataclass, field

from casan_hf.cli.extras import GLUE, require_packages


require_packages("run_glue.py", *GLUE)

import numpy as np
from transformers import (
    AutoTokenizer,
    DataCollatorWithPadding,
    default_data_collator,
    set_seed,
)

from casan_hf.cli.arguments import EncoderModelArguments, RunDataArguments, check_positive
from casan_hf.cli.console import (
    announce_run,
    kept_of,
    model_words,
    saved_line,
)
from casan_hf.cli.launch import exit_when_preempted, padding_multiple, parse_run_args, prepare_or_exit, setup_logging
from casan_hf.cli.resume import find_checkpoint
from casan_hf.cli.run_inputs import check_tokenizer, first_examples, run_model_class, sequence_length
from casan_hf.cli.run_start import record_run_start, run_arguments
from casan_hf.glue.data import load_glue_data
from casan_hf.glue.metrics import load_glue_metric
from casan_hf.glue.tasks import GLUE_TASKS
from casan_hf.hub.card import whole_splits
from casan_hf.hub.tasks import results_suffix
from casan_hf.training import (
    CasanTrainer,
    card_hyperparameters,
    check_training_options,
    finish_run,
    gate_monitor_for,
    train_and_save,
)


logger = logging.getLogger(__name__)


@dataclass
class ModelArguments(EncoderModelArguments):
    """The checkpoint to start from (`EncoderModelArguments`), and a classifier of another label count."""

    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Re-initialise a classifier whose label count differs."}
    )


@dataclass
class DataTrainingArguments(RunDataArguments):
    """What data to train and evaluate on."""

    task_name: str | None = field(default=None, metadata={"help": "The GLUE task.", "choices": list(GLUE_TASKS)})
    glue_dir: str | None = field(
        default=None,
        metadata={"help": "Folder of the original GLUE TSVs (<dir>/RTE/train.tsv, ...); default: the Hub."},
    )
    train_file: str | None = field(
        default=None, metadata={"help": "Your own training data: .csv, .tsv (as GLUE ships it) or .json(l) lines."}
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "Your own validation data: .csv, .tsv or .json(l) lines."}
    )
    text_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "The columns of your files that hold the text, one or a pair (with --task_name: the task's, in "
            "its order). Default: the task's, else sentence1 and sentence2, else the first two."
        },
    )
    label_column: str | None = field(
        default=None, metadata={"help": "The column of your files that holds the label (default: label)."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Longer inputs are truncated."})
    pad_to_max_length: bool = field(
        default=True, metadata={"help": "Pad every input to max_seq_length (else pad each batch)."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N examples of each dev split."}
    )
    overwrite_cache: bool = field(default=False, metadata={"help": "Recompute the tokenised data."})


def load_model(model_args, casan_args, scaling_args, glue_data):
    """The source family's own model for --baseline; otherwise CASAN, converted from a BERT, RoBERTa,
    XLM-RoBERTa or ELECTRA checkpoint or continued from a CASAN one."""
    # problem_type up front: the model's first forward would set it, and a compiled step would compile twice.
    label_kwargs = (
        {"num_labels": 1, "problem_type": "regression"}
        if glue_data.is_regression
        else {
            "num_labels": len(glue_data.label_names),
            "id2label": dict(enumerate(glue_data.label_names)),
            "label2id": {name: index for index, name in enumerate(glue_data.label_names)},
            "problem_type": "single_label_classification",
        }
    )
    common = {
        "cache_dir": model_args.cache_dir,
        "ignore_mismatched_sizes": model_args.ignore_mismatched_sizes,
        **label_kwargs,
    }
    model_class, casan_kwargs = run_model_class(
        model_args.model_name_or_path,
        "sequence-classification",
        model_args.baseline,
        casan_args.casan_kwargs(),
        model_args.cache_dir,
        sharded=scaling_args.fsdp_size is not None,
    )
    return model_class.from_pretrained(
        model_args.model_name_or_path, **common, **casan_kwargs, **scaling_args.loading_kwargs()
    )


def tokenize(glue_data, tokenizer, data_args, training_args):
    max_seq_length = sequence_length(data_args.max_seq_length, tokenizer, logger)
    padding = "max_length" if data_args.pad_to_max_length else False

    def preprocess(batch):
        texts = [batch[column] for column in glue_data.text_columns]
        return tokenizer(*texts, padding=padding, max_length=max_seq_length, truncation=True)

    with training_args.main_process_first(desc="dataset map pre-processing"):
        return glue_data.datasets.map(
            preprocess,
            batched=True,
            num_proc=data_args.preprocessing_num_workers,
            remove_columns=list(glue_data.text_columns),
            load_from_cache_file=not data_args.overwrite_cache,
            desc="Running tokenizer on dataset",
        )


def metrics_function(glue_data, task_name):
    metric = load_glue_metric(task_name or ("regression" if glue_data.is_regression else "accuracy"))

    def compute_metrics(prediction):
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        predictions = np.squeeze(logits) if glue_data.is_regression else np.argmax(logits, axis=1)
        return metric.compute(predictions=predictions, references=prediction.label_ids)

    return compute_metrics


def prepare(model_args, casan_args, casan_training, data_args, scaling_args, training_args):
    """Everything that can fail on bad input, before any training: output folder, data, model, tokenizer."""
    if not (training_args.do_train or training_args.do_eval):
        raise ValueError("Nothing to do: pass --do_train and/or --do_eval.")
    if scaling_args.pad_to_multiple_of is not None and data_args.pad_to_max_length:
        raise ValueError(
            "--pad_to_multiple_of pads each batch to its longest input, rounded up; with --pad_to_max_length (the "
            "default) every input is max_seq_length long already: pass --pad_to_max_length False."
        )
    check_positive(data_args, "max_train_samples", "max_eval_samples", unit="number of examples")
    arguments = run_arguments(model_args, casan_args, casan_training, data_args, scaling_args, training_args)
    checkpoint = find_checkpoint(
        training_args, data_args.overwrite_output_dir, data_args.resume_weights_only, arguments
    )
    with training_args.main_process_first(desc="loading the data"):
        glue_data = load_glue_data(
            data_args.task_name,
            glue_dir=data_args.glue_dir,
            train_file=data_args.train_file,
            validation_file=data_args.validation_file,
            need_train=training_args.do_train,
            need_eval=training_args.do_eval,
            cache_dir=model_args.cache_dir,
            text_columns=data_args.text_columns,
            label_column=data_args.label_column,
        )
    set_seed(training_args.seed)
    model = load_model(model_args, casan_args, scaling_args, glue_data)
    check_training_options(model, casan_training)
    tokenizer_name = model_args.tokenizer_name or model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name, cache_dir=model_args.cache_dir)
    check_tokenizer(tokenizer, model, tokenizer_name)
    return checkpoint, glue_data, model, tokenizer


def data_words(glue_data, data_args, train_dataset, eval_datasets):
    """The data in a few words: where it comes from, and how many examples of each split the run uses."""
    if data_args.task_name is None or data_args.train_file or data_args.validation_file:
        source = glue_data.dataset_id
    else:
        source = f"GLUE {data_args.task_name.upper()} from {data_args.glue_dir or 'the Hub'}"
    splits = {"train": train_dataset, **eval_datasets} if train_dataset is not None else eval_datasets
    return f"{source}: " + ", ".join(
        f"{split} {kept_of(len(dataset), len(glue_data.datasets[split]))}" for split, dataset in splits.items()
    )


def card_arguments(model_args, casan_training, data_args, training_args, dataset_id):
    """What the run's model card says besides its model, scores and gates (`hub.render_model_card`'s arguments): the
    head, the source, the task and its data, the license, the hyper-parameters. The release set's cards are rendered
    with it from their records (tooling/release.py)."""
    return {
        "head": "sequence-classification",
        "base_model": model_args.base_model or model_args.model_name_or_path,
        "task_name": data_args.task_name,
        "dataset_id": dataset_id,
        "license": model_args.license,
        "training": card_hyperparameters(
            training_args,
            casan_training,
            max_seq_length=data_args.max_seq_length,
            max_train_samples=data_args.max_train_samples,
        ),
    }


def main():
    arguments = parse_run_args("run_glue.py", ModelArguments, DataTrainingArguments)
    model_args, casan_args, casan_training, data_args, scaling_args, training_args = arguments
    setup_logging(training_args, logger)
    checkpoint, glue_data, model, tokenizer = prepare_or_exit(
        "run_glue.py", logger, prepare, model_args, casan_args, casan_training, data_args, scaling_args, training_args
    )

    tokenized = tokenize(glue_data, tokenizer, data_args, training_args)
    train_dataset = first_examples(tokenized["train"], data_args.max_train_samples) if training_args.do_train else None
    eval_datasets = {
        split: first_examples(tokenized[split], data_args.max_eval_samples) for split in glue_data.eval_splits
    }
    rows = [
        ("model", f"{model_words(model)}, from {model_args.model_name_or_path}"),
        ("data", data_words(glue_data, data_args, train_dataset, eval_datasets)),
    ]
    if announce_run(logger, "run_glue.py", rows, training_args, train_dataset, checkpoint):
        return
    collator = (
        default_data_collator
        if data_args.pad_to_max_length
        else DataCollatorWithPadding(tokenizer, pad_to_multiple_of=padding_multiple(scaling_args, training_args))
    )

    trainer = CasanTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=next(iter(eval_datasets.values()), None),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=metrics_function(glue_data, data_args.task_name),
        card_kwargs=card_arguments(model_args, casan_training, data_args, training_args, glue_data.dataset_id),
        context_learning_rate=casan_training.context_learning_rate,
        gate_monitor=gate_monitor_for(model, casan_training),
    )
    # Written once the trainer's checks passed: a run refused leaves the output folder as it was.
    record_run_start(
        training_args, model.config.to_diff_dict(), resumed_from=checkpoint, arguments=run_arguments(*arguments)
    )

    with exit_when_preempted(trainer):
        if training_args.do_train:
            train_and_save(trainer, checkpoint, len(train_dataset))

        if training_args.do_eval:
            combined = {}
            for split, eval_dataset in eval_datasets.items():
                metrics = trainer.evaluate(eval_dataset=eval_dataset)
                metrics["eval_samples"] = len(eval_dataset)
                metrics["eval_split_samples"] = len(glue_data.datasets[split])
                trainer.card_eval_metrics[split] = {
                    name.removeprefix("eval_"): value for name, value in metrics.items()
                }
                metrics = {f"{name}{results_suffix(split)}": value for name, value in metrics.items()}
                combined.update(metrics)
                trainer.log_metrics("eval", metrics)
            trainer.save_metrics("eval", combined)

        partial = [
            split for split in trainer.card_eval_metrics if split not in whole_splits(trainer.card_eval_metrics)
        ]
        if training_args.push_to_hub and partial:
            logger.warning(
                f"--push_to_hub: {', '.join(partial)} was scored on its first {data_args.max_eval_samples:,} examples "
                "only (--max_eval_samples): the card says so and its model-index leaves those scores out."
            )
        finish_run(trainer)
        if trainer.is_world_process_zero():
            logger.info(saved_line("run_glue.py", training_args.output_dir))


if __name__ == "__main__":
    main()
