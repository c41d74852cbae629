"""cudnn-conv-rewriter, cudnn-fused-convolution-rewriter, gpu-conv-padding-legalization."""
from __future__ import annotations

import json
from pathlib import Path

from passes.gpu._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT,
                                   CONV_BIAS_ACTIVATION, CONV_FORWARD)

from .util import check, entry_ops

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"


def _calls(m):
    return [i for i in m.entry.instructions if i.opcode == "custom-call"]


FORWARD = """HloModule fwd
ENTRY %main (x: f32[2,8,8,3], w: f32[3,3,3,4]) -> f32[2,8,8,4] {
  %x = f32[2,8,8,3] parameter(0)
  %w = f32[3,3,3,4] parameter(1)
  ROOT %c = f32[2,8,8,4] convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


def test_forward_convolution():
    m = check(FORWARD, "cudnn-conv-rewriter").module
    (c,) = _calls(m)
    assert c.custom_call_target == CONV_FORWARD and c.name.startswith("cudnn-conv")
    assert c.shape.to_text() == "(f32[2,8,8,4]{3,2,1,0}, u8[0]{0})"
    assert c.attrs["window"] == "{size=3x3 pad=1_1x1_1}"
    assert c.attrs["dim_labels"] == "b01f_01io->b01f"
    cfg = json.loads(c.attrs["backend_config"])["cudnn_conv_backend_config"]
    assert cfg == {"conv_result_scale": 1, "activation_mode": "kNone", "side_input_scale": 0,
                   "leakyrelu_alpha": 0}


def test_backward_input_convolution():
    text = """HloModule bwd_in
ENTRY %main (dy: f32[1,4,4,2], w: f32[3,3,3,2]) -> f32[1,8,8,3] {
  %dy = f32[1,4,4,2] parameter(0)
  %w = f32[3,3,3,2] parameter(1)
  %rev = f32[3,3,3,2] reverse(%w), dimensions={0,1}
  ROOT %c = f32[1,8,8,3] convolution(%dy, %rev), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f
}
"""
    m = check(text, "cudnn-conv-rewriter").module
    (c,) = _calls(m)
    assert c.custom_call_target == CONV_BACKWARD_INPUT
    assert c.operands[1].opcode == "parameter"  # the reverse was absorbed
    assert "reverse" not in entry_ops(m)
    assert c.attrs["window"] == "{size=3x3 stride=2x2 pad=1_1x1_1}"


def test_backward_filter_convolution():
    text = """HloModule bwd_filter
ENTRY %main (x: f32[1,8,8,3], dy: f32[1,8,8,2]) -> f32[3,3,3,2] {
  %x = f32[1,8,8,3] parameter(0)
  %dy = f32[1,8,8,2] parameter(1)
  ROOT %c = f32[3,3,3,2] convolution(%x, %dy), window={size=8x8 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
}
"""
    m = check(text, "cudnn-conv-rewriter").module
    (c,) = _calls(m)
    assert c.custom_call_target == CONV_BACKWARD_FILTER
    assert c.attrs["window"] == "{size=3x3 pad=1_1x1_1}"


CONV_BIAS_RELU = """HloModule cbr
ENTRY %main (x: f32[1,8,8,3], w: f32[3,3,3,4], b: f32[4]) -> f32[1,8,8,4] {
  %x = f32[1,8,8,3] parameter(0)
  %w = f32[3,3,3,4] parameter(1)
  %b = f32[4] parameter(2)
  %c = f32[1,8,8,4] convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %bb = f32[1,8,8,4] broadcast(%b), dimensions={3}
  %a = f32[1,8,8,4] add(%c, %bb)
  %z = f32[] constant(0)
  %zb = f32[1,8,8,4] broadcast(%z), dimensions={}
  ROOT %r = f32[1,8,8,4] maximum(%a, %zb)
}
"""


def test_conv_bias_relu_is_one_cudnn_call():
    m = check(CONV_BIAS_RELU, "cudnn-conv-rewriter,cudnn-fused-convolution-rewriter").module
    (c,) = _calls(m)
    assert c.custom_call_target == CONV_BIAS_ACTIVATION
    assert c.name.startswith("cudnn-conv-bias-activation")
    assert [o.name for o in c.operands] == ["x", "w", "b"]
    cfg = json.loads(c.attrs["backend_config"])["cudnn_conv_backend_config"]
    assert cfg["activation_mode"] == "kRelu"
    assert entry_ops(m)[-1] == "get-tuple-element"


def test_conv_side_input():
    text = """HloModule side
ENTRY %main (x: f32[1,8,8,3], w: f32[3,3,3,4], s: f32[1,8,8,4]) -> f32[1,8,8,4] {
  %x = f32[1,8,8,3] parameter(0)
  %w = f32[3,3,3,4] parameter(1)
  %s = f32[1,8,8,4] parameter(2)
  %c = f32[1,8,8,4] convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT %a = f32[1,8,8,4] add(%c, %s)
}
"""
    m = check(text, "cudnn-conv-rewriter,cudnn-fused-convolution-rewriter").module
    (c,) = _calls(m)
    assert len(c.operands) == 4 and c.operands[3].name == "s"
    cfg = json.loads(c.attrs["backend_config"])["cudnn_conv_backend_config"]
    assert cfg["side_input_scale"] == 1 and cfg["activation_mode"] == "kNone"


def test_depthwise_conv_is_not_fused():
    m = check((SAMPLES / "mobilenet_cluster.hlo").read_text(),
              "cudnn-conv-rewriter,cudnn-fused-convolution-rewriter", seeds=(0,)).module
    calls = _calls(m)
    by_target = {}
    for c in calls:
        by_target.setdefault(c.custom_call_target, []).append(c)
    # the three dense convolutions get their bias; the two depthwise ones do not
    assert len(by_target[CONV_BIAS_ACTIVATION]) == 3
    assert len(by_target[CONV_FORWARD]) == 2
    assert all(c.attr("feature_group_count", 1) > 1 for c in by_target[CONV_FORWARD])


def test_padding_legalization_makes_padding_explicit():
    text = FORWARD.replace("pad=1_1x1_1", "pad=0_1x0_1").replace("f32[2,8,8,4]", "f32[2,7,7,4]")
    m = check(text, "cudnn-conv-rewriter,gpu-conv-padding-legalization").module
    (c,) = _calls(m)
    assert c.operands[0].opcode == "pad"
    assert c.operands[0].attrs["padding"] == "0_0x0_1x0_1x0_0"
    assert c.attrs["window"] == "{size=3x3}"


def test_padding_legalization_negative_padding_and_dilation():
    text = """HloModule negpad
ENTRY %main (x: f32[1,10,10,2], w: f32[2,2,2,2]) -> f32[1,6,6,2] {
  %x = f32[1,10,10,2] parameter(0)
  %w = f32[2,2,2,2] parameter(1)
  ROOT %c = f32[1,6,6,2] convolution(%x, %w), window={size=2x2 pad=-1_-1x-1_-1 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f
}
"""
    m = check(text, "cudnn-conv-rewriter,gpu-conv-padding-legalization").module
    (c,) = _calls(m)
    assert c.operands[0].opcode == "slice"
    assert c.operands[1].opcode == "pad"  # the dilated kernel, explicit
    assert c.attrs["window"] == "{size=3x3}"
