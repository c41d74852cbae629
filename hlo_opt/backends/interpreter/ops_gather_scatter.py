"""gather and scatter with XLA's full dimension numbers (docs/operation_semantics.md).

Both are vectorised: the start indices become one [positions, operand-rank] table, and the
operand elements a window touches are addressed with numpy advanced indexing (window dims
that span a whole operand dim as plain slices).

* gather clamps each start index into ``[0, operand_dim - slice_size]`` (XLA semantics);
* scatter skips every update window that would not fit entirely in the operand (what the
  XLA evaluator and backends do), applies updates in row-major order of the updates array
  (so non-unique indices combine in order), and supports variadic operands;
* a combiner that is one commutative op (add/multiply/max/min/and/or/xor) runs through
  ``ufunc.at``, plain assignment keeps the last update per element; any other combiner
  runs in rounds through ``ctx.call_batched`` (round r = every element's r-th update) or,
  when the context cannot batch it, per element through ``ctx.call``.
"""
from __future__ import annotations

import math

import numpy as np

from .heavy_common import (UFUNCS, as_result, batched_call, binary_combiners, call_leaves,
                           unsupported)
from .registry import register


def _canonical_indices(indices: np.ndarray, index_vector_dim: int):
    """Indices as [batch..., K] (index_vector_dim moved last; implicit trailing 1)."""
    indices = np.asarray(indices)
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    else:
        indices = np.moveaxis(indices, index_vector_dim, -1)
    return indices.astype(np.int64)


def _batch_coordinate(batch_shape, indices_dim: int, index_vector_dim: int):
    """Coordinate along indices dim ``indices_dim`` of every flattened batch position."""
    axis = indices_dim - (1 if indices_dim > index_vector_dim else 0)
    n = int(np.prod(batch_shape, dtype=np.int64))
    coords = np.unravel_index(np.arange(n), batch_shape) if batch_shape else ()
    return np.asarray(coords[axis], dtype=np.int64)


def _window_index_arrays(starts: np.ndarray, sizes):
    """For starts [M, R] and window sizes [R]: R index arrays of shape [M, *sizes]."""
    m, rank = starts.shape
    out = []
    for d in range(rank):
        shape = [1] * (rank + 1)
        shape[d + 1] = sizes[d]
        ar = np.arange(sizes[d], dtype=np.int64).reshape(shape)
        out.append(starts[:, d].reshape([m] + [1] * rank) + ar)
    return np.broadcast_arrays(*out)


class _Windows:
    """M windows of ``sizes`` at ``starts`` in an array of ``shape``, addressed with dims a
    window spans entirely as slices and only the others as index arrays, so that an
    embedding-style lookup costs M index entries, not M x row length.

    ``index`` applies to ``np.transpose(array, perm)`` and yields
    [M, indexed window dims..., spanned dims...]."""

    def __init__(self, starts: np.ndarray, sizes, shape):
        rank = len(sizes)
        spanned = [d for d in range(rank) if sizes[d] == shape[d]]  # start is 0 there
        indexed = [d for d in range(rank) if d not in spanned]
        if not indexed and rank:
            indexed, spanned = [spanned[0]], spanned[1:]
        self.perm = indexed + spanned
        m = starts.shape[0]
        arrays = []
        for k, d in enumerate(indexed):
            shape_k = [1] * (len(indexed) + 1)
            shape_k[k + 1] = sizes[d]
            ar = np.arange(sizes[d], dtype=np.int64).reshape(shape_k)
            arrays.append(starts[:, d].reshape([m] + [1] * len(indexed)) + ar)
        self.index = tuple(arrays) + (slice(None),) * len(spanned)

    def view(self, array: np.ndarray) -> np.ndarray:
        return np.transpose(array, self.perm)

    def to_operand_order(self, values: np.ndarray) -> np.ndarray:
        """[M, window dims in perm order] -> [M, window dims in operand order]."""
        inverse = np.argsort(self.perm)
        return np.transpose(values, [0] + [1 + int(i) for i in inverse])

    def from_operand_order(self, values: np.ndarray) -> np.ndarray:
        return np.transpose(values, [0] + [1 + p for p in self.perm])


# ---- gather -----------------------------------------------------------------------------
@register("gather")
def gather(inst, args, ctx):
    operand, indices = np.asarray(args[0]), args[1]
    rank = operand.ndim
    offset_dims = list(inst.attr("offset_dims", ()))
    collapsed = set(inst.attr("collapsed_slice_dims", ()))
    start_index_map = list(inst.attr("start_index_map", ()))
    operand_batching = list(inst.attr("operand_batching_dims", ()))
    indices_batching = list(inst.attr("start_indices_batching_dims", ()))
    ivd = inst.attr("index_vector_dim", np.asarray(indices).ndim)
    slice_sizes = list(inst.attr("slice_sizes", ()))
    if len(slice_sizes) != rank:
        raise unsupported(inst, f"slice_sizes has {len(slice_sizes)} entries, operand rank "
                                f"is {rank}")
    idx = _canonical_indices(indices, ivd)
    batch_shape = idx.shape[:-1]
    idx = idx.reshape(math.prod(idx.shape[:-1]), idx.shape[-1])  # -1 fails for 0-wide rows
    m = idx.shape[0]

    starts = np.zeros((m, rank), dtype=np.int64)
    for k, d in enumerate(start_index_map):
        starts[:, d] = idx[:, k]
    for od, idim in zip(operand_batching, indices_batching):
        starts[:, od] = _batch_coordinate(batch_shape, idim, ivd)
    limits = np.asarray(operand.shape, dtype=np.int64) - np.asarray(slice_sizes, np.int64)
    starts = np.clip(starts, 0, np.maximum(limits, 0))

    if operand.size == 0 or m == 0 or rank == 0:
        slices = np.zeros([m] + slice_sizes, dtype=operand.dtype)
        if rank == 0:
            slices[...] = operand
    else:
        windows = _Windows(starts, slice_sizes, operand.shape)
        slices = windows.to_operand_order(windows.view(operand)[windows.index])
    # Drop collapsed and batching dims (size 1): [M, offset dims in operand order].
    drop = sorted(collapsed | set(operand_batching))
    slices = slices.reshape([m] + [s for d, s in enumerate(slice_sizes) if d not in drop])
    offset_sizes = list(slices.shape[1:])
    slices = slices.reshape(list(batch_shape) + offset_sizes)

    # Output: offset dims at offset_dims positions, batch dims elsewhere, both in order.
    out_rank = len(batch_shape) + len(offset_sizes)
    batch_positions = [d for d in range(out_rank) if d not in set(offset_dims)]
    perm = [0] * out_rank
    for i, d in enumerate(batch_positions):
        perm[d] = i
    for i, d in enumerate(offset_dims):
        perm[d] = len(batch_shape) + i
    return as_result(np.transpose(slices, perm), inst.shape)


# ---- scatter ----------------------------------------------------------------------------
@register("scatter")
def scatter(inst, args, ctx):
    n = len(args) // 2
    if len(args) != 2 * n + 1:
        raise unsupported(inst, f"expected 2N+1 operands, got {len(args)}")
    operands = [np.array(a, copy=True) for a in args[:n]]
    indices = args[n]
    updates = [np.asarray(u) for u in args[n + 1:]]
    rank = operands[0].ndim

    update_window_dims = list(inst.attr("update_window_dims", ()))
    inserted = set(inst.attr("inserted_window_dims", ()))
    sd2od = list(inst.attr("scatter_dims_to_operand_dims", ()))
    input_batching = list(inst.attr("input_batching_dims", ()))
    indices_batching = list(inst.attr("scatter_indices_batching_dims", ()))
    ivd = inst.attr("index_vector_dim", np.asarray(indices).ndim)

    idx = _canonical_indices(indices, ivd)
    batch_shape = idx.shape[:-1]
    idx = idx.reshape(math.prod(idx.shape[:-1]), idx.shape[-1])  # -1 fails for 0-wide rows
    m = idx.shape[0]

    # Window sizes per operand dim (1 for inserted and batching dims).
    window_operand_dims = [d for d in range(rank)
                           if d not in inserted and d not in set(input_batching)]
    if len(window_operand_dims) != len(update_window_dims):
        raise unsupported(inst, "update_window_dims do not match the operand window dims")
    upd_shape = updates[0].shape
    wsizes = [1] * rank
    for od, ud in zip(window_operand_dims, update_window_dims):
        wsizes[od] = upd_shape[ud]

    starts = np.zeros((m, rank), dtype=np.int64)
    for k, d in enumerate(sd2od):
        starts[:, d] = idx[:, k]
    for od, idim in zip(input_batching, indices_batching):
        starts[:, od] = _batch_coordinate(batch_shape, idim, ivd)
    limits = np.asarray(operands[0].shape, np.int64) - np.asarray(wsizes, np.int64)
    valid = np.all((starts >= 0) & (starts <= limits), axis=1)

    # Updates as [M, window sizes in operand-dim order] (windows keep their order).
    scatter_update_dims = [d for d in range(len(upd_shape)) if d not in set(update_window_dims)]
    perm = scatter_update_dims + update_window_dims
    upd = [np.transpose(u, perm).reshape([m] + wsizes) for u in updates]

    starts = starts[valid]
    upd = [u[valid] for u in upd]
    if rank == 0 and starts.shape[0]:
        # Every update combines into the one element, in update order.
        index = (np.zeros(starts.shape[0], dtype=np.int64),)
        views = [o.reshape(1) for o in operands]  # views: writes land in ``operands``
        flat_upd = [u.reshape(-1) for u in upd]
        ops = binary_combiners(inst.to_apply, n)
        if ops is not None:
            for view, values, op in zip(views, flat_upd, ops):
                _apply_fast(view, index, values, op)
        else:
            _apply_generic(ctx, inst.to_apply, views, index, flat_upd)
        return _result(inst, operands)
    if starts.shape[0] == 0 or any(s == 0 for s in wsizes) or rank == 0:
        return _result(inst, operands)

    ops = binary_combiners(inst.to_apply, n)
    if ops is not None and "assign" not in ops:
        windows = _Windows(starts, wsizes, operands[0].shape)
        for i, op in enumerate(ops):
            values = windows.from_operand_order(upd[i]).astype(operands[i].dtype, copy=False)
            UFUNCS[op].at(windows.view(operands[i]), windows.index, values)
        return _result(inst, operands)
    index = tuple(_window_index_arrays(starts, wsizes))
    if ops is not None:
        for i, op in enumerate(ops):
            _apply_fast(operands[i], index, upd[i], op)
        return _result(inst, operands)
    _apply_generic(ctx, inst.to_apply, operands, index, upd)
    return _result(inst, operands)


def _apply_fast(target: np.ndarray, index, values: np.ndarray, op: str) -> None:
    values = np.broadcast_to(values, index[0].shape).astype(target.dtype, copy=False)
    if op == "assign":
        # Last write wins, in update order (numpy leaves duplicate assignment undefined).
        flat = np.ravel_multi_index([i.ravel() for i in index], target.shape)
        vals = values.ravel()
        _, last_from_end = np.unique(flat[::-1], return_index=True)
        keep = len(flat) - 1 - last_from_end
        target.reshape(-1)[flat[keep]] = vals[keep]
        return
    UFUNCS[op].at(target, index, values)


def _apply_generic(ctx, comp, operands, index, upd) -> None:
    flat = np.ravel_multi_index([i.ravel() for i in index], operands[0].shape)
    flat_targets = [o.reshape(-1) for o in operands]
    flat_upd = [u.reshape(-1) for u in upd]
    if _apply_batched(ctx, comp, flat, flat_targets, flat_upd):
        return
    for j, pos in enumerate(flat.tolist()):
        cur = [t[pos] for t in flat_targets]
        new = call_leaves(ctx, comp, cur + [u[j] for u in flat_upd])
        for t, v in zip(flat_targets, new):
            t[pos] = v


def _apply_batched(ctx, comp, flat, flat_targets, flat_upd) -> bool:
    """Apply the combiner with ``ctx.call_batched`` in rounds: round r takes every
    update that is the r-th one (in update order) to hit its target, so each target is
    updated in order and no round touches a target twice.  False when the combiner cannot
    be batched (nothing has been changed then)."""
    count = flat.shape[0]
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    first = np.ones(count, dtype=bool)
    first[1:] = sorted_flat[1:] != sorted_flat[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(count), 0))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count) - group_start
    for r in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == r)
        pos = flat[sel]
        new = batched_call(ctx, comp, [t[pos] for t in flat_targets]
                           + [u[sel] for u in flat_upd])
        if new is None:
            if r == 0:
                return False
            raise RuntimeError("scatter combiner stopped being batchable")
        for t, v in zip(flat_targets, new):
            t[pos] = v
    return True


def _result(inst, operands):
    if inst.shape.is_tuple():
        return tuple(as_result(o, s) for o, s in zip(operands, inst.shape.tuple_shapes))
    return as_result(operands[0], inst.shape)
