"""The model card of a Hub folder.

The card's YAML metadata is built with `huggingface_hub.ModelCardData` and `EvalResult`, so the
`model-index` block (the measured scores) is the structure the Hub reads; its body is the package's
`README_TEMPLATE.md` filled with `string.Template`.
"""

from importlib import resources
from string import Template

import transformers
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .. import __version__
from ..families import get_family, get_head
from ..glue.tasks import GLUE_HUB_ID, GLUE_TASKS
from ..options import OPTIONS, option_names
from .folder import is_hub_id


TEMPLATE_NAME = "README_TEMPLATE.md"


METRIC_NAMES = {
    "accuracy": "Accuracy",
    "f1": "F1",
    "matthews_correlation": "Matthews correlation",
    "pearson": "Pearson correlation",
    "spearmanr": "Spearman correlation",
    "perplexity": "Perplexity",
}


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


def eval_results_for(task_name, dataset_id, eval_metrics, task_type="text-classification"):
    """`EvalResult`s from `{split: {metric: value}}`; metrics without a known name (loss, runtime) are left out.
    `task_type` is the Hub task the scores measure (`fill-mask` for masked-LM perplexity)."""
    dataset_name = f"GLUE {task_name.upper()}" if task_name is not None else dataset_id
    results = []
    for split, metrics in eval_metrics.items():
        for metric, value in metrics.items():
            if metric not in METRIC_NAMES:
                continue
            results.append(
                EvalResult(
                    task_type=task_type,
                    task_name=task_type.replace("-", " ").title(),
                    dataset_type=dataset_id,
                    dataset_name=dataset_name,
                    dataset_config=task_name,
                    dataset_split=split,
                    metric_type=metric,
                    metric_value=round(float(value), 4),
                    metric_name=METRIC_NAMES[metric],
                )
            )
    return results


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
):
    """The README.md text of a saved folder.

    `model` is the saved model (a CASAN model, or the source family's own for a `--baseline` run; its config
    is read by class, since a converted config still says the source's `model_type` until it is saved);
    `eval_metrics` maps dev splits to their metrics; `training` maps hyper-parameter names to values;
    `untrained_heads` names the head modules that the source checkpoint had no weights for; `gates` are the
    mean context gates at the end of training (`casan_hf.training.gate_means`).
    """
    head = get_head(head)
    config = model.config
    family = get_family(type(config).model_type)
    casan = type(config).model_type == family.model_type
    tags = (
        ["casan", f"casan-{config.context_type}", "context-aware-self-attention", family.name]
        if casan
        else [family.name, "casan-baseline"]
    )
    if task_name is not None:
        tags += ["glue", task_name]
    on_hub = dataset_id == GLUE_HUB_ID
    task_type = head.pipeline_task or head.name
    eval_results = eval_results_for(task_name, dataset_id, eval_metrics or {}, task_type) or None
    base_model = base_model if is_hub_id(base_model) else None  # a folder of the training machine is no source
    card_data = ModelCardData(
        model_name=model_name,
        base_model=base_model,
        datasets=[GLUE_HUB_ID] if on_hub else None,
        eval_results=eval_results,
        library_name="transformers",
        license=license,
        pipeline_tag=head.pipeline_task,
        tags=tags,
    )
    template = Template(resources.files(__package__).joinpath(TEMPLATE_NAME).read_text(encoding="utf-8"))
    text = template.substitute(
        metadata=card_data.to_yaml(),
        model_name=escape_for_card(model_name),
        summary=_summary(config, base_model, task_name, casan, family),
        architecture=type(model).__name__,
        base_model=f"`{escape_for_card(base_model)}`" if base_model else f"a {family.name} checkpoint",
        context_rows=_option_rows(config, head)
        if casan
        else f"| context | none: plain {family.name}, the baseline of the CASAN runs |",
        results=_results_table(task_name, eval_metrics),
        load_instructions=_load_instructions(escape_for_card(model_name), head, casan),
        training=_training_table(
            training, untrained_heads_warning(untrained_heads, head.name, trained=bool(training)), gates
        ),
        casan_version=__version__,
        transformers_version=transformers.__version__,
    )
    ModelCard(text)  # raises if the metadata block does not parse
    return text


def _option_rows(config, head):
    """The CASAN options that shape this model: the context, and the pooling of a sentence-vector head."""
    names = list(option_names("context"))
    if head.pools_sentence:
        names.append("classifier_pooling")
        names += [option.name for option in OPTIONS if config.classifier_pooling in option.poolings]
    return "\n".join(f"| {name} | `{getattr(config, name)}` |" for name in names)


def _summary(config, base_model, task_name, casan, family):
    source = f"`{escape_for_card(base_model)}`" if base_model else f"a {family.name} checkpoint"
    task = f" fine-tuned on {GLUE_TASKS[task_name].description}" if task_name in GLUE_TASKS else ""
    if casan:
        return f"A context-aware self-attention ({config.context_type!r} context) version of {source}{task}."
    return f"Plain {family.name} ({source}){task}, trained with the same script and settings as its CASAN twins."


def _results_table(task_name, eval_metrics):
    if not eval_metrics:
        return "Not evaluated yet: the context parameters are untrained; fine-tune before use."
    rows = ["| split | metric | value |", "| --- | --- | --- |"]
    for split, metrics in eval_metrics.items():
        rows += [
            f"| {split} | {METRIC_NAMES[name]} | {value:.4f} |"
            for name, value in metrics.items()
            if name in METRIC_NAMES
        ]
    where = f"the GLUE {task_name.upper()} dev set" if task_name is not None else "the validation file"
    return f"Measured on {where} at the end of training:\n\n" + "\n".join(rows)


def _load_instructions(model_name, head, casan):
    auto_class = head.auto_class
    remote = ", trust_remote_code=True" if casan else ""
    code = [
        "```python",
        f"from transformers import AutoTokenizer, {auto_class}",
        "",
        # The config's auto_map makes the tokenizer's config lookup ask for remote code too.
        f'tokenizer = AutoTokenizer.from_pretrained("{model_name}"{remote})',
        f'model = {auto_class}.from_pretrained("{model_name}"{remote})',
        *(pinned_load_lines(model_name, auto_class) if casan else []),
        "```",
    ]
    if not casan:
        return "A plain BERT checkpoint: no remote code is needed.\n\n" + "\n".join(code)
    return (
        "The model code (`configuration_casan.py`, `modeling_casan.py` and their helpers) is saved next to the\n"
        "weights and named in the config's `auto_map`, so `trust_remote_code=True` loads it without installing\n"
        "anything beyond `transformers` (4.56 or later) and `torch`. Read those files before trusting them. With\n"
        "`casan-hf` installed, `import casan_hf` registers the model and `trust_remote_code` is not needed.\n\n"
        + "\n".join(code)
    )


def untrained_heads(missing_keys):
    """The head modules a conversion initialised at random: the weights the source checkpoint lacked, less
    the context (new by design), as module names (`cls.predictions`, `classifier`)."""
    names = [key.removesuffix(".weight").removesuffix(".bias") for key in missing_keys]
    return sorted({".".join(name.split(".")[:2]) for name in names if ".context_mixer." not in name})


def untrained_heads_warning(modules, head_name, trained=False):
    """What a user must know about a head that starts random (`trained`: and has learnt only in this run's
    steps), or "" when there is none."""
    if not modules:
        return ""
    names = ", ".join(f"`{name}.*`" for name in modules)
    if trained:
        return (
            f"The source checkpoint has no weights for {names}: the {head_name} head started random and has "
            "learnt only in the training steps below."
        )
    consequence = (
        "fill-mask predicts random words (p ~ 1 / vocabulary size) until the MLM head is trained, by "
        "continued masked-LM pre-training"
        if head_name == "masked-lm"
        else "its outputs are random until it is fine-tuned"
    )
    return f"The source checkpoint has no weights for {names}: the {head_name} head starts random, so {consequence}."


def gates_table(gates):
    """A Markdown table of `gate_means` output, one row per layer."""
    layers = sorted({int(name.split("/")[1].removeprefix("layer_")) for name in gates})
    rows = ["| layer | mean lambda_Q | mean lambda_K |", "| --- | --- | --- |"]
    rows += [
        f"| {layer} | {gates[f'gates/layer_{layer}/query']:.4f} | {gates[f'gates/layer_{layer}/key']:.4f} |"
        for layer in layers
    ]
    return "\n".join(rows)


def _training_table(training, warning="", gates=None):
    if not training:
        text = "Converted from BERT, not fine-tuned: the context parameters are freshly initialised (gate near 0)."
        return f"{text}\n\n**{warning}**" if warning else text
    rows = [f"**{warning}**", ""] if warning else []
    rows += ["| hyper-parameter | value |", "| --- | --- |"]
    rows += [
        f"| {name} | `{escape_for_card(value) if isinstance(value, str) else value}` |"
        for name, value in training.items()
    ]
    if gates:
        rows += ["", "Mean context gates over the real tokens of the evaluation data, at the end of training:", ""]
        rows.append(gates_table(gates))
    return "\n".join(rows)
