"""gather and scatter (ShapeInference::InferGatherShape / InferScatterShape), including
the operand/indices batching dimensions of current XLA."""
from __future__ import annotations

from ..ir.shape import Shape
from ..ir.types import is_integral
from .common import attr, called, expect_array, fail, int_attr, need_operands, same_dims, text
from .reduce import verify_reducer


def _sorted_unique(dims, what: str) -> None:
    if list(dims) != sorted(set(dims)):
        fail(f"{what} must be sorted and unique, got {{{','.join(map(str, dims))}}}")


def _in_range(dims, rank: int, what: str) -> None:
    for d in dims:
        if d < 0 or d >= rank:
            fail(f"{what} {d} is out of range [0, {rank})")


def _indices(inst, indices: Shape, op: str):
    expect_array(indices, f"indices of {op}")
    if not is_integral(indices.element_type):
        fail(f"{op} indices must be integral, got {text(indices)}")
    ivd = int_attr(inst, "index_vector_dim")
    if ivd < 0 or ivd > indices.rank:
        fail(f"{op} index_vector_dim {ivd} is out of range [0, {indices.rank}]")
    expanded = list(indices.dims) + ([1] if ivd == indices.rank else [])
    return ivd, expanded


def _check_batching(operand: Shape, expanded, ivd: int, operand_dims, index_dims,
                    excluded, op: str, names: tuple[str, str]) -> None:
    _sorted_unique(operand_dims, names[0])
    _in_range(operand_dims, operand.rank, names[0])
    if len(operand_dims) != len(index_dims):
        fail(f"{op} {names[0]} and {names[1]} must have the same length")
    if len(set(index_dims)) != len(index_dims):
        fail(f"{op} {names[1]} repeats a dimension")
    _in_range(index_dims, len(expanded), names[1])
    if ivd in index_dims:
        fail(f"{op} {names[1]} contains index_vector_dim {ivd}")
    for d in operand_dims:
        if d in excluded:
            fail(f"{op} batching dimension {d} is also collapsed/inserted or indexed")
    for a, b in zip(operand_dims, index_dims):
        if operand.dims[a] != expanded[b]:
            fail(f"{op} batching dimension sizes differ: operand dimension {a} is "
                 f"{operand.dims[a]}, indices dimension {b} is {expanded[b]}")


def gather(inst) -> Shape:
    need_operands(inst, 2)
    operand = expect_array(inst.operands[0].shape, "operand of gather")
    ivd, expanded = _indices(inst, inst.operands[1].shape, "gather")
    offset = attr(inst, "offset_dims", ())
    collapsed = attr(inst, "collapsed_slice_dims", ())
    index_map = attr(inst, "start_index_map", ())
    sizes = attr(inst, "slice_sizes", required=True)
    obatch = attr(inst, "operand_batching_dims", ())
    ibatch = attr(inst, "start_indices_batching_dims", ())
    out_rank = len(offset) + len(expanded) - 1
    _sorted_unique(offset, "gather offset_dims")
    _in_range(offset, out_rank, "gather offset dimension")
    if len(index_map) != expanded[ivd]:
        fail(f"gather start_index_map has {len(index_map)} entries but the index vector "
             f"dimension of the indices is {expanded[ivd]}")
    _in_range(index_map, operand.rank, "gather start_index_map entry")
    if len(set(index_map)) != len(index_map):
        fail("gather start_index_map repeats a dimension")
    _sorted_unique(collapsed, "gather collapsed_slice_dims")
    _in_range(collapsed, operand.rank, "gather collapsed slice dimension")
    _check_batching(operand, expanded, ivd, obatch, ibatch, set(collapsed) | set(index_map),
                    "gather", ("operand_batching_dims", "start_indices_batching_dims"))
    if len(sizes) != operand.rank:
        fail(f"gather has {len(sizes)} slice sizes for an operand of rank {operand.rank}")
    if len(sizes) != len(offset) + len(collapsed) + len(obatch):
        fail("gather: every operand dimension must be an offset, collapsed or batching "
             f"dimension (slice_sizes {len(sizes)}, offset_dims {len(offset)}, "
             f"collapsed {len(collapsed)}, batching {len(obatch)})")
    for i, (size, bound) in enumerate(zip(sizes, operand.dims)):
        if size < 0 or size > bound:
            fail(f"gather slice size {size} in dimension {i} is outside [0, {bound}]")
    for d in list(collapsed) + list(obatch):
        if sizes[d] > 1:
            fail(f"gather can only collapse dimensions of slice size <= 1; dimension {d} "
                 f"has {sizes[d]}")
    dropped = set(collapsed) | set(obatch)
    window = [d for d in range(operand.rank) if d not in dropped]
    batch = [d for d in range(len(expanded)) if d != ivd]
    offset_set = set(offset)
    dims, dyn = [], []
    wi = bi = 0
    ind_dyn = list(inst.operands[1].shape.dynamic) + [False]
    for i in range(out_rank):
        if i in offset_set:
            d = window[wi]
            wi += 1
            dims.append(sizes[d])
            dyn.append(operand.dynamic[d] and sizes[d] == operand.dims[d])
        else:
            d = batch[bi]
            bi += 1
            dims.append(expanded[d])
            dyn.append(ind_dyn[d])
    return Shape(operand.element_type, dims, dyn)


def scatter(inst) -> Shape:
    ops = inst.operands
    n = len(ops) // 2
    if n < 1 or 2 * n + 1 != len(ops):
        fail(f"scatter needs 2N+1 operands (N operands, indices, N updates), has {len(ops)}")
    operands = [o.shape for o in ops[:n]]
    updates = [o.shape for o in ops[n + 1:]]
    ivd, expanded = _indices(inst, ops[n].shape, "scatter")
    window = attr(inst, "update_window_dims", ())
    inserted = attr(inst, "inserted_window_dims", ())
    to_operand = attr(inst, "scatter_dims_to_operand_dims", ())
    obatch = attr(inst, "input_batching_dims", ())
    ibatch = attr(inst, "scatter_indices_batching_dims", ())
    _sorted_unique(window, "scatter update_window_dims")
    _sorted_unique(inserted, "scatter inserted_window_dims")
    for i, (operand, update) in enumerate(zip(operands, updates)):
        expect_array(operand, f"operand {i} of scatter")
        expect_array(update, f"updates {i} of scatter")
        if not same_dims(operand, operands[0]) or not same_dims(update, updates[0]):
            fail("scatter operands (and updates) must all have the same dimensions")
    operand, update = operands[0], updates[0]
    want_rank = len(expanded) - 1 + len(window)
    if update.rank != want_rank:
        fail(f"scatter updates must have rank {want_rank}, got {text(update)}")
    _in_range(window, update.rank, "scatter update window dimension")
    _in_range(inserted, operand.rank, "scatter inserted window dimension")
    if len(window) + len(inserted) + len(obatch) != operand.rank:
        fail(f"scatter window has {len(window) + len(inserted) + len(obatch)} dimensions, "
             f"operand has rank {operand.rank}")
    if len(to_operand) != expanded[ivd]:
        fail(f"scatter_dims_to_operand_dims has {len(to_operand)} entries but the index "
             f"vector dimension of the indices is {expanded[ivd]}")
    _in_range(to_operand, operand.rank, "scatter_dims_to_operand_dims entry")
    if len(set(to_operand)) != len(to_operand):
        fail("scatter_dims_to_operand_dims repeats a dimension")
    _check_batching(operand, expanded, ivd, obatch, ibatch, set(inserted) | set(to_operand),
                    "scatter", ("input_batching_dims", "scatter_indices_batching_dims"))
    dropped = set(inserted) | set(obatch)
    max_sizes = [operand.dims[d] for d in range(operand.rank) if d not in dropped]
    for i, d in enumerate(window):
        if update.dims[d] > max_sizes[i]:
            fail(f"scatter update window dimension {d} ({update.dims[d]}) exceeds the "
                 f"operand's {max_sizes[i]}")
    scatter_dims = [d for d in range(len(expanded)) if d != ivd]
    window_set = set(window)
    si = 0
    for d in range(update.rank):
        if d in window_set:
            continue
        want = expanded[scatter_dims[si]]
        si += 1
        if update.dims[d] != want:
            fail(f"scatter update dimension {d} ({update.dims[d]}) must equal the indices' "
                 f"scatter dimension ({want})")
    (comp,) = called(inst, 1)
    verify_reducer(comp, [Shape.array(s.element_type, ()) for s in operands],
                   [s.element_type for s in updates], "scatter")
    return operands[0] if n == 1 else Shape.tuple(operands)
