"""The host work of one context mixer, fused against its PyTorch path, counted on the CPU with the kernels' launches
stubbed: what the host does around the launches, which a GPU step waits on where it is host-bound.

For each context kind, a mixer of layer 2 of a tiny config runs a training forward (no gates returned, as a training
step asks for none) and the backward of its two outputs, once on each path after a warm-up. Per mixer call it counts

- Python calls: the frames `sys.setprofile` sees start (C functions not counted), the stubbed launches' own left
  out. The backward's include `torch.autograd.backward`'s own, the same on both paths (the PyTorch path's
  backward runs no Python of its own);
- aten operators: what a `TorchDispatchMode` sees, views and metadata operators included.

The fused path is forced on the CPU tensors (`fused_mix_available` says yes) with its two kernels replaced by stubs
that launch nothing: the figures are the host's, whatever the device.

    python -m casan_hf.benchmark.fused_host_work
"""

import contextlib
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import context_mixer, fused_mixer
from ..configuration_casan import CasanConfig
from ..context_mixer import CasanContextMixer, set_fused_mixer


# The paths compared, as `set_fused_mixer` names them: the fused kernels and the PyTorch path.
PATHS = {"fused": "eager", "pytorch": "off"}
CONTEXT_TYPES = ("global", "deep", "deep_global")
LAYER = 2


class _StubKernel:
    """A kernel whose launch `kernel[grid](...)` does nothing."""

    def __getitem__(self, grid):
        return self._launch

    def _launch(self, *args, **kwargs):
        return None


class _CountOperators(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def _python_calls(function):
    """How many Python frames `function()` starts, the stub's left out."""
    stub_code = {_StubKernel.__getitem__.__code__, _StubKernel._launch.__code__}
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
    """The fused kernels taken for CPU tensors and launched as stubs, for the length of the block."""
    saved = (fused_mixer._mix_forward_kernel, fused_mixer._mix_backward_kernel, context_mixer.fused_mix_available)
    fused_mixer._mix_forward_kernel = fused_mixer._mix_backward_kernel = _StubKernel()
    context_mixer.fused_mix_available = fused_mixer.fused_mix_available = _available
    try:
        yield
    finally:
        fused_mixer._mix_forward_kernel, fused_mixer._mix_backward_kernel, available = saved
        context_mixer.fused_mix_available = fused_mixer.fused_mix_available = available


def _available(states):
    """`fused_mix_available` as on a GPU: one Python call that says yes."""
    return True


def mixer_and_inputs(context_type):
    """A mixer of layer `LAYER` of a tiny config of `context_type`, its query and key (leaves) and its context."""
    torch.manual_seed(0)
    config = CasanConfig(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=3, intermediate_size=37, context_type=context_type
    )
    mixer = CasanContextMixer(config, config.context_size(LAYER))
    for parameter in mixer.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    d, batch, n = config.hidden_size, 2, 11
    query, key = (torch.randn(batch, n, d, requires_grad=True) for _ in range(2))
    if context_type == "deep":
        context = tuple(torch.randn(batch, n, d) for _ in range(LAYER))
    else:
        context = (torch.randn(batch, config.context_size(LAYER)),)
    return mixer, query, key, context


def count_host_work(context_type, path):
    """`{"python forward", "python backward", "aten forward", "aten backward"}` for one mixer call on `path` (a key
    of `PATHS`), launches stubbed."""
    mixer, query, key, context = mixer_and_inputs(context_type)
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


def main():
    columns = ("python forward", "python backward", "aten forward", "aten backward")
    print("| context | path | " + " | ".join(columns) + " |")
    print("| --- | --- |" + " ---: |" * len(columns))
    for context_type in CONTEXT_TYPES:
        for path in PATHS:
            counts = count_host_work(context_type, path)
            print(f"| {context_type} | {path} | " + " | ".join(str(counts[column]) for column in columns) + " |")


if __name__ == "__main__":
    main()
