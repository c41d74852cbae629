"""sort and topk: stability, XLA's float total order, custom comparators, ties."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.heavy_helpers import StandInCtx, execute_or_skip, run

ROOT = Path(__file__).resolve().parents[3]

SORT_KV = """
HloModule s
%cmp (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %r = pred[] compare({lhs}, {rhs}), direction={dir}{type}
}
ENTRY e {
  k = f32[{n}] parameter(0)
  v = s32[{n}] parameter(1)
  ROOT s = (f32[{n}], s32[{n}]) sort(k, v), dimensions={0}, is_stable=true, to_apply=%cmp
}
"""


def _sort_kv(keys, direction="LT", total=False, swapped=False, batched=False, ctx=None):
    text = SORT_KV.replace("{n}", str(len(keys))).replace("{dir}", direction)
    text = text.replace("{type}", ", type=TOTALORDER" if total else "")
    text = text.replace("{lhs}", "%b" if swapped else "%a").replace(
        "{rhs}", "%a" if swapped else "%b")
    vals = np.arange(len(keys), dtype=np.int32)
    return run(text, "s", [np.asarray(keys, np.float32), vals], batched=batched, ctx=ctx)


def test_sort_is_stable_on_ties():
    keys = [3, 1, 2, 1, 3, 1, 2, 0]
    k, v = _sort_kv(keys)
    expected = sorted(range(len(keys)), key=lambda i: keys[i])  # Python's sort is stable
    np.testing.assert_array_equal(v, expected)
    np.testing.assert_array_equal(k, np.asarray(keys, np.float32)[expected])


def test_sort_descending_is_stable_too():
    keys = [3, 1, 2, 1, 3, 1, 2, 0]
    _, v = _sort_kv(keys, "GT")
    expected = sorted(range(len(keys)), key=lambda i: -keys[i])
    np.testing.assert_array_equal(v, expected)


def test_swapped_compare_operands_flip_the_order():
    keys = [2, 0, 1]
    _, v = _sort_kv(keys, "LT", swapped=True)  # compare(rhs, lhs) LT == descending
    np.testing.assert_array_equal(v, [0, 2, 1])


def test_total_order_for_floats():
    nan = np.float32(np.nan)
    neg_nan = np.copysign(nan, np.float32(-1))
    keys = [1.0, np.inf, -0.0, nan, -np.inf, 0.0, neg_nan, -1.0, 0.0, -0.0]
    k, v = _sort_kv(keys, total=True)
    # -NaN < -inf < -1 < -0 < -0 < +0 < +0 < 1 < inf < +NaN, ties in input order
    np.testing.assert_array_equal(v, [6, 4, 7, 2, 9, 5, 8, 0, 1, 3])
    assert np.signbit(k[0]) and np.isnan(k[0]) and np.isnan(k[-1]) and not np.signbit(k[-1])


def test_partial_order_treats_signed_zeros_as_equal():
    keys = [0.0, -0.0, 0.0, -1.0]
    _, v = _sort_kv(keys)
    np.testing.assert_array_equal(v, [3, 0, 1, 2])


LEX = """
HloModule s
%cmp (a: s32[], b: s32[], c: f32[], d: f32[], e: s32[], f: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %c = f32[] parameter(2)
  %d = f32[] parameter(3)
  %e = s32[] parameter(4)
  %f = s32[] parameter(5)
  %lt0 = pred[] compare(%a, %b), direction=LT
  %eq0 = pred[] compare(%a, %b), direction=EQ
  %gt1 = pred[] compare(%c, %d), direction=GT
  %both = pred[] and(%eq0, %gt1)
  ROOT %r = pred[] or(%lt0, %both)
}
ENTRY e {
  k0 = s32[4,37] parameter(0)
  k1 = f32[4,37] parameter(1)
  v = s32[4,37] parameter(2)
  ROOT s = (s32[4,37], f32[4,37], s32[4,37]) sort(k0, k1, v), dimensions={1},
      is_stable=true, to_apply=%cmp
}
"""


@pytest.mark.parametrize("batched", [False, True])
def test_variadic_sort_with_a_custom_comparator(batched):
    rng = np.random.default_rng(0)
    k0 = rng.integers(0, 4, (4, 37)).astype(np.int32)
    k1 = rng.integers(0, 3, (4, 37)).astype(np.float32)
    v = np.broadcast_to(np.arange(37, dtype=np.int32), (4, 37)).copy()
    ctx = StandInCtx(batched)
    s0, s1, sv = run(LEX, "s", [k0, k1, v], ctx=ctx)
    for r in range(4):
        # k0 ascending, then k1 descending, then original position (stability)
        order = sorted(range(37), key=lambda i: (k0[r, i], -k1[r, i]))
        np.testing.assert_array_equal(sv[r], order)
        np.testing.assert_array_equal(s0[r], k0[r, order])
        np.testing.assert_array_equal(s1[r], k1[r, order])
    if batched:
        assert ctx.calls == 0 and 0 < ctx.batched_calls < 40
    else:
        assert ctx.calls > 0


def test_sort_along_dimension_zero_of_a_matrix():
    text = """
HloModule s
%cmp (a: s32[], b: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = pred[] compare(%a, %b), direction=GT
}
ENTRY e {
  k = s32[5,3] parameter(0)
  ROOT s = s32[5,3] sort(k), dimensions={0}, to_apply=%cmp
}
"""
    rng = np.random.default_rng(1)
    k = rng.integers(-50, 50, (5, 3)).astype(np.int32)
    out = run(text, "s", [k])
    np.testing.assert_array_equal(out, -np.sort(-k, axis=0))


def test_sort_sample_matches_xla_fixture():
    execute = execute_or_skip()
    import hlo_opt
    mod = hlo_opt.load(str(ROOT / "sample_modules" / "sort.hlo"))
    data = np.load(ROOT / "tests" / "fixtures" / "sort.npz")
    outs = execute(mod, [data["arg0"], data["arg1"]])
    np.testing.assert_array_equal(outs[0], data["out0"])
    np.testing.assert_array_equal(outs[1], data["out1"])


TOPK = """
HloModule t
ENTRY e {
  x = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3{largest}
}
"""


def test_topk_ties_keep_the_lower_index_first():
    x = np.array([[3, 1, 3, 2, 3, 0], [5, 5, 1, 1, 2, 9]], np.float32)
    vals, idx = run(TOPK.replace("{largest}", ", largest=true"), "t", [x])
    np.testing.assert_array_equal(idx, [[0, 2, 4], [5, 0, 1]])
    np.testing.assert_array_equal(vals, [[3, 3, 3], [9, 5, 5]])
    vals, idx = run(TOPK.replace("{largest}", ""), "t", [x])  # largest defaults to true
    np.testing.assert_array_equal(idx, [[0, 2, 4], [5, 0, 1]])


def test_topk_smallest_and_nan():
    x = np.array([[3, np.nan, 3, -2, 3, 0], [5, 5, 1, 1, -np.inf, 9]], np.float32)
    vals, idx = run(TOPK.replace("{largest}", ", largest=false"), "t", [x])
    np.testing.assert_array_equal(idx, [[3, 5, 0], [4, 2, 3]])
    vals, idx = run(TOPK.replace("{largest}", ", largest=true"), "t", [x])
    assert idx[0, 0] == 1 and np.isnan(vals[0, 0])  # +NaN is the largest in total order
    np.testing.assert_array_equal(idx[1], [5, 0, 1])


def test_custom_comparator_through_the_real_evaluator():
    execute = execute_or_skip()
    from hlo_opt.api import parse_hlo
    rng = np.random.default_rng(2)
    k0 = rng.integers(0, 4, (4, 37)).astype(np.int32)
    k1 = rng.integers(0, 3, (4, 37)).astype(np.float32)
    v = np.broadcast_to(np.arange(37, dtype=np.int32), (4, 37)).copy()
    s0, s1, sv = execute(parse_hlo(LEX), [k0, k1, v])
    for r in range(4):
        order = sorted(range(37), key=lambda i: (k0[r, i], -k1[r, i]))
        np.testing.assert_array_equal(sv[r], order)


TOPK_CUSTOM_CALL = """
HloModule t
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={dir}
}
ENTRY e {
  x = f32[{shape}] parameter(0)
  ROOT t = (f32[{kshape}], s32[{kshape}]) custom-call(x), custom_call_target="TopK", to_apply=cmp
}
"""


def test_topk_custom_call_as_xla_cpu_emits_it():
    """XLA:CPU's TopK custom call: k from the result shape, -0 < +0, NaN largest, ties by
    the lower index; the same answer as the topk opcode."""
    x = np.array([[3, 1, -0.0, 0.0, np.nan, 5], [1, 1, 1, 2, -np.inf, 0]], np.float32)
    text = TOPK_CUSTOM_CALL.replace("{dir}", "GT").replace("{shape}", "2,6") \
        .replace("{kshape}", "2,4")
    vals, idx = run(text, "t", [x])
    np.testing.assert_array_equal(idx, [[4, 5, 0, 1], [3, 0, 1, 2]])
    ref_vals, ref_idx = run(TOPK.replace("{largest}", "").replace("f32[2,3]", "f32[2,4]")
                            .replace("s32[2,3]", "s32[2,4]").replace("k=3", "k=4"), "t", [x])
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(vals, ref_vals)
    row = np.array([0.0, -0.0, 2.0], np.float32)
    text = TOPK_CUSTOM_CALL.replace("{dir}", "GT").replace("{shape}", "3") \
        .replace("{kshape}", "2")
    vals, idx = run(text, "t", [row])
    np.testing.assert_array_equal(idx, [2, 0])  # +0 above -0
    text = TOPK_CUSTOM_CALL.replace("{dir}", "LT").replace("{shape}", "3") \
        .replace("{kshape}", "2")
    vals, idx = run(text, "t", [row])
    np.testing.assert_array_equal(idx, [1, 0])  # the two smallest: -0 then +0
