"""casan-hf: context-aware self-attention (Yang et al., AAAI 2019) for Hugging Face encoders of six families (BERT,
RoBERTa, XLM-RoBERTa, ELECTRA, ModernBERT, DeBERTa-v2/v3), causal language models of four (Llama, Qwen2, Qwen3,
GPT-2) and a Marian-layout translation model.

The package's top folder holds the model files only, which `save_pretrained` copies next to the weights for
`trust_remote_code=True`: `options.py` (the option table), `families.py` (the head and family tables),
`configuration_casan*.py` (each family's config), `modeling_casan.py` (what every family's classes share, and the
BERT-style families' classes), `modeling_casan_modernbert.py`, `modeling_casan_deberta_v2.py`,
`modeling_casan_causal.py` (the causal LMs), `context.py`, `context_mixer.py`, `local_bias.py`, `fused_mixer.py`,
`pooling.py` and `compat.py`, and the translation model's `configuration_casan_marian.py` and
`modeling_casan_marian.py`. They import only torch, transformers, each other and, inside a try, Triton for the GPU
kernels of `fused_mixer.py`; encoder folders run on transformers 4.56 or later (ModernBERT's on 5.2, the causal LMs'
on 5.4, the translation model's on 5): what differs between 4.x and 5.x is in `compat.py`. `modeling_casan_auto.py`
gathers every file's classes; no model class imports it. The tools around a model live in subpackages:
`casan_hf.glue` (data and metrics), `casan_hf.translation` (parallel data, the joint tokenizer, size presets, BLEU
and chrF), `casan_hf.hub` (the Hub folder and its model card), `casan_hf.cli` (what the scripts share),
`casan_hf.training` (the context's learning rate, gate monitoring, preemption), `casan_hf.studies` (grids of runs,
arms, paired comparisons with the twin), `casan_hf.inspection` (gates and attention of one text),
`casan_hf.explorer` (the browser explorer, with Gradio) and `casan_hf.benchmark` (speed and memory against each
family's source model).

Importing the package registers each family's CASAN model type (`casan_bert`, `casan_roberta`,
`casan_xlm-roberta`, `casan_electra`, `casan_modernbert`, `casan_deberta-v2`) with `AutoConfig` and the
`AutoModel...` classes of `HEADS`, and `casan_marian` with `AutoConfig`, `AutoModel` and `AutoModelForSeq2SeqLM`,
so an installed casan_hf needs no remote code; `save_pretrained` still writes the code files and an `auto_map` so
that anyone can load a saved folder with `trust_remote_code=True`.
"""

import transformers

from .configuration_casan import (
    CasanConfig,
    CasanElectraConfig,
    CasanRobertaConfig,
    CasanXLMRobertaConfig,
)
from .configuration_casan_causal import CasanGPT2Config, CasanLlamaConfig, CasanQwen2Config, CasanQwen3Config
from .configuration_casan_deberta_v2 import CasanDebertaV2Config
from .configuration_casan_marian import CasanMarianConfig
from .configuration_casan_modernbert import CasanModernBertConfig
from .context import CONTEXT_KINDS
from .families import CAUSAL_FAMILIES, CAUSAL_HEADS, FAMILIES, HEADS, get_family, get_head
from .modeling_casan import (
    CasanForMaskedLM,
    CasanForMultipleChoice,
    CasanForQuestionAnswering,
    CasanForSequenceClassification,
    CasanForTokenClassification,
    CasanModel,
    CasanPreTrainedModel,
)
from .modeling_casan_auto import FAMILY_CONFIGS, HEAD_CLASSES, MODEL_CLASSES, casan_class, casan_twin
from .modeling_casan_causal import (
    CasanCache,
    CasanGPT2ForCausalLM,
    CasanGPT2ForSequenceClassification,
    CasanLlamaForCausalLM,
    CasanLlamaForSequenceClassification,
    CasanQwen2ForCausalLM,
    CasanQwen2ForSequenceClassification,
    CasanQwen3ForCausalLM,
    CasanQwen3ForSequenceClassification,
)
from .modeling_casan_deberta_v2 import (
    CasanDebertaV2ForMaskedLM,
    CasanDebertaV2ForMultipleChoice,
    CasanDebertaV2ForQuestionAnswering,
    CasanDebertaV2ForSequenceClassification,
    CasanDebertaV2ForTokenClassification,
    CasanDebertaV2Model,
)
from .modeling_casan_marian import CasanMarianModel, CasanMarianMTModel
from .modeling_casan_modernbert import (
    CasanModernBertForMaskedLM,
    CasanModernBertForMultipleChoice,
    CasanModernBertForQuestionAnswering,
    CasanModernBertForSequenceClassification,
    CasanModernBertForTokenClassification,
    CasanModernBertModel,
)
from .options import CONTEXT_TARGETS, GATE_KINDS


__version__ = "0.1.0"


def _register_auto_classes():
    """Each config class with `AutoConfig` and each model class with its auto class, here and in saved `auto_map`s:
    every family x head of the tables, then the translation model (an encoder-decoder, outside `HEADS`)."""
    registrations = [
        (FAMILY_CONFIGS[family.name], head.auto_class, MODEL_CLASSES[(family.name, head.name)])
        for family in (*FAMILIES, *CAUSAL_FAMILIES)
        for head in family.heads
    ]
    registrations += [(CasanMarianConfig, "AutoModel", CasanMarianModel)]
    registrations += [(CasanMarianConfig, "AutoModelForSeq2SeqLM", CasanMarianMTModel)]
    for config_class, auto_class, model_class in registrations:
        transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        config_class.register_for_auto_class("AutoConfig")
        getattr(transformers, auto_class).register(config_class, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_class)


_register_auto_classes()

__all__ = [
    "CAUSAL_FAMILIES",
    "CAUSAL_HEADS",
    "CONTEXT_KINDS",
    "CasanCache",
    "CasanGPT2Config",
    "CasanGPT2ForCausalLM",
    "CasanGPT2ForSequenceClassification",
    "CasanLlamaConfig",
    "CasanLlamaForCausalLM",
    "CasanLlamaForSequenceClassification",
    "CasanQwen2Config",
    "CasanQwen2ForCausalLM",
    "CasanQwen2ForSequenceClassification",
    "CasanQwen3Config",
    "CasanQwen3ForCausalLM",
    "CasanQwen3ForSequenceClassification",
    "CONTEXT_TARGETS",
    "GATE_KINDS",
    "HEADS",
    "FAMILIES",
    "FAMILY_CONFIGS",
    "HEAD_CLASSES",
    "MODEL_CLASSES",
    "CasanConfig",
    "CasanDebertaV2Config",
    "CasanDebertaV2ForMaskedLM",
    "CasanDebertaV2ForMultipleChoice",
    "CasanDebertaV2ForQuestionAnswering",
    "CasanDebertaV2ForSequenceClassification",
    "CasanDebertaV2ForTokenClassification",
    "CasanDebertaV2Model",
    "CasanElectraConfig",
    "CasanRobertaConfig",
    "CasanXLMRobertaConfig",
    "CasanForMaskedLM",
    "CasanForMultipleChoice",
    "CasanForQuestionAnswering",
    "CasanForSequenceClassification",
    "CasanForTokenClassification",
    "CasanMarianConfig",
    "CasanMarianModel",
    "CasanMarianMTModel",
    "CasanModernBertConfig",
    "CasanModernBertForMaskedLM",
    "CasanModernBertForMultipleChoice",
    "CasanModernBertForQuestionAnswering",
    "CasanModernBertForSequenceClassification",
    "CasanModernBertForTokenClassification",
    "CasanModernBertModel",
    "CasanModel",
    "CasanPreTrainedModel",
    "casan_class",
    "casan_twin",
    "get_family",
    "get_head",
]
