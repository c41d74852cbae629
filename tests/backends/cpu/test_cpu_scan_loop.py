"""A recurrent cell in a while loop (what ``lax.scan`` lowers to) through the ``cpu``
pipeline and the CPU backend, against the interpreter on the module as written: a
matrix-vector dot of the carried state, a dynamic-slice of the inputs and a
dynamic-update-slice of the stacked outputs in the body, and carried state that moves
between tuple elements (``hprev = h``, a swap) so the copies back into the loop state
must not clobber one another."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.flags import DebugOptions
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

STATE = "(s32[], f32[64], f32[64], f32[50], f32[50,64], f32[64,64], f32[64], f32[64])"
DOTS = {
    # h . w over w's rows: the row form
    "vector_matrix": "dot(h, w), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
    # w . h over w's columns: the dot-product form
    "matrix_vector": "dot(w, h), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
}


def _module(dot: str, trips: int = 37):
    return parse_hlo_modules(f"""
HloModule recurrent_cell

sum {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

keep_going {{
  st = {STATE} parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant({trips})
  ROOT lt = pred[] compare(i, n), direction=LT
}}

cell {{
  st = {STATE} parameter(0)
  i = s32[] get-tuple-element(st), index=0
  h = f32[64] get-tuple-element(st), index=1
  ys = f32[50] get-tuple-element(st), index=3
  xs = f32[50,64] get-tuple-element(st), index=4
  w = f32[64,64] get-tuple-element(st), index=5
  p = f32[64] get-tuple-element(st), index=6
  q = f32[64] get-tuple-element(st), index=7
  zero = s32[] constant(0)
  row = f32[1,64] dynamic-slice(xs, i, zero), dynamic_slice_sizes={{1,64}}
  x = f32[64] reshape(row)
  hw = f32[64] {dot}
  pre = f32[64] add(hw, x)
  pq = f32[64] multiply(pre, p)
  hn = f32[64] tanh(pq)
  z = f32[] constant(0)
  s = f32[] reduce(hn, z), dimensions={{0}}, to_apply=sum
  s1 = f32[1] reshape(s)
  ys2 = f32[50] dynamic-update-slice(ys, s1, i)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT next = {STATE} tuple(i2, hn, h, ys2, xs, w, q, p)
}}

ENTRY main {{
  w = f32[64,64] parameter(0)
  xs = f32[50,64] parameter(1)
  p = f32[64] parameter(2)
  q = f32[64] parameter(3)
  c0 = s32[] constant(0)
  f0 = f32[] constant(0)
  h0 = f32[64] broadcast(f0), dimensions={{}}
  ys0 = f32[50] broadcast(f0), dimensions={{}}
  init = {STATE} tuple(c0, h0, h0, ys0, xs, w, p, q)
  loop = {STATE} while(init), condition=keep_going, body=cell
  h = f32[64] get-tuple-element(loop), index=1
  hprev = f32[64] get-tuple-element(loop), index=2
  ys = f32[50] get-tuple-element(loop), index=3
  p_out = f32[64] get-tuple-element(loop), index=6
  q_out = f32[64] get-tuple-element(loop), index=7
  ROOT out = (f32[64], f32[64], f32[50], f32[64], f32[64]) tuple(h, hprev, ys, p_out, q_out)
}}
""", "recurrent_cell.hlo")[0]


def _args():
    r = np.random.default_rng(7)
    return [(r.standard_normal((64, 64)) * 0.1).astype(np.float32),
            r.standard_normal((50, 64)).astype(np.float32),
            (1 + 0.1 * r.standard_normal(64)).astype(np.float32),
            (1 + 0.1 * r.standard_normal(64)).astype(np.float32)]


def _cpu_pipeline(m):
    from hlo_opt import passes_api
    return passes_api.optimize(m, DebugOptions(), pipeline="cpu")


@pytest.mark.parametrize("form", sorted(DOTS))
def test_recurrent_cell_through_the_cpu_pipeline_matches_interpreter(form):
    module = _module(DOTS[form])
    args = _args()
    want = Interpreter(module).run(args)
    exe = CpuExecutable(module.clone(), cache=False, prepare=_cpu_pipeline)
    # XLA:CPU keeps a dot with a vector operand a dot (no dot strength reduction) ...
    dots = [i for i in exe.module.instructions() if i.opcode == "dot"]
    assert len(dots) == 1
    # ... and emits it inline, the whole loop in the one native call
    assert exe.meta["native"][dots[0].name] == "dot loops (matrix-vector: no BLAS call)"
    assert "while" in exe.meta["native"].values()
    got = exe.run(args)
    assert exe.host.calls == 0
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    # an odd trip count leaves p and q swapped
    np.testing.assert_array_equal(got[3], args[3])
    np.testing.assert_array_equal(got[4], args[2])


def test_recurrent_cell_as_written_matches_interpreter():
    """No pipeline: every instruction its own step, the while state copied as planned."""
    module = _module(DOTS["vector_matrix"], trips=50)
    args = _args()
    got = CpuExecutable(module.clone(), cache=False).run(args)
    for g, e in zip(got, Interpreter(module).run(args)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [16, 20000])
def test_while_state_rotation_through_stack_or_heap_temporaries(n):
    """(i, a, b, c) -> (i + 1, b, c, a + 1): every array leaf moves to another index;
    temporaries on the stack for small leaves, malloc'ed above ``STACK_TEMP_MAX``."""
    from hlo_opt.backends.cpu.renderer import STACK_TEMP_MAX
    assert (n * 4 > STACK_TEMP_MAX) == (n == 20000)
    st = f"(s32[], f32[{n}], f32[{n}], f32[{n}])"
    module = parse_hlo_modules(f"""
HloModule rotate

c {{
  s = {st} parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(7)
  ROOT lt = pred[] compare(i, k), direction=LT
}}

b {{
  s = {st} parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[{n}] get-tuple-element(s), index=1
  bb = f32[{n}] get-tuple-element(s), index=2
  cc = f32[{n}] get-tuple-element(s), index=3
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  f1 = f32[] constant(1)
  ones = f32[{n}] broadcast(f1), dimensions={{}}
  a1 = f32[{n}] add(a, ones)
  ROOT r = {st} tuple(i2, bb, cc, a1)
}}

ENTRY e {{
  a = f32[{n}] parameter(0)
  bb = f32[{n}] parameter(1)
  cc = f32[{n}] parameter(2)
  z = s32[] constant(0)
  init = {st} tuple(z, a, bb, cc)
  ROOT w = {st} while(init), condition=c, body=b
}}
""", "rotate.hlo")[0]
    r = np.random.default_rng(3)
    args = [r.standard_normal(n).astype(np.float32) for _ in range(3)]
    got = CpuExecutable(module, cache=False).run(args)
    for g, e in zip(got, Interpreter(module).run(args)):
        np.testing.assert_array_equal(g, e)
