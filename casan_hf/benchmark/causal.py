"""What context-aware self-attention costs a causal language model (used by scripts/benchmark.py --causal): a Llama
language model (transformers' `LlamaForCausalLM`, random weights) beside its CASAN models with the same weights, in
the two phases of generation, each at batch 1:

- prefill: one forward over a `context`-token prompt that fills the cache and computes the last position's logits
  alone, as generate()'s first step does (`logits_to_keep=1`); tokens/s over the prompt;
- decode: `new_tokens` single-token forwards through the cache after that prompt, as generate()'s later steps make
  them; tokens/s over the new tokens. Each is timed alone, the models taking turns token by token, and every
  `new_tokens` tokens a model's cache goes back to the prompt's (`rewind`), so that each decodes at the same contexts.

The models run round-robin with medians, wall and process CPU time (`runner.benchmark_group`), beside two controls
that must tie with Llama: a copy of it and CASAN `none`. Decode's turns are a token long (about 20 ms on a CPU, not
a whole step of tokens), so that a slow spell of the host, which moved every model's median by up to a fifth when each
turn was 32 tokens long, falls on every model alike. Beside the times, the cache state one sequence holds after the
prompt: the keys and values, and CASAN's running context sums (`CasanCache.context_sums`), per layer, in bytes.
"""

import collections
import statistics
from dataclasses import asdict, dataclass, field

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ..context_mixer import CasanContextMixer
from ..modeling_casan_causal import CasanCache
from .operators import call_operator_profile
from .runner import Variant, benchmark_group, build_model, compiled_twins, count_params, default_variants, weights_mb


# The family timed: Llama, whose layout (separate query and key projections, rotary positions, grouped-query
# attention) Qwen2 and Qwen3 share.
FAMILY = "llama"
PHASES = ("prefill", "decode")
# The tokens a compiled model decodes after its first two, in which it must compile nothing again.
COUNTED_TOKENS = 64
# The targets, as a ratio to Llama's tokens/s in the same run, by (context type, context rank) and phase.
TARGETS = {
    ("global", None): {"prefill": 0.93, "decode": 0.95},
    ("deep_global", 64): {"prefill": 0.90, "decode": 0.90},
}


@dataclass(frozen=True)
class CausalShape:
    """The Llama timed and its input. By default a small Llama a CPU runs in a few minutes: grouped-query attention
    (half as many key-value heads as heads), Llama's feed-forward width (2/3 of 4 x hidden, rounded up to 256), and a
    vocabulary of 8,192, so that the output layer does not outweigh the layers CASAN changes (32,000 words would be
    a third of the weights at this width)."""

    hidden: int = field(default=512, metadata={"help": "hidden size"})
    layers: int = field(default=8, metadata={"help": "layers"})
    heads: int = field(default=8, metadata={"help": "attention heads"})
    kv_heads: int = field(default=4, metadata={"help": "key-value heads (grouped-query attention)"})
    intermediate: int = field(default=1536, metadata={"help": "feed-forward width"})
    vocab: int = field(default=8192, metadata={"help": "vocabulary size"})
    context: int = field(default=512, metadata={"help": "prompt length: the prefill's tokens, the decode's context"})
    new_tokens: int = field(default=32, metadata={"help": "tokens decoded after the prompt in each timed decode step"})

    def config(self):
        return LlamaConfig(
            hidden_size=self.hidden,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            intermediate_size=self.intermediate,
            vocab_size=self.vocab,
            max_position_embeddings=self.context + self.new_tokens,
        )

    @property
    def label(self):
        return f"llama {self.hidden}x{self.layers}, {self.heads} heads, {self.kv_heads} kv heads"


def causal_variants(rank, compile_mode=None):
    """Llama, its control copy, CASAN `none` (the control), `global`, `deep_global` at full rank and at `rank`, `deep`
    at `rank` (at full rank, deep's context, every earlier layer's states per token, is not a model to use), and
    `global` at `rank`: in a causal model `global`'s context is per token too, so its full-rank U costs a product per
    token a layer (docs/BENCHMARKS.md), which a low rank makes cheaper. With a `compile_mode`, each is followed by
    its compiled twin (`default_variants`)."""
    extra = tuple(Variant(f"casan {kind} r{rank}", kind, rank) for kind in ("deep", "global"))
    return default_variants(rank, ("none", "global", "deep_global"), compile_mode, family=FAMILY, extra=extra)


def causal_models(shape, variants, attn_implementation, dtype, device, compile_backend="inductor"):
    """`{label: model}`, every language model with the weights of one random Llama of `shape`, in eval mode; a
    compiled variant is its eager model through `torch.compile` with dynamic shapes (generate()'s cache grows a
    token a step), by `compile_backend`."""
    torch.manual_seed(0)
    reference = LlamaForCausalLM._from_config(shape.config(), attn_implementation=attn_implementation, dtype=dtype)
    models = {
        variant.label: build_model(variant, reference, attn_implementation, dtype, head="causal-lm").to(device).eval()
        for variant in variants
        if variant.compile_mode is None
    }
    return compiled_twins(models, variants, compile_backend, dynamic=True)


def compiled_graphs(model, inputs, tokens=COUNTED_TOKENS):
    """What torch.compile makes of a compiled model's generation, from dynamo's counters around each call of its
    timed steps (`make_causal_step`): the graphs its prompt's prefill compiles, its first and second decoded
    tokens, and the `tokens` decoded after them, through the growing cache and its rewinds (0: none compiles
    again), and the graph breaks in all. It compiles the model outside the timing. The second token compiles a graph
    of its own in Llama too: the prefill leaves the cache's keys and values in the attention's layout (heads
    strided by a head's width), and a decoded token's concatenation makes them contiguous."""
    from torch._dynamo.utils import counters

    def made():
        return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())

    counted = [made()]
    step = make_causal_step(model, inputs, "decode")  # the prompt's prefill first
    counted.append(made())
    for index in range(2 + tokens):
        step()
        if index < 2:
            counted.append(made())
    counted.append(made())
    names = ("prefill", "first token", "second token", f"next {tokens} tokens")
    graphs = {name: after[0] - before[0] for name, before, after in zip(names, counted[:-1], counted[1:], strict=True)}
    return graphs | {"graph breaks": counted[-1][1] - counted[0][1]}


def causal_inputs(shape, device):
    """The prompt `(1, context)` and the tokens decoded after it `(1, new_tokens)`: random ids, fixed, the same for
    every model (not each model's own greedy choice, so that every model decodes the same tokens)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, shape.vocab, (1, shape.context + shape.new_tokens), generator=generator).to(device)
    return {"prompt": ids[:, : shape.context], "new_tokens": ids[:, shape.context :]}


def prefill(model, prompt):
    """The prompt's forward as generate()'s first step runs it; returns the cache it filled."""
    with torch.no_grad():
        outputs = model(input_ids=prompt, attention_mask=torch.ones_like(prompt), use_cache=True, logits_to_keep=1)
    return outputs.past_key_values


def prompt_state(cache):
    """What `rewind` puts back: each layer's keys and values after the prompt (the tensors themselves: a cache's
    update makes new ones by concatenation and never writes into these) and a `CasanCache`'s running sums."""
    key_values = [(layer.keys, layer.values) for layer in cache.layers]
    return key_values, dict(getattr(cache, "context_sums", {}))


def rewind(cache, state):
    """`cache` put back as it stood after the prompt (`prompt_state`), the rollback `CasanCache`'s own crop refuses
    because it keeps no earlier sums: the same tensors, so with the strides of generate()'s cache there (a crop's
    view would keep the longer tensor's, which a compiled step takes for new strides and compiles again)."""
    key_values, context_sums = state
    for layer, (keys, values) in zip(cache.layers, key_values, strict=True):
        layer.keys, layer.values = keys, values
    if isinstance(cache, CasanCache):
        cache.context_sums = dict(context_sums)


def make_causal_step(model, inputs, phase):
    """One timed call of `phase`: the prompt's prefill, or the decode of the next new token after the prompt's cache
    (made here, once), the cache rewound to it after the last (`calls_per_step`: a step of decode is `new_tokens`
    calls)."""
    prompt = inputs["prompt"]
    if phase == "prefill":
        return lambda: prefill(model, prompt)
    cache = prefill(model, prompt)
    state = prompt_state(cache)
    # each token and mask a tensor of its own, as generate() makes each step's: a slice of one would start at an
    # offset, which a compiled step takes for another alignment and compiles again
    tokens = [token.clone() for token in inputs["new_tokens"].split(1, dim=1)]
    masks = [prompt.new_ones(1, prompt.shape[1] + index + 1) for index in range(len(tokens))]
    index = 0

    def step():
        nonlocal index
        if index == 0:
            rewind(cache, state)
        with torch.no_grad():
            model(input_ids=tokens[index], attention_mask=masks[index], past_key_values=cache, use_cache=True)
        index = (index + 1) % len(tokens)

    return step


def calls_per_step(shape, phase):
    """The timed calls (`make_causal_step`) of one step of `phase`: the prompt's prefill is one, decode one a token."""
    return shape.new_tokens if phase == "decode" else 1


def progress_steps(shape, variants, warmup, repeats):
    """The calls `measure` runs through the progress bar: every model's warm-up, memory and timed calls, both
    phases."""
    return sum((warmup + repeats) * calls_per_step(shape, phase) + 1 for phase in PHASES) * len(variants)


def phase_operators(model, inputs, phase, calls, profiles=3):
    """The compute operators (`operators.call_operator_profile`) of one step of `phase` (its `calls`,
    `calls_per_step`) after an uncounted one, per call: a prompt's prefill, or one decoded token (averaged over a
    step's tokens): `(calls, cpu_us)`, Counters by operator name, the times those of the fastest of `profiles`
    profiled steps (the first profile of a process pays the profiler's start, and any step the machine's other
    work)."""
    call = make_causal_step(model, inputs, phase)

    def step():
        for _ in range(calls):
            call()

    step()
    found = min((call_operator_profile(step) for _ in range(profiles)), key=lambda profile: profile[1].total())
    return tuple(collections.Counter({name: value / calls for name, value in counter.items()}) for counter in found)


def multiply_adds(model, shape, phase):
    """Matrix-product multiply-adds of one step of `phase` (the prompt's prefill, or one decoded token, averaged over
    the new tokens): every layer's projections a token, the attention's scores and values over the keys each
    position sees (causal), the output layer where logits are computed (the prompt's last position, every decoded
    token), and the context's products a token (C U, or its two factors, and the gate's two dot products per
    target: in a causal model every position has a context of its own)."""
    base = model.model
    layers = sum(module.weight.numel() for module in base.layers.modules() if isinstance(module, torch.nn.Linear))
    context = sum(
        mixer.context_weight.numel()
        + (0 if mixer.rank is None else mixer.context_up.numel())
        + (2 * mixer.width if mixer.dynamic else 0)
        for mixer in model.modules()
        if isinstance(mixer, CasanContextMixer)
    )
    query_width = base.config.num_attention_heads * base.config.head_dim
    output = model.lm_head.weight.numel()
    if phase == "prefill":
        tokens, keys = shape.context, shape.context * (shape.context + 1) // 2
        return tokens * (layers + context) + 2 * query_width * keys * shape.layers + output
    keys = shape.context + (shape.new_tokens + 1) / 2
    return layers + context + 2 * query_width * keys * shape.layers + output


def weight_bytes_per_token(model):
    """The bytes of weights one decoded token reads: every parameter but the embedding table, of which one row."""
    embeddings = model.get_input_embeddings().weight
    return sum(p.numel() * p.element_size() for p in model.parameters()) - embeddings[1:].nbytes


def floors(models, shape, phase):
    """`{label: (flop_floor, floor)}`: Llama's cost over each model's, the best ratio an implementation can reach.
    Prefill is bound by arithmetic: both are the multiply-adds' ratio. Decode reads every weight once a token, which
    a batch of 1 cannot amortize: `floor` is the ratio of the weight bytes read a token, `flop_floor` the
    multiply-adds' beside it."""
    source = models[FAMILY]
    macs, bytes_read = multiply_adds(source, shape, phase), weight_bytes_per_token(source)
    result = {}
    for label, model in models.items():
        flop_floor = macs / multiply_adds(model, shape, phase)
        floor = flop_floor if phase == "prefill" else bytes_read / weight_bytes_per_token(model)
        result[label] = (flop_floor, floor)
    return result


def cache_state_bytes(model, prompt):
    """What the cache of one sequence holds after `prompt` (batch 1), per layer, in bytes: `(keys and values, running
    context sums and counts)`; the sums are CASAN's (a `global` kind's, none for `deep` or `none`)."""
    cache = prefill(model, prompt)
    context_sums = getattr(cache, "context_sums", {})
    key_values = [layer.keys.nbytes + layer.values.nbytes for layer in cache.layers]
    sums = [sum(tensor.nbytes for tensor in context_sums.get(index, ())) for index in range(len(cache.layers))]
    return key_values, sums


def measure(
    shape,
    rank,
    attn_implementation,
    dtype,
    device,
    warmup,
    repeats,
    progress=None,
    compile_mode=None,
    backend="inductor",
):
    """Times every model of `causal_variants(rank, compile_mode)` in both phases; one record per model and phase. The
    compiled models compile first (`compiled_graphs`, by `backend`), outside the timing."""
    variants = causal_variants(rank, compile_mode)
    models = causal_models(shape, variants, attn_implementation, dtype, device, backend)
    eager = {variant.label: models[variant.label] for variant in variants if variant.compile_mode is None}
    inputs = causal_inputs(shape, device)
    graphs = {}
    for variant in variants:
        if variant.compile_mode is not None:
            if progress is not None:
                progress.set_description(f"{shape.label}: compiling {variant.eager_label}")
            graphs[variant.label] = compiled_graphs(models[variant.label], inputs)
    cache_bytes = {label: cache_state_bytes(model, inputs["prompt"]) for label, model in eager.items()}
    records = []
    for phase in PHASES:
        if progress is not None:
            progress.set_description(f"{shape.label}: {phase}")
        calls = calls_per_step(shape, phase)
        profiles = {label: phase_operators(model, inputs, phase, calls) for label, model in eager.items()}
        results = benchmark_group(
            models,
            variants,
            inputs,
            phase,
            device,
            warmup * calls,
            repeats * calls,
            progress,
            step_maker=make_causal_step,
        )
        costs = {
            "cache": cache_bytes,
            "operators": {label: calls for label, (calls, _) in profiles.items()},
            "operator_us": {label: cpu_us for label, (_, cpu_us) in profiles.items()},
            "floors": floors(eager, shape, phase),
            "graphs": graphs,
        }
        records += phase_records(results, models, variants, shape, phase, costs)
    for record in records:
        record.update(
            device=str(device), dtype=str(dtype).removeprefix("torch."), attn_implementation=attn_implementation
        )
    return records


def phase_records(results, models, variants, shape, phase, costs):
    """One JSON-ready record per model of one phase, with the encoders' records' fields (ratios over Llama's medians
    in the same run, named as theirs, `ratio_vs_bert`, a compiled model's over compiled Llama's, and its
    `speedup_vs_eager` over its own eager run; a step's times the median call's times its calls, `timed_calls` the
    calls timed, `repeats` the steps they make; the floors of `floors`), `target` the issue's where it sets one (else
    None), the cache state per layer (`costs["cache"]`), and the compute operators of a step (a prompt's prefill, one
    decoded token): `operators` in all, `context_operators_per_layer` what the model runs beyond Llama over the
    layers, and `operator_counts` by name; where the time goes, from the profiler (`operator_cpu_us`, each
    operator's microseconds of CPU by name, the most first, and `context_cpu_us_per_layer`, beyond Llama's). A
    compiled model's operators are its graph's kernels, not counted (None); `compiled_graphs` says what it compiled
    (`compiled_graphs`), None for an eager model."""
    references = {variant.compile_mode: variant.label for variant in reversed(variants) if not variant.context_type}
    source = references[None]
    source_operators = costs["operators"][source]
    source_us = sum(costs["operator_us"][source].values())
    tokens = shape.context if phase == "prefill" else shape.new_tokens
    calls = calls_per_step(shape, phase)
    records = []
    for variant in variants:
        wall, cpu, step_mb = results[variant.label]
        step_wall, step_cpu = calls * statistics.median(wall), calls * statistics.median(cpu)
        reference_wall, reference_cpu = results[references[variant.compile_mode]][:2]
        eager_label = variant.eager_label
        key_values, sums = costs["cache"][eager_label]
        flop_floor, floor = costs["floors"][eager_label]
        params = count_params(models[eager_label])
        record = {
            "family": FAMILY,
            "size": shape.label,
            "shape": asdict(shape),
            "model": variant.label,
            "context_type": variant.context_type,
            "context_rank": variant.context_rank,
            "compile_mode": variant.compile_mode,
            "mode": phase,
            "seq_len": shape.context,
            "new_tokens": shape.new_tokens if phase == "decode" else 0,
            "batch_size": 1,
            "weights": "random",
            "tokens_per_s": tokens / step_wall,
            "ms_per_step": 1000 * step_wall,
            "cpu_ms_per_step": 1000 * step_cpu,
            "repeats": len(wall) // calls,
            "timed_calls": len(wall),
            "peak_mem_mb": None if step_mb is None else weights_mb(models[eager_label]) + step_mb,
            "step_mem_mb": step_mb,
            "params": params,
            "context_params": params - count_params(models[source]),
            "ratio_vs_bert": statistics.median(reference_wall) / statistics.median(wall),
            "cpu_ratio_vs_bert": statistics.median(reference_cpu) / statistics.median(cpu),
            "speedup_vs_eager": statistics.median(results[eager_label][0]) / statistics.median(wall),
            "flop_floor": flop_floor,
            "floor": floor,
            "flops_per_byte": None,
            "operators": None,
            "context_operators_per_layer": None,
            "operator_counts": None,
            "operator_cpu_us": None,
            "context_cpu_us_per_layer": None,
            "compiled_graphs": costs["graphs"].get(variant.label),
            "target": TARGETS.get((variant.context_type, variant.context_rank), {}).get(phase),
            "kv_cache_bytes": key_values,
            "context_state_bytes": sums,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }
        if variant.compile_mode is None:
            operators, cpu_us = costs["operators"][variant.label], costs["operator_us"][variant.label]
            record.update(
                operators=sum(operators.values()),
                context_operators_per_layer=(sum(operators.values()) - sum(source_operators.values())) / shape.layers,
                operator_counts=dict(sorted(operators.items())),
                operator_cpu_us={name: round(us, 1) for name, us in cpu_us.most_common()},
                context_cpu_us_per_layer=(sum(cpu_us.values()) - source_us) / shape.layers,
            )
        records.append(record)
    return records


def format_cache_table(records):
    """The cache state one sequence holds after the prompt, per model: its keys and values and CASAN's running sums,
    per layer and in all."""
    first = records[0]
    lines = [
        f"cache state per sequence after the {first['seq_len']}-token prompt, bytes (per layer, and all layers)",
        f"{'model':<40} {'kv / layer':>11} {'sums / layer':>12} {'kv':>11} {'sums':>8} {'sums / kv':>9}",
    ]
    for record in records:
        if record["mode"] != first["mode"]:
            continue
        key_values, sums = record["kv_cache_bytes"], record["context_state_bytes"]
        lines.append(
            f"{record['model']:<40} {per_layer(key_values):>11} {per_layer(sums):>12} {sum(key_values):>11} "
            f"{sum(sums):>8} {sum(sums) / sum(key_values):>9.2%}"
        )
    return "\n".join(lines)


def format_operator_table(records):
    """The compute operators of a prompt's prefill and of one decoded token per model, in all and per layer beyond
    Llama's."""
    lines = [
        "compute operators of a step (prefill: the prompt; decode: one token), what each model runs beyond Llama "
        "per layer, and the profiler's CPU microseconds of those operators beyond Llama's per layer",
        f"{'model':<40} {'prefill':>8} {'per layer':>9} {'us':>9} {'decode':>8} {'per layer':>9} {'us':>9}",
    ]
    by_phase = {(record["model"], record["mode"]): record for record in records}
    for model in dict.fromkeys(record["model"] for record in records if record["operators"] is not None):
        cells = [by_phase[model, phase] for phase in PHASES]
        lines.append(
            f"{model:<40} "
            + " ".join(
                f"{cell['operators']:>8.0f} {cell['context_operators_per_layer']:>+9.2f} "
                f"{cell['context_cpu_us_per_layer']:>+9.1f}"
                for cell in cells
            )
        )
    return "\n".join(lines)


def format_graph_table(records):
    """What each compiled model compiled (`compiled_graphs`): the graphs of its prefill, of its first decoded token
    and of the tokens after it, and its graph breaks. Llama's control copy, the same modules, runs the graphs
    compiled for Llama (dynamo's guards do not tell the two apart) and makes none."""
    compiled = [record for record in records if record["compiled_graphs"] and record["mode"] == records[0]["mode"]]
    names = list(compiled[0]["compiled_graphs"])
    lines = [
        "graphs each compiled model made (a decoding step in one graph, compiled once; Llama's copy runs Llama's)",
        f"{'model':<52} " + " ".join(f"{name:>16}" for name in names),
    ]
    for record in compiled:
        lines.append(f"{record['model']:<52} " + " ".join(f"{record['compiled_graphs'][name]:>16}" for name in names))
    return "\n".join(lines)


def phase_title(record):
    """What a phase's table times, from one of its records."""
    tokens = f"{record['seq_len']}-token prompt"
    if record["mode"] == "decode":
        tokens = f"{record['new_tokens']} tokens after a {tokens}"
    return (
        f"{record['size']} ({record['weights']} weights), {record['mode']}: {tokens}, batch 1, {record['device']} "
        f"{record['dtype']} {record['attn_implementation']}, {record['threads']} threads"
    )


def per_layer(sizes):
    """A per-layer list of sizes as one number where every layer's is the same, else the range."""
    return str(sizes[0]) if len(set(sizes)) == 1 else f"{min(sizes)}-{max(sizes)}"
