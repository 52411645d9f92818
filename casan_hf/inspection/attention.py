"""The context gates, attention maps and pooling hops of one text, aligned with its tokens."""

from dataclasses import dataclass, field

import torch
import transformers
from transformers import AutoConfig, AutoTokenizer

from ..options import ATTENTIVE_POOLINGS
from .heads import checkpoint_head, inspected_families, model_head


# The most tokens a text is cut to for the plots and the explorer: beyond it a token's row in an attention map
# falls under the height of its label.
MAX_TOKENS = 64


@dataclass
class AttentionInspection:
    r"""
    What a model did with one text; every per-token axis follows `tokens`.

    Args:
        tokens (`list[str]`): the tokens, special tokens included, as the tokenizer wrote them.
        attentions (`torch.FloatTensor` of shape `(num_layers, num_heads, num_tokens, num_tokens)`):
            the attention weights; row i is where token i looks (at tokens 0..i alone in a causal LM).
        query_gates (`torch.FloatTensor` of shape `(num_layers, num_tokens)`):
            lambda_Q, how much the context shaped each token's query (the mean over the heads with
            `gate_per_head`); 0 where a layer takes no context. `None` for a model without context (plain BERT).
        key_gates (`torch.FloatTensor` of shape `(num_layers, num_tokens)`):
            lambda_K, the same for each token's key.
        output_gates (`torch.FloatTensor` of shape `(num_layers, num_tokens)`):
            with `output_gate`, how much of each token's attention output the gate passes on (the mean over its
            heads or channels); `None` for a model without one.
        pooling_attentions (`torch.FloatTensor` of shape `(pooling_hops, num_tokens)`):
            the hops of `classifier_pooling="structured"`, or the heads of `"generalized"` with each token's
            weights averaged over the hidden dimensions; `None` for other models.
        logits (`torch.FloatTensor`): the head's logits for this text, without the batch axis: `(num_labels,)`
            for sequence classification, `(1,)` for multiple choice (this text is one choice),
            `(num_tokens, num_labels)` for token classification, `(num_tokens, vocab_size)` for masked and causal LM,
            `(num_tokens, 2)` (start, end) for question answering; `None` for a bare model.
        sequence_ids (`list[int | None]`): which text each token comes from (0, 1 for the pair; `None` for
            special tokens), as the tokenizer's `sequence_ids`.
        local_windows (`dict[int, torch.FloatTensor]`): with `local_bias`, for each layer that adds it, each query's
            predicted centre P and window D in tokens, `(2, num_heads, num_tokens)`; empty for other models.
    """

    tokens: list[str]
    attentions: torch.Tensor
    query_gates: torch.Tensor | None = None
    key_gates: torch.Tensor | None = None
    output_gates: torch.Tensor | None = None
    pooling_attentions: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    sequence_ids: list = field(default_factory=list)
    local_windows: dict = field(default_factory=dict)

    @property
    def layers_with_context(self):
        """Per layer, whether it takes context: its gates are all 0 where it does not. All False without gates."""
        if self.query_gates is None:
            return [False] * self.attentions.shape[0]
        return (self.query_gates != 0).any(-1).tolist()

    def gate_range(self):
        """(min, max) over the gates of the layers with context and the output gates, the one scale of every gate
        heatmap: gates near their initial value still vary. (0, 1) where there are none."""
        if self.query_gates is None:
            return 0.0, 1.0
        gates = torch.cat([self.query_gates, self.key_gates])
        gated = gates[gates != 0]
        if self.output_gates is not None:
            gated = torch.cat([gated, self.output_gates.flatten()])
        return (float(gated.min()), float(gated.max())) if gated.numel() else (0.0, 1.0)

    def local_weights(self, layer, head):
        """exp(G) `(num_tokens, num_tokens)` of `layer` and `head`: the factor by which the local bias scales the
        attention of query i (row) to token j (column), 1 at the centre, exp(-0.5) = 0.61 half a window from it and
        exp(-2) = 0.14 a whole window from it (before the bias's scale, where it has one). None for a layer without
        the bias."""
        if layer not in self.local_windows:
            return None
        centres, windows = self.local_windows[layer][:, head]
        positions = torch.arange(centres.shape[0], dtype=centres.dtype)
        distances = positions[None, :] - centres[:, None]
        return torch.exp(-2.0 * distances.square() / windows[:, None].square())


def load_for_inspection(name_or_path, tokenizer_name_or_path=None, **kwargs):
    """The model (with eager attention, which alone returns attention weights) and its tokenizer (from
    `tokenizer_name_or_path`, by default the checkpoint's). The checkpoint is loaded with the head its
    `architectures` names, for that head's prediction and pooling hops; a ValueError names a model type outside
    CASAN's families or a head that cannot be inspected, before any weights are read."""
    config = AutoConfig.from_pretrained(name_or_path, **kwargs)
    auto_class = getattr(transformers, checkpoint_head(config).auto_class)
    model = auto_class.from_pretrained(name_or_path, attn_implementation="eager", **kwargs).eval()
    return model, AutoTokenizer.from_pretrained(tokenizer_name_or_path or name_or_path, **kwargs)


@torch.no_grad()
def inspect_attention(model, tokenizer, text, text_pair=None, max_length=None):
    """Runs `model` in eval mode on `text` (and `text_pair`), truncated to `max_length` tokens if given,
    and returns an [`AttentionInspection`]. The model's attention implementation and training mode are
    switched to eager and eval for this call only."""
    encoded = tokenizer(text, text_pair, truncation=max_length is not None, max_length=max_length, return_tensors="pt")
    # By model type, not config class: the ModernBERT, DeBERTa and causal configs are no CasanConfig, and a folder
    # loaded with trust_remote_code has its own copy of each class.
    is_casan = model.config.model_type in {family.model_type for family in inspected_families()}
    pooling = getattr(model, "pooling", None) if is_casan else None
    attentive = pooling is not None and pooling.kind in ATTENTIVE_POOLINGS
    choices = model_head(model).takes_choices  # the text is the one choice of its example
    inputs = {name: (tensor[:, None] if choices else tensor).to(model.device) for name, tensor in encoded.items()}
    output_gated = is_casan and model.config.output_gate is not None
    local_layers = [index for index in range(model.config.num_hidden_layers) if is_casan and has_local(model, index)]
    if is_casan:
        inputs["output_context_gates"] = True
        inputs["output_head_gates"] = output_gated
        inputs["output_local_windows"] = bool(local_layers)
    if attentive:
        inputs["output_pooling_attentions"] = True

    attn_implementation, training = model.config._attn_implementation, model.training
    model.set_attn_implementation("eager")
    model.eval()
    try:
        outputs = model(**inputs, output_attentions=True)
    finally:
        model.set_attn_implementation(attn_implementation)
        model.train(training)

    gates = torch.stack(outputs.context_gates)[:, 0].float().cpu() if is_casan else None
    if gates is not None and gates.dim() == 4:  # a gate per head: (layers, 2, heads, n), shown as the heads' mean
        gates = gates.mean(2)
    hops = outputs.pooling_attentions if attentive else None
    if hops is not None and pooling.kind == "generalized":
        hops = hops.mean(-1)  # each token's weight per head, averaged over the hidden dimensions
    logits = outputs.get("logits")
    if logits is None and outputs.get("start_logits") is not None:  # question answering
        logits = torch.stack([outputs.start_logits, outputs.end_logits], dim=-1)
    return AttentionInspection(
        tokens=tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist()),
        attentions=torch.stack(outputs.attentions)[:, 0].float().cpu(),
        query_gates=None if gates is None else gates[:, 0],
        key_gates=None if gates is None else gates[:, 1],
        output_gates=torch.stack(outputs.head_gates)[:, 0].float().mean(-1).cpu() if output_gated else None,
        pooling_attentions=None if hops is None else hops.flatten(0, -3)[0].float().cpu(),
        logits=None if logits is None else logits[0].float().cpu(),
        sequence_ids=encoded.sequence_ids(0),
        local_windows={
            layer: windows[0].float().cpu()
            for layer, windows in zip(local_layers, outputs.get("local_windows") or (), strict=True)
        },
    )


def has_local(model, layer):
    """Whether `layer` of a CASAN model adds the local bias (a config saved before the option reads as without)."""
    return getattr(model.config, "local_bias", None) is not None and model.config.has_local_bias(layer)
