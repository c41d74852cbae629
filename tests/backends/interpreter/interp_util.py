"""Helpers for the core interpreter tests: run HLO text, build one-op modules."""
from __future__ import annotations

import numpy as np

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.ir.types import element_type_of


def run(text: str, *args):
    """Parse ``text`` and run it on ``args`` (shapes checked after every instruction)."""
    return Interpreter(parse_hlo(text), always_check=True).run_value(list(args))


def shape_text(et: str, dims) -> str:
    return f"{et}[{','.join(map(str, dims))}]"


def et_of(a) -> str:
    return element_type_of(np.asarray(a).dtype)


def unary(op: str, x, out_et: str | None = None, attrs: str = "", et: str | None = None):
    x = np.asarray(x)
    et = et or et_of(x)
    out = shape_text(out_et or et, x.shape)
    text = f"""HloModule t
ENTRY e {{
  p = {shape_text(et, x.shape)} parameter(0)
  ROOT r = {out} {op}(p){attrs}
}}"""
    return run(text, x)


def binary(op: str, x, y, out_et: str | None = None, attrs: str = "",
           et: str | None = None):
    x, y = np.asarray(x), np.asarray(y)
    et = et or et_of(x)
    out = shape_text(out_et or et, x.shape)
    text = f"""HloModule t
ENTRY e {{
  p = {shape_text(et, x.shape)} parameter(0)
  q = {shape_text(et_of(y) if et_of(y) != et_of(x) else et, y.shape)} parameter(1)
  ROOT r = {out} {op}(p, q){attrs}
}}"""
    return run(text, x, y)


def one_op(result: str, op: str, operands: list, attrs: str = ""):
    """``ROOT r = result op(p0, p1, ...)`` with parameters typed from the operands."""
    params = "\n".join(f"  p{i} = {shape_text(et_of(a), np.shape(a))} parameter({i})"
                       for i, a in enumerate(operands))
    names = ", ".join(f"p{i}" for i in range(len(operands)))
    text = f"""HloModule t
ENTRY e {{
{params}
  ROOT r = {result} {op}({names}){attrs}
}}"""
    return run(text, *[np.asarray(a) for a in operands])
