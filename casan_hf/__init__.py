"""casan-hf: context-aware self-attention (Yang et al., AAAI 2019) for Hugging Face BERT models.

The package's top folder holds the model files only: `configuration_casan.py`, `modeling_casan.py`,
`context.py`, `pooling.py` and `compat.py`, which `save_pretrained` copies next to the weights for
`trust_remote_code=True` (they import only torch, transformers and each other, and run on transformers 4.56
or later: what differs between 4.x and 5.x is in `compat.py`). The tools around a model
live in subpackages: `casan_hf.glue` (data and metrics), `casan_hf.hub` (the Hub folder and its card),
`casan_hf.cli` (the scripts' options), `casan_hf.training` (the context's learning rate, gate monitoring),
`casan_hf.inspection` (gates and attention of one text) and `casan_hf.benchmark` (speed and memory against
BERT).

Importing the package registers `casan_bert` with `AutoConfig` and the `AutoModel...` classes of `HEADS`,
so an installed casan_hf needs no remote code; `save_pretrained` still writes the code files and an
`auto_map` so that anyone can load a saved folder with `trust_remote_code=True`.
"""

import transformers

from . import modeling_casan
from .configuration_casan import CONTEXT_TARGETS, CONTEXT_TYPES, GATE_KINDS, HEADS, CasanConfig, get_head
from .modeling_casan import (
    CasanForMaskedLM,
    CasanForMultipleChoice,
    CasanForQuestionAnswering,
    CasanForSequenceClassification,
    CasanForTokenClassification,
    CasanModel,
    CasanPreTrainedModel,
    casan_twin,
)


__version__ = "0.1.0"

# Head name -> CASAN model class, for every row of `HEADS`.
HEAD_CLASSES = {head.name: getattr(modeling_casan, head.class_name) for head in HEADS}


def _register_auto_classes():
    transformers.AutoConfig.register(CasanConfig.model_type, CasanConfig, exist_ok=True)
    CasanConfig.register_for_auto_class("AutoConfig")
    for head in HEADS:
        getattr(transformers, head.auto_class).register(CasanConfig, HEAD_CLASSES[head.name], exist_ok=True)
        HEAD_CLASSES[head.name].register_for_auto_class(head.auto_class)


_register_auto_classes()

__all__ = [
    "CONTEXT_TARGETS",
    "CONTEXT_TYPES",
    "GATE_KINDS",
    "HEADS",
    "HEAD_CLASSES",
    "CasanConfig",
    "CasanForMaskedLM",
    "CasanForMultipleChoice",
    "CasanForQuestionAnswering",
    "CasanForSequenceClassification",
    "CasanForTokenClassification",
    "CasanModel",
    "CasanPreTrainedModel",
    "casan_twin",
    "get_head",
]
