"""Gemm fusions (``__triton_gemm``) as generated CUDA kernels: each module below goes
through ``triton-gemm-rewriter``, is generated as one tiled gemm kernel with its fused
prologue and epilogue (no host step), runs under cuda-sim against the interpreter (for
every tile candidate on one module), and compiles with NVRTC for sm_80 and sm_90."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.codegen.gemm_fusion import (DEFAULT_TILE, TILE_CANDIDATES, is_triton_gemm_fusion,
                                         set_tile_config)
from tests.backends.cuda.support import require_gxx, require_nvrtc

MODULES = {
    # bf16 operands converted in the prologue, a scale in the epilogue
    "convert_scale": """HloModule convert_scale
ENTRY e {
  a = bf16[48,40]{1,0} parameter(0)
  b = bf16[40,24]{1,0} parameter(1)
  ca = f32[48,40]{1,0} convert(a)
  cb = f32[40,24]{1,0} convert(b)
  d = f32[48,24]{1,0} dot(ca, cb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0.25)
  bc = f32[48,24]{1,0} broadcast(c), dimensions={}
  ROOT s = f32[48,24]{1,0} multiply(d, bc)
}
""",
    # sizes no tile divides, a transposed and negated rhs, a bf16 result
    "ragged_transposed": """HloModule ragged_transposed
ENTRY e {
  a = bf16[37,29]{1,0} parameter(0)
  w = bf16[45,29]{1,0} parameter(1)
  n = bf16[45,29]{1,0} negate(w)
  t = bf16[29,45]{1,0} transpose(n), dimensions={1,0}
  ROOT d = bf16[37,45]{1,0} dot(a, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""",
    # one batch dimension, a broadcast row vector added in the prologue, f16 -> f32 out
    "batched_prologue": """HloModule batched_prologue
ENTRY e {
  a = f16[3,20,36]{2,1,0} parameter(0)
  v = f16[36]{0} parameter(1)
  b = f16[3,36,28]{2,1,0} parameter(2)
  bv = f16[3,20,36]{2,1,0} broadcast(v), dimensions={2}
  x = f16[3,20,36]{2,1,0} add(a, bv)
  d = f16[3,20,28]{2,1,0} dot(x, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT o = f32[3,20,28]{2,1,0} convert(d)
}
""",
    # a layer-norm-like prologue on a bitcast operand, the result bitcast back to 3-D
    "bitcast_epilogue": """HloModule bitcast_epilogue
ENTRY e {
  x = f32[2,16,32]{2,1,0} parameter(0)
  g = f32[32]{0} parameter(1)
  w = f32[32,40]{1,0} parameter(2)
  bg = f32[2,16,32]{2,1,0} broadcast(g), dimensions={2}
  y = f32[2,16,32]{2,1,0} multiply(x, bg)
  b = f32[32,32]{1,0} bitcast(y)
  d = f32[32,40]{1,0} dot(b, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(3)
  bc = f32[32,40]{1,0} broadcast(c), dimensions={}
  s = f32[32,40]{1,0} multiply(d, bc)
  ROOT r = f32[2,16,40]{2,1,0} bitcast(s)
}
""",
    # an f32 dot whose output is scaled by a parameter (column-major result)
    "f32_param_scale": """HloModule f32_param_scale
ENTRY e {
  a = f32[33,64]{1,0} parameter(0)
  b = f32[64,17]{0,1} parameter(1)
  s = f32[33,17]{0,1} parameter(2)
  d = f32[33,17]{0,1} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT m = f32[33,17]{0,1} multiply(d, s)
}
""",
    # the epilogue stores in another layout than the dot's (mlp_train_step's weight
    # gradients after the gpu pipeline: a row-major dot, a column-major scaled result)
    "transposed_store": """HloModule transposed_store
ENTRY e {
  a = f32[40,36]{1,0} parameter(0)
  b = f32[40,20]{1,0} parameter(1)
  d = f32[36,20]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[] constant(0.01)
  bc = f32[36,20]{1,0} broadcast(c), dimensions={}
  ROOT m = f32[36,20]{0,1} multiply(d, bc)
}
""",
}


def _fused(text):
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    m = parse_hlo(text)
    out = passes_api.optimize(m.clone(), DebugOptions.from_sources([]),
                              passes=["triton-gemm-rewriter"])
    assert any(is_triton_gemm_fusion(i) for i in out.entry.instructions)
    return m, out


def _program(module, tile=None):
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda.target import target_device
    if tile is not None:
        for f in module.entry.instructions:
            if is_triton_gemm_fusion(f):
                set_tile_config(f, tile)
    prog = build_program(module, target_device(module, None))
    assert not prog.host_fallbacks, prog.host_fallbacks
    assert any(k.kind == "triton_gemm" for k in prog.kernels)
    return prog


@pytest.mark.parametrize("name", sorted(MODULES))
def test_gemm_fusion_kernel_matches_the_interpreter_under_cuda_sim(name):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda_sim import SimExecutable
    raw, fused = _fused(MODULES[name])
    exe = SimExecutable(fused, program=_program(fused))
    r = check_executable(raw, exe)
    assert r.status == "pass", r.detail


@pytest.mark.parametrize("tile", TILE_CANDIDATES, ids=lambda t: f"{t.block_m}x{t.block_n}x"
                         f"{t.block_k}w{t.num_warps}")
def test_every_tile_candidate_is_correct(tile):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda_sim import SimExecutable
    raw, fused = _fused(MODULES["ragged_transposed"])
    prog = _program(fused, tile)
    (k,) = [k for k in prog.kernels if k.kind == "triton_gemm"]
    assert k.block == (tile.threads, 1, 1) and k.extra["tile"] == tile
    r = check_executable(raw, SimExecutable(fused, program=prog))
    assert r.status == "pass", r.detail


def test_default_tile_is_xlas():
    assert (DEFAULT_TILE.block_m, DEFAULT_TILE.block_n, DEFAULT_TILE.block_k,
            DEFAULT_TILE.num_warps) == (32, 32, 32, 4)
    assert all(t.thread_tile() is not None for t in TILE_CANDIDATES)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_the_gemm_fusion_kernels(arch, tmp_path, monkeypatch):
    require_nvrtc()
    monkeypatch.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import full_source
    for name in sorted(MODULES):
        prog = _program(_fused(MODULES[name])[1])
        m = compile_cuda(full_source(prog), arch)
        assert m.cubin[:4] == b"\x7fELF" and f".target {arch}" in m.ptx
        for k in prog.kernels:
            assert f".entry {k.name}(" in m.ptx
