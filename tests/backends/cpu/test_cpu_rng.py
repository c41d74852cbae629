"""Random-number modules on the CPU backend: a threefry-style counter hash (u32 adds,
rotates and xors in a while loop, as JAX lowers ``jax.random``) and the float draws made
from its bits (uniform by bitcast, normal through log1p/sqrt) against the interpreter:
the bits and the uniform draw bit for bit, the normal draw within XLA's bounds.  Also the
``cpu`` pipeline's fusion of each round chain into one loop fusion per state array, the
vectorised (``<N x i32>``) kernels, and the accuracy of the straight-line f32 log/log1p."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import compare_results, result_shapes
from hlo_opt.flags import DebugOptions
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt import passes_api  # noqa: E402
from hlo_opt.backends.cpu import THREADS_ENV, CpuExecutable  # noqa: E402

ROWS, COLS = 64, 128
ROTATIONS = (13, 15, 26, 6)


def _rotl(name, v, r):
    s = f"u32[{ROWS},{COLS}]"
    return f"""
  {name}.s = u32[1] slice(rot), slice={{[{r}:{r + 1}]}}
  {name}.r = u32[] reshape({name}.s)
  {name}.rb = {s} broadcast({name}.r), dimensions={{}}
  {name}.l = {s} shift-left({v}, {name}.rb)
  {name}.n = u32[] subtract(c32, {name}.r)
  {name}.nb = {s} broadcast({name}.n), dimensions={{}}
  {name}.h = {s} shift-right-logical({v}, {name}.nb)
  {name} = {s} or({name}.l, {name}.h)"""


def _threefry_text() -> str:
    s = f"u32[{ROWS},{COLS}]"
    state = f"(s32[], {s}, {s}, u32[], u32[], u32[4])"
    rounds, x0, x1 = [], "x0", "x1"
    for k in range(4):
        rounds.append(f"""
  a{k} = {s} add({x0}, {x1})""" + _rotl(f"rot{k}", x1, k) + f"""
  b{k} = {s} xor(a{k}, rot{k})""")
        x0, x1 = f"a{k}", f"b{k}"
    body = f"""
body {{
  p = {state} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x0 = {s} get-tuple-element(p), index=1
  x1 = {s} get-tuple-element(p), index=2
  k0 = u32[] get-tuple-element(p), index=3
  k1 = u32[] get-tuple-element(p), index=4
  rot = u32[4] get-tuple-element(p), index=5
  c32 = u32[] constant(32)
  {"".join(rounds)}
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  k0b = {s} broadcast(k0), dimensions={{}}
  y0 = {s} add({x0}, k0b)
  c = u32[] convert(i1)
  kc = u32[] add(k1, c)
  kcb = {s} broadcast(kc), dimensions={{}}
  y1 = {s} add({x1}, kcb)
  ROOT t = {state} tuple(i1, y0, y1, k1, k0, rot)
}}
"""
    f = f"f32[{ROWS},{COLS}]"
    return f"""HloModule threefry_like
{body}
cond {{
  p = {state} parameter(0)
  i = s32[] get-tuple-element(p), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}}

ENTRY e {{
  key = u32[2] parameter(0)
  k0s = u32[1] slice(key), slice={{[0:1]}}
  k0 = u32[] reshape(k0s)
  k1s = u32[1] slice(key), slice={{[1:2]}}
  k1 = u32[] reshape(k1s)
  hi = {s} iota(), iota_dimension=0
  lo = {s} iota(), iota_dimension=1
  ncols = u32[] constant({COLS})
  cols = {s} broadcast(ncols), dimensions={{}}
  his = {s} multiply(hi, cols)
  ctr = {s} add(his, lo)
  k0b = {s} broadcast(k0), dimensions={{}}
  x0 = {s} add(ctr, k0b)
  k1b = {s} broadcast(k1), dimensions={{}}
  x1 = {s} xor(ctr, k1b)
  rot = u32[4] constant({{{", ".join(map(str, ROTATIONS))}}})
  zero = s32[] constant(0)
  init = {state} tuple(zero, x0, x1, k1, k0, rot)
  w = {state} while(init), condition=cond, body=body
  y0 = {s} get-tuple-element(w), index=1
  y1 = {s} get-tuple-element(w), index=2
  bits = {s} xor(y0, y1)
  nine = u32[] constant(9)
  nineb = {s} broadcast(nine), dimensions={{}}
  m = {s} shift-right-logical(bits, nineb)
  onebits = u32[] constant(1065353216)
  onebitsb = {s} broadcast(onebits), dimensions={{}}
  mo = {s} or(m, onebitsb)
  f = {f} bitcast-convert(mo)
  one = f32[] constant(1)
  ones = {f} broadcast(one), dimensions={{}}
  u = {f} subtract(f, ones)
  two = f32[] constant(2)
  twos = {f} broadcast(two), dimensions={{}}
  u2 = {f} multiply(u, twos)
  z = {f} subtract(u2, ones)
  zz = {f} multiply(z, z)
  nzz = {f} negate(zz)
  l = {f} log-plus-one(nzz)
  nl = {f} negate(l)
  r = {f} sqrt(nl)
  n = {f} multiply(r, z)
  ROOT out = ({s}, {s}, {f}, {f}) tuple(y0, y1, u, n)
}}
"""


def _module():
    return parse_hlo_modules(_threefry_text(), "threefry_like.hlo")[0]


KEYS = [np.array([0, 0], np.uint32), np.array([0x12345678, 0x9ABCDEF0], np.uint32)]


def _executable(tmp_path, pipeline: bool):
    m = _module()
    if not pipeline:
        return CpuExecutable(m, cache_dir=str(tmp_path))
    o = DebugOptions()
    return CpuExecutable(m, debug_options=o, cache_dir=str(tmp_path),
                         prepare=lambda mm: passes_api.optimize(mm, o, pipeline="cpu"),
                         prepare_key="pipeline=cpu")


@pytest.mark.parametrize("pipeline", [False, True], ids=["as-written", "cpu-pipeline"])
@pytest.mark.parametrize("threads", [1, 2])
def test_bits_and_uniform_draw_equal_the_interpreter_bit_for_bit(monkeypatch, tmp_path,
                                                                  pipeline, threads):
    monkeypatch.setenv(THREADS_ENV, str(threads))
    exe = _executable(tmp_path, pipeline)
    m = _module()
    for key in KEYS:
        want = Interpreter(m).run([key])
        got = exe.run([key])
        for j in range(3):   # the two u32 states and the uniform draw: exact
            assert got[j].dtype == want[j].dtype
            np.testing.assert_array_equal(got[j], want[j], err_msg=f"output {j}")
        rows = compare_results(got[3:], want[3:], result_shapes(m)[3:], 1e-5, 1e-5)
        assert all(r.ok for r in rows), [(r.mismatches, r.max_abs) for r in rows]


def test_cpu_pipeline_fuses_each_round_chain_into_one_kernel(tmp_path):
    """XLA:CPU's fusion duplicates the cheap adds shared by both state arrays: the loop
    body keeps one loop fusion per array, not one kernel per round."""
    exe = _executable(tmp_path, pipeline=True)
    body = next(c for c in exe.module.computations if c.name == "body")
    big = [i for i in body.instructions if i.opcode != "get-tuple-element"
           and i.shape.is_array() and i.shape.num_elements() == ROWS * COLS]
    assert len(big) == 2 and all(i.opcode == "fusion" for i in big), \
        [(i.name, i.opcode) for i in big]


def test_round_and_draw_kernels_are_vectorised(tmp_path):
    exe = _executable(tmp_path, pipeline=True)
    ir_text = exe.artifacts.ir_with_opt
    assert re.search(r"<\d+ x i32>", ir_text)      # the rounds' adds, shifts and xors
    assert re.search(r"<\d+ x float>", ir_text)    # the draws, log1p included
    assert "log1pf" not in ir_text                 # no scalar libm call left in the loop


LOG_TEXT = """
HloModule logs
ENTRY e {
  x = f32[%d] parameter(0)
  a = f32[%d] log(x)
  b = f32[%d] log-plus-one(x)
  ROOT t = (f32[%d], f32[%d]) tuple(a, b)
}
"""


def _ulps(got, want):
    finite = np.isfinite(want)
    special_ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert special_ok[~finite].all(), (got[~finite], want[~finite])
    g, w = got[finite].astype(np.float64), want[finite].astype(np.float64)
    return float(np.max(np.abs(g - w) / np.spacing(np.abs(want[finite])).astype(np.float64)))


def test_f32_log_and_log1p_are_within_a_few_ulps_of_libm(tmp_path):
    rng = np.random.default_rng(3)
    n = 1 << 16
    pieces = [np.exp(rng.uniform(-87, 88, n)), rng.uniform(0.5, 2, n),
              rng.uniform(-0.999, 1, n),
              rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-38, -1, n),
              rng.uniform(0, 1, n) * 1e-38,
              np.array([0, -0.0, -1, -2, np.inf, -np.inf, np.nan, 1, 1e-45, 3.4e38,
                        -1 + 2 ** -24, 0.41421356, -0.41421356, 2 ** -30])]
    x = np.concatenate(pieces).astype(np.float32)
    m = parse_hlo_modules(LOG_TEXT % ((x.size,) * 5), "logs.hlo")[0]
    a, b = CpuExecutable(m, cache_dir=str(tmp_path)).run([x])
    with np.errstate(all="ignore"):
        assert _ulps(a, np.log(x)) <= 4
        assert _ulps(b, np.log1p(x)) <= 2
