"""Configuration of context-aware self-attention in ModernBERT: `CasanModernBertConfig`, a `ModernBertConfig` with the
CASAN options of `options.OPTIONS` on top (context and pooling), so every ModernBERT checkpoint's config loads into
it unchanged.

The options are declared as `CasanConfig` declares them (names, types, defaults; tests/test_modernbert.py holds
the two equal) and checked by the same checks (`OPTION_CHECKS`, `CasanConfig.check_context_options`). One field is
both ModernBERT's and CASAN's: `classifier_pooling`. ModernBERT's "cls" (the first token) and "mean" (the masked
mean of the last layer) are CASAN's "cls" and "mean", with the same meaning in every head; CASAN adds
"structured" and "generalized" (casan_hf/pooling.py), which ModernBERT's own type (`Literal["cls", "mean"]`)
would refuse, so this config checks the field with CASAN's check instead.
"""

import dataclasses

from transformers import ModernBertConfig

# Every model file the config needs is imported here directly: transformers 4.x copies a folder's code files only
# one relative import deep, and must reach `require_transformers` to say what it lacks.
from .compat import require_transformers
from .configuration_casan import CasanConfig, finish_family_config, set_checked
from .context import CONTEXT_TARGETS
from .families import get_family
from .options import OPTIONS  # noqa: F401


# ModernBERT's layout of transformers 5.2 and later: per-layer-type rotary embeddings (`layer_types`,
# `rope_parameters`), bidirectional sliding-window masks from `masking_utils`, no unpadding, and the output capture
# of `transformers.utils.output_capturing`. transformers 4.x and 5.0-5.1 have another ModernBERT (unpadded inputs,
# `global_rope_theta`): their folders stop here, at the config, with the minimum named.
MINIMUM_TRANSFORMERS_MODERNBERT = get_family("modernbert").minimum_transformers
require_transformers(MINIMUM_TRANSFORMERS_MODERNBERT, "CasanModernBert models")


class CasanModernBertConfig(ModernBertConfig):
    r"""
    A [`ModernBertConfig`] for context-aware self-attention (Yang et al., AAAI 2019). All ModernBERT fields keep
    their meaning; the CASAN options (context and pooling) are [`CasanConfig`]'s, with its defaults and checks.
    `classifier_pooling` is ModernBERT's field, extended: "cls" and "mean" as in ModernBERT, "structured" and
    "generalized" as in [`CasanConfig`].
    """

    model_type = "casan_modernbert"
    # FSDP2: each layer and the token embeddings are groups of their own; the rest (the embedding norm, the final
    # norm, the heads) is the root's group, as is the token embedding of a masked LM, whose decoder is tied to it.
    base_model_fsdp_plan = {"embeddings.tok_embeddings": "free_full_weight", "layers.*": "free_full_weight"}
    # ModernBERT's field types are checked on every assignment (transformers >= 5.4); `classifier_pooling` takes
    # CASAN's values, which `OPTION_CHECKS` checks in `__setattr__`, so ModernBERT's `Literal` check is dropped.
    __validators__ = {**getattr(ModernBertConfig, "__validators__", {}), "classifier_pooling": []}

    # The CASAN options, as `CasanConfig` declares them (tests/test_modernbert.py holds the two equal).
    context_type: str = "deep_global"
    context_targets: list[str] = dataclasses.field(default_factory=lambda: list(CONTEXT_TARGETS))
    context_layers: list[int] | None = None
    gate: str = "dynamic"
    fixed_gate: float = 0.1
    gate_bias_init: float = -4.0
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
        super().__post_init__(**kwargs)
        finish_family_config(self)

    def __setattr__(self, name, value):
        set_checked(self, ModernBertConfig, name, value)

    # `CasanConfig`'s checks of the options that depend on each other, and its rules for which layers take
    # context and how wide it is.
    check_context_options = CasanConfig.check_context_options
    layer_has_context = CasanConfig.layer_has_context
    mixes_context = CasanConfig.mixes_context
    context_size = CasanConfig.context_size
    has_local_bias = CasanConfig.has_local_bias


__all__ = ["CasanModernBertConfig"]
