#!/usr/bin/env python
"""Trains a context-aware encoder-decoder (`CasanMarianMTModel`) for translation, from scratch or from a checkpoint,
and scores it with sacreBLEU and chrF.

In the conventions of transformers' `examples/pytorch/translation/run_translation.py`: `HfArgumentParser`,
`Seq2SeqTrainingArguments`, `Seq2SeqTrainer`, `--predict_with_generate`, a `translation` column of
`{source_lang: ..., target_lang: ...}` pairs. What is added:

- no `--model_name_or_path`: a model of `--model_size` (`MODEL_SIZES`; each size flag overrides the preset)
  is trained from scratch with the `--context_*` options, and a joint BPE tokenizer is trained on the training
  pairs unless `--tokenizer_name` is given; with it: a CASAN-Marian checkpoint continues, a Marian one converts;
- data from `--data_dir` (plain text `<prefix>.<lang>`, e.g. Multi30k's `train.en`/`train.de`), .csv/.tsv/.json files
  or a Hub dataset, checked before anything is trained;
- BLEU and chrF from the sacrebleu package on detokenized output, offline;
- `--output_dir` ends up as the Hub folder: weights, config with `auto_map`, code files, tokenizer, results,
  the test predictions and a model card whose `model-index` holds the scores.

    python scripts/run_translation.py --model_size tiny --context_type deep_global \
        --data_dir ../shared/mt/multi30k --source_lang en --target_lang de \
        --do_train --do_eval --do_predict --predict_with_generate --output_dir out/multi30k
"""

import json
import logging
import os
from dataclasses import dataclass, field

from casan_hf.cli.extras import TRAINING, missing_packages_message, require_packages


require_packages("run_translation.py", *TRAINING)

import numpy as np
from transformers import AutoTokenizer, DataCollatorForSeq2Seq, Seq2SeqTrainingArguments, set_seed

import casan_hf
from casan_hf.cli.arguments import RunDataArguments, check_positive
from casan_hf.cli.console import (
    announce_run,
    kept_of,
    model_words,
    saved_line,
)
from casan_hf.cli.launch import exit_when_preempted, padding_multiple, parse_run_args, prepare_or_exit, setup_logging
from casan_hf.cli.resume import find_checkpoint
from casan_hf.cli.run_inputs import check_tokenizer, first_examples
from casan_hf.cli.run_start import RunClock, record_run_start, run_arguments, time_before
from casan_hf.hub import is_hub_id
from casan_hf.options import option_names
from casan_hf.training import (
    CasanSeq2SeqTrainer,
    card_hyperparameters,
    check_training_options,
    finish_run,
    gate_monitor_for,
    train_and_save,
)
from casan_hf.translation import (
    MODEL_SIZES,
    load_parallel_data,
    model_config_kwargs,
    scores_by_source_length,
    token_cross_entropy,
    train_tokenizer,
    translation_scores,
)


logger = logging.getLogger(__name__)
# The test scores per source length (`scores_by_source_length`), beside predict_results.json.
BY_LENGTH_NAME = "predict_by_source_length.json"


@dataclass
class ModelArguments:
    """The model: a checkpoint to continue or convert, or the size of a new one."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "A CASAN-Marian checkpoint (continued) or a Marian one (converted); none: train anew."},
    )
    model_size: str = field(
        default="tiny", metadata={"help": "Size of a model trained anew.", "choices": list(MODEL_SIZES)}
    )
    d_model: int | None = field(default=None, metadata={"help": "Overrides the size preset's width."})
    encoder_layers: int | None = field(default=None, metadata={"help": "Overrides the preset's encoder depth."})
    decoder_layers: int | None = field(default=None, metadata={"help": "Overrides the preset's decoder depth."})
    attention_heads: int | None = field(default=None, metadata={"help": "Overrides the preset's heads."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Overrides the preset's feed-forward width."})
    dropout: float | None = field(default=None, metadata={"help": "Dropout of a new model (default 0.1)."})
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "Tokenizer to use; default: the checkpoint's, or one trained on the data."}
    )
    vocab_size: int = field(default=8000, metadata={"help": "Vocabulary of a tokenizer trained on the data."})
    cache_dir: str | None = field(default=None, metadata={"help": "Where downloaded models and data are stored."})
    license: str = field(default="apache-2.0", metadata={"help": "License written on the model card."})


@dataclass
class DataTrainingArguments(RunDataArguments):
    """What to translate, and from where."""

    source_lang: str = field(default="en", metadata={"help": "Source language code (file suffix, json key)."})
    target_lang: str = field(default="de", metadata={"help": "Target language code."})
    data_dir: str | None = field(
        default=None, metadata={"help": "Folder of plain-text files <prefix>.<lang>, one sentence a line."}
    )
    train_prefix: str = field(default="train", metadata={"help": "Prefix of the training files in --data_dir."})
    validation_prefix: str = field(default="val", metadata={"help": "Prefix of the validation files."})
    test_prefix: str = field(default="test_2016_flickr", metadata={"help": "Prefix of the test files."})
    train_file: str | None = field(default=None, metadata={"help": "Training pairs (.csv, .tsv, .json or .jsonl)."})
    validation_file: str | None = field(default=None, metadata={"help": "Validation pairs (a file as --train_file)."})
    test_file: str | None = field(default=None, metadata={"help": "Test pairs (a file as --train_file)."})
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset with a translation column."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration, e.g. 'de-en'."})
    max_source_length: int = field(default=128, metadata={"help": "Longer sources are truncated."})
    max_target_length: int = field(
        default=128, metadata={"help": "Longer targets are truncated; also the longest generated translation."}
    )
    num_beams: int = field(default=5, metadata={"help": "Beam size of evaluation and prediction."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training pairs."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N validation pairs."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test pairs."})


def wanted_splits(training_args):
    return [
        split
        for split, wanted in (
            ("train", training_args.do_train),
            ("validation", training_args.do_eval),
            ("test", training_args.do_predict),
        )
        if wanted
    ]


def load_model_and_tokenizer(model_args, casan_args, data_args, scaling_args, data):
    """The checkpoint (continued or converted) and its tokenizer, or a new model of `--model_size` with a
    tokenizer trained on the training pairs."""
    if model_args.model_name_or_path is not None:
        tokenizer = AutoTokenizer.from_pretrained(
            model_args.tokenizer_name or model_args.model_name_or_path, cache_dir=model_args.cache_dir
        )
        model = casan_hf.CasanMarianMTModel.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=model_args.cache_dir,
            **casan_args.casan_kwargs("context"),
            **scaling_args.loading_kwargs(),
        )
        check_tokenizer(tokenizer, model, model_args.tokenizer_name or model_args.model_name_or_path)
        return model, tokenizer
    if scaling_args.fsdp_size is not None:
        raise ValueError(
            "--fsdp_size shards a checkpoint as it loads, and a new model has none: start from a checkpoint "
            "(--model_name_or_path), e.g. the output folder of a short run in one process."
        )
    max_positions = max_position_embeddings(data_args)
    if model_args.tokenizer_name is not None:
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name, cache_dir=model_args.cache_dir)
    elif "train" not in data.datasets:
        raise ValueError("A new model needs a tokenizer: pass --do_train (one is trained) or --tokenizer_name.")
    else:
        logger.info(f"Training a joint BPE tokenizer ({model_args.vocab_size} pieces) on the training pairs")
        tokenizer = train_tokenizer(
            data.datasets, data_args.source_lang, data_args.target_lang, model_args.vocab_size, max_positions
        )
    return casan_hf.CasanMarianMTModel(new_model_config(model_args, casan_args, data_args, tokenizer)), tokenizer


def max_position_embeddings(data_args):
    """The positions a new model embeds: the longest source or target, with its end token and one to spare."""
    return max(data_args.max_source_length, data_args.max_target_length) + 2


def new_model_config(model_args, casan_args, data_args, tokenizer):
    """The config of a new model: `--model_size` with the size flags given, the tokenizer's vocabulary and special
    tokens, the context options. The release set's card reads it (tooling/release.py)."""
    sizes = {
        name: getattr(model_args, name)
        for name in ("d_model", "encoder_layers", "decoder_layers", "attention_heads", "ffn_dim", "dropout")
    }
    return casan_hf.CasanMarianConfig(
        **model_config_kwargs(model_args.model_size, tokenizer, max_position_embeddings(data_args), **sizes),
        **casan_args.casan_kwargs("context"),
    )


def prepare(model_args, casan_args, casan_training, data_args, scaling_args, training_args):
    """Everything that can fail on bad input, before any training: options, output folder, data, model."""
    splits = wanted_splits(training_args)
    if not splits:
        raise ValueError("Nothing to do: pass --do_train, --do_eval and/or --do_predict.")
    pooling = sorted(casan_args.casan_kwargs("pooling"))
    if pooling:
        raise ValueError(f"{pooling} are pooling options of the BERT classifiers; a translation model takes none.")
    check_positive(data_args, "max_train_samples", "max_eval_samples", "max_predict_samples", "num_beams")
    check_positive(model_args, "vocab_size")
    if (training_args.do_eval or training_args.do_predict) and not training_args.predict_with_generate:
        raise ValueError("BLEU needs translations: pass --predict_with_generate with --do_eval or --do_predict.")
    if training_args.predict_with_generate:
        missing = missing_packages_message("Scoring BLEU and chrF (--predict_with_generate)", ["sacrebleu"])
        if missing is not None:
            raise ValueError(missing)
    arguments = run_arguments(model_args, casan_args, casan_training, data_args, scaling_args, training_args)
    checkpoint = find_checkpoint(
        training_args, data_args.overwrite_output_dir, data_args.resume_weights_only, arguments
    )
    files = {
        split: path
        for split, path in (
            ("train", data_args.train_file),
            ("validation", data_args.validation_file),
            ("test", data_args.test_file),
        )
        if path is not None
    }
    with training_args.main_process_first(desc="loading the data"):
        data = load_parallel_data(
            data_args.source_lang,
            data_args.target_lang,
            splits,
            data_dir=data_args.data_dir,
            prefixes={
                "train": data_args.train_prefix,
                "validation": data_args.validation_prefix,
                "test": data_args.test_prefix,
            },
            files=files or None,
            dataset_name=data_args.dataset_name,
            dataset_config_name=data_args.dataset_config_name,
            cache_dir=model_args.cache_dir,
        )
    set_seed(training_args.seed)
    model, tokenizer = load_model_and_tokenizer(model_args, casan_args, data_args, scaling_args, data)
    check_training_options(model, casan_training)
    model.generation_config.update(
        num_beams=data_args.num_beams,
        max_length=data_args.max_target_length,
        decoder_start_token_id=model.config.decoder_start_token_id,
        eos_token_id=model.config.eos_token_id,
        forced_eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    return checkpoint, data, model, tokenizer


def tokenize(data, tokenizer, data_args, training_args):
    source_lang, target_lang = data_args.source_lang, data_args.target_lang

    def preprocess(batch):
        sources = [pair[source_lang] for pair in batch["translation"]]
        targets = [pair[target_lang] for pair in batch["translation"]]
        model_inputs = tokenizer(sources, max_length=data_args.max_source_length, truncation=True)
        labels = tokenizer(text_target=targets, max_length=data_args.max_target_length, truncation=True)
        model_inputs["labels"] = labels["input_ids"]
        return model_inputs

    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    with training_args.main_process_first(desc="dataset map pre-processing"):
        return {
            split: first_examples(dataset, limits[split]).map(
                preprocess,
                batched=True,
                num_proc=data_args.preprocessing_num_workers,
                remove_columns=["translation"],
                desc=f"Running tokenizer on the {split} pairs",
            )
            for split, dataset in data.datasets.items()
        }


def decode(tokenizer, ids):
    """Detokenized text of generated sequences or labels, which are padded with -100 where they end."""
    ids = np.where(ids != -100, ids, tokenizer.pad_token_id)
    return [text.strip() for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]


def metrics_function(tokenizer):
    def compute_metrics(prediction):
        predictions = (
            prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        )
        scores = translation_scores(decode(tokenizer, predictions), decode(tokenizer, prediction.label_ids))
        scores = {name: round(value, 4) for name, value in scores.items()}
        generated = (predictions != -100) & (predictions != tokenizer.pad_token_id)
        scores["gen_len"] = float(np.mean(np.count_nonzero(generated, axis=1)))
        return scores

    return compute_metrics


def card_arguments(model_args, casan_training, data_args, training_args, dataset_id):
    """What the run's model card says besides its model, scores and gates (`hub.render_translation_card`'s
    arguments): the languages and data, the license, what the run started from, the hyper-parameters. The release
    set's card is rendered with it from its record (tooling/release.py)."""
    started_from = model_args.model_name_or_path  # named on the card when it is a Hub id
    return {
        "source_lang": data_args.source_lang,
        "target_lang": data_args.target_lang,
        "dataset_id": dataset_id,
        "license": model_args.license,
        "base_model": started_from,
        "training": card_hyperparameters(
            training_args,
            casan_training,
            first={
                "model_size": model_args.model_size if started_from is None else None,
                "started_from": started_from
                if started_from is None or is_hub_id(started_from)
                else "a local checkpoint",
            },
            warmup_steps=training_args.warmup_steps,
            label_smoothing_factor=training_args.label_smoothing_factor,
            num_beams=data_args.num_beams,
        ),
    }


def report_split(trainer, prefix, split, metrics, tokenized, data):
    """`split`'s `metrics` (keyed `<prefix>_...`, as Trainer's evaluate and predict name them) with its token
    cross-entropy and how many of the split's examples were scored: logged, saved, and kept for the card."""
    metrics = {
        **metrics,
        f"{prefix}_cross_entropy": token_cross_entropy(trainer, tokenized[split]),
        f"{prefix}_samples": len(tokenized[split]),
        f"{prefix}_split_samples": len(data.datasets[split]),
    }
    trainer.card_eval_metrics[split] = {name.removeprefix(f"{prefix}_"): value for name, value in metrics.items()}
    trainer.log_metrics(prefix, metrics)
    trainer.save_metrics(prefix, metrics)


def main():
    arguments = parse_run_args("run_translation.py", ModelArguments, DataTrainingArguments, Seq2SeqTrainingArguments)
    model_args, casan_args, casan_training, data_args, scaling_args, training_args = arguments
    setup_logging(training_args, logger)
    checkpoint, data, model, tokenizer = prepare_or_exit(
        "run_translation.py",
        logger,
        prepare,
        model_args,
        casan_args,
        casan_training,
        data_args,
        scaling_args,
        training_args,
    )
    sizes = ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "encoder_ffn_dim", "dropout")
    tokenized = tokenize(data, tokenizer, data_args, training_args)
    started_from = model_args.model_name_or_path or f"scratch ({model_args.model_size})"
    rows = [
        ("model", f"{model_words(model)}, from {started_from}"),
        (
            "data",
            f"{data.dataset_id}: "
            + ", ".join(
                f"{split} {kept_of(len(tokenized[split]), len(dataset), 'pairs')}"
                for split, dataset in data.datasets.items()
            ),
        ),
    ]
    if announce_run(logger, "run_translation.py", rows, training_args, tokenized.get("train"), checkpoint):
        return
    trainer = CasanSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized.get("train"),
        eval_dataset=tokenized.get("validation"),
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(
            tokenizer,
            model=model,
            label_pad_token_id=-100,
            pad_to_multiple_of=padding_multiple(scaling_args, training_args),
        ),
        compute_metrics=metrics_function(tokenizer) if training_args.predict_with_generate else None,
        card_kwargs=card_arguments(model_args, casan_training, data_args, training_args, data.dataset_id),
        context_learning_rate=casan_training.context_learning_rate,
        gate_monitor=gate_monitor_for(model, casan_training),
        callbacks=[RunClock(time_before(checkpoint) if checkpoint else None)],
    )
    # Written once the trainer's checks passed: a run refused leaves the output folder as it was.
    record_run_start(
        training_args,
        {name: getattr(model.config, name) for name in (*option_names("context"), *sizes, "vocab_size")},
        resumed_from=checkpoint,
        data_files=data.files,
        arguments=run_arguments(*arguments),
    )

    with exit_when_preempted(trainer):
        if training_args.do_train:
            train_and_save(trainer, checkpoint, len(tokenized["train"]))

        if training_args.do_eval:
            report_split(trainer, "eval", "validation", trainer.evaluate(metric_key_prefix="eval"), tokenized, data)

        if training_args.do_predict:
            results = trainer.predict(tokenized["test"], metric_key_prefix="predict")
            report_split(trainer, "predict", "test", results.metrics, tokenized, data)
            if trainer.is_world_process_zero():
                translations = decode(tokenizer, results.predictions)
                with open(
                    os.path.join(training_args.output_dir, "generated_predictions.txt"), "w", encoding="utf-8"
                ) as f:
                    f.write("\n".join(translations) + "\n")
                sources = [
                    pair[data_args.source_lang]
                    for pair in first_examples(data.datasets["test"], data_args.max_predict_samples)["translation"]
                ]
                by_length = scores_by_source_length(sources, translations, decode(tokenizer, results.label_ids))
                with open(os.path.join(training_args.output_dir, BY_LENGTH_NAME), "w", encoding="utf-8") as f:
                    json.dump(by_length, f, indent=2)

        if trainer.is_world_process_zero() and not training_args.do_train and not training_args.push_to_hub:
            trainer.save_model()  # an evaluated checkpoint: its folder holds the model its card describes
        finish_run(trainer)
        if trainer.is_world_process_zero():
            logger.info(saved_line("run_translation.py", training_args.output_dir))


if __name__ == "__main__":
    main()
