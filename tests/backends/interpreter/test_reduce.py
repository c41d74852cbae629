"""reduce (fast, batched and per-element paths) and map."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter import Interpreter

from .interp_util import run

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
"""


def _reduce_text(reducer: str, et: str, in_dims, out_dims, dims, init: str) -> str:
    name = reducer.split("(")[0].split()[-1]
    return f"""HloModule t
{reducer}
ENTRY e {{
  p = {et}[{','.join(map(str, in_dims))}] parameter(0)
  i = {et}[] constant({init})
  ROOT r = {et}[{','.join(map(str, out_dims))}] reduce(p, i), dimensions={{{','.join(map(str, dims))}}}, to_apply={name}
}}"""


def test_add_reduce_folds_init_once():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = run(_reduce_text(ADD, "f32", (3, 4), (3,), (1,), "10"), x)
    assert r.tolist() == [10 + 0 + 1 + 2 + 3, 10 + 4 + 5 + 6 + 7, 10 + 8 + 9 + 10 + 11]


def test_reduce_several_dims_and_no_dims():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    r = run(_reduce_text(ADD, "f32", (2, 3, 4), (3,), (0, 2), "0"), x)
    exp = [sum(x[a, j, c] for a in range(2) for c in range(4)) for j in range(3)]
    assert r.tolist() == exp
    y = x[:, :, 0].copy()  # [2,3]
    same = run(_reduce_text(ADD, "f32", (2, 3), (2, 3), (), "1"), y)
    assert same.tolist() == [[v + 1 for v in row] for row in y.tolist()]


def test_max_reduce_propagates_nan_and_empty_reduce_gives_init():
    mx = ADD.replace("add(", "maximum(").replace("%add", "%mx")
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
    r = run(_reduce_text(mx, "f32", (2, 3), (2,), (1,), "-inf"), x)
    assert np.isnan(r[0]) and r[1] == 3.0
    empty = run(_reduce_text(mx, "f32", (2, 0), (2,), (1,), "-inf"),
                np.zeros((2, 0), np.float32))
    assert empty.tolist() == [-np.inf, -np.inf]


def test_integer_add_reduce_wraps():
    red = ADD.replace("f32", "s32")
    x = np.array([2**31 - 1, 1, 5], np.int32)
    r = run(_reduce_text(red, "s32", (3,), (), (0,), "0"), x)
    assert r.dtype == np.int32 and int(r) == -2**31 + 5


def test_pred_and_or_reduce():
    and_ = ADD.replace("f32", "pred").replace("add(", "and(").replace("%add", "%land")
    or_ = and_.replace("and(", "or(").replace("%land", "%lor")
    x = np.array([[True, True], [True, False], [False, False]])
    assert run(_reduce_text(and_, "pred", (3, 2), (3,), (1,), "true"), x).tolist() == \
        [True, False, False]
    assert run(_reduce_text(or_, "pred", (3, 2), (3,), (1,), "false"), x).tolist() == \
        [True, True, False]


def test_bf16_sum_accumulates_beyond_bf16_precision():
    red = ADD.replace("f32", "bf16")
    x = np.ones(1024, ml_dtypes.bfloat16)
    r = run(_reduce_text(red, "bf16", (1024,), (), (0,), "0"), x)
    assert r.dtype == ml_dtypes.bfloat16 and float(r) == 1024.0  # bf16 steps would stall at 256


ARGMAX = """HloModule t
%argmax (a: f32[], ai: s32[], b: f32[], bi: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %ai = s32[] parameter(1)
  %b = f32[] parameter(2)
  %bi = s32[] parameter(3)
  %gt = pred[] compare(%a, %b), direction=GT
  %eq = pred[] compare(%a, %b), direction=EQ
  %lt = pred[] compare(%ai, %bi), direction=LT
  %tie = pred[] and(%eq, %lt)
  %pick = pred[] or(%gt, %tie)
  %v = f32[] select(%pick, %a, %b)
  %i = s32[] select(%pick, %ai, %bi)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}

ENTRY e {
  x = f32[5,7] parameter(0)
  idx = s32[5,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[5], s32[5]) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=%argmax
}"""


def test_variadic_argmax_reducer_batched_path():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(5, 7)).astype(np.float32)  # many ties
    m = parse_hlo(ARGMAX)
    exe = Interpreter(m, always_check=True)
    values, indices = exe.run_value([x])
    exp_idx = [min(j for j in range(7) if x[i, j] == max(x[i])) for i in range(5)]
    assert values.tolist() == [max(row) for row in x.tolist()]
    assert indices.tolist() == exp_idx
    assert exe.evaluator.batchable(m.computation("argmax"))


CALLING_REDUCER = """HloModule t
%inner (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %m = s32[] multiply(%a, %b)
  ROOT %s = s32[] add(%m, %b)
}

%outer (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %c = s32[] call(%a, %b), to_apply=%inner
}

ENTRY e {
  x = s32[2,3] parameter(0)
  i = s32[] constant(1)
  ROOT r = s32[2] reduce(x, i), dimensions={1}, to_apply=%outer
}"""


def test_non_batchable_reducer_runs_per_element_in_order():
    x = np.array([[1, 2, 3], [2, 0, 4]], np.int32)
    m = parse_hlo(CALLING_REDUCER)
    exe = Interpreter(m, always_check=True)
    r = exe.run([x])[0]
    assert not exe.evaluator.batchable(m.computation("outer"))
    exp = []
    for row in x.tolist():
        acc = 1
        for v in row:  # f(acc, v) = acc * v + v, sequential (not associative)
            acc = acc * v + v
        exp.append(acc)
    assert r.tolist() == exp


def test_map_batched_and_per_element():
    text = """HloModule t
%fma (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %m = f32[] multiply(%a, %b)
  %one = f32[] constant(1)
  ROOT %r = f32[] add(%m, %one)
}

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT r = f32[4] map(x, y), dimensions={0}, to_apply=%fma
}"""
    x = np.array([1, 2, 3, 4], np.float32)
    y = np.array([0.5, -1, 2, 0], np.float32)
    assert run(text, x, y).tolist() == [a * b + 1 for a, b in zip(x.tolist(), y.tolist())]
    called = text.replace("ROOT %r = f32[] add(%m, %one)",
                          "%r0 = f32[] add(%m, %one)\n  ROOT %r = f32[] call(%r0), "
                          "to_apply=%id").replace("ENTRY e {", """%id (v: f32[]) -> f32[] {
  ROOT %v = f32[] parameter(0)
}

ENTRY e {""")
    assert run(called, x, y).tolist() == [a * b + 1 for a, b in zip(x.tolist(), y.tolist())]


@pytest.mark.parametrize("op,init,fn", [("multiply", "1", lambda r: float(np.prod(r))),
                                        ("minimum", "inf", min)])
def test_other_fast_reducers(op, init, fn):
    red = ADD.replace("add(", f"{op}(")
    x = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
    r = run(_reduce_text(red, "f32", (2, 3), (2,), (1,), init), x)
    assert r.tolist() == [fn(row) for row in x.tolist()]
