"""Context-aware self-attention BERT models (Yang et al., AAAI 2019), in the layout of `transformers`' BERT.

Every submodule keeps BERT's name (`bert.embeddings`, `bert.encoder.layer.N.attention.self.query`, ...),
so any BERT checkpoint loads unchanged and only the context parameters
(`...attention.self.context_mixer.*`) are new. The BERT building blocks that CASAN leaves alone are
imported from `transformers` rather than copied.
"""

from collections.abc import Callable
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
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.models.bert.modeling_bert import (
    BertEmbeddings,
    BertIntermediate,
    BertLMPredictionHead,
    BertOnlyMLMHead,
    BertOutput,
    BertPooler,
    BertSelfOutput,
)
from transformers.processing_utils import Unpack
from transformers.pytorch_utils import apply_chunking_to_forward
from transformers.utils import TransformersKwargs
from transformers.utils.generic import can_return_tuple

from .compat import (
    OutputRecorder,
    PreTrainedConfig,
    attention_function,
    capture_outputs,
    create_bidirectional_mask,
    eager_attention_forward,
    init,
    merge_with_config_defaults,
)
from .configuration_casan import (
    CONTEXT_TARGETS,
    HEADS,
    OPTION_CHECKS,
    SENTENCE_CONTEXTS,
    STRUCTURAL_OPTIONS,
    CasanConfig,
)
from .context import CasanContextMixer, context_source, layer_context, mean_weights
from .pooling import SentencePooling


LOADABLE_MODEL_TYPES = ("bert", "casan_bert")


@dataclass
class CasanModelOutput(BaseModelOutputWithPoolingAndCrossAttentions):
    r"""
    context_gates (`tuple(torch.FloatTensor)`, returned with `output_context_gates=True`):
        One tensor per layer of shape `(batch_size, 2, sequence_length)`: the query gate lambda_Q
        (channel 0) and the key gate lambda_K (channel 1) of every token; 0 where that layer or target
        takes no context.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanSequenceClassifierOutput(SequenceClassifierOutput):
    r"""
    pooling_attentions (`torch.FloatTensor` of shape `(batch_size, pooling_hops, sequence_length)`):
        The hops A of `classifier_pooling="structured"`, returned with `output_pooling_attentions=True`: each
        row sums to 1 over the real tokens and is 0 on padding.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    pooling_attentions: torch.FloatTensor | None = None


@dataclass
class CasanTokenClassifierOutput(TokenClassifierOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanMultipleChoiceOutput(MultipleChoiceModelOutput):
    r"""
    pooling_attentions (`torch.FloatTensor` of shape `(batch_size, num_choices, pooling_hops, sequence_length)`):
        As for sequence classification, per choice.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    pooling_attentions: torch.FloatTensor | None = None


@dataclass
class CasanMaskedLMOutput(MaskedLMOutput):
    context_gates: tuple[torch.FloatTensor, ...] | None = None


class CasanSelfAttention(nn.Module):
    """BERT's self-attention (same `query`/`key`/`value` names, so BERT weights load) plus a context mixer."""

    def __init__(self, config, layer_idx):
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError(
                f"The hidden size ({config.hidden_size}) is not a multiple of the number of attention "
                f"heads ({config.num_attention_heads})"
            )
        self.config = config
        self.layer_idx = layer_idx
        self.is_causal = False
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.attention_head_size**-0.5

        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.context_mixer = (
            CasanContextMixer(config, config.context_size(layer_idx)) if config.layer_has_context(layer_idx) else None
        )

    def forward(self, hidden_states, attention_mask=None, context=(), **kwargs: Unpack[TransformersKwargs]):
        """Returns the attention output, the attention weights (eager only) and the gates `(batch, 2, n)`:
        channel 0 the query gate, channel 1 the key gate, 0 where that target gets no context. `context` is
        the layer's `layer_context`."""
        hidden_shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        query, key = self.query(hidden_states), self.key(hidden_states)
        if self.context_mixer is not None and context:
            query, key, context_gates = self.context_mixer(query, key, context)
        else:
            context_gates = hidden_states.new_zeros(
                (hidden_states.shape[0], len(CONTEXT_TARGETS), hidden_states.shape[1])
            )

        query = query.view(hidden_shape).transpose(1, 2)
        key = key.view(hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(hidden_shape).transpose(1, 2)

        attention_interface: Callable = attention_function(
            ALL_ATTENTION_FUNCTIONS, self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=0.0 if not self.training else self.dropout.p,
            scaling=self.scaling,
            **kwargs,
        )
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        return attn_output, attn_weights, context_gates


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
        self.layer = nn.ModuleList([CasanLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None, token_mask=None, **kwargs: Unpack[TransformersKwargs]):
        sentence_level = self.config.context_type in SENTENCE_CONTEXTS
        weights = mean_weights(token_mask, hidden_states.dtype) if sentence_level else None
        sources = []
        for layer_idx, layer_module in enumerate(self.layer):
            sources.append(context_source(self.config, layer_idx, hidden_states, weights))
            context = layer_context(self.config, layer_idx, sources)
            hidden_states = layer_module(hidden_states, attention_mask, *context, **kwargs)
        return hidden_states


class CasanPreTrainedModel(PreTrainedModel):
    config_class = CasanConfig
    config: CasanConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_attention_backend = True
    _no_split_modules = ["BertEmbeddings", "CasanLayer"]
    _can_record_outputs = {
        "hidden_states": CasanLayer,
        "attentions": OutputRecorder(CasanSelfAttention, index=1),
        "context_gates": OutputRecorder(CasanSelfAttention, index=2),
    }

    @classmethod
    def _can_set_attn_implementation(cls):
        """`set_attn_implementation` works: the attention dispatches through `ALL_ATTENTION_FUNCTIONS` at every
        call. transformers' own check only searches this file's source, which holds no attention function."""
        return True

    def __init__(self, config, *inputs, **kwargs):
        if config.is_decoder or config.add_cross_attention:
            raise ValueError(
                "CASAN models are bidirectional encoders: `is_decoder` and `add_cross_attention` must be False "
                f"(got is_decoder={config.is_decoder}, add_cross_attention={config.add_cross_attention})."
            )
        config.check_context_options()
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module):
        """BERT's initialisation, plus the context parameters: U ~ N(0, context_init_range), the gate
        vectors too, and the gate bias at `gate_bias_init` so that a converted checkpoint starts near BERT."""
        super()._init_weights(module)
        if isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)
        elif isinstance(module, CasanContextMixer):
            std = self.config.context_init_range
            std = self.config.initializer_range if std is None else std
            init.normal_(module.context_weight, mean=0.0, std=std)
            if module.rank is not None:
                init.normal_(module.context_up, mean=0.0, std=std)
            if module.dynamic:
                init.normal_(module.gate_hidden, mean=0.0, std=std)
                init.normal_(module.gate_context, mean=0.0, std=std)
                init.constant_(module.gate_bias, self.config.gate_bias_init)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Loads a BERT checkpoint (converted: the context parameters are new) or a CASAN checkpoint
        (continued: its context options must not change, or its trained context would be dropped or
        replaced by random weights). The auto classes pass a ready `config`, so that is checked too.

        A converted model is a new model: like one built from a config, it has no checkpoint of its own until
        it is saved, so its `name_or_path` is empty rather than the BERT checkpoint's. What reloads a model
        from its `name_or_path` (a PEFT adapter records it as its base) must not get plain BERT back."""
        saved = None
        if pretrained_model_name_or_path is not None:
            hub_kwargs = {
                key: kwargs[key]
                for key in ("cache_dir", "force_download", "local_files_only", "token", "revision", "subfolder")
                if key in kwargs
            }
            saved, _ = PreTrainedConfig.get_config_dict(pretrained_model_name_or_path, **hub_kwargs)
            config = kwargs.get("config")
            requested = kwargs if not isinstance(config, PreTrainedConfig) else config.to_dict()
            check_checkpoint_fits(saved, requested)
        loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if saved is not None and saved.get("model_type") != CasanConfig.model_type:
            (loaded[0] if isinstance(loaded, tuple) else loaded).name_or_path = ""
        return loaded


def check_checkpoint_fits(saved_config, requested):
    """Raises a ValueError when a checkpoint cannot become the requested CASAN model without losing weights."""
    model_type = saved_config.get("model_type")
    if model_type not in LOADABLE_MODEL_TYPES:
        raise ValueError(
            f"Checkpoint has model_type {model_type!r}; CASAN models load "
            f"{' or '.join(map(repr, LOADABLE_MODEL_TYPES))} "
            "checkpoints."
        )
    if model_type != "casan_bert":
        return
    defaults = CasanConfig()
    for name in STRUCTURAL_OPTIONS:
        if name not in requested:
            continue
        wanted = getattr(CasanConfig(**{name: requested[name]}), name)
        have = saved_config.get(name, getattr(defaults, name))
        if wanted != have:
            raise ValueError(
                f"This CASAN checkpoint was trained with {name}={have!r}; it cannot be loaded with {name}={wanted!r} "
                f"(its context parameters would be dropped or re-initialised). Load it without `{name}`, or convert "
                "the original BERT checkpoint instead."
            )


def encoder_extras(outputs):
    """The per-layer outputs every CASAN head passes through from the base model."""
    return {
        "hidden_states": outputs.hidden_states,
        "attentions": outputs.attentions,
        "context_gates": outputs.context_gates,
    }


class CasanModel(CasanPreTrainedModel):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = CasanEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

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
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError(
                "CASAN needs a 2D attention_mask (batch, seq) to average the real tokens; "
                f"got {attention_mask.dim()}D."
            )
        embedding_output = self.embeddings(
            input_ids=input_ids,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
        )
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
    """BERT's rule for the dropout before a classifier: `classifier_dropout` where set, else the hidden one."""
    rate = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return nn.Dropout(rate)


class CasanForSequenceClassification(CasanPreTrainedModel):
    """Single-label, multi-label or regression classifier on the sentence vector of `classifier_pooling`
    (BERT's pooled [CLS] vector by default)."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = CasanModel(config, add_pooling_layer=config.classifier_pooling == "cls")
        self.pooling = SentencePooling(config)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(self.pooling.output_size, config.num_labels)
        self.post_init()

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
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        pooled, hops = self.pooling(outputs.last_hidden_state, attention_mask, outputs.pooler_output)
        logits = self.classifier(self.dropout(pooled))
        loss = self.loss_function(labels, logits, self.config) if labels is not None else None
        return CasanSequenceClassifierOutput(
            loss=self.pooling.add_penalty(loss, hops, pooled),
            logits=logits,
            pooling_attentions=hops if output_pooling_attentions else None,
            **encoder_extras(outputs),
        )


class CasanForMultipleChoice(CasanPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.bert = CasanModel(config, add_pooling_layer=config.classifier_pooling == "cls")
        self.pooling = SentencePooling(config)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(self.pooling.output_size, 1)
        self.post_init()

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
        """Inputs are `(batch, num_choices, seq)`; each choice is encoded as its own sentence."""
        num_choices = input_ids.shape[1] if input_ids is not None else inputs_embeds.shape[1]

        def flat(tensor):
            return None if tensor is None else tensor.flatten(0, 1)

        outputs = self.bert(
            flat(input_ids),
            attention_mask=flat(attention_mask),
            token_type_ids=flat(token_type_ids),
            position_ids=flat(position_ids),
            inputs_embeds=flat(inputs_embeds),
            return_dict=True,
            **kwargs,
        )
        pooled, hops = self.pooling(outputs.last_hidden_state, flat(attention_mask), outputs.pooler_output)
        logits = self.classifier(self.dropout(pooled)).view(-1, num_choices)
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


class CasanForTokenClassification(CasanPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = CasanModel(config, add_pooling_layer=False)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

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
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = self.loss_function(logits, labels, self.config) if labels is not None else None
        return CasanTokenClassifierOutput(loss=loss, logits=logits, **encoder_extras(outputs))


class CasanForQuestionAnswering(CasanPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = CasanModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

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
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        start_logits = start_logits.squeeze(-1).contiguous()
        end_logits = end_logits.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions)
        return CasanQuestionAnsweringOutput(
            loss=loss, start_logits=start_logits, end_logits=end_logits, **encoder_extras(outputs)
        )


class CasanForMaskedLM(CasanPreTrainedModel):
    _tied_weights_keys = {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    }

    def __init__(self, config):
        super().__init__(config)
        self.bert = CasanModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

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
        outputs = self.bert(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size)
        return CasanMaskedLMOutput(loss=loss, logits=logits, **encoder_extras(outputs))


def casan_twin(model, **options):
    """The CASAN model with the weights of a loaded transformers BERT model, built in memory (no save and
    reload): the same head, config, dtype, device, attention backend and train/eval mode, plus the CASAN
    `options`. Only the context (and an attentive pooling) is new; at `context_type="none"` its outputs are
    the source's. Like `from_pretrained` of a BERT checkpoint, the result has no checkpoint of its own yet."""
    casan_names = {head.class_name.replace("Casan", "Bert", 1): head.class_name for head in HEADS}
    source_name = type(model).__name__
    if source_name not in casan_names:
        raise ValueError(f"casan_twin takes a BERT model, one of {', '.join(casan_names)}; got {source_name}.")
    unknown = sorted(set(options) - set(OPTION_CHECKS))
    if unknown:
        raise ValueError(f"casan_twin takes CASAN options, one of {', '.join(OPTION_CHECKS)}; got {unknown}.")
    config = CasanConfig.from_dict(model.config.to_dict(), **options)
    config._attn_implementation = model.config._attn_implementation
    twin = globals()[casan_names[source_name]](config)
    missing, unexpected = twin.load_state_dict(model.state_dict(), strict=False)
    new = [key for key in missing if ".context_mixer." not in key and not key.startswith("pooling.")]
    dropped = [key for key in unexpected if ".pooler." not in key]  # only "cls" pooling reads the pooler
    if new or dropped:
        raise ValueError(f"{source_name} does not fit {type(twin).__name__}: missing {new}, unexpected {dropped}.")
    twin.name_or_path = ""
    return twin.to(device=model.device, dtype=model.dtype).train(model.training)


__all__ = [
    "casan_twin",
    "CasanForMaskedLM",
    "CasanForMultipleChoice",
    "CasanForQuestionAnswering",
    "CasanForSequenceClassification",
    "CasanForTokenClassification",
    "CasanModel",
    "CasanPreTrainedModel",
]
