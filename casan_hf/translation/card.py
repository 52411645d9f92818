"""The model card of a translation run's folder."""

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
