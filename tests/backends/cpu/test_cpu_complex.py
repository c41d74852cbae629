"""Complex element types natively: every complex row against the interpreter on seeded
inputs and on every pair of special values, bitwise (NaNs equal as NaNs), with no host
library call."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

OPS = "add sub mul div neg abs exp re im mk eq ne cv ci cc sel".split()


def _module(c, n, m):
    f = "f32" if c == "c64" else "f64"
    other = "c128" if c == "c64" else "c64"
    sh = f"[{n},{m}]{{1,0}}"
    outs = [c, c, c, c, c, f, c, f, f, c, "pred", "pred", c, c, other, c]
    return parse_hlo_modules(f"""
HloModule cplx_{c}
ENTRY e {{
  a = {c}{sh} parameter(0)
  b = {c}[{n},{m}]{{0,1}} parameter(1)
  x = {f}{sh} parameter(2)
  i = s32{sh} parameter(3)
  add = {c}{sh} add(a, b)
  sub = {c}{sh} subtract(a, b)
  mul = {c}{sh} multiply(a, b)
  div = {c}{sh} divide(a, b)
  neg = {c}{sh} negate(a)
  abs = {f}{sh} abs(a)
  exp = {c}{sh} exponential(a)
  re = {f}{sh} real(b)
  im = {f}{sh} imag(b)
  mk = {c}{sh} complex(x, re)
  eq = pred{sh} compare(a, b), direction=EQ
  ne = pred{sh} compare(a, b), direction=NE
  cv = {c}{sh} convert(x)
  ci = {c}{sh} convert(i)
  cc = {other}{sh} convert(a)
  sel = {c}{sh} select(eq, a, mul)
  ROOT t = ({", ".join(t + sh for t in outs)}) tuple({", ".join(OPS)})
}}
""", f"{c}.hlo")[0]


def _same(g, r):
    g, r = np.asarray(g), np.asarray(r)
    if g.dtype.kind == "c":
        return _same(g.real, r.real) & _same(g.imag, r.imag)
    if g.dtype.kind == "f":
        return (g == r) | (np.isnan(g) & np.isnan(r))
    return g == r


def _check(m, args, tmp_path):
    with np.errstate(all="ignore"):
        ref = Interpreter(m).run(args)
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not exe.meta["host_reasons"], exe.report()
    got = exe.run(args)
    for name, g, r in zip(OPS, got, ref):
        bad = ~_same(g, r)
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} differ"


@pytest.mark.parametrize("c", ["c64", "c128"])
def test_complex_rows_bitwise_on_random_inputs(c, tmp_path):
    m = _module(c, 6, 50)
    _check(m, random_arguments(m, seed=4), tmp_path)


@pytest.mark.parametrize("c", ["c64", "c128"])
def test_complex_rows_bitwise_on_special_values(c, tmp_path):
    vals = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e30, 100.0, 1e-40, 700.0]
    cs = np.array([complex(r, i) for r in vals for i in vals])
    n = len(cs)
    m = _module(c, n, n)
    dt = np.complex64 if c == "c64" else np.complex128
    a = np.repeat(cs[:, None], n, 1).astype(dt)
    b = np.repeat(cs[None, :], n, 0).astype(dt)
    x = a.real.copy()
    i = np.arange(n * n, dtype=np.int32).reshape(n, n) - 7000
    _check(m, [a, b, x, i], tmp_path)


def test_complex_reduction_and_fusion_shapes(tmp_path):
    m = parse_hlo_modules("""
HloModule cred
add {
  x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT s = c64[] add(x, y)
}
ENTRY e {
  a = c64[8,300]{1,0} parameter(0)
  z = c64[] constant((0, 0))
  t = c64[300,8]{1,0} transpose(a), dimensions={1,0}
  bz = c64[300,8]{1,0} broadcast(z), dimensions={}
  e = c64[300,8]{1,0} exponential(t)
  s = c64[300,8]{1,0} add(e, bz)
  r = c64[8]{0} reduce(a, z), dimensions={1}, to_apply=add
  ROOT o = (c64[300,8]{1,0}, c64[8]{0}) tuple(s, r)
}
""", "cred.hlo")[0]
    args = random_arguments(m, seed=9)
    ref = Interpreter(m).run(args)
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not exe.meta["host_reasons"], exe.report()
    got = exe.run(args)
    np.testing.assert_array_equal(got[0], np.asarray(ref[0]))
    np.testing.assert_allclose(got[1], np.asarray(ref[1]), rtol=1e-5, atol=1e-5)
