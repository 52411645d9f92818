"""Context-aware self-attention in causal language models: Llama, Qwen2, Qwen3 and GPT-2, as a language model and a
sequence classifier, in transformers' own classes with the context added to their query and key projections.

In a causal model the context of position i reads only positions <= i (docs/FAMILIES.md, "Causal language models"):
`global` is the prefix mean of the layer's attention input over the real tokens up to i, `deep_global` the prefix means
of every layer so far, `deep` each earlier layer's input at position i itself. The prefix means are running sums and
counts of the real tokens (the 2D attention mask), kept in float32, which restart where packed sequences' position ids
do, and which `CasanCache` carries beside the keys and values, so that cached decoding gives the logits of a full
forward.

Each class is transformers' own (`LlamaForCausalLM`, ...), built as it builds it, with its query and key projections
made context-aware (`ContextLinear`, GPT-2's fused `ContextConv1D`): the projection's output takes the layer's context
through its `context_mixer` before the attention reads it, so every attention implementation the class takes works,
and every checkpoint of the family loads unchanged (the mixers are new: `...q_proj.context_mixer.*`). A forward's
context lives in a `CausalContextRun`, which the base model's forward pre-hook opens from the forward's mask, position
ids and cache and every projection reads. The query and key are mixed each at its own width (grouped-query attention:
the key at the key-value heads' width), with a per-head gate following the heads of the states it gates.

`output_context_gates=True` (or the config's) returns each layer's gates as the encoders do, in the output class of
transformers with a `context_gates` field (`CasanCausalLMOutputWithPast`, ...): the outermost CASAN model's forward
asks for them (`_ask_for_gates`), the projections keep them in the run, and its forward hook returns them
(`_return_gates`).

Gradient checkpointing is torch's non-reentrant one (reentrant checkpointing would cut the context, which leaves a
layer through the run, not its arguments): each checkpointed layer runs in the forward's run, and its recomputation
during the backward in a copy of it (`_checkpoint_in_run`).
"""

import copy
import functools
import inspect
import threading
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import (
    AutoModel,
    DynamicCache,
    GPT2ForSequenceClassification,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
    LlamaModel,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
    Qwen2Model,
    Qwen3ForCausalLM,
    Qwen3ForSequenceClassification,
    Qwen3Model,
)
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    BaseModelOutputWithPastAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    CausalLMOutputWithPast,
    SequenceClassifierOutputWithPast,
)
from transformers.pytorch_utils import Conv1D

from .configuration_casan_causal import (
    CasanGPT2Config,
    CasanLlamaConfig,
    CasanQwen2Config,
    CasanQwen3Config,
    refuse_encoder_options,
)
from .context import CONTEXT_TARGETS, ContextPlan
from .context_mixer import CasanContextMixer
from .families import get_family, get_head

# Imported here so that they travel with a local folder on transformers before 5.10 (why: modeling_casan.py).
from .fused_mixer import FusedMix  # noqa: F401
from .local_bias import CasanLocalBias  # noqa: F401
from .modeling_casan import CasanPreTrainedModel
from .pooling import SentencePooling  # noqa: F401


# The private methods of transformers' generation this file overrides, by name, with the parameters it relies on
# (tests/test_causal.py fails when a release moves one).
GENERATION_HOOKS = {
    "_prepare_cache_for_generation": ("generation_config", "model_kwargs"),
    "_validate_model_kwargs": ("model_kwargs",),
}
# What a CASAN encoder's forward returns on request that a causal model has none of (it has no output gate and no
# local bias): refused when asked for, not ignored.
OUTPUTS_OF_ENCODERS = ("output_head_gates", "output_local_windows")
# What the forward and generate() call the cache: `cache` from transformers 5.24, `past_key_values` before (still
# taken there, deprecated).
CACHE_NAMES = ("cache", "past_key_values")
# The caches generate() may be asked for that keep the running sums: none but the dynamic one ("dynamic", or None).
CONTEXT_CACHE_IMPLEMENTATIONS = (None, "dynamic")


CONTEXT_GATES_DOC = r"""
    context_gates (`tuple(torch.FloatTensor)`, returned with `output_context_gates=True`):
        One tensor per layer of shape `(batch_size, 2, sequence_length)`, or `(batch_size, 2, num_heads,
        sequence_length)` with `gate_per_head`: the query gate lambda_Q (channel 0) and the key gate lambda_K
        (channel 1) of every token (and query head: a key-value head's key gate is repeated over its group of query
        heads, as the attention repeats its key), as applied: times the gate's factor with `context_start="zero"`;
        0 where that layer or target takes no context.
"""


@dataclass
class CasanBaseModelOutputWithPast(BaseModelOutputWithPast):
    __doc__ = CONTEXT_GATES_DOC
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanBaseModelOutputWithPastAndCrossAttentions(BaseModelOutputWithPastAndCrossAttentions):
    __doc__ = CONTEXT_GATES_DOC
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanCausalLMOutputWithPast(CausalLMOutputWithPast):
    __doc__ = CONTEXT_GATES_DOC
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanCausalLMOutputWithCrossAttentions(CausalLMOutputWithCrossAttentions):
    __doc__ = CONTEXT_GATES_DOC
    context_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class CasanSequenceClassifierOutputWithPast(SequenceClassifierOutputWithPast):
    __doc__ = CONTEXT_GATES_DOC
    context_gates: tuple[torch.FloatTensor, ...] | None = None


# Each output class of the causal classes' transformers forwards -> its CASAN class, which adds `context_gates`.
OUTPUTS_WITH_GATES = {
    output_class.__mro__[1]: output_class
    for output_class in (
        CasanBaseModelOutputWithPast,
        CasanBaseModelOutputWithPastAndCrossAttentions,
        CasanCausalLMOutputWithPast,
        CasanCausalLMOutputWithCrossAttentions,
        CasanSequenceClassifierOutputWithPast,
    )
}


class CasanCache(DynamicCache):
    """transformers' `DynamicCache` with each layer's running context sums beside its keys and values: `context_sums`
    `{layer index: (sum (batch, d), count (batch, 1))}`, float32, of the real tokens' attention inputs so far. What
    generate() does to a cache it does to the sums (beam search's reorder, the batch expansion and selection); a crop,
    which would have to roll the sums back, is refused."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.context_sums = {}

    def _each_sum(self, function):
        self.context_sums = {index: tuple(map(function, sums)) for index, sums in self.context_sums.items()}

    def reorder_cache(self, beam_idx):
        super().reorder_cache(beam_idx)
        self._each_sum(lambda tensor: tensor.index_select(0, beam_idx.to(tensor.device)))

    def batch_repeat_interleave(self, repeats):
        super().batch_repeat_interleave(repeats)
        self._each_sum(lambda tensor: tensor.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices):
        super().batch_select_indices(indices)
        self._each_sum(lambda tensor: tensor[indices])

    def crop(self, tokens_to_remove):
        if tokens_to_remove:
            raise ValueError(
                f"CasanCache.crop({tokens_to_remove}): a CASAN causal model's cache keeps running sums of the "
                "context, which cannot be rolled back, so assisted and speculative decoding (which crop the cache) "
                "are refused."
            )
        super().crop(tokens_to_remove)

    @property
    def is_croppable(self):
        return False

    def reset(self):
        super().reset()
        self.context_sums = {}


def check_cache(cache):
    """`cache` if it is a `CasanCache` (or None), else a ValueError naming what was handed in."""
    if cache is not None and not isinstance(cache, CasanCache):
        raise ValueError(
            f"A CASAN causal model keeps running sums of its context beside the keys and values: pass the CasanCache "
            f"its forward returns (or casan_hf.CasanCache(config=model.config)), or none; got {type(cache).__name__}."
        )
    return cache


def sequence_starts(inputs, shape, full_mask, past_length):
    """`shape` `(batch, n)` bools marking where a packed sequence starts inside a row after real tokens of the one
    before it, from every source transformers takes: position ids restarting at 0 (`DataCollatorWithFlattening`'s
    default), `cu_seq_lens_q` / `cu_seq_lens_k`, the cumulative lengths over the batch's flattened tokens that
    flash-attention's variable-length path reads (the collator's `return_flash_attn_kwargs=True`), or both; None where
    nothing restarts. Only a real token after real ones starts a sequence: a restart with none before it in its
    row (the first real token of a left-padded row, in any chunk of a chunked prefill) restarts nothing, padding
    counting for nothing, and a padding token (whose position id generate() may set to 0) starts nothing. `full_mask`
    is the 2D mask of every token so far, the cache's `past_length` tokens included (None: all are real). A single
    token (a decoding step) starts nothing: no look at the inputs, whose `any()` would wait on the device."""
    batch, token_count = shape
    position_ids = inputs.get("position_ids")
    if position_ids is not None and position_ids.shape[-1] != token_count:
        position_ids = None
    lengths = [inputs[name] for name in ("cu_seq_lens_q", "cu_seq_lens_k") if inputs.get(name) is not None]
    if token_count == 1 or (position_ids is None and not lengths):
        return None
    if len(lengths) == 2 and not torch.equal(*lengths):
        raise ValueError(
            "cu_seq_lens_q and cu_seq_lens_k differ: the keys then reach back past the queries, into a cache, which "
            "packed sequences do not continue in a CASAN causal model; give both the same lengths, and no cache."
        )
    device = position_ids.device if position_ids is not None else lengths[0].device
    starts = torch.zeros(batch * token_count, dtype=torch.bool, device=device)
    if lengths:
        starts[lengths[0][1:-1].long()] = True
    starts = starts.view(batch, token_count)
    if position_ids is not None:
        starts = starts | (position_ids == 0)
    if full_mask is None:
        starts = starts & (torch.arange(past_length, past_length + token_count, device=device) > 0)
    else:  # a real token after a real token
        real = full_mask.to(torch.int32)
        starts = starts & ((real.cumsum(dim=1) > real) & (real > 0))[:, -token_count:]
    return starts if bool(starts.any()) else None


def running_sums_inputs(inputs, cache):
    """What the running sums of a forward's `inputs` (by name) read, continuing `cache` (None: no cache): the `(batch,
    n)` mask of its tokens' real ones (None: all are), and where packed sequences restart (`sequence_starts`). A
    mask other than 2D, and packed sequences continuing a cache that holds tokens, are refused by name."""
    states = inputs.get("input_ids")
    states = inputs.get("inputs_embeds") if states is None else states
    mask = inputs.get("attention_mask")
    if mask is not None and not (isinstance(mask, torch.Tensor) and mask.dim() == 2):
        raise ValueError(
            "CASAN causal models with a global context need a 2D attention_mask (batch, seq) to average the real "
            f"tokens; got {f'{mask.dim()}D' if isinstance(mask, torch.Tensor) else type(mask).__name__}."
        )
    past_length = 0 if cache is None else cache.get_seq_length()
    starts = sequence_starts(inputs, states.shape[:2], mask, past_length)
    if starts is not None and past_length > 0:
        raise ValueError(
            f"Packed sequences (position ids or cu_seq_lens that restart inside a row) continue no cache: the cache "
            f"holds {past_length} tokens whose context sums would cross into the next sequence. Pass packed sequences "
            "without past_key_values."
        )
    return None if mask is None else mask[:, -states.shape[1] :], starts


# The tokens a block of `prefix_sums` sums by one product.
PREFIX_BLOCK = 16


def prefix_sums(values):
    """`values.cumsum(dim=1)` of `(batch, n, d)` values. On a CPU, where cumsum runs the tokens one after another
    (0.6-0.9 ms over 512 x 512 float32 on one thread, more than the context's products), a long sequence is summed
    in blocks of `PREFIX_BLOCK` tokens: each block's own prefix sums by one product with a lower-triangular matrix of
    ones, then the sums of the blocks before it added (3-6 times as fast, the same sums to float32's rounding), in
    the values' dtype whatever autocast says."""
    batch, length, width = values.shape
    if values.device.type != "cpu" or length < 4 * PREFIX_BLOCK:
        return values.cumsum(dim=1)
    missing = -length % PREFIX_BLOCK  # the last block's tokens past the end, zeros (a pad copies every value)
    padded = torch.nn.functional.pad(values, (0, 0, 0, missing)) if missing else values
    blocks = padded.reshape(batch, -1, PREFIX_BLOCK, width)
    lower = torch.ones(PREFIX_BLOCK, PREFIX_BLOCK, dtype=values.dtype, device=values.device).tril_()
    with torch.autocast("cpu", enabled=False):
        within = torch.matmul(lower, blocks)
    totals = within[:, :, -1]
    before = totals.cumsum(dim=1) - totals
    return (within + before.unsqueeze(2)).view(batch, -1, width)[:, :length]


def prefix_means(states, token_mask, past, starts):
    """Each position's mean of the real tokens' `states` `(batch, n, d)` up to it, in float32 sums cast back to the
    states' dtype, and the running `(sum, count)` after the last position, for the cache. `token_mask` `(batch, n)`
    0/1; `past` the `(sum, count)` of the tokens before (None: none); `starts` the packed sequences' starts, where the
    sums restart (None: no restart). A decoding step (one token after the cache's) adds the token to the running sums
    in one fused operator each: a token's cumulative sum is itself."""
    if past is not None and states.shape[1] == 1 and starts is None:
        sums = torch.addcmul(past[0], states[:, 0].to(torch.float32), token_mask)
        counts = past[1] + token_mask
        return (sums / counts.clamp(min=1)).to(states.dtype).unsqueeze(1), (sums, counts)
    weights = token_mask.to(torch.float32).unsqueeze(-1)
    weighted = states.to(torch.float32) * weights
    sums, counts = prefix_sums(weighted), weights.cumsum(dim=1)
    if past is not None:
        sums, counts = sums + past[0].unsqueeze(1), counts + past[1].unsqueeze(1)
    if starts is not None:  # each token's sums less what came before its segment
        positions = torch.arange(starts.shape[1], device=starts.device).expand_as(starts)
        first = torch.where(starts, positions, 0).cummax(dim=1).values.unsqueeze(-1)
        restarted = (starts.cumsum(dim=1) > 0).unsqueeze(-1)

        def restart(running, step):
            before = (running - step).gather(1, first.expand_as(running))
            return running - torch.where(restarted, before, 0)

        sums, counts = restart(sums, weighted), restart(counts, weights)
    means = (sums / counts.clamp(min=1)).to(states.dtype)
    # copies, not views: a view would keep every position's sums alive in the cache, and its strides, unlike a
    # decoding step's sums', would make a compiled decoding step compile again
    last = (sums[:, -1], counts[:, -1])
    return means, tuple(running.clone(memory_format=torch.contiguous_format) for running in last)


class CausalContextRun:
    """One forward's context: the real tokens' mask, the packed sequences' starts, the cache's running sums, and each
    layer's contribution as its query projection records it (`record`), read by its projections (`layer_context`);
    where the forward returns them, the gates its projections keep (`keep_gate`) in `gates`, else None."""

    def __init__(self, plan, token_mask, starts, cache, gates):
        self.plan = plan
        self.token_mask = token_mask
        self.starts = starts
        self.cache = cache
        self.sources = {}
        self.gates = gates

    def record(self, layer_index, states):
        """Layer `layer_index`'s attention input `states` `(batch, n, d)` as what it contributes to the context: the
        states themselves (deep) or their prefix means (the global kinds), whose running sums go to the cache."""
        if not self.plan.feeds[layer_index]:
            return
        if self.plan.per_token:
            self.sources[layer_index] = states
            return
        token_mask = self.token_mask
        if token_mask is None:
            token_mask = states.new_ones(states.shape[:2])
        past = None if self.cache is None else self.cache.context_sums.get(layer_index)
        if past is None and self.cache is not None and self.cache.get_seq_length(layer_index) > 0:
            raise ValueError(
                f"The cache holds {self.cache.get_seq_length(layer_index)} tokens but no context sums for layer "
                f"{layer_index}: it was filled by another model. Start from an empty CasanCache."
            )
        means, running = prefix_means(states, token_mask, past, self.starts)
        if self.cache is not None:
            self.cache.context_sums[layer_index] = running
        self.sources[layer_index] = means

    def layer_context(self, layer_index):
        """The context of layer `layer_index`: the per-token sources its kind reads, as a tuple."""
        return tuple(self.sources[index] for index in self.plan.reads[layer_index])

    def keep_gate(self, layer_index, target, gate, states):
        """Keeps `target`'s gate in layer `layer_index`, `(batch, n)` or `(batch, heads, n)`, where the forward
        returns the gates; None (a target without context) is kept as zeros `(batch, n)` of the mixed `states`."""
        if self.gates is not None:
            self.gates[layer_index, target] = states.new_zeros(states.shape[:2]) if gate is None else gate

    def checkpointed(self):
        """This run as a checkpointed layer sees it: the same sources and gates, and no cache, as transformers gives
        such a layer none (it keeps neither keys and values nor context sums there), so that the layer's
        recomputation reads the sums its forward read."""
        checkpointed = copy.copy(self)
        checkpointed.cache = None
        return checkpointed

    def recomputation(self):
        """A copy of this run, for recomputing a checkpointed layer during the backward: the sources as they stand
        (the layer records its own again, in the copy), and its gates computed as the forward computed them but kept
        in the copy. The forward's run is left as it was, and what the recomputation makes is freed with the copy."""
        recomputation = copy.copy(self)
        recomputation.sources = dict(self.sources)
        recomputation.gates = None if self.gates is None else {}
        return recomputation


def returned_gates(gates, layers, heads, per_head):
    """The gates a run kept (`CausalContextRun.keep_gate`) as the encoders return them: per layer `(batch, 2, n)`,
    or `(batch, 2, heads, n)` with `per_head`, channel 0 the query's and 1 the key's. A key gate per key-value head
    is repeated over its group of query heads (grouped-query attention), as the attention repeats the key itself."""

    def per_query_head(gate):
        if not per_head:
            return gate
        if gate.dim() == 2:  # zeros of a target without context
            return gate.unsqueeze(1).expand(-1, heads, -1)
        return gate.repeat_interleave(heads // gate.shape[1], dim=1)

    return tuple(
        torch.stack([per_query_head(gates[layer, target]) for target in CONTEXT_TARGETS], dim=1)
        for layer in range(layers)
    )


def refuse_reentrant_checkpointing(checkpoint_function):
    """A ValueError unless `checkpoint_function`, transformers' `functools.partial` of torch's checkpoint with the
    checkpointing kwargs, runs non-reentrant: `use_reentrant=False`, which transformers sets where no kwargs are given;
    kwargs without it take torch's default, the reentrant variant."""
    keywords = getattr(checkpoint_function, "keywords", {})
    if keywords.get("use_reentrant") is not False:
        given = (
            f"use_reentrant={keywords['use_reentrant']!r}"
            if "use_reentrant" in keywords
            else f"kwargs {keywords} without use_reentrant, where torch's checkpoint takes the reentrant variant"
        )
        raise ValueError(
            "CASAN causal models take non-reentrant gradient checkpointing only: use_reentrant=False, transformers' "
            f"default where no gradient_checkpointing_kwargs are given (the context leaves each layer outside its "
            f"arguments, which alone reentrant checkpointing keeps in the graph); got {given}."
        )


class ContextSlot(threading.local):
    """Where a model's projections find the forward's `CausalContextRun`: one object shared by the base model's hook,
    which fills it, and every projection, which reads it, whose contents are the calling thread's own, so that
    threads (a server's requests, `nn.DataParallel`'s replicas, which share it) each run their own forward on one
    model. During a forward, `caller` is the outermost CASAN model called (a classifier whose base model is a CASAN
    model shares its slot), `gates` the dict its run fills where it returns the gates (else None), `tuple_output`
    whether it returns a tuple (`return_dict=False`). Per thread rather than passed with the call: transformers calls
    the query and key projections with the states alone, so a run passed down the call would need every family's
    attention forward rewritten; a thread's own attributes trace into one compiled graph (docs/FAMILIES.md)."""

    def __init__(self):
        self.run = None
        self.caller = None
        self.gates = None
        self.tuple_output = False

    def __reduce__(self):
        """A copy (`copy.deepcopy`, pickling) is a new, empty slot: a thread's forward state stays in its thread."""
        return type(self), ()

    def current(self):
        if self.run is None:
            raise RuntimeError(
                "A context-aware projection ran outside its model's forward: call the model, not its layers alone."
            )
        return self.run


def target_mixer(config, layer_index, target, width, heads):
    """The mixer of one target of layer `layer_index` at the width of its states, or None where it takes none."""
    if not config.mixes_context(layer_index) or target not in config.context_targets:
        return None
    return CasanContextMixer(
        config, config.context_size(layer_index), targets=(target,), width=width, heads=heads, per_token=True
    )


def mix_target(mixer, target, states, context, return_gate):
    """`states` `(batch, n, width)` with the context mixed in by `mixer` as its `target`, and the target's gate
    `(batch, n)` or `(batch, heads, n)` when `return_gate` (else None)."""
    query, key, gates = mixer(states, states, context, return_gates=return_gate)
    mixed = query if target == "query" else key
    return mixed, None if gates is None else gates[:, CONTEXT_TARGETS.index(target)]


class ContextLinear(nn.Linear):
    """A query or key projection (Llama's and Qwen's `q_proj`, `k_proj`) whose output takes the layer's context: the
    projection's weights keep their names, the mixer is `context_mixer`. The query projection records its input, the
    attention's input, as the layer's contribution to the context before it reads the context."""

    def __init__(self, linear, slot, layer_index, target, mixer):
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        self.weight, self.bias = linear.weight, linear.bias
        self.slot, self.layer_index, self.target = slot, layer_index, target
        self.context_mixer = mixer

    def forward(self, hidden_states):
        projected = super().forward(hidden_states)
        run = self.slot.current()
        if self.target == "query":
            run.record(self.layer_index, hidden_states)
        gate = None
        if self.context_mixer is not None:
            context = run.layer_context(self.layer_index)
            projected, gate = mix_target(self.context_mixer, self.target, projected, context, run.gates is not None)
        run.keep_gate(self.layer_index, self.target, gate, projected)
        return projected


class ContextConv1D(Conv1D):
    """GPT-2's fused query-key-value projection (`c_attn`) whose query and key take the layer's context."""

    def __init__(self, conv, slot, layer_index, mixers):
        super().__init__(conv.nf, conv.weight.shape[0])
        self.weight, self.bias = conv.weight, conv.bias
        self.slot, self.layer_index = slot, layer_index
        self.context_mixer = nn.ModuleDict({target: mixer for target, mixer in mixers.items() if mixer is not None})

    def forward(self, hidden_states):
        projected = super().forward(hidden_states)
        run = self.slot.current()
        run.record(self.layer_index, hidden_states)
        if not self.context_mixer:
            run.keep_gate(self.layer_index, "query", None, projected)
            run.keep_gate(self.layer_index, "key", None, projected)
            return projected
        context = run.layer_context(self.layer_index)
        # Each a copy of its own: a gate per head views the states head by head, which a slice of the fused output
        # cannot be viewed as.
        parts = dict(zip(("query", "key", "value"), projected.split(self.nf // 3, dim=-1), strict=True))
        for target in CONTEXT_TARGETS:
            states, gate = parts[target].contiguous(), None
            if target in self.context_mixer:
                states, gate = mix_target(self.context_mixer[target], target, states, context, run.gates is not None)
            run.keep_gate(self.layer_index, target, gate, states)
            parts[target] = states
        return torch.cat(tuple(parts.values()), dim=-1)


def make_projections_context_aware(model, slot):
    """Replaces the query and key projections of every layer of `model`'s base model with context-aware ones that
    share its weights (`ContextLinear`, or GPT-2's `ContextConv1D`)."""
    config = model.config
    base = model.base_model
    for layer_index, attention in enumerate(model.attention_modules(base)):
        heads = config.num_attention_heads
        if hasattr(attention, "c_attn"):  # GPT-2: the query, key and value of one width
            width = attention.embed_dim
            mixers = {target: target_mixer(config, layer_index, target, width, heads) for target in ("query", "key")}
            attention.c_attn = ContextConv1D(attention.c_attn, slot, layer_index, mixers)
            continue
        key_heads = getattr(config, "num_key_value_heads", None) or heads
        for target, name, target_heads in (("query", "q_proj", heads), ("key", "k_proj", key_heads)):
            linear = getattr(attention, name)
            width = attention.head_dim * target_heads
            mixer = target_mixer(config, layer_index, target, width, target_heads)
            setattr(attention, name, ContextLinear(linear, slot, layer_index, target, mixer))


class CasanCausalPreTrainedModel(CasanPreTrainedModel):
    """What every causal CASAN class shares: built as its transformers class builds itself, then its query and key
    projections made context-aware; the base model's forward opens the forward's `CausalContextRun`
    (`_open_context`); the model's own forward returns the gates where asked (`_ask_for_gates`, `_return_gates`);
    generate() gets a `CasanCache`. Loading, conversion and the checks are `CasanPreTrainedModel`'s.
    """

    has_token_types = False
    family_modules = None

    def __init_subclass__(cls, **kwargs):
        """A class of a head takes what its transformers class says of its modules (over `CasanPreTrainedModel`'s,
        which are BERT's): the base model's prefix, the modules a device map keeps whole, the outputs it records."""
        super().__init_subclass__(**kwargs)
        source = next((base for base in cls.__mro__ if base.__module__.startswith("transformers.models.")), None)
        if source is not None:
            cls.base_model_prefix = source.base_model_prefix
            cls._no_split_modules = source._no_split_modules
            cls._can_record_outputs = source._can_record_outputs

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        if self.base_model is not self and isinstance(self.base_model, CasanCausalPreTrainedModel):
            # a head whose transformers class builds its base model through `AutoModel`: a context-aware one, whose
            # slot the head shares to return its gates
            self.context_slot = self.base_model.context_slot
            self._hook_gates(self)
            return
        self.context_slot = ContextSlot()
        self.context_plan = ContextPlan.from_config(config)
        make_projections_context_aware(self, self.context_slot)
        base = self.base_model
        # transformers initialises a sub-model (the base model, a `LlamaModel`) by its own `_init_weights`, which knows
        # no mixer: the base initialises by this class's, here and when `from_pretrained` fills the new parameters.
        base._init_weights, base._initialize_weights = self._init_weights, self._initialize_weights
        # The base model's forward's parameters, in order: what `_open_context` names its arguments by.
        self._base_parameters = tuple(inspect.signature(base.forward).parameters)
        self._cache_argument = next(name for name in CACHE_NAMES if name in self._base_parameters)
        for module in {self, base}:  # the model, and its base model called alone
            self._hook_gates(module)
        base.register_forward_pre_hook(self._open_context, with_kwargs=True)
        base.register_forward_hook(self._close_context, always_call=True)
        self.post_init()

    def _hook_gates(self, module):
        """`module`'s forward (the model's, or its base model's) asks for the gates before anything else (the base
        model's hook included) runs, and returns them after."""
        module.register_forward_pre_hook(self._ask_for_gates, with_kwargs=True, prepend=True)
        module.register_forward_hook(self._return_gates, with_kwargs=True, always_call=True)

    @staticmethod
    def attention_modules(base):
        """The self-attention module of every layer of the base model, in order."""
        layers = base.h if hasattr(base, "h") else base.layers
        return [layer.attn if hasattr(layer, "attn") else layer.self_attn for layer in layers]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """`CasanPreTrainedModel`'s, refusing an encoder's option first: transformers would hand an option the config
        has no field for to the model's `__init__`, which fails with a TypeError."""
        refuse_encoder_options(kwargs)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def _set_gradient_checkpointing(self, enable=True, gradient_checkpointing_func=checkpoint, **kwargs):
        """transformers' own, where every way of enabling checkpointing ends (`gradient_checkpointing_enable`,
        `activation_checkpointing_enable`, the Trainer's), with the layers' checkpoint function running each layer in
        the forward's run (`_checkpoint_in_run`). Reentrant checkpointing is refused: a layer's context contribution
        leaves it through the forward's `CausalContextRun`, not its arguments, which alone reentrant checkpointing
        keeps in the graph. A private method of transformers, as the generation hooks are: the checkpointing tests
        of tests/test_causal.py fail where a release moves it."""
        if enable:
            refuse_reentrant_checkpointing(gradient_checkpointing_func)
            gradient_checkpointing_func = functools.partial(self._checkpoint_in_run, gradient_checkpointing_func)
        super()._set_gradient_checkpointing(
            enable=enable, gradient_checkpointing_func=gradient_checkpointing_func, **kwargs
        )

    def _checkpoint_in_run(self, checkpoint_layer, function, *args, **kwargs):
        """The layers' checkpoint function: `checkpoint_layer` running the layer in the forward's run, as a
        checkpointed layer sees it (`CausalContextRun.checkpointed`), and each recomputation of it during the
        backward, when that forward's run is closed (and another forward's may be open), in a copy of that run
        (`CausalContextRun.recomputation`). Non-reentrant checkpointing calls the layer once in the forward."""
        slot = self.context_slot
        run = slot.current().checkpointed()
        recomputing = False

        def layer_in_run(*layer_args, **layer_kwargs):
            nonlocal recomputing
            previous, slot.run = slot.run, run.recomputation() if recomputing else run
            recomputing = True
            try:
                return function(*layer_args, **layer_kwargs)
            finally:
                slot.run = previous

        return checkpoint_layer(layer_in_run, *args, **kwargs)

    def _ask_for_gates(self, module, args, kwargs):
        """The model's forward pre-hook: in the outermost CASAN model called, `output_context_gates` (the config's
        where not given) asks the forward's run for the gates, and the forward returns a `ModelOutput` to which
        `_return_gates` adds them (a tuple then, where `return_dict=False` asked for one). What a causal model has
        none of (an encoder's output gates, local windows) is refused when asked for."""
        unreturned = [name for name in OUTPUTS_OF_ENCODERS if kwargs.pop(name, None)]
        if unreturned:
            raise ValueError(
                f"{', '.join(unreturned)}: a CASAN causal model has no output gate and no local bias, so it returns "
                "none of these; leave them out (output_context_gates returns its context gates)."
            )
        asked = kwargs.pop("output_context_gates", None)
        slot = self.context_slot
        if slot.caller is not None:  # the base model of a classifier: the classifier asked
            return args, kwargs
        slot.caller = module
        if asked is None:
            asked = getattr(self.config, "output_context_gates", False)
        if asked:
            slot.gates = {}
            return_dict = kwargs.pop("return_dict", None)
            slot.tuple_output = not (self.config.return_dict if return_dict is None else return_dict)
            kwargs["return_dict"] = True
        return args, kwargs

    def _return_gates(self, module, args, kwargs, output):
        """The model's forward hook: where the forward was asked for the gates, its output in the CASAN class of
        its output class (`OUTPUTS_WITH_GATES`) with `context_gates` (`returned_gates`), as a tuple where
        `return_dict=False` asked for one. Called after a forward that raised too, to clear the slot."""
        slot = self.context_slot
        if slot.caller is not module:
            return output
        gates, tuple_output = slot.gates, slot.tuple_output
        slot.caller, slot.gates, slot.tuple_output = None, None, False
        if gates is None or output is None:
            return output
        config = self.config
        layers = returned_gates(gates, config.num_hidden_layers, config.num_attention_heads, config.gate_per_head)
        output = OUTPUTS_WITH_GATES[type(output)](**output, context_gates=layers)
        return output.to_tuple() if tuple_output else output

    def _open_context(self, module, args, kwargs):
        """The base model's forward pre-hook: the forward's `CausalContextRun` from its inputs, and, where the context
        keeps running sums (the sentence-level kinds), a `CasanCache` where the forward would make a plain one. A model
        whose context keeps none (`none`, `deep`) takes whatever mask and cache its source model takes."""
        # by name, those given by position too (a signature's binding would graph-break a compiled forward whose
        # keyword arguments a hook has changed)
        inputs = dict(zip(self._base_parameters, args, strict=False)) | kwargs
        token_mask, cache, starts = None, None, None
        if self.context_plan.sentence_means:
            cache = check_cache(next((inputs[key] for key in CACHE_NAMES if inputs.get(key) is not None), None))
            use_cache = inputs.get("use_cache")
            if cache is None and (self.config.use_cache if use_cache is None else use_cache):
                # where the forward would make a plain cache, in the caller's place
                cache = CasanCache(config=self.config)
                position = self._base_parameters.index(self._cache_argument)
                if len(args) > position:
                    args = (*args[:position], cache, *args[position + 1 :])
                else:
                    kwargs[self._cache_argument] = cache
            token_mask, starts = running_sums_inputs(inputs, cache)
        slot = self.context_slot
        slot.run = CausalContextRun(self.context_plan, token_mask, starts, cache, slot.gates)
        return args, kwargs

    def _close_context(self, module, args, output):
        self.context_slot.run = None

    def _validate_model_kwargs(self, model_kwargs):
        """generate()'s check of the model's arguments (a copy), `output_context_gates=True` refused first, by name:
        generate() returns no forward's outputs, and a forward over the generated ids gives the gates of every token
        (a cached step's are the full forward's). False passes: the steps then compute none, whatever the config."""
        if model_kwargs.pop("output_context_gates", None):
            raise ValueError(
                "generate() returns no context gates: call the model on the generated ids with "
                "output_context_gates=True (a cached step's gates are those of a full forward)."
            )
        super()._validate_model_kwargs(model_kwargs)

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """generate()'s cache: where the context keeps running sums, a `CasanCache` where it would make a dynamic
        cache; a cache handed in must be one, and any other cache implementation is refused by name (the sums would be
        lost). A context that keeps none (`none`, `deep`) takes every cache its source model takes."""
        if not self.context_plan.sentence_means:
            return super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        if generation_config.cache_implementation not in CONTEXT_CACHE_IMPLEMENTATIONS:
            raise ValueError(
                f"cache_implementation={generation_config.cache_implementation!r} cannot hold a CASAN causal model's "
                "running context sums: use the default dynamic cache (leave it None)."
            )
        name = next((name for name in CACHE_NAMES if model_kwargs.get(name) is not None), None)
        if name is not None and check_cache(model_kwargs[name]) is not None:  # the user's: transformers' checks
            return super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)
        if generation_config.use_cache:
            model_kwargs[self._cache_argument] = CasanCache(config=self.config)


class CasanLlamaPreTrainedModel(CasanCausalPreTrainedModel):
    family = get_family("llama")
    config_class = CasanLlamaConfig
    base_model_prefix = "model"


class CasanLlamaModel(CasanLlamaPreTrainedModel, LlamaModel):
    """transformers' `LlamaModel` with context-aware self-attention."""

    casan_head = get_head("base")


class CasanLlamaForCausalLM(CasanLlamaPreTrainedModel, LlamaForCausalLM):
    """transformers' `LlamaForCausalLM` with context-aware self-attention."""

    casan_head = get_head("causal-lm")


class CasanLlamaForSequenceClassification(CasanLlamaPreTrainedModel, LlamaForSequenceClassification):
    """transformers' `LlamaForSequenceClassification` with context-aware self-attention."""

    casan_head = get_head("sequence-classification")


class CasanQwen2PreTrainedModel(CasanCausalPreTrainedModel):
    family = get_family("qwen2")
    config_class = CasanQwen2Config
    base_model_prefix = "model"


class CasanQwen2Model(CasanQwen2PreTrainedModel, Qwen2Model):
    """transformers' `Qwen2Model` with context-aware self-attention."""

    casan_head = get_head("base")


class CasanQwen2ForCausalLM(CasanQwen2PreTrainedModel, Qwen2ForCausalLM):
    """transformers' `Qwen2ForCausalLM` with context-aware self-attention."""

    casan_head = get_head("causal-lm")


class CasanQwen2ForSequenceClassification(CasanQwen2PreTrainedModel, Qwen2ForSequenceClassification):
    """transformers' `Qwen2ForSequenceClassification` with context-aware self-attention."""

    casan_head = get_head("sequence-classification")


class CasanQwen3PreTrainedModel(CasanCausalPreTrainedModel):
    family = get_family("qwen3")
    config_class = CasanQwen3Config
    base_model_prefix = "model"


class CasanQwen3Model(CasanQwen3PreTrainedModel, Qwen3Model):
    """transformers' `Qwen3Model` with context-aware self-attention."""

    casan_head = get_head("base")


class CasanQwen3ForCausalLM(CasanQwen3PreTrainedModel, Qwen3ForCausalLM):
    """transformers' `Qwen3ForCausalLM` with context-aware self-attention."""

    casan_head = get_head("causal-lm")


class CasanQwen3ForSequenceClassification(CasanQwen3PreTrainedModel, Qwen3ForSequenceClassification):
    """transformers' `Qwen3ForSequenceClassification` with context-aware self-attention."""

    casan_head = get_head("sequence-classification")


class CasanGPT2PreTrainedModel(CasanCausalPreTrainedModel):
    family = get_family("gpt2")
    config_class = CasanGPT2Config
    base_model_prefix = "transformer"


class CasanGPT2Model(CasanGPT2PreTrainedModel, GPT2Model):
    """transformers' `GPT2Model` with context-aware self-attention."""

    casan_head = get_head("base")


class CasanGPT2ForCausalLM(CasanGPT2PreTrainedModel, GPT2LMHeadModel):
    """transformers' `GPT2LMHeadModel` with context-aware self-attention."""

    casan_head = get_head("causal-lm")


class CasanGPT2ForSequenceClassification(CasanGPT2PreTrainedModel, GPT2ForSequenceClassification):
    """transformers' `GPT2ForSequenceClassification` with context-aware self-attention."""

    casan_head = get_head("sequence-classification")


# This file's model classes, by (family name, head name) in the order of `CAUSAL_FAMILIES` x their heads;
# `modeling_casan_auto.MODEL_CLASSES` gathers every modeling file's.
FAMILY_CLASSES = {
    ("llama", "base"): CasanLlamaModel,
    ("llama", "causal-lm"): CasanLlamaForCausalLM,
    ("llama", "sequence-classification"): CasanLlamaForSequenceClassification,
    ("qwen2", "base"): CasanQwen2Model,
    ("qwen2", "causal-lm"): CasanQwen2ForCausalLM,
    ("qwen2", "sequence-classification"): CasanQwen2ForSequenceClassification,
    ("qwen3", "base"): CasanQwen3Model,
    ("qwen3", "causal-lm"): CasanQwen3ForCausalLM,
    ("qwen3", "sequence-classification"): CasanQwen3ForSequenceClassification,
    ("gpt2", "base"): CasanGPT2Model,
    ("gpt2", "causal-lm"): CasanGPT2ForCausalLM,
    ("gpt2", "sequence-classification"): CasanGPT2ForSequenceClassification,
}

# Llama's and Qwen's sequence classifiers build their base model through `AutoModel.from_config`: it must give the
# context-aware one, in a folder's remote code too, where nothing else registers it.
for (_, head_name), model_class in FAMILY_CLASSES.items():
    if head_name == "base":
        AutoModel.register(model_class.config_class, model_class, exist_ok=True)

__all__ = [
    "CasanCache",
    "CasanGPT2Model",
    "CasanLlamaModel",
    "CasanQwen2Model",
    "CasanQwen3Model",
    "CasanGPT2ForCausalLM",
    "CasanGPT2ForSequenceClassification",
    "CasanLlamaForCausalLM",
    "CasanLlamaForSequenceClassification",
    "CasanQwen2ForCausalLM",
    "CasanQwen2ForSequenceClassification",
    "CasanQwen3ForCausalLM",
    "CasanQwen3ForSequenceClassification",
]
