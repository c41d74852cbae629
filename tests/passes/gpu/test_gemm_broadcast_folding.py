"""gemm-broadcast-folding-rewriter: XLA's GemmBroadcastFoldingRewriteTest cases
(gemm_broadcast_folding_rewrite_test.cc), checked on the graph and by the interpreter,
both from the dot (through cublas-gemm-rewriter) and on the cuBLAS call alone."""
from __future__ import annotations

import numpy as np

from hlo_opt.api import parse_hlo
from hlo_opt.backends import execute
from passes.gpu.gemm_rewriter import gemm_config

from tests.support.harness import assert_close, random_args
from .util import check, run

PASSES = "cublas-gemm-rewriter,gemm-broadcast-folding-rewriter"
SMALL = dict(xla_gpu_gemm_rewrite_size_threshold=0)

RHS = """HloModule BroadcastedInput

ENTRY AddDotsFunc {
  x = f32[3,2,2]{2,1,0} parameter(0)
  y = f32[2,2]{1,0} parameter(1)
  y_broadcast = f32[3,2,2]{2,1,0} broadcast(y), dimensions={1,2}
  ROOT dot_a = f32[3,2,2]{2,1,0} dot(x, y_broadcast), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"""

LHS = """HloModule BroadcastedInput

ENTRY AddDotsFunc {
  x = f32[2,2]{1,0} parameter(0)
  y = f32[3,2,2]{2,1,0} parameter(1)
  x_broadcast = f32[3,2,2]{2,1,0} broadcast(x), dimensions={1,2}
  ROOT dot_a = f32[3,2,2]{2,1,0} dot(x_broadcast, y), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"""


def _gemm(m):
    (g,) = [i for i in m.entry.instructions if i.opcode == "custom-call"]
    return g, gemm_config(g)["dot_dimension_numbers"]


def _same_outputs(before, after, seeds=(0, 1)):
    """The differential check for modules that already hold cuBLAS calls (the harness
    leaves custom-calls out): interpreter outputs before == after."""
    for seed in seeds:
        args = random_args(before, seed)
        assert_close([np.asarray(x) for x in execute(before, args)],
                     [np.asarray(x) for x in execute(after, args)], 1e-5, 1e-6,
                     f"seed {seed}")


def test_broadcasted_strided_rewrite_rhs():
    r = check(RHS, PASSES, **SMALL)
    g, d = _gemm(r.module)
    assert [o.name for o in g.operands] == ["x", "y"]
    assert d == {"lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["0"],
                 "lhs_batch_dimensions": ["0"], "rhs_batch_dimensions": []}
    assert gemm_config(g)["epilogue"] == "DEFAULT"
    assert "broadcast" not in [i.opcode for i in r.module.entry.instructions]


def test_broadcasted_strided_rewrite_lhs():
    r = check(LHS, PASSES, **SMALL)
    g, d = _gemm(r.module)
    assert [o.name for o in g.operands] == ["x", "y"]
    assert d == {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["1"],
                 "lhs_batch_dimensions": [], "rhs_batch_dimensions": ["0"]}


def test_pass_changed_on_the_cublas_call():
    # BroadcastedStridedRewrite{Rhs,Lhs}PassChanged: the pass alone, after the rewriter
    for text in (RHS, LHS):
        gemm = run(text, "cublas-gemm-rewriter", **SMALL)
        folded = run(gemm, "gemm-broadcast-folding-rewriter", **SMALL)
        assert folded.to_text() != gemm.to_text()
        _same_outputs(gemm, folded)


def test_cublaslt_call_is_folded_too():
    r = check(RHS, PASSES, xla_gpu_enable_cublaslt=True, **SMALL)
    g, d = _gemm(r.module)
    assert g.custom_call_target == "__cublas$lt$matmul" and d["rhs_batch_dimensions"] == []


NONZERO = """HloModule {name}

ENTRY %{name} (Arg_1: f32[4,3], Arg_2: f32[4,7,3]) -> f32[4,7,7] {{
  %Arg_1 = f32[4,3]{{1,0}} parameter(0)
  %Arg_2 = f32[4,7,3]{{2,1,0}} parameter(1)
  %broadcast.22 = f32[7,4,3]{{2,1,0}} broadcast(f32[4,3]{{1,0}} %Arg_1), dimensions={{1,2}}
  ROOT %dot.24 = f32[4,7,7]{{2,1,0}} dot({operands}), {dims}
}}
"""


def test_lhs_batch_dim_non_zero():
    text = NONZERO.format(
        name="LHSBatchDimNonZero",
        operands="f32[7,4,3]{2,1,0} %broadcast.22, f32[4,7,3]{2,1,0} %Arg_2",
        dims="lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
             "rhs_contracting_dims={2}")
    gemm = run(text, "cublas-gemm-rewriter", **SMALL)
    assert any(i.opcode == "custom-call" for i in gemm.entry.instructions)
    assert run(gemm, "gemm-broadcast-folding-rewriter").to_text() == gemm.to_text()
    check(text, PASSES, **SMALL)  # and the rewrite itself computes the same


def test_rhs_batch_dim_non_zero():
    text = NONZERO.format(
        name="RHSBatchDimNonZero",
        operands="f32[4,7,3]{2,1,0} %Arg_2, f32[7,4,3]{2,1,0} %broadcast.22",
        dims="lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
             "rhs_contracting_dims={2}")
    gemm = run(text, "cublas-gemm-rewriter", **SMALL)
    assert run(gemm, "gemm-broadcast-folding-rewriter").to_text() == gemm.to_text()


def test_broadcast_along_a_non_batch_dimension_is_kept():
    # the broadcast adds the batch dim and a matrix dim: not only batch dimensions
    text = """HloModule keep
ENTRY e {
  x = f32[3,2,4]{2,1,0} parameter(0)
  y = f32[4]{0} parameter(1)
  yb = f32[3,4,5]{2,1,0} broadcast(y), dimensions={1}
  ROOT d = f32[3,2,5]{2,1,0} dot(x, yb), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"""
    gemm = run(text, "cublas-gemm-rewriter", **SMALL)
    assert run(gemm, "gemm-broadcast-folding-rewriter").to_text() == gemm.to_text()


def test_two_batch_dimensions():
    text = """HloModule two
ENTRY e {
  x = f32[2,3,4,5]{3,2,1,0} parameter(0)
  y = f32[5,6]{1,0} parameter(1)
  yb = f32[2,3,5,6]{3,2,1,0} broadcast(y), dimensions={2,3}
  ROOT d = f32[2,3,4,6]{3,2,1,0} dot(x, yb), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_contracting_dims={2}
}
"""
    r = check(text, PASSES, **SMALL)
    g, d = _gemm(r.module)
    assert d["rhs_batch_dimensions"] == [] and d["rhs_contracting_dimensions"] == ["0"]
    assert g.operands[1].name == "y"


def test_the_folded_call_runs_on_the_interpreter():
    module = parse_hlo(RHS)
    folded = run(module, PASSES, **SMALL)
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    y = np.array([[1, 2], [3, 4]], np.float32)
    (out,) = execute(folded, [x, y])
    np.testing.assert_allclose(np.asarray(out), np.einsum("bij,jk->bik", x, y))
