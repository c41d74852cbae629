"""The GPU pipelines: registered in XLA's order, the flag choice, and the differential
harness of ``gpu`` and every sub-pipeline on every sample module and every corpus module
the interpreter runs (interpreter outputs before == after, verifier after each pass)."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo_modules
from hlo_opt.errors import HloError
from hlo_opt.flags import DebugOptions
from hlo_opt.errors import PassError
from hlo_opt.ir.config import HloModuleConfig
from hlo_opt.pipeline import Fixpoint
from hlo_opt.verifier import module_errors
from passes.pipelines import PIPELINES, build_pipeline
from passes.registry import PASSES

from ...conftest import corpus_files, require_corpus, sample_files
from tests.support.harness import check_pass, fixture_args

SEED_ORDER = ["spmd-simplify", "optimization", "collective-optimizations",
              "conv-canonicalization", "layout assignment",
              "nvptx post-layout-assignment part 1", "post-layout-assignment",
              "nvptx post-layout-assignment part 2", "fusion", "horizontal-fusion",
              "post-fusion-optimization", "GPU-ir-emit-prepare"]


def _names(pipeline):
    return [item.name for item in pipeline.items]


def _leaves(pipeline):
    return [p.name for _, p in pipeline.leaves()]


def test_gpu_is_the_sub_pipelines_in_the_seed_order():
    assert _names(build_pipeline("gpu")) == SEED_ORDER
    for name in SEED_ORDER:
        assert name in PIPELINES


def test_optimization_is_reused_with_simplification_inside():
    gpu = build_pipeline("gpu")
    optimization = gpu.items[1]
    assert optimization.name == "optimization"
    assert "simplification" in [i.name for i in optimization.items]


def test_sub_pipelines_name_xla_passes_in_order():
    post = _leaves(build_pipeline("post-layout-assignment"))
    assert post.index("reduction-layout-normalizer") < post.index("reduction-dimension-grouper")
    assert post.index("reduction-dimension-grouper") < post.index("reduction-splitter")
    assert post.index("gpu-tree-reduction-rewriter") < post.index("cublas-gemm-rewriter")
    conv = _leaves(build_pipeline("conv-canonicalization"))
    assert conv[:4] == ["gpusolver-rewriter", "cudnn-conv-rewriter",
                        "cudnn-fused-convolution-rewriter", "gpu-conv-padding-legalization"]
    assert _leaves(build_pipeline("layout assignment")) == ["layout-assignment"]
    assert "copy-insertion" in _leaves(build_pipeline("GPU-ir-emit-prepare"))
    assert _leaves(build_pipeline("spmd-simplify")) == []  # one device: a no-op
    assert _leaves(build_pipeline("nvptx post-layout-assignment part 2"))[0] == \
        "gemm-algorithm-picker"
    assert "gpu-conv-algorithm-picker" in post


def _config(**flags) -> HloModuleConfig:
    return HloModuleConfig(DebugOptions(**flags))


def test_fusion_pipeline_follows_the_priority_fusion_flag():
    fusion = build_pipeline("fusion", _config(xla_gpu_enable_priority_fusion=True))
    assert isinstance(fusion, Fixpoint)
    leaves = _leaves(fusion.body)
    assert "priority-fusion" in leaves and "fusion_merger" not in leaves
    classic = build_pipeline("fusion", _config(xla_gpu_enable_priority_fusion=False))
    leaves = _leaves(classic.body)
    assert "priority-fusion" not in leaves
    assert leaves[:3] == ["variadic-op-splitter", "fusion", "fusion"]
    assert [p.may_duplicate for p in classic.body.items[1:3]] == [False, True]
    assert "fusion_merger" in leaves and "multi_output_fusion" in leaves


def test_every_pass_the_pipelines_name_is_registered():
    for name in PIPELINES:
        for _, p in build_pipeline(name).leaves():
            assert PASSES[p.name] is type(p)


def test_the_tables_are_sorted_and_unknown_names_are_errors():
    assert list(PIPELINES) == sorted(PIPELINES)
    assert list(PASSES) == sorted(PASSES)
    assert all(name == cls.name for name, cls in PASSES.items())
    with pytest.raises(PassError, match="Pipeline nope not found"):
        build_pipeline("nope")
    from passes.registry import create_pass
    with pytest.raises(PassError, match="Pass nope not found"):
        create_pass("nope")


def test_layout_sensitive_algsimp_after_layout_assignment():
    post = build_pipeline("post-layout-assignment")
    algsimps = [p for _, p in post.leaves() if p.name == "algsimp"]
    # one before triton-softmax-rewriter (Ampere and newer, as XLA), one after the
    # reduction rewrites
    assert [a.options.is_layout_sensitive for a in algsimps] == [True, True]


# ---- the differential harness ---------------------------------------------------------------

PIPELINE_NAMES = ["gpu"] + [n for n in SEED_ORDER if n not in ("optimization",)]


def _valid_modules(path):
    try:
        modules = parse_hlo_modules(path.read_text(), str(path))
    except HloError as e:
        pytest.skip(f"does not parse (parser's business): {str(e).splitlines()[0]}")
    out = [m for m in modules if not module_errors(m)]
    if not out:
        pytest.skip("no module passes the verifier before any pass runs")
    return out


def _check(module, name, extra=(), seeds=(0,), priority=True):
    options = DebugOptions(xla_gpu_enable_priority_fusion=priority)
    return check_pass(module, build_pipeline(name, HloModuleConfig(options)), seeds=seeds,
                      extra_args=extra, rtol=1e-4, atol=1e-4, options=options)


@pytest.mark.parametrize("name", PIPELINE_NAMES)
@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_samples(path, name):
    (module,) = _valid_modules(path)
    extra = [fixture_args(path.stem)]
    _check(module, name, extra=extra, seeds=(0, 1))


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_samples_classic_fusion(path):
    (module,) = _valid_modules(path)
    _check(module, "gpu", extra=[fixture_args(path.stem)], priority=False)


def test_gpu_changes_every_sample_that_computes():
    changed = 0
    for path in sample_files():
        (module,) = _valid_modules(path)
        changed += _check(module, "gpu").changed
    assert changed >= 9  # sort.hlo is one sort: nothing to do


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus(path):
    require_corpus()
    for module in _valid_modules(path):
        for name in PIPELINE_NAMES:
            _check(module, name)
