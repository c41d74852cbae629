"""Skips with a printed reason when a tool the CUDA tests need is missing."""
from __future__ import annotations

import shutil

import pytest


def require_gxx():
    if not (shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("cuda-sim needs a host C++ compiler (g++): not installed")


def require_nvrtc():
    from hlo_opt.backends.cuda import toolchain
    try:
        toolchain.nvrtc()
    except toolchain.MissingToolError as e:
        pytest.skip(str(e))


def require_ptxas():
    from hlo_opt.backends.cuda import toolchain
    try:
        toolchain.ptxas_path()
    except toolchain.MissingToolError as e:
        pytest.skip(str(e))


def assert_compiled_entries(compiled, names: set) -> None:
    """``compiled`` (a CompiledCuda) has a PTX entry for every kernel in ``names`` and a
    CUBIN."""
    import re
    entries = set(re.findall(r"^\.visible \.entry (\w+)\(", compiled.ptx, re.M))
    assert names <= entries, sorted(names - entries)
    assert compiled.cubin[:4] == b"\x7fELF"


def assert_no_spills(ptx: str, names: set, arch: str = "sm_90") -> None:
    """ptxas accepts ``ptx`` and none of the kernels in ``names`` spills registers."""
    require_ptxas()
    from hlo_opt.backends.cuda.compiler import kernel_resources, ptxas_check
    res = kernel_resources(ptxas_check(ptx, arch))
    assert names <= set(res)
    assert not {k: r for k, r in res.items() if k in names and r.get("spill_stores", 0)}
