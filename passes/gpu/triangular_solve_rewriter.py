"""``triangular-solve-rewriter``: XLA's TriangularSolveRewriter
(triangular_solve_rewriter.cc).

Every ``triangular-solve`` outside fused computations becomes a cuBLAS call whose result
carries the temporary buffer the batched ``trsmBatched`` needs (two pointer arrays)::

    %triangular-solve = (T[..,m,n], s8[temp]) custom-call(%a, %b),
        custom_call_target="__cublas$triangularSolve",
        backend_config={"left_side":..,"lower":..,"unit_diagonal":..,"transpose_a":".."}
    %get-tuple-element = T[..,m,n] get-tuple-element(%triangular-solve), index=0

``temp`` is 0 bytes for one matrix (plain ``trsm`` needs none), else
``2 * sizeof(void*) * batch``.  ``backend_config`` is the instruction's
TriangularSolveOptions as XLA prints a proto (field names kept, every field written; an
absent ``transpose_a`` is the proto default ``TRANSPOSE_INVALID``).  Metadata and
frontend attributes move to the call.  The interpreter runs the call as the
``triangular-solve`` it replaced (``hlo_opt/backends/interpreter/ops_solver.py``).
"""
from __future__ import annotations

import json
import math

from hlo_opt.ir.shape import Shape


CUBLAS_TRIANGULAR_SOLVE = "__cublas$triangularSolve"


def _flag(inst, name: str) -> bool:
    return inst.attrs.get(name, "false").strip().lower() == "true"


def solve_options(inst) -> dict:
    """TriangularSolveOptions of a ``triangular-solve``, in proto field order."""
    return {"left_side": _flag(inst, "left_side"), "lower": _flag(inst, "lower"),
            "unit_diagonal": _flag(inst, "unit_diagonal"),
            "transpose_a": inst.attrs.get("transpose_a", "TRANSPOSE_INVALID").strip().upper()}


def temp_bytes(b_shape: Shape) -> int:
    batch = math.prod(b_shape.dims[:-2])
    return 0 if batch == 1 else 2 * 8 * batch


def rewrite_triangular_solve(comp, inst):
    """Replace one ``triangular-solve`` by the cuBLAS call; returns the new GTE."""
    shape = Shape.tuple([inst.shape, Shape.array("s8", (temp_bytes(inst.operands[1].shape),))])
    attrs = {"custom_call_target": f'"{CUBLAS_TRIANGULAR_SOLVE}"'}
    for key in ("frontend_attributes", "metadata"):
        if key in inst.attrs:
            attrs[key] = inst.attrs[key]
    attrs["backend_config"] = json.dumps(solve_options(inst), separators=(",", ":"))
    call = comp.add("custom-call", shape, list(inst.operands), name="triangular-solve",
                    attrs=attrs)
    gte = comp.add("get-tuple-element", inst.shape, [call], name="get-tuple-element",
                   attrs={"index": "0"})
    comp.replace_instruction(inst, gte)
    return gte


class TriangularSolveRewriter:
    name = "triangular-solve-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in module.nonfusion_computations():
            for inst in [i for i in comp.instructions if i.opcode == "triangular-solve"]:
                rewrite_triangular_solve(comp, inst)
                changed = True
        return changed


__all__ = ["CUBLAS_TRIANGULAR_SOLVE", "TriangularSolveRewriter", "rewrite_triangular_solve",
           "solve_options", "temp_bytes"]
