"""How many compute operators a model step runs, from torch.profiler: what a GPU pays one kernel launch for.

A *compute operator* is an `aten::` operator in the profiler's event tree that does work of its own:

- views and other metadata-only operators (`view`, `transpose`, `expand`, `select`, `empty`, ...) are not
  counted (`METADATA_OPERATORS`);
- an operator with a CPU kernel of its own (`addmm`, `baddbmm`, `lerp`, `sum`, `cat`, ...) counts once per
  call, whatever its kernel calls inside (`addmm` copies its bias into the output first);
- a composite operator (`linear`, `einsum`, `clone`, `zeros`, `stack`, `select_backward`, ...) counts as
  the operators it runs: `einsum` as its `bmm` and the copies it needs, `select_backward` as a fill and a
  copy.

The forward and the backward are profiled separately: the forward is the model call and a scalar loss, the
backward is `loss.backward()`, as in the benchmark's training step (`runner.make_step`). The counts depend
on the code path, not on the sizes, as long as the sizes pick the same kernels (sdpa's choice among its
backends does depend on them, on both sides of a comparison alike).

With `fused=True` (`count_table`) the CASAN models take the fused mixer's path as on a GPU, its Triton kernels
launched as stubs that compute nothing (`counted_fused_launches`), and each launch counts as a compute operator of
its own (`triton::mix_forward`, `triton::mix_backward`): the kernels a GPU step runs, counted on the CPU.

`context_operators_per_layer` gives what the context adds: a CASAN model's counts minus those of the
BertModel with the same configuration, over the number of layers (operators run once per forward, like the
masked-mean weights, are spread over the layers; hence halves).
"""

import collections
import contextlib
import functools

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import BertConfig, BertModel

from .. import fused_mixer
from ..configuration_casan import CasanConfig
from ..modeling_casan import CasanModel
from .fused_host_work import stubbed_launches


METADATA_OPERATORS = frozenset(
    "aten::" + name
    for name in (
        "_reshape_alias _unsafe_view alias as_strided chunk contiguous detach diagonal empty empty_like "
        "empty_strided expand expand_as flatten lift_fresh narrow new_empty new_empty_strided numpy_T permute "
        "reshape resize_ resolve_conj resolve_neg select slice split split_with_sizes squeeze t to transpose "
        "unbind unflatten unfold unsqueeze view view_as"
    ).split()
)


@functools.cache
def has_cpu_kernel(name):
    """Whether some overload of the operator `name` ("aten::addmm") has a CPU kernel of its own, rather than
    being composed of other operators (`linear`, `einsum`, `clone`, `zeros`, `select_backward`)."""
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    if packet is None:
        return False
    for overload in packet.overloads():
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(getattr(packet, overload).name(), "CPU"):
                return True
        except RuntimeError:  # an overload the dispatcher does not know by that name
            continue
    return False


def _compute_events(event):
    """The compute operators in `event`'s subtree, each as `(operator name, its profiler event)`."""
    name = event.name
    if name.startswith("aten::") and name not in METADATA_OPERATORS and has_cpu_kernel(name):
        return [(name, event)]  # what its kernel calls inside is part of its work
    found = [pair for child in event.cpu_children for pair in _compute_events(child)]
    if not found and name.startswith("aten::") and name not in METADATA_OPERATORS:
        found = [(name, event)]  # a leaf without a CPU kernel of its own (copy_ is registered for every backend)
    return found


def _profiled_compute_events(prof):
    """The compute operators of one profile, each as `(operator name, its profiler event)`."""
    return [pair for event in prof.events() if event.cpu_parent is None for pair in _compute_events(event)]


def _compute_operators(prof):
    """Compute operators of one profile: a Counter by operator name."""
    return collections.Counter(name for name, _ in _profiled_compute_events(prof))


class _CountedLaunches:
    """A fused kernel's launches (`fused_mixer.CachedLaunches`) that count themselves under `name` in `counts`."""

    def __init__(self, launches, name, counts):
        self.launches, self.name, self.counts = launches, name, counts

    def __getitem__(self, grid):
        self.counts[self.name] += 1
        return self.launches[grid]


@contextlib.contextmanager
def counted_fused_launches():
    """The fused mixer's path taken for CPU tensors, its kernels launched as stubs (`stubbed_launches`), for the
    length of the block. Yields the Counter each launch adds one to, by kernel."""
    launches = collections.Counter()
    with stubbed_launches():
        saved = fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES
        fused_mixer.FORWARD_LAUNCHES = _CountedLaunches(saved[0], "triton::mix_forward", launches)
        fused_mixer.BACKWARD_LAUNCHES = _CountedLaunches(saved[1], "triton::mix_backward", launches)
        try:
            yield launches
        finally:
            fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES = saved


def _taken(launches):
    """The launches counted so far (none without a counter), the counter emptied."""
    if launches is None:
        return collections.Counter()
    taken = collections.Counter(launches)
    launches.clear()
    return taken


def scalar_loss(outputs):
    """The benchmark's training loss: every output token and the pooled vector reach the backward."""
    loss = outputs.last_hidden_state.float().square().mean()
    if getattr(outputs, "pooler_output", None) is not None:
        loss = loss + outputs.pooler_output.float().mean()
    return loss


def call_operator_profile(function):
    """The compute operators of one call of `function` (no arguments): `(calls, cpu_us)`, Counters by operator
    name of their calls and of the CPU time they took in all, in microseconds as the profiler measures them (its own
    cost per call included, which weighs most on the smallest operators: read them as where the time goes)."""
    with profile(activities=[ProfilerActivity.CPU]) as called:
        function()
    calls, cpu_us = collections.Counter(), collections.Counter()
    for name, event in _profiled_compute_events(called):
        calls[name] += 1
        cpu_us[name] += event.cpu_time_total
    return calls, cpu_us


def operator_counts(model, inputs, mode="training", loss=scalar_loss, launches=None):
    """Compute operators of one step of `model` on `inputs` (a dict of model arguments), `loss(outputs)` the
    scalar whose backward is counted; `launches`: the counter of `counted_fused_launches`, whose launches count
    with the operators of the forward or backward they run in.

    Returns `{"forward": Counter, "backward": Counter}` (operator name -> calls); inference has an empty
    backward and runs the forward in eval mode under `torch.no_grad()`, training runs in train mode (dropout
    on). One untimed step runs first, so that lazy initialisation is not counted.
    """
    training = mode == "training"
    model.train(training)

    def forward():
        with torch.set_grad_enabled(training):
            return loss(model(**inputs))

    warm = forward()
    if training:
        warm.backward()
    model.zero_grad(set_to_none=True)
    _taken(launches)
    with profile(activities=[ProfilerActivity.CPU]) as forward_profile:
        value = forward()
    counts = {"forward": _compute_operators(forward_profile) + _taken(launches), "backward": collections.Counter()}
    if training:
        with profile(activities=[ProfilerActivity.CPU]) as backward_profile:
            value.backward()
        counts["backward"] = _compute_operators(backward_profile) + _taken(launches)
        model.zero_grad(set_to_none=True)
    return counts


def small_bert_config(num_hidden_layers=12, hidden_size=64, **overrides):
    """A BERT configuration with BERT-base's depth and a small width: the same operators, fast to profile."""
    shape = dict(
        vocab_size=99,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=max(1, hidden_size // 64),
        intermediate_size=4 * hidden_size,
        max_position_embeddings=512,
    )
    return BertConfig(**{**shape, **overrides})


def count_table(bert_config, variants, inputs, mode="training", attn_implementation="sdpa", fused=False):
    """Operator counts of BertModel and of each CASAN variant with `bert_config`'s shape and weights, the CASAN
    models on the fused mixer's path with `fused` (its launches counted: `counted_fused_launches`).

    `variants` is a list of `(label, casan_options)`. Returns rows `(label, forward, backward, extra_forward,
    extra_backward)`: whole-step totals, and per layer what the context adds over BertModel.
    """
    torch.manual_seed(0)
    bert = BertModel._from_config(bert_config, attn_implementation=attn_implementation)
    bert_counts = operator_counts(bert, inputs, mode)
    layers = bert_config.num_hidden_layers
    rows = [("bert", sum(bert_counts["forward"].values()), sum(bert_counts["backward"].values()), 0.0, 0.0)]
    for label, options in variants:
        config = CasanConfig.from_dict({**bert_config.to_dict(), **options})
        model = CasanModel._from_config(config, attn_implementation=attn_implementation)
        model.load_state_dict(bert.state_dict(), strict=False)
        with counted_fused_launches() if fused else contextlib.nullcontext() as launches:
            counts = operator_counts(model, inputs, mode, launches=launches)
        forward, backward = sum(counts["forward"].values()), sum(counts["backward"].values())
        rows.append(
            (
                label,
                forward,
                backward,
                (forward - rows[0][1]) / layers,
                (backward - rows[0][2]) / layers,
            )
        )
    return rows


def format_count_table(rows, num_layers):
    """A markdown table of `count_table`'s rows."""
    lines = [
        "| model | forward | backward | forward per layer | backward per layer | context forward per layer "
        "| context backward per layer |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, forward, backward, extra_forward, extra_backward in rows:
        lines.append(
            f"| {label} | {forward} | {backward} | {forward / num_layers:.2f} | {backward / num_layers:.2f} "
            f"| {extra_forward:+.2f} | {extra_backward:+.2f} |"
        )
    return "\n".join(lines)


def context_operators_per_layer(counts, bert_counts, num_layers):
    """Per layer, by operator name, what a CASAN model's counts add over BertModel's (negative: fewer)."""
    difference = collections.Counter(counts)
    difference.subtract(bert_counts)
    return {name: calls / num_layers for name, calls in difference.items() if calls}
