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


def _program(path: str):
    from hlo_opt import passes_api
    from hlo_opt.api import load
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda.target import target_device
    from hlo_opt.flags import DebugOptions
    from tests.conftest import SAMPLES
    m = load(str(SAMPLES / path))
    passes_api.optimize(m, DebugOptions(), pipeline="gpu")
    return build_program(m, target_device(), None)


def test_split_sources_keeps_every_kernel_once_in_order():
    from hlo_opt.backends.cuda.program import full_source, prelude, split_sources
    prog = _program("transformer_step.hlo")
    names = [k.name for k in prog.kernels]
    assert split_sources(prog, 1) == [(full_source(prog), names)]
    for parts in (2, 3, 7):
        split = split_sources(prog, parts)
        assert len(split) == parts
        assert [n for _, ns in split for n in ns] == names
        sizes = [len(src) for src, _ in split]
        assert all(src.startswith(prelude()) for src, _ in split)
        # each part ends within one kernel past its share of the total: parts differ by
        # less than two kernels
        assert max(sizes) - min(sizes) < 2 * max(len(k.code) for k in prog.kernels), sizes
    many = split_sources(prog, 10 ** 6)                   # never an empty part
    assert len(many) <= len(names) and all(ns for _, ns in many)


def test_compilation_parallelism_flags():
    from hlo_opt.backends.cuda.compiler import compilation_parts
    from hlo_opt.flags import DebugOptions
    assert compilation_parts(None) == 1 == compilation_parts(DebugOptions())   # XLA: off
    on = DebugOptions.from_sources(["--xla_gpu_enable_llvm_module_compilation_parallelism"])
    import os
    assert compilation_parts(on) == (os.cpu_count() or 1)
    on.xla_gpu_force_compilation_parallelism = 3
    assert compilation_parts(on) == 3


def test_parallel_parts_compile_the_same_kernels(cache):
    """--xla_gpu_enable_llvm_module_compilation_parallelism: the program in parts, each
    compiled on a thread of its own, gives every kernel's PTX entry once; each part loads
    as a module of its own and kernels are found by name."""
    require_nvrtc()
    import re
    from hlo_opt.backends.cuda import compile_program, load_parts
    from hlo_opt.flags import DebugOptions
    prog = _program("layer_norm.hlo")
    opts = DebugOptions(xla_gpu_enable_llvm_module_compilation_parallelism=True,
                        xla_gpu_force_compilation_parallelism=2)
    one, whole = compile_program(prog, "sm_90")
    two, merged = compile_program(prog, "sm_90", opts)
    entries = sorted(re.findall(r"^\.visible \.entry (\w+)\(", merged.ptx, re.M))
    assert len(one) == 1 and len(two) == min(2, len(prog.kernels))
    assert entries == sorted(re.findall(r"^\.visible \.entry (\w+)\(", whole.ptx, re.M))
    assert entries == sorted(k.name for k in prog.kernels)

    class Dev:   # a device that records which cubin each kernel is fetched from
        def load_module(self, cubin):
            return type("M", (), {"function": lambda self, n: (cubin, n)})()
    loaded = load_parts(Dev(), two)
    for mod, names in two:
        for n in names:
            assert loaded.function(n) == (mod.cubin, n)
