"""Context-aware self-attention (Yang et al., AAAI 2019) in the layout of `transformers`' ModernBERT: pre-norm layers,
a fused `Wqkv` projection, rotary positions, alternating global and sliding-window attention, a GLU feed-forward.

Every submodule keeps ModernBERT's name (`model.layers.N.attn.Wqkv`, `head.dense`, `decoder`, ...), so any ModernBERT
checkpoint loads unchanged and only the context parameters (`...attn.context_mixer.*`) are new. The embeddings, the
feed-forward, the rotary embedding and the prediction head are transformers' own modules, imported rather than
copied; the context (its sources, the loop over the layers, the mixer and the output gate) is the one the BERT-style
encoders use (`context.py`, `context_mixer.py`). Where the context meets the attention (docs/FAMILIES.md,
"ModernBERT"):

- Q and K are the first two thirds of `Wqkv`'s output; the context is mixed into them at full width `(batch, n, d)`
  *before* the rotary embedding rotates them, so that q.k stays a function of the tokens' relative positions (a
  context vector added after the rotation would meet every query at an angle set by its absolute position).
- A layer's context source is the residual stream entering the layer (the paper's H^{l-1}), before the layer's
  `attn_norm`; deep context reads the same streams of the earlier layers. The global mean is over the whole
  sentence in every layer, the sliding-window layers included.
- The heads' sentence vector is `classifier_pooling`'s (casan_hf/pooling.py): ModernBERT's "cls" and "mean", and
  CASAN's attentive poolings, whose wider vector the prediction head's dense layer reads.

The classes follow the order of `families.HEADS`: `CasanModernBertPreTrainedModel`, then the base model and the
five heads; `FAMILY_CLASSES` lists them.
"""

import torch
from torch import nn
from transformers import initialization as init
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.modernbert.modeling_modernbert import (
    ModernBertEmbeddings,
    ModernBertMLP,
    ModernBertPredictionHead,
    ModernBertRotaryEmbedding,
    apply_rotary_pos_emb,
    eager_attention_forward,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs

from .configuration_casan_modernbert import CasanModernBertConfig
from .context import ContextPlan, run_layers_with_context
from .context_mixer import (
    attention_head_dim,
    attention_interface,
    gate_head_outputs,
    layer_context_mixer,
    local_windows,
    mix_context,
    output_gate,
)
from .families import get_family

# Imported here so that they travel with a local folder on transformers before 5.10 (why: modeling_casan.py).
from .fused_mixer import FusedMix  # noqa: F401
from .local_bias import attend_with_local_bias, local_bias
from .modeling_casan import (
    CasanEncoderMixin,
    CasanMaskedLMMixin,
    CasanModelOutput,
    CasanMultipleChoiceMixin,
    CasanPreTrainedModel,
    CasanQuestionAnsweringMixin,
    CasanSequenceClassificationMixin,
    CasanTokenClassificationMixin,
    recorded_outputs,
)
from .pooling import SentencePooling


class CasanModernBertAttention(nn.Module):
    """ModernBERT's attention (same `Wqkv`, `Wo` and `out_drop`, so ModernBERT weights load) plus a context mixer
    between the projection and the rotary embedding, and the output gate where the config asks for one."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.is_causal = False
        self.attention_dropout = config.attention_dropout
        self.deterministic_flash_attn = config.deterministic_flash_attn
        self.head_dim = attention_head_dim(config)
        self.scaling = self.head_dim**-0.5
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        # As ModernBERT: the half window, +1 because flash attention's window bounds are inclusive.
        sliding = config.layer_types[layer_idx] == "sliding_attention"
        self.sliding_window = config.sliding_window + 1 if sliding else None
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.out_drop = nn.Dropout(config.attention_dropout) if config.attention_dropout > 0.0 else nn.Identity()
        self.context_mixer = layer_context_mixer(config, layer_idx)
        self.output_gate = output_gate(config, layer_idx)
        self.local_bias = local_bias(config, layer_idx)

    def forward(
        self, hidden_states, position_embeddings, attention_mask=None, context=(), **kwargs: Unpack[TransformersKwargs]
    ):
        """Returns the attention output, the attention weights (eager only) and, with `output_context_gates`, the
        gates (`gates_shape`; else None). `hidden_states` is the normed layer input, `context` the layer's
        `ContextPlan.layer_context`, `position_embeddings` the rotary (cos, sin) of the layer's type."""
        input_shape = hidden_states.shape[:-1]
        positions = kwargs.pop("token_positions", None)
        query, key, value = self.Wqkv(hidden_states).view(*input_shape, 3, -1).unbind(dim=-2)
        query, key, gates = mix_context(self, query, key, context, kwargs.get("output_context_gates", False))
        windows = local_windows(self, query, key, positions)
        hidden_shape = (*input_shape, -1, self.head_dim)
        query, key, value = (states.view(hidden_shape).transpose(1, 2) for states in (query, key, value))
        cos, sin = position_embeddings
        query, key = apply_rotary_pos_emb(query, key, cos, sin, unsqueeze_dim=1)
        interface = attention_interface(self.config._attn_implementation, eager_attention_forward)
        kwargs.update(
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            sliding_window=self.sliding_window,
            deterministic=self.deterministic_flash_attn,
        )
        if windows is None:
            output, weights = interface(self, query, key, value, attention_mask, **kwargs)
        else:  # the sliding window's mask, where the layer has one, beside the bias
            output, weights = attend_with_local_bias(
                self, interface, query, key, value, attention_mask, windows, positions, **kwargs
            )  # output: (batch, n, heads, d_head)
        output = gate_head_outputs(self, output, hidden_states, context)
        output = self.out_drop(self.Wo(output.reshape(*input_shape, -1).contiguous()))
        return output, weights, gates


class CasanModernBertEncoderLayer(GradientCheckpointingLayer):
    """ModernBERT's pre-norm layer (same submodule names) around the context-aware attention."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        if layer_idx == 0:
            self.attn_norm = nn.Identity()
        else:
            self.attn_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.attn = CasanModernBertAttention(config, layer_idx)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config)
        self.attention_type = config.layer_types[layer_idx]

    def forward(
        self, hidden_states, attention_masks, *context, position_embeddings=None, **kwargs: Unpack[TransformersKwargs]
    ):
        """`attention_masks` and `position_embeddings`: each layer type's mask and rotary (cos, sin), of which the
        layer takes its own; `context`: the tensors of the layer's `layer_context` (read from `hidden_states` as it
        enters the layer, before `attn_norm`), positional so that checkpointing sees them."""
        attention_output, _, _ = self.attn(
            self.attn_norm(hidden_states),
            position_embeddings[self.attention_type],
            attention_masks[self.attention_type],
            context,
            **kwargs,
        )
        hidden_states = hidden_states + attention_output
        return hidden_states + self.mlp(self.mlp_norm(hidden_states))


class CasanModernBertPreTrainedModel(CasanPreTrainedModel):
    """Loads ModernBERT checkpoints, as `ModernBertPreTrainedModel`: `from_pretrained`'s checks, FSDP2 loading and the
    PEFT guard are `CasanPreTrainedModel`'s, the initialisation ModernBERT's plus the context's."""

    family = get_family("modernbert")
    family_modules = None
    has_token_types = False
    config_class = CasanModernBertConfig
    config: CasanModernBertConfig
    base_model_prefix = "model"
    _no_split_modules = ["ModernBertEmbeddings", "CasanModernBertEncoderLayer"]
    _can_record_outputs = recorded_outputs(CasanModernBertEncoderLayer, CasanModernBertAttention)

    @torch.no_grad()
    def _init_weights(self, module):
        """transformers' and the context's initialisation (`CasanPreTrainedModel._init_weights`), then ModernBERT's
        truncated normals: the input projections at `initializer_range`, the output projections scaled down with
        depth, the classifiers at 1/sqrt(hidden_size), and the rotary frequencies."""
        super()._init_weights(module)
        config = self.config
        cutoff = 3 if config.initializer_cutoff_factor is None else config.initializer_cutoff_factor
        stds = {
            "in": config.initializer_range,
            "out": config.initializer_range / (2.0 * config.num_hidden_layers) ** 0.5,
            "final_out": config.hidden_size**-0.5,
        }

        def truncated(linear, std):
            init.trunc_normal_(linear.weight, mean=0.0, std=std, a=-cutoff * std, b=cutoff * std)
            if isinstance(linear, nn.Linear) and linear.bias is not None:
                init.zeros_(linear.bias)

        if isinstance(module, ModernBertEmbeddings):
            truncated(module.tok_embeddings, stds["in"])
        elif isinstance(module, ModernBertMLP):
            truncated(module.Wi, stds["in"])
            truncated(module.Wo, stds["out"])
        elif isinstance(module, CasanModernBertAttention):
            truncated(module.Wqkv, stds["in"])
            truncated(module.Wo, stds["out"])
        elif isinstance(module, ModernBertPredictionHead):
            truncated(module.dense, stds["out"])
        elif isinstance(module, CasanModernBertForMaskedLM):
            truncated(module.decoder, stds["out"])
        elif isinstance(module, CasanModernBertPredictionHeadMixin):  # the heads with a `classifier`
            truncated(module.classifier, stds["final_out"])
        elif isinstance(module, ModernBertRotaryEmbedding):
            for layer_type in module.layer_types:
                rope_init = module.compute_default_rope_parameters
                if module.rope_type[layer_type] != "default":
                    rope_init = ROPE_INIT_FUNCTIONS[module.rope_type[layer_type]]
                inv_freq, _ = rope_init(module.config, layer_type=layer_type)
                init.copy_(getattr(module, f"{layer_type}_inv_freq"), inv_freq)
                init.copy_(getattr(module, f"{layer_type}_original_inv_freq"), inv_freq)


class CasanModernBertModel(CasanEncoderMixin, CasanModernBertPreTrainedModel):
    """The encoder, as `ModernBertModel`: ModernBERT's embeddings, the context-aware layers (each with its layer
    type's mask and rotary embedding), and the final norm after them."""

    word_embeddings_name = "tok_embeddings"

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = ModernBertEmbeddings(config)
        self.context_plan = ContextPlan.from_config(config)
        self.layers = nn.ModuleList(
            [CasanModernBertEncoderLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)]
        )
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.rotary_emb = ModernBertRotaryEmbedding(config=config)
        self.post_init()

    def embed_and_encode(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, **kwargs):
        reference = input_ids if input_ids is not None else inputs_embeds
        if position_ids is None:
            position_ids = torch.arange(reference.shape[1], device=reference.device).unsqueeze(0)
        hidden_states = self.embeddings(input_ids=input_ids, inputs_embeds=inputs_embeds)
        mask_kwargs = {"config": self.config, "inputs_embeds": hidden_states, "attention_mask": attention_mask}
        attention_masks = {
            "full_attention": create_bidirectional_mask(**mask_kwargs),
            "sliding_attention": create_bidirectional_sliding_window_mask(**mask_kwargs),
        }
        position_embeddings = {
            layer_type: self.rotary_emb(hidden_states, position_ids, layer_type)
            for layer_type in sorted(set(self.config.layer_types))
        }
        hidden_states = run_layers_with_context(
            self.context_plan,
            self.layers,
            hidden_states,
            attention_masks,
            attention_mask,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        return CasanModelOutput(last_hidden_state=self.final_norm(hidden_states))


def add_prediction_head(model, config, in_features, num_outputs):
    """ModernBERT's classifier of a head, under its names: the prediction head (`head`: dense, activation, norm) whose
    dense layer reads `in_features` (wider than `hidden_size` for the attentive poolings), dropout (`drop`) and one
    linear layer (`classifier`) to `num_outputs`."""
    model.head = ModernBertPredictionHead(config)
    if in_features != config.hidden_size:
        model.head.dense = nn.Linear(in_features, config.hidden_size, config.classifier_bias)
    model.drop = nn.Dropout(config.classifier_dropout)
    model.classifier = nn.Linear(config.hidden_size, num_outputs)


class CasanModernBertPredictionHeadMixin:
    """The logits of ModernBERT's classifying heads: prediction head, dropout, classifier (`add_prediction_head`)."""

    def classify(self, states):
        return self.classifier(self.drop(self.head(states)))


class CasanModernBertForSequenceClassification(
    CasanModernBertPredictionHeadMixin, CasanSequenceClassificationMixin, CasanModernBertPreTrainedModel
):
    """Single-label, multi-label or regression classifier on the sentence vector of `classifier_pooling` (ModernBERT's
    "cls": the first token; "mean"; or CASAN's attentive poolings) through ModernBERT's prediction head, dropout and
    one linear layer, as `ModernBertForSequenceClassification`."""

    _fsdp_plan = {"pooling": "keep_full_weight", "head": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = CasanModernBertModel(config)
        self.pooling = SentencePooling(config)
        add_prediction_head(self, config, self.pooling.output_size, config.num_labels)
        self.post_init()


class CasanModernBertTokenHeadMixin(CasanModernBertPredictionHeadMixin):
    """ModernBERT's heads that classify every token (token classification, question answering): the base model and
    a prediction head, dropout and classifier to `num_labels` outputs a token."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = CasanModernBertModel(config)
        add_prediction_head(self, config, config.hidden_size, config.num_labels)
        self.post_init()


class CasanModernBertForTokenClassification(
    CasanModernBertTokenHeadMixin, CasanTokenClassificationMixin, CasanModernBertPreTrainedModel
):
    """A label for every token, through ModernBERT's prediction head, dropout and one linear layer, as
    `ModernBertForTokenClassification`."""

    _fsdp_plan = {"head": "keep_full_weight", "classifier": "keep_full_weight"}


class CasanModernBertForQuestionAnswering(
    CasanModernBertTokenHeadMixin, CasanQuestionAnsweringMixin, CasanModernBertPreTrainedModel
):
    """Extractive question answering (start and end logits of every token) through ModernBERT's prediction head,
    dropout and one linear layer, as `ModernBertForQuestionAnswering`."""

    _fsdp_plan = {"head": "keep_full_weight", "classifier": "keep_full_weight"}


class CasanModernBertForMultipleChoice(
    CasanModernBertPredictionHeadMixin, CasanMultipleChoiceMixin, CasanModernBertPreTrainedModel
):
    """Scores each choice from its sentence vector of `classifier_pooling` through ModernBERT's prediction head,
    dropout and one linear layer, as `ModernBertForMultipleChoice` (whose "cls" vector is the first real token, so
    that left padding works too)."""

    _fsdp_plan = {"pooling": "keep_full_weight", "head": "keep_full_weight", "classifier": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.model = CasanModernBertModel(config)
        self.pooling = SentencePooling(config)
        add_prediction_head(self, config, self.pooling.output_size, 1)
        self.post_init()

    def cls_vector(self, outputs, attention_mask):
        """The first real token of each choice (ModernBERT's multiple choice), where `classifier_pooling` is "cls"."""
        if self.pooling.kind != "cls" or attention_mask is None:
            return None
        states = outputs.last_hidden_state
        return states[torch.arange(states.shape[0], device=states.device), attention_mask.argmax(dim=-1)]


class CasanModernBertForMaskedLM(CasanMaskedLMMixin, CasanModernBertPreTrainedModel):
    """Masked LM with ModernBERT's head (`head`, then `decoder`, tied to the token embeddings), as
    `ModernBertForMaskedLM`; with `sparse_prediction` and labels, the logits of the masked tokens only."""

    _tied_weights_keys = {"decoder.weight": "model.embeddings.tok_embeddings.weight"}
    # The decoder, tied to the token embeddings, stays with them in the root's group.
    _fsdp_plan = {"head": "keep_full_weight"}

    def __init__(self, config):
        super().__init__(config)
        self.model = CasanModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=config.decoder_bias)
        self.sparse_prediction = config.sparse_prediction
        self.sparse_pred_ignore_index = config.sparse_pred_ignore_index
        self.post_init()

    def get_output_embeddings(self):
        return self.decoder

    def set_output_embeddings(self, new_embeddings):
        self.decoder = new_embeddings

    def predicted_tokens(self, states, labels):
        """With `sparse_prediction`, as ModernBERT: only the masked tokens (those whose label is not
        `sparse_pred_ignore_index`), flattened."""
        if not self.sparse_prediction:
            return states, labels
        labels = labels.view(-1)
        states = states.view(labels.shape[0], -1)
        masked = labels != self.sparse_pred_ignore_index
        return states[masked], labels[masked]

    def lm_logits(self, states):
        return self.decoder(self.head(states))


# This file's model classes by (family name, head name) in the order of `HEADS`; `modeling_casan_auto.MODEL_CLASSES`
# gathers every modeling file's.
FAMILY_CLASSES = {
    (model_class.family.name, model_class.casan_head.name): model_class
    for model_class in (
        CasanModernBertModel,
        CasanModernBertForSequenceClassification,
        CasanModernBertForTokenClassification,
        CasanModernBertForQuestionAnswering,
        CasanModernBertForMultipleChoice,
        CasanModernBertForMaskedLM,
    )
}


__all__ = [
    "FAMILY_CLASSES",
    "CasanModernBertForMaskedLM",
    "CasanModernBertForMultipleChoice",
    "CasanModernBertForQuestionAnswering",
    "CasanModernBertForSequenceClassification",
    "CasanModernBertForTokenClassification",
    "CasanModernBertModel",
    "CasanModernBertPreTrainedModel",
]
