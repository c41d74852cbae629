"""reduce-window and select-and-scatter against element-by-element loops of XLA's rules."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.support.heavy_helpers import StandInCtx, run


def _window_positions(shape, windows, out_idx):
    """Operand indices a window at ``out_idx`` reads, in row-major window order
    (padding and base-dilation holes skipped), per IterateThroughWindow."""
    for k in itertools.product(*[range(w["size"]) for w in windows]):
        idx = []
        for o, kk, w, n in zip(out_idx, k, windows, shape):
            p = o * w["stride"] + kk * w["rhs_d"] - w["lo"]
            if p % w["lhs_d"]:
                break
            p //= w["lhs_d"]
            if not 0 <= p < n:
                break
            idx.append(p)
        else:
            yield tuple(idx)


def _out_shape(shape, windows):
    out = []
    for n, w in zip(shape, windows):
        padded = (n - 1) * w["lhs_d"] + 1 + w["lo"] + w["hi"]
        eff = (w["size"] - 1) * w["rhs_d"] + 1
        out.append(max(0, (padded - eff) // w["stride"] + 1))
    return out


def ref_reduce_window(xs, inits, windows, fn):
    out_shape = _out_shape(xs[0].shape, windows)
    outs = [np.zeros(out_shape, dtype=x.dtype) for x in xs]
    for o in itertools.product(*[range(s) for s in out_shape]):
        acc = tuple(inits)
        for idx in _window_positions(xs[0].shape, windows, o):
            r = fn(*acc, *[x[idx] for x in xs])
            acc = r if isinstance(r, tuple) else (r,)
        for out, a in zip(outs, acc):
            out[o] = a
    return outs


def _w(size, stride=1, lo=0, hi=0, lhs_d=1, rhs_d=1):
    return dict(size=size, stride=stride, lo=lo, hi=hi, lhs_d=lhs_d, rhs_d=rhs_d)


def _wtext(ws):
    return ("{size=" + "x".join(str(w["size"]) for w in ws)
            + " stride=" + "x".join(str(w["stride"]) for w in ws)
            + " pad=" + "x".join(f"{w['lo']}_{w['hi']}" for w in ws)
            + " lhs_dilate=" + "x".join(str(w["lhs_d"]) for w in ws)
            + " rhs_dilate=" + "x".join(str(w["rhs_d"]) for w in ws) + "}")


RW = """
HloModule r
%f (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  {body}
}
ENTRY e {
  x = f32[{xs}] parameter(0)
  i = f32[] parameter(1)
  ROOT r = f32[{os}] reduce-window(x, i), window={w}, to_apply=%f
}
"""
BODIES = {
    "add": ("ROOT %r = f32[] add(%a, %b)", lambda a, b: a + b),
    "max": ("ROOT %r = f32[] maximum(%b, %a)", max),
    "min": ("ROOT %r = f32[] minimum(%a, %b)", min),
    # not a fast-path reducer; order-sensitive: acc*0.5 + x
    "half": ("%h = f32[] constant(0.5)\n  %m = f32[] multiply(%a, %h)\n"
             "  ROOT %r = f32[] add(%m, %b)", lambda a, b: np.float32(a) * 0.5 + b),
}
WINDOWS = [
    [_w(2, 2), _w(3, 1, 1, 1)],
    [_w(3, 2, 2, 1, lhs_d=2), _w(2, 1, 0, 0, rhs_d=3)],
    [_w(1), _w(4, 3, -1, 2)],
    [_w(4, 1, 0, 0), _w(6)],     # (5-4)+1 rows, (7-6)+1 columns
]


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("wi", range(len(WINDOWS)))
@pytest.mark.parametrize("batched", [False, True])
def test_reduce_window(body, wi, batched):
    rng = np.random.default_rng(wi)
    x = rng.integers(-8, 9, (5, 7)).astype(np.float32)
    init = np.float32(1.5)
    windows = WINDOWS[wi]
    code, fn = BODIES[body]
    expected = ref_reduce_window([x], [init], windows, fn)[0]
    text = RW.replace("{body}", code).replace("{xs}", "5,7").replace(
        "{os}", ",".join(map(str, expected.shape))).replace("{w}", _wtext(windows))
    ctx = StandInCtx(batched)
    out = run(text, "r", [x, np.asarray(init)], ctx=ctx)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    if body != "half":
        assert ctx.calls == 0 and ctx.batched_calls == 0  # numpy fast path


ARGMAX = """
HloModule r
%f (av: f32[], ai: s32[], bv: f32[], bi: s32[]) -> (f32[], s32[]) {
  %av = f32[] parameter(0)
  %ai = s32[] parameter(1)
  %bv = f32[] parameter(2)
  %bi = s32[] parameter(3)
  %gt = pred[] compare(%bv, %av), direction=GT
  %v = f32[] select(%gt, %bv, %av)
  %i = s32[] select(%gt, %bi, %ai)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}
ENTRY e {
  x = f32[6,5] parameter(0)
  ix = s32[6,5] parameter(1)
  a = f32[] parameter(2)
  b = s32[] parameter(3)
  ROOT r = (f32[3,5], s32[3,5]) reduce-window(x, ix, a, b),
      window={size=3x2 stride=2x1 pad=1_0x0_1}, to_apply=%f
}
"""


@pytest.mark.parametrize("batched", [False, True])
def test_variadic_reduce_window_argmax(batched):
    rng = np.random.default_rng(9)
    x = rng.integers(0, 5, (6, 5)).astype(np.float32)
    ix = np.arange(30, dtype=np.int32).reshape(6, 5)
    init_v, init_i = np.float32(-np.inf), np.int32(-1)
    windows = [_w(3, 2, 1, 0), _w(2, 1, 0, 1)]

    def fn(av, ai, bv, bi):
        return (bv, bi) if bv > av else (av, ai)
    ev, ei = ref_reduce_window([x, ix], [init_v, init_i], windows, fn)
    v, i = run(ARGMAX, "r", [x, ix, np.asarray(init_v), np.asarray(init_i)], batched=batched)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)


def test_reduce_window_empty_output_and_int_max():
    text = """
HloModule r
%m (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = s32[] maximum(%a, %b)
}
ENTRY e {
  x = s32[3,4] parameter(0)
  i = s32[] parameter(1)
  ROOT r = s32[1,2] reduce-window(x, i), window={size=3x3 stride=1x1 pad=0_0x0_0}, to_apply=%m
}
"""
    x = np.array([[1, -7, 3, 2], [0, 4, -9, 5], [6, 1, 1, 1]], np.int32)
    out = run(text, "r", [x, np.asarray(np.int32(-100))])
    np.testing.assert_array_equal(out, [[6, 5]])


# ---- select-and-scatter -----------------------------------------------------------------
SAS = """
HloModule s
%sel (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  {select}
}
%sc (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  {scatter}
}
ENTRY e {
  op = f32[5,6] parameter(0)
  src = f32[{ss}] parameter(1)
  z = f32[] parameter(2)
  ROOT s = f32[5,6] select-and-scatter(op, src, z), window={w}, select=%sel, scatter=%sc
}
"""


def ref_select_and_scatter(op, src, init, windows, select, scatter):
    out = np.full(op.shape, init, dtype=op.dtype)
    for s in itertools.product(*[range(n) for n in src.shape]):
        sel = None
        for idx in _window_positions(op.shape, windows, s):
            if sel is None or not select(op[sel], op[idx]):
                sel = idx
        if sel is not None:
            out[sel] = scatter(src[s], out[sel])
    return out


SELECTS = {
    "ge": ("ROOT %r = pred[] compare(%a, %b), direction=GE", lambda a, b: a >= b),
    "gt": ("ROOT %r = pred[] compare(%a, %b), direction=GT", lambda a, b: a > b),
    "le_swapped": ("ROOT %r = pred[] compare(%b, %a), direction=GE", lambda a, b: b >= a),
    # not a single compare: "a is not smaller than b" as not(LT)
    "not_lt": ("%l = pred[] compare(%a, %b), direction=LT\n  ROOT %r = pred[] not(%l)",
               lambda a, b: not a < b),
}
SCATTERS = {
    "add": ("ROOT %r = f32[] add(%a, %b)", lambda s, c: s + c),
    # order-sensitive: source*2 + current (args are (source, current))
    "lin": ("%two = f32[] constant(2)\n  %m = f32[] multiply(%a, %two)\n"
            "  ROOT %r = f32[] add(%m, %b)", lambda s, c: s * 2 + c),
}


@pytest.mark.parametrize("sel", sorted(SELECTS))
@pytest.mark.parametrize("sc", sorted(SCATTERS))
@pytest.mark.parametrize("batched", [False, True])
def test_select_and_scatter(sel, sc, batched):
    rng = np.random.default_rng(5)
    op = rng.integers(0, 3, (5, 6)).astype(np.float32)   # many ties
    windows = [_w(3, 2, 1, 1), _w(2, 1, 0, 1)]             # overlapping, padded
    out_shape = _out_shape(op.shape, windows)
    src = rng.integers(1, 9, out_shape).astype(np.float32)
    init = np.float32(0.25)
    expected = ref_select_and_scatter(op, src, init, windows, SELECTS[sel][1],
                                      SCATTERS[sc][1])
    text = SAS.replace("{select}", SELECTS[sel][0]).replace("{scatter}", SCATTERS[sc][0])
    text = text.replace("{ss}", ",".join(map(str, out_shape))).replace("{w}", _wtext(windows))
    out = run(text, "s", [op, src, np.asarray(init)], batched=batched)
    np.testing.assert_array_equal(out, expected)


def test_select_and_scatter_max_pool_gradient_picks_first_max():
    text = SAS.replace("{select}", SELECTS["ge"][0]).replace("{scatter}", SCATTERS["add"][0])
    text = text.replace("f32[5,6]", "f32[2,4]").replace("{ss}", "1,2").replace(
        "{w}", "{size=2x2 stride=2x2}")
    op = np.array([[1, 7, 7, 2], [7, 0, 3, 7]], np.float32)
    src = np.array([[10, 20]], np.float32)
    out = run(text, "s", [op, src, np.asarray(np.float32(0))])
    np.testing.assert_array_equal(out, [[0, 10, 20, 0], [0, 0, 0, 0]])


def test_variadic_reducer_and_generic_select_through_the_real_evaluator():
    from tests.support.heavy_helpers import execute_or_skip
    execute = execute_or_skip()
    from hlo_opt.api import parse_hlo
    rng = np.random.default_rng(10)
    x = rng.integers(0, 5, (6, 5)).astype(np.float32)
    ix = np.arange(30, dtype=np.int32).reshape(6, 5)
    v, i = execute(parse_hlo(ARGMAX), [x, ix, np.float32(-np.inf), np.int32(-1)])

    def fn(av, ai, bv, bi):
        return (bv, bi) if bv > av else (av, ai)
    ev, ei = ref_reduce_window([x, ix], [np.float32(-np.inf), np.int32(-1)],
                               [_w(3, 2, 1, 0), _w(2, 1, 0, 1)], fn)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)

    op = rng.integers(0, 3, (5, 6)).astype(np.float32)
    windows = [_w(3, 2, 1, 1), _w(2, 1, 0, 1)]
    src = rng.integers(1, 9, _out_shape(op.shape, windows)).astype(np.float32)
    text = SAS.replace("{select}", SELECTS["not_lt"][0]).replace("{scatter}",
                                                                 SCATTERS["lin"][0])
    text = text.replace("{ss}", ",".join(map(str, src.shape))).replace("{w}", _wtext(windows))
    out, = execute(parse_hlo(text), [op, src, np.float32(0.25)])
    expected = ref_select_and_scatter(op, src, np.float32(0.25), windows,
                                      SELECTS["not_lt"][1], SCATTERS["lin"][1])
    np.testing.assert_array_equal(out, expected)


def test_reduce_window_bf16_sum_accumulates_in_f32():
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    text = """
HloModule r
%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %r = bf16[] add(%a, %b)
}
ENTRY e {
  x = bf16[1,300] parameter(0)
  i = bf16[] parameter(1)
  ROOT rw = bf16[1,1] reduce-window(x, i), window={size=1x300}, to_apply=%add
}
"""
    # bf16 alone cannot count past 256 in steps of 1: the accumulation is in f32, the
    # same choice as the interpreter's reduce
    x = np.full((1, 300), 1.0, bf)
    out = run(text, "rw", [x, np.asarray(bf(0))])
    assert out.dtype == bf and float(out[0, 0]) == 300.0
