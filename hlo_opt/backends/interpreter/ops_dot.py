"""dot (general dot with batch and contracting dimensions) and ragged-dot.

Operands are moved to ``[batch, free, contracting]`` / ``[batch, contracting, free]`` and
multiplied with ``np.matmul`` (BLAS for f32/f64/complex).  The accumulation type is
f32 for floats narrower than f32 (like XLA's CPU backend), f64 for f64, int64 for
integers (then wrapped to the result type, which equals wrapping accumulation).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import UnsupportedError
from ...ir.types import is_complex, is_float
from .registry import register_fast
from .values import F32, F64


def _accumulation_dtype(lhs: str, rhs: str, out: str) -> np.dtype:
    types = (lhs, rhs, out)
    if any(is_complex(t) for t in types):
        return np.dtype(np.complex128) if "c128" in types or "f64" in types \
            else np.dtype(np.complex64)
    if any(is_float(t) for t in types):
        return F64 if "f64" in types else F32
    if "pred" in types and all(t == "pred" for t in types):
        return np.dtype(np.int64)
    return np.dtype(np.uint64) if out.startswith("u") and lhs.startswith("u") \
        and rhs.startswith("u") else np.dtype(np.int64)


def dot_general(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, acc, out_dt):
    """XLA DotGeneral on numpy arrays; result dims = batch, lhs free, rhs free."""
    lrank, rrank = np.ndim(lhs), np.ndim(rhs)
    lhs_free = [d for d in range(lrank) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rrank) if d not in rhs_batch and d not in rhs_contract]
    ls, rs = np.shape(lhs), np.shape(rhs)
    batch_dims = [ls[d] for d in lhs_batch]
    b = math.prod(batch_dims)
    m = math.prod(ls[d] for d in lhs_free)
    k = math.prod(ls[d] for d in lhs_contract)
    n = math.prod(rs[d] for d in rhs_free)
    a = np.transpose(lhs, list(lhs_batch) + lhs_free + list(lhs_contract))
    c = np.transpose(rhs, list(rhs_batch) + list(rhs_contract) + rhs_free)
    if lhs_batch:
        a = np.asarray(a, dtype=acc).reshape(b, m, k)
        c = np.asarray(c, dtype=acc).reshape(b, k, n)
    else:  # 2-D: transposed views go to BLAS without a copy
        a = np.asarray(a, dtype=acc).reshape(m, k)
        c = np.asarray(c, dtype=acc).reshape(k, n)
    if acc.kind in "iu" and acc.itemsize == 8:
        with np.errstate(over="ignore"):
            r = np.matmul(a, c)
    else:
        r = np.matmul(a, c)
    out_dims = batch_dims + [ls[d] for d in lhs_free] + [rs[d] for d in rhs_free]
    r = r.reshape(out_dims)
    if r.dtype != out_dt:
        if out_dt.kind == "b":
            r = r != 0
        elif acc.kind in "iu" and out_dt.kind in "iu":
            r = r.astype(out_dt)  # wraps like the XLA accumulation
        else:
            r = r.astype(out_dt)
    return r


@register_fast("dot")
def _make_dot(inst):
    if "sparsity" in inst.attrs:
        raise UnsupportedError("sparse dot (sparsity=) is not supported")
    lhs_t = inst.operands[0].shape.element_type
    rhs_t = inst.operands[1].shape.element_type
    out_t = inst.shape.element_type
    lb = tuple(inst.attr("lhs_batch_dims", ()))
    rb = tuple(inst.attr("rhs_batch_dims", ()))
    lc = tuple(inst.attr("lhs_contracting_dims", ()))
    rc = tuple(inst.attr("rhs_contracting_dims", ()))
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise UnsupportedError("dot has mismatched batch or contracting dimension lists")
    acc = _accumulation_dtype(lhs_t, rhs_t, out_t)
    out_dt = inst.shape.dtype
    return lambda x, y: dot_general(x, y, lb, rb, lc, rc, acc, out_dt)


@register_fast("ragged-dot")
def _make_ragged_dot(inst):
    """lhs [.., m, k], rhs [g, .., k, n], group_sizes [g]: rows of lhs in group i are
    multiplied by rhs[i] (the ragged dimension is an lhs non-contracting dimension)."""
    lhs_t = inst.operands[0].shape.element_type
    rhs_t = inst.operands[1].shape.element_type
    out_t = inst.shape.element_type
    lb = tuple(inst.attr("lhs_batch_dims", ()))
    rb = tuple(inst.attr("rhs_batch_dims", ()))
    lc = tuple(inst.attr("lhs_contracting_dims", ()))
    rc = tuple(inst.attr("rhs_contracting_dims", ()))
    ragged = tuple(inst.attr("lhs_ragged_dims", ()))
    group = tuple(inst.attr("rhs_group_dims", ()))
    if len(ragged) != 1 or len(group) != 1 or ragged[0] in lc or ragged[0] in lb:
        raise UnsupportedError("only ragged-dot with a ragged lhs non-contracting dimension "
                               "and one rhs group dimension is supported")
    acc = _accumulation_dtype(lhs_t, rhs_t, out_t)
    out_dt = inst.shape.dtype
    rd, gd = ragged[0], group[0]
    rb_adj = tuple(d - (d > gd) for d in rb)
    rc_adj = tuple(d - (d > gd) for d in rc)
    out_dims = inst.shape.dims

    def ragged_dot(x, y, sizes):
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
        out = np.zeros(out_dims, dtype=out_dt)
        # position of the ragged dim in the result: batch dims, then lhs free dims in order
        lhs_free = [d for d in range(np.ndim(x)) if d not in lb and d not in lc]
        out_axis = len(lb) + lhs_free.index(rd)
        start = 0
        for g, size in enumerate(sizes):
            stop = min(start + max(size, 0), np.shape(x)[rd])
            if stop > start:
                part = np.take(x, np.arange(start, stop), axis=rd)
                r = dot_general(part, np.take(y, g, axis=gd), lb, rb_adj, lc, rc_adj, acc,
                                out_dt)
                index = [slice(None)] * len(out_dims)
                index[out_axis] = slice(start, stop)
                out[tuple(index)] = r
            start = stop
        return out
    return ragged_dot
