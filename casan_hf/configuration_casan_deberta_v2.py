"""Configuration of context-aware self-attention for DeBERTa-v2 and DeBERTa-v3 checkpoints (both say
`model_type` "deberta-v2").

`CasanDebertaV2Config` is a `DebertaV2Config` with every CASAN option of `options.OPTIONS` (the context and the
sentence vector of the classification heads), so a DeBERTa config.json loads into it unchanged. The options
have `CasanConfig`'s names, types, defaults and checks (tests/test_deberta_v2.py holds the fields equal), and
the rules that depend on the layers (`layer_has_context`, `mixes_context`, `context_size`) are `CasanConfig`'s
own functions.
"""

import dataclasses

from transformers import DebertaV2Config

from .compat import dataclass_config
from .configuration_casan import CasanConfig, finish_family_config, set_checked

# transformers 4.x copies, out of a local folder, only the files a remote-code file imports itself: every model
# file that configuration_casan.py imports is imported here too (CONTEXT_TARGETS from its home, context.py).
from .context import CONTEXT_TARGETS
from .families import FAMILIES  # noqa: F401
from .options import OPTIONS  # noqa: F401


@dataclass_config
class CasanDebertaV2Config(DebertaV2Config):
    r"""
    A [`DebertaV2Config`] for context-aware self-attention (Yang et al., AAAI 2019). All DeBERTa fields keep
    their meaning (`relative_attention`, `pos_att_type`, `share_att_key`, `position_buckets`, `norm_rel_ebd`,
    the convolution after the first layer, `legacy` for the masked-LM head); the CASAN options are
    [`CasanConfig`]'s. `classifier_pooling="cls"` is DeBERTa's own sentence vector (its `ContextPooler` on the
    first token); the other poolings give the vector that the pooler's dense layer reads instead.
    """

    model_type = "casan_deberta-v2"
    # FSDP2: as `CasanConfig`'s, each layer and the word embeddings are groups of their own; the rest (the other
    # embeddings, the relative position embeddings, the convolution, the heads) is the root's group.
    base_model_fsdp_plan = {"embeddings.word_embeddings": "free_full_weight", "encoder.layer.*": "free_full_weight"}

    # The CASAN options, as `CasanConfig` declares them.
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
        if hasattr(DebertaV2Config, "__post_init__"):  # transformers 4.x configs have none: see `dataclass_config`
            super().__post_init__(**kwargs)
        finish_family_config(self)

    def __setattr__(self, name, value):
        set_checked(self, DebertaV2Config, name, value)

    # The checks of options that depend on each other, which layers take context and how wide it is: `CasanConfig`'s.
    check_context_options = CasanConfig.check_context_options
    layer_has_context = CasanConfig.layer_has_context
    mixes_context = CasanConfig.mixes_context
    context_size = CasanConfig.context_size
    has_local_bias = CasanConfig.has_local_bias


__all__ = ["CasanDebertaV2Config"]
