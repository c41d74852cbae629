"""The dimension handling all-gather-combiner and reduce-scatter-combiner share
(``FindMostFrequentGatherDim`` and the bitcasts that align a member's dimension)."""
from __future__ import annotations

from ._util import permute_dimensions, swap_perm


def most_frequent_dim(members) -> int:
    """The most frequent ``dimensions`` value (the smallest on ties) if every member's
    rank has it, else 0."""
    freq: dict[int, int] = {}
    for m in members:
        d = m.dimensions[0]
        freq[d] = freq.get(d, 0) + 1
    best = max(sorted(freq), key=lambda d: freq[d])
    return best if best < min(m.shape.rank for m in members) else 0


def aligned_operands(comp, members, dim: int):
    """(operands, output shapes, permutations): a member whose dimension is not ``dim``
    has its operand bitcast with the two dimensions swapped (a bitcast: the layout is
    permuted along), and its output shape permuted the same way."""
    operands, shapes, perms = [], [], []
    for m in members:
        op = m.operands[0]
        d = m.dimensions[0]
        if d == dim:
            operands.append(op)
            shapes.append(m.shape)
            perms.append(None)
            continue
        perm = swap_perm(op.shape.rank, dim, d)
        operands.append(comp.add("bitcast", permute_dimensions(perm, op.shape), [op],
                                 name="bitcast"))
        shapes.append(permute_dimensions(perm, m.shape))
        perms.append(perm)
    return operands, shapes, perms


def piece(comp, combined, i: int, shape, perm):
    """get-tuple-element i of the combined op, bitcast back when it was permuted."""
    gte = comp.add("get-tuple-element", shape, [combined], name="get-tuple-element",
                   attrs={"index": str(i)})
    if perm is None:
        return gte
    return comp.add("bitcast", permute_dimensions(perm, shape), [gte], name="bitcast")
