"""The evaluator itself: argument checks, error messages, shape checks, folding, aliasing,
dead code, and dot."""
from __future__ import annotations

import numpy as np
import pytest

import hlo_opt
from hlo_opt.api import parse_hlo
from hlo_opt.backends import compile as compile_module
from hlo_opt.backends.interpreter import Interpreter, registry
from hlo_opt.errors import HloError, UnsupportedError

from .interp_util import run

SIMPLE = """HloModule s
ENTRY e {
  %x = f32[3] parameter(0)
  %c = f32[] constant(2)
  %b = f32[3] broadcast(%c), dimensions={}
  ROOT %m = f32[3] multiply(%x, %b)
}"""


def test_execute_api_returns_leaves_as_arrays():
    m = hlo_opt.parse_hlo(SIMPLE)
    out = hlo_opt.execute(m, [np.array([1, 2, 3], np.float32)])
    assert isinstance(out, list) and len(out) == 1
    assert out[0].dtype == np.float32 and out[0].tolist() == [2, 4, 6]


def test_argument_count_and_shape_errors_are_clean():
    exe = Interpreter(parse_hlo(SIMPLE))
    with pytest.raises(HloError, match="takes 1 argument"):
        exe.run([])
    with pytest.raises(HloError, match=r"argument 0 \(parameter %x\): expected f32\[3\], got f64\[3\]"):
        exe.run([np.zeros(3)])
    with pytest.raises(HloError, match=r"expected f32\[3\], got f32\[4\]"):
        exe.run([np.zeros(4, np.float32)])
    assert exe.run([[1, 2, 3]])[0].tolist() == [2, 4, 6]  # lists are converted


def test_constant_subgraphs_are_folded_at_plan_time():
    m = parse_hlo(SIMPLE)
    exe = Interpreter(m)
    exe.run([np.zeros(3, np.float32)])
    plan = exe.evaluator.plan(m.entry)
    stepped = {plan.insts[slot].name for slot, _ in plan.steps}
    assert stepped == {"m"}  # the constant and its broadcast are in the template


def test_results_never_alias_arguments_or_cached_constants():
    text = """HloModule a
ENTRY e {
  %x = f32[2] parameter(0)
  %c = f32[2] constant({5, 6})
  ROOT %t = (f32[2], f32[2]) tuple(%x, %c)
}"""
    exe = Interpreter(parse_hlo(text))
    x = np.array([1, 2], np.float32)
    a, c = exe.run([x])
    assert a is not x and not np.shares_memory(a, x)
    c[0] = 100  # must not leak into the next run
    assert exe.run([x])[1].tolist() == [5, 6]


def test_dead_code_is_not_executed():
    text = """HloModule d
ENTRY e {
  %x = f32[2] parameter(0)
  %tok = token[] after-all()
  %dead = ((f32[2]), token[]) infeed(%tok)
  ROOT %n = f32[2] negate(%x)
}"""
    assert run(text, np.array([1, -1], np.float32)).tolist() == [-1, 1]


def test_elided_constant_fails_clearly():
    text = """HloModule e
ENTRY e {
  %x = f32[4] parameter(0)
  %c = f32[4] constant({...})
  ROOT %a = f32[4] add(%x, %c)
}"""
    with pytest.raises(UnsupportedError, match=r"constant %c is elided"):
        run(text, np.zeros(4, np.float32))


def test_error_in_nested_computation_names_instruction_and_callers():
    text = """HloModule n
%fused (a: s32[4], n: s32[]) -> s32[2,2] {
  %a = s32[4] parameter(0)
  %n = s32[] parameter(1)
  %two = s32[] constant(2)
  ROOT %r = s32[2,2] dynamic-reshape(%a, %n, %two)
}
ENTRY e {
  %x = s32[4] parameter(0)
  %n = s32[] parameter(1)
  ROOT %f = s32[2,2] fusion(%x, %n), kind=kLoop, calls=%fused
}"""
    exe = Interpreter(parse_hlo(text))
    assert exe.run([np.arange(4, dtype=np.int32), np.int32(2)])[0].tolist() == [[0, 1], [2, 3]]
    with pytest.raises(UnsupportedError) as info:
        exe.run([np.arange(4, dtype=np.int32), np.int32(1)])
    msg = str(info.value)
    assert msg.startswith("while executing %r = s32[2,2]{1,0} dynamic-reshape(")
    assert "(in computation %fused)" in msg
    assert "called from %f in computation %e" in msg


def test_a_handler_returning_the_wrong_dtype_is_caught(monkeypatch):
    monkeypatch.setitem(registry.FAST, "negate", lambda inst: (lambda x: -x.astype(np.float64)))
    with pytest.raises(HloError, match=r"negate handler produced a wrong value: expected "
                                       r"f32\[2\], got f64\[2\]"):
        run("""HloModule w
ENTRY e {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%x)
}""", np.zeros(2, np.float32))


def test_internal_exceptions_are_wrapped_with_the_instruction(monkeypatch):
    def boom(inst):
        def k(x):
            raise IndexError("kaboom")
        return k
    monkeypatch.setitem(registry.FAST, "negate", boom)
    with pytest.raises(HloError, match=r"while executing %n = .*IndexError: kaboom"):
        run("""HloModule w
ENTRY e {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%x)
}""", np.zeros(2, np.float32))


def test_missing_handler_is_unsupported(monkeypatch):
    monkeypatch.delitem(registry.FAST, "tanh")
    monkeypatch.delitem(registry.HANDLERS, "tanh")
    with pytest.raises(UnsupportedError, match="no handler for opcode 'tanh'"):
        run("""HloModule w
ENTRY e {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] tanh(%x)
}""", np.zeros(2, np.float32))


def test_unknown_backend_is_a_clean_error():
    with pytest.raises(UnsupportedError, match="unknown backend 'tpu'"):
        compile_module(parse_hlo(SIMPLE), "tpu")


# ---- dot --------------------------------------------------------------------------------
def test_dot_matrix_and_batched_against_loops():
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, size=(2, 3, 4)).astype(np.float32)
    b = rng.integers(-5, 5, size=(2, 5, 4)).astype(np.float32)
    r = run("""HloModule d
ENTRY e {
  %a = f32[2,3,4] parameter(0)
  %b = f32[2,5,4] parameter(1)
  ROOT %d = f32[2,3,5] dot(%a, %b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={2}
}""", a, b)
    for n in range(2):
        for i in range(3):
            for j in range(5):
                assert r[n, i, j] == sum(a[n, i, k] * b[n, j, k] for k in range(4))
    m = run("""HloModule d
ENTRY e {
  %a = f32[4,3] parameter(0)
  %b = f32[4,2] parameter(1)
  ROOT %d = f32[3,2] dot(%a, %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}""", a[0].T.copy(), b[0, :2].T.copy())
    assert m.tolist() == [[sum(a[0, i, k] * b[0, j, k] for k in range(4)) for j in range(2)]
                          for i in range(3)]


def test_dot_mixed_types_and_int_wrap():
    a = np.array([[100, 100]], np.int8)
    b = np.array([[100], [100]], np.int8)
    r = run("""HloModule d
ENTRY e {
  %a = s8[1,2] parameter(0)
  %b = s8[2,1] parameter(1)
  ROOT %d = s32[1,1] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", a, b)
    assert r.dtype == np.int32 and r.tolist() == [[20000]]
    big = np.array([[2**30, 2**30]], np.int32)
    one = np.array([[2], [2]], np.int32)
    w = run("""HloModule d
ENTRY e {
  %a = s32[1,2] parameter(0)
  %b = s32[2,1] parameter(1)
  ROOT %d = s32[1,1] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", big, one)
    assert w.tolist() == [[0]]  # 2^32 wraps to 0
    import ml_dtypes
    x = np.array([[1.0, 2.0]], ml_dtypes.bfloat16)
    y = np.array([[3.0], [4.0]], ml_dtypes.bfloat16)
    f = run("""HloModule d
ENTRY e {
  %a = bf16[1,2] parameter(0)
  %b = bf16[2,1] parameter(1)
  ROOT %d = f32[1,1] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", x, y)
    assert f.dtype == np.float32 and f.tolist() == [[11.0]]


def test_plans_compile_after_the_first_checked_run_and_agree():
    text = """HloModule c
ENTRY e {
  %x = f32[3] parameter(0)
  %y = f32[3] parameter(1)
  %t = (f32[3], f32[3]) tuple(%x, %y)
  %a = f32[3] get-tuple-element(%t), index=0
  %b = f32[3] get-tuple-element(%t), index=1
  %s = f32[3] add(%a, %b)
  %m = f32[3] multiply(%s, %a)
  %d = f32[3] subtract(%m, %s)
  ROOT %r = (f32[3], f32[3], f32[3]) tuple(%d, %s, %x)
}"""
    m = parse_hlo(text)
    exe = Interpreter(m)
    x = np.array([1, 2, 3], np.float32)
    y = np.array([4, 5, 6], np.float32)
    first = exe.run([x, y])
    plan = exe.evaluator.plan(m.entry)
    assert plan.checked and plan.fn is not None
    second = exe.run([x, y])
    s = [a + b for a, b in zip(x.tolist(), y.tolist())]
    expected = [[v * a - v for v, a in zip(s, x.tolist())], s, x.tolist()]
    assert [r.tolist() for r in first] == expected
    assert [r.tolist() for r in second] == expected
    assert Interpreter(m, always_check=True).run([x, y])[0].tolist() == expected[0]
