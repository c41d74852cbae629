"""cholesky and triangular-solve, batched over leading dims, with XLA's options.

cholesky(a), ``lower=true|false`` (default false): reads only that triangle of ``a`` and
returns L with ``a = L @ L^H`` (lower) or U with ``a = U^H @ U`` (upper); the other
triangle of the result is zero (XLA leaves it implementation-defined).  A batch element
whose factorization fails (a pivot that is not > 0, NaN included: the matrix is not
positive definite) comes out all NaN, as both XLA paths give it: the CholeskyExpander's
select on its error flag and the GPU's select on cuSOLVER's ``info``.  Never an exception.

triangular-solve(a, b), ``left_side``, ``lower``, ``unit_diagonal`` (default false) and
``transpose_a=NO_TRANSPOSE|TRANSPOSE|ADJOINT``: solves ``op(a) @ x = b`` (left side) or
``x @ op(a) = b`` (right side) reading only the named triangle of ``a`` (its diagonal is
taken as ones when ``unit_diagonal``).  Done by forward/back substitution, vectorised
over the batch and right-hand sides, so a singular ``a`` gives inf/NaN like XLA.

The functions here also run the library calls the GPU passes emit for these ops
(``ops_solver.py``), so a rewritten module computes exactly what the original did.
"""
from __future__ import annotations

import numpy as np

from .heavy_common import as_result, is_float_dtype, unsupported
from .registry import register


def _flag(inst, name: str) -> bool:
    text = inst.attrs.get(name)
    if text is None:
        return False
    text = text.strip().lower()
    if text not in ("true", "false"):
        raise unsupported(inst, f"{name}={text}: expected true or false")
    return text == "true"


def work_dtype(inst, dtype: np.dtype) -> np.dtype:
    """The dtype the factorization / solve runs in (f32 for narrower floats)."""
    if np.issubdtype(dtype, np.complexfloating) or dtype == np.float64:
        return dtype
    if is_float_dtype(dtype):
        return np.dtype(np.float32)
    raise unsupported(inst, f"{inst.opcode} on {dtype}")


def _ctranspose(m: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(m, -1, -2))


def cholesky_lower(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factor from the lower triangle of ``a`` ([..., n, n]) and potrf's
    ``info`` per batch element: 0, or the 1-based order of the first leading minor that
    is not positive definite (a pivot not > 0, or NaN).  Entries at and after a failed
    pivot are whatever the recurrence gives (inf/NaN); callers NaN-fill on ``info``."""
    n = a.shape[-1]
    a = np.tril(a)
    out = np.zeros_like(a)
    info = np.zeros(a.shape[:-2], dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(n):
            row = out[..., j, :j]
            d = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            pivot = d.real if np.issubdtype(a.dtype, np.complexfloating) else d
            failed = ~(pivot > 0)
            info = np.where((info == 0) & failed, np.int32(j + 1), info)
            diag = np.sqrt(pivot).astype(a.dtype)
            out[..., j, j] = diag
            if j + 1 < n:
                below = a[..., j + 1:, j] - np.einsum("...ik,...k->...i", out[..., j + 1:, :j],
                                                     np.conj(row))
                out[..., j + 1:, j] = below / diag[..., None]
    return out, info


def cholesky_factor(a: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """(factor, info): the ``lower`` or upper factor with a zero other triangle."""
    if lower:
        return cholesky_lower(a)
    out, info = cholesky_lower(_ctranspose(a))
    return _ctranspose(out), info


def nan_fill_failed(factor: np.ndarray, info: np.ndarray) -> np.ndarray:
    """``factor`` with every batch element whose ``info`` is non-zero replaced by NaNs."""
    bad = (info != 0)[..., None, None]
    return np.where(bad, np.asarray(np.nan, dtype=factor.dtype), factor)


def check_square(inst, a: np.ndarray) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise unsupported(inst, f"cholesky of shape {list(a.shape)}")


@register("cholesky")
def cholesky(inst, args, ctx):
    a = np.asarray(args[0])
    check_square(inst, a)
    a = a.astype(work_dtype(inst, a.dtype))
    factor, info = cholesky_factor(a, _flag(inst, "lower"))
    return as_result(nan_fill_failed(factor, info), inst.shape)


def _solve_lower_left(a: np.ndarray, b: np.ndarray, unit: bool) -> np.ndarray:
    """x with tril(a) @ x = b by forward substitution; a [..., m, m], b [..., m, n]."""
    m = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                 dtype=np.result_type(a, b))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i in range(m):
            acc = b[..., i, :] - np.einsum("...k,...kn->...n", a[..., i, :i], x[..., :i, :])
            x[..., i, :] = acc if unit else acc / a[..., i, i][..., None]
    return x


TRANSPOSES = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def solve_triangular(a: np.ndarray, b: np.ndarray, left: bool, lower: bool, unit: bool,
                     transpose: str) -> np.ndarray:
    """``op(a) @ x = b`` (left) or ``x @ op(a) = b``; ``transpose`` one of TRANSPOSES."""
    tri = np.tril(a) if lower else np.triu(a)
    if transpose == "TRANSPOSE":
        op_a = np.swapaxes(tri, -1, -2)
    elif transpose == "ADJOINT":
        op_a = _ctranspose(tri)
    else:
        op_a = tri
    op_lower = lower == (transpose == "NO_TRANSPOSE")
    if not left:  # x @ op_a = b  <=>  op_a^T @ x^T = b^T
        op_a = np.swapaxes(op_a, -1, -2)
        b = np.swapaxes(b, -1, -2)
        op_lower = not op_lower
    if op_lower:
        x = _solve_lower_left(op_a, b, unit)
    else:  # reverse rows and columns: an upper system becomes a lower one
        x = _solve_lower_left(op_a[..., ::-1, ::-1], b[..., ::-1, :], unit)[..., ::-1, :]
    if not left:
        x = np.swapaxes(x, -1, -2)
    return x


def check_solve_operands(inst, a: np.ndarray, b: np.ndarray) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or b.ndim != a.ndim:
        raise unsupported(inst, f"triangular-solve of {list(a.shape)} and {list(b.shape)}")


@register("triangular-solve")
def triangular_solve(inst, args, ctx):
    a, b = np.asarray(args[0]), np.asarray(args[1])
    check_solve_operands(inst, a, b)
    work = work_dtype(inst, a.dtype)
    transpose = inst.attrs.get("transpose_a", "NO_TRANSPOSE").strip().upper()
    if transpose not in TRANSPOSES:
        raise unsupported(inst, f"transpose_a={transpose}")
    x = solve_triangular(a.astype(work), b.astype(work), _flag(inst, "left_side"),
                         _flag(inst, "lower"), _flag(inst, "unit_diagonal"), transpose)
    return as_result(x, inst.shape)
