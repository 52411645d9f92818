"""The theoretical cost of a CASAN encoder next to the BERT it extends: the floor the benchmark aims at.

Only matrix products are counted (2 FLOPs per multiply-add), on both sides: BERT's elementwise work
(GELU, LayerNorm, softmax) is left out just as CASAN's gate and mix are. A sentence-level context
(global, deep_global) is one row per sentence, so its C U product costs few FLOPs but still reads all of
U: a matrix-vector product is bound by memory, not arithmetic. `cost_floor` charges those bytes at the
machine's FLOP-per-byte balance, so that the floor counts both, as docs/BENCHMARKS.md explains.

The count is BERT's layer, so it holds for the families whose layers are BERT's (those of modeling_casan.py:
BERT, RoBERTa, XLM-RoBERTa, ELECTRA). ModernBERT (a GLU feed-forward, rotary embeddings, sliding-window layers)
and DeBERTa-v2/v3 (the relative-position terms of its attention, the convolution) do arithmetic of their own that
this file does not count: `counts_floor` says no for them, and the benchmark shows no floor rather than BERT's.
"""

from ..context import CONTEXT_KINDS
from ..modeling_casan_auto import casan_class


def _family_modules(model_type):
    """The modules a BERT-style family takes from transformers; None for a family with layers of its own."""
    return casan_class(model_type, "base").family_modules


def counts_floor(model_type):
    """Whether `bert_forward_flops` counts the arithmetic of a family (its name, or a config's `model_type`): the
    BERT-style families."""
    return _family_modules(model_type) is not None


def bert_forward_flops(config, seq_len):
    """Matrix-product FLOPs of one sequence through a BERT-style encoder: the embeddings' projection where they are
    narrower than the hidden states (ELECTRA's), the layers, and the pooler where the family has one."""
    n, d, d_ff = seq_len, config.hidden_size, config.intermediate_size
    per_layer = 2 * n * d * d * 4 + 2 * n * d * d_ff * 2 + 2 * n * n * d * 2
    embedding_size = getattr(config, "embedding_size", d)
    projection = 2 * n * embedding_size * d if embedding_size != d else 0
    pooler = 2 * d * d if _family_modules(config.model_type).pooler is not None else 0
    return projection + config.num_hidden_layers * per_layer + pooler


def _context_layers(config):
    return [index for index in range(config.num_hidden_layers) if config.layer_has_context(index)]


def _projection_size(config, layer_index):
    """Parameters of C U for one layer: U (d_c x T d), or A (d_c x T r) and B (T x r x d) at low rank."""
    d_c, d, targets = config.context_size(layer_index), config.hidden_size, len(config.context_targets)
    if config.context_rank is None:
        return d_c * targets * d
    return d_c * targets * config.context_rank + targets * config.context_rank * d


def context_forward_flops(config, seq_len):
    """The FLOPs CASAN adds to one sequence's forward: C U (once per sentence for sentence-level context,
    once per token for deep) and the gate's dot products; none for a kind that gives no layer a context."""
    n, d, targets = seq_len, config.hidden_size, len(config.context_targets)
    rows = n if CONTEXT_KINDS[config.context_type].per_token else 1
    total = 0
    for index in _context_layers(config):
        total += 2 * rows * _projection_size(config, index)
        if config.gate == "dynamic":
            total += targets * (2 * n * d + 2 * rows * d)
    return total


def context_param_count(config):
    """Parameters CASAN adds to BERT (U or A and B, and the gate's v^H, v^C and bias)."""
    d, targets = config.hidden_size, len(config.context_targets)
    gate = targets * (2 * d + 1) if config.gate == "dynamic" else 0
    return sum(_projection_size(config, index) + gate for index in _context_layers(config))


def _local_layers(config):
    return [index for index in range(config.num_hidden_layers) if config.has_local_bias(index)]


def _local_outputs(config):
    """The predictions per head of the local bias: the centre, and the window where the query predicts it."""
    return 2 if config.local_bias == "query" else 1


def local_forward_flops(config, seq_len):
    """The FLOPs the local bias adds to one sequence's forward: W_p and v_p (and v_d) per token, W_d and v_d per
    sentence for the layer-specific window. The bias itself (n x n per head) is elementwise, left out as the
    softmax is."""
    n, d, heads = seq_len, config.hidden_size, config.num_attention_heads
    per_layer = 2 * n * d * d + 2 * n * d * heads * _local_outputs(config)
    if config.local_bias == "layer":
        per_layer += 2 * d * d + 2 * d * heads
    return per_layer * len(_local_layers(config))


def local_param_count(config):
    """Parameters the local bias adds: W_p and v_p (and v_d), with their biases; W_d and v_d for the layer-specific
    window; the per-head scale of the start "zero"."""
    d, heads = config.hidden_size, config.num_attention_heads
    per_layer = d * d + d + (d + 1) * heads * _local_outputs(config)
    if config.local_bias == "layer":
        per_layer += d * d + d + (d + 1) * heads
    if config.local_bias_start == "zero":
        per_layer += heads
    return per_layer * len(_local_layers(config))


def memory_bound_bytes(config, mode, bytes_per_param):
    """Bytes moved by the context products that are bound by memory: the sentence-level U is read once by
    the forward and, in training, read again by the backward and its gradient written."""
    if CONTEXT_KINDS[config.context_type].per_token:
        return 0
    passes = 3 if mode == "training" else 1
    return passes * context_param_count(config) * bytes_per_param


def cost_floor(config, seq_len, batch_size, mode, bytes_per_param=4, flops_per_byte=None):
    """BERT's cost over CASAN's: the best tokens/s ratio a CASAN implementation can reach.

    Returns `(flop_floor, floor)`: FLOPs alone, and FLOPs plus the memory-bound bytes charged at
    `flops_per_byte` (the machine's balance; None leaves the bytes out). Training is forward plus backward,
    three times the forward's FLOPs on both sides.
    """
    bert = bert_forward_flops(config, seq_len) * batch_size
    extra = (context_forward_flops(config, seq_len) + local_forward_flops(config, seq_len)) * batch_size
    flop_floor = bert / (bert + extra)
    if flops_per_byte is None:
        return flop_floor, flop_floor
    passes = 3 if mode == "training" else 1
    extra_bytes = memory_bound_bytes(config, mode, bytes_per_param) * flops_per_byte
    return flop_floor, passes * bert / (passes * (bert + extra) + extra_bytes)
