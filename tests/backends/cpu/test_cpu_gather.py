"""gather as an elemental rule: row takes, 2-D starts, implicit index vector dim, clamped
out-of-range starts; each against the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

CASES = [
    # (operand, indices, out, attrs, index values)
    ("f32[5,4]", "s32[3,1]", "f32[3,4]",
     "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
     "slice_sizes={1,4}", [[4], [0], [9]]),
    ("f32[5,4]", "s32[3]", "f32[3,4]",
     "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
     "slice_sizes={1,4}", [2, -3, 1]),
    ("f32[6,7]", "s64[2,2]", "f32[2,3,2]",
     "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, "
     "index_vector_dim=1, slice_sizes={3,2}", [[1, 6], [5, 0]]),
    # batching dims (per-example takes, as JAX's vmap of a take lowers): operand dim 0
    # walks start-indices dim 0
    ("f32[3,5,4]", "s32[3,2,1]", "f32[3,2,4]",
     "offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=2, "
     "slice_sizes={1,1,4}, operand_batching_dims={0}, start_indices_batching_dims={0}",
     [[[4], [0]], [[2], [9]], [[1], [3]]]),
    # the batching dims in other positions: operand dim 2, start-indices dim 1
    ("f32[5,4,2]", "s32[3,2]", "f32[3,2,4]",
     "offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, "
     "slice_sizes={1,4,1}, operand_batching_dims={2}, start_indices_batching_dims={1}",
     [[4, 0], [2, 1], [1, 3]]),
]


@pytest.mark.parametrize("operand,indices,out,attrs,values", CASES)
def test_gather(operand, indices, out, attrs, values):
    m = parse_hlo_modules(f"""
HloModule g
ENTRY e {{
  x = {operand} parameter(0)
  i = {indices} parameter(1)
  ROOT g = {out} gather(x, i), {attrs}
}}
""", "g.hlo")[0]
    x = np.random.default_rng(0).standard_normal(m.entry.parameters[0].shape.dims)
    args = [x.astype(np.float32), np.array(values, dtype=m.entry.parameters[1].shape.dtype)]
    exe = CpuExecutable(m, cache=False)
    np.testing.assert_array_equal(exe.run(args)[0], Interpreter(m).run(args)[0])
    assert exe.host.calls == 0
