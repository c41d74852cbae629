"""NVRTC compiler: CUBIN + PTX for the exact sm_XX, the disk cache (a hit never calls
NVRTC), errors with NVRTC's log, the standalone ptxas check."""
from __future__ import annotations

import pytest

from tests.backends.cuda.support import require_nvrtc, require_ptxas

SRC = 'extern "C" __global__ void add_one(float* a) { a[threadIdx.x] += 1.f; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cubin_and_ptx(cache, arch):
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    m = compile_cuda(SRC, arch)
    assert m.cubin[:4] == b"\x7fELF" and not m.cached
    assert f".target {arch}" in m.ptx and ".visible .entry add_one(" in m.ptx


def test_cache_hit_skips_nvrtc(cache, monkeypatch):
    require_nvrtc()
    from hlo_opt.backends.cuda import compiler, toolchain
    first = compiler.compile_cuda(SRC, "sm_90")
    version = toolchain.nvrtc_version()

    class NoNvrtc:
        def __getattr__(self, name):
            raise AssertionError(f"NVRTC called on a cache hit ({name})")
    monkeypatch.setattr(toolchain, "nvrtc", lambda: NoNvrtc())
    monkeypatch.setattr(toolchain, "nvrtc_version", lambda: version)
    hit = compiler.compile_cuda(SRC, "sm_90")
    assert hit.cached and hit.cubin == first.cubin and hit.ptx == first.ptx
    # another arch, other options or another NVRTC version are other keys
    assert compiler.cache_key(SRC, "sm_80") != compiler.cache_key(SRC, "sm_90")
    assert compiler.cache_key(SRC, "sm_90", ("-O3",)) != compiler.cache_key(SRC, "sm_90")
    monkeypatch.setattr(toolchain, "nvrtc_version", lambda: (version[0], version[1] + 1))
    assert compiler.cache_key(SRC, "sm_90") != first and not \
        (cache / "cuda").joinpath(compiler.cache_key(SRC, "sm_90")[:2],
                                  compiler.cache_key(SRC, "sm_90") + ".cubin").exists()


def test_compile_error_carries_the_log(cache):
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import CudaCompileError, compile_cuda
    with pytest.raises(CudaCompileError) as e:
        compile_cuda('extern "C" __global__ void k() { int x = ; }', "sm_90", name="bad.cu")
    assert "bad.cu(1): error" in str(e.value)


def test_bad_arch_is_a_user_error():
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.errors import HloError
    with pytest.raises(HloError, match="sm_XX"):
        compile_cuda(SRC, "compute_90")


def test_ptxas_accepts_and_rejects(cache):
    require_nvrtc()
    require_ptxas()
    from hlo_opt.backends.cuda.compiler import (CudaCompileError, compile_cuda,
                                                kernel_resources, ptxas_check)
    m = compile_cuda(SRC, "sm_90")
    res = kernel_resources(ptxas_check(m.ptx, "sm_90"))
    assert res["add_one"]["registers"] > 0
    with pytest.raises(CudaCompileError, match="ptxas"):
        ptxas_check(m.ptx.replace("add.f32", "add.f33"), "sm_90")


def test_gemm_kernel_compiles_without_spills(cache):
    require_nvrtc()
    require_ptxas()
    from hlo_opt.backends.cuda.compiler import compile_cuda, kernel_resources, ptxas_check
    from hlo_opt.backends.cuda.gemm_kernel import gemm_launch, gemm_source
    from hlo_opt.backends.cuda.program import prelude
    src = prelude() + gemm_source("g_bf16", "bf16", "f32") + gemm_source("g_f16", "f16", "f16")
    m = compile_cuda(src, "sm_80")
    res = kernel_resources(ptxas_check(m.ptx, "sm_80"))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in m.ptx
    assert all(r["spill_stores"] == 0 for r in res.values()), res
    assert gemm_launch(256, 384, 64) == ((3, 2, 1), (256, 1, 1))
    with pytest.raises(ValueError):
        gemm_launch(100, 128, 32)
