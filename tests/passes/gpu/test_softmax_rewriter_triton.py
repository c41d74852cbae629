"""triton-softmax-rewriter: differential tests (interpreter before/after on seeded inputs,
verifier after) of its FileCheck modules, its place in the gpu pipeline, and the kernels
it leaves for the sample and JAX softmax / layer-norm modules (one each, as XLA:GPU)."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from passes.gpu.softmax_rewriter_triton import SoftmaxRewriterTriton, block_level_config
from tests.support.harness import check_pass
from tests.support.lit_chunks import chunks

# the row of 2**20 + 1 elements is checked by FileCheck alone (seconds in the interpreter)
CHUNKS = [c for c in chunks("triton_softmax_rewriter*.hlo") + chunks("triton_softmax_merge.hlo")
          if "too_long" not in c.name]


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_lit_modules(chunk):
    result = check_pass(parse_hlo(chunk.text), [SoftmaxRewriterTriton()])
    assert result.changed != chunk.name.startswith("keep_"), chunk.name


@pytest.mark.parametrize("seed", range(40))
def test_random_training_modules(seed):
    """Kernels sharing and recomputing producers stay equal to the module as written,
    and each is one row normalisation (what the backends emit)."""
    from hlo_opt.codegen.row_norm import analyze, is_triton_norm_fusion
    from tests.backends.row_norm_modules import random_training_text
    module = parse_hlo(random_training_text(seed))
    assert check_pass(module, [SoftmaxRewriterTriton()]).changed
    fused = module.clone()
    SoftmaxRewriterTriton().run(fused)
    for inst in fused.entry.instructions:
        if is_triton_norm_fusion(inst):
            assert analyze(inst.fused_computation)[0] is not None, inst.name


def _pipeline_kernels(path, device=None):
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    from hlo_opt.api import load_all
    m = load_all(str(path))[0]
    if device is not None:
        m.config = m.config.replace(device=device)
    out = passes_api.optimize(m, DebugOptions.from_sources([]), pipeline="gpu")
    skip = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}
    return [i for i in out.entry.instructions if i.opcode not in skip]


@pytest.mark.parametrize("path", ["sample_modules/softmax.hlo", "sample_modules/layer_norm.hlo",
                                  "benchmarks/jax_modules/softmax.hlo",
                                  "benchmarks/jax_modules/layernorm.hlo"])
def test_gpu_pipeline_makes_one_triton_kernel(path):
    from tests.conftest import ROOT
    kernels = _pipeline_kernels(ROOT / path)
    assert len(kernels) == 1, [k.name for k in kernels]
    k = kernels[0]
    assert k.opcode == "fusion" and k.attrs["kind"] == "kCustom"
    assert '"kind":"__triton"' in k.attrs["backend_config"]


@pytest.mark.parametrize("name,tritons,others", [("layer_norm_train", 3, 1),
                                                 ("softmax_forward_backward", 2, 1)])
def test_gpu_pipeline_training_step_kernels_as_xla(name, tritons, others):
    """XLA:GPU's kernels for these modules: one __triton fusion per output of the rows
    (each recomputing the statistics it needs), the scale's gradient a column reduction
    of one of them, the attention gemm on cuBLAS."""
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    chunk = next(c for c in chunks("triton_softmax_merge.hlo") if c.name == name)
    out = passes_api.optimize(parse_hlo(chunk.text), DebugOptions.from_sources([]),
                              pipeline="gpu")
    skip = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}
    kernels = [i for i in out.entry.instructions if i.opcode not in skip]
    triton = [k for k in kernels if '"kind":"__triton"' in k.attrs.get("backend_config", "")]
    assert (len(triton), len(kernels) - len(triton)) == (tritons, others), \
        [k.name for k in kernels]


def test_only_for_ampere_and_newer():
    """XLA adds the pass for compute capability 8.0 and newer only."""
    from dataclasses import replace

    from hlo_opt.analysis.device import A100, H100
    from tests.conftest import ROOT
    path = ROOT / "benchmarks/jax_modules/softmax.hlo"
    assert len(_pipeline_kernels(path, A100)) == 1
    volta = replace(H100, compute_capability=(7, 0))
    assert len(_pipeline_kernels(path, volta)) > 1


def test_block_level_config_is_one_row_per_tile():
    cfg = block_level_config(256)
    assert cfg["output_tiles"] == [{"sizes": ["1", "256"]}] and cfg["num_warps"] == "1"
    assert block_level_config(5000)["num_warps"] == "8"
