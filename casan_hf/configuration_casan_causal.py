"""Configuration of context-aware self-attention in causal language models: `CasanLlamaConfig`, `CasanQwen2Config`,
`CasanQwen3Config` and `CasanGPT2Config`, each its family's transformers config with the context options of
`options.OPTIONS` on top (the group "context"; a causal LM pools no sentence vector, so the pooling options are not
its), so that every checkpoint's config of the family loads into it unchanged.

The options are declared once, in `CasanContextOptions`, from `CasanConfig`'s own fields (their names, types and
defaults), and checked by the same checks (`OPTION_CHECKS`) whenever they are set. What a causal model cannot do is
refused by name: the local bias, whose layer window and sentence length read the whole sentence, and the output gate,
which is not built for these families.
"""

import dataclasses

from transformers import GPT2Config, LlamaConfig, Qwen2Config, Qwen3Config

# Every model file the config needs is imported here directly: transformers 4.x copies a folder's code files only
# one relative import deep, and must reach `require_transformers` to say what it lacks.
from .compat import require_transformers
from .configuration_casan import CasanConfig, finish_family_config
from .context import CONTEXT_KINDS  # noqa: F401
from .families import CAUSAL_FAMILIES
from .options import OPTION_CHECKS, OPTIONS


# The causal families' layout of transformers 5.4 and later (`masking_utils`, the cache layers, the output capture,
# configs declared as dataclasses, which `CasanContextOptions` extends); older releases stop here, at the config, with
# the minimum named.
MINIMUM_TRANSFORMERS_CAUSAL = CAUSAL_FAMILIES[0].minimum_transformers
require_transformers(MINIMUM_TRANSFORMERS_CAUSAL, "CASAN causal language models")

# The options of a causal LM: the context group of `OPTIONS`.
CAUSAL_OPTIONS = tuple(option.name for option in OPTIONS if option.group == "context")
# The options that a causal model refuses to turn on, each with the value that leaves it off and why.
OFF_IN_CAUSAL_MODELS = {
    "local_bias": (
        None,
        "its window is predicted from the whole sentence's mean key and length, which a causal model must not read",
    ),
    "output_gate": (None, "the output gate is built for the encoders only"),
}


def refuse_encoder_options(names):
    """A ValueError naming the first of `names` that is a CASAN option a causal LM does not take (the pooling of an
    encoder's classifiers): wherever an option enters, the config and `from_pretrained`'s keyword arguments."""
    for name in names:
        if name in OPTION_CHECKS and name not in CAUSAL_OPTIONS:
            raise ValueError(
                f"`{name}` is an encoder's option (the sentence vector of its classifiers); a causal language model "
                "classifies its last real token and takes none of them."
            )


def _context_fields():
    """`CasanConfig`'s fields of the causal options, as (name, type, field) for `dataclasses.make_dataclass`."""
    fields = {config_field.name: config_field for config_field in dataclasses.fields(CasanConfig)}
    return [
        (
            name,
            fields[name].type,
            dataclasses.field(default=fields[name].default, default_factory=fields[name].default_factory),
        )
        for name in CAUSAL_OPTIONS
    ]


class _ContextOptionRules:
    """What every causal CASAN config does beside its fields: each option checked when it is set, the model type and
    `auto_map` its family's, and the options that depend on each other checked (`CasanConfig`'s rules, and
    `OFF_IN_CAUSAL_MODELS`). A conversion starts the context's gates at exactly 0 (`conversion_starts`, read by
    `converted_start`), so that a converted checkpoint gives its source's logits until it trains."""

    conversion_starts = {"context_start": "zero"}

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        finish_family_config(self)

    def __setattr__(self, name, value):
        refuse_encoder_options([name])
        check = OPTION_CHECKS.get(name)
        super().__setattr__(name, value if check is None else check(value))

    def check_context_options(self):
        for name, (off, why) in OFF_IN_CAUSAL_MODELS.items():
            if getattr(self, name) != off:
                raise ValueError(
                    f"`{name}`={getattr(self, name)!r} is refused in a causal language model: {why}. Leave it {off!r}."
                )
        CasanConfig.check_context_options(self)

    layer_has_context = CasanConfig.layer_has_context
    mixes_context = CasanConfig.mixes_context
    context_size = CasanConfig.context_size
    has_local_bias = CasanConfig.has_local_bias


CasanContextOptions = dataclasses.make_dataclass(
    "CasanContextOptions", _context_fields(), bases=(_ContextOptionRules,), init=False, repr=False, eq=False
)
CasanContextOptions.__doc__ = "The context options of a causal CASAN config, declared as `CasanConfig` declares them."
CasanContextOptions.__module__ = __name__


class CasanLlamaConfig(CasanContextOptions, LlamaConfig):
    r"""A [`LlamaConfig`] for context-aware self-attention; the context options are [`CasanConfig`]'s."""

    model_type = "casan_llama"


class CasanQwen2Config(CasanContextOptions, Qwen2Config):
    r"""A [`Qwen2Config`] for context-aware self-attention; the context options are [`CasanConfig`]'s."""

    model_type = "casan_qwen2"


class CasanQwen3Config(CasanContextOptions, Qwen3Config):
    r"""A [`Qwen3Config`] for context-aware self-attention; the context options are [`CasanConfig`]'s."""

    model_type = "casan_qwen3"


class CasanGPT2Config(CasanContextOptions, GPT2Config):
    r"""A [`GPT2Config`] for context-aware self-attention; the context options are [`CasanConfig`]'s."""

    model_type = "casan_gpt2"


__all__ = ["CasanGPT2Config", "CasanLlamaConfig", "CasanQwen2Config", "CasanQwen3Config"]
