"""Translation runs (`scripts/run_translation.py`): parallel data, a joint subword tokenizer, model sizes, scores.

Data comes from three places and is brought to one schema, transformers' translation examples' `translation`
column of `{source_lang: ..., target_lang: ...}` pairs:

- `data_dir`: plain text, one sentence a line, `<prefix>.<lang>` (Multi30k's `train.en` / `train.de`);
- `train_file` / `validation_file` / `test_file`: csv (one column per language) or json lines (a `translation`
  column, or one key per language);
- a Hub dataset with a `translation` column (needs a connection).

Every problem with the input is a ValueError raised here, before any model is built, naming the file and what
is wrong with it.
"""

import os
from dataclasses import dataclass

import torch
from datasets import Dataset, DatasetDict, load_dataset
from torch.nn import functional as F
from transformers import PreTrainedTokenizerFast


# The splits a run can read: run_translation's name for each, and the split a Hub dataset calls it.
SPLITS = ("train", "validation", "test")

# Model sizes to train from scratch. base is the paper's Transformer-base (Vaswani et al. 2017); small is the size
# commonly trained on Multi30k; tiny fits a few minutes of CPU; micro (1.95M parameters with an 8,000-piece
# vocabulary) learns real German in 5 epochs of Multi30k in under half an hour of one CPU core, the size of the
# first CPU study in docs/TRANSLATION.md; micro-deep is micro's width with the paper's encoder depth (6 layers, so
# that deep context has earlier layers to read), its decoder micro's.
MODEL_SIZES = {
    "micro": dict(d_model=128, encoder_layers=2, decoder_layers=2, attention_heads=4, ffn_dim=512),
    "micro-deep": dict(d_model=128, encoder_layers=6, decoder_layers=2, attention_heads=4, ffn_dim=512),
    "tiny": dict(d_model=256, encoder_layers=3, decoder_layers=3, attention_heads=4, ffn_dim=1024),
    "small": dict(d_model=256, encoder_layers=6, decoder_layers=6, attention_heads=4, ffn_dim=1024),
    "base": dict(d_model=512, encoder_layers=6, decoder_layers=6, attention_heads=8, ffn_dim=2048),
}
# The source lengths (in words, split at white space) that test BLEU is also given for: (first, last or None).
LENGTH_BUCKETS = ((1, 10), (11, 15), (16, 20), (21, None))

# The trained tokenizer's special tokens, in id order: padding (also the decoder's start, as in Marian), end of
# sentence, unknown.
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"


@dataclass
class ParallelData:
    datasets: DatasetDict  # the requested splits, each with a `translation` column
    dataset_id: str  # for the model card: a Hub id, or the local files


def load_parallel_data(
    source_lang,
    target_lang,
    splits,
    data_dir=None,
    prefixes=None,
    files=None,
    dataset_name=None,
    dataset_config_name=None,
    cache_dir=None,
):
    """The `splits` (a subset of `SPLITS`) from exactly one of `data_dir` (with `prefixes`: split -> file
    prefix), `files` (split -> csv/json path) or `dataset_name`."""
    if source_lang == target_lang:
        raise ValueError(f"--source_lang and --target_lang must differ; both are {source_lang!r}.")
    sources = [
        name
        for name, given in (("--data_dir", data_dir), ("--*_file", files), ("--dataset_name", dataset_name))
        if given
    ]
    if len(sources) != 1:
        raise ValueError(
            f"Give exactly one data source: --data_dir (plain text), --train_file/--validation_file/--test_file "
            f"(csv or json) or --dataset_name (Hub); got {sources or 'none'}."
        )
    if data_dir:
        return _load_text_dir(data_dir, source_lang, target_lang, {split: prefixes[split] for split in splits})
    if files:
        missing = [split for split in splits if split not in files]
        if missing:
            raise ValueError(f"The run needs the {missing} split(s): give --{missing[0]}_file.")
        return _load_files({split: files[split] for split in splits}, source_lang, target_lang, cache_dir)
    loaded = load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir)
    hub_names = {"validation": ("validation", "valid", "dev"), "train": ("train",), "test": ("test",)}
    datasets = DatasetDict()
    for split in splits:
        name = next((name for name in hub_names[split] if name in loaded), None)
        if name is None:
            raise ValueError(f"{dataset_name!r} has no {split} split; it has {list(loaded)}.")
        datasets[split] = _check_translation_column(loaded[name], source_lang, target_lang, dataset_name)
    return ParallelData(datasets, dataset_name)


def _load_text_dir(data_dir, source_lang, target_lang, prefixes):
    if not os.path.isdir(data_dir):
        raise ValueError(f"--data_dir {data_dir!r} is not a folder.")
    present = sorted(os.listdir(data_dir))
    languages = {name.rsplit(".", 1)[1] for name in present if "." in name}
    unknown = [lang for lang in (source_lang, target_lang) if lang not in languages]
    if unknown:
        raise ValueError(
            f"--data_dir {data_dir!r} does not hold the <prefix>.<lang> layout for {source_lang}-{target_lang}: "
            f"no file ends in .{unknown[0]} (it holds {present[:8]}{' ...' if len(present) > 8 else ''})."
        )
    datasets = DatasetDict()
    for split, prefix in prefixes.items():
        paths = [os.path.join(data_dir, f"{prefix}.{lang}") for lang in (source_lang, target_lang)]
        for path in paths:
            if not os.path.isfile(path):
                raise ValueError(f"Missing {split} file {path!r} (--{split}_prefix {prefix!r}).")
        source, target = (_read_lines(path) for path in paths)
        if len(source) != len(target):
            raise ValueError(
                f"{paths[0]!r} has {len(source)} lines but {paths[1]!r} has {len(target)}: line i of one must "
                "translate line i of the other."
            )
        pairs = [{source_lang: s, target_lang: t} for s, t in zip(source, target, strict=True)]
        datasets[split] = Dataset.from_dict({"translation": pairs})
    return ParallelData(datasets, f"{os.path.basename(os.path.normpath(data_dir))} ({source_lang}-{target_lang})")


def _read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def _load_files(files, source_lang, target_lang, cache_dir):
    extensions = {split: os.path.splitext(path)[1].lstrip(".") for split, path in files.items()}
    for split, path in files.items():
        if not os.path.isfile(path):
            raise ValueError(f"--{split}_file {path!r} does not exist.")
    kinds = {"csv": "csv", "json": "json", "jsonl": "json"}
    if len({kinds.get(extension) for extension in extensions.values()}) != 1 or None in {
        kinds.get(extension) for extension in extensions.values()
    }:
        raise ValueError(f"Data files must all be csv or all be json (.json/.jsonl); got {sorted(files.values())}.")
    kind = kinds[next(iter(extensions.values()))]
    loaded = load_dataset(kind, data_files=files, cache_dir=cache_dir)
    datasets = DatasetDict()
    for split, path in files.items():
        dataset = loaded[split]
        if "translation" not in dataset.column_names:
            missing = [lang for lang in (source_lang, target_lang) if lang not in dataset.column_names]
            if missing:
                raise ValueError(
                    f"{path!r} needs a 'translation' column or one column per language ({source_lang!r}, "
                    f"{target_lang!r}); it has {dataset.column_names}."
                )
            dataset = dataset.map(
                lambda row: {"translation": {source_lang: row[source_lang], target_lang: row[target_lang]}},
                remove_columns=dataset.column_names,
            )
        datasets[split] = _check_translation_column(dataset, source_lang, target_lang, path)
    return ParallelData(datasets, ", ".join(os.path.basename(path) for path in files.values()))


def _check_translation_column(dataset, source_lang, target_lang, where):
    if "translation" not in dataset.column_names:
        raise ValueError(f"{where!r} has no 'translation' column; it has {dataset.column_names}.")
    first = dataset[0]["translation"] if len(dataset) else {}
    missing = [lang for lang in (source_lang, target_lang) if lang not in first]
    if missing:
        raise ValueError(
            f"The translations of {where!r} have the languages {sorted(first)}; {missing} is not among them."
        )
    return dataset.select_columns(["translation"])


class PortableTokenizer(PreTrainedTokenizerFast):
    """transformers 5's fast tokenizer saved under the class name both 4.x and 5 load: its tokenizer_config.json
    would name `TokenizersBackend`, which transformers 4.x does not know, so that a folder or Hub repo with the
    tokenizer of a translation run would load its model on 4.x but not its tokenizer."""


PortableTokenizer.__name__ = PortableTokenizer.__qualname__ = "PreTrainedTokenizerFast"


def train_tokenizer(datasets, source_lang, target_lang, vocab_size, model_max_length):
    """A joint BPE tokenizer trained on both sides of `datasets["train"]`, as a `PreTrainedTokenizerFast`.

    Metaspace pre-tokenization keeps the spaces in the pieces, so decoding gives back the detokenized text that
    sacreBLEU scores; every sequence ends in `</s>`, as Marian's do. The saved tokenizer names the inputs the
    model takes: without that, transformers 4.x returns token type ids, which a translation model refuses.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS, UNK], show_progress=False)

    def sentences():
        for pair in datasets["train"]["translation"]:
            yield pair[source_lang]
            yield pair[target_lang]

    tokenizer.train_from_iterator(sentences(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", special_tokens=[(EOS, tokenizer.token_to_id(EOS))]
    )
    return PortableTokenizer(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=model_max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def model_config_kwargs(model_size, tokenizer, max_position_embeddings, **overrides):
    """`CasanMarianConfig` keyword arguments for a model trained from scratch: the size preset, the overrides
    given (None: keep the preset's), and the tokenizer's vocabulary and special tokens."""
    size = {**MODEL_SIZES[model_size], **{name: value for name, value in overrides.items() if value is not None}}
    return dict(
        vocab_size=len(tokenizer),
        d_model=size["d_model"],
        encoder_layers=size["encoder_layers"],
        decoder_layers=size["decoder_layers"],
        encoder_attention_heads=size["attention_heads"],
        decoder_attention_heads=size["attention_heads"],
        encoder_ffn_dim=size["ffn_dim"],
        decoder_ffn_dim=size["ffn_dim"],
        dropout=size.get("dropout", 0.1),
        activation_function="relu",
        scale_embedding=True,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )


def translation_scores(predictions, references):
    """sacreBLEU's corpus BLEU and chrF of detokenized `predictions` against one reference each."""
    import sacrebleu

    return {
        "bleu": sacrebleu.corpus_bleu(predictions, [references]).score,
        "chrf": sacrebleu.corpus_chrf(predictions, [references]).score,
    }


def bucket_name(first, last):
    return f"{first}-{last}" if last is not None else f"{first}+"


def scores_by_source_length(sources, predictions, references):
    """`translation_scores` of the sentences whose source has the words of each of `LENGTH_BUCKETS`, with their
    count: `{"1-10": {"sentences": n, "bleu": ..., "chrf": ...}, ...}` (an empty bucket has only its count)."""
    scores = {}
    for first, last in LENGTH_BUCKETS:
        chosen = [
            index
            for index, source in enumerate(sources)
            if first <= len(source.split()) and (last is None or len(source.split()) <= last)
        ]
        bucket = {"sentences": len(chosen)}
        if chosen:
            bucket.update(translation_scores([predictions[i] for i in chosen], [references[i] for i in chosen]))
        scores[bucket_name(first, last)] = bucket
    return scores


@torch.no_grad()
def token_cross_entropy(trainer, dataset):
    """The teacher-forced cross-entropy per target token of `trainer.model` on `dataset`, in nats, without label
    smoothing (the Trainer's loss has it when `label_smoothing_factor` is set): the measure that tells two models
    apart with far less seed noise than BLEU. Every process scores its share; the sums are gathered."""
    model, training = trainer.model, trainer.model.training
    model.eval()
    sums, tokens = [], []
    try:
        for batch in trainer.get_eval_dataloader(dataset):
            batch = trainer._prepare_inputs(batch)
            labels = batch.pop("labels")
            logits = model(**batch).logits.float()
            losses = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none")
            gathered = trainer.accelerator.gather_for_metrics((losses.sum(-1), (labels != -100).sum(-1)))
            sums.append(gathered[0].double())
            tokens.append(gathered[1])
    finally:
        model.train(training)
    return float(torch.cat(sums).sum() / torch.cat(tokens).sum())


METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF"}


def render_translation_card(
    model, model_name, source_lang, target_lang, dataset_id, eval_metrics, training, license, base_model=None
):
    """The README.md of a translation run's folder; its `model-index` holds the BLEU and chrF of every evaluated
    split (`eval_metrics`: split -> metrics). `base_model`: the checkpoint the run started from (None: trained
    from scratch); the metadata names it when it is a Hub id, the card never names a local folder."""
    import transformers
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from .. import __version__
    from ..hub import escape_for_card, is_hub_id, pinned_load_lines
    from ..options import option_names

    if base_model is None:
        origin = "trained from scratch"
    else:
        origin = (
            f"started from `{escape_for_card(base_model)}`"
            if is_hub_id(base_model)
            else "started from a local checkpoint"
        )
        base_model = base_model if is_hub_id(base_model) else None

    task = f"translation {source_lang} to {target_lang}"
    eval_results = [
        EvalResult(
            task_type="translation",
            task_name=task,
            dataset_type=dataset_id,
            dataset_name=dataset_id,
            dataset_split=split,
            metric_type=metric,
            metric_value=round(float(metrics[metric]), 2),
            metric_name=name,
        )
        for split, metrics in eval_metrics.items()
        for metric, name in METRIC_NAMES.items()
        if metric in metrics
    ]
    card_data = ModelCardData(
        model_name=model_name,
        base_model=base_model,
        language=[source_lang, target_lang],
        eval_results=eval_results or None,
        library_name="transformers",
        license=license,
        pipeline_tag="translation",
        tags=["casan", f"casan-{model.config.context_type}", "context-aware-self-attention", "marian", "translation"],
    )
    config = model.config
    rows = [f"| {name} | `{getattr(config, name)}` |" for name in option_names("context")]
    sizes = ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "encoder_ffn_dim", "vocab_size")
    rows += [f"| {name} | `{getattr(config, name)}` |" for name in sizes]
    results = ["| split | BLEU | chrF |", "| --- | --- | --- |"] + [
        f"| {split} | {metrics.get('bleu', float('nan')):.2f} | {metrics.get('chrf', float('nan')):.2f} |"
        for split, metrics in eval_metrics.items()
    ]
    text = "\n".join(
        [
            "---",
            card_data.to_yaml(),
            "---",
            "",
            f"# {escape_for_card(model_name)}",
            "",
            f"A {escape_for_card(source_lang)}-{escape_for_card(target_lang)} encoder-decoder (Marian layout: "
            f"post-norm Transformer, sinusoidal positions, shared embeddings) {origin}, whose encoder self-attention "
            f"is context-aware (CASAN, Yang et al., AAAI 2019; context_type `{config.context_type}`). The decoder "
            "is Marian's.",
            "",
            "## Model",
            "",
            "| | |",
            "| --- | --- |",
            f"| architecture | {type(model).__name__} |",
            *rows,
            "",
            "## Evaluation",
            "",
            f"sacreBLEU (13a tokenization, detokenized output) and chrF on {escape_for_card(dataset_id)}, beam search:"
            if eval_metrics
            else "Not evaluated.",
            "",
            *(results if eval_metrics else []),
            "",
            "## How to load",
            "",
            "The model code is saved next to the weights and named in the config's `auto_map`; read it before "
            "trusting it.",
            "",
            "```python",
            "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
            "",
            f'tokenizer = AutoTokenizer.from_pretrained("{escape_for_card(model_name)}", trust_remote_code=True)',
            f'model = AutoModelForSeq2SeqLM.from_pretrained("{escape_for_card(model_name)}", trust_remote_code=True)',
            'batch = tokenizer(["A man is riding a bike."], return_tensors="pt")',
            "print(tokenizer.batch_decode(model.generate(**batch, num_beams=5), skip_special_tokens=True))",
            *pinned_load_lines(escape_for_card(model_name), "AutoModelForSeq2SeqLM"),
            "```",
            "",
            "## Training",
            "",
            "| hyper-parameter | value |",
            "| --- | --- |",
            *[
                f"| {name} | `{escape_for_card(value) if isinstance(value, str) else value}` |"
                for name, value in training.items()
            ],
            "",
            f"Made with casan-hf {__version__} and transformers {transformers.__version__}.",
            "",
        ]
    )
    ModelCard(text)  # raises if the metadata block does not parse
    return text


__all__ = [
    "LENGTH_BUCKETS",
    "MODEL_SIZES",
    "ParallelData",
    "SPLITS",
    "load_parallel_data",
    "model_config_kwargs",
    "render_translation_card",
    "scores_by_source_length",
    "token_cross_entropy",
    "train_tokenizer",
    "translation_scores",
]
