"""The context mixer's gate and mix as fused Triton kernels: one pass forward and one backward (plus one pass
that sums the backward's partial sums) where PyTorch operators need about 30 kernels a layer in an eager training
step (`CasanContextMixer`'s PyTorch path, which stays the reference and runs everywhere else).

For each target t (the query, the key or both), token and gate head h, on the states X (the target's Q or K, each
head's d_head-slice, or the whole row with a shared gate) and the projected context P = C U (one row per sentence,
or per token for deep context):

    lam = sigmoid(X . v^H_t + P . v^C_t + b_t)      (the fixed gate: lam = fixed_gate)
    X^  = X + lam (P - X)

Each program takes `rows_per_program` tokens of one sentence and one target, one token at a time (one row of d
values), in fp32 whatever the states' dtype. The backward writes dX, dP (per token) or each program's partial sum of
dP (per sentence), and each program's partial sums of dv^H, dv^C and db; `_sum_partials_kernel` adds them up in one
launch. Nothing is mutated in place and nothing waits on the host, so the function runs under torch.compile and CUDA
graphs.

Triton is optional: without it (or on tensors the kernels do not take) `fused_mix_available` says no, and the mixer
runs its PyTorch path. Under Triton's interpreter (`TRITON_INTERPRET=1` before this module is imported) the kernels
run on CPU tensors, which is how the tests check them without a GPU.
"""

import os

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
# Columns a program of `_sum_partials_kernel` sums.
SUM_BLOCK = 256


def fused_mix_available(states):
    """Whether the fused kernels take `states` (a target's query or key): Triton imports, and the tensor is on CUDA
    (or on the CPU under Triton's interpreter, outside torch.compile, which cannot trace interpreted kernels) in a
    dtype the kernels compute from."""
    if triton is None or not (states.is_cuda or INTERPRETED) or states.dtype not in KERNEL_DTYPES:
        return False
    return states.is_cuda or (states.device.type == "cpu" and not torch.compiler.is_compiling())


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

    @triton.jit(do_not_specialize=["batch", "n", "fixed_gate"])
    def _mix_forward_kernel(
        first_ptr,
        second_ptr,
        projected_ptr,
        gate_hidden_ptr,
        gate_context_ptr,
        gate_bias_ptr,
        first_out_ptr,
        second_out_ptr,
        gates_ptr,
        batch,
        n,
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
        block, b, t = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
        d: tl.constexpr = HEADS * WIDTH
        offsets, in_row, columns = _row_layout(HEADS, WIDTH, HEADS_P2, WIDTH_P2)
        if t == 0:
            states_ptr = first_ptr
            out_ptr = first_out_ptr
        else:
            states_ptr = second_ptr
            out_ptr = second_out_ptr
        states_ptr += b * n * d  # the states and the outputs are contiguous (batch, n, d)
        out_ptr += b * n * d
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
        first_grad_ptr,
        second_grad_ptr,
        first_grad_in_ptr,
        second_grad_in_ptr,
        projected_grad_ptr,
        parameter_partials_ptr,
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
        GATES_GRAD: tl.constexpr,
    ):
        block, b, t = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
        d: tl.constexpr = HEADS * WIDTH
        offsets, in_row, columns = _row_layout(HEADS, WIDTH, HEADS_P2, WIDTH_P2)
        # The states, the incoming gradients and the states' gradients are contiguous (batch, n, d).
        if t == 0:
            states_ptr = first_ptr
            grad_out_ptr = first_grad_ptr
            grad_in_ptr = first_grad_in_ptr
        else:
            states_ptr = second_ptr
            grad_out_ptr = second_grad_ptr
            grad_in_ptr = second_grad_in_ptr
        states_ptr += b * n * d
        grad_out_ptr += b * n * d
        grad_in_ptr += b * n * d
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
            grad_out = tl.load(grad_out_ptr + i * d + offsets, mask=mask, other=0.0).to(tl.float32)
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
            tl.store(grad_in_ptr + i * d + offsets, _rounded_for(grad_states, grad_in_ptr), mask=mask)
            if PER_TOKEN:  # dP in P's layout
                tl.store(
                    projected_grad_ptr + token + offsets, _rounded_for(grad_projected, projected_grad_ptr), mask=mask
                )
            else:
                projected_sum += grad_projected
        # Partial sums, row (b * blocks + block) of (batch * blocks, ...) buffers, summed by `_sum_partials_kernel`.
        partial = b * blocks + block
        if not PER_TOKEN:  # dP: (batch * blocks, T * d), this program's target's d columns
            tl.store(projected_grad_ptr + (partial * NUM_TARGETS + t) * d + offsets, projected_sum, mask=in_row)
        if DYNAMIC:  # (batch * blocks, T * (2 W + 1)): [dv^H (T x W) | dv^C (T x W) | db (T)]
            row_ptr = parameter_partials_ptr + partial * NUM_TARGETS * (2 * WIDTH + 1)
            width = tl.arange(0, WIDTH_P2)
            tl.store(row_ptr + t * WIDTH + width, tl.sum(gate_hidden_sum, axis=0), mask=width < WIDTH)
            tl.store(row_ptr + (NUM_TARGETS + t) * WIDTH + width, tl.sum(gate_context_sum, axis=0), mask=width < WIDTH)
            tl.store(row_ptr + 2 * NUM_TARGETS * WIDTH + t, tl.sum(bias_sum, axis=0))

    @triton.jit
    def _sum_columns(partials_ptr, sums_ptr, rows, columns, program, BLOCK: tl.constexpr):
        """Program `program`'s BLOCK columns of one outer index of an fp32 `(outer, rows, columns)` buffer, summed
        over the rows into its `(outer, columns)` output, in the output's dtype."""
        column_blocks = tl.cdiv(columns, BLOCK)
        outer = (program // column_blocks).to(tl.int64)
        column = (program % column_blocks) * BLOCK + tl.arange(0, BLOCK)
        partials_ptr += outer * rows * columns
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for row in range(rows):
            total += tl.load(partials_ptr + row * columns + column, mask=column < columns, other=0.0)
        tl.store(sums_ptr + outer * columns + column, _rounded_for(total, sums_ptr), mask=column < columns)

    @triton.jit(do_not_specialize=["first_rows", "first_columns", "first_programs", "second_rows", "second_columns"])
    def _sum_partials_kernel(
        first_partials_ptr,
        first_sums_ptr,
        first_rows,
        first_columns,
        first_programs,
        second_partials_ptr,
        second_sums_ptr,
        second_rows,
        second_columns,
        BLOCK: tl.constexpr,
    ):
        """`_sum_columns` of two buffers in one launch: the first `first_programs` programs take the first, the
        rest the second (the outputs' dtypes may differ, so each branch stores its own)."""
        program = tl.program_id(0)
        if program < first_programs:
            _sum_columns(first_partials_ptr, first_sums_ptr, first_rows, first_columns, program, BLOCK)
        else:
            program -= first_programs
            _sum_columns(second_partials_ptr, second_sums_ptr, second_rows, second_columns, program, BLOCK)


def _sum_partials(*segments):
    """`(partials, sums, outer)` triples, `partials` fp32 `(outer, rows, columns)` and `sums` `(outer, columns)`, both
    contiguous and passed as they were allocated (no views, which a compiled graph may copy), summed over the rows in
    one launch (`_sum_partials_kernel`)."""
    launches = []
    for partials, sums, outer in segments:
        columns = sums.numel() // outer
        programs = outer * triton.cdiv(columns, SUM_BLOCK)
        launches.append((partials, sums, partials.numel() // (outer * columns), columns, programs))
    first, second = launches[0], launches[-1]
    _sum_partials_kernel[(sum(launch[-1] for launch in launches),)](*first, *second[:4], BLOCK=SUM_BLOCK)


def _warps(heads_p2, width_p2):
    """Warps for a row of `heads_p2 x width_p2` values: about 8 of them a thread."""
    return max(1, min(16, heads_p2 * width_p2 // 256))


def _token_major(projected):
    """Whether C U `(T, batch, rows, d)` is `(batch, rows, T, d)` permuted (a full-rank one, as its product gives it)
    rather than laid out target by target (a low-rank one); the kernels read either."""
    return projected.permute(1, 2, 0, 3).is_contiguous()


def _kernel_options(states, projected, heads):
    """The constexprs both kernels share."""
    d = states.shape[-1]
    width = d // heads
    heads_p2, width_p2 = triton.next_power_of_2(heads), triton.next_power_of_2(width)
    return dict(
        NUM_TARGETS=projected.shape[0],
        HEADS=heads,
        WIDTH=width,
        HEADS_P2=heads_p2,
        WIDTH_P2=width_p2,
        PER_TOKEN=projected.shape[2] != 1,
        TARGET_MAJOR=not _token_major(projected),
        num_warps=_warps(heads_p2, width_p2),
    )


def fused_mix(projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates, *states):
    """The gate and the mix of every target in one kernel (see `FusedMix` for the arguments), without autograd: the
    mixed states and the gates `(T, batch, n, heads)` in fp32 (written where `store_gates`; empty for the fixed
    gate)."""
    batch, n, d = states[0].shape
    dynamic = gate_hidden is not None
    outputs = [torch.empty((batch, n, d), dtype=target.dtype, device=target.device) for target in states]
    gates_shape = (len(states), batch, n, heads) if dynamic else (0,)
    gates = torch.empty(gates_shape, dtype=torch.float32, device=states[0].device)
    _mix_forward_kernel[(triton.cdiv(n, FORWARD_ROWS), batch, len(states))](
        states[0],
        states[-1],
        projected,
        gate_hidden,
        gate_context,
        gate_bias,
        outputs[0],
        outputs[-1],
        gates,
        batch,
        n,
        float(fixed_gate),
        ROWS=FORWARD_ROWS,
        DYNAMIC=dynamic,
        STORE_GATES=bool(store_gates) and dynamic,
        **_kernel_options(states[0], projected, heads),
    )
    return *outputs, gates


def prepare(projected, states):
    """The tensors the kernels read as they lay them out: the states contiguous `(batch, n, d)`, C U target- or
    token-major (`_token_major`)."""
    if not (projected.is_contiguous() or _token_major(projected)):
        projected = projected.contiguous()
    return projected, [target.contiguous() for target in states]


class FusedMix(torch.autograd.Function):
    """The gate and the mix of every target in one kernel, forward and backward (see the module's docstring).

    `apply(projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates, *states)`: `projected`
    the targets' C U `(T, batch, 1 or n, d)`, the gate vectors `(T, d / heads)` and bias `(T,)` (None for the fixed
    gate, whose value `fixed_gate` is), `heads` the gate heads (1: a shared gate), `states` the T targets' `(batch,
    n, d)`, all as `prepare` returns them. Returns the T mixed states (in the states' dtype) and the gates `(T, batch,
    n, heads)` in fp32, written only where `store_gates` (the caller returns them, or a gradient will be asked for),
    and differentiable as the PyTorch path's are (a loss on the gates reaches the logits); empty for the fixed
    gate."""

    @staticmethod
    def forward(ctx, projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates, *states):
        *outputs, gates = fused_mix(
            projected, gate_hidden, gate_context, gate_bias, fixed_gate, heads, store_gates, *states
        )
        ctx.fixed_gate, ctx.heads = float(fixed_gate), heads
        ctx.save_for_backward(projected, gate_hidden, gate_context, gates, *states)
        if gate_hidden is None:
            ctx.mark_non_differentiable(gates)
        return *outputs, gates

    @staticmethod
    def backward(ctx, *grads):
        projected, gate_hidden, gate_context, gates, *states = ctx.saved_tensors
        *grads, gates_grad = grads
        dynamic = gate_hidden is not None
        gates_grad = None if gates_grad is None or not dynamic else gates_grad.float().contiguous()
        num_targets = len(states)
        batch, n, d = states[0].shape
        width = d // ctx.heads
        options = _kernel_options(states[0], projected, ctx.heads)
        per_token = options["PER_TOKEN"]
        # An unused output's gradient is None; a broadcast one (stride 0) is made contiguous, as the kernel reads it.
        grads = [
            torch.zeros_like(target) if grad is None else grad.contiguous()
            for grad, target in zip(grads, states, strict=True)
        ]
        grads_in = [torch.empty((batch, n, d), dtype=target.dtype, device=target.device) for target in states]
        blocks = triton.cdiv(n, BACKWARD_ROWS)
        fp32 = dict(dtype=torch.float32, device=projected.device)
        if per_token:  # dP in P's layout, written by the kernel
            projected_grad = torch.empty_like(projected, memory_format=torch.preserve_format)
            projected_partials = projected_grad
        else:  # per sentence: each program's partial sum, summed below
            projected_partials = torch.empty((batch * blocks, num_targets * d), **fp32)
        parameter_columns = num_targets * (2 * width + 1)
        parameter_partials = torch.empty((batch * blocks, parameter_columns), **fp32) if dynamic else None
        _mix_backward_kernel[(blocks, batch, num_targets)](
            states[0],
            states[-1],
            projected,
            gates,
            gates_grad,
            gate_hidden,
            gate_context,
            grads[0],
            grads[-1],
            grads_in[0],
            grads_in[-1],
            projected_partials,
            parameter_partials,
            batch,
            n,
            blocks,
            ctx.fixed_gate,
            ROWS=BACKWARD_ROWS,
            DYNAMIC=dynamic,
            GATES_GRAD=gates_grad is not None,
            **options,
        )
        segments = []
        if not per_token:  # dP per sentence: each sentence's blocks summed, token-major (batch, 1, T, d)
            sentence_grad = torch.empty((batch, 1, num_targets, d), dtype=projected.dtype, device=projected.device)
            segments.append((projected_partials, sentence_grad, batch))
            projected_grad = sentence_grad.permute(2, 0, 1, 3)  # (T, batch, 1, d)
        if dynamic:  # dv^H, dv^C and db: every block of every sentence summed, [dv^H | dv^C | db]
            parameter_grads = torch.empty((parameter_columns,), dtype=gate_hidden.dtype, device=gate_hidden.device)
            segments.append((parameter_partials, parameter_grads, 1))
        if segments:
            _sum_partials(*segments)
        if dynamic:
            gate_hidden_grad, gate_context_grad, gate_bias_grad = parameter_grads.split(
                (num_targets * width, num_targets * width, num_targets)
            )
            parameter_grads = (
                gate_hidden_grad.view(num_targets, width),
                gate_context_grad.view(num_targets, width),
                gate_bias_grad,
            )
        else:
            parameter_grads = (None, None, None)
        return projected_grad, *parameter_grads, None, None, None, *grads_in
