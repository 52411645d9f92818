"""casan-hf: context-aware self-attention (Yang et al., AAAI 2019) for Hugging Face BERT models.

Importing the package registers `casan_bert` with `AutoConfig` and the `AutoModel...` classes, so an
installed casan_hf needs no remote code; `save_pretrained` still writes the code files and an `auto_map`
so that anyone can load a saved folder with `trust_remote_code=True`.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration_casan import CONTEXT_TARGETS, CONTEXT_TYPES, GATE_KINDS, CasanConfig
from .modeling_casan import (
    CasanForMaskedLM,
    CasanForMultipleChoice,
    CasanForQuestionAnswering,
    CasanForSequenceClassification,
    CasanForTokenClassification,
    CasanModel,
    CasanPreTrainedModel,
)


__version__ = "0.1.0"

AUTO_CLASSES = {
    AutoModel: CasanModel,
    AutoModelForSequenceClassification: CasanForSequenceClassification,
    AutoModelForTokenClassification: CasanForTokenClassification,
    AutoModelForQuestionAnswering: CasanForQuestionAnswering,
    AutoModelForMultipleChoice: CasanForMultipleChoice,
    AutoModelForMaskedLM: CasanForMaskedLM,
}

AutoConfig.register(CasanConfig.model_type, CasanConfig, exist_ok=True)
CasanConfig.register_for_auto_class("AutoConfig")
for auto_class, model_class in AUTO_CLASSES.items():
    auto_class.register(CasanConfig, model_class, exist_ok=True)
    model_class.register_for_auto_class(auto_class.__name__)

__all__ = [
    "CONTEXT_TARGETS",
    "CONTEXT_TYPES",
    "GATE_KINDS",
    "CasanConfig",
    "CasanForMaskedLM",
    "CasanForMultipleChoice",
    "CasanForQuestionAnswering",
    "CasanForSequenceClassification",
    "CasanForTokenClassification",
    "CasanModel",
    "CasanPreTrainedModel",
]
