"""The host work of one context mixer, fused against its PyTorch path, counted on the CPU with the kernels' launches
stubbed: what the host does around the launches, which a GPU step waits on where it is host-bound.

For each context kind and gate, a mixer of layer 2 of a tiny config runs a training forward (no gates returned, as a
training step asks for none) and the backward of its two outputs, once on each path after a warm-up. Per mixer call it
counts

- Python calls: the frames `sys.setprofile` sees start (C functions not counted), the stubbed launches' own left
  out. The backward's include `torch.autograd.backward`'s own, the same on both paths (the PyTorch path's
  backward runs no Python of its own);
- aten operators: what a `TorchDispatchMode` sees, views and metadata operators included.

The fused path is forced on the CPU tensors (`fused_mix_available` says yes) with its two kernels replaced by stubs
that launch nothing: the figures are the host's, whatever the device. The stub's compiled kernel is Triton's own
`CompiledKernel` with a launcher that launches nothing, so that its public call runs (and counts) Triton's Python.

With `--time`, it also times one mixer call, forward and backward, on each path and one `nn.Linear(d, d)` forward
and backward on the query (the yardstick of the fused function's host time, held to at most twice it),
round-robin, each a median of wall and thread CPU time, with the PyTorch path's control copy, which must tie with
it. The tensors are tiny, so what is timed is the host's work: on the CPU the stubbed launches leave out the
compiled kernels' launchers; `--device cuda` makes them.

    python -m casan_hf.benchmark.fused_host_work [--time [--device cuda]]
"""

import argparse
import contextlib
import statistics
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import context_mixer, fused_mixer
from ..configuration_casan import CasanConfig
from ..context import CONTEXT_KINDS
from ..context_mixer import CasanContextMixer, set_fused_mixer
from ..options import GATE_KINDS


# The paths compared, as `set_fused_mixer` names them: the fused kernels and the PyTorch path.
PATHS = {"fused": "eager", "pytorch": "off"}
# Every context kind that gives a layer context (the rows of `CONTEXT_KINDS`).
CONTEXT_TYPES = tuple(name for name, kind in CONTEXT_KINDS.items() if kind.gives_context)
LAYER = 2


class _StubKernel:
    """A JIT kernel whose launch `kernel[grid](...)` does nothing and returns a compiled kernel that does nothing."""

    def __init__(self, kernel):
        self.arg_names = kernel.arg_names

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, *args, **kwargs):
        return _StubCompiled()


def _stub_launcher(*args):
    """The compiled kernel's launcher (C on a GPU), launching nothing."""


if fused_mixer.triton is not None:

    class _StubCompiled(fused_mixer.triton.compiler.CompiledKernel):
        """A compiled kernel whose public call (`compiled[grid](*args, stream=stream)`) runs Triton's own Python, its
        launcher a stub: its handles taken as loaded (as after the JIT's first launch), no source to read launch
        metadata from."""

        def __init__(self):
            self.module, self.function, self.packed_metadata = "stub module", None, None
            self.src, self.name = None, "stub"
            self._run = _stub_launcher


class _StubDriver:
    """Triton's driver on a GPU with device 0 and stream 0: a Python call each, as `torch.cuda.current_device` is."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0


class _CountOperators(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def _python_calls(function):
    """How many Python frames `function()` starts, the stub's left out."""
    stub_code = {_StubKernel.__getitem__.__code__, _StubKernel._launch.__code__, _stub_launcher.__code__}
    calls = 0

    def profiler(frame, event, argument):
        nonlocal calls
        if event == "call" and frame.f_code not in stub_code:
            calls += 1

    sys.setprofile(profiler)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls - 1  # `function` itself


@contextlib.contextmanager
def stubbed_launches():
    """The fused kernels taken for CPU tensors and launched as stubs, for the length of the block: each launch goes
    through the kernels' `CachedLaunches`, whose JIT kernel and compiled kernel launch nothing."""
    saved = (fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES, context_mixer.fused_mix_available)
    fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES = (
        fused_mixer.CachedLaunches(_StubKernel(kernel), _StubDriver())
        for kernel in (fused_mixer._mix_forward_kernel, fused_mixer._mix_backward_kernel)
    )
    context_mixer.fused_mix_available = fused_mixer.fused_mix_available = _available
    try:
        yield
    finally:
        fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES, available = saved
        context_mixer.fused_mix_available = fused_mixer.fused_mix_available = available


def _available(states):
    """`fused_mix_available` as on a GPU: one Python call that says yes."""
    return True


def mixer_and_inputs(context_type, device="cpu", gate="dynamic"):
    """A mixer of layer `LAYER` of a tiny config of `context_type` and `gate`, its query and key (leaves) and its
    context, on `device`."""
    torch.manual_seed(0)
    config = CasanConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=3,
        intermediate_size=37,
        context_type=context_type,
        gate=gate,
    )
    mixer = CasanContextMixer(config, config.context_size(LAYER))
    for parameter in mixer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    d, batch, n = config.hidden_size, 2, 11
    query, key = (torch.randn(batch, n, d, device=device, requires_grad=True) for _ in range(2))
    kind = CONTEXT_KINDS[context_type]
    if kind.per_token:  # each layer input the kind reads, position by position
        context = tuple(torch.randn(batch, n, d, device=device) for _ in range(kind.width(LAYER)))
    else:  # their masked means, concatenated
        context = (torch.randn(batch, config.context_size(LAYER), device=device),)
    return mixer.to(device), query, key, context


def count_host_work(context_type, path, gate="dynamic"):
    """`{"python forward", "python backward", "aten forward", "aten backward"}` for one mixer call on `path` (a key
    of `PATHS`) with `gate`, launches stubbed."""
    mixer, query, key, context = mixer_and_inputs(context_type, gate=gate)
    set_fused_mixer(mixer, PATHS[path])
    counts = {}
    with stubbed_launches():

        def forward():
            mixed_query, mixed_key, _ = mixer(query, key, context, return_gates=False)
            return [mixed_query, mixed_key]

        def backward(outputs):
            torch.autograd.backward(outputs, [torch.ones_like(output) for output in outputs])

        backward(forward())  # warm-up: the kernels' options are computed once
        outputs = []
        counts["python forward"] = _python_calls(lambda: outputs.extend(forward()))
        counts["python backward"] = _python_calls(lambda: backward(outputs))
        with _CountOperators() as operators:
            outputs = forward()
        counts["aten forward"] = operators.count
        grads = [torch.ones_like(output) for output in outputs]
        with _CountOperators() as operators:
            torch.autograd.backward(outputs, grads)
        counts["aten backward"] = operators.count
    return counts


def _timed_steps(context_type, device):
    """`{arm: step}`: one mixer call forward and backward on each path (and the PyTorch path's control copy, a mixer
    of its own); the fused function alone (`FusedMix`, forward and backward, on the tensors the mixer hands it);
    and `nn.Linear(d, d)` forward and backward on the query."""
    steps = {}
    for arm, path in (("mixer fused", "fused"), ("mixer PyTorch", "pytorch"), ("its control copy", "pytorch")):
        mixer, query, key, context = mixer_and_inputs(context_type, device)
        set_fused_mixer(mixer, PATHS[path])

        def step(mixer=mixer, query=query, key=key, context=context):
            mixed_query, mixed_key, _ = mixer(query, key, context, return_gates=False)
            torch.autograd.backward([mixed_query, mixed_key], [torch.ones_like(mixed_query)] * 2)

        steps[arm] = step
    mixer, query, key, context = mixer_and_inputs(context_type, device)
    projected = mixer.project(context).detach().requires_grad_()
    projected, (first, second), parameters = fused_mixer.prepare(projected, (query, key), mixer.parameters_of_gate())
    arguments = (projected, first, second, *parameters, mixer.fixed_gate, mixer.gate_heads, True)

    def fused_function_step():
        mixed, _ = fused_mixer.fused_mix_apply(*arguments)
        torch.autograd.backward([mixed], [torch.ones_like(mixed)])

    steps["fused function"] = fused_function_step
    linear = torch.nn.Linear(query.shape[-1], query.shape[-1], device=device)

    def linear_step():
        output = linear(query)
        torch.autograd.backward([output], [torch.ones_like(output)])

    steps["nn.Linear"] = linear_step
    return steps


def time_host_work(context_type, device="cpu", rounds=40, block=25):
    """`{arm: (median wall us, median thread CPU us)}` per call, `_timed_steps`' arms round-robin (each round starts
    one arm later), `block` calls in a row each, one warm-up round first. On the CPU the launches are stubbed; on a
    GPU they are made, and a block waits for the GPU once, at its end: the GPU runs such tiny kernels faster than the
    host launches them, so the time is the host's."""
    steps = _timed_steps(context_type, device)
    arms = list(steps)
    timings = {arm: ([], []) for arm in arms}
    on_cpu = torch.device(device).type == "cpu"
    synchronize = (lambda: None) if on_cpu else torch.cuda.synchronize
    with stubbed_launches() if on_cpu else contextlib.nullcontext():
        for round_index in range(rounds + 1):
            shift = round_index % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                wall, cpu = time.perf_counter(), time.thread_time()
                for _ in range(block):
                    steps[arm]()
                synchronize()
                if round_index:  # the first round warms up
                    timings[arm][0].append((time.perf_counter() - wall) / block * 1e6)
                    timings[arm][1].append((time.thread_time() - cpu) / block * 1e6)
    return {arm: (statistics.median(wall), statistics.median(cpu)) for arm, (wall, cpu) in timings.items()}


def print_times(device):
    arms = ("mixer fused", "mixer PyTorch", "its control copy", "fused function", "nn.Linear")
    launches = "launches stubbed" if torch.device(device).type == "cpu" else f"on {device}"
    print(f"Per call, forward and backward: median wall time (thread CPU time), {launches}.")
    print()
    print("| context | " + " | ".join(arms) + " | fused function / nn.Linear | mixer fused / PyTorch |")
    print("| --- |" + " ---: |" * (len(arms) + 2))
    for context_type in CONTEXT_TYPES:
        times = time_host_work(context_type, device)
        wall = {arm: times[arm][0] for arm in arms}
        cells = [f"{times[arm][0]:.0f} us ({times[arm][1]:.0f})" for arm in arms]
        ratios = (wall["fused function"] / wall["nn.Linear"], wall["mixer fused"] / wall["mixer PyTorch"])
        print(f"| {context_type} | " + " | ".join(cells + [f"{ratio:.2f}" for ratio in ratios]) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", action="store_true", help="also time each path against nn.Linear (a minute)")
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda"), help="where --time runs: launches stubbed, or made"
    )
    arguments = parser.parse_args()
    columns = ("python forward", "python backward", "aten forward", "aten backward")
    print("| context | gate | path | " + " | ".join(columns) + " |")
    print("| --- | --- | --- |" + " ---: |" * len(columns))
    for context_type in CONTEXT_TYPES:
        for gate in GATE_KINDS:
            for path in PATHS:
                counts = count_host_work(context_type, path, gate)
                cells = " | ".join(str(counts[column]) for column in columns)
                print(f"| {context_type} | {gate} | {path} | {cells} |")
    if arguments.time:
        print()
        print_times(arguments.device)


if __name__ == "__main__":
    main()
