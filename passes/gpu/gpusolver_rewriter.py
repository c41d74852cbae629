"""``gpusolver-rewriter``: XLA's GpusolverRewriter (gpusolver_rewriter.cc).

Every ``cholesky`` of a type cuSOLVER factors (f32, f64, c64, c128) outside fused
computations becomes XLA's form::

    %call = (T[..,n,n]{fortran}, T[workspace]{0}, s32[batch]) custom-call(%a),
        custom_call_target="__cusolver$cholesky",
        operand_layout_constraints={T[..,n,n]{fortran}}, backend_config={"lower":true}
    %out  = get-tuple-element(%call), index=0
    %info = get-tuple-element(%call), index=2
    %ok   = compare(%info, broadcast(s32[] constant(0))), direction=EQ
    %res  = select(broadcast(%ok), %out, broadcast(T[] constant(nan)))

``info`` is cuSOLVER's potrf status per batch element (0: success); a failed
factorization comes out as NaNs for that batch element, as XLA does.  The Fortran layout
swaps the two minor dimensions of the default layout (cuSOLVER is column-major).

Deviations, on purpose:

* The workspace length: XLA asks cuSOLVER (``potrf_bufferSize``) and takes the larger of
  that and the batched call's pointer array, ``ceil(batch * 8 / sizeof(T))`` elements.
  Without the library hlo-opt can only give the second, a lower bound of what XLA sizes.
* The ``select`` (and its NaN broadcast) keep the layout the ``cholesky`` had (XLA gives
  them the Fortran layout and lets layout assignment choose; hlo-opt's layout assignment
  keeps layouts, so the replaced value keeps its own).

Other element types are left as they are (XLA fails on them: cuSOLVER has no f16/bf16
potrf).  The interpreter runs the custom-call with the semantics of the ``cholesky`` it
replaced (``hlo_opt/backends/interpreter/ops_solver.py``).
"""
from __future__ import annotations

import json
import math

from hlo_opt.ir.shape import Layout, Shape


CUSOLVER_CHOLESKY = "__cusolver$cholesky"
SOLVER_TYPES = frozenset({"f32", "f64", "c64", "c128"})
_BYTES = {"f32": 4, "f64": 8, "c64": 8, "c128": 16}


def fortran_layout(rank: int) -> Layout:
    """SetFortranLayout: the default layout with the two most minor dimensions swapped."""
    m2m = list(range(rank - 1, -1, -1))
    m2m[0], m2m[1] = m2m[1], m2m[0]
    return Layout(tuple(m2m))


def potrf_workspace_elements(element_type: str, n: int, batch: int) -> int:
    """The workspace elements hlo-opt gives a potrf call: the batched call's pointer
    array, ``ceil(batch * sizeof(void*) / sizeof(T))`` (cuSOLVER's own query is not
    available without the library; XLA takes the larger of the two)."""
    del n
    return -(-batch * 8 // _BYTES[element_type])


def _flag(inst, name: str) -> bool:
    return inst.attrs.get(name, "false").strip().lower() == "true"


def _nan_literal(element_type: str) -> str:
    return "(nan, 0)" if element_type.startswith("c") else "nan"


def rewrite_cholesky(comp, chol):
    """Replace one ``cholesky`` by XLA's custom-call form; returns the new select."""
    a = chol.operands[0]
    dims = a.shape.dims
    et = a.shape.element_type
    batch_dims = dims[:-2]
    batch = math.prod(batch_dims)
    a_shape = Shape.array(et, dims, fortran_layout(len(dims)))
    info_shape = Shape.array("s32", batch_dims)
    ws = potrf_workspace_elements(et, dims[-1], batch)
    call_shape = Shape.tuple([a_shape, Shape.array(et, (ws,)), info_shape])
    attrs = {"custom_call_target": f'"{CUSOLVER_CHOLESKY}"',
             "operand_layout_constraints": "{" + a_shape.to_text() + "}"}
    if "metadata" in chol.attrs:
        attrs["metadata"] = chol.attrs["metadata"]
    attrs["backend_config"] = json.dumps({"lower": _flag(chol, "lower")},
                                         separators=(",", ":"))
    call = comp.add("custom-call", call_shape, [a], name="custom-call", attrs=attrs)
    out = comp.add("get-tuple-element", a_shape, [call], name="get-tuple-element",
                   attrs={"index": "0"})
    info = comp.add("get-tuple-element", info_shape, [call], name="get-tuple-element",
                    attrs={"index": "2"})
    zero = comp.add("constant", Shape.array("s32", ()), name="constant", payload="0")
    zeros = comp.add("broadcast", info_shape, [zero], name="broadcast",
                     attrs={"dimensions": "{}"})
    ok = comp.add("compare", Shape.array("pred", batch_dims), [info, zeros], name="compare",
                  attrs={"direction": "EQ"})
    ok = comp.add("broadcast", Shape.array("pred", dims), [ok], name="broadcast",
                  attrs={"dimensions": "{" + ",".join(map(str, range(len(batch_dims)))) + "}"})
    nan = comp.add("constant", Shape.array(et, ()), name="constant", payload=_nan_literal(et))
    nans = comp.add("broadcast", chol.shape, [nan], name="broadcast",
                    attrs={"dimensions": "{}"})
    select = comp.add("select", chol.shape, [ok, out, nans], name="select")
    comp.replace_instruction(chol, select)
    return select


def rewritable(inst) -> bool:
    return (inst.opcode == "cholesky" and inst.shape.is_array()
            and inst.operands[0].shape.element_type in SOLVER_TYPES
            and inst.operands[0].shape.rank >= 2)


class GpusolverRewriter:
    name = "gpusolver-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in module.nonfusion_computations():
            for inst in [i for i in comp.instructions if rewritable(i)]:
                rewrite_cholesky(comp, inst)
                changed = True
        return changed


__all__ = ["CUSOLVER_CHOLESKY", "GpusolverRewriter", "fortran_layout",
           "potrf_workspace_elements", "rewrite_cholesky"]
