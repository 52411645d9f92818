"""Look inside a model on one text: the context gates, the attention maps and the pooling hops, aligned
with the tokens, for users who want to see (or plot) what the context does.

Works for CASAN models of every context type and for plain `transformers` BERT models (which have no
gates and no pooling hops).
"""

from dataclasses import dataclass

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoTokenizer

from ..configuration_casan import CasanConfig
from ..families import HEADS
from ..options import ATTENTIVE_POOLINGS


# The heads that classify a sentence vector say more than the encoder: their logits and the structured
# pooling's hops. Keyed by the class-name suffix that CASAN and transformers architectures share.
SENTENCE_HEADS = {head.suffix: getattr(transformers, head.auto_class) for head in HEADS if head.pools_sentence}


@dataclass
class AttentionInspection:
    r"""
    What a model did with one text; every per-token axis follows `tokens`.

    Args:
        tokens (`list[str]`): the tokens, special tokens included, as the tokenizer wrote them.
        attentions (`torch.FloatTensor` of shape `(num_layers, num_heads, num_tokens, num_tokens)`):
            the attention weights; row i is where token i looks.
        query_gates, key_gates (`torch.FloatTensor` of shape `(num_layers, num_tokens)`):
            lambda_Q and lambda_K, how much the context shaped each token's query and key; 0 where a layer
            takes no context. `None` for a model without context (plain BERT).
        pooling_attentions (`torch.FloatTensor` of shape `(pooling_hops, num_tokens)`):
            the hops of `classifier_pooling="structured"`, or the heads of `"generalized"` with each token's
            weights averaged over the hidden dimensions; `None` for other models.
        logits (`torch.FloatTensor`): the head's logits for this text; `None` for a bare encoder.
    """

    tokens: list[str]
    attentions: torch.Tensor
    query_gates: torch.Tensor | None = None
    key_gates: torch.Tensor | None = None
    pooling_attentions: torch.Tensor | None = None
    logits: torch.Tensor | None = None


def load_for_inspection(name_or_path, tokenizer_name_or_path=None, **kwargs):
    """The model (with eager attention, which alone returns attention weights) and its tokenizer (from
    `tokenizer_name_or_path`, by default the checkpoint's). A sequence-classification or multiple-choice
    checkpoint is loaded with its head, for its logits and pooling hops; any other as its encoder."""
    config = AutoConfig.from_pretrained(name_or_path, **kwargs)
    auto_class = AutoModel
    for suffix, head_class in SENTENCE_HEADS.items():
        if any(name.endswith(suffix) for name in config.architectures or ()):
            auto_class = head_class
    model = auto_class.from_pretrained(name_or_path, attn_implementation="eager", **kwargs).eval()
    return model, AutoTokenizer.from_pretrained(tokenizer_name_or_path or name_or_path, **kwargs)


@torch.no_grad()
def inspect_attention(model, tokenizer, text, text_pair=None, max_length=None):
    """Runs `model` in eval mode on `text` (and `text_pair`), truncated to `max_length` tokens if given,
    and returns an [`AttentionInspection`]. The model's attention implementation and training mode are
    switched to eager and eval for this call only."""
    encoded = tokenizer(text, text_pair, truncation=max_length is not None, max_length=max_length, return_tensors="pt")
    is_casan = isinstance(model.config, CasanConfig)
    pooling = getattr(model, "pooling", None) if is_casan else None
    attentive = pooling is not None and pooling.kind in ATTENTIVE_POOLINGS
    multiple_choice = type(model).__name__.endswith("ForMultipleChoice")
    inputs = {
        name: (tensor[:, None] if multiple_choice else tensor).to(model.device) for name, tensor in encoded.items()
    }
    if is_casan:
        inputs["output_context_gates"] = True
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
    hops = outputs.pooling_attentions if attentive else None
    if hops is not None and pooling.kind == "generalized":
        hops = hops.mean(-1)  # each token's weight per head, averaged over the hidden dimensions
    logits = outputs.get("logits")
    return AttentionInspection(
        tokens=tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist()),
        attentions=torch.stack(outputs.attentions)[:, 0].float().cpu(),
        query_gates=None if gates is None else gates[:, 0],
        key_gates=None if gates is None else gates[:, 1],
        pooling_attentions=None if hops is None else hops.flatten(0, -3)[0].float().cpu(),
        logits=None if logits is None else logits.reshape(-1).float().cpu(),
    )


__all__ = ["AttentionInspection", "inspect_attention", "load_for_inspection"]
