"""dot -> cblas ``?gemm`` calls from compiled code (numpy's bundled OpenBLAS).

``gemm_plan(dot)`` decides whether a dot maps onto (a loop over batch of) one row- or
column-major GEMM without packing: f32/f64, at most one non-degenerate free and one
contracting dimension per side, batch dimensions outermost in every physical layout.
The call binds ``hlo_cblas_sgemm`` / ``hlo_cblas_dgemm`` by name when the object is
loaded (no addresses in cached objects): numpy's ILP64 OpenBLAS exports
``scipy_cblas_?gemm64_`` (int64 sizes, int32 enums); scipy's when numpy's is absent.
"""
from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass

ROW_MAJOR, COL_MAJOR, NO_TRANS, TRANS = 101, 102, 111, 112


@dataclass
class Gemm:
    dtype: str
    batch: int
    m: int
    n: int
    k: int
    order: int
    trans_a: int
    trans_b: int
    lda: int
    ldb: int
    ldc: int


def _nontrivial(shape, dims):
    return [d for d in dims if shape.dims[d] != 1]


def _phys(shape):
    """Non-degenerate dims, major to minor."""
    return [d for d in reversed(shape.effective_layout().minor_to_major)
            if shape.dims[d] != 1]


def _size(shape, dims):
    n = 1
    for d in dims:
        n *= shape.dims[d]
    return n


def gemm_plan(dot) -> Gemm | None:
    et = dot.shape.element_type
    if et not in ("f32", "f64"):
        return None
    lhs, rhs = dot.operands
    if lhs.shape.element_type != et or rhs.shape.element_type != et:
        return None
    lb = list(dot.attr("lhs_batch_dims") or ())
    rb = list(dot.attr("rhs_batch_dims") or ())
    lc = list(dot.attr("lhs_contracting_dims") or ())
    rc = list(dot.attr("rhs_contracting_dims") or ())
    if dot.attrs.get("algorithm") or len(dot.operands) != 2:
        return None
    lf = [d for d in range(lhs.shape.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.shape.rank) if d not in rb and d not in rc]
    out = dot.shape
    ob = list(range(len(lb)))
    of_l = list(range(len(lb), len(lb) + len(lf)))
    of_r = list(range(len(lb) + len(lf), out.rank))
    # degenerate-free view
    lfn, rfn = _nontrivial(lhs.shape, lf), _nontrivial(rhs.shape, rf)
    lcn, rcn = _nontrivial(lhs.shape, lc), _nontrivial(rhs.shape, rc)
    if len(lfn) > 1 or len(rfn) > 1 or len(lcn) > 1 or len(rcn) > 1:
        return None
    batch = _size(lhs.shape, lb)
    # batch dims (non-degenerate) must be outermost, in order, everywhere
    for shape, bd in ((lhs.shape, lb), (rhs.shape, rb), (out, ob)):
        bn = _nontrivial(shape, bd)
        if _phys(shape)[:len(bn)] != bn:
            return None
    m, n, k = _size(lhs.shape, lf), _size(rhs.shape, rf), _size(lhs.shape, lc)

    def row_major(shape, bd, minor_group):
        """True when the two non-batch, non-degenerate dims are stored with the
        ``minor_group`` dim minor (or when at most one is left: layout is moot)."""
        rest = [d for d in _phys(shape) if d not in bd]
        return len(rest) < 2 or rest[-1] in minor_group
    a_row = row_major(lhs.shape, lb, lc)       # lhs [m, k], k minor
    b_row = row_major(rhs.shape, rb, rf)       # rhs [k, n], n minor
    c_row = row_major(out, ob, of_r)           # out [m, n], n minor
    if c_row:
        order, ldc = ROW_MAJOR, max(n, 1)
        ta, lda = (NO_TRANS, max(k, 1)) if a_row else (TRANS, max(m, 1))
        tb, ldb = (NO_TRANS, max(n, 1)) if b_row else (TRANS, max(k, 1))
    else:
        order, ldc = COL_MAJOR, max(m, 1)
        ta, lda = (TRANS, max(k, 1)) if a_row else (NO_TRANS, max(m, 1))
        tb, ldb = (TRANS, max(n, 1)) if b_row else (NO_TRANS, max(k, 1))
    return Gemm(et, batch, m, n, k, order, ta, tb, lda, ldb, ldc)


_LIB = None


def _openblas():
    global _LIB
    if _LIB is not None:
        return _LIB
    import numpy
    found = {}
    libs = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            for et, sym in (("f32", "scipy_cblas_sgemm64_"), ("f64", "scipy_cblas_dgemm64_")):
                found[et] = ctypes.cast(getattr(lib, sym), ctypes.c_void_p).value
            found["lib"] = lib
            break
        except (OSError, AttributeError):
            continue
    _LIB = found
    return found


def gemm_symbols() -> dict:
    """``{"hlo_cblas_sgemm": address, "hlo_cblas_dgemm": address}`` or {} when no
    usable BLAS was found (dots then run as host library calls)."""
    f = _openblas()
    if "f32" not in f:
        return {}
    return {"hlo_cblas_sgemm": f["f32"], "hlo_cblas_dgemm": f["f64"]}


def blas_name() -> str:
    f = _openblas()
    return "numpy's OpenBLAS (ILP64 cblas)" if f else "none"
