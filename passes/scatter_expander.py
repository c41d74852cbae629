"""ScatterExpander (``scatter_expander``), as ``xla/service/scatter_expander.cc`` with
``scatter_utils.cc`` and ``gather_scatter_utils.cc``.

A ``scatter`` becomes a counted ``while`` loop over its indices:

1. the indices are canonicalised to ``[count, index_vector]`` (the index-vector dim moved
   last, the other dims collapsed; ``[count]`` for scalar indices), each update to
   ``[count, window...]`` (scatter dims first, collapsed);
2. iteration ``i`` picks index vector ``i``, spreads it over the operand's dims
   (``scatter_dims_to_operand_dims``; explicit batching dims take the batch position
   decoded from ``i``; other dims 0), takes update window ``i`` (with the inserted and
   batching dims put back as size 1), combines it with the operand window there through a
   ``map`` of the update computation, and writes the result back with
   ``dynamic-update-slice`` -- unless the window would leave the operand, in which case
   the operand is kept (scatter's out-of-bounds rule).

Variadic scatters carry every operand and update through the loop and map the update
computation's i-th output (``<computation>.dup.<i>``).  Scatters with empty updates are
replaced by their operands.  ``mode``: ``"all"`` (XLA's kEliminateAllScatters, the
registered default), ``"simple"`` (only scatters of one index) or ``"indeterministic"``
(only scatters whose result may depend on the update order: indices not unique and an
update computation that is not an associative integer/min/max op).  Scatters with more
than 2^31-1 indices (XLA: Unimplemented) are left alone.  Fusion computations are not
visited.
"""
from __future__ import annotations

import math

import numpy as np

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.builder import Builder, scalar_computation
from ._expander_util import (collapse_first_n_dims, dynamic_slice_vec,
                             dynamic_update_slice_vec, elide_degenerate_dims,
                             insert_degenerate_dims, make_counted_loop, new_computation,
                             non_fusion_computations, pad_vector_with_zeros,
                             prepend_degenerate_dims, r1_constant, replace_instruction)

_INT32_MAX = (1 << 31) - 1
MODES = ("all", "simple", "indeterministic")


# ---- scatter_utils -------------------------------------------------------------------------
def scatter_indices_count(scatter) -> int:
    """ScatterIndicesCount: the loop's trip count."""
    n = (len(scatter.operands) - 1) // 2
    shape = scatter.operands[n].shape
    ivd = scatter.scatter_dimension_numbers.index_vector_dim
    return math.prod(d for i, d in enumerate(shape.dims) if i != ivd)


def is_combiner_associative(comp: Computation) -> bool:
    """IsScatterCombinerAssociative."""
    if comp.instruction_count() != 3:
        return False
    root = comp.root
    if root.opcode in ("minimum", "maximum"):
        return True
    if root.opcode in ("add", "multiply", "or", "xor"):
        return root.shape.is_array() and (is_integral(root.shape.element_type)
                                          or root.shape.element_type == "pred")
    return False


def is_scatter_deterministic(scatter) -> bool:
    return bool(scatter.attr("unique_indices", False)) or \
        is_combiner_associative(scatter.to_apply)


def canonicalize_scatter_indices(b: Builder, indices, ivd: int):
    """CanonicalizeScatterIndices: ``[count, index_vector]``, or ``[count]`` when the
    indices are scalars (a trailing index-vector dim of size 1 counts as scalar)."""
    rank = indices.shape.rank
    transposed = indices
    if ivd < rank - 1:
        perm = [i for i in range(rank) if i != ivd] + [ivd]
        transposed = b.transpose(indices, perm)
    scalar = ivd == rank or (ivd == rank - 1 and indices.shape.dims[ivd] == 1)
    index_dims = 0 if scalar else 1
    t_rank = transposed.shape.rank
    if t_rank == index_dims:
        return prepend_degenerate_dims(b, transposed, 1)
    return collapse_first_n_dims(b, transposed, t_rank - index_dims)


def permute_scatter_and_window_dims(b: Builder, update, window_dims):
    """PermuteScatterAndWindowDims: scatter dims first, then the window dims."""
    wd = set(window_dims)
    perm = [i for i in range(update.shape.rank) if i not in wd] + list(window_dims)
    return b.transpose(update, perm)


def adjust_scatter_dims(b: Builder, indices_shape: Shape, update, ivd: int):
    """AdjustScatterDims: collapse the scatter dims into one leading dim."""
    n = indices_shape.rank - (1 if ivd < indices_shape.rank else 0)
    if n == 0:
        return prepend_degenerate_dims(b, update, 1)
    return collapse_first_n_dims(b, update, n)


def call_and_get_output(module, original: Computation, index: int) -> Computation:
    """CallAndGetOutput: ``original`` when it returns one value, else a copy of it
    (``<name>.dup.<index>``) returning its ``index``-th output."""
    if not original.root.shape.is_tuple():
        return original
    comp, params = new_computation(f"{original.name}.dup.{index}",
                                   [(p.shape, p.name) for p in original.parameters])
    mapping = dict(zip(original.parameters, params))
    for inst in original.post_order():
        if inst.opcode == "parameter":
            continue
        copy = Instruction(inst.opcode, inst.shape, [mapping[o] for o in inst.operands],
                           {k: v for k, v in inst.attrs.items()
                            if k != "control-predecessors"},
                           inst.name, inst.payload, inst.called, inst.called_attr)
        copy.cache_literal(inst.cached_literal)
        comp.add_instruction(copy)
        mapping[inst] = copy
    root = mapping[original.root]
    comp.root = Builder(comp).gte(root, index)
    module.add_computation(comp)
    return comp


# ---- gather_scatter_utils -----------------------------------------------------------------
def explicit_batch_dim_indices(b: Builder, indices_shape: Shape, ivd: int, batching_dims,
                               indvar) -> list:
    """GenerateExplicitBatchDimIndices: each batching dim's position within iteration
    ``indvar`` (the row-major index over the non-index-vector dims)."""
    if not batching_dims:
        return []
    rank = indices_shape.rank
    remaining = rank if rank == ivd else rank - 1
    out = [None] * len(batching_dims)
    dividend = indvar
    for i in range(rank - 1, -1, -1):
        if i == ivd:
            continue
        k = batching_dims.index(i) if i in batching_dims else -1
        remaining -= 1
        if remaining == 0:
            if k >= 0:
                out[k] = dividend
            break
        divisor = b.scalar(indices_shape.dims[i], "s32")
        if k >= 0:
            out[k] = b.binary("remainder", dividend, divisor)
        dividend = b.binary("divide", dividend, divisor)
    return out


def expand_index_vector(b: Builder, indices_shape: Shape, operand_rank: int, ivd: int,
                        dims_to_operand_dims, indices_batching_dims, operand_batching_dims,
                        index_vector, indvar):
    """ExpandIndexVectorIntoOperandSpace: the operand-space start of iteration ``indvar``."""
    et = index_vector.shape.element_type
    if operand_rank == 0:
        return b.constant_array(np.zeros((0,), np.int64), et)
    zero = b.constant_array(np.zeros((1,), np.int64), et)
    batch = explicit_batch_dim_indices(b, indices_shape, ivd, list(indices_batching_dims),
                                       indvar)
    parts = []
    seen = 0
    for i in range(operand_rank):
        if i in dims_to_operand_dims:
            k = list(dims_to_operand_dims).index(i)
            parts.append(b.slice(index_vector, [k], [k + 1]))
        elif i in operand_batching_dims:
            v = b.convert(batch[seen], et)  # s32 loop position; XLA assumes s32 indices
            seen += 1
            parts.append(b.broadcast(v, [1], []))
        else:
            parts.append(zero)
    return b.concatenate(parts, 0)


def check_index_validity(b: Builder, module, index, operand_dims, window_sizes):
    """CheckIndexValidity: pred[window] that is true iff 0 <= index <= dims - window."""
    et = index.shape.element_type
    zeros = b.broadcast(b.scalar(0, et), index.shape.dims, [])
    not_negative = b.compare(zeros, index, "LE")
    max_valid = r1_constant(b, [d - w for d, w in zip(operand_dims, window_sizes)], et)
    in_bounds = b.compare(max_valid, index, "GE")
    valid = b.binary("and", not_negative, in_bounds)
    and_comp = scalar_computation(module, "and", "pred")
    reduced = b.reduce(valid, b.scalar(True, "pred"), list(range(valid.shape.rank)),
                       and_comp)
    return b.broadcast(reduced, window_sizes, [])


# ---- the loop ---------------------------------------------------------------------------
def _loop_body(scatter, n: int):
    module = scatter.parent.module
    indices_shape = scatter.operands[n].shape
    dnums = scatter.scatter_dimension_numbers
    ivd = dnums.index_vector_dim
    sdod = list(dnums.scatter_dims_to_operand_dims)
    ibd = list(dnums.input_batching_dims)
    sibd = list(dnums.scatter_indices_batching_dims)
    degenerate = sorted(list(dnums.inserted_window_dims) + ibd)

    def body(b: Builder, indvar, state):
        operands, indices, updates = state[:n], state[n], state[n + 1:]
        iv_vec = b.broadcast(indvar, [1], [])
        if indices.shape.rank == 1:
            index_vector = dynamic_slice_vec(b, indices, iv_vec, [1])
        else:
            into = pad_vector_with_zeros(b, iv_vec, 0, 1)
            row = dynamic_slice_vec(b, indices, into, [1, indices.shape.dims[1]])
            index_vector = elide_degenerate_dims(b, row, [0])
        start = expand_index_vector(b, indices_shape, operands[0].shape.rank, ivd, sdod,
                                    sibd, ibd, index_vector, indvar)
        into_updates = pad_vector_with_zeros(b, iv_vec, 0, updates[0].shape.rank - 1)
        bounds = list(updates[0].shape.dims)
        bounds[0] = 1
        update_slices, operand_slices = [], []
        for operand, update in zip(operands, updates):
            u = dynamic_slice_vec(b, update, into_updates, bounds)
            u = insert_degenerate_dims(b, elide_degenerate_dims(b, u, [0]), degenerate)
            update_slices.append(u)
            operand_slices.append(dynamic_slice_vec(b, operand, start, u.shape.dims))
        window = update_slices[0].shape.dims
        valid = check_index_validity(b, module, start, operands[0].shape.dims, window)
        new_operands = []
        for i, operand in enumerate(operands):
            to_apply = call_and_get_output(module, scatter.to_apply, i)
            et = to_apply.root.shape.element_type
            mapped = b.map(operand_slices + update_slices, to_apply,
                           Shape.array(et, window))
            chosen = b.select(valid, mapped, operand_slices[i])
            new_operands.append(dynamic_update_slice_vec(b, operand, chosen, start))
        return new_operands + [indices] + list(updates)

    return body


def expand_scatter(comp: Computation, scatter):
    """The instruction replacing ``scatter``, or None when it is left alone."""
    n = (len(scatter.operands) - 1) // 2
    operands, indices = scatter.operands[:n], scatter.operands[n]
    updates = scatter.operands[n + 1:]
    b = Builder(comp)
    if updates[0].shape.num_elements() == 0:
        return operands[0] if n == 1 else b.tuple(operands)
    trip = scatter_indices_count(scatter)
    if trip > _INT32_MAX:
        return None
    dnums = scatter.scatter_dimension_numbers
    ivd = dnums.index_vector_dim
    window_dims = list(dnums.update_window_dims)
    canonical_indices = canonicalize_scatter_indices(b, indices, ivd)
    canonical_updates = [
        adjust_scatter_dims(b, indices.shape, permute_scatter_and_window_dims(b, u, window_dims),
                            ivd) for u in updates]
    attrs = {"metadata": scatter.attrs["metadata"]} if "metadata" in scatter.attrs else None
    results = make_counted_loop(comp, trip, list(operands) + [canonical_indices]
                                + canonical_updates, _loop_body(scatter, n), attrs)
    return results[0] if n == 1 else b.tuple(results[:n])


def _matches(scatter, mode: str) -> bool:
    if mode == "all":
        return True
    if mode == "simple":
        return scatter_indices_count(scatter) == 1
    return not is_scatter_deterministic(scatter)


class ScatterExpander:
    name = "scatter_expander"

    def __init__(self, mode: str = "all"):
        if mode not in MODES:
            raise ValueError(f"scatter_expander mode must be one of {MODES}, got {mode!r}")
        self.mode = mode

    def run(self, module) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            matches = [i for i in comp.post_order()
                       if i.opcode == "scatter" and _matches(i, self.mode)]
            for scatter in matches:
                new = expand_scatter(comp, scatter)
                if new is None:
                    continue
                replace_instruction(comp, scatter, new,
                                    fresh=new not in scatter.operands)
                changed = True
        return changed
