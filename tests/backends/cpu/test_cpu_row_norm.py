"""Row normalisations (__triton softmax / layer-norm fusions) on the CPU backend: one
row-loop kernel each (reductions, then the row), equal to the interpreter on the module
as written."""
from __future__ import annotations

import pytest

from tests.backends.row_norm_modules import cases, merge_cases

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_row_norm_kernel_matches_interpreter(case):
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.codegen.plan import make_plan
    name, raw, fused = case
    assert [s.kind for _, s in make_plan(fused).steps()] == ["row_normalization"]
    r = check_executable(raw, CpuExecutable(fused, cache=False), seed=5)
    assert r.status == "pass", r.detail


@pytest.mark.parametrize("case", merge_cases(), ids=lambda c: c[0])
def test_training_step_kernels_match_interpreter(case):
    """Several row normalisations of the same rows, each recomputing the statistics it
    needs, beside the other kernels of the module."""
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.codegen.plan import make_plan
    name, raw, fused = case
    kinds = [s.kind for _, s in make_plan(fused).steps()]
    assert kinds.count("row_normalization") >= 2, kinds
    r = check_executable(raw, CpuExecutable(fused, cache=False), seed=5)
    assert r.status == "pass", r.detail


@pytest.mark.parametrize("seed", range(8))
def test_random_training_modules_match_interpreter(seed):
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.cuda.check import check_executable
    from passes.registry import create_pass
    from tests.backends.row_norm_modules import random_training_text
    raw = parse_hlo(random_training_text(seed))
    fused = raw.clone()
    assert create_pass("triton-softmax-rewriter").run(fused)
    r = check_executable(raw, CpuExecutable(fused, cache=False), seed=5)
    assert r.status == "pass", r.detail


def test_rows_split_over_threads(monkeypatch):
    """A large softmax takes the threaded path (chunks of rows) and stays equal."""
    from hlo_opt.api import parse_hlo
    from hlo_opt.backends.cpu import kernels
    from hlo_opt.backends.cuda.check import check_executable
    from passes.registry import create_pass
    from tests.backends.row_norm_modules import _SOFTMAX
    raw = parse_hlo(_SOFTMAX.format(name="big", t="f32", rows=64, n=1024))
    fused = raw.clone()
    assert create_pass("triton-softmax-rewriter").run(fused)
    from hlo_opt.codegen.plan import make_plan
    k = next(s for _, s in make_plan(fused).steps())
    monkeypatch.setattr(kernels, "PARALLEL_MIN_WORK", 1)
    assert kernels.parallel_trip(k) == 64
    r = check_executable(raw, CpuExecutable(fused, cache=False), seed=2)
    assert r.status == "pass", r.detail
