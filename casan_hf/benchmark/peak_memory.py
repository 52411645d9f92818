"""Peak memory of one model step, on CUDA or on a Linux CPU, measured the same way for every model.

The benchmark keeps all its models resident (it alternates between them), so a process-wide peak says
nothing about one model. What is measured instead is the peak *above* what was held just before the
step: activations, gradients and temporaries. The caller adds the model's own weights.

- CUDA: `torch.cuda.max_memory_allocated()` after `reset_peak_memory_stats()`, minus the memory allocated
  before the step: exact, the caching allocator's bookkeeping.
- CPU (Linux): the resident-set high-water mark (VmHWM), reset through `/proc/self/clear_refs`, minus the
  resident set before the step. glibc is first asked to hand its free memory back (`malloc_trim`), so
  that pages reused from earlier steps are counted again; memory that the allocator keeps anyway can make
  this an underestimate by a few MB. Other operating systems report None.
"""

import ctypes
import ctypes.util
import gc

import torch


def _libc():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


_LIBC = _libc()


def _status_kb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_cpu_peak():
    gc.collect()
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets VmHWM to the current resident set
    return _status_kb("VmRSS")


def step_peak_mb(step, device):
    """Runs `step()` once and returns the peak memory it took above what was held before it, in MB."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        gc.collect()
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    try:
        before_kb = _reset_cpu_peak()
    except OSError:
        step()
        return None
    step()
    return (_status_kb("VmHWM") - before_kb) / 1024
