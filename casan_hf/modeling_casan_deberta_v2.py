"""Context-aware self-attention encoders (Yang et al., AAAI 2019) in the layout of `transformers`' DeBERTa-v2,
for DeBERTa-v2 and DeBERTa-v3 checkpoints.

Every submodule keeps DeBERTa's name (`deberta.encoder.layer.N.attention.self.query_proj`, `deberta.encoder.
rel_embeddings`, `deberta.encoder.conv`, `pooler.dense`, `cls.predictions.*` or `lm_predictions.lm_head.*`), so
any checkpoint loads unchanged and only the context parameters (`...attention.self.context_mixer.*`) are new.
The embeddings, the layers' output modules, the convolution after the first layer, the relative positions, the
pooler and both masked-LM heads are transformers' own, imported rather than copied; the self-attention is
`DisentangledSelfAttention` (its projections, its `disentangled_attention_bias`) with the context mixed in.

Where the context meets the disentangled attention (docs/FAMILIES.md, "DeBERTa-v2 and v3"): the content query
and key (`query_proj`, `key_proj` of the layer input, full width before the head split) are mixed with the
layer's context by `CasanContextMixer`, and the mixed ones take part in all three terms of the score: content
to content, content to position (the mixed query against the positions' keys) and position to content (the
mixed key against the positions' queries). The relative position embeddings and their projections (with
`share_att_key`, `query_proj` and `key_proj` of the position embeddings) take no context. A layer's context
source is its input, as in BERT (DeBERTa is post-norm); the first layer's input is the embeddings, the second
layer's the first layer's output after the convolution, as DeBERTa feeds it on. DeBERTa attends eagerly only
(transformers has no sdpa or flash attention for it), and so do these models.
"""

import torch
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, LayerNorm, MSELoss
from torch.nn import functional as F
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.models.deberta_v2.modeling_deberta_v2 import (
    ContextPooler,
    ConvLayer,
    DebertaV2Embeddings,
    DebertaV2Encoder,
    DebertaV2Intermediate,
    DebertaV2LMPredictionHead,
    DebertaV2OnlyMLMHead,
    DebertaV2Output,
    DebertaV2SelfOutput,
    DisentangledSelfAttention,
    LegacyDebertaV2LMPredictionHead,
    LegacyDebertaV2OnlyMLMHead,
    scaled_size_sqrt,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs

from .compat import init
from .configuration_casan_deberta_v2 import CasanDebertaV2Config
from .context import ContextPlan, mean_weights
from .context_mixer import gate_head_outputs, layer_context_mixer, local_windows, mix_context, output_gate
from .families import get_family

# transformers 4.x copies to its module cache only the code files that a local folder's model file imports itself, not
# the files those import in turn (5.x follows them): the mixer's kernels are imported here so that they travel.
from .fused_mixer import FusedMix  # noqa: F401
from .local_bias import local_bias
from .modeling_casan import (
    CasanEncoderMixin,
    CasanForQuestionAnswering,
    CasanForTokenClassification,
    CasanMaskedLMMixin,
    CasanModelOutput,
    CasanMultipleChoiceMixin,
    CasanPreTrainedModel,
    CasanSequenceClassificationMixin,
    recorded_outputs,
)
from .pooling import SentencePooling


class CasanDisentangledSelfAttention(DisentangledSelfAttention):
    """DeBERTa's disentangled self-attention (same `query_proj`/`key_proj`/`value_proj`/`pos_key_proj`/
    `pos_query_proj`, so checkpoints load) whose content query and key take the layer's context."""

    def __init__(self, config, layer_idx):
        super().__init__(config)
        self.config = config
        self.layer_idx = layer_idx
        self.context_mixer = layer_context_mixer(config, layer_idx)
        self.output_gate = output_gate(config, layer_idx)
        self.local_bias = local_bias(config, layer_idx)

    def forward(
        self,
        hidden_states,
        attention_mask,
        relative_pos=None,
        rel_embeddings=None,
        context=(),
        output_context_gates=False,
        **kwargs: Unpack[TransformersKwargs],
    ):
        """Returns the heads' outputs joined `(batch, n, d)`, the attention weights `(batch, heads, n, n)` and,
        with `output_context_gates`, the gates (`gates_shape`: channel 0 the query gate, channel 1 the key gate,
        0 where that target gets no context; else None). `context` is the layer's `ContextPlan.layer_context`.

        As `DisentangledSelfAttention.forward` (its scores, scale, mask and dropout), except that the content query
        and key are mixed with the context before the head split, and the mixed ones go into
        `disentangled_attention_bias` (content to position, position to content)."""
        query, key = self.query_proj(hidden_states), self.key_proj(hidden_states)
        query, key, gates = mix_context(self, query, key, context, output_context_gates)
        positions = kwargs.pop("token_positions", None)
        windows = local_windows(self, query, key, positions)
        heads = self.num_attention_heads
        query_layer = self.transpose_for_scores(query, heads)  # (batch * heads, n, d_head)
        key_layer = self.transpose_for_scores(key, heads)
        value_layer = self.transpose_for_scores(self.value_proj(hidden_states), heads)

        scale_factor = 1 + ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
        scale = scaled_size_sqrt(query_layer, scale_factor)
        attention_scores = torch.bmm(query_layer, key_layer.transpose(-1, -2) / scale.to(dtype=query_layer.dtype))
        if self.relative_attention:
            rel_embeddings = self.pos_dropout(rel_embeddings)
            attention_scores = attention_scores + self.disentangled_attention_bias(
                query_layer, key_layer, relative_pos, rel_embeddings, scale_factor
            )
        attention_scores = attention_scores.view(-1, heads, attention_scores.size(-2), attention_scores.size(-1))
        if windows is not None:  # the local bias, added to the scaled scores as to any other attention's logits
            attention_scores = attention_scores + windows.bias(positions).to(attention_scores.dtype)
        attention_scores = attention_scores.masked_fill(~attention_mask.bool(), torch.finfo(query_layer.dtype).min)
        attention_probs = self.dropout(F.softmax(attention_scores, dim=-1))
        output = torch.bmm(attention_probs.view(-1, *attention_probs.shape[-2:]), value_layer)
        output = output.view(-1, heads, *output.shape[-2:]).permute(0, 2, 1, 3)  # (batch, n, heads, d_head)
        output = gate_head_outputs(self, output, hidden_states, context)
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), attention_probs, gates


class CasanDebertaV2Attention(nn.Module):
    """`DebertaV2Attention` (`self`, `output`) with the context-aware self-attention."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.self = CasanDisentangledSelfAttention(config, layer_idx)
        self.output = DebertaV2SelfOutput(config)

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings, context=(), **kwargs):
        self_output, _, _ = self.self(hidden_states, attention_mask, relative_pos, rel_embeddings, context, **kwargs)
        return self.output(self_output, hidden_states)


class CasanDebertaV2Layer(GradientCheckpointingLayer):
    """`DebertaV2Layer` (`attention`, `intermediate`, `output`) around the context-aware self-attention."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.attention = CasanDebertaV2Attention(config, layer_idx)
        self.intermediate = DebertaV2Intermediate(config)
        self.output = DebertaV2Output(config)

    def forward(
        self,
        hidden_states,
        attention_mask,
        relative_pos,
        rel_embeddings,
        *context,
        conv=None,
        input_mask=None,
        **kwargs: Unpack[TransformersKwargs],
    ):
        """`relative_pos`, `rel_embeddings` and `context` (the tensors of the layer's `layer_context`) are positional,
        so that checkpointing sees them. `conv`: the encoder's `ConvLayer`, given to the first layer only, which
        DeBERTa applies to that layer's input and output (with `input_mask`, the 2D mask of the real tokens), so
        that this layer's output, the next layer's input, is what DeBERTa's encoder passes on."""
        attention_output = self.attention(
            hidden_states, attention_mask, relative_pos, rel_embeddings, context, **kwargs
        )
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        if conv is not None:
            layer_output = conv(hidden_states, layer_output, input_mask)
        return layer_output


class CasanDebertaV2Encoder(DebertaV2Encoder):
    """`DebertaV2Encoder` (its relative positions, their embeddings and LayerNorm, the convolution after the first
    layer; the same names) whose layers attend with context, built by the encoder's `ContextPlan`. Its methods
    (`get_rel_embedding`, `get_rel_pos`, `get_attention_mask`) are DeBERTa's."""

    def __init__(self, config):
        """DeBERTa's modules, as `DebertaV2Encoder.__init__` builds them (whose own layers would be built only to be
        replaced, so it is not called), with the context-aware layers."""
        nn.Module.__init__(self)
        self.layer = nn.ModuleList([CasanDebertaV2Layer(config, i) for i in range(config.num_hidden_layers)])
        self.context_plan = ContextPlan.from_config(config)
        # Copied from transformers.models.deberta_v2.modeling_deberta_v2.DebertaV2Encoder.__init__
        self.relative_attention = getattr(config, "relative_attention", False)

        if self.relative_attention:
            self.max_relative_positions = getattr(config, "max_relative_positions", -1)
            if self.max_relative_positions < 1:
                self.max_relative_positions = config.max_position_embeddings

            self.position_buckets = getattr(config, "position_buckets", -1)
            pos_ebd_size = self.max_relative_positions * 2

            if self.position_buckets > 0:
                pos_ebd_size = self.position_buckets * 2

            self.rel_embeddings = nn.Embedding(pos_ebd_size, config.hidden_size)

        self.norm_rel_ebd = [x.strip() for x in getattr(config, "norm_rel_ebd", "none").lower().split("|")]

        if "layer_norm" in self.norm_rel_ebd:
            self.LayerNorm = LayerNorm(config.hidden_size, config.layer_norm_eps, elementwise_affine=True)

        self.conv = ConvLayer(config) if getattr(config, "conv_kernel_size", 0) > 0 else None
        # End of copy

    def forward(self, hidden_states, token_mask, **kwargs: Unpack[TransformersKwargs]):
        """The layers in turn, each with its context (as `context.run_layers_with_context`, which has no place for
        the relative positions or the convolution after the first layer); `token_mask` is the `(batch, n)` 0/1 mask
        of the real tokens, which the masked means average over and DeBERTa's pairwise mask is made from."""
        attention_mask = self.get_attention_mask(token_mask)
        relative_pos = self.get_rel_pos(hidden_states)
        rel_embeddings = self.get_rel_embedding()
        plan = self.context_plan
        weights = mean_weights(token_mask, hidden_states.dtype) if plan.sentence_means else None
        kwargs.update(plan.layer_keywords(token_mask, hidden_states))
        sources = []
        for layer_index, layer_module in enumerate(self.layer):
            sources.append(plan.context_source(plan.feeds[layer_index], hidden_states, weights))
            context = plan.layer_context(layer_index, sources)
            first = layer_index == 0 and self.conv is not None
            hidden_states = layer_module(
                hidden_states,
                attention_mask,
                relative_pos,
                rel_embeddings,
                *context,
                conv=self.conv if first else None,
                input_mask=token_mask,
                **kwargs,
            )
        return hidden_states


class CasanDebertaV2PreTrainedModel(CasanPreTrainedModel):
    """Loads DeBERTa-v2 and DeBERTa-v3 checkpoints, as `DebertaV2PreTrainedModel`. Eager attention only, as
    transformers' DeBERTa-v2: asking for sdpa or flash attention is transformers' error."""

    family = get_family("deberta-v2")
    family_modules = None
    config_class = CasanDebertaV2Config
    config: CasanDebertaV2Config
    base_model_prefix = "deberta"
    _no_split_modules = ["DebertaV2Embeddings", "CasanDebertaV2Layer"]
    _keys_to_ignore_on_load_unexpected = ["position_embeddings"]
    _supports_flash_attn = False
    _supports_sdpa = False
    _supports_flex_attn = False
    _supports_attention_backend = False
    _can_record_outputs = recorded_outputs(CasanDebertaV2Layer, CasanDisentangledSelfAttention)

    @torch.no_grad()
    def _init_weights(self, module):
        """`CasanPreTrainedModel`'s (transformers' defaults and the context parameters) and DeBERTa's own: the
        masked-LM heads' bias at zero, the embeddings' position ids."""
        super()._init_weights(module)
        if isinstance(module, (LegacyDebertaV2LMPredictionHead, DebertaV2LMPredictionHead)):
            init.zeros_(module.bias)
        elif isinstance(module, DebertaV2Embeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))

    def build_base_model(self, config, add_pooling_layer=False):
        """`CasanDebertaV2Model` under `deberta`, as in transformers. DeBERTa's base model has no pooler: its pooler
        belongs to the sentence heads (`add_sentence_vector_head`)."""
        if add_pooling_layer:
            raise ValueError("DeBERTa's base model has no pooler; its sentence heads hold it.")
        self.deberta = CasanDebertaV2Model(config)


def add_sentence_vector_head(model, config, num_outputs):
    """The sequence-classification and multiple-choice heads' modules, as DeBERTa's: `pooling` (first token for
    `classifier_pooling="cls"`), then DeBERTa's `pooler` (dropout, dense, activation), the classifier's dropout
    (`cls_dropout`, else the hidden one) and the classifier to `num_outputs`. A wider vector ("structured",
    "generalized") gets a dense layer of its width."""
    model.pooling = SentencePooling(config)
    model.pooler = ContextPooler(config)
    if model.pooling.output_size != config.hidden_size:
        model.pooler.dense = nn.Linear(model.pooling.output_size, config.pooler_hidden_size)
    rate = getattr(config, "cls_dropout", None)
    model.dropout = nn.Dropout(config.hidden_dropout_prob if rate is None else rate)
    model.classifier = nn.Linear(model.pooler.output_dim, num_outputs)


class CasanDebertaV2SentenceHeadMixin:
    """The logits of DeBERTa's sentence heads (`add_sentence_vector_head`): its pooler on the sentence vector,
    dropout, classifier."""

    def classify(self, pooled):
        return self.classifier(self.dropout(self.pooler(pooled[:, None])))


class CasanDebertaV2Model(CasanEncoderMixin, CasanDebertaV2PreTrainedModel):
    """The encoder, as `DebertaV2Model`: DeBERTa's embeddings (masked to the real tokens) and the context-aware
    layers with DeBERTa's relative positions. DeBERTa has no pooler in its base model."""

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = DebertaV2Embeddings(config)
        self.encoder = CasanDebertaV2Encoder(config)
        self.post_init()

    def embed_and_encode(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs):
        reference = input_ids if input_ids is not None else inputs_embeds[..., 0]
        if attention_mask is None:
            attention_mask = torch.ones(reference.shape, device=reference.device, dtype=torch.long)
        embedding_output = self.embeddings(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            mask=attention_mask,
            inputs_embeds=inputs_embeds,
        )
        sequence_output = self.encoder(embedding_output, attention_mask, **kwargs)
        return CasanModelOutput(last_hidden_state=sequence_output)


class CasanDebertaV2ForSequenceClassification(
    CasanDebertaV2SentenceHeadMixin, CasanSequenceClassificationMixin, CasanDebertaV2PreTrainedModel
):
    """Single-label, multi-label or regression classifier on the sentence vector of `classifier_pooling` through
    DeBERTa's pooler (by default its own: the first token), with DeBERTa's loss, as
    `DebertaV2ForSequenceClassification`."""

    _fsdp_plan = {"pooling": "keep_full_weight", "pooler": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.build_base_model(config)
        add_sentence_vector_head(self, config, config.num_labels)
        self.post_init()

    def sequence_loss(self, logits, labels):
        """DeBERTa's rule: without `problem_type`, regression for one label, cross-entropy over the labels that are
        not negative for class indices, soft cross-entropy for label distributions."""
        loss = None
        # fmt: off
        # Copied from transformers.models.deberta_v2.modeling_deberta_v2.DebertaV2ForSequenceClassification.forward
        if self.config.problem_type is None:
            if self.num_labels == 1:
                # regression task
                loss_fn = nn.MSELoss()
                logits = logits.view(-1).to(labels.dtype)
                loss = loss_fn(logits, labels.view(-1))
            elif labels.dim() == 1 or labels.size(-1) == 1:
                label_index = (labels >= 0).nonzero()
                labels = labels.long()
                if label_index.size(0) > 0:
                    labeled_logits = torch.gather(
                        logits, 0, label_index.expand(label_index.size(0), logits.size(1))
                    )
                    labels = torch.gather(labels, 0, label_index.view(-1))
                    loss_fct = CrossEntropyLoss()
                    loss = loss_fct(labeled_logits.view(-1, self.num_labels).float(), labels.view(-1))
                else:
                    loss = torch.tensor(0).to(logits)
            else:
                log_softmax = nn.LogSoftmax(-1)
                loss = -((log_softmax(logits) * labels).sum(-1)).mean()
        elif self.config.problem_type == "regression":
            loss_fct = MSELoss()
            if self.num_labels == 1:
                loss = loss_fct(logits.squeeze(), labels.squeeze())
            else:
                loss = loss_fct(logits, labels)
        elif self.config.problem_type == "single_label_classification":
            loss_fct = CrossEntropyLoss()
            loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))
        elif self.config.problem_type == "multi_label_classification":
            loss_fct = BCEWithLogitsLoss()
            loss = loss_fct(logits, labels)
        # End of copy
        # fmt: on
        return loss


class CasanDebertaV2ForTokenClassification(CasanDebertaV2PreTrainedModel, CasanForTokenClassification):
    """`CasanForTokenClassification` (dropout at the hidden rate, one linear layer) for DeBERTa checkpoints, as
    `DebertaV2ForTokenClassification`."""


class CasanDebertaV2ForQuestionAnswering(CasanDebertaV2PreTrainedModel, CasanForQuestionAnswering):
    """`CasanForQuestionAnswering` for DeBERTa checkpoints, as `DebertaV2ForQuestionAnswering`."""


class CasanDebertaV2ForMultipleChoice(
    CasanDebertaV2SentenceHeadMixin, CasanMultipleChoiceMixin, CasanDebertaV2PreTrainedModel
):
    """Scores each choice from its sentence vector through DeBERTa's pooler and one linear layer, as
    `DebertaV2ForMultipleChoice`."""

    _fsdp_plan = {"pooling": "keep_full_weight", "pooler": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.build_base_model(config)
        add_sentence_vector_head(self, config, 1)
        self.post_init()


class CasanDebertaV2ForMaskedLM(CasanMaskedLMMixin, CasanDebertaV2PreTrainedModel):
    """Masked LM with DeBERTa's head, as `DebertaV2ForMaskedLM`: with `legacy` (the config's default, and what
    DeBERTa-v2/v3 checkpoints converted by transformers hold) `cls.predictions`, its decoder tied to the word
    embeddings; else `lm_predictions.lm_head`, which multiplies by the word embeddings itself (nothing to tie)."""

    _tied_weights_keys = {
        "cls.predictions.decoder.bias": "cls.predictions.bias",
        "cls.predictions.decoder.weight": "deberta.embeddings.word_embeddings.weight",
    }
    _keys_to_ignore_on_load_unexpected = [r"mask_predictions.*"]
    _fsdp_plan = {"cls.predictions.transform": "keep_full_weight", "lm_predictions": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.legacy = config.legacy
        self.build_base_model(config)
        if self.legacy:
            self.cls = LegacyDebertaV2OnlyMLMHead(config)
        else:
            self._tied_weights_keys = {}
            self.lm_predictions = DebertaV2OnlyMLMHead(config)
        self.post_init()
        if "_fsdp_plan" in vars(self):  # transformers 5's FSDP2 plan, made from the class's by `post_init`
            # Only the head the model has; the other head reads the word embeddings' weight at every call, so under
            # FSDP2 they stay with it in the root's group.
            absent = (
                ("lm_predictions",)
                if self.legacy
                else ("cls.predictions.transform", "deberta.embeddings.word_embeddings")
            )
            for name in absent:
                self._fsdp_plan.pop(name, None)

    def get_output_embeddings(self):
        """The legacy head's decoder; None for the other, which reads the word embeddings at every call."""
        return self.cls.predictions.decoder if self.legacy else None

    def set_output_embeddings(self, new_embeddings):
        if not self.legacy:
            raise ValueError(
                "A DeBERTa masked LM with legacy=False has no output embeddings to set: its head "
                "(lm_predictions.lm_head) multiplies by the word embeddings, which set_input_embeddings replaces; "
                "with legacy=True the output embeddings are cls.predictions.decoder."
            )
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def _resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of=None, mean_resizing=True):
        """transformers' resize, and, with `legacy=False`, the head's bias (one per word) to the new vocabulary:
        transformers resizes output embeddings only, which that head has none of. New words' biases start at 0."""
        embeddings = super()._resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if not self.legacy:
            head = self.lm_predictions.lm_head
            kept = min(embeddings.num_embeddings, head.bias.shape[0])
            bias = head.bias.new_zeros(embeddings.num_embeddings)
            bias[:kept] = head.bias.detach()[:kept]
            head.bias = nn.Parameter(bias, requires_grad=head.bias.requires_grad)
        return embeddings

    def lm_logits(self, states):
        if self.legacy:
            return self.cls(states)
        return self.lm_predictions(states, self.deberta.embeddings.word_embeddings)


# This file's model classes by (family name, head name), in the order of `HEADS`; `modeling_casan_auto.MODEL_CLASSES`
# gathers every modeling file's.
FAMILY_CLASSES = {
    (model_class.family.name, model_class.casan_head.name): model_class
    for model_class in (
        CasanDebertaV2Model,
        CasanDebertaV2ForSequenceClassification,
        CasanDebertaV2ForTokenClassification,
        CasanDebertaV2ForQuestionAnswering,
        CasanDebertaV2ForMultipleChoice,
        CasanDebertaV2ForMaskedLM,
    )
}


__all__ = [
    "FAMILY_CLASSES",
    "CasanDebertaV2ForMaskedLM",
    "CasanDebertaV2ForMultipleChoice",
    "CasanDebertaV2ForQuestionAnswering",
    "CasanDebertaV2ForSequenceClassification",
    "CasanDebertaV2ForTokenClassification",
    "CasanDebertaV2Model",
    "CasanDebertaV2PreTrainedModel",
]
