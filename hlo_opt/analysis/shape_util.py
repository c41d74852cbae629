"""Pure shape arithmetic shared by passes (XLA's ShapeUtil reshape helpers, CommonFactors)."""
from __future__ import annotations

import math


def common_factors(a, b) -> list[tuple[int, int]]:
    """XLA's CommonFactors: boundaries (i, j) where prod(a[:i]) == prod(b[:j])."""
    a, b = list(a), list(b)
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    if math.prod(a) == 0 or math.prod(b) == 0:
        return [(0, 0), (len(a), len(b))]
    i = j = 0
    pi = pj = -1
    pa = pb = 1
    bounds = []
    while True:
        if pa == pb and (i > pi or j > pj):
            pi, pj = i, j
            bounds.append((i, j))
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            break
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pb == pa and b[j] <= a[i])))
        if next_a:
            pa *= a[i]
            i += 1
        if next_b:
            pb *= b[j]
            j += 1
    return bounds


def dims_unmodified_by_reshape(src, dst) -> list[tuple[int, int]]:
    """(input_dim, output_dim) pairs that a reshape src->dst leaves alone."""
    cf = common_factors(src, dst)
    out = []
    for k in range(len(cf) - 1):
        (i0, j0), (i1, j1) = cf[k], cf[k + 1]
        if i1 - i0 == 1 and j1 - j0 == 1:
            out.append((i0, j0))
    return out


def inserted_or_deleted_1_dims(src, dst):
    """(deleted input dims, inserted output dims) when reshape src->dst only drops/adds
    size-1 dimensions (XLA's InsertedOrDeleted1SizedDimensions), else None."""
    src, dst = list(src), list(dst)
    if math.prod(src) != math.prod(dst):
        return None
    unmod = dims_unmodified_by_reshape(src, dst) + [(len(src), len(dst))]
    deleted, inserted = [], []
    prior = (-1, -1)
    for cur in unmod:
        for i in range(prior[0] + 1, cur[0]):
            if src[i] != 1:
                return None
            deleted.append(i)
        for j in range(prior[1] + 1, cur[1]):
            if dst[j] != 1:
                return None
            inserted.append(j)
        prior = cur
    return deleted, inserted


def reshape_leaves_dims_unmodified(src, dst, input_dims):
    """Output dim of each input dim when the reshape leaves them unmodified, else None."""
    m = dict(dims_unmodified_by_reshape(src, dst))
    out = []
    for d in input_dims:
        if d not in m:
            return None
        out.append(m[d])
    return out


def drop_degenerate(dims) -> list[int]:
    return [d for d in dims if d != 1]


def delete_dims(dims, to_delete) -> list[int]:
    s = set(to_delete)
    return [d for i, d in enumerate(dims) if i not in s]
