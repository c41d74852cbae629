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
    """A plan when ``dot`` is one GEMM per batch element over its operands' buffers as
    they are: every operand's non-degenerate dims, major to minor, are its batch dims
    (outermost, in order) then two contiguous groups, contracting and free (either
    order: the transpose flags take care of it); several contracting or free dims are
    fine when each group is contiguous and ordered consistently with the other operand
    and the output."""
    et = dot.shape.element_type
    if et not in ("f32", "f64") or len(dot.operands) != 2 or dot.attrs.get("algorithm"):
        return None
    lhs, rhs = dot.operands
    if lhs.shape.element_type != et or rhs.shape.element_type != et:
        return None
    lb = list(dot.attr("lhs_batch_dims") or ())
    rb = list(dot.attr("rhs_batch_dims") or ())
    lc = list(dot.attr("lhs_contracting_dims") or ())
    rc = list(dot.attr("rhs_contracting_dims") or ())
    L, R, O = lhs.shape, rhs.shape, dot.shape
    lf = [d for d in range(L.rank) if d not in lb and d not in lc]
    rf = [d for d in range(R.rank) if d not in rb and d not in rc]
    ob = list(range(len(lb)))
    o_lf = list(range(len(lb), len(lb) + len(lf)))        # output dims of lhs free dims
    o_rf = list(range(len(lb) + len(lf), O.rank))         # ... of rhs free dims
    # batch dims: outermost, same order everywhere (degenerate ones ignored)
    for shape, bd in ((L, lb), (R, rb), (O, ob)):
        bn = _nontrivial(shape, bd)
        if _phys(shape)[:len(bn)] != bn:
            return None
    l_rest = [d for d in _phys(L) if d not in lb]
    r_rest = [d for d in _phys(R) if d not in rb]
    o_rest = [d for d in _phys(O) if d not in ob]

    def split(rest, group_a):
        """rest == A + B or B + A with A the dims in group_a: ('AB'|'BA', A, B)."""
        a = [d for d in rest if d in group_a]
        b = [d for d in rest if d not in group_a]
        if rest == a + b:
            return "AB", a, b
        if rest == b + a:
            return "BA", a, b
        return None
    ls, rs, os_ = split(l_rest, lc), split(r_rest, rc), split(o_rest, o_lf)
    if ls is None or rs is None or os_ is None:
        return None
    l_order, l_c, l_f = ls
    r_order, r_c, r_f = rs
    o_order, o_l, o_r = os_
    # contracting dims pair up in the same physical order
    pair = dict(zip(lc, rc))
    if [pair[d] for d in l_c] != r_c:
        return None
    # free dims appear in the output in the operands' physical order
    lmap = dict(zip(lf, o_lf))
    rmap = dict(zip(rf, o_rf))
    if [lmap[d] for d in l_f] != o_l or [rmap[d] for d in r_f] != o_r:
        return None
    m, n, k = _size(L, lf), _size(R, rf), _size(L, lc)
    batch = _size(L, lb)
    a_row = not l_c or not l_f or l_order == "BA"     # lhs [m, k] with k minor
    b_row = not r_c or not r_f or r_order == "AB"     # rhs [k, n] with n minor
    c_row = not o_l or not o_r or o_order == "AB"     # out [m, n] with n minor
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


# A module whose largest GEMM has fewer flops runs its GEMMs on one thread: OpenBLAS's
# thread hand-off costs more than it saves on small products, and on a loaded machine
# (more runnable threads than cores) a 2-thread 128x128 GEMM was measured 30x slower.
MULTI_THREAD_MIN_FLOPS = 1 << 28


def flops(g: Gemm) -> int:
    return 2 * g.batch * g.m * g.n * g.k


class BlasThreads:
    """Sets OpenBLAS's thread count around a run (and restores it)."""

    def __init__(self, want: int):
        f = _openblas()
        lib = f.get("lib")
        self.set = self.get = None
        if lib is not None:
            try:
                self.set = lib.scipy_openblas_set_num_threads64_
                self.set.argtypes = [ctypes.c_int]
                self.get = lib.scipy_openblas_get_num_threads64_
                self.get.restype = ctypes.c_int
            except AttributeError:
                self.set = self.get = None
        self.want = want

    def __enter__(self):
        self.old = None
        if self.set is not None and self.want:
            self.old = self.get()
            if self.old != self.want:
                self.set(self.want)
        return self

    def __exit__(self, *exc):
        if self.old is not None and self.old != self.want:
            self.set(self.old)


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
