"""The library calls the GPU passes emit for cholesky and triangular-solve, run with the
semantics of the instruction each replaced (registered in ``ops_custom_call.TARGETS``).

* ``__cusolver$cholesky`` (gpusolver-rewriter): ``custom-call(a)`` with
  ``backend_config={"lower":bool}`` returns ``(factor, workspace, info)``: the factor as
  the ``cholesky`` handler computes it before its NaN fill (the other triangle zero),
  zero workspace, and cuSOLVER potrf's ``info`` (s32 per batch element: 0, or the 1-based
  order of the first leading minor that is not positive definite).  The pass selects NaN
  where ``info != 0``, which is exactly what ``cholesky`` returns.
* ``__cublas$triangularSolve`` (triangular-solve-rewriter): ``custom-call(a, b)`` with
  ``backend_config`` TriangularSolveOptions (``left_side``, ``lower``, ``unit_diagonal``,
  ``transpose_a``) returns ``(x, s8[temp])``: x as ``triangular-solve`` computes it
  (``TRANSPOSE_INVALID``, an unset proto field, solves like ``NO_TRANSPOSE`` as the
  instruction without the attribute does), zero temp bytes.
"""
from __future__ import annotations

import numpy as np

from .heavy_common import as_result, unsupported
from .ops_custom_call import backend_config, target
from .ops_linalg import (TRANSPOSES, check_solve_operands, check_square, cholesky_factor,
                         solve_triangular, work_dtype)


def _bool(inst, cfg: dict, key: str) -> bool:
    value = cfg.get(key, False)
    if not isinstance(value, bool):
        raise unsupported(inst, f"backend_config {key}={value!r}: expected true or false")
    return value


def _zeros(shapes):
    return tuple(np.zeros(s.dims, dtype=s.dtype) for s in shapes)


@target("__cusolver$cholesky")
def cusolver_cholesky(inst, args, ctx):
    if len(args) != 1 or not inst.shape.is_tuple() or len(inst.shape.tuple_shapes) != 3:
        raise unsupported(inst, "__cusolver$cholesky takes one operand and returns "
                                "(factor, workspace, info)")
    a = np.asarray(args[0])
    check_square(inst, a)
    factor_shape, ws_shape, info_shape = inst.shape.tuple_shapes
    a = a.astype(work_dtype(inst, a.dtype))
    factor, info = cholesky_factor(a, _bool(inst, backend_config(inst), "lower"))
    return (as_result(factor, factor_shape),) + _zeros([ws_shape]) + \
        (as_result(info, info_shape),)


@target("__cublas$triangularSolve")
def cublas_triangular_solve(inst, args, ctx):
    if len(args) != 2 or not inst.shape.is_tuple():
        raise unsupported(inst, "__cublas$triangularSolve takes (a, b) and returns "
                                "(x, temp)")
    a, b = np.asarray(args[0]), np.asarray(args[1])
    check_solve_operands(inst, a, b)
    cfg = backend_config(inst)
    transpose = str(cfg.get("transpose_a", "TRANSPOSE_INVALID")).upper()
    if transpose == "TRANSPOSE_INVALID":
        transpose = "NO_TRANSPOSE"
    if transpose not in TRANSPOSES:
        raise unsupported(inst, f"transpose_a={transpose}")
    work = work_dtype(inst, a.dtype)
    x = solve_triangular(a.astype(work), b.astype(work), _bool(inst, cfg, "left_side"),
                         _bool(inst, cfg, "lower"), _bool(inst, cfg, "unit_diagonal"),
                         transpose)
    shapes = inst.shape.tuple_shapes
    return (as_result(x, shapes[0]),) + _zeros(shapes[1:])
