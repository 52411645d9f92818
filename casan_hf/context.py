"""The context of context-aware self-attention: what each layer's context C is made of.

For a layer input H and its context C (one row per sentence, or one row per token for deep context), the layer's
query and key take C through its gates (`context_mixer.py`):

    Q^ = (1 - lam_Q) * Q + lam_Q * (C U_Q),    lam_Q = sigmoid(Q v_Q^H + (C U_Q) v_Q^C + b_Q)

What each context type is lives in one table, `CONTEXT_KINDS`, whose rows everything else reads. The encoder
builds C layer by layer by its `ContextPlan`, computed once from the config: `context_source` is what a layer input
contributes, `layer_context` assembles a layer's C.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch


# The transforms the context is mixed into, in the order of the gates' channels. V is never touched.
CONTEXT_TARGETS = ("query", "key")
# The module-name fragments of every parameter CASAN adds to its source model, the context mixer's
# (`CasanContextMixer`, `...attention.self.context_mixer.gate_bias`), the output gate's (`CasanOutputGate`) and the
# local bias's (`CasanLocalBias`): what a
# conversion starts new, and what a continued checkpoint must hold in the same shapes.
CONTEXT_MIXER_MODULE = ".context_mixer."
OUTPUT_GATE_MODULE = ".output_gate."
LOCAL_BIAS_MODULE = ".local_bias."
CASAN_MODULES = (CONTEXT_MIXER_MODULE, OUTPUT_GATE_MODULE, LOCAL_BIAS_MODULE)


def is_casan_parameter(name):
    """Whether the parameter `name` (`encoder.layer.0.attention.self.context_mixer.gate_bias`) is one CASAN adds."""
    return any(fragment in name for fragment in CASAN_MODULES)


@dataclass(frozen=True)
class ContextKind:
    """One context type: which layer inputs the context C of layer l (0-based) is built from, and how.

    `reads(l)`: the layers whose inputs make C of layer l, each `d` columns of it (empty: the layer attends as
    plain BERT). `per_token`: C is those inputs position by position (`n` rows); otherwise it is their masked
    means over the real tokens, one row per sentence broadcast to every position (few FLOPs, but all of U read).
    `gives_context`: whether some layer takes a context at all; False for `none` alone, whose model computes its
    source's numbers, so that the options that shape a context have nothing to shape.
    """

    name: str
    per_token: bool
    reads: Callable[[int], range]
    description: str
    gives_context: bool = True

    def width(self, layer_index):
        """d_c / d: how many layer inputs C of layer `layer_index` concatenates."""
        return len(self.reads(layer_index))

    @property
    def grows_with_depth(self):
        """Whether C widens layer by layer, so that U grows with depth (where a low-rank U pays most)."""
        return self.width(2) > self.width(1)


# Every context type, one row each, in the order the docs and errors list them.
CONTEXT_KINDS = {
    kind.name: kind
    for kind in (
        ContextKind(
            "global",
            per_token=False,
            reads=lambda layer: range(layer, layer + 1),
            description="the masked mean of the layer input",
        ),
        ContextKind(
            "deep",
            per_token=True,
            reads=lambda layer: range(layer),
            description="the inputs of all earlier layers, position by position (the first layer attends as plain "
            "BERT)",
        ),
        ContextKind(
            "deep_global",
            per_token=False,
            reads=lambda layer: range(layer + 1),
            description="the global vectors of all earlier layers and the current one",
        ),
        ContextKind(
            "none", per_token=False, reads=lambda layer: range(0), description="exactly BERT", gives_context=False
        ),
    )
}


def context_kind(config):
    return CONTEXT_KINDS[config.context_type]


def mean_weights(token_mask, dtype):
    """`(batch, 1, n)` weights that average the real tokens (1 / their count), or None for a plain mean.

    The encoder builds them once per forward, so each layer's masked mean is a single bmm.
    """
    if token_mask is None:
        return None
    weights = token_mask.to(dtype)
    return (weights / weights.sum(dim=1, keepdim=True).clamp(min=1)).unsqueeze(1)


def masked_mean(hidden_states, token_mask=None, weights=None):
    """Mean over the real tokens, `(batch, n, d) -> (batch, d)`; `token_mask` is `(batch, n)` of 0/1 or None,
    `weights` the same mask already turned into `mean_weights`."""
    if weights is None:
        weights = mean_weights(token_mask, hidden_states.dtype)
    if weights is None:
        return hidden_states.mean(dim=1)
    return torch.bmm(weights, hidden_states).squeeze(1)


@dataclass(frozen=True)
class TokenPositions:
    """Where each token sits among its sentence's real tokens, for the local bias (`local_bias.py`), computed once per
    forward by the encoder (`ContextPlan.layer_keywords`): `positions`
    `(batch, n)`, 0-based, counting real tokens only (so left and right padding give the unpadded positions);
    `lengths` `(batch, 1)`, the number of real tokens I, both float32; `mean_weights` `(batch, 1, n)` averaging the
    real tokens (None without padding), for the layer-specific window's mean key, in the model's dtype, so that a
    float64 model's mean key is float64's."""

    positions: torch.Tensor
    lengths: torch.Tensor
    mean_weights: torch.Tensor | None

    @classmethod
    def of(cls, token_mask, batch, n, device, dtype):
        """The positions of a batch of `batch` sentences of `n` tokens, `token_mask` its `(batch, n)` 0/1 mask of the
        real tokens (None: all are real), in a model computing in `dtype`."""
        if token_mask is None:
            positions = torch.arange(n, device=device, dtype=torch.float32).expand(batch, n)
            return cls(positions, torch.full((batch, 1), float(n), device=device), None)
        real = token_mask.to(torch.float32)
        positions = (real.cumsum(dim=1) - 1).clamp(min=0)
        return cls(positions, real.sum(dim=1, keepdim=True), mean_weights(token_mask, dtype))


@dataclass(frozen=True)
class ContextPlan:
    """Which layer inputs each layer's context reads, fixed by the config when the encoder is built, so that a forward
    asks the config nothing: `reads[l]` the layers whose inputs make C of layer l (empty where it takes none),
    `feeds[i]` whether some layer reads the input of layer i, `per_token` the kind's, `local_bias` whether some layer
    adds the local bias (`local_bias.py`), whose token positions the encoder then computes once."""

    per_token: bool
    reads: tuple[tuple[int, ...], ...]
    feeds: tuple[bool, ...]
    local_bias: bool = False

    @classmethod
    def from_config(cls, config):
        kind = context_kind(config)
        layers = range(config.num_hidden_layers)
        reads = tuple(tuple(kind.reads(layer)) if config.layer_has_context(layer) else () for layer in layers)
        feeds = tuple(any(layer in read for read in reads) for layer in layers)
        return cls(kind.per_token, reads, feeds, any(config.has_local_bias(layer) for layer in layers))

    @property
    def sentence_means(self):
        """Whether some layer reads a masked mean, so that the forward builds `mean_weights`."""
        return not self.per_token and any(self.feeds)

    def layer_keywords(self, token_mask, hidden_states):
        """What every layer takes beside its context, from the `(batch, n)` 0/1 `token_mask` of the real tokens (None:
        all are real): the tokens' `token_positions` where some layer adds the local bias, computed once a forward."""
        if not self.local_bias:
            return {}
        return {
            "token_positions": TokenPositions.of(
                token_mask, *hidden_states.shape[:2], hidden_states.device, hidden_states.dtype
            )
        }

    def context_source(self, feeds, hidden_states, weights):
        """What a layer input contributes to the context: the input itself for a per-token kind (deep), its masked
        mean for a sentence-level one (`weights` from `mean_weights`), nothing where no layer reads it (`feeds`,
        the input's entry of `self.feeds`). It takes the entry, not the layer's index: a compiled frame of its own
        (after a graph break) would guard the index and compile again for every layer."""
        if not feeds:
            return None
        return hidden_states if self.per_token else masked_mean(hidden_states, weights=weights)

    def layer_context(self, layer_index, sources):
        """The context C of layer `layer_index` (0-based) from `sources[i]`, the `context_source` of layer i's input,
        as a tuple of tensors (empty where the layer takes none; a tuple, because the layers take it as positional
        arguments, which alone reentrant activation checkpointing sees): per token (deep), the inputs its kind
        reads, each `(batch, n, d)`, never concatenated; per sentence, their means concatenated, `(batch, d_c)`."""
        read = self.reads[layer_index]
        if not read or self.per_token:
            return tuple(sources[index] for index in read)
        return (sources[read[0]] if len(read) == 1 else torch.cat([sources[index] for index in read], dim=-1),)


def check_encoder_inputs(input_ids, inputs_embeds, attention_mask):
    """A context-aware encoder takes exactly one of `input_ids` and `inputs_embeds`, of at least one sentence of at
    least one token (an empty batch or empty sentences failed deep inside a layer, "cannot reshape tensor of 0
    elements", in every family and context kind, as in transformers' BERT), and its attention mask as the 2D 0/1
    mask of the real tokens, which the masked means average over (a 4D mask, or a dict of masks by layer type as
    transformers' ModernBERT takes, says nothing of that). Every CASAN encoder calls it first, before any work."""
    if (input_ids is None) ^ (inputs_embeds is not None):
        raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
    name, inputs = ("input_ids", input_ids) if input_ids is not None else ("inputs_embeds", inputs_embeds)
    if inputs.shape[0] == 0:
        raise ValueError(
            f"The batch is empty: {name} has shape {tuple(inputs.shape)}, no sentence to encode. Pass at least one."
        )
    if inputs.shape[1] == 0:
        raise ValueError(
            f"The sentences are empty: {name} has shape {tuple(inputs.shape)}, no token to encode. Give each "
            "sentence at least one token."
        )
    if attention_mask is None or (not isinstance(attention_mask, dict) and attention_mask.dim() == 2):
        return
    if isinstance(attention_mask, dict):
        got = f"a dict of masks ({', '.join(map(repr, attention_mask))})"
    else:
        got = f"{attention_mask.dim()}D"
    raise ValueError(f"CASAN needs a 2D attention_mask (batch, seq) to average the real tokens; got {got}.")


def run_layers_with_context(plan, layers, hidden_states, attention_mask, token_mask, **kwargs):
    """Runs `layers` in turn, each with its context (`plan`, the encoder's `ContextPlan`) as positional arguments
    (so that checkpointing sees them): the loop of every context-aware encoder (BERT's, Marian's). `attention_mask`
    is what the layers take, `token_mask` the `(batch, n)` 0/1 mask of the real tokens that the masked means
    average over. Where a layer adds the local bias, the layers also take the tokens' `token_positions`."""
    kwargs.update(plan.layer_keywords(token_mask, hidden_states))
    weights = mean_weights(token_mask, hidden_states.dtype) if plan.sentence_means else None
    sources = []
    for layer_index, layer_module in enumerate(layers):
        sources.append(plan.context_source(plan.feeds[layer_index], hidden_states, weights))
        context = plan.layer_context(layer_index, sources)
        hidden_states = layer_module(hidden_states, attention_mask, *context, **kwargs)
    return hidden_states
