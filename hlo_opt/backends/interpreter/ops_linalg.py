"""cholesky and triangular-solve, batched over leading dims, with XLA's options.

cholesky(a), ``lower=true|false`` (default false): reads only that triangle of ``a`` and
returns L with ``a = L @ L^H`` (lower) or U with ``a = U^H @ U`` (upper); the other
triangle of the result is zero (XLA leaves it implementation-defined).  A matrix that is
not positive definite gives NaNs (what the XLA expansion produces), never an exception.

triangular-solve(a, b), ``left_side``, ``lower``, ``unit_diagonal`` (default false) and
``transpose_a=NO_TRANSPOSE|TRANSPOSE|ADJOINT``: solves ``op(a) @ x = b`` (left side) or
``x @ op(a) = b`` (right side) reading only the named triangle of ``a`` (its diagonal is
taken as ones when ``unit_diagonal``).  Done by forward/back substitution, vectorised
over the batch and right-hand sides, so a singular ``a`` gives inf/NaN like XLA.
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


def _work_dtype(inst, dtype: np.dtype) -> np.dtype:
    if np.issubdtype(dtype, np.complexfloating) or dtype == np.float64:
        return dtype
    if is_float_dtype(dtype):
        return np.dtype(np.float32)
    raise unsupported(inst, f"{inst.opcode} on {dtype}")


def _ctranspose(m: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(m, -1, -2))


def cholesky_lower(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor from the lower triangle of ``a`` ([..., n, n])."""
    n = a.shape[-1]
    a = np.tril(a)
    out = np.zeros_like(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(n):
            row = out[..., j, :j]
            d = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            if np.issubdtype(a.dtype, np.complexfloating):
                diag = np.sqrt(d.real).astype(a.dtype)
            else:
                diag = np.sqrt(d)
            out[..., j, j] = diag
            if j + 1 < n:
                below = a[..., j + 1:, j] - np.einsum("...ik,...k->...i", out[..., j + 1:, :j],
                                                     np.conj(row))
                out[..., j + 1:, j] = below / diag[..., None]
    return out


@register("cholesky")
def cholesky(inst, args, ctx):
    a = np.asarray(args[0])
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise unsupported(inst, f"cholesky of shape {list(a.shape)}")
    work = _work_dtype(inst, a.dtype)
    a = a.astype(work)
    if _flag(inst, "lower"):
        out = cholesky_lower(a)
    else:
        out = _ctranspose(cholesky_lower(_ctranspose(a)))
    return as_result(out, inst.shape)


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


@register("triangular-solve")
def triangular_solve(inst, args, ctx):
    a, b = np.asarray(args[0]), np.asarray(args[1])
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or b.ndim != a.ndim:
        raise unsupported(inst, f"triangular-solve of {list(a.shape)} and {list(b.shape)}")
    work = _work_dtype(inst, a.dtype)
    a, b = a.astype(work), b.astype(work)
    left = _flag(inst, "left_side")
    lower = _flag(inst, "lower")
    unit = _flag(inst, "unit_diagonal")
    transpose = inst.attrs.get("transpose_a", "NO_TRANSPOSE").strip().upper()
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise unsupported(inst, f"transpose_a={transpose}")
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
    return as_result(x, inst.shape)
