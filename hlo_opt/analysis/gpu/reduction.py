"""XLA's GPU reduction utilities (xla/service/gpu/reduction_utils.cc): how a reduce maps
onto the reduction emitter (row / column reduction over a (major, middle, minor)
partition of the physical shape), when that emitter beats the elemental one, and when a
reduction is race free (needs no atomics, the tree-reduction rewriter's criterion)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from hlo_opt.analysis.layout import dimensions_consecutive, minor_to_major
from hlo_opt.ir.instruction import Instruction

MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
WARP_SIZE = 32


@dataclass(frozen=True)
class ReductionDimensions:
    is_row_reduction: bool
    dimensions: tuple[int, int, int]


def reduce_inputs(reduce: Instruction) -> list[Instruction]:
    return reduce.operands[:len(reduce.operands) // 2]


def _partition_by_middle(shape, dims_middle) -> list[int]:
    values = [1, 1, 1]
    segment = 2  # minor
    middle = set(dims_middle)
    for d in minor_to_major(shape):
        if segment != 0:
            inside = d in middle
            if segment == 2 and inside:
                segment = 1
            elif segment == 1 and not inside:
                segment = 0
        values[segment] *= shape.dims[d]
    return values


def reduction_dimensions(reduce: Instruction) -> ReductionDimensions:
    """GetReductionKindAndContiguousComponents."""
    return _reduction_dimensions(reduce.operands[0].shape, tuple(reduce.dimensions))


# The reduction facts are functions of the input shape (layout included: Shape equality
# compares layouts) and the reduced dimensions: cached, as fusion passes ask them of
# every reduce (and every fused copy of it) many times.
@lru_cache(maxsize=4096)
def _reduction_dimensions(shape, reduced_dims: tuple) -> ReductionDimensions:
    reduced = set(reduced_dims)
    keep = [d for d in range(shape.rank) if d not in reduced]
    if not keep:
        return ReductionDimensions(True, (1, 1, shape.num_elements()))
    if dimensions_consecutive(shape, keep):
        major, middle, minor = _partition_by_middle(shape, keep)
        if middle == 1:
            return ReductionDimensions(True, (1, 1, major * minor))
        if minor == 1:
            return ReductionDimensions(False, (1, major, middle))
        return ReductionDimensions(True, (major, middle, minor))
    major, middle, minor = _partition_by_middle(shape, sorted(reduced))
    if minor == 1:
        return ReductionDimensions(True, (1, major, middle))
    return ReductionDimensions(False, (major, middle, minor))


def reduction_tiling(rd: ReductionDimensions) -> tuple[int, int, int]:
    if rd.is_row_reduction:
        return (min(rd.dimensions[0], BATCHED_REDUCTION_RACE_FREE_BOUND), 1, 16)
    return (1, 128, 1)


def race_free_bound(rd: ReductionDimensions) -> int:
    tiling = reduction_tiling(rd)
    if rd.is_row_reduction:
        return MIN_THREADS_X_ROW_REDUCTION * tiling[2]
    return WARP_SIZE * tiling[1]


def is_unnested_reduction_faster_than_elemental(rd: ReductionDimensions) -> bool:
    if rd.is_row_reduction:
        return rd.dimensions[2] >= WARP_SIZE or WARP_SIZE % rd.dimensions[2] == 0
    major, minor = rd.dimensions[1], rd.dimensions[2]
    prefer_elemental = (major < WARP_SIZE or (major < 2 * WARP_SIZE and minor < WARP_SIZE)
                        or (major < 4 * WARP_SIZE and minor < 8)
                        or (major < 8 * WARP_SIZE and minor < 3))
    return not prefer_elemental


def is_reduction_from_or_to_contiguous_dimensions(inst: Instruction) -> bool:
    """A reduce the reduction emitter handles (row, column or batched row reduction)."""
    if inst.opcode != "reduce":
        return False
    return _contiguous_reduction(inst.operands[0].shape, tuple(inst.dimensions))


@lru_cache(maxsize=4096)
def _contiguous_reduction(shape, reduced_dims: tuple) -> bool:
    reduced = list(reduced_dims)
    keep = [d for d in range(shape.rank) if d not in set(reduced)]
    return (dimensions_consecutive(shape, keep) or dimensions_consecutive(shape, reduced)) \
        and is_unnested_reduction_faster_than_elemental(
            _reduction_dimensions(shape, reduced_dims))


def reduction_is_race_free(rd: ReductionDimensions) -> bool:
    if rd.is_row_reduction:
        return rd.dimensions[2] <= race_free_bound(rd) and \
            rd.dimensions[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return rd.dimensions[1] <= race_free_bound(rd)


def reduction_kind(comp) -> str | None:
    """MatchReductionComputation: 'add', 'maximum', 'minimum', 'multiply' ... for a
    binary scalar computation applying one op to its two parameters."""
    root = comp.root
    if root is None or len(comp.parameters) != 2 or len(root.operands) != 2:
        return None
    if set(root.operands) != set(comp.parameters):
        return None
    return root.opcode
