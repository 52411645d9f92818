"""A context-aware encoder-decoder for translation: Marian's layout (post-norm Transformer, sinusoidal positions,
shared embeddings) with context-aware self-attention in the encoder, as in Yang et al. (AAAI 2019), whose
authors' code keeps the decoder the plain Transformer decoder.

Every submodule keeps Marian's name (`model.encoder.layers.N.self_attn.q_proj`, ...), so a Marian checkpoint
loads unchanged and only the context parameters (`...self_attn.context_mixer.*`) are new. The decoder, the
cross-attention, the positions, the loss and `generate()` (beam search, the KV cache) are Marian's own,
imported rather than copied. The context is `context.py`'s, shared with the BERT models.
"""

import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers import MarianModel, MarianMTModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoder,
    MarianPreTrainedModel,
    MarianSinusoidalPositionalEmbedding,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .compat import FullyShardedLoading
from .configuration_casan import check_saved_weights, checkpoint_config, converted_start
from .configuration_casan_marian import CasanMarianConfig
from .context import ContextPlan, check_encoder_inputs, run_layers_with_context
from .context_mixer import (
    CasanContextMixer,
    CasanOutputGate,
    layer_context_mixer,
    output_gate,
    self_attention_with_context,
)

# Imported here so that they travel with a local folder on transformers before 5.10 (why: modeling_casan.py).
from .families import get_family  # noqa: F401
from .fused_mixer import FusedMix  # noqa: F401
from .local_bias import CasanLocalBias, local_bias


@dataclass
class CasanMarianEncoderOutput(BaseModelOutput):
    r"""
    context_gates (`tuple(torch.FloatTensor)`, returned with `output_context_gates=True`):
        One tensor per encoder layer of shape `(batch_size, 2, sequence_length)`, or `(batch_size, 2, num_heads,
        sequence_length)` with `gate_per_head`: the query gate lambda_Q (channel 0) and the key gate lambda_K
        (channel 1) of every token (and head); 0 where that layer or target takes no context.
    local_windows (`tuple(torch.FloatTensor)`, returned with `output_local_windows=True`):
        With `local_bias`, one tensor per encoder layer that adds it, `(batch_size, 2, num_heads, sequence_length)`:
        each query's centre P (channel 0) and window D (channel 1), in tokens among the real tokens.
    """

    context_gates: tuple[torch.FloatTensor, ...] | None = None
    head_gates: tuple[torch.FloatTensor, ...] | None = None
    local_windows: tuple[torch.FloatTensor, ...] | None = None


class CasanMarianSelfAttention(MarianAttention):
    """Marian's encoder self-attention (same `q_proj`/`k_proj`/`v_proj`/`out_proj`) plus a context mixer.

    Only the encoder uses it, so it has no cache and no cross-attention: those stay in Marian's decoder.
    """

    def __init__(self, config, layer_idx):
        super().__init__(
            embed_dim=config.d_model,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
        )
        self.context_mixer = layer_context_mixer(config, layer_idx)
        self.output_gate = output_gate(config, layer_idx)
        self.local_bias = local_bias(config, layer_idx)

    def forward(self, hidden_states, attention_mask=None, context=(), **kwargs: Unpack[TransformersKwargs]):
        """Returns the attention output, the attention weights (eager only) and, with `output_context_gates`, the
        gates (`gates_shape`; else None)."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        attn_output, attn_weights, context_gates = self_attention_with_context(
            self, projections, hidden_states, attention_mask, context, self.dropout, **kwargs
        )
        return self.out_proj(attn_output), attn_weights, context_gates


class CasanMarianEncoderLayer(GradientCheckpointingLayer):
    """Marian's post-norm encoder layer (same submodule names) around the context-aware self-attention."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.embed_dim = config.d_model
        self.self_attn = CasanMarianSelfAttention(config, layer_idx)
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.dropout = config.dropout
        self.activation_fn = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout
        self.fc1 = nn.Linear(self.embed_dim, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim)

    def forward(self, hidden_states, attention_mask, *context, **kwargs: Unpack[TransformersKwargs]):
        """`context`: the tensors of the layer's `layer_context`, positional so that checkpointing sees them."""
        residual = hidden_states
        hidden_states, _, _ = self.self_attn(hidden_states, attention_mask, context, **kwargs)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.self_attn_layer_norm(residual + hidden_states)

        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.final_layer_norm(residual + hidden_states)

        if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states


class CasanMarianPreTrainedModel(FullyShardedLoading, MarianPreTrainedModel):
    config_class = CasanMarianConfig
    config: CasanMarianConfig
    _no_split_modules = ["CasanMarianEncoderLayer", "MarianDecoderLayer"]

    @torch.no_grad()
    def _init_weights(self, module):
        """Marian's initialisation, plus the context parameters: U and the gate vectors ~ N(0, context_init_range,
        else `init_std`), the gate bias at `gate_bias_init`. A sinusoidal table sharded by FSDP2 gets its shard of
        the sinusoids (Marian's own copies the whole table into the shard, which fails)."""
        if isinstance(module, MarianSinusoidalPositionalEmbedding) and isinstance(module.weight, DTensor):
            weight = module.weight
            sinusoids = module.create_weight().to(weight.device_mesh.device_type)
            init.copy_(weight, distribute_tensor(sinusoids, weight.device_mesh, weight.placements))
            return
        super()._init_weights(module)
        std = self.config.init_std if self.config.context_init_range is None else self.config.context_init_range
        if isinstance(module, CasanContextMixer):
            module.initialize(std, self.config.gate_bias_init)
        elif isinstance(module, (CasanOutputGate, CasanLocalBias)):
            module.initialize(std)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Loads a Marian checkpoint (converted: the context parameters are new, and the model has no checkpoint
        of its own until saved) or a CASAN-Marian one (continued: its structural context options must not change,
        or its trained context would be dropped or replaced by random weights)."""
        saved = checkpoint_config(
            pretrained_model_name_or_path, kwargs, CasanMarianConfig, "marian", "CasanMarian models"
        )
        folder = os.path.join(pretrained_model_name_or_path, kwargs.get("subfolder") or "")
        if os.path.isdir(folder):
            check_saved_weights(folder, cls, saved)
        kwargs = converted_start(kwargs, saved, CasanMarianConfig)
        loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if saved.get("model_type") != CasanMarianConfig.model_type:
            (loaded[0] if isinstance(loaded, tuple) else loaded).name_or_path = ""
        return loaded


class CasanMarianEncoder(CasanMarianPreTrainedModel):
    """Marian's encoder (embeddings scaled as configured, sinusoidal positions) whose layers attend with context."""

    _can_record_outputs = {
        "hidden_states": CasanMarianEncoderLayer,
        "attentions": OutputRecorder(CasanMarianSelfAttention, index=1),
        "context_gates": OutputRecorder(CasanMarianSelfAttention, index=2),
        "head_gates": OutputRecorder(CasanOutputGate, index=0),
        "local_windows": OutputRecorder(CasanLocalBias, index=0),
    }

    def __init__(self, config):
        config.check_context_options()
        super().__init__(config)
        self.dropout = config.dropout
        self.embed_scale = config.d_model**0.5 if config.scale_embedding else 1.0
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.embed_positions = MarianSinusoidalPositionalEmbedding(
            config.max_position_embeddings, config.d_model, config.pad_token_id
        )
        self.context_plan = ContextPlan.from_config(config)
        self.layers = nn.ModuleList([CasanMarianEncoderLayer(config, i) for i in range(config.encoder_layers)])
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self, input_ids=None, attention_mask=None, inputs_embeds=None, **kwargs: Unpack[TransformersKwargs]
    ) -> CasanMarianEncoderOutput:
        check_encoder_inputs(input_ids, inputs_embeds, attention_mask)
        # The layers make gates only when asked: as transformers' output capture, from the config if not given.
        kwargs.setdefault("output_context_gates", getattr(self.config, "output_context_gates", False))
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
        hidden_states = inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        extended_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask
        )
        hidden_states = run_layers_with_context(
            self.context_plan, self.layers, hidden_states, extended_mask, attention_mask, **kwargs
        )
        return CasanMarianEncoderOutput(last_hidden_state=hidden_states)


class CasanMarianDecoder(CasanMarianPreTrainedModel, MarianDecoder):
    """Marian's decoder, initialised as the rest of the model (its sinusoidal table too, when FSDP2 shards it)."""


class CasanMarianModel(CasanMarianPreTrainedModel, MarianModel):
    """`MarianModel` (its forward, embeddings and tying) with the context-aware encoder. Under FSDP2 each layer is
    a group of its own; the embeddings (shared with the output layer) and the rest are the root's group."""

    _fsdp_plan = {"encoder.layers.*": "free_full_weight", "decoder.layers.*": "free_full_weight"}

    def __init__(self, config):
        # Skips MarianModel.__init__, which would build Marian's own encoder; the rest is what it builds.
        super(MarianModel, self).__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self._tied_weights_keys = {
            "decoder.embed_tokens.weight": "shared.weight",
            "encoder.embed_tokens.weight": "shared.weight",
        }
        self.encoder = CasanMarianEncoder(config)
        self.decoder = CasanMarianDecoder(config)
        self.post_init()


class CasanMarianMTModel(CasanMarianPreTrainedModel, MarianMTModel):
    """`MarianMTModel` (its forward, loss and `generate()`) on `CasanMarianModel`.

    The context gates of the encoder: `model.get_encoder()(input_ids, attention_mask, output_context_gates=True)`.
    """

    def __init__(self, config):
        # Skips MarianMTModel.__init__, which would build a MarianModel; the rest is what it builds.
        super(MarianMTModel, self).__init__(config)
        self.model = CasanMarianModel(config)
        self._tied_weights_keys = {
            "lm_head.weight": "model.shared.weight",
            "model.decoder.embed_tokens.weight": "model.shared.weight",
            "model.encoder.embed_tokens.weight": "model.shared.weight",
        }
        self.final_logits_bias = nn.Buffer(torch.zeros((1, config.vocab_size)))
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()


__all__ = [
    "CasanMarianEncoder",
    "CasanMarianModel",
    "CasanMarianMTModel",
    "CasanMarianPreTrainedModel",
]
