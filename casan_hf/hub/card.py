"""The model card of a Hub folder: one renderer for every folder the scripts write (a GLUE or other fine-tuning,
masked-LM pre-training, a conversion without training, a translation run).

The card's YAML metadata is built with `huggingface_hub.ModelCardData` and `EvalResult`, so the `model-index`
block (the measured scores) is the structure the Hub reads; its body is the repository's
`model_cards/model_card_template.md` (installed as `casan_hf.model_cards`) filled with `string.Template`.
What differs between runs is data: the task the scores measure (`tasks.CardTask`) and the
model's layout (an encoder of one of the families, or the translation model). The strings a user passes in
(model, source and dataset names, languages, training values) are escaped in one place, `_render`.
"""

import re
from importlib import resources
from string import Template
from typing import NamedTuple

import transformers
from huggingface_hub import ModelCard, ModelCardData

from .. import __version__, model_cards
from ..configuration_casan_marian import CasanMarianConfig
from ..context import is_casan_parameter
from ..families import CAUSAL_FAMILIES, get_family, get_head
from ..glue.tasks import GLUE_HUB_ID, GLUE_TASKS
from ..options import OPTIONS, option_names
from .folder import is_hub_id
from .gate_log import gate_key, logged_layers_and_heads
from .tasks import METRICS, encoder_task, translation_task


TEMPLATE_NAME = "model_card_template.md"


# What a card says of each model's layout: whose self-attention takes the context, what is kept as it was, and
# what loading its code asks of the reader.
ENCODER_SELF_ATTENTION = "BERT's self-attention"
ENCODER_KEPT = (
    "V, the feed-forward blocks and every BERT weight keep their names, so the BERT checkpoint's weights load\n"
    "unchanged and only the context parameters are new."
)
ENCODER_CODE_NOTE = (
    "The model code (`configuration_casan.py`, `modeling_casan.py` and their helpers) is saved next to the\n"
    "weights and named in the config's `auto_map`, so `trust_remote_code=True` loads it without installing\n"
    "anything beyond `transformers` (4.56 or later) and `torch`. Read those files before trusting them. With\n"
    "`casan-hf` installed, `import casan_hf` registers the model and `trust_remote_code` is not needed."
)
PLAIN_CODE_NOTE = "A plain BERT checkpoint: no remote code is needed."
# What the training section says of a model converted and not trained, by whether it is a causal LM (a causal
# conversion is exact).
CONVERTED = {
    False: "Converted from BERT, not fine-tuned: the context parameters are freshly initialised (gate near 0).",
    True: "Converted, not fine-tuned: the context parameters are freshly initialised, their gates scaled by exactly "
    '0 (`context_start` "zero"), so the logits are the source model\'s.',
}
TRANSLATION_SELF_ATTENTION = "the encoder's self-attention"
TRANSLATION_KEPT = (
    "V, the feed-forward blocks and the whole decoder are Marian's; only the context parameters are new."
)
TRANSLATION_CODE_NOTE = (
    "The model code is saved next to the weights and named in the config's `auto_map`; read it before trusting it."
)
TRANSLATION_EXAMPLE = (
    'batch = tokenizer(["A man is riding a bike."], return_tensors="pt")',
    "print(tokenizer.batch_decode(model.generate(**batch, num_beams=5), skip_special_tokens=True))",
)
# The translation model's sizes, shown beside its context options.
TRANSLATION_SIZES = (
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "encoder_ffn_dim",
    "vocab_size",
)
# What a translation card says of a model that started from no checkpoint (and so names no `base_model`).
FROM_SCRATCH = "trained from scratch"
# A causal language model: whose self-attention takes the context, what is kept, what loading its code asks.
CAUSAL_SELF_ATTENTION = "each layer's causal self-attention, where the context of a position is its prefix"
CAUSAL_KEPT = (
    "V, the feed-forward blocks and every weight of the family's model keep their names, so its checkpoints load\n"
    "unchanged and only the context parameters are new. The running context sums travel with the key-value cache\n"
    "(`CasanCache`), so `generate()` with the cache gives the tokens of full forwards."
)
CAUSAL_CODE_NOTE = (
    "The model code (`configuration_casan_causal.py`, `modeling_casan_causal.py` and their helpers) is saved next to\n"
    "the weights and named in the config's `auto_map`, so `trust_remote_code=True` loads it without installing\n"
    f"anything beyond `transformers` ({CAUSAL_FAMILIES[0].minimum_transformers} or later) and `torch`. Read those "
    "files before trusting them."
)
CAUSAL_EXAMPLE = (
    'batch = tokenizer(["The"], return_tensors="pt")',
    "print(tokenizer.batch_decode(model.generate(**batch, max_new_tokens=40), skip_special_tokens=True))",
)
# A model a card's example loads, by name: `from_pretrained("<name>"`.
LOADED_NAME = re.compile(r"""from_pretrained\(\s*["']([^"']+)["']""")
CASAN_TAGS = ("casan", "casan-{context_type}", "context-aware-self-attention")


class Layout(NamedTuple):
    """What a card says of its model: the metadata's tags and pipeline tag, and the template's model sections."""

    tags: list
    pipeline_tag: str | None
    sections: dict
    converted: str = CONVERTED[False]


def escape_for_card(value):
    r"""A user's string (a model or dataset name, a path) as the card's body writes it: letters, digits and the
    characters of Hub ids and paths as they are, every other character as a Python escape (`\"`, `\\`, `\x0a`,
    `\x3c`). The result is plain text in Markdown (no line, heading, table cell, code span or HTML can start in
    it) and, in the card's code, the contents of a Python string literal that reads back as the original string.
    The YAML metadata needs none of this: `ModelCardData` quotes what it writes."""
    escaped = []
    for char in str(value):
        code = ord(char)
        if char.isalnum() or char in " ._/:@+=,()-":
            escaped.append(char)
        elif char in '\\"':
            escaped.append("\\" + char)
        else:
            escaped.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
    return "".join(escaped)


def pinned_load_lines(model_name, auto_class):
    """The lines of a card's snippet that load `model_name` at a commit: transformers warns that the code of an
    unpinned repository can change, and a pinned revision loads the code and weights that were read."""
    return [
        "",
        "# The code and weights of one commit, whatever is pushed later (the commit ids: the repository's history):",
        f'model = {auto_class}.from_pretrained("{model_name}", trust_remote_code=True, revision="<commit id>")',
    ]


def render_model_card(
    model,
    model_name,
    head="sequence-classification",
    base_model=None,
    task_name=None,
    dataset_id=None,
    eval_metrics=None,
    training=None,
    license="apache-2.0",
    untrained_heads=(),
    gates=None,
    record=None,
    transformers_version=None,
):
    """The README.md text of an encoder's folder.

    `model` is the saved model (a CASAN model, or the source family's own for a `--baseline` run; its config
    is read by class, since a converted config still says the source's `model_type` until it is saved);
    `eval_metrics` maps dev splits to their metrics; `training` maps hyper-parameter names to values;
    `untrained_heads` names the head modules that the source checkpoint had no weights for; `gates` are the
    mean context gates at the end of training (`casan_hf.training.gate_means`); `record`, a sentence naming the
    record a card of the release set was rendered from (`tooling/release.py`), ends the Training section.
    """
    head = get_head(head)
    task = encoder_task(head.hub_task, task_name, dataset_id)
    return _render(
        model,
        model_name,
        task,
        head=head,
        base_model=base_model,
        eval_metrics=eval_metrics,
        training=training,
        license=license,
        warning=untrained_heads_warning(untrained_heads, head.name, trained=bool(training)),
        gates=gates,
        record=record,
        transformers_version=transformers_version,
    )


def render_translation_card(
    model,
    model_name,
    source_lang,
    target_lang,
    dataset_id,
    eval_metrics,
    training,
    license,
    base_model=None,
    gates=None,
    record=None,
    transformers_version=None,
    dataset_name=None,
):
    """The README.md text of a translation run's folder; its `model-index` holds the BLEU and chrF of every
    evaluated split (`eval_metrics`: split -> metrics) on `dataset_id` (called `dataset_name` in the text; default
    the id). `base_model`: the checkpoint the run started from (None: trained from scratch); `gates`: the
    encoder's mean context gates at the end of training; `record`, `transformers_version`: as
    `render_model_card`'s."""
    return _render(
        model,
        model_name,
        translation_task(source_lang, target_lang, dataset_id, dataset_name),
        base_model=base_model,
        eval_metrics=eval_metrics,
        training=training,
        license=license,
        gates=gates,
        record=record,
        transformers_version=transformers_version,
    )


def card_for_repository(text, repo_id):
    """The card `text` as rendered for the repository `repo_id`: its name (metadata and title) and every model its
    examples load are `repo_id`, the rest as it was. A converted folder's card names the folder; pushing it under
    another name needs no new conversion or training."""
    card = ModelCard(text)
    name = escape_for_card(repo_id)
    text = card.text
    for found in reversed(list(LOADED_NAME.finditer(text))):
        text = text[: found.start(1)] + name + text[found.end(1) :]
    if card.data.model_name is not None:
        title = re.compile(rf"^# {re.escape(escape_for_card(card.data.model_name))}$", re.MULTILINE)
        text = title.sub(lambda _: f"# {name}", text, count=1)
    card.data.model_name = repo_id
    card.text = text
    return str(card)


def _render(
    model,
    model_name,
    task,
    base_model,
    eval_metrics,
    training,
    license,
    head=None,
    warning="",
    gates=None,
    record=None,
    transformers_version=None,
):
    """The card of `model` (an encoder with its `head`, or the translation model) for `task`. The metadata names
    `base_model` only when it is a Hub id: a folder of the training machine is no source, and no card names one."""
    started = base_model is not None
    base_model = base_model if is_hub_id(base_model) else None
    # The strings a user passes in, as the body shows them: escaped here and nowhere else.
    name = escape_for_card(model_name)
    source = escape_for_card(base_model) if base_model else None
    dataset = escape_for_card(task.dataset_name) if task.dataset_name else None
    languages = [escape_for_card(language) for language in task.languages]
    training = {
        key: escape_for_card(value) if isinstance(value, str) else value for key, value in (training or {}).items()
    }

    if isinstance(model.config, CasanMarianConfig):
        layout = _translation_layout(model.config, name, source, started, languages)
    elif get_family(type(model.config).model_type) in CAUSAL_FAMILIES:
        layout = _causal_layout(model.config, head, name, source, started)
    else:
        layout = _encoder_layout(model.config, head, task, name, source)
    card_data = ModelCardData(
        model_name=model_name,
        base_model=base_model,
        datasets=[GLUE_HUB_ID] if task.dataset_id == GLUE_HUB_ID else None,
        language=list(task.languages) or None,
        eval_results=task.eval_results(whole_splits(eval_metrics or {})) or None,
        library_name="transformers",
        license=license,
        pipeline_tag=layout.pipeline_tag,
        tags=[*layout.tags, *task.tags],
    )
    template = Template(resources.files(model_cards).joinpath(TEMPLATE_NAME).read_text(encoding="utf-8"))
    text = template.substitute(
        metadata=card_data.to_yaml(),
        model_name=name,
        architecture=type(model).__name__,
        results=_results(task, eval_metrics, dataset),
        training=_training_table(training, layout.converted, warning, gates) + (f"\n\n{record}" if record else ""),
        casan_version=__version__,
        transformers_version=transformers_version or transformers.__version__,
        **layout.sections,
    )
    ModelCard(text)  # raises if the metadata block does not parse
    return text


def _encoder_layout(config, head, task, name, source):
    """An encoder of one of the families: CASAN, or the family's own model (a `--baseline` run's twin)."""
    family = get_family(type(config).model_type)
    casan = type(config).model_type == family.model_type
    origin = f"`{source}`" if source else f"a {family.name} checkpoint"
    glue_task = GLUE_TASKS.get(task.dataset_config)
    fine_tuned = f" fine-tuned on {glue_task.description}" if glue_task else ""
    if casan:
        summary = f"A context-aware self-attention ({config.context_type!r} context) version of {origin}{fine_tuned}."
        options = _option_rows(config, head)
        tags = [tag.format(context_type=config.context_type) for tag in CASAN_TAGS] + [family.name]
    else:
        summary = (
            f"Plain {family.name} ({origin}){fine_tuned}, trained with the same script and settings as its CASAN "
            "twins."
        )
        options = f"| context | none: plain {family.name}, the baseline of the CASAN runs |"
        tags = [family.name, "casan-baseline"]
    sections = dict(
        summary=summary,
        model_rows=f"| started from | {origin} |\n{options}",
        self_attention=ENCODER_SELF_ATTENTION,
        kept=ENCODER_KEPT,
        load_instructions=_load_instructions(
            ENCODER_CODE_NOTE if casan else PLAIN_CODE_NOTE, name, head.auto_class, remote_code=casan
        ),
    )
    return Layout(tags, head.pipeline_task, sections)


def _causal_layout(config, head, name, source, started):
    """A causal language model of one of the causal families: CASAN, or the family's own (a `--baseline` run's
    twin), from a checkpoint or from scratch."""
    family = get_family(type(config).model_type)
    casan = type(config).model_type == family.model_type
    if source:
        origin = f"`{source}`"
    else:
        origin = "a local checkpoint" if started else FROM_SCRATCH
    if casan:
        summary = f"A {family.name} causal language model with context-aware self-attention ({config.context_type!r} "
        summary += f"context), {'trained from scratch' if origin == FROM_SCRATCH else f'started from {origin}'}."
        options = _rows(config, option_names("context"))
        tags = [tag.format(context_type=config.context_type) for tag in CASAN_TAGS] + [family.name]
        note = CAUSAL_CODE_NOTE
    else:
        summary = f"Plain {family.name} ({origin}), trained with the same script and settings as its CASAN twins."
        options = f"| context | none: plain {family.name}, the baseline of the CASAN runs |"
        tags = [family.name, "casan-baseline"]
        note = f"A plain {family.name} checkpoint: no remote code is needed."
    sections = dict(
        summary=summary,
        model_rows=f"| started from | {origin} |\n{options}",
        self_attention=CAUSAL_SELF_ATTENTION,
        kept=CAUSAL_KEPT,
        load_instructions=_load_instructions(note, name, head.auto_class, remote_code=casan, example=CAUSAL_EXAMPLE),
    )
    return Layout(tags, head.pipeline_task, sections, CONVERTED[True])


def _translation_layout(config, name, source, started, languages):
    """The translation model: Marian's layout with a context-aware encoder."""
    if source:
        origin = f"started from `{source}`"
    else:
        origin = "started from a local checkpoint" if started else FROM_SCRATCH
    source_lang, target_lang = languages
    summary = (
        f"An encoder-decoder translating {source_lang} into {target_lang} (Marian layout: post-norm Transformer, "
        f"sinusoidal positions, shared embeddings) {origin}, whose encoder self-attention is context-aware (CASAN, "
        f"Yang et al., AAAI 2019; context_type `{config.context_type}`). The decoder is Marian's."
    )
    sections = dict(
        summary=summary,
        model_rows=_rows(config, [*option_names("context"), *TRANSLATION_SIZES]),
        self_attention=TRANSLATION_SELF_ATTENTION,
        kept=TRANSLATION_KEPT,
        load_instructions=_load_instructions(
            TRANSLATION_CODE_NOTE, name, "AutoModelForSeq2SeqLM", remote_code=True, example=TRANSLATION_EXAMPLE
        ),
    )
    tags = [tag.format(context_type=config.context_type) for tag in CASAN_TAGS] + ["marian"]
    return Layout(tags, "translation", sections)


def _rows(config, names):
    return "\n".join(f"| {name} | `{getattr(config, name)}` |" for name in names)


def _option_rows(config, head):
    """The CASAN options that shape this model: the context, and the pooling of a sentence-vector head."""
    names = list(option_names("context"))
    if head.pools_sentence:
        names.append("classifier_pooling")
        names += [option.name for option in OPTIONS if config.classifier_pooling in option.poolings]
    return _rows(config, names)


def whole_splits(eval_metrics):
    """The splits of `eval_metrics` measured on every example: a split whose metrics hold `samples` (the examples
    evaluated) below `split_samples` (the split's size) was measured on a part only, and its scores are not the
    split's: they stay out of the `model-index`."""
    return {
        split: metrics
        for split, metrics in eval_metrics.items()
        if metrics.get("split_samples") is None or metrics.get("samples") == metrics["split_samples"]
    }


def measured_examples(split, metrics):
    """How many examples of `split` its scores were measured on, in words; "" where the metrics do not say."""
    samples, total = metrics.get("samples"), metrics.get("split_samples")
    if samples is None or total is None:
        return ""
    if samples == total:
        return f"{split}: all {total:,} examples."
    return (
        f"{split}: the first {samples:,} of its {total:,} examples only, so these are not "
        "the split's scores and the model-index leaves them out."
    )


def _results(task, eval_metrics, dataset):
    if not eval_metrics:
        return task.not_evaluated
    counts = [measured_examples(split, metrics) for split, metrics in eval_metrics.items()]
    rows = [" ".join(line for line in counts if line), ""] if any(counts) else []
    rows += ["| split | metric | value |", "| --- | --- | --- |"]
    rows += [
        f"| {split} | {METRICS[metric].name} | {value:.{METRICS[metric].decimals}f} |"
        for split, metrics in eval_metrics.items()
        for metric, value in metrics.items()
        if metric in METRICS
    ]
    return task.measured_on.format(dataset=dataset) + "\n\n" + "\n".join(rows)


def _load_instructions(note, name, auto_class, remote_code, example=()):
    """`note`, then the snippet that loads the model `name` (pinned to a commit where it runs remote code) and
    runs `example`."""
    remote = ", trust_remote_code=True" if remote_code else ""
    code = [
        "```python",
        f"from transformers import AutoTokenizer, {auto_class}",
        "",
        # The config's auto_map makes the tokenizer's config lookup ask for remote code too.
        f'tokenizer = AutoTokenizer.from_pretrained("{name}"{remote})',
        f'model = {auto_class}.from_pretrained("{name}"{remote})',
        *example,
        *(pinned_load_lines(name, auto_class) if remote_code else []),
        "```",
    ]
    return note + "\n\n" + "\n".join(code)


def _training_table(training, converted, warning="", gates=None):
    if not training:
        return f"{converted}\n\n**{warning}**" if warning else converted
    rows = [f"**{warning}**", ""] if warning else []
    rows += ["| hyper-parameter | value |", "| --- | --- |"]
    rows += [f"| {name} | `{value}` |" for name, value in training.items()]
    if gates:
        rows += ["", "Mean context gates over the real tokens of the evaluation data, at the end of training:", ""]
        rows.append(gates_table(gates))
    return "\n".join(rows)


def untrained_heads(missing_keys):
    """The head modules a conversion initialised at random: the weights the source checkpoint lacked, less
    the context and the output gate (new by design), as module names (`cls.predictions`, `classifier`)."""
    names = [key.removesuffix(".weight").removesuffix(".bias") for key in missing_keys if not is_casan_parameter(key)]
    return sorted({".".join(name.split(".")[:2]) for name in names})


def untrained_heads_warning(modules, head_name, trained=False):
    """What a user must know about a head that starts random (`trained`: and has learnt only in this run's
    steps; else the head's own `untrained` consequence), or "" when there is none."""
    if not modules:
        return ""
    names = ", ".join(f"`{name}.*`" for name in modules)
    if trained:
        return (
            f"The source checkpoint has no weights for {names}: the {head_name} head started random and has "
            "learnt only in the training steps below."
        )
    return (
        f"The source checkpoint has no weights for {names}: the {head_name} head starts random, so "
        f"{get_head(head_name).untrained}."
    )


def gates_table(gates):
    """A Markdown table of `gate_means` output, one row per layer."""
    layers, _ = logged_layers_and_heads(gates)
    rows = ["| layer | mean lambda_Q | mean lambda_K |", "| --- | --- | --- |"]
    rows += [
        f"| {layer} | {gates[gate_key(layer, 'query')]:.4f} | {gates[gate_key(layer, 'key')]:.4f} |"
        for layer in layers
    ]
    return "\n".join(rows)
