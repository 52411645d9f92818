"""Context-aware self-attention encoders (Yang et al., AAAI 2019): what every family's classes share, and the
BERT-style families' classes, in the layout of `transformers`' BERT, RoBERTa, XLM-RoBERTa and ELECTRA models.

What every family shares, written once: `CasanPreTrainedModel` (loading, checks, the context's initialisation),
the `ModelOutput`s, and one mixin per row of `HEADS` holding that head's `forward` (`CasanEncoderMixin` for the base
model, `CasanSequenceClassificationMixin`, ...). Every family's classes, here and in `modeling_casan_modernbert.py`
and `modeling_casan_deberta_v2.py`, are written out over their head's mixin and hold only what differs: their
modules and the hooks the mixin names.

The BERT-style families share one encoder (their layers are BERT's) and differ in embeddings, pooler and heads,
which are imported from `transformers` rather than copied and named once per family by its `PreTrainedModel`'s
`family_modules`. Every submodule keeps its family's name (`roberta.embeddings`,
`roberta.encoder.layer.N.attention.self.query`, `classifier.out_proj`, ...), so any checkpoint of the family loads
unchanged and only the context parameters (`...attention.self.context_mixer.*`) are new. BERT's classes come first
(`CasanModel`, `CasanForSequenceClassification`, ...), then each other family's, in the order of `FAMILIES` x
`HEADS`: a `PreTrainedModel` that names the family's config, prefix and modules, and one small subclass per head
(`CasanRobertaForSequenceClassification`, ...). `FAMILY_CLASSES` lists them all.
"""

import contextvars
import logging
import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import PreTrainedModel
from transformers.models.bert.modeling_bert import (
    BertEmbeddings,
    BertIntermediate,
    BertLMPredictionHead,
    BertOnlyMLMHead,
    BertOutput,
    BertPooler,
    BertSelfOutput,
)
from transformers.models.electra.modeling_electra import (
    ElectraClassificationHead,
    ElectraEmbeddings,
    ElectraGeneratorPredictions,
    ElectraSequenceSummary,
)
from transformers.models.roberta.modeling_roberta import (
    RobertaClassificationHead,
    RobertaEmbeddings,
    RobertaLMHead,
    RobertaPooler,
)
from transformers.models.xlm_roberta.modeling_xlm_roberta import (
    XLMRobertaClassificationHead,
    XLMRobertaEmbeddings,
    XLMRobertaLMHead,
    XLMRobertaPooler,
)
from transformers.processing_utils import Unpack
from transformers.pytorch_utils import apply_chunking_to_forward
from transformers.utils import TransformersKwargs
from transformers.utils.generic import can_return_tuple

from .compat import (
    FullyShardedLoading,
    OutputRecorder,
    capture_outputs,
    create_bidirectional_mask,
    init,
    merge_with_config_defaults,
)
from .configuration_casan import (
    CasanConfig,
    CasanElectraConfig,
    CasanRobertaConfig,
    CasanXLMRobertaConfig,
    check_saved_weights,
    checkpoint_config,
    converted_start,
)
from .context import (
    CONTEXT_MIXER_MODULE,
    ContextPlan,
    check_encoder_inputs,
    is_casan_parameter,
    run_layers_with_context,
)
from .context_mixer import (
    CasanContextMixer,
    CasanOutputGate,
    attention_head_dim,
    layer_context_mixer,
    output_gate,
    self_attention_with_context,
)
from .families import FAMILIES, get_family, get_head

# transformers before 5.10 (4.x, and 5.x up to at least 5.5) copies to its module cache only the code files that a
# local folder's config and model files import themselves, not the files those import in turn: the mixer's kernels
# are imported here so that they travel (tests/test_remote_code.py).
from .fused_mixer import FusedMix  # noqa: F401
from .local_bias import CasanLocalBias, local_bias
from .pooling import SentencePooling


@dataclass(frozen=True)
class FamilyModules:
    """The modules a family's CASAN models take from transformers, so that its checkpoints load unchanged.

    `pooler` is None where the family has none (ELECTRA). `classification_head` is the dense head that
    RoBERTa-style sequence classifiers put on the first token, None where the classifier is one linear layer
    on the pooler (BERT). `choice_summary` is ELECTRA's multiple-choice summary, None where multiple choice
    reads the pooler. `lm_head` is the masked-LM head's first module.
    """

    embeddings: type
    pooler: type | None
    classification_head: type | None
    choice_summary: type | None
    lm_head: type

    @property
    def classifier_reads_pooler(self):
        """Whether the sequence classifier's `classifier_pooling="cls"` vector is the pooler's output (BERT's), rather
        than the first token, which a dense head of the family's own reads (RoBERTa's, ELECTRA's)."""
        return self.pooler is not None and self.classification_head is None

    @property
    def choices_read_pooler(self):
        """Whether multiple choice's `classifier_pooling="cls"` vector is the pooler's output (BERT's, RoBERTa's),
        rather than the first token, which a summary of the family's own reads (ELECTRA's)."""
        return self.pooler is not None and self.choice_summary is None


@dataclass
class CasanModelOutput(BaseModelOutputWithPoolingAndCrossAttentions):
    r"""
    context_gates (`tuple(torch.FloatTensor)`, returned with `output_context_gates=True`):
        One tensor per layer of shape `(batch_size, 2, sequence_length)`, or `(batch_size, 2, num_heads,
        sequence_length)` with `gate_per_head`: the query gate lambda_Q (channel 0) and the key gate lambda_K
        (channel 1) of every token (and head); 0 where that layer or target takes no context.
    head_gates (`tuple(torch.FloatTensor)`, returned with `output_head_gates=True`):
        With `output_gate`, one tensor per layer: the output gate of every token, `(batch_size, sequence_length,
        num_heads)` ("headwise") or `(batch_size, sequence_length, hidden_size)` ("elementwise").
    local_windows (`tuple(torch.FloatTensor)`, returned with `output_local_windows=True`):
        With `local_bias`, one tensor per layer that adds it, of shape `(batch_size, 2, num_heads, sequence_length)`:
        each query's centre P (channel 0) and window D (channel 1), in tokens among the real tokens.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanSequenceClassifierOutput(SequenceClassifierOutput):
    r"""
    pooling_attentions (`torch.FloatTensor` of shape `(batch_size, pooling_hops, sequence_length)`):
        The hops A of `classifier_pooling="structured"`, returned with `output_pooling_attentions=True`: each
        row sums to 1 over the real tokens and is 0 on padding.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None
    pooling_attentions: torch.FloatTensor | None = None


@dataclass
class CasanTokenClassifierOutput(TokenClassifierOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanMultipleChoiceOutput(MultipleChoiceModelOutput):
    r"""
    pooling_attentions (`torch.FloatTensor` of shape `(batch_size, num_choices, pooling_hops, sequence_length)`):
        As for sequence classification, per choice.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None
    pooling_attentions: torch.FloatTensor | None = None


@dataclass
class CasanMaskedLMOutput(MaskedLMOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None


class CasanSelfAttention(nn.Module):
    """BERT's self-attention (same `query`/`key`/`value` names, so BERT weights load) plus a context mixer."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.is_causal = False
        self.head_dim = attention_head_dim(config)
        self.scaling = self.head_dim**-0.5

        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.context_mixer = layer_context_mixer(config, layer_idx)
        self.output_gate = output_gate(config, layer_idx)
        self.local_bias = local_bias(config, layer_idx)

    def forward(self, hidden_states, attention_mask=None, context=(), **kwargs: Unpack[TransformersKwargs]):
        """Returns the attention output, the attention weights (eager only) and, with `output_context_gates`, the
        gates (`gates_shape`: channel 0 the query gate, channel 1 the key gate, 0 where that target gets no context;
        else None). `context` is the layer's `ContextPlan.layer_context`."""
        projections = (self.query, self.key, self.value)
        return self_attention_with_context(
            self, projections, hidden_states, attention_mask, context, self.dropout.p, **kwargs
        )


class CasanAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self = CasanSelfAttention(config, layer_idx)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask=None, context=(), **kwargs: Unpack[TransformersKwargs]):
        attention_output, _, _ = self.self(hidden_states, attention_mask, context, **kwargs)
        return self.output(attention_output, hidden_states)


class CasanLayer(GradientCheckpointingLayer):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.chunk_size_feed_forward = config.chunk_size_feed_forward
        self.seq_len_dim = 1
        self.attention = CasanAttention(config, layer_idx)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask=None, *context, **kwargs: Unpack[TransformersKwargs]):
        """`context`: the tensors of the layer's `layer_context`, positional so that checkpointing sees them."""
        attention_output = self.attention(hidden_states, attention_mask, context, **kwargs)
        if not self.chunk_size_feed_forward:  # transformers' helper inspects the function's signature at every call
            return self.feed_forward_chunk(attention_output)
        return apply_chunking_to_forward(
            self.feed_forward_chunk, self.chunk_size_feed_forward, self.seq_len_dim, attention_output
        )

    def feed_forward_chunk(self, attention_output):
        return self.output(self.intermediate(attention_output), attention_output)


class CasanEncoder(nn.Module):
    """BERT's encoder that also carries each layer's context: the layer inputs so far (deep) or their
    masked means (global, deep_global)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.context_plan = ContextPlan.from_config(config)
        self.layer = nn.ModuleList([CasanLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None, token_mask=None, **kwargs: Unpack[TransformersKwargs]):
        plan = self.context_plan
        return run_layers_with_context(plan, self.layer, hidden_states, attention_mask, token_mask, **kwargs)


def recorded_outputs(layer_class, attention_class):
    """transformers' output capture (`_can_record_outputs`) for a family's layers: the hidden states each layer
    returns, the attention weights and the context gates its attention returns (outputs 1 and 2), the output gates, the
    local bias's windows."""
    return {
        "hidden_states": layer_class,
        "attentions": OutputRecorder(attention_class, index=1),
        "context_gates": OutputRecorder(attention_class, index=2),
        "head_gates": OutputRecorder(CasanOutputGate, index=0),
        "local_windows": OutputRecorder(CasanLocalBias, index=0),
    }


logger = logging.getLogger(__name__)

# Set while `CasanPreTrainedModel.from_pretrained` converts a source checkpoint.
_CONVERTING = contextvars.ContextVar("casan_converting", default=False)


class _ExpectedWarnings(logging.Filter):
    """Drops what transformers logs about a load that is expected of it: that a config of the source's
    `model_type` makes a CASAN config (`model_type_change`: the two model types), and that a head the checkpoint
    has none of (an MLM head: neither its decoder's bias nor the bias it is tied to) "seems corrupted" (a pair
    outside the base model, `base_model_prefix`). Anything else passes."""

    def __init__(self, base_model_prefix, model_type_change=None):
        super().__init__()
        self.base = f"{base_model_prefix}."
        self.model_type_warning = (
            "You are using a model of type `{}` to instantiate a model of type `{}`".format(*model_type_change)
            if model_type_change
            else None
        )

    def filter(self, record):
        message = record.getMessage()
        if self.model_type_warning and message.startswith(self.model_type_warning):
            return False
        absent_pair = re.match(
            r"This checkpoint seem corrupted\. .* to tie (\S+) to (\S+), but both are absent", message
        )
        return not (absent_pair and not any(name.startswith(self.base) for name in absent_pair.groups()))


# The transformers loggers of what `_ExpectedWarnings` drops.
_LOADING_LOGGERS = ("transformers.configuration_utils", "transformers.modeling_utils")


@contextmanager
def expected_warnings_dropped(base_model_prefix, model_type_change=None):
    """A load under way whose expected warnings (`_ExpectedWarnings`) transformers does not print: a head the
    checkpoint lacks, and (`model_type_change`) a conversion's change of model type."""
    expected = _ExpectedWarnings(base_model_prefix, model_type_change)
    loggers = [logging.getLogger(name) for name in _LOADING_LOGGERS]
    for each in loggers:
        each.addFilter(expected)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(expected)


@contextmanager
def converting(source_type, casan_type, base_model_prefix):
    """A conversion from a `source_type` checkpoint under way: its expected keys
    (`_adjust_missing_and_unexpected_keys`) and warnings left out of transformers' reports."""
    token = _CONVERTING.set(True)
    try:
        with expected_warnings_dropped(base_model_prefix, (source_type, casan_type)):
            yield
    finally:
        _CONVERTING.reset(token)


def conversion_line(model, source_type, source):
    """One line on a converted checkpoint: the family, the context, the parameters CASAN added and their share,
    how they start, and whether the outputs then equal the source's."""
    config = model.config
    new = sum(parameter.numel() for name, parameter in model.named_parameters() if is_casan_parameter(name))
    total = model.num_parameters()
    starts, exact = [], True
    if any(CONTEXT_MIXER_MODULE in name for name, _ in model.named_parameters()):
        if config.context_start == "zero":
            starts.append("the context gates scaled by exactly 0")
        elif config.gate == "fixed":
            starts.append(f"the context gates fixed at {config.fixed_gate}")
            exact = exact and config.fixed_gate == 0
        else:
            gate = 1 / (1 + math.exp(-config.gate_bias_init))
            starts.append(f"the context gates at sigmoid({config.gate_bias_init}) = {gate:.3f}")
            exact = False
    if config.output_gate is not None:
        exact = exact and config.output_gate_start == "one"
        starts.append(
            "the output gate at exactly 1" if config.output_gate_start == "one" else "the output gate near 0.5"
        )
    if getattr(config, "local_bias", None) is not None:
        exact = exact and config.local_bias_start == "zero"
        starts.append(
            "the local bias scaled by exactly 0" if config.local_bias_start == "zero" else "the local bias in full"
        )
    outputs = (
        "so the model's outputs equal the source's until it trains"
        if exact
        else "so the model's outputs start near the source's, not equal to them"
    )
    begin = f", {' and '.join(starts)}" if starts else ""
    return (
        f"Converted the {source_type} checkpoint {source} to {type(model).__name__} ({config.context_type!r} "
        f"context): {new:,} new parameters ({100 * new / total:.2f}% of {total:,}){begin}, {outputs}."
    )


class CasanPreTrainedModel(FullyShardedLoading, PreTrainedModel):
    """Shared by every CASAN model; `family` says whose checkpoints it loads (BERT's here; each other family's
    `PreTrainedModel` sets its own, with its config class and base model prefix). Each head's class says
    which row of `HEADS` it is (`casan_head`)."""

    family = get_family("bert")
    # Whether the family's embeddings read token types (`token_type_ids`); a family without them refuses any.
    has_token_types = True
    # The modules the family takes from transformers; None for a family with layers of its own (its model file says).
    family_modules = FamilyModules(BertEmbeddings, BertPooler, None, None, BertOnlyMLMHead)
    config_class = CasanConfig
    config: CasanConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    _no_split_modules = ["BertEmbeddings", "CasanLayer"]
    _can_record_outputs = recorded_outputs(CasanLayer, CasanSelfAttention)

    @classmethod
    def _can_set_attn_implementation(cls):
        """`set_attn_implementation` works: the attention dispatches through `ALL_ATTENTION_FUNCTIONS` at every
        call. transformers' own check only searches this file's source, which holds no attention function."""
        return True

    def __init__(self, config, *inputs, **kwargs):
        if config.model_type != self.config_class.model_type:
            raise ValueError(
                f"{type(self).__name__} takes a {self.config_class.__name__} (model_type "
                f"{self.config_class.model_type!r}); got model_type {config.model_type!r}."
            )
        # A family whose config has no decoder fields (DeBERTa-v2) is an encoder by construction; a causal family's
        # model is a decoder (transformers' own generation tests set `is_decoder`), without cross-attention.
        is_decoder, cross_attention = (getattr(config, name, False) for name in ("is_decoder", "add_cross_attention"))
        got = f"(got is_decoder={is_decoder}, add_cross_attention={cross_attention})"
        if self.family.causal and cross_attention:
            raise ValueError(
                f"CASAN causal language models attend to their own tokens only: `add_cross_attention` "
                f"must be False {got}."
            )
        if not self.family.causal and (is_decoder or cross_attention):
            raise ValueError(
                f"CASAN encoders are bidirectional: `is_decoder` and `add_cross_attention` must be False {got}."
            )
        config.check_context_options()
        super().__init__(config, *inputs, **kwargs)

    _model_tags = None

    def check_adapter_has_a_base(self):
        """Refuses an adapter (PEFT) of a model that was converted, or built from a config, and never saved: it has
        no checkpoint, so its adapter names no base and `AutoPeftModel...from_pretrained` fails with a Hub error.
        The base must be a saved CASAN folder (the source checkpoint would reload as plain BERT without the
        context)."""
        if self.name_or_path == "" and any(
            hasattr(module, "base_layer") and hasattr(module, "active_adapters") for module in self.modules()
        ):
            raise ValueError(
                f"This {type(self).__name__} was converted and never saved, so an adapter of it has no base to "
                "reload from: save the CASAN model first (model.save_pretrained(folder)), load it with "
                "from_pretrained(folder), and train the adapter on that."
            )

    @property
    def model_tags(self):
        """transformers' tags for the Hub card. PEFT reads them first when it saves an adapter: the one point at
        which an adapter that would not reload can be stopped before it is written, so the check runs here."""
        self.check_adapter_has_a_base()
        return self._model_tags

    @model_tags.setter
    def model_tags(self, tags):
        self._model_tags = tags

    def build_base_model(self, config, add_pooling_layer):
        """The family's `CasanModel`, stored under the family's prefix (`bert`, `roberta`, `electra`) as in
        transformers, so that the checkpoints' weight names match."""
        base_model = FAMILY_CLASSES[(self.family.name, "base")](config, add_pooling_layer=add_pooling_layer)
        setattr(self, self.base_model_prefix, base_model)

    def builds_pooler(self, head_reads_pooler):
        """Whether the base model builds its family's pooler: only for `classifier_pooling="cls"`, and only for a head
        whose "cls" vector is the pooler's output (`head_reads_pooler`, a `FamilyModules` property)."""
        return self.config.classifier_pooling == "cls" and head_reads_pooler

    @torch.no_grad()
    def _init_weights(self, module):
        """The families' initialisation, plus the context parameters: U ~ N(0, context_init_range), the gate
        vectors too, and the gate bias at `gate_bias_init` so that a converted checkpoint starts near its source; the
        output gate's and the local bias's (`initialize`)."""
        super()._init_weights(module)
        modules = self.family_modules
        if isinstance(module, BertLMPredictionHead) or (
            modules is not None and isinstance(module, modules.lm_head) and hasattr(module, "bias")
        ):  # the masked-LM head's own bias (BERT's sits in its prediction head; ELECTRA's head has none)
            init.zeros_(module.bias)
        elif modules is not None and isinstance(module, modules.embeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)
        elif isinstance(module, (CasanContextMixer, CasanOutputGate, CasanLocalBias)):
            std = self.config.context_init_range
            std = self.config.initializer_range if std is None else std
            if isinstance(module, CasanContextMixer):
                module.initialize(std, self.config.gate_bias_init)
            else:
                module.initialize(std)

    def _initialize_weights(self, module, is_custom_code=False):
        """transformers' own, as it runs for its own classes. For a class defined outside transformers (5.x) it skips
        every module whose own parameters are all loaded, or which has none: ModernBERT's MLP and attention, GPT-2's,
        whose source `_init_weights` scales their output projection with depth, so that the weights `from_pretrained`
        fills in would lose that scaling. Every initialisation goes through transformers' `initialization`
        functions, which leave loaded tensors alone, so nothing loaded is overwritten. (transformers 4.x's takes the
        module alone.)"""
        super()._initialize_weights(module)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Loads a checkpoint of the class's family (converted: the context parameters are new) or a CASAN
        checkpoint of it (continued: its context options must not change, or its trained context would be
        dropped or replaced by random weights). The auto classes pass a ready `config`, so that is checked too.

        A converted model is a new model: like one built from a config, it has no checkpoint of its own until
        it is saved, so its `name_or_path` is empty rather than the source checkpoint's. What reloads a model
        from its `name_or_path` (a PEFT adapter records it as its base) must not get the plain source back."""
        saved = None
        if pretrained_model_name_or_path is not None:
            other_families = ", ".join(repr(family.name) for family in FAMILIES)
            hint = f" For another family ({other_families}) use its classes, or the auto classes."
            saved = checkpoint_config(
                pretrained_model_name_or_path,
                kwargs,
                cls.config_class,
                cls.family.name,
                f"CASAN {cls.family.name} models",
                hint,
            )
            folder = os.path.join(pretrained_model_name_or_path, kwargs.get("subfolder") or "")
            if os.path.isdir(folder):
                check_saved_weights(folder, cls, saved, kwargs.get("ignore_mismatched_sizes", False))
            kwargs = converted_start(kwargs, saved, cls.config_class)
        if saved is None or saved.get("model_type") == cls.family.model_type:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        with converting(saved["model_type"], cls.config_class.model_type, cls.base_model_prefix):
            loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        model.name_or_path = ""
        new_by_design = model.__dict__.pop("_missing_by_design", set())
        if isinstance(loaded, tuple):  # the loading info: every key the checkpoint lacked, the new ones too
            loaded[1]["missing_keys"] |= new_by_design
        logger.warning(conversion_line(model, saved["model_type"], pretrained_model_name_or_path))
        return loaded

    def _adjust_missing_and_unexpected_keys(self, *args, **kwargs):
        """transformers' own; while `from_pretrained` converts a source checkpoint (transformers 5, which passes the
        loading info alone), the parameters CASAN adds are taken out of the loading report's missing keys: they are
        new by design, and `conversion_line` says so in one line. `from_pretrained` gives them back in the loading
        info it returns."""
        adjusted = super()._adjust_missing_and_unexpected_keys(*args, **kwargs)
        if _CONVERTING.get() and len(args) == 1 and not kwargs:
            (info,) = args
            self._missing_by_design = {key for key in info.missing_keys if is_casan_parameter(key)}
            info.missing_keys = info.missing_keys - self._missing_by_design
        return adjusted


def encoder_extras(outputs):
    """The per-layer outputs every CASAN head passes through from the base model."""
    return {
        "hidden_states": outputs.hidden_states,
        "attentions": outputs.attentions,
        "context_gates": outputs.context_gates,
        "head_gates": outputs.head_gates,
        "local_windows": outputs.local_windows,
    }


# What every family's classes share, written once: the base model's steps around its encoder, and each head's forward
# (the inputs, the base model, the loss, the output). Each family's classes are written out below and in their
# family's model file, each over the mixin of its head, and hold only what differs: their modules (`__init__`) and the
# hooks the mixin names (`embed_and_encode`, `classify`, `cls_vector`, `lm_logits`, ...). A mixin comes first among
# a class's bases, so that its `forward` is found before `nn.Module`'s.


class CasanEncoderMixin:
    """The base model's forward: the inputs checked, the gates asked of the layers as transformers' output capture
    asks for the other per-layer outputs, and the family's `embed_and_encode(input_ids, attention_mask,
    token_type_ids, position_ids, inputs_embeds, **kwargs)`, which returns the `CasanModelOutput`."""

    casan_head = get_head("base")
    # The word embeddings' name in the family's `embeddings` module.
    word_embeddings_name = "word_embeddings"

    def get_input_embeddings(self):
        return getattr(self.embeddings, self.word_embeddings_name)

    def set_input_embeddings(self, value):
        setattr(self.embeddings, self.word_embeddings_name, value)

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanModelOutput:
        check_encoder_inputs(input_ids, inputs_embeds, attention_mask)
        if token_type_ids is not None and not self.has_token_types:
            raise ValueError(
                f"The {self.family.name} family has no token types: pass token_type_ids=None (a tokenizer gives "
                "none when its model_input_names are ['input_ids', 'attention_mask'], as this family's are)."
            )
        kwargs.setdefault("output_context_gates", getattr(self.config, "output_context_gates", False))
        return self.embed_and_encode(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)


class CasanHeadMixin:
    """What every head does first: its family's base model (stored under the family's prefix) on the inputs."""

    def run_base_model(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs):
        return self.base_model(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )


class CasanSentenceHeadMixin(CasanHeadMixin):
    """The heads that score a sentence vector (sequence classification, multiple choice): `pooling`
    (`classifier_pooling`, casan_hf/pooling.py) of the last hidden states, then the family's `classify(pooled)`."""

    def cls_vector(self, outputs, attention_mask):
        """The vector `classifier_pooling="cls"` reads where it is not the first token: the family's pooler output
        where the head reads it (None where the base model built no pooler)."""
        return outputs.pooler_output

    def sentence_logits(self, outputs, attention_mask):
        """The logits, the sentence vector and the pooling hops (None but for "structured")."""
        cls_vector = self.cls_vector(outputs, attention_mask)
        pooled, hops = self.pooling(outputs.last_hidden_state, attention_mask, cls_vector)
        return self.classify(pooled), pooled, hops


class CasanSequenceClassificationMixin(CasanSentenceHeadMixin):
    """Sequence classification's forward: the sentence's logits, and the loss by the config's `problem_type`
    (`sequence_loss`: transformers' rule, which a family may replace with its own)."""

    casan_head = get_head("sequence-classification")

    def sequence_loss(self, logits, labels):
        return self.loss_function(labels, logits, self.config)

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_pooling_attentions=False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanSequenceClassifierOutput:
        outputs = self.run_base_model(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        logits, pooled, hops = self.sentence_logits(outputs, attention_mask)
        loss = self.sequence_loss(logits, labels) if labels is not None else None
        return CasanSequenceClassifierOutput(
            loss=self.pooling.add_penalty(loss, hops, pooled),
            logits=logits,
            pooling_attentions=hops if output_pooling_attentions else None,
            **encoder_extras(outputs),
        )


class CasanTokenClassificationMixin(CasanHeadMixin):
    """Token classification's forward: the family's `classify(last_hidden_state)`, a label for every token."""

    casan_head = get_head("token-classification")

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanTokenClassifierOutput:
        outputs = self.run_base_model(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        logits = self.classify(outputs.last_hidden_state)
        loss = self.loss_function(logits, labels, self.config) if labels is not None else None
        return CasanTokenClassifierOutput(loss=loss, logits=logits, **encoder_extras(outputs))


class CasanQuestionAnsweringMixin(CasanHeadMixin):
    """Extractive question answering's forward: the family's `classify(last_hidden_state)` gives every token a start
    and an end logit; the loss is transformers' over both."""

    casan_head = get_head("question-answering")

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanQuestionAnsweringOutput:
        outputs = self.run_base_model(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        start_logits, end_logits = self.classify(outputs.last_hidden_state).split(1, dim=-1)
        start_logits = start_logits.squeeze(-1).contiguous()
        end_logits = end_logits.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions)
        return CasanQuestionAnsweringOutput(
            loss=loss, start_logits=start_logits, end_logits=end_logits, **encoder_extras(outputs)
        )


class CasanMultipleChoiceMixin(CasanSentenceHeadMixin):
    """Multiple choice's forward: inputs `(batch, num_choices, seq)`, each choice encoded as its own sentence and
    scored by the family's `classify(pooled)` (one logit); cross-entropy over the choices."""

    casan_head = get_head("multiple-choice")

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_pooling_attentions=False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanMultipleChoiceOutput:
        num_choices = input_ids.shape[1] if input_ids is not None else inputs_embeds.shape[1]
        inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
        input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds = (
            None if tensor is None else tensor.flatten(0, 1) for tensor in inputs
        )
        outputs = self.run_base_model(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        logits, pooled, hops = self.sentence_logits(outputs, attention_mask)
        logits = logits.view(-1, num_choices)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        returned_hops = (
            hops.unflatten(0, (-1, num_choices)) if output_pooling_attentions and hops is not None else None
        )
        return CasanMultipleChoiceOutput(
            loss=self.pooling.add_penalty(loss, hops, pooled),
            logits=logits,
            pooling_attentions=returned_hops,
            **encoder_extras(outputs),
        )


class CasanMaskedLMMixin(CasanHeadMixin):
    """Masked LM's forward: the family's `lm_logits(last_hidden_state)` for the tokens `predicted_tokens` keeps (all
    of them, unless the family predicts the masked ones only), and transformers' masked-LM loss."""

    casan_head = get_head("masked-lm")

    def predicted_tokens(self, states, labels):
        """The states and labels of the tokens whose words are predicted when labels are given: every token."""
        return states, labels

    @can_return_tuple
    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> CasanMaskedLMOutput:
        outputs = self.run_base_model(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs)
        states = outputs.last_hidden_state
        if labels is not None:
            states, labels = self.predicted_tokens(states, labels)
        logits = self.lm_logits(states)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size)
        return CasanMaskedLMOutput(loss=loss, logits=logits, **encoder_extras(outputs))


# BERT's classes, which the other BERT-style families' classes below take over with their own `PreTrainedModel`.


class CasanModel(CasanEncoderMixin, CasanPreTrainedModel):
    """The encoder, as `BertModel`: the family's embeddings (ELECTRA's projected to the hidden width when they
    are narrower), the context-aware layers, and the family's pooler where it has one."""

    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config)
        modules = self.family_modules
        self.embeddings = modules.embeddings(config)
        embedding_size = getattr(config, "embedding_size", config.hidden_size)
        if embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(embedding_size, config.hidden_size)
        self.encoder = CasanEncoder(config)
        self.pooler = modules.pooler(config) if add_pooling_layer and modules.pooler is not None else None
        self.post_init()

    def embed_and_encode(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs):
        embedding_output = self.embeddings(
            input_ids=input_ids,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
        )
        if hasattr(self, "embeddings_project"):
            embedding_output = self.embeddings_project(embedding_output)
        extended_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=embedding_output, attention_mask=attention_mask
        )
        sequence_output = self.encoder(
            embedding_output,
            attention_mask=extended_mask,
            token_mask=attention_mask,
            position_ids=position_ids,
            **kwargs,
        )
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        return CasanModelOutput(last_hidden_state=sequence_output, pooler_output=pooled_output)


def classifier_dropout(config):
    """BERT's rule for the dropout before a classifier: `classifier_dropout` where set, else the hidden one (always,
    for DeBERTa's config, which has none: DeBERTa's token classifier takes the hidden one)."""
    rate = getattr(config, "classifier_dropout", None)
    return nn.Dropout(config.hidden_dropout_prob if rate is None else rate)


def first_token_head(head_class, config, in_features):
    """A RoBERTa-style classification head (dense, activation, out_proj, applied to the first token of what it
    is given) whose dense layer reads `in_features`, the width of the sentence vector."""
    head = head_class(config)
    head.dense = nn.Linear(in_features, config.hidden_size)
    return head


class CasanForSequenceClassification(CasanSequenceClassificationMixin, CasanPreTrainedModel):
    """Single-label, multi-label or regression classifier on the sentence vector of `classifier_pooling`
    (by default the family's own: BERT's pooled [CLS] vector, RoBERTa's and ELECTRA's dense head on the first
    token), as `BertForSequenceClassification`."""

    _fsdp_plan = {"pooling": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.build_base_model(
            config, add_pooling_layer=self.builds_pooler(self.family_modules.classifier_reads_pooler)
        )
        self.pooling = SentencePooling(config)
        head_class = self.family_modules.classification_head
        if head_class is None:
            self.dropout = classifier_dropout(config)
            self.classifier = nn.Linear(self.pooling.output_size, config.num_labels)
        else:
            self.classifier = first_token_head(head_class, config, self.pooling.output_size)
        self.post_init()

    def classify(self, pooled):
        if self.family_modules.classification_head is None:
            return self.classifier(self.dropout(pooled))
        return self.classifier(pooled[:, None])


class CasanForTokenClassification(CasanTokenClassificationMixin, CasanPreTrainedModel):
    """A label for every token, from dropout and one linear layer, as `BertForTokenClassification`."""

    _fsdp_plan = {"classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.build_base_model(config, add_pooling_layer=False)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def classify(self, states):
        return self.classifier(self.dropout(states))


class CasanForQuestionAnswering(CasanQuestionAnsweringMixin, CasanPreTrainedModel):
    """Extractive question answering (start and end logits of every token), as `BertForQuestionAnswering`."""

    _fsdp_plan = {"qa_outputs": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.build_base_model(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def classify(self, states):
        return self.qa_outputs(states)


class CasanForMultipleChoice(CasanMultipleChoiceMixin, CasanPreTrainedModel):
    """Scores each choice from its sentence vector: through dropout and one linear layer (BERT, RoBERTa), or
    through ELECTRA's summary (a dense layer and activation) and one linear layer, as `BertForMultipleChoice`."""

    _fsdp_plan = {"pooling": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=self.builds_pooler(self.family_modules.choices_read_pooler))
        self.pooling = SentencePooling(config)
        summary_class = self.family_modules.choice_summary
        if summary_class is None:
            self.dropout = classifier_dropout(config)
            self.classifier = nn.Linear(self.pooling.output_size, 1)
        else:
            self.sequence_summary = summary_class(config)
            if config.summary_use_proj:
                self.sequence_summary.summary = nn.Linear(self.pooling.output_size, config.hidden_size)
            self.classifier = nn.Linear(config.hidden_size if config.summary_use_proj else self.pooling.output_size, 1)
        self.post_init()

    def classify(self, pooled):
        if self.family_modules.choice_summary is None:
            return self.classifier(self.dropout(pooled))
        return self.classifier(self.sequence_summary(pooled[:, None]))


class CasanForMaskedLM(CasanMaskedLMMixin, CasanPreTrainedModel):
    """Masked LM with BERT's head (`cls.predictions`, its decoder tied to the word embeddings), as
    `BertForMaskedLM`. The other families' masked LMs subclass it with their own head: `add_lm_head`,
    `lm_logits`, the output embeddings and the tied weights."""

    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }
    # The decoder, tied to the word embeddings, stays with them in the root's group.
    _fsdp_plan = {"cls.predictions.transform": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=False)
        self.add_lm_head(config)
        self.post_init()

    def add_lm_head(self, config):
        self.cls = BertOnlyMLMHead(config)

    def lm_logits(self, sequence_output):
        return self.cls(sequence_output)

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias


# Each other family's classes: its `PreTrainedModel` says whose checkpoints they load (family, config class,
# base model prefix, the module that must not be split), and each head is BERT's class under it. Masked LM is
# the exception: each family has its own head (XLM-RoBERTa's is RoBERTa's). `tests/test_model_classes.py`
# holds every class to its row of `FAMILIES` x `HEADS`.


class CasanRobertaPreTrainedModel(CasanPreTrainedModel):
    """Loads RoBERTa checkpoints, as `RobertaPreTrainedModel`."""

    family = get_family("roberta")
    family_modules = FamilyModules(RobertaEmbeddings, RobertaPooler, RobertaClassificationHead, None, RobertaLMHead)
    config_class = CasanRobertaConfig
    config: CasanRobertaConfig
    base_model_prefix = "roberta"
    _no_split_modules = ["RobertaEmbeddings", "CasanLayer"]


class CasanRobertaModel(CasanRobertaPreTrainedModel, CasanModel):
    """`CasanModel` for RoBERTa checkpoints, as `RobertaModel`."""


class CasanRobertaForSequenceClassification(CasanRobertaPreTrainedModel, CasanForSequenceClassification):
    """`CasanForSequenceClassification` for RoBERTa checkpoints, as `RobertaForSequenceClassification`."""


class CasanRobertaForTokenClassification(CasanRobertaPreTrainedModel, CasanForTokenClassification):
    """`CasanForTokenClassification` for RoBERTa checkpoints, as `RobertaForTokenClassification`."""


class CasanRobertaForQuestionAnswering(CasanRobertaPreTrainedModel, CasanForQuestionAnswering):
    """`CasanForQuestionAnswering` for RoBERTa checkpoints, as `RobertaForQuestionAnswering`."""


class CasanRobertaForMultipleChoice(CasanRobertaPreTrainedModel, CasanForMultipleChoice):
    """`CasanForMultipleChoice` for RoBERTa checkpoints, as `RobertaForMultipleChoice`."""


class CasanRobertaForMaskedLM(CasanRobertaPreTrainedModel, CasanForMaskedLM):
    """Masked LM with RoBERTa's head, `lm_head` (its decoder tied to the word embeddings), as
    `RobertaForMaskedLM`."""

    _tied_weights_keys = {
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }
    _fsdp_plan = {"lm_head.dense": "keep_full_weight", "lm_head.layer_norm": "keep_full_weight"}

    def add_lm_head(self, config):
        self.lm_head = self.family_modules.lm_head(config)

    def lm_logits(self, sequence_output):
        return self.lm_head(sequence_output)

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings


class CasanXLMRobertaPreTrainedModel(CasanPreTrainedModel):
    """Loads XLM-RoBERTa checkpoints, as `XLMRobertaPreTrainedModel`."""

    family = get_family("xlm-roberta")
    family_modules = FamilyModules(
        XLMRobertaEmbeddings, XLMRobertaPooler, XLMRobertaClassificationHead, None, XLMRobertaLMHead
    )
    config_class = CasanXLMRobertaConfig
    config: CasanXLMRobertaConfig
    base_model_prefix = "roberta"
    _no_split_modules = ["XLMRobertaEmbeddings", "CasanLayer"]


class CasanXLMRobertaModel(CasanXLMRobertaPreTrainedModel, CasanModel):
    """`CasanModel` for XLM-RoBERTa checkpoints, as `XLMRobertaModel`."""


class CasanXLMRobertaForSequenceClassification(CasanXLMRobertaPreTrainedModel, CasanForSequenceClassification):
    """`CasanForSequenceClassification` for XLM-RoBERTa checkpoints, as `XLMRobertaForSequenceClassification`."""


class CasanXLMRobertaForTokenClassification(CasanXLMRobertaPreTrainedModel, CasanForTokenClassification):
    """`CasanForTokenClassification` for XLM-RoBERTa checkpoints, as `XLMRobertaForTokenClassification`."""


class CasanXLMRobertaForQuestionAnswering(CasanXLMRobertaPreTrainedModel, CasanForQuestionAnswering):
    """`CasanForQuestionAnswering` for XLM-RoBERTa checkpoints, as `XLMRobertaForQuestionAnswering`."""


class CasanXLMRobertaForMultipleChoice(CasanXLMRobertaPreTrainedModel, CasanForMultipleChoice):
    """`CasanForMultipleChoice` for XLM-RoBERTa checkpoints, as `XLMRobertaForMultipleChoice`."""


class CasanXLMRobertaForMaskedLM(CasanXLMRobertaPreTrainedModel, CasanRobertaForMaskedLM):
    """`CasanRobertaForMaskedLM` (XLM-RoBERTa's head is RoBERTa's, `lm_head`) for XLM-RoBERTa checkpoints, as
    `XLMRobertaForMaskedLM`."""


class CasanElectraPreTrainedModel(CasanPreTrainedModel):
    """Loads ELECTRA discriminator checkpoints, as `ElectraPreTrainedModel`."""

    family = get_family("electra")
    family_modules = FamilyModules(
        ElectraEmbeddings, None, ElectraClassificationHead, ElectraSequenceSummary, ElectraGeneratorPredictions
    )
    config_class = CasanElectraConfig
    config: CasanElectraConfig
    base_model_prefix = "electra"
    _no_split_modules = ["ElectraEmbeddings", "CasanLayer"]


class CasanElectraModel(CasanElectraPreTrainedModel, CasanModel):
    """`CasanModel` for ELECTRA checkpoints, as `ElectraModel`."""


class CasanElectraForSequenceClassification(CasanElectraPreTrainedModel, CasanForSequenceClassification):
    """`CasanForSequenceClassification` for ELECTRA checkpoints, as `ElectraForSequenceClassification`."""


class CasanElectraForTokenClassification(CasanElectraPreTrainedModel, CasanForTokenClassification):
    """`CasanForTokenClassification` for ELECTRA checkpoints, as `ElectraForTokenClassification`."""


class CasanElectraForQuestionAnswering(CasanElectraPreTrainedModel, CasanForQuestionAnswering):
    """`CasanForQuestionAnswering` for ELECTRA checkpoints, as `ElectraForQuestionAnswering`."""


class CasanElectraForMultipleChoice(CasanElectraPreTrainedModel, CasanForMultipleChoice):
    """`CasanForMultipleChoice` for ELECTRA checkpoints, as `ElectraForMultipleChoice`."""


class CasanElectraForMaskedLM(CasanElectraPreTrainedModel, CasanForMaskedLM):
    """Masked LM with ELECTRA's generator head: `generator_predictions` (dense to the embedding width, gelu,
    LayerNorm) and `generator_lm_head`, tied to the word embeddings, as `ElectraForMaskedLM`. A discriminator
    checkpoint has none: it starts random."""

    _tied_weights_keys = {"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"}
    _fsdp_plan = {"generator_predictions": "keep_full_weight"}

    def add_lm_head(self, config):
        self.generator_predictions = self.family_modules.lm_head(config)
        self.generator_lm_head = nn.Linear(config.embedding_size, config.vocab_size)

    def lm_logits(self, sequence_output):
        return self.generator_lm_head(self.generator_predictions(sequence_output))

    def get_output_embeddings(self):
        return self.generator_lm_head

    def set_output_embeddings(self, new_embeddings):
        self.generator_lm_head = new_embeddings


# This file's model classes, the BERT-style families', by (family name, head name) in the order of `FAMILIES` x
# `HEADS`; `modeling_casan_auto.MODEL_CLASSES` gathers every modeling file's.
FAMILY_CLASSES = {
    (model_class.family.name, model_class.casan_head.name): model_class
    for model_class in (
        CasanModel,
        CasanForSequenceClassification,
        CasanForTokenClassification,
        CasanForQuestionAnswering,
        CasanForMultipleChoice,
        CasanForMaskedLM,
        CasanRobertaModel,
        CasanRobertaForSequenceClassification,
        CasanRobertaForTokenClassification,
        CasanRobertaForQuestionAnswering,
        CasanRobertaForMultipleChoice,
        CasanRobertaForMaskedLM,
        CasanXLMRobertaModel,
        CasanXLMRobertaForSequenceClassification,
        CasanXLMRobertaForTokenClassification,
        CasanXLMRobertaForQuestionAnswering,
        CasanXLMRobertaForMultipleChoice,
        CasanXLMRobertaForMaskedLM,
        CasanElectraModel,
        CasanElectraForSequenceClassification,
        CasanElectraForTokenClassification,
        CasanElectraForQuestionAnswering,
        CasanElectraForMultipleChoice,
        CasanElectraForMaskedLM,
    )
}


__all__ = [
    "FAMILY_CLASSES",
    "CasanForMaskedLM",
    "CasanForMultipleChoice",
    "CasanForQuestionAnswering",
    "CasanForSequenceClassification",
    "CasanForTokenClassification",
    "CasanModel",
    "CasanPreTrainedModel",
]
