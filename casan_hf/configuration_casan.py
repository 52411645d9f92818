"""Configuration of context-aware self-attention (CASAN) BERT models, and the two tables the rest of casan_hf
is derived from: `OPTIONS`, the options CASAN adds to BERT's config, and `HEADS`, the model classes.

`CasanConfig` is a `BertConfig` with the options on top, so every BERT checkpoint's config loads into it
unchanged. Each option is checked whenever it is set (at construction, by `from_pretrained` keyword arguments,
which transformers sets after `__init__`, and from a loaded `config.json`), and the options that depend on
each other are checked again when a model is built from the config.
"""

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import BertConfig

from .compat import PreTrainedConfig, dataclass_config


CONTEXT_TYPES = ("global", "deep", "deep_global", "none")
CONTEXT_TARGETS = ("query", "key")
GATE_KINDS = ("dynamic", "fixed")
CLASSIFIER_POOLINGS = ("cls", "mean", "structured", "generalized")
# The poolings that attend over the tokens with `pooling_hops` heads of width `pooling_hidden`.
ATTENTIVE_POOLINGS = ("structured", "generalized")
# Generalized pooling's three diversity penalties (Chen et al. 2018), each with a weight and a margin.
GENERALIZED_PENALTIES = ("parameter", "attention", "output")

# The context types whose context is one vector per sentence (masked means), rather than per token.
SENTENCE_CONTEXTS = ("global", "deep_global")


def _allowed(name, value, allowed):
    return ValueError(f"`{name}` must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_of(name, allowed):
    def check(value):
        if value not in allowed:
            raise _allowed(name, value, allowed)
        return value

    return check


def _check_context_targets(value):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(
            f"`context_targets` must be a non-empty list drawn from {list(CONTEXT_TARGETS)}; got {value!r}."
        )
    unknown = [target for target in value if target not in CONTEXT_TARGETS]
    if unknown or not value or len(set(value)) != len(value):
        raise ValueError(
            f"`context_targets` must be a non-empty list of distinct values from {list(CONTEXT_TARGETS)}; "
            f"got {value!r}."
        )
    # Kept in canonical order so that equal configs serialise equally.
    return [target for target in CONTEXT_TARGETS if target in value]


def _check_context_layers(value):
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`context_layers` must be None (all layers) or a non-empty list of layer indices; got {value!r}."
        )
    if not all(_is_int(index) and index >= 0 for index in value) or len(set(value)) != len(value):
        raise ValueError(f"`context_layers` must hold distinct 0-based layer indices (ints >= 0); got {value!r}.")
    return sorted(value)


def _check_fixed_gate(value):
    if not _is_number(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`fixed_gate` must be a number in [0, 1]; got {value!r}.")
    return float(value)


def _check_gate_bias_init(value):
    if not _is_number(value) or value != value or abs(value) == float("inf"):
        raise ValueError(f"`gate_bias_init` must be a finite number (a logit); got {value!r}.")
    return float(value)


def _check_context_rank(value):
    if value is not None and not (_is_int(value) and value > 0):
        raise ValueError(f"`context_rank` must be None (full-rank U) or a positive int; got {value!r}.")
    return value


def _check_context_init_range(value):
    if value is not None and (not _is_number(value) or not value >= 0):
        raise ValueError(
            f"`context_init_range` must be None (use `initializer_range`) or a number >= 0; got {value!r}."
        )
    return None if value is None else float(value)


def _positive_int(name):
    def check(value):
        if not (_is_int(value) and value > 0):
            raise ValueError(f"`{name}` must be a positive int; got {value!r}.")
        return value

    return check


def _non_negative(name, meaning):
    def check(value):
        if not _is_number(value) or not 0.0 <= value < float("inf"):
            raise ValueError(f"`{name}` must be a finite number >= 0 ({meaning}); got {value!r}.")
        return float(value)

    return check


@dataclass(frozen=True)
class CasanOption:
    """One option CASAN adds to `BertConfig`.

    `group` says what it shapes: `"context"` the attention, `"pooling"` the sentence vector of the heads that
    classify one (see `Head.pools_sentence`). `structural` options decide which context parameters exist,
    so a CASAN checkpoint loads only with the values it was saved with. `check` returns the value to store
    or raises a ValueError naming the option, the value and what is allowed. `help` is the documentation
    shown in the config's docstring and by every script's flag; defaults come from `CasanConfig`.
    """

    name: str
    group: str
    check: Callable
    help: str
    choices: tuple | None = None
    structural: bool = False
    poolings: tuple = ()  # for a pooling option: the `classifier_pooling` values it shapes


OPTIONS = (
    CasanOption(
        "context_type",
        "context",
        _one_of("context_type", CONTEXT_TYPES),
        '"global": the masked mean of the layer input; "deep": the inputs of all earlier layers, position by '
        'position (the first layer attends as plain BERT); "deep_global": the global vectors of all earlier '
        'layers and the current one; "none": exactly BERT.',
        choices=CONTEXT_TYPES,
        structural=True,
    ),
    CasanOption(
        "context_targets",
        "context",
        _check_context_targets,
        "Which of the query and key transforms take the context. V is never touched.",
        choices=CONTEXT_TARGETS,
        structural=True,
    ),
    CasanOption(
        "context_layers",
        "context",
        _check_context_layers,
        "0-based indices of the layers that get context; None means all of them. Layers left out attend as "
        "plain BERT (their hidden states still feed the context of later layers).",
        structural=True,
    ),
    CasanOption(
        "gate",
        "context",
        _one_of("gate", GATE_KINDS),
        '"dynamic": the paper\'s per-token sigmoid gate; "fixed": the constant `fixed_gate`.',
        choices=GATE_KINDS,
        structural=True,
    ),
    CasanOption(
        "fixed_gate",
        "context",
        _check_fixed_gate,
        'The constant mixing weight lambda in [0, 1] used when gate="fixed".',
    ),
    CasanOption(
        "gate_bias_init",
        "context",
        _check_gate_bias_init,
        "Initial bias of the dynamic gate (a logit). sigmoid(-4) = 0.018: a converted checkpoint starts close "
        "to the BERT it came from.",
    ),
    CasanOption(
        "context_rank",
        "context",
        _check_context_rank,
        "None for the paper's full-rank U (d_c x d); an int r factors U = A B with A: d_c x r and B: r x d, "
        'the parameter-efficient option for "deep" and "deep_global".',
        structural=True,
    ),
    CasanOption(
        "context_init_range",
        "context",
        _check_context_init_range,
        "Standard deviation of the normal initialisation of U (or A and B) and of the gate vectors; None uses "
        "`initializer_range`.",
    ),
    CasanOption(
        "classifier_pooling",
        "pooling",
        _one_of("classifier_pooling", CLASSIFIER_POOLINGS),
        'The sentence vector the classifier reads. "cls": BERT\'s pooler on [CLS] (`bert.pooler.*`, so BERT '
        'classifiers load unchanged); "mean": the masked mean of the last layer over the real tokens; '
        '"structured": the structured self-attentive embedding of Lin et al. (2017), `pooling_hops` attention '
        'distributions over the real tokens, concatenated; "generalized": the vector-based multi-head pooling of '
        "Chen et al. (2018), whose `pooling_hops` heads weigh every hidden dimension of every token on its own. "
        "The last three read no pooler, so those heads build none (a BERT checkpoint's pooler weights are "
        "skipped).",
        choices=CLASSIFIER_POOLINGS,
    ),
    CasanOption(
        "pooling_hops",
        "pooling",
        _positive_int("pooling_hops"),
        'r, the number of attention hops (heads, for "generalized") of the attentive poolings; the classifier '
        "reads r * hidden_size features. A few hops suffice for sentence-pair tasks and keep the classifier "
        "small.",
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_hidden",
        "pooling",
        _positive_int("pooling_hidden"),
        'd_a, the hidden width of the hop scorer: W_s2 tanh(W_s1 H^T) for "structured", W_2^i ReLU(W_1^i H^T '
        '+ b_1^i) + b_2^i for each head of "generalized".',
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_penalty",
        "pooling",
        _non_negative("pooling_penalty", "0 turns the penalty off"),
        "Weight of Lin et al.'s penalty ||A A^T - I||_F^2 (averaged over the batch), added to the loss when "
        "labels are given; it keeps the hops from all attending to the same tokens. 0 turns it off.",
        poolings=("structured",),
    ),
    *(
        option
        for penalty, pulls_apart in (
            ("parameter", "the heads' first-layer weights W_1^i: ||W_1^i - W_1^j||_F^2"),
            ("attention", "the heads' attention matrices A^i: ||A^i - A^j||_F^2, averaged over the batch"),
            ("output", "the heads' outputs v^i: ||v^i - v^j||^2, averaged over the batch"),
        )
        for option in (
            CasanOption(
                f"pooling_{penalty}_penalty",
                "pooling",
                _non_negative(f"pooling_{penalty}_penalty", "0 turns the penalty off"),
                f"Weight mu of generalized pooling's {penalty} penalty, sum over pairs of heads i < j of "
                f"max(margin - d_ij, 0), where d_ij is the distance between {pulls_apart}; added to the loss "
                "when labels are given. 0 turns it off.",
                poolings=("generalized",),
            ),
            CasanOption(
                f"pooling_{penalty}_margin",
                "pooling",
                _non_negative(f"pooling_{penalty}_margin", "the distance the penalty asks for"),
                f"The margin (threshold lambda) of generalized pooling's {penalty} penalty: pairs of heads "
                "farther apart than it cost nothing.",
                poolings=("generalized",),
            ),
        )
    ),
)

OPTION_GROUPS = ("context", "pooling")
STRUCTURAL_OPTIONS = tuple(option.name for option in OPTIONS if option.structural)


def option_names(*groups):
    """The names of the options in `groups` (all options when none is given), in table order."""
    return tuple(option.name for option in OPTIONS if not groups or option.group in groups)


@dataclass(frozen=True)
class Head:
    """One CASAN head, built for every family.

    `name` is what the converter's `--head` and the model card call it; `suffix` ends the class names
    (`CasanRobertaForSequenceClassification`, and transformers' `RobertaForSequenceClassification` it
    mirrors); `pipeline_task` the transformers pipeline that serves it (None where transformers has none);
    `pools_sentence` whether it classifies a sentence vector, and so takes the "pooling" options;
    `takes_num_labels` whether its output width is the user's `num_labels`.
    """

    name: str
    suffix: str
    auto_class: str
    pipeline_task: str | None
    pools_sentence: bool = False
    takes_num_labels: bool = False


HEADS = (
    Head("base", "Model", "AutoModel", "feature-extraction"),
    Head(
        "sequence-classification",
        "ForSequenceClassification",
        "AutoModelForSequenceClassification",
        "text-classification",
        pools_sentence=True,
        takes_num_labels=True,
    ),
    Head(
        "token-classification",
        "ForTokenClassification",
        "AutoModelForTokenClassification",
        "token-classification",
        takes_num_labels=True,
    ),
    Head("question-answering", "ForQuestionAnswering", "AutoModelForQuestionAnswering", None),
    Head("multiple-choice", "ForMultipleChoice", "AutoModelForMultipleChoice", None, pools_sentence=True),
    Head("masked-lm", "ForMaskedLM", "AutoModelForMaskedLM", "fill-mask"),
)


def get_head(name):
    """The head called `name`, or a ValueError listing them all."""
    for head in HEADS:
        if head.name == name:
            return head
    raise ValueError(f"Unknown head {name!r}; choose one of {', '.join(head.name for head in HEADS)}.")


@dataclass(frozen=True)
class Family:
    """One family of BERT-style encoders that CASAN converts: its checkpoints' `model_type` (`name`), the
    prefix of transformers' class names (`RobertaForMaskedLM`) and of CASAN's (`CasanRobertaForMaskedLM`;
    BERT's classes keep the plain `CasanModel`, ...), and the attribute that holds the encoder in every head
    (`roberta.encoder.layer.0...`). A CASAN checkpoint of the family says `model_type` "casan_<name>"."""

    name: str
    transformers_prefix: str
    class_prefix: str
    base_model_prefix: str

    @property
    def model_type(self):
        return f"casan_{self.name}"

    @property
    def config_class_name(self):
        return f"Casan{self.class_prefix}Config"

    def class_name(self, head):
        return f"Casan{self.class_prefix}{head.suffix}"

    def source_class_name(self, head):
        return f"{self.transformers_prefix}{head.suffix}"

    def auto_map(self):
        """Every class a saved folder of this family can be loaded as with `trust_remote_code=True`."""
        return {
            "AutoConfig": f"configuration_casan.{self.config_class_name}",
            **{head.auto_class: f"modeling_casan.{self.class_name(head)}" for head in HEADS},
        }


FAMILIES = (
    Family("bert", "Bert", "", "bert"),
    Family("roberta", "Roberta", "Roberta", "roberta"),
    Family("xlm-roberta", "XLMRoberta", "XLMRoberta", "roberta"),
    Family("electra", "Electra", "Electra", "electra"),
)


def get_family(model_type):
    """The family of a checkpoint's `model_type`, its own ("roberta") or CASAN's ("casan_roberta"), or a
    ValueError naming the types CASAN loads."""
    for family in FAMILIES:
        if model_type in (family.name, family.model_type):
            return family
    allowed = [name for family in FAMILIES for name in (family.name, family.model_type)]
    raise ValueError(
        f"Checkpoint has model_type {model_type!r}; CASAN models load {', '.join(map(repr, allowed))} checkpoints."
    )


OPTION_CHECKS = {option.name: option.check for option in OPTIONS}


@dataclass_config
class CasanConfig(BertConfig):
    r"""
    A [`BertConfig`] for context-aware self-attention (Yang et al., AAAI 2019). All BERT fields keep their
    meaning; the fields below choose the context and the sentence vector of the classification heads.

    Args:
    """

    model_type = "casan_bert"

    context_type: str = "deep_global"
    context_targets: list[str] = field(default_factory=lambda: list(CONTEXT_TARGETS))
    context_layers: list[int] | None = None
    gate: str = "dynamic"
    fixed_gate: float = 0.1
    gate_bias_init: float = -4.0
    context_rank: int | None = None
    context_init_range: float | None = None
    classifier_pooling: str = "cls"
    pooling_hops: int = 4
    pooling_hidden: int = 128
    pooling_penalty: float = 1.0
    pooling_parameter_penalty: float = 0.0
    pooling_parameter_margin: float = 1.0
    pooling_attention_penalty: float = 0.0
    pooling_attention_margin: float = 1.0
    pooling_output_penalty: float = 0.0
    pooling_output_margin: float = 1.0

    def __post_init__(self, **kwargs):
        if hasattr(BertConfig, "__post_init__"):  # transformers 4.x configs have none: see `dataclass_config`
            super().__post_init__(**kwargs)
        # A converted BERT config.json says model_type "bert"; the class attribute must win.
        self.__dict__.pop("model_type", None)
        self.auto_map = get_family(self.model_type).auto_map()
        self.check_context_options()

    def __setattr__(self, name, value):
        check = OPTION_CHECKS.get(name)
        super().__setattr__(name, value if check is None else check(value))

    def check_context_options(self):
        """Checks the options that depend on each other; models call it again before building."""
        if self.context_layers is not None:
            too_deep = [index for index in self.context_layers if index >= self.num_hidden_layers]
            if too_deep:
                raise ValueError(
                    f"`context_layers` {too_deep} out of range: the model has {self.num_hidden_layers} layers "
                    f"(allowed indices 0..{self.num_hidden_layers - 1})."
                )
        if self.context_rank is not None and self.context_type == "none":
            raise ValueError("`context_rank` has no effect with context_type='none'; leave it None.")

    def layer_has_context(self, layer_index):
        """Whether layer `layer_index` (0-based) mixes context into its query/key."""
        if self.context_type == "none" or (self.context_type == "deep" and layer_index == 0):
            return False
        return self.context_layers is None or layer_index in self.context_layers

    def context_size(self, layer_index):
        """d_c, the width of the context matrix C of layer `layer_index` (0-based)."""
        per_layer = {"global": 1, "deep": layer_index, "deep_global": layer_index + 1, "none": 0}
        return per_layer[self.context_type] * self.hidden_size


@dataclass_config
class CasanRobertaConfig(CasanConfig):
    r"""
    [`CasanConfig`] for RoBERTa checkpoints: `RobertaConfig`'s defaults (its vocabulary and special tokens)
    and the CASAN options.
    """

    model_type = "casan_roberta"

    vocab_size: int = 50265
    pad_token_id: int | None = 1
    bos_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 2


@dataclass_config
class CasanXLMRobertaConfig(CasanRobertaConfig):
    r"""
    [`CasanConfig`] for XLM-RoBERTa checkpoints: `XLMRobertaConfig`'s defaults and the CASAN options.
    """

    model_type = "casan_xlm-roberta"

    vocab_size: int = 30522


@dataclass_config
class CasanElectraConfig(CasanConfig):
    r"""
    [`CasanConfig`] for ELECTRA discriminator checkpoints: `ElectraConfig`'s fields and defaults (the
    embedding width, projected to the hidden width when they differ; the multiple-choice summary) and the
    CASAN options. The multiple-choice head summarises the sentence vector of `classifier_pooling`, which
    takes the place of ELECTRA's `summary_type`: that must be "first" (the [CLS] token, as in every ELECTRA
    checkpoint), which is what `classifier_pooling="cls"` reads.
    """

    model_type = "casan_electra"

    embedding_size: int = 128
    hidden_size: int = 256
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    summary_type: str = "first"
    summary_use_proj: bool = True
    summary_activation: str = "gelu"
    summary_last_dropout: float | int = 0.1

    def check_context_options(self):
        super().check_context_options()
        if self.summary_type != "first":
            raise ValueError(
                f"CASAN ELECTRA models take summary_type 'first' (the sentence vector comes from "
                f"`classifier_pooling`); got {self.summary_type!r}."
            )


# The CASAN config of each family, by the family's name.
FAMILY_CONFIGS = {
    config_class.model_type.removeprefix("casan_"): config_class
    for config_class in (CasanConfig, CasanRobertaConfig, CasanXLMRobertaConfig, CasanElectraConfig)
}


def checkpoint_config(name_or_path, requested, config_class, source_model_type, models_name, hint=""):
    """The saved config of the checkpoint a CASAN model is loaded from, checked against what is `requested`
    (`from_pretrained`'s keyword arguments, or the `config` the auto classes pass): a ValueError when it cannot
    become the requested model without losing weights. A source checkpoint (`source_model_type`) converts: its
    context parameters are new. A CASAN one continues only with the structural options it was saved with, or
    its trained context would be dropped or re-initialised. `models_name` names the models in the error, `hint`
    ends it."""
    hub_kwargs = {
        key: requested[key]
        for key in ("cache_dir", "force_download", "local_files_only", "token", "revision", "subfolder")
        if key in requested
    }
    saved, _ = PreTrainedConfig.get_config_dict(name_or_path, **hub_kwargs)
    config = requested.get("config")
    if isinstance(config, PreTrainedConfig):
        requested = config.to_dict()
    model_type = saved.get("model_type")
    if model_type not in (source_model_type, config_class.model_type):
        raise ValueError(
            f"Checkpoint has model_type {model_type!r}; {models_name} load {source_model_type!r} or "
            f"{config_class.model_type!r} checkpoints.{hint}"
        )
    if model_type == config_class.model_type:
        defaults = config_class()
        for name in STRUCTURAL_OPTIONS:
            if name not in requested:
                continue
            wanted = getattr(config_class(**{name: requested[name]}), name)
            have = saved.get(name, getattr(defaults, name))
            if wanted != have:
                raise ValueError(
                    f"This CASAN checkpoint was trained with {name}={have!r}; it cannot be loaded with "
                    f"{name}={wanted!r} (its context parameters would be dropped or re-initialised). Load it "
                    f"without `{name}`, or convert the original {source_model_type} checkpoint instead."
                )
    return saved


SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"


def safetensors_shapes(path):
    """`{tensor name: shape}` from the header of a safetensors file, read without loading it (the format: an
    8-byte little-endian header length, a JSON header giving each tensor's byte range, then the bytes). A file
    cut short or damaged is a ValueError naming it, where the safetensors reader says only "incomplete metadata"."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        if size < 8 or 8 + length > size:
            raise ValueError(f"{path} is cut short ({size} bytes, not even its header): save or download it again.")
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            raise ValueError(f"{path} is damaged: its header is not valid JSON. Save or download it again.") from None
    tensors = {name: entry for name, entry in header.items() if name != "__metadata__"}
    needed = 8 + length + max((entry["data_offsets"][1] for entry in tensors.values()), default=0)
    if needed != size:
        raise ValueError(
            f"{path} is {'cut short' if needed > size else 'damaged'}: its header lists {needed} bytes of "
            f"tensors, the file has {size}. Save or download it again."
        )
    return {name: tuple(entry["shape"]) for name, entry in tensors.items()}


def check_saved_weights(folder, model_class, saved):
    """Refuses, with a ValueError naming the file, a local checkpoint folder whose safetensors weights are cut
    short or damaged, or (for a CASAN checkpoint) whose config's context options do not fit the shapes of its
    context weights (an edited config.json, or one that belongs to other weights): transformers would stop with a
    table, or with `ignore_mismatched_sizes` re-initialise the trained context without a word. `saved` is the
    folder's config dict; the expected shapes are those of `model_class` built from it on the meta device."""
    index = os.path.join(folder, SAFETENSORS_INDEX_NAME)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            files = sorted(set(json.load(handle)["weight_map"].values()))
    elif os.path.isfile(os.path.join(folder, SAFETENSORS_NAME)):
        files = [SAFETENSORS_NAME]
    else:
        return  # no safetensors here: transformers says what it finds or misses
    shapes = {}
    for name in files:
        shapes.update(safetensors_shapes(os.path.join(folder, name)))
    if saved.get("model_type") != model_class.config_class.model_type:
        return  # a source checkpoint: its context is new
    with torch.device("meta"):
        model = model_class(model_class.config_class.from_dict(saved))
    prefix = f"{model_class.base_model_prefix}."

    def context_shapes(named_shapes):
        return {name.removeprefix(prefix): shape for name, shape in named_shapes if ".context_mixer." in name}

    expected = context_shapes((name, tuple(p.shape)) for name, p in model.state_dict().items())
    found = context_shapes(shapes.items())
    for name in sorted(expected.keys() | found.keys()):
        if expected.get(name) != found.get(name):
            options = ", ".join(f"{option}={getattr(model.config, option)!r}" for option in STRUCTURAL_OPTIONS)
            have = "absent" if name not in found else "x".join(map(str, found[name]))
            want = "absent" if name not in expected else "x".join(map(str, expected[name]))
            raise ValueError(
                f"{os.path.join(folder, 'config.json')} does not fit {os.path.join(folder, files[0])}: {name} is "
                f"{have} in the weights but {want} for the config's context options ({options}); the config was "
                "edited, or belongs to other weights."
            )


def option_defaults():
    """`{option name: CasanConfig's default}`."""
    fields = {config_field.name: config_field for config_field in dataclasses.fields(CasanConfig)}
    return {
        option.name: fields[option.name].default_factory()
        if fields[option.name].default_factory is not dataclasses.MISSING
        else fields[option.name].default
        for option in OPTIONS
    }


def option_types():
    """`{option name: its type annotation in CasanConfig}`."""
    return {config_field.name: config_field.type for config_field in dataclasses.fields(CasanConfig)}


def _options_docstring():
    """The `Args:` entries of the CASAN options, in transformers' docstring style, from `OPTIONS`."""
    defaults, types = option_defaults(), option_types()
    entries = []
    for option in OPTIONS:
        annotation = types[option.name]
        type_name = annotation.__name__ if isinstance(annotation, type) else str(annotation)
        entries.append(f"        {option.name} (`{type_name}`, defaults to `{defaults[option.name]!r}`):")
        entries.append(f"            {option.help}")
    return "\n".join(entries)


CasanConfig.__doc__ += _options_docstring() + "\n"


__all__ = ["CasanConfig", "CasanElectraConfig", "CasanRobertaConfig", "CasanXLMRobertaConfig"]
