"""Physical-layout questions (XLA's LayoutUtil / ShapeUtil helpers): which logical
dimension is where in memory, whether a reshape or transpose is a bitcast, whether a set
of dimensions is physically consecutive.

A shape without a written layout has XLA's default layout (row-major: minor_to_major =
rank-1, ..., 0).
"""
from __future__ import annotations

import itertools

from hlo_opt.ir.shape import Layout, Shape


def minor_to_major(shape: Shape) -> tuple[int, ...]:
    return shape.effective_layout().minor_to_major


def major_to_minor(shape: Shape) -> tuple[int, ...]:
    return tuple(reversed(minor_to_major(shape)))


def has_default_layout(shape: Shape) -> bool:
    return minor_to_major(shape) == tuple(range(shape.rank - 1, -1, -1))


def is_monotonic_dim0_major(shape: Shape) -> bool:
    """LayoutUtil::IsMonotonicWithDim0Major: the row-major (default) layout."""
    return has_default_layout(shape)


def dimensions_consecutive(shape: Shape, dims) -> bool:
    """LayoutUtil::AreDimensionsConsecutive: ``dims`` occupy consecutive positions of the
    minor-to-major order."""
    dims = list(dims)
    if not dims:
        return True
    m2m = minor_to_major(shape)
    pos = sorted(m2m.index(d) for d in dims)
    return pos[-1] - pos[0] == len(pos) - 1


def physical_shape(shape: Shape) -> list[int]:
    """Dimension sizes in major-to-minor order."""
    return [shape.dims[d] for d in major_to_minor(shape)]


def transpose_is_bitcast(src: Shape, dst: Shape, perm) -> bool:
    """ShapeUtil::TransposeIsBitcast: the transpose does not move bytes (size-1
    dimensions are free to go anywhere)."""
    src_order = [d for d in major_to_minor(src) if src.dims[d] != 1]
    dst_order = [perm[d] for d in major_to_minor(dst) if dst.dims[d] != 1]
    return src_order == dst_order


def reshape_is_bitcast(src: Shape, dst: Shape) -> bool:
    """ShapeUtil::ReshapeIsBitcast: the reshape keeps every element at the same physical
    offset.  A reshape preserves the logical row-major order, so this holds when both
    physical orders are row-major ones after dropping size-1 dimensions, or more generally
    when every group of dimensions the reshape merges or splits is physically contiguous
    in the same order on both sides and the groups appear in the same physical order."""
    if src.num_elements() != dst.num_elements():
        return False
    a = [d for d in range(src.rank) if src.dims[d] != 1]
    b = [d for d in range(dst.rank) if dst.dims[d] != 1]
    a_phys = [d for d in major_to_minor(src) if src.dims[d] != 1]
    b_phys = [d for d in major_to_minor(dst) if dst.dims[d] != 1]
    if a_phys == a and b_phys == b:
        return True
    sa = [src.dims[d] for d in a]
    sb = [dst.dims[d] for d in b]
    groups_a, groups_b = [], []
    bounds = common_factors(sa, sb)
    for (i0, j0), (i1, j1) in zip(bounds, bounds[1:]):
        groups_a.append([a[i] for i in range(i0, i1)])
        groups_b.append([b[j] for j in range(j0, j1)])

    def physical_group_order(groups, phys):
        pos = {d: k for k, d in enumerate(phys)}
        out = []
        for g in groups:
            if not g:
                continue
            p = [pos[d] for d in g]
            if p != list(range(p[0], p[0] + len(p))):
                return None  # not contiguous in logical order physically
            out.append(p[0])
        return [i for i, _ in sorted(enumerate(out), key=lambda t: t[1])]

    oa = physical_group_order(groups_a, a_phys)
    ob = physical_group_order(groups_b, b_phys)
    return oa is not None and oa == ob


def transpose_bitcast_layout(src: Shape, perm) -> Layout:
    """The layout of ``transpose(src, perm)``'s result that makes it a bitcast (XLA's
    ShapeUtil::PermuteDimensions of the operand layout): result dimension ``i`` is operand
    dimension ``perm[i]``, so it sits where that one does."""
    where = {d: i for i, d in enumerate(perm)}
    return Layout(tuple(where[d] for d in minor_to_major(src)),
                  src.effective_layout().tail)


_ALIGN_MAX_RANK = 6


def reshape_bitcast_layout(src: Shape, dst: Shape) -> Layout | None:
    """A layout for ``dst`` (a reshape of ``src``) that makes the reshape a bitcast, or
    None when none does (XLA's ShapeUtil::AlignLayouts).  ``dst``'s own layout is preferred,
    then the default one, then the others in order."""
    if src.num_elements() != dst.num_elements() or dst.rank > _ALIGN_MAX_RANK:
        return None
    tail = src.effective_layout().tail
    candidates = [dst.effective_layout().minor_to_major,
                  Layout.default(dst.rank).minor_to_major]
    candidates += [tuple(reversed(p)) for p in itertools.permutations(range(dst.rank))]
    for m2m in candidates:
        layout = Layout(m2m, tail)
        if reshape_is_bitcast(src, dst.with_layout(layout)):
            return layout
    return None


def normalized_transpose(src: Shape, dst: Shape, perm) -> tuple[list[int], list[int]] | None:
    """The physical permutation a transpose (or layout-changing copy) performs, with
    dimensions that stay adjacent merged and size-1 dimensions dropped: returns
    (sizes of the merged input dims in physical order, permutation) or None when the op
    moves no bytes."""
    src_phys = [d for d in major_to_minor(src) if src.dims[d] != 1]
    # output physical order expressed in input logical dims
    dst_phys = [perm[d] for d in major_to_minor(dst) if dst.dims[d] != 1]
    if src_phys == dst_phys:
        return None
    pos_in = {d: i for i, d in enumerate(src_phys)}
    seq = [pos_in[d] for d in dst_phys]  # output order in terms of input physical positions
    # merge runs of consecutive input positions
    groups: list[list[int]] = []
    for p in seq:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    rank_of = {g: r for r, g in enumerate(order)}
    sizes = []
    for g in order:
        n = 1
        for p in groups[g]:
            n *= src.dims[src_phys[p]]
        sizes.append(n)
    out_perm = [rank_of[g] for g in range(len(groups))]
    return sizes, out_perm


def copy_permutation(src: Shape, dst: Shape) -> list[int]:
    """A copy between layouts as a transpose permutation (identity on logical dims)."""
    return list(range(dst.rank))


def with_default_layout(shape: Shape) -> Shape:
    if shape.is_tuple():
        return Shape.tuple(with_default_layout(s) for s in shape.tuple_shapes)
    if not shape.is_array():
        return shape
    return shape.with_layout(Layout.default(shape.rank) if shape.rank else None)


def common_factors(a, b) -> list[tuple[int, int]]:
    """XLA's CommonFactors: the boundaries (i, j) where prod(a[:i]) == prod(b[:j])."""
    a, b = list(a), list(b)
    out = [(0, 0)]
    i = j = 0
    pa = pb = 1
    while i < len(a) or j < len(b):
        if pa <= pb and i < len(a):
            pa *= a[i]
            i += 1
        elif j < len(b):
            pb *= b[j]
            j += 1
        else:
            pa *= a[i]
            i += 1
        if pa == pb:
            # absorb trailing size-1 dims into the same boundary group
            out.append((i, j))
    if out[-1] != (len(a), len(b)):
        out.append((len(a), len(b)))
    return out
