"""triton-gemm-rewriter (XLA's GemmFusion): which dots become ``__triton_gemm`` kCustom
fusions and what they take in, each case checked through the interpreter before and
after (and the verifier); then its place in the ``gpu`` pipeline."""
from __future__ import annotations

import functools

from hlo_opt.analysis.device import DeviceInfo
from hlo_opt.api import parse_hlo
from hlo_opt.codegen.gemm_fusion import DEFAULT_TILE, is_triton_gemm_fusion, tile_config_of
from hlo_opt.flags import DebugOptions
from hlo_opt.ir.config import HloModuleConfig
from passes.gpu.gemm_fusion import GemmFusion
from passes.pipelines import build_pipeline

from . import util

PASS = "triton-gemm-rewriter"
check = functools.partial(util.check, rtol=2e-2, atol=2e-2)


def _gemm_fusions(module):
    return [i for i in module.entry.post_order() if is_triton_gemm_fusion(i)]


CONVERT_SCALE = """HloModule m
ENTRY e {
  a = bf16[64,96]{1,0} parameter(0)
  b = bf16[96,32]{1,0} parameter(1)
  ca = f32[64,96]{1,0} convert(a)
  cb = f32[96,32]{1,0} convert(b)
  d = f32[64,32]{1,0} dot(ca, cb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.5)
  bc = f32[64,32]{1,0} broadcast(c), dimensions={}
  ROOT s = f32[64,32]{1,0} multiply(d, bc)
}
"""


def test_converts_and_the_scale_fuse_around_the_dot():
    r = check(CONVERT_SCALE, PASS)
    assert r.changed
    (f,) = _gemm_fusions(r.module)
    assert f.name == "gemm_fusion_d" and f.attrs["kind"] == "kCustom"
    assert f.called[0].name == "gemm_fusion_d_computation"
    assert util.fused_ops(f) == ["broadcast", "constant", "convert", "convert", "dot",
                                 "multiply"]
    assert f.is_root and [o.opcode for o in f.operands] == ["parameter", "parameter"]


def test_a_pure_matmul_is_left_to_cublas():
    text = """HloModule m
ENTRY e {
  a = f32[64,96]{1,0} parameter(0)
  b = f32[96,32]{1,0} parameter(1)
  r = f32[96,32]{1,0} reshape(b)
  ROOT d = f32[64,32]{1,0} dot(a, r), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    assert not check(text, PASS).changed
    # ... unless --xla_gpu_triton_gemm_any
    assert check(text, PASS, xla_gpu_triton_gemm_any=True).changed


def test_a_pure_matmul_cublas_would_have_to_pad_is_taken():
    # f16 with a dimension that is no multiple of 8: cublas-pad-for-gemms leaves the dot to
    # Triton only when Triton wants it; a pure one is padded for cuBLAS before this pass
    text = """HloModule m
ENTRY e {
  a = f16[64,30]{1,0} parameter(0)
  b = f16[30,60]{1,0} parameter(1)
  ROOT d = f16[64,60]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    assert check(text, PASS).changed
    assert not check(text, "cublas-pad-for-gemms,triton-gemm-rewriter").module.entry.root \
        .opcode == "fusion"


def test_small_dots_stay_dots():
    text = """HloModule m
ENTRY e {
  a = bf16[4,5]{1,0} parameter(0)
  b = bf16[5,3]{1,0} parameter(1)
  ca = f32[4,5]{1,0} convert(a)
  cb = f32[5,3]{1,0} convert(b)
  ROOT d = f32[4,3]{1,0} dot(ca, cb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    assert not check(text, PASS).changed


def test_matrix_vector_and_unsupported_types_are_not_triton_gemms():
    gemv = """HloModule m
ENTRY e {
  a = bf16[256,128]{1,0} parameter(0)
  v = bf16[128]{0} parameter(1)
  ca = f32[256,128]{1,0} convert(a)
  cv = f32[128]{0} convert(v)
  ROOT d = f32[256]{0} dot(ca, cv), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    assert not check(gemv, PASS).changed
    f64 = CONVERT_SCALE.replace("f32", "f64")
    assert not check(f64, PASS).changed


def test_before_ampere_nothing_changes():
    m = parse_hlo(CONVERT_SCALE)
    m.config = m.config.replace(device=DeviceInfo(name="V100", compute_capability=(7, 0)))
    assert not GemmFusion().run(m)


def test_shared_producers_are_copied_and_parameters_per_operand_are_limited():
    # the convert also feeds an add outside: it is copied into the fusion (XLA duplicates
    # producers); the lhs chain reads 5 arrays, over the limit of 4 per operand
    text = """HloModule m
ENTRY e {
  a = bf16[64,96]{1,0} parameter(0)
  b = f32[96,32]{1,0} parameter(1)
  p2 = f32[96]{0} parameter(2)
  p3 = f32[96]{0} parameter(3)
  p4 = f32[96]{0} parameter(4)
  p5 = f32[96]{0} parameter(5)
  b2 = f32[64,96]{1,0} broadcast(p2), dimensions={1}
  b3 = f32[64,96]{1,0} broadcast(p3), dimensions={1}
  b4 = f32[64,96]{1,0} broadcast(p4), dimensions={1}
  b5 = f32[64,96]{1,0} broadcast(p5), dimensions={1}
  ca = f32[64,96]{1,0} convert(a)
  x1 = f32[64,96]{1,0} add(ca, b2)
  x2 = f32[64,96]{1,0} add(x1, b3)
  x3 = f32[64,96]{1,0} add(x2, b4)
  x4 = f32[64,96]{1,0} add(x3, b5)
  d = f32[64,32]{1,0} dot(x4, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[64,32]{1,0}, f32[64,96]{1,0}) tuple(d, ca)
}
"""
    r = check(text, PASS)
    assert r.changed
    (f,) = _gemm_fusions(r.module)
    assert len(f.operands) <= 5   # 4 for the lhs, 1 for the rhs
    assert "add" in util.fused_ops(f)


def test_in_while_bodies_and_transposed_operands():
    text = """HloModule m
body {
  p = (s32[], f32[32,48]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[32,48]{1,0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  n = s32[] add(i, one)
  w = f32[48,32]{1,0} transpose(x), dimensions={1,0}
  d = f32[32,32]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[32,48]{1,0} slice(x), slice={[0:32], [0:48]}
  dd = f32[32,48]{1,0} dot(d, s), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[], f32[32,48]) tuple(n, dd)
}
cond {
  p = (s32[], f32[32,48]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  k = s32[] constant(2)
  ROOT lt = pred[] compare(i, k), direction=LT
}
ENTRY e {
  x = f32[32,48]{1,0} parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[32,48]) tuple(z, x)
  ROOT w = (s32[], f32[32,48]) while(t), condition=cond, body=body
}
"""
    r = check(text, PASS, rtol=1e-3, atol=1e-3)
    assert r.changed
    body = r.module.computation("body")
    assert sum(is_triton_gemm_fusion(i) for i in body.instructions) == 1


def _gpu(text, **flags):
    config = HloModuleConfig(debug_options=DebugOptions(**flags))
    return util.run(text, build_pipeline("gpu", config), **flags)


def test_gpu_pipeline_forms_gemm_fusions_only_with_the_flag():
    on = _gpu(CONVERT_SCALE)
    (f,) = _gemm_fusions(on)
    # no autotuning session: XLA's default tile configuration (autotune level 0)
    assert tile_config_of(f) == DEFAULT_TILE
    off = _gpu(CONVERT_SCALE, xla_gpu_enable_triton_gemm=False)
    assert not _gemm_fusions(off)
    assert any(i.opcode == "custom-call" for i in off.entry.instructions)
