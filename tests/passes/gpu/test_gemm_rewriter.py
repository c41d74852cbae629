"""cublas-gemm-rewriter: dots become cuBLAS calls with XLA's backend config; epilogues."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from passes.gpu.gemm_rewriter import GEMM_TARGET, LT_TARGET, gemm_config

from .util import check, entry_ops, fusions, kinds, run

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

DOT = """HloModule d
ENTRY %main (a: f32[64,32], b: f32[32,16]) -> f32[64,16] {
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  ROOT %d = f32[64,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


# legacy cuBLAS (``__cublas$gemm``): the default is cuBLASLt, as XLA:GPU on every GPU now
LEGACY = dict(xla_gpu_enable_cublaslt=False)


def _gemms(m):
    return [i for i in m.entry.instructions if i.opcode == "custom-call"]


def test_dot_becomes_a_gemm_custom_call_with_workspace():
    m = check(DOT, "cublas-gemm-rewriter", **LEGACY).module
    (g,) = _gemms(m)
    assert g.custom_call_target == GEMM_TARGET
    assert g.name.startswith("cublas-gemm")
    # (out, s8[workspace]): legacy cuBLAS gets at most its operands' bytes (Hopper: 32 MiB)
    assert g.shape.to_text() == "(f32[64,16]{1,0}, s8[10240]{0})"
    assert m.entry.root.opcode == "get-tuple-element" and m.entry.root.attr("index") == 0
    cfg = json.loads(g.attrs["backend_config"])
    gemm = cfg["gemm_backend_config"]
    assert gemm["alpha_real"] == 1 and gemm["alpha_imag"] == 0 and gemm["beta"] == 0
    assert gemm["dot_dimension_numbers"] == {
        "lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
        "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}
    assert gemm["epilogue"] == "DEFAULT"
    assert gemm["precision_config"]["operand_precision"] == ["DEFAULT", "DEFAULT"]
    assert gemm["lhs_stride"] == "2048" and gemm["rhs_stride"] == "512"


def test_batched_dot():
    text = """HloModule bd
ENTRY %main (a: f32[4,8,16], b: f32[4,16,8]) -> f32[4,8,8] {
  %a = f32[4,8,16] parameter(0)
  %b = f32[4,16,8] parameter(1)
  ROOT %d = f32[4,8,8] dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""
    m = check(text, "cublas-gemm-rewriter", **LEGACY).module
    (g,) = _gemms(m)
    assert g.name.startswith("cublas-batch-gemm")
    assert gemm_config(g)["dot_dimension_numbers"]["lhs_batch_dimensions"] == ["0"]


def test_tiny_dot_stays_a_dot():
    text = DOT.replace("64,32", "4,4").replace("32,16", "4,4").replace("64,16", "4,4")
    m = run(text, "cublas-gemm-rewriter")
    assert entry_ops(m)[-1] == "dot"


def test_alpha_is_folded():
    text = """HloModule alpha
ENTRY %main (a: f32[64,32], b: f32[32,16]) -> f32[64,16] {
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  %d = f32[64,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = f32[] constant(3)
  %bc = f32[64,16] broadcast(%c), dimensions={}
  ROOT %m = f32[64,16] multiply(%d, %bc)
}
"""
    m = check(text, "cublas-gemm-rewriter").module
    (g,) = _gemms(m)
    assert gemm_config(g)["alpha_real"] == 3
    assert "multiply" not in entry_ops(m)


def test_matrix_bias_is_fused_as_beta():
    text = """HloModule bias
ENTRY %main (a: f32[64,32], b: f32[32,16], c: f32[64,16]) -> f32[64,16] {
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  %c = f32[64,16] parameter(2)
  %n = f32[64,16] negate(%c)
  %d = f32[64,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %s = f32[64,16] add(%d, %n)
}
"""
    m = check(text, "cublas-gemm-rewriter").module
    (g,) = _gemms(m)
    assert gemm_config(g)["beta"] == 1 and len(g.operands) == 3
    assert g.operands[2].opcode == "negate"
    assert g.attrs["output_to_operand_aliasing"] == "{{0}: (2, {})}"


def test_matrix_bias_from_a_parameter_is_not_overwritten():
    # legacy cuBLAS writes into its bias: a read-only parameter may not be the bias
    text = """HloModule pbias
ENTRY %main (a: f32[64,32], b: f32[32,16], c: f32[64,16]) -> f32[64,16] {
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  %c = f32[64,16] parameter(2)
  %d = f32[64,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %s = f32[64,16] add(%d, %c)
}
"""
    m = check(text, "cublas-gemm-rewriter", **LEGACY).module
    (g,) = _gemms(m)
    assert gemm_config(g)["beta"] == 0 and "add" in entry_ops(m)
    m2 = check(text, "cublas-gemm-rewriter", xla_gpu_enable_cublaslt=True).module
    (g2,) = _gemms(m2)
    assert g2.custom_call_target == LT_TARGET and gemm_config(g2)["beta"] == 1


def test_dot_bias_gelu_legacy_is_gemm_plus_one_loop_fusion():
    text = (SAMPLES / "matmul_bias_gelu.hlo").read_text()
    m = check(text, "cublas-gemm-rewriter,fusion", seeds=(0,), **LEGACY).module
    (g,) = _gemms(m)
    assert g.custom_call_target == GEMM_TARGET
    assert kinds(m) == ["kLoop"]
    (f,) = fusions(m)
    assert "tanh" in {i.opcode for i in f.called[0].instructions}


def test_dot_bias_gelu_cublaslt_is_one_call():
    text = (SAMPLES / "matmul_bias_gelu.hlo").read_text()
    m = check(text, "algsimp,cublas-gemm-rewriter,fusion", seeds=(0,),
              xla_gpu_enable_cublaslt=True).module
    (g,) = _gemms(m)
    assert g.custom_call_target == LT_TARGET
    assert gemm_config(g)["epilogue"] == "BIAS_GELU"
    assert g.shape.tuple_shapes[1].dims == (32 * 1024 * 1024,)  # Hopper workspace
    assert "tanh" not in {i.opcode for f in fusions(m) for i in f.called[0].instructions}


@pytest.mark.parametrize("bias", [False, True])
def test_relu_epilogue(bias):
    add = "%h = f32[64,16] add(%d, %bb)\n  ROOT %r = f32[64,16] maximum(%h, %z)" if bias \
        else "ROOT %r = f32[64,16] maximum(%d, %z)"
    text = f"""HloModule relu
ENTRY %main (a: f32[64,32], b: f32[32,16], v: f32[16]) -> f32[64,16] {{
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  %v = f32[16] parameter(2)
  %bb = f32[64,16] broadcast(%v), dimensions={{1}}
  %d = f32[64,16] dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %c0 = f32[] constant(0)
  %z = f32[64,16] broadcast(%c0), dimensions={{}}
  {add}
}}
"""
    m = check(text, "cublas-gemm-rewriter", xla_gpu_enable_cublaslt=True).module
    (g,) = _gemms(m)
    assert gemm_config(g)["epilogue"] == ("BIAS_RELU" if bias else "RELU")
    assert "maximum" not in entry_ops(m)
    # without cuBLASLt nothing but the dot is rewritten
    m2 = run(text, "cublas-gemm-rewriter", **LEGACY)
    assert "maximum" in entry_ops(m2)


def test_mlp_train_step_all_dots_rewritten():
    text = (SAMPLES / "mlp_train_step.hlo").read_text()
    m = check(text, "call-inliner,cublas-gemm-rewriter", seeds=(0,)).module
    assert "dot" not in entry_ops(m)
    assert len(_gemms(m)) == 5
