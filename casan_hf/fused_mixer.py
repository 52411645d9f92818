"""The context mixer's gate and mix for every target at once: with PyTorch operators (`mix_with_operators`, the
reference, run everywhere) and as fused Triton kernels (one pass forward, one backward) where PyTorch operators need
about 30 kernels a layer in an eager training step.

For each target t (the query, the key or both), token and gate head h, on the states X (the target's Q or K, each
head's d_head-slice, or the whole row with a shared gate) and the projected context P = C U (one row per sentence,
or per token for deep context):

    lam = sigmoid(X . v^H_t + P . v^C_t + b_t)      (the fixed gate: lam = fixed_gate)
    X^  = X + lam (P - X)

Each program takes `FORWARD_ROWS` (`BACKWARD_ROWS`) tokens of one sentence and one target, one token at a time (one
row of d values), in fp32 whatever the states' dtype; the grid is (sentences x blocks of tokens, targets), every
offset in int64. The backward writes dX, dP (per token) and each program's partial sums of dP (per sentence), dv^H,
dv^C and db into one fp32 buffer, which one or two PyTorch sums add up. Nothing is mutated in place and nothing
waits on the host. The backward is not differentiable again: a second-order gradient raises `SECOND_ORDER_REFUSAL`.

Two doors lead to the kernels, with one autograd formula (`_setup_context`, `_backward`):
- eager, `FusedMix` (an autograd.Function, applied through `fused_mix_apply`) or, where no gradient is asked for,
  `mix_kernels` alone: the fewest host steps between the layer and the launches;
- compiled, the operator `FUSED_MIX_OPERATOR` (a `torch.library.triton_op`, its backward an operator of its own),
  which torch.compile holds whole in its graphs and inductor compiles the kernels of; where the kernels do not take
  the tensors (the CPU, float64) its kernel is `mix_with_operators`. Its name carries a hash of this file, so that
  two saved folders' copies of the same code register it once, and different code under a name of its own.

Triton is optional: without it (or on tensors the kernels do not take) `fused_mix_available` says no, and the mixer
runs its PyTorch path. Under Triton's interpreter (`TRITON_INTERPRET=1` before this module is imported) the kernels
run on CPU tensors, which is how the tests check them without a GPU.
"""

import functools
import hashlib
import os
import warnings

import torch


try:
    import triton
    import triton.language as tl
except ImportError:  # the PyTorch path runs everywhere
    triton = None

# Whether the kernels run through Triton's interpreter, on CPU tensors; fixed when `triton.jit` wraps them.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
# The dtypes the kernels take (they compute in fp32): float64 stays on the PyTorch path, which computes in it.
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Tokens a program mixes, one after the other: enough programs to fill a GPU at BERT's sizes, and few partial sums.
FORWARD_ROWS = 8
BACKWARD_ROWS = 16
# The namespace of the compiled graphs' operators (`FUSED_MIX_OPERATOR`).
OPERATOR_NAMESPACE = "casan"
# What a second-order gradient through the kernels raises: their backward is computed once, not differentiated.
SECOND_ORDER_REFUSAL = (
    "casan_hf's fused mixer (the fused gate-and-mix kernels of fused_mixer.py) has no second-order gradient: its "
    "backward runs Triton kernels that autograd cannot differentiate. Run the mixer's PyTorch path, which has it: "
    "set_fused_mixer(model, 'off') or CASAN_FUSED_MIXER=off."
)


def fused_mix_available(states):
    """Whether the fused kernels take `states` (a target's query or key): Triton imports, and the tensor is on CUDA
    (or on the CPU under Triton's interpreter, outside torch.compile, which cannot trace interpreted kernels) in a
    dtype the kernels compute from."""
    if triton is None or not (states.is_cuda or INTERPRETED) or states.dtype not in KERNEL_DTYPES:
        return False
    return states.is_cuda or (states.device.type == "cpu" and not torch.compiler.is_compiling())


def _autocast_dtype(device_type):
    """The dtype autocast computes products in on `device_type`, or None where autocast is off."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


def _row_dots(rows, vectors, added=None):
    """Each target's rows dotted with its vector, `rows` (T, R, k) and `vectors` (T, k) -> (T, R, 1), plus `added`
    (broadcast to that shape) where given.

    Eager, one batched matrix-vector product (`bmm`, or `baddbmm` with the addition): one kernel. Compiled, a
    product and a sum, which inductor fuses with the gate's sigmoid and mix (forward and backward): given `bmm`, it
    would call a matrix-product kernel with one column on a GPU, and one more per gradient, where on a CPU it
    already writes the product and sum itself; so the compiled gate is the same code on both. Both compute in
    autocast's dtype where autocast is on, as `bmm` does (else the fp32 parameters would make the gate fp32 and the
    mix of bf16 states fail)."""
    if torch.compiler.is_compiling():
        dtype = _autocast_dtype(rows.device.type) or rows.dtype
        dots = (rows.to(dtype) * vectors.to(dtype).unsqueeze(1)).sum(-1, keepdim=True)
        return dots if added is None else dots + added.to(dtype)
    if added is None:
        return torch.bmm(rows, vectors.unsqueeze(-1))
    return torch.baddbmm(added, rows, vectors.unsqueeze(-1))


def mix_with_operators(projected, states, gate_hidden, gate_context, gate_bias, fixed_gate, heads, per_token):
    """The PyTorch path, the reference: the targets' `states` stacked, `(T, batch, n, d)`, so that each step of the
    gate and the mix (and its backward) is one operator for both. With `heads` > 1 (`gate_per_head`, the authors'
    code), each head's d_head-slice of Q (or K) and of C U has a gate of its own, from the v^H and v^C of d_head that
    every head shares. Returns the mixed states stacked and the gate `(T, batch, n, heads)` (None for the fixed
    gate, `gate_hidden` None).

    The gate, lambda = sigmoid(X v^H + (C U) v^C + b): each head's d_head-slice of X (and C U) is a row of its own
    (one row per token with a shared gate), so that one batched matrix-vector product per side gives every target's
    logits (`_row_dots`: products and sums when compiled): the context side once per sentence (or token), with the
    bias; a per-token context adds it into the hidden side's product."""
    plain = torch.stack(states) if len(states) > 1 else states[0].unsqueeze(0)
    if gate_hidden is None:
        return torch.lerp(plain, projected, fixed_gate), None
    num_targets, batch, _, d = plain.shape
    hidden = plain.view(num_targets, -1, d // heads)
    context_rows = projected.reshape(num_targets, -1, d // heads)
    logits = _row_dots(context_rows, gate_context, gate_bias.view(num_targets, 1, 1))
    if per_token:
        gate = torch.sigmoid(_row_dots(hidden, gate_hidden, logits)).view(num_targets, batch, -1, heads)
    else:
        hidden_logits = _row_dots(hidden, gate_hidden).view(num_targets, batch, -1, heads)
        gate = torch.sigmoid(hidden_logits + logits.view(num_targets, batch, 1, heads))
    if heads == 1:
        return torch.lerp(plain, projected, gate), gate
    per_head = (*plain.shape[:2], -1, heads, plain.shape[-1] // heads)
    mixed = torch.lerp(plain.view(per_head), projected.view(per_head), gate.unsqueeze(-1)).view(plain.shape)
    return mixed, gate


if triton is not None:

    @triton.jit
    def _rounded_for(values, pointer):
        """fp32 `values` in the dtype `pointer` points to, rounded to nearest even. To bf16 the rounding is written
        out on the bits, as a GPU's conversion does it: Triton's interpreter would truncate."""
        dtype = pointer.dtype.element_ty
        if dtype == tl.float32:
            return values
        elif dtype == tl.bfloat16:
            bits = values.to(tl.uint32, bitcast=True)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            quiet_nan = (bits >> 16) | 0x40  # a NaN stays one (adding could carry it into an infinity)
            high = tl.where(values == values, rounded, quiet_nan)
            return high.to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            return values.to(dtype)

    @triton.jit
    def _projected_offset(t, b, row, batch, rows, num_targets, d, TARGET_MAJOR: tl.constexpr):
        """Where row `row` of sentence `b`'s C U for target `t` starts: C U is `(T, batch, rows, d)` (target-major:
        a low-rank C U) or `(batch, rows, T, d)` (token-major: a full-rank C U, as its product gives it)."""
        if TARGET_MAJOR:
            return ((t * batch + b) * rows + row) * d
        else:
            return ((b * rows + row) * num_targets + t) * d

    @triton.jit
    def _row_layout(HEADS: tl.constexpr, WIDTH: tl.constexpr, HEADS_P2: tl.constexpr, WIDTH_P2: tl.constexpr):
        """A row of d = HEADS x WIDTH values as a (HEADS_P2, WIDTH_P2) tile, each gate head's slice a line of it: the
        offsets in the row, which of them are in it, and the columns `(1, WIDTH_P2)`."""
        heads = tl.arange(0, HEADS_P2)[:, None]
        columns = tl.arange(0, WIDTH_P2)[None, :]
        return heads * WIDTH + columns, (heads < HEADS) & (columns < WIDTH), columns

    @triton.jit
    def _gate_vectors(gate_hidden_ptr, gate_context_ptr, t, columns, WIDTH: tl.constexpr):
        """Target `t`'s v^H and v^C `(1, WIDTH_P2)` in fp32, zero past WIDTH."""
        gate_hidden = tl.load(gate_hidden_ptr + t * WIDTH + columns, mask=columns < WIDTH, other=0.0)
        gate_context = tl.load(gate_context_ptr + t * WIDTH + columns, mask=columns < WIDTH, other=0.0)
        return gate_hidden.to(tl.float32), gate_context.to(tl.float32)

    @triton.jit(do_not_specialize=["batch", "n", "blocks", "fixed_gate"])
    def _mix_forward_kernel(
        first_ptr,
        second_ptr,
        projected_ptr,
        gate_hidden_ptr,
        gate_context_ptr,
        gate_bias_ptr,
        mixed_ptr,
        gates_ptr,
        batch,
        n,
        blocks,
        fixed_gate,
        NUM_TARGETS: tl.constexpr,
        HEADS: tl.constexpr,
        WIDTH: tl.constexpr,
        HEADS_P2: tl.constexpr,
        WIDTH_P2: tl.constexpr,
        ROWS: tl.constexpr,
        PER_TOKEN: tl.constexpr,
        TARGET_MAJOR: tl.constexpr,
        DYNAMIC: tl.constexpr,
        STORE_GATES: tl.constexpr,
    ):
        # Grid (batch * blocks, T): every offset in int64, the sentences on the axis without CUDA's 65535 cap.
        program, t = tl.program_id(0).to(tl.int64), tl.program_id(1)
        b, block = program // blocks, program % blocks
        d: tl.constexpr = HEADS * WIDTH
        offsets, in_row, columns = _row_layout(HEADS, WIDTH, HEADS_P2, WIDTH_P2)
        if t == 0:
            states_ptr = first_ptr
        else:
            states_ptr = second_ptr
        states_ptr += b * n * d  # the states are contiguous (batch, n, d), the mixed states (T, batch, n, d)
        out_ptr = mixed_ptr + (t * batch + b) * n * d
        rows = n if PER_TOKEN else 1
        if DYNAMIC:
            gate_hidden, gate_context = _gate_vectors(gate_hidden_ptr, gate_context_ptr, t, columns, WIDTH)
            gate_bias = tl.load(gate_bias_ptr + t).to(tl.float32)
        if not PER_TOKEN:  # one context row for the whole sentence, and its side of the gate's logit
            sentence = _projected_offset(t, b, 0, batch, rows, NUM_TARGETS, d, TARGET_MAJOR)
            projected = tl.load(projected_ptr + sentence + offsets, mask=in_row, other=0.0).to(tl.float32)
            if DYNAMIC:
                context_logit = tl.sum(projected * gate_context, axis=1) + gate_bias
        for row in range(ROWS):
            i = block * ROWS + row
            mask = in_row & (i < n)
            states = tl.load(states_ptr + i * d + offsets, mask=mask, other=0.0).to(tl.float32)
            if PER_TOKEN:
                token = _projected_offset(t, b, i, batch, rows, NUM_TARGETS, d, TARGET_MAJOR)
                projected = tl.load(projected_ptr + token + offsets, mask=mask, other=0.0).to(tl.float32)
                if DYNAMIC:
                    context_logit = tl.sum(projected * gate_context, axis=1) + gate_bias
            if DYNAMIC:
                gate = tl.sigmoid(tl.sum(states * gate_hidden, axis=1) + context_logit)  # (HEADS_P2,)
                if STORE_GATES:
                    gate_offsets = ((t * batch + b) * n + i) * HEADS + tl.arange(0, HEADS_P2)
                    tl.store(gates_ptr + gate_offsets, gate, mask=(tl.arange(0, HEADS_P2) < HEADS) & (i < n))
                mixed = states + gate[:, None] * (projected - states)
            else:
                mixed = states + fixed_gate * (projected - states)
            tl.store(out_ptr + i * d + offsets, _rounded_for(mixed, out_ptr), mask=mask)

    @triton.jit(do_not_specialize=["batch", "n", "blocks", "fixed_gate"])
    def _mix_backward_kernel(
        first_ptr,
        second_ptr,
        projected_ptr,
        gates_ptr,
        gates_grad_ptr,
        gate_hidden_ptr,
        gate_context_ptr,
        mixed_grad_ptr,
        states_grad_ptr,
        projected_grad_ptr,
        partials_ptr,
        batch,
        n,
        blocks,
        fixed_gate,
        NUM_TARGETS: tl.constexpr,
        HEADS: tl.constexpr,
        WIDTH: tl.constexpr,
        HEADS_P2: tl.constexpr,
        WIDTH_P2: tl.constexpr,
        ROWS: tl.constexpr,
        PER_TOKEN: tl.constexpr,
        TARGET_MAJOR: tl.constexpr,
        DYNAMIC: tl.constexpr,
        MIXED_GRAD: tl.constexpr,
        GATES_GRAD: tl.constexpr,
        PARTIAL_COLUMNS: tl.constexpr,
    ):
        program, t = tl.program_id(0).to(tl.int64), tl.program_id(1)
        b, block = program // blocks, program % blocks
        d: tl.constexpr = HEADS * WIDTH
        offsets, in_row, columns = _row_layout(HEADS, WIDTH, HEADS_P2, WIDTH_P2)
        # The states contiguous (batch, n, d); the mixed states' gradient and the states' (T, batch, n, d).
        if t == 0:
            states_ptr = first_ptr
        else:
            states_ptr = second_ptr
        states_ptr += b * n * d
        mixed_grad_ptr += (t * batch + b) * n * d
        states_grad_ptr += (t * batch + b) * n * d
        rows = n if PER_TOKEN else 1
        if DYNAMIC:
            gate_hidden, gate_context = _gate_vectors(gate_hidden_ptr, gate_context_ptr, t, columns, WIDTH)
            gate_hidden_sum = tl.zeros((HEADS_P2, WIDTH_P2), dtype=tl.float32)
            gate_context_sum = tl.zeros((HEADS_P2, WIDTH_P2), dtype=tl.float32)
            bias_sum = tl.zeros((HEADS_P2,), dtype=tl.float32)
        if not PER_TOKEN:
            sentence = _projected_offset(t, b, 0, batch, rows, NUM_TARGETS, d, TARGET_MAJOR)
            projected = tl.load(projected_ptr + sentence + offsets, mask=in_row, other=0.0).to(tl.float32)
            projected_sum = tl.zeros((HEADS_P2, WIDTH_P2), dtype=tl.float32)
        for row in range(ROWS):
            i = block * ROWS + row
            mask = in_row & (i < n)
            states = tl.load(states_ptr + i * d + offsets, mask=mask, other=0.0).to(tl.float32)
            if PER_TOKEN:
                token = _projected_offset(t, b, i, batch, rows, NUM_TARGETS, d, TARGET_MAJOR)
                projected = tl.load(projected_ptr + token + offsets, mask=mask, other=0.0).to(tl.float32)
            if MIXED_GRAD:  # else only the gates reach the loss
                grad_out = tl.load(mixed_grad_ptr + i * d + offsets, mask=mask, other=0.0).to(tl.float32)
            else:
                grad_out = tl.zeros((HEADS_P2, WIDTH_P2), dtype=tl.float32)
            if DYNAMIC:
                gate_offsets = ((t * batch + b) * n + i) * HEADS + tl.arange(0, HEADS_P2)
                gate_mask = (tl.arange(0, HEADS_P2) < HEADS) & (i < n)
                gate = tl.load(gates_ptr + gate_offsets, mask=gate_mask, other=0.0)[:, None]
            else:
                gate = fixed_gate
            grad_states = grad_out * (1.0 - gate)
            grad_projected = grad_out * gate
            if DYNAMIC:
                # d logit = (dX^ . (P - X) + d lam) lam (1 - lam), per gate head
                grad_gate = tl.sum(grad_out * (projected - states), axis=1)[:, None]
                if GATES_GRAD:
                    grad_gate += tl.load(gates_grad_ptr + gate_offsets, mask=gate_mask, other=0.0)[:, None]
                grad_logit = grad_gate * gate * (1.0 - gate)
                grad_states += grad_logit * gate_hidden
                grad_projected += grad_logit * gate_context
                gate_hidden_sum += grad_logit * states
                gate_context_sum += grad_logit * projected
                bias_sum += tl.sum(grad_logit, axis=1)
            tl.store(states_grad_ptr + i * d + offsets, _rounded_for(grad_states, states_grad_ptr), mask=mask)
            if PER_TOKEN:  # dP in P's layout
                tl.store(
                    projected_grad_ptr + token + offsets, _rounded_for(grad_projected, projected_grad_ptr), mask=mask
                )
            else:
                projected_sum += grad_projected
        # This program's partial sums, row `program` (= b * blocks + block) of the fp32 (batch * blocks,
        # PARTIAL_COLUMNS) buffer: [dP (T x d), per sentence only | dv^H (T x W) | dv^C (T x W) | db (T)].
        row_ptr = partials_ptr + program * PARTIAL_COLUMNS
        if not PER_TOKEN:
            tl.store(row_ptr + t * d + offsets, projected_sum, mask=in_row)
            row_ptr += NUM_TARGETS * d
        if DYNAMIC:
            width = tl.arange(0, WIDTH_P2)
            tl.store(row_ptr + t * WIDTH + width, tl.sum(gate_hidden_sum, axis=0), mask=width < WIDTH)
            tl.store(row_ptr + (NUM_TARGETS + t) * WIDTH + width, tl.sum(gate_context_sum, axis=0), mask=width < WIDTH)
            tl.store(row_ptr + 2 * NUM_TARGETS * WIDTH + t, tl.sum(bias_sum, axis=0))


class CachedLaunches:
    """`kernel[grid](*args, **options)` as Triton's JIT launches it, but through the compiled kernel the JIT returned
    for the same specialization, by its public call (`compiled[grid](*args, stream=stream)`): the JIT's own launch
    (`JITFunction.run`) binds and specialises every argument, builds a cache key and checks the kernel's globals at
    every call, host work a layer's launches wait on.

    The key is what the JIT specialises on for these kernels: the current device, the options (constexprs and
    `num_warps`), each tensor's dtype and 16-byte alignment, each number's type and whether an int fits in int32 (the
    numbers are `do_not_specialize`), the type of every other argument (None: the fixed gate's absent parameters,
    constexprs to the JIT). The JIT is the fallback, tested on the CPU: the first launch of each key, Triton's
    interpreter (whose launches return no compiled kernel), a launch hook (a profiler's, which sees every launch the
    JIT makes), and for good, with a warning, a Triton whose compiled kernel, driver or knobs no longer offer what
    this calls (this file is copied into saved folders, where it cannot be updated)."""

    def __init__(self, kernel, driver=None):
        self.kernel = kernel
        self.driver = driver  # Triton's active driver where None: it starts only where a GPU launch asks for it
        self.compiled = {}  # None once a cached launch failed: every launch goes through the JIT

    def __getitem__(self, grid):
        return functools.partial(self.launch, grid)

    def launch(self, grid, *args, **options):
        if INTERPRETED or self.compiled is None:
            return self.kernel[grid](*args, **options)
        key = None  # none: the JIT launches, and nothing is cached
        try:
            runtime = triton.knobs.runtime
            enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
            # A hook is set where it is not None, nor an empty chain of hooks (Triton 3.5 on).
            if not (getattr(enter, "calls", enter) or getattr(leave, "calls", leave)):
                driver = triton.runtime.driver.active if self.driver is None else self.driver
                device = driver.get_current_device()
                key = [device, *options.values()]
                for argument in args:  # a loop, not a comprehension: no Python frame of its own
                    if isinstance(argument, torch.Tensor):
                        key += (argument.dtype, argument.data_ptr() % 16 == 0)
                    elif type(argument) is int:
                        key += (int, -(2**31) <= argument < 2**31)
                    else:  # a float, or None (an absent gate parameter)
                        key.append(type(argument))
                key = tuple(key)
                cached = self.compiled.get(key)
                if cached is not None:
                    compiled, constexprs = cached
                    compiled[(grid[0], grid[1], 1)](*args, *constexprs, stream=driver.get_current_stream(device))
                    return
                # The constexprs in the kernel's order, after the launch's arguments: the compiled kernel's call
                # takes every argument, as the JIT binds them.
                constexprs = tuple(options[name] for name in self.kernel.arg_names[len(args) :])
        except (AttributeError, TypeError) as error:
            self.stop_caching(error)
            key = None
        compiled = self.kernel[grid](*args, **options)
        if key is not None and compiled is not None:
            self.compiled[key] = compiled, constexprs

    def stop_caching(self, error):
        """Every launch through the JIT from now on, with a warning: this Triton does not offer what a cached launch
        calls (`error`)."""
        self.compiled = None
        warnings.warn(
            f"casan_hf's fused mixer launches its kernels through Triton's JIT from now on: this Triton "
            f"({triton.__version__}) does not launch them through its compiled kernels' public call: {error!r}",
            RuntimeWarning,
            stacklevel=4,
        )


# The eager door's launches of the two kernels.
if triton is not None:
    FORWARD_LAUNCHES, BACKWARD_LAUNCHES = CachedLaunches(_mix_forward_kernel), CachedLaunches(_mix_backward_kernel)


def _warps(heads_p2, width_p2):
    """Warps for a row of `heads_p2 x width_p2` values: about 8 of them a thread."""
    return max(1, min(16, heads_p2 * width_p2 // 256))


def projected_layout(projected):
    """`(per_token, target_major)`: whether C U `(T, batch, 1 or n, d)` has a row per token (deep context), and
    whether it is target-major (contiguous: a low-rank C U) rather than token-major (`prepare` leaves it one or the
    other). Python bools (`bool` of what may be a symbolic comparison in a compiled graph with dynamic shapes), which
    `_kernel_options`' cache can hash."""
    return bool(projected.shape[2] != 1), bool(projected.is_contiguous())


@functools.cache
def _kernel_options(num_targets, heads, d, per_token, target_major):
    """The constexprs both kernels share, computed once for each form of mixer (the sizes do not enter them);
    `per_token` and `target_major` as `projected_layout` gives them."""
    width = d // heads
    heads_p2, width_p2 = triton.next_power_of_2(heads), triton.next_power_of_2(width)
    return dict(
        NUM_TARGETS=num_targets,
        HEADS=heads,
        WIDTH=width,
        HEADS_P2=heads_p2,
        WIDTH_P2=width_p2,
        PER_TOKEN=per_token,
        TARGET_MAJOR=target_major,
        num_warps=_warps(heads_p2, width_p2),
    )


def prepare(projected, states, parameters):
    """The tensors the kernels read as they lay them out: the states and the gate's parameters contiguous, C U
    `(T, batch, rows, d)` contiguous (target by target: a low-rank one) or `(batch, rows, T, d)` permuted
    (token-major: a full-rank one, as its product gives it). Each is returned as it is where it already is."""
    if not (projected.is_contiguous() or projected.permute(1, 2, 0, 3).is_contiguous()):
        projected = projected.contiguous()
    tensors = [*states, *parameters]
    for index, tensor in enumerate(tensors):  # a loop, not a comprehension: no Python frame of its own
        if tensor is not None:
            tensors[index] = tensor.contiguous()
    return projected, tensors[: len(states)], tensors[len(states) :]


def mix_kernels(
    projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates, kernel=None
):
    """The gate and the mix of every target in one launch, without autograd (`FusedMix` for the arguments):
    the mixed states `(T, batch, n, d)` in their dtype and the gates `(T, batch, n, heads)` in fp32 (where
    `store_gates` and the gate is dynamic; else empty). `kernel`: the forward kernel as the caller launches it."""
    batch, n, d = first.shape
    num_targets = projected.shape[0]
    store = store_gates and gate_hidden is not None
    mixed = first.new_empty((num_targets, batch, n, d))
    gates = first.new_empty((num_targets, batch, n, heads) if store else (0,), dtype=torch.float32)
    blocks = -(-n // FORWARD_ROWS)
    if batch * blocks:
        (kernel or FORWARD_LAUNCHES)[(batch * blocks, num_targets)](
            first,
            first if second is None else second,
            projected,
            gate_hidden,
            gate_context,
            gate_bias,
            mixed,
            gates,
            batch,
            n,
            blocks,
            float(fixed_gate),
            ROWS=FORWARD_ROWS,
            DYNAMIC=gate_hidden is not None,
            STORE_GATES=store,
            **_kernel_options(num_targets, heads, d, *projected_layout(projected)),
        )
    return mixed, gates


def mix_backward_kernels(
    mixed_grad, gates_grad, projected, first, second, gate_hidden, gate_context, gate_bias, gates, fixed_gate, heads,
    kernel=None,
):  # fmt: skip
    """The gradients of `mix_kernels`' outputs' `mixed_grad` and `gates_grad` (either may be None: that output
    reaches no loss), in one launch and at most two sums of its partial sums: the states' `(T, batch, n, d)`, C U's
    (in its shape) and the gate's parameters' `[dv^H | dv^C | db]` flat (empty for the fixed gate). `gate_bias`
    does not enter them (the gates are stored); `kernel`: the backward kernel as the caller launches it."""
    batch, n, d = first.shape
    num_targets = projected.shape[0]
    dynamic = gate_hidden is not None
    options = _kernel_options(num_targets, heads, d, *projected_layout(projected))
    per_token = options["PER_TOKEN"]
    blocks = -(-n // BACKWARD_ROWS)
    states_grad = first.new_empty((num_targets, batch, n, d))
    projected_columns = 0 if per_token else num_targets * d
    columns = projected_columns + (num_targets * (2 * options["WIDTH"] + 1) if dynamic else 0)
    partials = first.new_empty((batch * blocks, columns), dtype=torch.float32)
    # Per token, dP in P's layout, written by the kernel; per sentence, each sentence's partial sums summed.
    projected_grad = torch.empty_like(projected) if per_token else None
    if batch * blocks:
        (kernel or BACKWARD_LAUNCHES)[(batch * blocks, num_targets)](
            first,
            first if second is None else second,
            projected,
            gates,
            gates if gates_grad is None else gates_grad,
            gate_hidden,
            gate_context,
            first if mixed_grad is None else mixed_grad,
            states_grad,
            partials if projected_grad is None else projected_grad,
            partials,
            batch,
            n,
            blocks,
            float(fixed_gate),
            ROWS=BACKWARD_ROWS,
            DYNAMIC=dynamic,
            MIXED_GRAD=mixed_grad is not None,
            GATES_GRAD=gates_grad is not None,
            PARTIAL_COLUMNS=columns,
            **options,
        )
    parameter_partials = partials
    if not per_token:
        sentence_sums = partials.view(batch, blocks, columns).sum(1)
        projected_grad = sentence_sums[:, :projected_columns].to(projected.dtype).view(batch, 1, num_targets, d)
        projected_grad = projected_grad.permute(2, 0, 1, 3)  # (T, batch, 1, d), token-major
        parameter_partials = sentence_sums[:, projected_columns:]
    if not dynamic:
        return states_grad, projected_grad, first.new_empty(0)
    return states_grad, projected_grad, parameter_partials.sum(0).to(gate_hidden.dtype)


def _gradients_with_operators(
    mixed_grad, gates_grad, projected, first, second, gate_hidden, gate_context, gate_bias, gates, fixed_gate, heads
):  # fmt: skip
    """`mix_backward_kernels`' gradients written with PyTorch operators, the kernel's formulas on whole tensors in
    fp32 from the stored gates: the backward operator's kernel where the fused kernels do not take the tensors
    (`gate_bias` does not enter them)."""
    states = (first,) if second is None else (first, second)
    num_targets, batch, n, d = len(states), *first.shape
    per_head = (num_targets, batch, -1, heads, d // heads)
    plain = torch.stack(states).float().view(per_head)
    context = projected.float().view(per_head)  # (T, batch, 1 or n, heads, W)
    grad = plain.new_zeros(plain.shape) if mixed_grad is None else mixed_grad.float().view(per_head)
    gate = fixed_gate if gate_hidden is None else gates.unsqueeze(-1)
    states_grad = grad * (1 - gate)
    context_grad = grad * gate
    parameter_grads = first.new_empty(0)
    if gate_hidden is not None:
        # d logit = (dX^ . (P - X) + d lam) lam (1 - lam), per gate head
        gate_grad = (grad * (context - plain)).sum(-1, keepdim=True)
        if gates_grad is not None:
            gate_grad = gate_grad + gates_grad.unsqueeze(-1)
        logit_grad = gate_grad * gate * (1 - gate)
        vectors = (num_targets, 1, 1, 1, -1)
        states_grad = states_grad + logit_grad * gate_hidden.float().view(vectors)
        context_grad = context_grad + logit_grad * gate_context.float().view(vectors)
        summed = (1, 2, 3)
        vector_grads = [(logit_grad * tensor).sum(summed).flatten() for tensor in (plain, context)]
        parameter_grads = torch.cat([*vector_grads, logit_grad.sum((1, 2, 3, 4))]).to(gate_hidden.dtype)
    per_token, _ = projected_layout(projected)
    if not per_token:
        context_grad = context_grad.sum(2, keepdim=True)
    return (
        states_grad.view(num_targets, batch, n, d).to(first.dtype),
        context_grad.view(projected.shape).to(projected.dtype),
        parameter_grads,
    )


# The arguments of `FusedMix.apply` and of the forward operator, in order: the backward gives a gradient (or None)
# for each, by name.
FUSED_MIX_ARGUMENTS = (
    "projected", "first", "second", "gate_hidden", "gate_context", "gate_bias", "fixed_gate", "heads", "store_gates"
)  # fmt: skip


def _setup_context(ctx, inputs, output):
    """What the backward keeps of a forward (`FusedMix`'s and the operator's): gradients of unused outputs stay None
    (no zeros are made for them), and the dynamic gate's backward reads the stored gates."""
    projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates = inputs
    gates = output[1]
    if gate_hidden is not None and not store_gates:
        raise ValueError(
            "the fused mixer got store_gates=False where a gradient is asked for: its backward reads the gates, "
            "so pass store_gates=True"
        )
    ctx.set_materialize_grads(False)
    ctx.fixed_gate, ctx.heads = fixed_gate, heads
    ctx.save_for_backward(projected, first, second, gate_hidden, gate_context, gate_bias, gates)
    if gate_hidden is None:
        ctx.mark_non_differentiable(gates)


class _SecondOrderRefusal(torch.autograd.Function):
    """`apply(count, *grads, *anchors)`: the `count` first-order gradients `grads` as they are, behind a node that
    raises `SECOND_ORDER_REFUSAL` when a second-order gradient reaches it (as `once_differentiable` does, with a
    message that says what to do). The node also takes the `anchors`, the forward's tensors that require a gradient,
    so that it sits on every path from the gradients back to them: a second-order gradient with respect to them
    raises rather than comes back None."""

    @staticmethod
    def forward(ctx, count, *tensors):
        return tensors[:count]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(SECOND_ORDER_REFUSAL)


def _backward(ctx, mixed_grad, gates_grad, backward):
    """The gradient of each of `FUSED_MIX_ARGUMENTS` from `backward` (`mix_backward_kernels` or its operator), None
    for those that have none. Under `create_graph=True` they are computed once, and refuse to be differentiated
    again (`_SecondOrderRefusal`)."""
    saved = ctx.saved_tensors
    sources = (*saved, mixed_grad, gates_grad)
    if torch.is_grad_enabled() and any(tensor is not None and tensor.requires_grad for tensor in sources):
        with torch.no_grad():
            grads = _backward(ctx, mixed_grad, gates_grad, backward)
        anchors = [tensor for tensor in sources if tensor is not None and tensor.requires_grad]
        return _SecondOrderRefusal.apply(len(grads), *grads, *anchors)
    projected, first, second, gate_hidden, gate_context, gate_bias, gates = saved
    states_grad, projected_grad, parameter_grads = backward(
        None if mixed_grad is None else mixed_grad.contiguous(),
        None if gates_grad is None else gates_grad.contiguous(),
        *(projected, first, second, gate_hidden, gate_context, gate_bias, gates, ctx.fixed_gate, ctx.heads),
    )
    # One target's states give "first" alone: "second" has no gradient.
    grads = dict(zip(("first", "second"), states_grad.unbind(), strict=False), projected=projected_grad)
    if gate_hidden is not None:
        num_targets, width = gate_hidden.shape
        gate_hidden_grad, gate_context_grad, gate_bias_grad = parameter_grads.split_with_sizes(
            (num_targets * width, num_targets * width, num_targets)
        )
        grads.update(
            gate_hidden=gate_hidden_grad.view(num_targets, width),
            gate_context=gate_context_grad.view(num_targets, width),
            gate_bias=gate_bias_grad,
        )
    return tuple(map(grads.get, FUSED_MIX_ARGUMENTS))  # map of a C method: no Python frame of its own


class FusedMix(torch.autograd.Function):
    """The gate and the mix of every target in one kernel, forward and backward, in eager mode (see the module's
    docstring; the compiled graphs' door is `FUSED_MIX_OPERATOR`, with the same autograd formula).

    `apply(projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates)`:
    `projected` the targets' C U `(T, batch, 1 or n, d)`, `first` and `second` the T targets' states `(batch, n,
    d)` (`second` None for one target), the gate vectors `(T, d / heads)` and bias `(T,)` (None for the fixed gate,
    whose value `fixed_gate` is), `heads` the gate heads (1: a shared gate), all as `prepare` lays them out;
    `store_gates` must be True for the dynamic gate (the backward reads them). Returns the mixed states `(T, batch,
    n, d)` in the states' dtype and the gates `(T, batch, n, heads)` in fp32, differentiable as the PyTorch path's
    are (a loss on the gates reaches the logits); empty for the fixed gate. Second-order gradients are refused
    (`SECOND_ORDER_REFUSAL`).

    Its forward takes `ctx` and sets it up itself (`_setup_context`, the operator's `setup_context`): with a
    `setup_context` of its own, `torch.autograd.Function.apply` would bind the arguments through `inspect` at every
    call (some 170 Python calls)."""

    @staticmethod
    def forward(ctx, projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates):
        inputs = (projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates)
        outputs = mix_kernels(*inputs)
        _setup_context(ctx, inputs, outputs)
        return outputs

    @staticmethod
    def backward(ctx, mixed_grad, gates_grad):
        return _backward(ctx, mixed_grad, gates_grad, mix_backward_kernels)


# The eager door to the kernels where a gradient is asked for (the mixer calls it by this name).
fused_mix_apply = FusedMix.apply


def _operator_forward(
    projected: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor | None,
    gate_hidden: torch.Tensor | None,
    gate_context: torch.Tensor | None,
    gate_bias: torch.Tensor | None,
    fixed_gate: float,
    heads: int,
    store_gates: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward operator's kernel: `mix_kernels` where the kernels take the tensors, else `mix_with_operators`
    (its gates in fp32 too, or empty)."""
    if fused_mix_available(first):
        forward_kernel = torch.library.wrap_triton(_mix_forward_kernel)
        arguments = (projected, first, second, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates)
        return mix_kernels(*arguments, kernel=forward_kernel)
    states = (first,) if second is None else (first, second)
    per_token, _ = projected_layout(projected)
    mixed, gate = mix_with_operators(
        projected, states, gate_hidden, gate_context, gate_bias, fixed_gate, heads, per_token
    )
    return mixed, (gate.float() if gate is not None and store_gates else first.new_empty(0, dtype=torch.float32))


def _operator_backward(
    mixed_grad: torch.Tensor | None,
    gates_grad: torch.Tensor | None,
    projected: torch.Tensor,
    first: torch.Tensor,
    second: torch.Tensor | None,
    gate_hidden: torch.Tensor | None,
    gate_context: torch.Tensor | None,
    gate_bias: torch.Tensor | None,
    gates: torch.Tensor,
    fixed_gate: float,
    heads: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward operator's kernel: `mix_backward_kernels` where the kernels take the tensors, else
    `_gradients_with_operators`."""
    arguments = (mixed_grad, gates_grad, projected, first, second, gate_hidden, gate_context, gate_bias, gates)
    if fused_mix_available(first):
        backward_kernel = torch.library.wrap_triton(_mix_backward_kernel)
        return mix_backward_kernels(*arguments, fixed_gate, heads, kernel=backward_kernel)
    return _gradients_with_operators(*arguments, fixed_gate, heads)


def _operator_gradients(ctx, mixed_grad, gates_grad):
    return _backward(ctx, mixed_grad, gates_grad, FUSED_MIX_BACKWARD_OPERATOR)


def _source_digest():
    """A hash of this file: the operators' names carry it."""
    with open(__file__, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()[:16]


def _define_operators():
    """The forward and backward operators, registered by the first copy of this code to be imported: a second module
    of the same file (two saved folders' code, each loaded by transformers as a module of its own) finds them by
    name."""
    namespace, name = getattr(torch.ops, OPERATOR_NAMESPACE), f"fused_mix_{_source_digest()}"
    if not hasattr(namespace, name):
        forward = torch.library.triton_op(f"{OPERATOR_NAMESPACE}::{name}", mutates_args=())(_operator_forward)
        torch.library.triton_op(f"{OPERATOR_NAMESPACE}::{name}_backward", mutates_args=())(_operator_backward)
        forward.register_autograd(_operator_gradients, setup_context=_setup_context)
    return getattr(namespace, name).default, getattr(namespace, f"{name}_backward").default


# The compiled graphs' fused mix: an operator with `FusedMix.apply`'s arguments and outputs, which torch.compile holds
# whole (inductor compiles its kernels; on tensors they do not take it runs `mix_with_operators`), and its backward;
# None where Triton or `torch.library.triton_op` (torch 2.6) is missing.
FUSED_MIX_OPERATOR, FUSED_MIX_BACKWARD_OPERATOR = (
    _define_operators() if triton is not None and hasattr(torch.library, "triton_op") else (None, None)
)
