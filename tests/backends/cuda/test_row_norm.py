"""The CUDA row-normalisation emitter (__triton softmax / layer-norm fusions): one kernel
per fusion (a warp per row, or a block per row for long rows), run under cuda-sim against
the interpreter on the module as written, compiled by NVRTC for sm_80 and sm_90 and
checked by ptxas."""
from __future__ import annotations

import functools
import re

import pytest

from tests.backends.cuda.support import assert_compiled_entries, assert_no_spills, require_gxx, require_nvrtc
from tests.backends.row_norm_modules import cases, merge_cases

IDS = [c[0] for c in cases()]


@functools.cache
def _programs():
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    names: set = set()
    return {name: build_program(fused, H100, names=names) for name, _, fused in cases()}


def test_one_kernel_per_fusion_with_the_row_layout():
    for name, prog in _programs().items():
        assert [k.kind for k in prog.kernels] == ["row_normalization"], name
        k = prog.kernels[0]
        n = prog.module.entry.root.shape.dims[-1]
        assert k.extra["threads_per_row"] == (32 if n <= 2048 else 256), name
        assert k.fibered and "hlo_shfl_xor" in k.code, name


@pytest.mark.parametrize("name", ["softmax_f32", "softmax_bf16_3d", "softmax_f32_3x5000",
                                  "softmax_bf16_2x2500", "softmax_f16_5x31"])
def test_softmax_takes_one_exp_per_element(name):
    """exp(x - max) is kept per element while the sum reduces, and the output reads it
    back (the row buffer fits shared memory in these cases)."""
    code = _programs()[name].kernels[0].code
    assert len(re.findall(r"\bexpf?\(", code)) == 1, code
    assert "rk1[" in code


def test_division_by_a_row_value_is_one_reciprocal_per_row():
    code = _programs()["softmax_f32"].kernels[0].code
    assert "(1.0f / acc" in code and not re.search(r"v\d+ / acc", code), code


@functools.cache
def _sim():
    from hlo_opt.backends.cuda_sim import compile_batch
    progs = _programs()
    return dict(zip(progs, compile_batch(list(progs.values()), parts=2)))


@pytest.mark.parametrize("name", IDS)
def test_cuda_sim_matches_interpreter(name):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    raw = next(r for n, r, _ in cases() if n == name)
    r = check_executable(raw, _sim()[name], seed=3)
    assert r.status == "pass", r.detail


@pytest.mark.parametrize("case", merge_cases(), ids=lambda c: c[0])
def test_training_step_kernels_match_interpreter(case):
    """Several row normalisations of the same rows (each recomputing the statistics it
    needs) beside the module's other kernels, under cuda-sim."""
    require_gxx()
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda_sim import compile_batch
    name, raw, fused = case
    prog = build_program(fused, H100, names=set())
    kinds = [k.kind for k in prog.kernels]
    assert kinds.count("row_normalization") >= 2, kinds
    r = check_executable(raw, compile_batch([prog], parts=1)[0], seed=3)
    assert r.status == "pass", r.detail


def test_random_training_modules_match_interpreter():
    require_gxx()
    from hlo_opt.analysis.device import H100
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda_sim import compile_batch
    from passes.registry import create_pass
    from tests.backends.row_norm_modules import random_training_text
    raws, progs, names = [], [], set()
    for seed in range(8):
        raw = parse_hlo(random_training_text(seed))
        fused = raw.clone()
        assert create_pass("triton-softmax-rewriter").run(fused)
        raws.append(raw)
        progs.append(build_program(fused, H100, names=names))
    for raw, exe in zip(raws, compile_batch(progs, parts=2)):
        r = check_executable(raw, exe, seed=3)
        assert r.status == "pass", (raw.name, r.detail)


@pytest.fixture(scope="module")
def compiled():
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import combined_source
    src = combined_source(list(_programs().values()))
    return {arch: compile_cuda(src, arch, name="row_norm.cu") for arch in ("sm_80", "sm_90")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_kernel(compiled, arch):
    assert_compiled_entries(compiled[arch], {k.name for p in _programs().values()
                                             for k in p.kernels})


def test_ptxas_accepts_the_ptx_without_spills(compiled):
    assert_no_spills(compiled["sm_90"].ptx, {k.name for p in _programs().values()
                                             for k in p.kernels})
