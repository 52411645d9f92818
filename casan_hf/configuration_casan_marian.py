"""Configuration of the context-aware encoder-decoder (CASAN in the encoder of a Marian translation model).

`CasanMarianConfig` is a `MarianConfig` with the *context* options of `options.OPTIONS` on top: the same names,
types, defaults and checks as `CasanConfig`. The fields are written out here as `CasanConfig` writes them (a reader,
an IDE and transformers' dataclass machinery see them; none is made at import), and
tests/test_translation_model.py holds them equal to `CasanConfig`'s, name, type and default; the checks are
`OPTION_CHECKS`, shared. The *pooling* options shape a sentence vector for classification, which a translation
model does not have: setting one is an error.
"""

import dataclasses

from transformers import MarianConfig

from .compat import require_transformers
from .configuration_casan import CasanConfig, set_checked
from .options import CONTEXT_TARGETS, option_names


# The translation model builds on transformers 5's Marian (its masking and output-capturing utilities): on 4.x
# its folders stop here, at the config, with the minimum named, rather than at an import deep in the model file.
MINIMUM_TRANSFORMERS_MARIAN = "5.0"
require_transformers(MINIMUM_TRANSFORMERS_MARIAN, "CasanMarian translation models")

CONTEXT_OPTIONS = option_names("context")
POOLING_OPTIONS = option_names("pooling")

# Every class a saved folder can be loaded as with `trust_remote_code=True`.
AUTO_MAP = {
    "AutoConfig": "configuration_casan_marian.CasanMarianConfig",
    "AutoModel": "modeling_casan_marian.CasanMarianModel",
    "AutoModelForSeq2SeqLM": "modeling_casan_marian.CasanMarianMTModel",
}


class CasanMarianConfig(MarianConfig):
    r"""
    A [`MarianConfig`] whose encoder self-attention is context-aware (Yang et al., AAAI 2019). All Marian fields
    keep their meaning; the context options (`context_type`, `context_targets`, `context_layers`, `gate`,
    `fixed_gate`, `gate_bias_init`, `gate_per_head`, `context_rank`, `context_init_range` and the output gate's)
    are [`CasanConfig`]'s, with its defaults and checks, and apply to the encoder's layers (`context_layers`
    indexes `encoder_layers`). The
    decoder and the cross-attention are Marian's. `share_encoder_decoder_embeddings` must stay True (one joint
    vocabulary), and `encoder_layerdrop` 0 (a skipped layer would leave a hole in the deep context).
    """

    model_type = "casan_marian"
    # FSDP2: the encoder, the decoder and their model each merge this plan as their own, so it is empty here and
    # `CasanMarianModel._fsdp_plan` names the layers.
    base_model_fsdp_plan = {}

    # The context options, as `CasanConfig` declares them (tests/test_translation_model.py holds the two equal).
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

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        # A converted Marian config.json says model_type "marian"; the class attribute must win.
        self.__dict__.pop("model_type", None)
        self.auto_map = dict(AUTO_MAP)
        self.check_context_options()

    def __setattr__(self, name, value):
        if name in POOLING_OPTIONS:
            raise ValueError(
                f"`{name}` is a pooling option of the BERT classification heads; a translation model has no "
                f"sentence vector to pool. CasanMarianConfig takes the context options: {', '.join(CONTEXT_OPTIONS)}."
            )
        set_checked(self, MarianConfig, name, value)

    def check_context_options(self):
        """`CasanConfig`'s checks of the options that depend on each other (on the encoder's layers), and the two
        Marian settings the context encoder does not support."""
        CasanConfig.check_context_options(self)
        if not self.share_encoder_decoder_embeddings:
            raise ValueError(
                "CasanMarianConfig needs share_encoder_decoder_embeddings=True (one joint vocabulary); got False."
            )
        if self.encoder_layerdrop:
            raise ValueError(
                f"`encoder_layerdrop` must be 0 for a context-aware encoder; got {self.encoder_layerdrop}."
            )

    # Which encoder layers take context, and how wide it is: `CasanConfig`'s rules, read through the attribute
    # map (`num_hidden_layers` is `encoder_layers`, `hidden_size` is `d_model`).
    layer_has_context = CasanConfig.layer_has_context
    mixes_context = CasanConfig.mixes_context
    context_size = CasanConfig.context_size
    has_local_bias = CasanConfig.has_local_bias


__all__ = ["CasanMarianConfig"]
