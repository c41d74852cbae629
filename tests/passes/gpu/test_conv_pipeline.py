"""The convolution passes together, on real modules: every corpus module with a
convolution and the MobileNet sample through the cuDNN passes and through the whole
``gpu`` pipeline (interpreter before == after), and int8 / f16 convolutions through the
whole pipeline (padding and vectorizing to cuDNN's fast forms keeps the values)."""
from __future__ import annotations

from pathlib import Path

import pytest

from hlo_opt.api import parse_hlo, parse_hlo_modules
from passes.gpu._conv_util import CONV_TARGETS
from passes.pipelines import build_pipeline

from ...conftest import corpus_files, require_corpus
from tests.support.harness import check_pass, fixture_args, largest_array
from .test_conv_support import calls, run_passes, same_values

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"
CONV_PASSES = ("cudnn-conv-rewriter,cudnn-fused-convolution-rewriter,"
               "gpu-conv-padding-legalization,cudnn_pad_for_convolutions,"
               "cudnn_vectorize_convolutions")
# the interpreter compares modules up to this many elements in one array (the harness's
# work estimate is not used: the largest corpus convolution, 1.8 G multiply-adds, is one
# im2col GEMM of a few seconds)
MAX_ELEMENTS = 1 << 22


def _conv_corpus():
    return [p for p in corpus_files() if "convolution(" in p.read_text()]


def _gpu(module_or_text):
    return run_passes(module_or_text, [build_pipeline("gpu")])


def test_the_corpus_has_convolutions():
    require_corpus()
    assert len(_conv_corpus()) >= 2


@pytest.mark.parametrize("path", _conv_corpus(), ids=lambda p: p.name)
@pytest.mark.parametrize("passes", ["conv", "gpu"])
def test_corpus_convolutions(path, passes):
    require_corpus()
    for module in parse_hlo_modules(path.read_text(), str(path)):
        before, after = run_passes(module, CONV_PASSES) if passes == "conv" else _gpu(module)
        assert not [i for i in after.instructions() if i.opcode == "convolution"]
        assert [i for i in after.instructions() if i.opcode == "custom-call"
                and i.custom_call_target in CONV_TARGETS]
        if largest_array(before) <= MAX_ELEMENTS:
            assert same_values(before, after, seeds=(0,), rtol=1e-4, atol=1e-3) == 1


# The multihost runner's test module (f32[32,24,64,128] with f32[32,1024,64,128], 1 GiB) is
# too big for the interpreter; these keep its window and dim labels (the 32 batch groups
# written as a spatial dim) with small sizes.  Its rewrite is checked on the real module
# above, its values here.
MULTIHOST_SMALL = """HloModule hlo_runner_test_small
ENTRY %e (lhs: f32[32,3,4,5], rhs: f32[32,6,4,5]) -> f32[32,3,6,1] {
  %lhs = f32[32,3,4,5]{3,2,1,0} parameter(0)
  %rhs = f32[32,6,4,5]{3,2,1,0} parameter(1)
  ROOT %conv = f32[32,3,6,1]{3,2,1,0} convolution(%lhs, %rhs), window={size=32x5 stride=31x1 lhs_dilate=32x1}, dim_labels=0bf1_0oi1->0bf1
}"""


@pytest.mark.parametrize("passes", ["conv", "gpu"])
def test_multihost_module_shape_small(passes):
    before, after = run_passes(MULTIHOST_SMALL, CONV_PASSES) if passes == "conv" \
        else _gpu(MULTIHOST_SMALL)
    assert "lhs_dilate" not in after.to_text() and " pad(" not in after.to_text()
    assert same_values(before, after, rtol=1e-4, atol=1e-4) == 2


def test_mobilenet_through_the_gpu_pipeline():
    text = (SAMPLES / "mobilenet_cluster.hlo").read_text()
    r = check_pass(parse_hlo(text), build_pipeline("gpu"), seeds=(0,), rtol=1e-3,
                   atol=1e-3, extra_args=[fixture_args("mobilenet_cluster")])
    assert r.compared_runs == 2
    assert len(calls(r.module)) == 5


INT8 = """HloModule int8
ENTRY e {
  x = s8[2,7,7,30] parameter(0)
  w = s8[3,3,30,60] parameter(1)
  ROOT c = s8[2,7,7,60] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""

F16 = """HloModule f16
ENTRY e {
  x = f16[2,7,7,7] parameter(0)
  w = f16[3,3,7,7] parameter(1)
  ROOT c = f16[2,7,7,7] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""

F16_BIAS = F16.replace("ROOT c =", "c =").replace("\n}", """
  b = f16[7] parameter(2)
  bb = f16[2,7,7,7] broadcast(b), dimensions={3}
  ROOT a = f16[2,7,7,7] add(c, bb)
}""")


def test_int8_convolution_is_padded_and_vectorized_in_the_pipeline():
    before, after = _gpu(INT8)
    (call,) = [c for c in calls(after) if c.custom_call_target in CONV_TARGETS]
    # 30 -> 32 input features, 60 -> 64 outputs, as int8x32 [.., 1, 32] with the filter
    # in cuDNN's reordered layout
    assert call.operands[0].shape.dims[-2:] == (1, 32)
    assert call.shape.tuple_shapes[0].dims[-2:] == (2, 32)
    assert '"reordered_int8_nchw_vect":true' in call.attrs["backend_config"]
    assert same_values(before, after) == 2


def test_int8_before_turing_is_vectorized_to_4():
    before, after = run_passes(INT8, CONV_PASSES, cc=(7, 0))
    (call,) = calls(after)
    assert call.operands[0].shape.dims[-1] == 4 and \
        "reordered_int8_nchw_vect" not in call.attrs["backend_config"]
    assert same_values(before, after) == 2


def test_f16_convolution_is_padded_for_tensor_cores_in_the_pipeline():
    before, after = _gpu(F16)
    (call,) = [c for c in calls(after) if c.custom_call_target in CONV_TARGETS]
    assert call.operands[1].shape.dims == (3, 3, 8, 8)
    assert same_values(before, after, rtol=2e-3, atol=2e-3) == 2


def test_f16_bias_activation_is_not_padded():
    # XLA skips forward-activation convolutions ("no benchmark where it speeds up")
    before, after = _gpu(F16_BIAS)
    (call,) = [c for c in calls(after) if c.custom_call_target in CONV_TARGETS]
    assert call.custom_call_target == "__cudnn$convBiasActivationForward"
    assert call.operands[1].shape.dims == (3, 3, 7, 7)
    assert same_values(before, after, rtol=2e-3, atol=2e-3) == 2
