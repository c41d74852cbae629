"""gather / scatter against hand-written loops that follow operation_semantics.md."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.support.heavy_helpers import StandInCtx, execute_or_skip, run


# ---- reference loops (XLA's spec, one element at a time) ---------------------------------
def ref_gather(operand, indices, offset_dims, collapsed, start_index_map, ivd, slice_sizes,
               out_shape, operand_batching=(), indices_batching=()):
    out = np.zeros(out_shape, dtype=operand.dtype)
    batch_dims = [d for d in range(len(out_shape)) if d not in offset_dims]
    offset_operand_dims = [d for d in range(operand.ndim)
                           if d not in collapsed and d not in operand_batching]
    idx_batch_dims = [d for d in range(indices.ndim + (ivd == indices.ndim)) if d != ivd]
    for out_idx in itertools.product(*[range(s) for s in out_shape]):
        g = [out_idx[d] for d in batch_dims]
        full = list(g)
        full.insert(ivd, None)
        if ivd == indices.ndim:
            vec = [indices[tuple(g)]]
        else:
            vec = [indices[tuple(full[:ivd] + [k] + full[ivd + 1:])]
                   for k in range(indices.shape[ivd])]
        start = [0] * operand.ndim
        for k, d in enumerate(start_index_map):
            start[d] = int(vec[k])
        for od, idim in zip(operand_batching, indices_batching):
            start[od] = g[idx_batch_dims.index(idim)]
        for d in range(operand.ndim):
            start[d] = min(max(start[d], 0), operand.shape[d] - slice_sizes[d])
        full_idx = list(start)
        for k, od in enumerate(offset_operand_dims):
            full_idx[od] += out_idx[offset_dims[k]]
        out[out_idx] = operand[tuple(full_idx)]
    return out


def ref_scatter(operands, indices, updates, update_window_dims, inserted, sd2od, ivd,
                combine, input_batching=(), indices_batching=()):
    outs = [o.copy() for o in operands]
    rank = operands[0].ndim
    upd_shape = updates[0].shape
    scatter_dims = [d for d in range(len(upd_shape)) if d not in update_window_dims]
    window_operand_dims = [d for d in range(rank)
                           if d not in inserted and d not in input_batching]
    idx_batch_dims = [d for d in range(indices.ndim + (ivd == indices.ndim)) if d != ivd]
    wsizes = [1] * rank
    for od, ud in zip(window_operand_dims, update_window_dims):
        wsizes[od] = upd_shape[ud]
    for u_idx in itertools.product(*[range(s) for s in upd_shape]):
        g = [u_idx[d] for d in scatter_dims]
        if ivd == indices.ndim:
            vec = [indices[tuple(g)]]
        else:
            vec = [indices[tuple(g[:ivd] + [k] + g[ivd:])] for k in range(indices.shape[ivd])]
        start = [0] * rank
        for k, d in enumerate(sd2od):
            start[d] = int(vec[k])
        for od, idim in zip(input_batching, indices_batching):
            start[od] = g[idx_batch_dims.index(idim)]
        if any(start[d] < 0 or start[d] + wsizes[d] > operands[0].shape[d]
               for d in range(rank)):
            continue
        full = list(start)
        for k, od in enumerate(window_operand_dims):
            full[od] += u_idx[update_window_dims[k]]
        cur = [o[tuple(full)] for o in outs]
        new = combine(*cur, *[u[u_idx] for u in updates])
        new = new if isinstance(new, tuple) else (new,)
        for o, v in zip(outs, new):
            o[tuple(full)] = v
    return outs


# ---- gather -----------------------------------------------------------------------------
GATHER_ROWS = """
HloModule g
ENTRY e {
  t = f32[10,4] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,4] gather(t, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
}
"""


def test_gather_rows_and_clamping():
    rng = np.random.default_rng(0)
    t = rng.standard_normal((10, 4)).astype(np.float32)
    i = np.array([[3], [0], [9], [-5], [42]], dtype=np.int32)
    out = run(GATHER_ROWS, "g", [t, i])
    # start indices clamp into [0, 10 - 1]
    np.testing.assert_array_equal(out, t[[3, 0, 9, 0, 9]])


GATHER_GENERAL = """
HloModule g
ENTRY e {
  op = s32[5,6,7] parameter(0)
  i = s32[2,3,4] parameter(1)
  ROOT g = s32[3,2,4,3] gather(op, i), offset_dims={1,3}, collapsed_slice_dims={1},
      start_index_map={2,1}, index_vector_dim=0, slice_sizes={2,1,3}
}
"""


def test_gather_general_dimension_numbers():
    rng = np.random.default_rng(1)
    op = rng.integers(-100, 100, (5, 6, 7)).astype(np.int32)
    i = rng.integers(-2, 9, (2, 3, 4)).astype(np.int32)
    out = run(GATHER_GENERAL, "g", [op, i])
    # offset dims 1,3 <- operand dims 0 and 2 (sizes 2, 3); batch dims 0,2 <- the
    # indices' dims 1,2 (sizes 3, 4)
    expected = ref_gather(op, i, [1, 3], {1}, [2, 1], 0, [2, 1, 3], out.shape)
    np.testing.assert_array_equal(out, expected)


GATHER_BATCHING = """
HloModule g
ENTRY e {
  op = f32[3,8,5] parameter(0)
  i = s32[3,4,1] parameter(1)
  ROOT g = f32[3,4,5] gather(op, i), offset_dims={2}, collapsed_slice_dims={1},
      start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},
      index_vector_dim=2, slice_sizes={1,1,5}
}
"""


def test_gather_with_batching_dims():
    rng = np.random.default_rng(2)
    op = rng.standard_normal((3, 8, 5)).astype(np.float32)
    i = rng.integers(0, 8, (3, 4, 1)).astype(np.int32)
    out = run(GATHER_BATCHING, "g", [op, i])
    expected = np.take_along_axis(op, i.astype(np.int64), axis=1)  # [3,4,5]
    np.testing.assert_array_equal(out, expected)
    ref = ref_gather(op, i, [2], {1}, [1], 2, [1, 1, 5], out.shape, [0], [0])
    np.testing.assert_array_equal(out, ref)


def test_gather_scalar_indices_implicit_vector_dim():
    text = """
HloModule g
ENTRY e {
  op = f32[6,3] parameter(0)
  i = s32[4] parameter(1)
  ROOT g = f32[4,2] gather(op, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
}
"""
    op = np.arange(18, dtype=np.float32).reshape(6, 3)
    i = np.array([5, 1, 0, 7], dtype=np.int32)
    out = run(text, "g", [op, i])
    np.testing.assert_array_equal(out, op[[5, 1, 0, 5], :2])


# ---- scatter ----------------------------------------------------------------------------
SCATTER_TMPL = """
HloModule s
%comb (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] {body}
}
ENTRY e {
  op = f32[6,3] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,3] parameter(2)
  ROOT s = f32[6,3] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%comb
}
"""
ORDER_SENSITIVE = """
HloModule s
%comb (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %two = f32[] constant(2)
  %m = f32[] multiply(%a, %two)
  ROOT %r = f32[] add(%m, %b)
}
ENTRY e {
  op = f32[6,3] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,3] parameter(2)
  ROOT s = f32[6,3] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%comb
}
"""


def _scatter_inputs():
    rng = np.random.default_rng(3)
    op = rng.integers(-4, 5, (6, 3)).astype(np.float32)
    i = np.array([[2], [4], [2], [2], [0]], dtype=np.int32)  # row 2 three times
    u = rng.integers(-4, 5, (5, 3)).astype(np.float32)
    return op, i, u


@pytest.mark.parametrize("body,fn", [
    ("add(%a, %b)", lambda a, b: a + b),
    ("add(%b, %a)", lambda a, b: a + b),
    ("maximum(%a, %b)", max),
    ("multiply(%a, %b)", lambda a, b: a * b),
    ("subtract(%a, %b)", lambda a, b: a - b),   # not a fast-path combiner
])
@pytest.mark.parametrize("batched", [False, True])
def test_scatter_non_unique_indices(body, fn, batched):
    op, i, u = _scatter_inputs()
    out = run(SCATTER_TMPL.replace("{body}", body), "s", [op, i, u], batched=batched)
    expected = ref_scatter([op], i, [u], [1], {0}, [0], 1, fn)[0]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("batched", [False, True])
def test_scatter_custom_combiner_applies_duplicates_in_order(batched):
    op, i, u = _scatter_inputs()
    ctx = StandInCtx(batched)
    out = run(ORDER_SENSITIVE, "s", [op, i, u], ctx=ctx)
    expected = ref_scatter([op], i, [u], [1], {0}, [0], 1, lambda a, b: a * 2 + b)[0]
    np.testing.assert_array_equal(out, expected)
    # row 2 got updates 0, 2, 3 in that order: ((x*2+u0)*2+u2)*2+u3
    np.testing.assert_array_equal(out[2], ((op[2] * 2 + u[0]) * 2 + u[2]) * 2 + u[3])
    if batched:
        assert ctx.calls == 0 and ctx.batched_calls == 3  # three rounds (row 2 thrice)
    else:
        assert ctx.calls == 15


def test_scatter_assign_last_update_wins():
    op, i, u = _scatter_inputs()
    text = SCATTER_TMPL.replace("  %b = f32[] parameter(1)\n  ROOT %r = f32[] {body}",
                                "  ROOT %b = f32[] parameter(1)")
    assert "ROOT %b" in text
    out = run(text, "s", [op, i, u])
    expected = op.copy()
    for k in range(5):
        expected[i[k, 0]] = u[k]
    np.testing.assert_array_equal(out, expected)


def test_scatter_skips_out_of_bounds_windows():
    text = """
HloModule s
%add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = s32[] add(%a, %b)
}
ENTRY e {
  op = s32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = s32[4,2] parameter(2)
  ROOT s = s32[5] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
}
"""
    op = np.zeros(5, np.int32)
    i = np.array([[0], [4], [-1], [3]], np.int32)   # 4 and -1: window [4,6) / [-1,1) skipped
    u = np.array([[1, 2], [10, 20], [100, 200], [1000, 2000]], np.int32)
    out = run(text, "s", [op, i, u])
    np.testing.assert_array_equal(out, [1, 2, 0, 1000, 2000])


VARIADIC = """
HloModule s
%comb (a0: f32[], a1: s32[], b0: f32[], b1: s32[]) -> (f32[], s32[]) {
  %a0 = f32[] parameter(0)
  %a1 = s32[] parameter(1)
  %b0 = f32[] parameter(2)
  %b1 = s32[] parameter(3)
  %x = f32[] {op0}(%a0, %b0)
  %y = s32[] maximum(%a1, %b1)
  ROOT %t = (f32[], s32[]) tuple(%x, %y)
}
ENTRY e {
  o0 = f32[4,2] parameter(0)
  o1 = s32[4,2] parameter(1)
  i = s32[3] parameter(2)
  u0 = f32[3,2] parameter(3)
  u1 = s32[3,2] parameter(4)
  ROOT s = (f32[4,2], s32[4,2]) scatter(o0, o1, i, u0, u1), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      to_apply=%comb
}
"""


@pytest.mark.parametrize("op0,fn0", [("add", np.add), ("subtract", np.subtract)])
@pytest.mark.parametrize("batched", [False, True])
def test_variadic_scatter(op0, fn0, batched):
    rng = np.random.default_rng(4)
    o0 = rng.standard_normal((4, 2)).astype(np.float32)
    o1 = rng.integers(-9, 9, (4, 2)).astype(np.int32)
    i = np.array([1, 3, 1], np.int32)
    u0 = rng.standard_normal((3, 2)).astype(np.float32)
    u1 = rng.integers(-9, 9, (3, 2)).astype(np.int32)
    out = run(VARIADIC.replace("{op0}", op0), "s", [o0, o1, i, u0, u1], batched=batched)
    exp = ref_scatter([o0, o1], i, [u0, u1], [1], {0}, [0], 1,
                      lambda a0, a1, b0, b1: (fn0(a0, b0), max(a1, b1)))
    np.testing.assert_allclose(out[0], exp[0], rtol=1e-6)
    np.testing.assert_array_equal(out[1], exp[1])


def test_scatter_with_batching_dims():
    text = """
HloModule s
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}
ENTRY e {
  op = f32[3,5,2] parameter(0)
  i = s32[4,3] parameter(1)
  u = f32[4,3,2] parameter(2)
  ROOT s = f32[3,5,2] scatter(op, i, u), update_window_dims={2}, inserted_window_dims={1},
      input_batching_dims={0}, scatter_indices_batching_dims={1},
      scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=%add
}
"""
    rng = np.random.default_rng(5)
    op = rng.standard_normal((3, 5, 2)).astype(np.float32)
    i = rng.integers(0, 5, (4, 3)).astype(np.int32)
    u = rng.standard_normal((4, 3, 2)).astype(np.float32)
    out = run(text, "s", [op, i, u])
    expected = op.astype(np.float64).copy()
    for k in range(4):
        for b in range(3):
            expected[b, i[k, b]] += u[k, b]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    ref = ref_scatter([op], i, [u], [2], {1}, [1], 2, lambda a, b: a + b, [0], [1])[0]
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_scatter_gather_sample_matches_xla_fixture():
    execute = execute_or_skip()
    from pathlib import Path

    import hlo_opt
    root = Path(__file__).resolve().parents[3]
    mod = hlo_opt.load(str(root / "sample_modules" / "scatter_gather.hlo"))
    data = np.load(root / "tests" / "fixtures" / "scatter_gather.npz")
    outs = execute(mod, [data["arg0"], data["arg1"], data["arg2"]])
    np.testing.assert_allclose(outs[0], data["out0"], rtol=1e-6)
    np.testing.assert_allclose(outs[1], data["out1"], rtol=1e-5, atol=1e-6)


def test_order_sensitive_combiner_through_the_real_evaluator():
    execute = execute_or_skip()
    from hlo_opt.api import parse_hlo
    op, i, u = _scatter_inputs()
    out, = execute(parse_hlo(ORDER_SENSITIVE), [op, i, u])
    expected = ref_scatter([op], i, [u], [1], {0}, [0], 1, lambda a, b: a * 2 + b)[0]
    np.testing.assert_array_equal(out, expected)


def test_column_windows_spanning_the_leading_dim():
    """Windows that span dim 0 entirely but index dim 1 (the sliced addressing reorders
    dims internally)."""
    gather_text = """
HloModule g
ENTRY e {
  op = s32[4,10] parameter(0)
  i = s32[3] parameter(1)
  ROOT g = s32[4,3,2] gather(op, i), offset_dims={0,2}, collapsed_slice_dims={},
      start_index_map={1}, index_vector_dim=1, slice_sizes={4,2}
}
"""
    op = np.arange(40, dtype=np.int32).reshape(4, 10)
    i = np.array([7, 0, 9], np.int32)          # 9 clamps to 8
    out = run(gather_text, "g", [op, i])
    np.testing.assert_array_equal(out, ref_gather(op, i, [0, 2], set(), [1], 1, [4, 2],
                                                  out.shape))
    scatter_text = """
HloModule s
%add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = s32[] add(%a, %b)
}
ENTRY e {
  op = s32[4,10] parameter(0)
  i = s32[3] parameter(1)
  u = s32[4,3,2] parameter(2)
  ROOT s = s32[4,10] scatter(op, i, u), update_window_dims={0,2}, inserted_window_dims={},
      scatter_dims_to_operand_dims={1}, index_vector_dim=1, to_apply=%add
}
"""
    u = np.arange(24, dtype=np.int32).reshape(4, 3, 2)
    i = np.array([7, 0, 7], np.int32)
    out = run(scatter_text, "s", [op, i, u])
    np.testing.assert_array_equal(
        out, ref_scatter([op], i, [u], [0, 2], set(), [1], 1, lambda a, b: a + b)[0])


_SCALAR_SCATTER = """HloModule s
comb {{ a = s32[] parameter(0)
 b = s32[] parameter(1)
 ROOT c = s32[] {body} }}
ENTRY e {{
  op = s32[] parameter(0)
  idx = s32[3,0] parameter(1)
  upd = s32[3] parameter(2)
  ROOT s = s32[] scatter(op, idx, upd), update_window_dims={{}}, inserted_window_dims={{}}, scatter_dims_to_operand_dims={{}}, index_vector_dim=1, to_apply=comb
}}
"""


@pytest.mark.parametrize("body,expected", [
    ("add(a, b)", 5 + 1 + 2 + 3),          # fast path
    ("subtract(b, a)", 3 - (2 - (1 - 5))),  # generic combiner, applied in update order
])
def test_scatter_into_a_scalar_combines_every_update_in_order(body, expected):
    import hlo_opt
    module = hlo_opt.parse_hlo(_SCALAR_SCATTER.format(body=body))
    out = hlo_opt.execute(module, [np.int32(5), np.zeros((3, 0), np.int32),
                                   np.array([1, 2, 3], np.int32)])
    assert out[0] == expected
