"""reduce-window (variadic) and select-and-scatter, with XLA's window semantics.

A window dim reads the base-dilated (``lhs_dilate``), padded input at
``out*stride + k*rhs_dilate``; positions that fall in padding or between dilated elements
are skipped, never combined (HloEvaluator's IterateThroughWindow).

reduce-window: ``acc = init; for each window element in row-major order: acc = f(acc, x)``.
Fast path when ``f`` is one commutative op (add/multiply/max/min/and/or/xor) on one
operand: the skipped positions are filled with the op's identity, the window reduced with
numpy, and the result combined with ``init`` once (bf16/f16 accumulate in f32).  Any other
reducer (variadic ones such as argmax) keeps XLA's order: the fold runs one window offset
at a time over all outputs through ``ctx.call_batched`` when the context can batch ``f``,
else per element through ``ctx.call``.

select-and-scatter: the output starts as ``init``; for each source element, its window in
the operand is scanned in row-major order keeping ``selected`` unless
``select(selected, current)`` is false (so ``GE`` picks the first maximum), then
``out[selected] = scatter(source, out[selected])``, in row-major order of the source.
The scan runs one window offset at a time over all source elements: a select that is one
``compare`` is evaluated with numpy, any other batched or per element; a scatter that is
one commutative op uses ``ufunc.at``, any other is called per element in order.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir.attributes import WindowDim
from .heavy_common import (UFUNCS, as_result, batched_call, call_leaves, compare, compare_root,
                           dilate_and_pad, identity_value, is_float_dtype, single_binary_op,
                           unsupported, window_output_size)
from .registry import register


def _window(inst, rank: int) -> list[WindowDim]:
    window = inst.attr("window")
    dims = list(window.dims) if window is not None else []
    if not dims:
        dims = [WindowDim() for _ in range(rank)]
    if len(dims) != rank:
        raise unsupported(inst, f"window has {len(dims)} dims, operand rank is {rank}")
    return dims


def _out_dims(shape, dims):
    return [window_output_size(n, d.size, d.stride, d.padding_low, d.padding_high,
                               d.base_dilation, d.window_dilation)
            for n, d in zip(shape, dims)]


def _pad(x, dims, fill):
    return dilate_and_pad(x, range(x.ndim), [d.base_dilation for d in dims],
                          [(d.padding_low, d.padding_high) for d in dims], fill)


def _region(pos, dims, out):
    """Slices of the padded input that window offset ``pos`` reads for every output."""
    return tuple(slice(k * d.window_dilation, k * d.window_dilation + (o - 1) * d.stride + 1,
                       d.stride) for k, d, o in zip(pos, dims, out))


def _window_slices(padded, dims, out):
    """Yield, in row-major window order, the (out-shaped) values each offset reads."""
    for pos in np.ndindex(*[d.size for d in dims]):
        yield padded[_region(pos, dims, out)]


# ---- reduce-window ----------------------------------------------------------------------
@register("reduce-window")
def reduce_window(inst, args, ctx):
    n = len(args) // 2
    inputs = [np.asarray(a) for a in args[:n]]
    inits = [np.asarray(a) for a in args[n:]]
    dims = _window(inst, inputs[0].ndim)
    out = _out_dims(inputs[0].shape, dims)
    shapes = inst.shape.tuple_shapes if inst.shape.is_tuple() else (inst.shape,)
    if list(shapes[0].dims) != out:
        raise unsupported(inst, f"result dims {list(shapes[0].dims)} but the window gives "
                                f"{out}")
    if any(o == 0 for o in out):
        results = [np.full(out, i, dtype=s.dtype) for i, s in zip(inits, shapes)]
    elif n == 1 and single_binary_op(inst.to_apply) is not None:
        results = [_reduce_window_fast(inputs[0], inits[0], dims, out,
                                       single_binary_op(inst.to_apply))]
    else:
        results = _reduce_window_generic(ctx, inst.to_apply, inputs, inits, dims, out)
    if inst.shape.is_tuple():
        return tuple(as_result(r, s) for r, s in zip(results, shapes))
    return as_result(results[0], inst.shape)


def _reduce_window_fast(x, init, dims, out, op):
    dtype = x.dtype
    # bf16 / f16 / f8 accumulate in f32 (like the interpreter's reduce; XLA:CPU's float
    # normalization does the same, while HloEvaluator would round after every step)
    work = np.dtype(np.float32) if is_float_dtype(dtype) and dtype.itemsize < 4 else dtype
    x = x.astype(work, copy=False)
    padded = _pad(x, dims, identity_value(op, work))
    eff = [(d.size - 1) * d.window_dilation + 1 for d in dims]
    view = sliding_window_view(padded, eff)
    idx = tuple(slice(0, (o - 1) * d.stride + 1, d.stride) for o, d in zip(out, dims))
    idx += tuple(slice(None, None, d.window_dilation) for d in dims)
    view = view[idx]
    axes = tuple(range(x.ndim, 2 * x.ndim))
    ufunc = UFUNCS[op]
    reduced = ufunc.reduce(view, axis=axes) if view.size else \
        np.full(out, identity_value(op, work), dtype=work)
    if op == "add" and work == np.bool_:
        reduced = reduced.astype(bool)
    return ufunc(np.asarray(init).astype(work), reduced).astype(dtype)


def _reduce_window_generic(ctx, comp, inputs, inits, dims, out):
    n = len(inputs)
    mask = _pad(np.ones(inputs[0].shape, dtype=bool), dims, False)
    masks = list(_window_slices(mask, dims, out))
    values = [list(_window_slices(_pad(x, dims, np.zeros((), x.dtype)[()]), dims, out))
              for x in inputs]
    batched = _reduce_window_batched(ctx, comp, inits, masks, values, out)
    if batched is not None:
        return batched
    results = [np.empty(out, dtype=x.dtype) for x in inputs]
    for o in np.ndindex(*out):
        acc = [init[()] for init in inits]
        for k, m in enumerate(masks):
            if m[o]:
                acc = list(call_leaves(ctx, comp, acc + [values[i][k][o] for i in range(n)]))
        for r, a in zip(results, acc):
            r[o] = a
    return results


def _reduce_window_batched(ctx, comp, inits, masks, values, out):
    """The same fold, one window offset at a time over all outputs (``ctx.call_batched``):
    outputs whose current offset is padding keep their accumulator."""
    acc = [np.full(out, init, dtype=init.dtype) for init in inits]
    for k, m in enumerate(masks):
        if not m.any():
            continue
        new = batched_call(ctx, comp, acc + [v[k] for v in values])
        if new is None:
            return None
        acc = [np.where(m, nv.astype(a.dtype, copy=False), a) for nv, a in zip(new, acc)]
    return acc


# ---- select-and-scatter -----------------------------------------------------------------
@register("select-and-scatter")
def select_and_scatter(inst, args, ctx):
    operand, source, init = (np.asarray(a) for a in args)
    select_comp, scatter_comp = inst.called[0], inst.called[1]
    dims = _window(inst, operand.ndim)
    out = _out_dims(operand.shape, dims)
    if list(source.shape) != out:
        raise unsupported(inst, f"source dims {list(source.shape)} but the window gives "
                                f"{out}")
    result = np.full(operand.shape, init, dtype=operand.dtype)
    if source.size == 0 or operand.size == 0:
        return as_result(result, inst.shape)

    linear = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    padded_linear = _pad(linear, dims, np.int64(-1))
    flat_operand = operand.reshape(-1)
    selected = np.full(out, -1, dtype=np.int64)
    selected_val = np.zeros(out, dtype=operand.dtype)
    pattern = compare_root(select_comp)
    for lin in _window_slices(padded_linear, dims, out):
        valid = lin >= 0
        cur = flat_operand[np.where(valid, lin, 0)]
        first = valid & (selected < 0)
        selected = np.where(first, lin, selected)
        selected_val = np.where(first, cur, selected_val)
        rest = valid & ~first
        if not rest.any():
            continue
        keep = _select(ctx, select_comp, pattern, selected_val, cur, rest)
        switch = rest & ~keep
        selected = np.where(switch, lin, selected)
        selected_val = np.where(switch, cur, selected_val)

    flat_result = result.reshape(-1)
    chosen = selected.reshape(-1)
    src = source.reshape(-1)
    have = chosen >= 0
    op = single_binary_op(scatter_comp)
    if op is not None:
        UFUNCS[op].at(flat_result, chosen[have], src[have].astype(result.dtype))
    else:
        for j in np.flatnonzero(have).tolist():
            pos = chosen[j]
            flat_result[pos] = call_leaves(ctx, scatter_comp, [src[j], flat_result[pos]])[0]
    return as_result(result, inst.shape)


def _select(ctx, comp, pattern, selected_val, cur, rest):
    """select(selected, current) where ``rest``; True elsewhere."""
    if pattern is not None and {pattern[0], pattern[1]} == {0, 1}:
        a, b, direction, total = pattern
        lhs, rhs = (selected_val, cur) if a == 0 else (cur, selected_val)
        return compare(lhs, rhs, direction, total) | ~rest
    out = batched_call(ctx, comp, [selected_val, cur])
    if out is not None:
        return out[0].astype(bool) | ~rest
    keep = np.ones(rest.shape, dtype=bool)
    for o in zip(*np.nonzero(rest)):
        keep[o] = bool(call_leaves(ctx, comp, [selected_val[o], cur[o]])[0])
    return keep
