"""sort (variadic, any comparator) and topk.

sort: every operand is permuted the same way along ``dimensions={d}``; the permutation of
each row comes from the comparator ``to_apply(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` (true
when lhs sorts before rhs).  The XLA evaluator uses std::stable_sort when ``is_stable``
and std::sort otherwise; an unstable sort may order equal keys any way, so this always
sorts stably (a valid result either way).

Fast path: a comparator that is one ``compare`` of operand i's lhs/rhs parameters with
direction LT or GT becomes ``np.argsort(kind="stable")`` on a key (XLA's total order on
floats for ``type=TOTALORDER``; otherwise -0 == +0 and NaNs go last, an order the partial
float order leaves implementation-defined).  Any other comparator (multi-key, NaN-aware
...) runs a stable merge sort of all rows at once with the comparator evaluated on whole
arrays (``ctx.call_batched``), or, when the context cannot batch it, Python's stable sort
calling the comparator per comparison.

topk: the k largest (``largest=true``, default) or smallest values along the last dim,
ordered, with their s32 indices; ties keep the lower index first.  Values compare in
XLA's total order (what TopkDecomposer's TOTALORDER comparator gives).
"""
from __future__ import annotations

import functools

import numpy as np

from .heavy_common import (as_result, batched_call, call_leaves, compare_root, is_float_dtype,
                           total_order_key, unsupported)
from .registry import register


def _sort_key(a: np.ndarray, total: bool) -> np.ndarray:
    """A key whose ascending numpy order is the comparator's LT order."""
    if a.dtype == np.bool_:
        return a.astype(np.uint8)
    if np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError("complex sort keys")
    if is_float_dtype(a.dtype):
        if total:
            return total_order_key(a)
        wide = a.astype(np.float64) + 0.0  # -0.0 -> +0.0: they compare equal
        return wide                         # NaN sorts last in numpy
    return a


def _descending(key: np.ndarray) -> np.ndarray:
    if key.dtype.kind == "f":
        return -key  # NaN stays NaN: still last
    return ~key      # order-reversing for signed and unsigned ints


def _fast_permutation(comp, operands, axis):
    pattern = compare_root(comp)
    if pattern is None:
        return None
    a, b, direction, total = pattern
    if a // 2 != b // 2 or a == b or a // 2 >= len(operands) or direction not in ("LT", "GT"):
        return None
    if a % 2 == 1:  # compare(rhs, lhs): swap the direction
        direction = "GT" if direction == "LT" else "LT"
    try:
        key = _sort_key(operands[a // 2], total)
    except TypeError:
        return None
    if direction == "GT":
        key = _descending(key)
    return np.argsort(key, axis=axis, kind="stable")


def _generic_permutation(ctx, comp, operands, axis):
    moved = [np.moveaxis(o, axis, -1) for o in operands]
    rows_shape = moved[0].shape[:-1]
    n = moved[0].shape[-1]
    flat = [np.ascontiguousarray(m).reshape(-1, n) for m in moved]
    perm = _batched_merge_sort(ctx, comp, flat)
    if perm is None:
        perm = _scalar_merge_sort(ctx, comp, flat)
    return np.moveaxis(perm.reshape(rows_shape + (n,)), -1, axis)


def _scalar_merge_sort(ctx, comp, flat):
    """Per-row stable sort calling the comparator once per comparison."""
    rows, n = flat[0].shape
    perm = np.empty((rows, n), dtype=np.int64)
    for r in range(rows):
        row = [f[r] for f in flat]

        def less(i, j, row=row):
            args = []
            for v in row:
                args += [v[i], v[j]]
            return bool(call_leaves(ctx, comp, args)[0])

        # Python's sort is a stable merge sort that only asks "a < b" (cmp(a, b) < 0).
        perm[r] = sorted(range(n), key=functools.cmp_to_key(
            lambda i, j: -1 if less(i, j) else 1))
    return perm


def _batched_merge_sort(ctx, comp, flat):
    """Stable bottom-up merge sort of every row at once, the comparator run on whole
    arrays (``ctx.call_batched``).  Merging two sorted runs places each element at
    ``its index + the number of elements of the other run that go before it``, found by a
    vectorised binary search (ties: the left run first).  None when the comparator cannot
    be batched or is not a strict weak order (the result would not be a permutation)."""
    rows, n = flat[0].shape
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), (rows, n)).copy()
    row_ids = np.arange(rows, dtype=np.int64)[:, None]
    p = np.arange(n, dtype=np.int64)[None, :]
    width = 1
    while width < n:
        start = (p // (2 * width)) * (2 * width)
        is_left = p < start + width
        other_start = np.where(is_left, start + width, start)
        other_len = np.where(is_left, np.clip(n - (start + width), 0, width), width)
        local = np.where(is_left, p - start, p - start - width)
        query = perm  # row indices of the elements being placed
        lo = np.zeros((rows, n), dtype=np.int64)
        hi = np.broadcast_to(other_len, (rows, n)).copy()
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            probe_pos = np.clip(other_start + mid, 0, n - 1)
            probe = perm[row_ids, probe_pos]
            # left: less(probe, query); right: not less(query, probe)
            first = np.where(is_left, probe, query)
            second = np.where(is_left, query, probe)
            args = []
            for f in flat:
                args += [f[row_ids, first], f[row_ids, second]]
            out = batched_call(ctx, comp, args)
            if out is None:
                return None
            result = out[0].astype(bool)
            pred = np.where(is_left, result, ~result)
            lo = np.where(active & pred, mid + 1, lo)
            hi = np.where(active & ~pred, mid, hi)
        new_pos = start + local + lo
        new_perm = np.full((rows, n), -1, dtype=np.int64)
        new_perm[row_ids, np.broadcast_to(new_pos, (rows, n))] = perm
        if (new_perm < 0).any():
            return None
        perm = new_perm
        width *= 2
    return perm


@register("sort")
def sort(inst, args, ctx):
    operands = [np.asarray(a) for a in args]
    dims = inst.attr("dimensions", ())
    if len(dims) != 1:
        raise unsupported(inst, f"expected dimensions={{d}}, got {list(dims)}")
    axis = dims[0]
    comp = inst.to_apply
    if operands[0].ndim == 0 or operands[0].shape[axis] <= 1:
        perm = None
    else:
        perm = _fast_permutation(comp, operands, axis)
        if perm is None:
            perm = _generic_permutation(ctx, comp, operands, axis)
    outs = [o if perm is None else np.take_along_axis(o, perm, axis=axis) for o in operands]
    if inst.shape.is_tuple():
        return tuple(as_result(o, s) for o, s in zip(outs, inst.shape.tuple_shapes))
    return as_result(outs[0], inst.shape)


@register("topk")
def topk(inst, args, ctx):
    x = np.asarray(args[0])
    k = inst.attr("k")
    largest = inst.attr("largest", True)
    if k is None or x.ndim == 0:
        raise unsupported(inst, "topk needs k= and an operand of rank >= 1")
    return top_k(inst, x, k, largest)


def top_k(inst, x, k: int, largest: bool):
    """The k largest (or smallest) along the last dimension in the total order -NaN < -inf
    < ... < -0 < +0 < ... < +inf < NaN, ties by the lower index: (values, s32 indices)."""
    key = total_order_key(x) if is_float_dtype(x.dtype) else _sort_key(x, True)
    if largest:
        key = _descending(key)
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(x, order, axis=-1)
    shapes = inst.shape.tuple_shapes
    return (as_result(values, shapes[0]), as_result(order, shapes[1]))
