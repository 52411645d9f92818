"""Where a step's time goes on a GPU, from a torch.profiler trace: the GPU's busy time against the step's wall time.

A step whose GPU is busy for most of its wall time is bound by the arithmetic; one whose GPU idles waits on the
host (launches, Python, autograd). Per profiled step (the profiler's `ProfilerStep#N` ranges, each ending in a
device synchronisation, so that its kernels run inside it):

- **wall**: the step's range on the host clock (the profiler's own overhead included);
- **GPU busy**: the union of the intervals of the device's kernels, copies and fills inside the range (not their
  sum: kernels on several streams overlap);
- **kernels**: how many ran.

Then the kernels that took most GPU time and the operators that took most host time (self CPU time), per step.
On a machine without a GPU the trace has no device events: busy time and kernels are None.
"""

import collections

from torch.autograd import DeviceType


def _is_step(event):
    """A profiled step's range on the host ("ProfilerStep#3", which torch lists as "ProfilerStep*")."""
    return event.device_type == DeviceType.CPU and event.name.startswith("ProfilerStep")


def union_length(intervals):
    """The total length covered by `(start, end)` intervals, overlaps counted once."""
    total, covered_until = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > covered_until:
            total += end - max(start, covered_until)
            covered_until = end
    return total


def _is_device_work(event):
    """A kernel, copy or fill on the GPU (not a user range mirrored on the GPU's timeline)."""
    return event.device_type == DeviceType.CUDA and not event.is_user_annotation


def step_figures(events):
    """Per profiled step, `{"wall_us", "busy_us", "kernels"}` from the profiler's `events()`; busy time and
    kernels are None where the trace has no device events (a CPU run)."""
    steps = sorted((event.time_range.start, event.time_range.end) for event in events if _is_step(event))
    device = [(event.time_range.start, event.time_range.end) for event in events if _is_device_work(event)]
    figures = []
    for start, end in steps:
        inside = [(begin, finish) for begin, finish in device if start <= begin < end]
        figures.append(
            {
                "wall_us": end - start,
                "busy_us": union_length(inside) if device else None,
                "kernels": len(inside) if device else None,
            }
        )
    return figures


def top_kernels(events, steps, rows):
    """The `rows` kernels with most GPU time: `(name, calls per step, us per step)`, the most first."""
    time_us, calls = collections.Counter(), collections.Counter()
    for event in events:
        if _is_device_work(event):
            time_us[event.name] += event.time_range.end - event.time_range.start
            calls[event.name] += 1
    return [(name, calls[name] / steps, total / steps) for name, total in time_us.most_common(rows)]


def top_host_operators(events, steps, rows):
    """The `rows` host operators with most self CPU time: `(name, calls per step, self us per step)`."""
    time_us, calls = collections.Counter(), collections.Counter()
    for event in events:
        if event.device_type == DeviceType.CPU and not _is_step(event):
            time_us[event.name] += event.self_cpu_time_total
            calls[event.name] += 1
    return [(name, calls[name] / steps, total / steps) for name, total in time_us.most_common(rows)]
