"""Configuration of context-aware self-attention (CASAN) encoders: `CasanConfig` for BERT checkpoints and one
subclass per other family (`CasanRobertaConfig`, `CasanXLMRobertaConfig`, `CasanElectraConfig`), and the check
that a saved checkpoint fits the config it is loaded into (`checkpoint_config`).

`CasanConfig` is a `BertConfig` with the options of `options.OPTIONS` on top, so every BERT checkpoint's config
loads into it unchanged. Each option is checked whenever it is set (at construction, by `from_pretrained`
keyword arguments, which transformers sets after `__init__`, and from a loaded `config.json`), and the options
that depend on each other are checked again when a model is built from the config.
"""

import dataclasses
import json
import os
from dataclasses import field

import torch
from transformers import BertConfig

from .compat import PreTrainedConfig, dataclass_config
from .context import CONTEXT_KINDS, is_casan_parameter
from .families import get_family
from .options import CONTEXT_TARGETS, OPTION_CHECKS, OPTIONS, STRUCTURAL_OPTIONS


def set_checked(config, source_config_class, name, value):
    """Sets `name` on a CASAN config, through its option's check where it is an option, as the family's transformers
    config (`source_config_class`) sets attributes."""
    check = OPTION_CHECKS.get(name)
    source_config_class.__setattr__(config, name, value if check is None else check(value))


def finish_family_config(config):
    """What every family's CASAN config does once its fields are set: its class's model type wins over the one a
    converted config.json names ("bert", "roberta", ...), its `auto_map` is its family's, and the options that
    depend on each other are checked."""
    config.__dict__.pop("model_type", None)
    config.auto_map = get_family(config.model_type).auto_map()
    config.check_context_options()


def check_local_bias_reads_its_options(config):
    """Refuses what of `config`'s local bias (any family's CASAN config) would do nothing, without a word: a bias that
    reaches no layer (`local_layers` None, the lower half, of a one-layer model), and a `local_window` or
    `local_bias_start` other than its default that the chosen bias never reads."""
    if config.local_bias is not None and not any(map(config.has_local_bias, range(config.num_hidden_layers))):
        raise ValueError(
            f"local_bias={config.local_bias!r} reaches no layer: `local_layers` None means the lower half "
            f"(layers 0 .. L/2 - 1), and the model has {config.num_hidden_layers} layer(s); name its layers with "
            "`local_layers` (e.g. [0])."
        )
    defaults = option_defaults()
    unread = {
        "local_window": (config.local_bias != "fixed", "only local_bias='fixed' reads a window"),
        "local_bias_start": (config.local_bias is None, "the bias is off"),
    }
    for name, (never_read, why) in unread.items():
        value = getattr(config, name)
        if never_read and value != defaults[name]:
            raise ValueError(
                f"`{name}` {value!r} has no effect with local_bias={config.local_bias!r} ({why}): leave it at "
                f"its default {defaults[name]!r}, or choose a local bias that reads it."
            )


@dataclass_config
class CasanConfig(BertConfig):
    r"""
    A [`BertConfig`] for context-aware self-attention (Yang et al., AAAI 2019). All BERT fields keep their
    meaning; the fields below choose the context and the sentence vector of the classification heads.

    Args:
    """

    model_type = "casan_bert"
    # FSDP2 (`from_pretrained(..., distributed_config=DistributedConfig(fsdp_size=N))`): each layer and the word
    # embeddings are groups of their own, gathered for their forward and freed after it. The rest (the other
    # embeddings, the pooler, the heads) is the root's group, gathered for the whole step; so is the word embedding
    # of a masked LM, whose decoder is tied to it (transformers drops its rule then).
    base_model_fsdp_plan = {"embeddings.word_embeddings": "free_full_weight", "encoder.layer.*": "free_full_weight"}

    context_type: str = "deep_global"
    context_targets: list[str] = field(default_factory=lambda: list(CONTEXT_TARGETS))
    context_layers: list[int] | None = None
    gate: str = "dynamic"
    fixed_gate: float = 0.1
    gate_bias_init: float = -4.0
    context_start: str = "gate"
    gate_per_head: bool = False
    context_rank: int | None = None
    context_init_range: float | None = None
    output_gate: str | None = None
    output_gate_context: bool = False
    output_gate_start: str = "half"
    local_bias: str | None = None
    local_layers: list[int] | None = None
    local_window: float = 10.0
    local_bias_start: str = "full"
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
        finish_family_config(self)

    def __setattr__(self, name, value):
        set_checked(self, BertConfig, name, value)

    def check_context_options(self):
        """Checks the options that depend on each other; models call it again before building."""
        if self.context_layers is not None:
            too_deep = [index for index in self.context_layers if index >= self.num_hidden_layers]
            if too_deep:
                raise ValueError(
                    f"`context_layers` {too_deep} out of range: the model has {self.num_hidden_layers} layers "
                    f"(allowed indices 0..{self.num_hidden_layers - 1})."
                )
        if self.gate_per_head and self.gate != "dynamic":
            raise ValueError(f"`gate_per_head` shapes the dynamic gate; gate={self.gate!r} has none to split.")
        gives_context = CONTEXT_KINDS[self.context_type].gives_context
        if self.context_rank is not None and not gives_context:
            raise ValueError(f"`context_rank` has no effect with context_type={self.context_type!r}; leave it None.")
        if self.context_start != "gate" and not gives_context:
            raise ValueError(
                f"`context_start`={self.context_start!r} starts a context, and context_type={self.context_type!r} "
                "has none: leave it 'gate'."
            )
        if self.output_gate_context and (self.output_gate is None or not gives_context):
            raise ValueError(
                "`output_gate_context` lets the context drive the output gate: it needs an `output_gate` "
                f"({self.output_gate!r}) and a context_type other than 'none' ({self.context_type!r})."
            )
        if self.local_layers is not None:
            if self.local_bias is None:
                raise ValueError(
                    f"`local_layers` {self.local_layers} chooses the layers of the local bias, which is off "
                    "(local_bias=None): set `local_bias`, or leave `local_layers` None."
                )
            too_deep = [index for index in self.local_layers if index >= self.num_hidden_layers]
            if too_deep:
                raise ValueError(
                    f"`local_layers` {too_deep} out of range: the model has {self.num_hidden_layers} layers "
                    f"(allowed indices 0..{self.num_hidden_layers - 1})."
                )
        check_local_bias_reads_its_options(self)
        if gives_context and not any(self.layer_has_context(layer) for layer in range(self.num_hidden_layers)):
            raise ValueError(
                f"context_type={self.context_type!r} gives no layer of this {self.num_hidden_layers}-layer model a "
                f"context (context_layers={self.context_layers}; `deep` reads only earlier layers, so its first layer "
                "takes none): it would add nothing. Choose layers that take one, another kind, or 'none'."
            )
        if not self.context_targets and gives_context and not self.output_gate_context:
            raise ValueError(
                f"context_targets=[] mixes the {self.context_type!r} context into neither query nor key: name a "
                "target, or let it drive the output gate (`output_gate_context=True`), or set context_type='none'."
            )

    def mixes_context(self, layer_index):
        """Whether layer `layer_index` mixes its context into the query and/or key (a `CasanContextMixer`)."""
        return bool(self.context_targets) and self.layer_has_context(layer_index)

    def layer_has_context(self, layer_index):
        """Whether layer `layer_index` (0-based) takes context (into its query/key where `mixes_context`, into its
        output gate with `output_gate_context`): its kind reads some layer (deep's first layer has none before it,
        `none` reads none) and `context_layers` includes it."""
        if not CONTEXT_KINDS[self.context_type].reads(layer_index):
            return False
        return self.context_layers is None or layer_index in self.context_layers

    def has_local_bias(self, layer_index):
        """Whether layer `layer_index` (0-based) adds the local bias: `local_bias` is on and `local_layers` (None: the
        lower half) includes it."""
        if self.local_bias is None:
            return False
        layers = range(self.num_hidden_layers // 2) if self.local_layers is None else self.local_layers
        return layer_index in layers

    def context_size(self, layer_index):
        """d_c, the width of the context matrix C of layer `layer_index` (0-based)."""
        return CONTEXT_KINDS[self.context_type].width(layer_index) * self.hidden_size


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
            wanted = OPTION_CHECKS[name](requested[name])  # alone: an option may need others to be valid
            have = saved.get(name, getattr(defaults, name))
            if wanted != have:
                raise ValueError(
                    f"This CASAN checkpoint was trained with {name}={have!r}; it cannot be loaded with "
                    f"{name}={wanted!r} (its context parameters would be dropped or re-initialised). Load it "
                    f"without `{name}`, or convert the original {source_model_type} checkpoint instead."
                )
    return saved


# The starts that keep a converted checkpoint's outputs, by the option that asks for the module they start: an output
# gate at exactly 1, a local bias scaled by exactly 0.
EXACT_STARTS = {"output_gate": ("output_gate_start", "one"), "local_bias": ("local_bias_start", "zero")}


def converted_start(kwargs, saved, config_class):
    """`from_pretrained`'s keyword arguments for a checkpoint whose `saved` config is a source family's (a
    conversion): each module it asks for that has an exact start (`EXACT_STARTS`: an output gate, a local bias)
    starts there unless the caller chose a start, and so does a context where the config class asks for it
    (`conversion_starts`: a causal LM's), so that the converted model gives the source's outputs. A `config` passed
    whole is taken as it is."""
    converting = saved.get("model_type") != config_class.model_type and "config" not in kwargs
    if not converting:
        return kwargs
    starts = exact_starts(kwargs)
    # checked here, first: a mistyped kind would otherwise end in a bare KeyError before the config's own check
    context_type = OPTION_CHECKS["context_type"](kwargs.get("context_type", config_class().context_type))
    if CONTEXT_KINDS[context_type].gives_context:
        starts.update(getattr(config_class, "conversion_starts", {}))
    return {**starts, **kwargs}


def exact_starts(options):
    """`{start option: exact start}` of each module that `options` ask for and that has one (`EXACT_STARTS`)."""
    return dict(start for option, start in EXACT_STARTS.items() if options.get(option) is not None)


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


# The options that shape a head's weights (the pooling's, and the width of what reads the sentence vector).
HEAD_SHAPING_OPTIONS = ("classifier_pooling", "pooling_hops", "pooling_hidden", "num_labels")


def check_saved_weights(folder, model_class, saved, ignore_mismatched_sizes=False):
    """Refuses, with a ValueError naming the file, a local checkpoint folder whose safetensors weights are cut
    short or damaged, or (for a CASAN checkpoint) whose context weights have other shapes than its config's
    context options give, or whose head weights other shapes than its pooling options and label count give (an
    edited config.json, or one that belongs to other weights): transformers would stop with a table, or with
    `ignore_mismatched_sizes` re-initialise the trained context without a word. That flag still re-initialises a
    head of other shapes, as it is meant to (a classifier for another label count). A weight the file lacks, or
    that the config has no place for, is left to transformers, which loads the rest and reports it as a missing or
    unexpected key, as for any model. `saved` is the folder's config dict; the expected shapes are those of
    `model_class` built from it on the meta device."""
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

    def is_head_weight(name):
        return not name.startswith(prefix) and not is_casan_parameter(name)

    # Which weights each group of options shapes, and what the error calls them.
    shaped_by = [(is_casan_parameter, STRUCTURAL_OPTIONS, "context options")]
    if hasattr(model, "pooling") and not ignore_mismatched_sizes:  # a head that pools a sentence vector
        shaped_by.append((is_head_weight, HEAD_SHAPING_OPTIONS, "pooling options and label count"))
    expected = {name.removeprefix(prefix): tuple(p.shape) for name, p in model.state_dict().items()}
    found = {name.removeprefix(prefix): shape for name, shape in shapes.items()}
    for shaped, option_names, what in shaped_by:
        for name in sorted(name for name in expected.keys() & found.keys() if shaped(name)):
            if expected[name] != found[name]:
                options = ", ".join(f"{option}={getattr(model.config, option)!r}" for option in option_names)
                have, want = ("x".join(map(str, shape)) for shape in (found[name], expected[name]))
                raise ValueError(
                    f"{os.path.join(folder, 'config.json')} does not fit {os.path.join(folder, files[0])}: {name} "
                    f"is {have} in the weights but {want} for the config's {what} ({options}); the config was "
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
        entries.append(f"            {option.documentation}")
    return "\n".join(entries)


CasanConfig.__doc__ = CasanConfig.__doc__.rstrip(" ") + _options_docstring() + "\n"  # the entries under its "Args:"


__all__ = ["CasanConfig", "CasanElectraConfig", "CasanRobertaConfig", "CasanXLMRobertaConfig"]
