"""Every sample, JAX benchmark and corpus module the interpreter runs also runs under
cuda-sim (bounds-checked) and matches the interpreter (XLA's bounds; ints exact), raw and
after the gpu pipeline.  Kernels of all modules compile as two g++ translation units."""
from __future__ import annotations

import pytest

from tests.backends.cuda.corpus_programs import (MAX_ELEMENTS, largest_value, modules,
                                                 programs, sim_executables)
from tests.backends.cuda.support import require_gxx

IDS = [f"{mid}[{pipe}]" for mid, _ in modules() for pipe in ("raw", "gpu")]


@pytest.mark.parametrize("key", IDS)
def test_module_under_cuda_sim(key):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    mid, pipe = key[:-1].rsplit("[", 1)
    raw, prog = programs()[(mid, pipe)]
    if isinstance(prog, Exception):
        if pipe == "gpu" and "PassError" in type(prog).__name__:
            pytest.skip(f"the gpu pipeline rejects this module: {str(prog)[:120]}")
        pytest.fail(f"no CUDA program: {type(prog).__name__}: {prog}")
    if largest_value(raw) > MAX_ELEMENTS:
        pytest.skip(f"a value of {largest_value(raw)} elements: too slow for cuda-sim in CI "
                    "(its kernels are still compiled by test_nvrtc_corpus)")
    exe = sim_executables()[(mid, pipe)]
    r = check_executable(raw, exe)
    if r.status == "skip":
        pytest.skip(r.detail)
    assert r.status == "pass", r.detail
