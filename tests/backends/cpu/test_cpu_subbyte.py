"""Sub-byte integers (s2/s4/u2/u4) natively, widened to i2/i4 registers: every row
against the interpreter bitwise on seeded inputs, with no host library call."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

NAMES = "add sub mul div rem neg abs max shl shr sra cmp wide narrow ftoi itof bc not sel".split()


@pytest.mark.parametrize("S,U", [("s4", "u4"), ("s2", "u2")])
def test_sub_byte_rows_match_the_interpreter_bitwise(S, U, tmp_path):
    sh = "[5,37]{1,0}"
    text = f"""
HloModule sub_{S}
ENTRY e {{
  a = {S}{sh} parameter(0)
  b = {S}[5,37]{{0,1}} parameter(1)
  u = {U}{sh} parameter(2)
  v = {U}{sh} parameter(3)
  w = s32{sh} parameter(4)
  f = f32{sh} parameter(5)
  add = {S}{sh} add(a, b)
  sub = {U}{sh} subtract(u, v)
  mul = {S}{sh} multiply(a, b)
  div = {S}{sh} divide(a, b)
  rem = {U}{sh} remainder(u, v)
  neg = {S}{sh} negate(a)
  abs = {S}{sh} abs(a)
  max = {U}{sh} maximum(u, v)
  shl = {S}{sh} shift-left(a, b)
  shr = {U}{sh} shift-right-logical(u, v)
  sra = {S}{sh} shift-right-arithmetic(a, b)
  cmp = pred{sh} compare(a, b), direction=LT
  wide = s32{sh} convert(a)
  narrow = {S}{sh} convert(w)
  ftoi = {U}{sh} convert(f)
  itof = f32{sh} convert(u)
  bc = {U}{sh} bitcast-convert(a)
  not = {U}{sh} not(u)
  sel = {S}{sh} select(cmp, a, b)
  ROOT t = ({S}{sh}, {U}{sh}, {S}{sh}, {S}{sh}, {U}{sh}, {S}{sh}, {S}{sh}, {U}{sh}, {S}{sh}, {U}{sh}, {S}{sh}, pred{sh}, s32{sh}, {S}{sh}, {U}{sh}, f32{sh}, {U}{sh}, {U}{sh}, {S}{sh}) tuple({", ".join(NAMES)})
}}"""
    m = parse_hlo_modules(text, "x.hlo")[0]
    args = random_arguments(m, seed=3)
    args[5] = (args[5] * 20).astype(np.float32)   # out of range for the narrow types too
    ref = Interpreter(m).run(args)
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not exe.meta["host_reasons"], exe.report()
    got = exe.run(args)
    for n, g, r in zip(NAMES, got, ref):
        r = np.asarray(r)
        assert g.dtype == r.dtype, n
        np.testing.assert_array_equal(g.astype(np.float64), r.astype(np.float64), err_msg=n)
