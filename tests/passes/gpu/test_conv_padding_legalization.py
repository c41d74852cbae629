"""gpu-conv-padding-legalization: XLA's conv_padding_legalization_test.cc case, the three
canonicalizations on hand-written cuDNN calls, and convolutions whose cudnn-conv-rewriter
form has uneven padding; the interpreter computes the same before and after."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from passes.gpu._conv_util import CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_FORWARD

from tests.support.harness import check_pass
from .test_conv_support import calls, run_passes, same_values

PASS = "gpu-conv-padding-legalization"

XLA_BACKWARD_INPUT = r"""HloModule convolution_module
ENTRY %convolution (operand: f64[2,2,2,3]) -> (f64[2,2,4,4], u8[0]) {
  %operand = f64[2,2,2,3]{3,2,1,0} parameter(0)
  %kernel = f64[2,3,2,3]{3,2,1,0} constant({ { /*i0=0*/ { /*i1=0*/ { 0.29629629629629628, 0.30246913580246915, 0.30864197530864196 }, { 0.31481481481481483, 0.32098765432098764, 0.3271604938271605 } }, { /*i1=1*/ { 0.25925925925925924, 0.26543209876543211, 0.27160493827160492 }, { 0.27777777777777779, 0.2839506172839506, 0.29012345679012347 } }, { /*i1=2*/ { 0.22222222222222221, 0.22839506172839505, 0.23456790123456789 }, { 0.24074074074074073, 0.24691358024691357, 0.25308641975308643 } } }, { /*i0=1*/ { /*i1=0*/ { 0.18518518518518517, 0.19135802469135801, 0.19753086419753085 }, { 0.20370370370370369, 0.20987654320987653, 0.21604938271604937 } }, { /*i1=1*/ { 0.14814814814814814, 0.15432098765432098, 0.16049382716049382 }, { 0.16666666666666666, 0.1728395061728395, 0.17901234567901234 } }, { /*i2=2*/ { 0.1111111111111111, 0.11728395061728394, 0.12345679012345678 }, { 0.12962962962962962, 0.13580246913580246, 0.1419753086419753 } } } })
  %reverse = f64[2,3,2,3]{3,2,1,0} reverse(%kernel), dimensions={0,1}
  ROOT %custom-call = (f64[2,2,4,4]{3,2,1,0}, u8[0]{0}) custom-call(f64[2,2,2,3]{3,2,1,0} %operand, f64[2,3,2,3]{3,2,1,0} %reverse), window={size=2x3 stride=2x2 pad=0_0x0_1}, dim_labels=bf01_01io->b01f, custom_call_target="__cudnn$convBackwardInput", backend_config="{\"algorithm\":\"0\",\"tensor_ops_enabled\":false,\"conv_result_scale\":1,\"activation_mode\":\"0\",\"side_input_scale\":0}"
}
"""


def test_xla_backward_input_convolve():
    before, m = run_passes(XLA_BACKWARD_INPUT, PASS)
    root = m.entry.root
    # tuple(slice(gte(custom-call(op, reverse(constant)), 0)), gte(...))
    assert root.opcode == "tuple"
    sl, scratch = root.operands
    assert sl.opcode == "slice" and scratch.opcode == "get-tuple-element"
    assert sl.shape.to_text(layout=False) == "f64[2,2,4,4]"
    gte = sl.operands[0]
    assert gte.opcode == "get-tuple-element" and gte.attr("index") == 0
    call = gte.operands[0]
    assert call.custom_call_target == CONV_BACKWARD_INPUT
    assert call.operands[1].opcode == "reverse" and \
        call.operands[1].operands[0].opcode == "constant"
    assert call.shape.tuple_shapes[0].to_text(layout=False) == "f64[2,2,4,5]"
    assert call.attr("window").to_text() == "{size=2x3 stride=2x2}"
    assert scratch.operands[0] is call
    assert same_values(before, m, rtol=1e-12, atol=1e-12) == 2


def _call_module(target, lhs, rhs, result, window, labels="b01f_01io->b01f"):
    return f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT c = ({result}, u8[0]) custom-call(a, b), window={{{window}}}, dim_labels={labels}, custom_call_target="{target}"
}}"""


def test_backward_input_high_padding_larger():
    # the forward conv of the 6-wide gradient dx with pad 1_2 gives 3 outputs (stride 2)
    text = _call_module(CONV_BACKWARD_INPUT, "f32[2,3,3,4]", "f32[3,3,5,4]", "f32[2,6,6,5]",
                        "size=3x3 stride=2x2 pad=1_2x1_2")
    before, m = run_passes(text, PASS)
    (call,) = calls(m)
    assert call.attr("window").to_text() == "{size=3x3 stride=2x2 pad=1_1x1_1}"
    assert call.shape.tuple_shapes[0].dims == (2, 7, 7, 5)
    sl = m.entry.root.operands[0]
    assert sl.attr("slice").to_text() == "{[0:2], [0:6], [0:6], [0:5]}"
    assert same_values(before, m) == 2


def test_backward_input_low_padding_larger():
    text = _call_module(CONV_BACKWARD_INPUT, "f32[2,3,4,4]", "f32[3,2,5,4]", "f32[2,6,7,5]",
                        "size=3x2 stride=2x2 pad=2_1x1_0")
    before, m = run_passes(text, PASS)
    (call,) = calls(m)
    assert call.attr("window").to_text() == "{size=3x2 stride=2x2 pad=1_1x0_0}"
    assert call.shape.tuple_shapes[0].dims == (2, 7, 8, 5)
    assert m.entry.root.operands[0].attr("slice").to_text() == \
        "{[0:2], [1:7], [1:8], [0:5]}"
    assert same_values(before, m) == 2


def test_backward_filter_uneven_padding_becomes_a_pad_of_the_input():
    # BackwardFilterConv(ABCD, xyz, low=1, high=2) = BackwardFilterConv(pad(ABCD, high=1), ..)
    text = _call_module(CONV_BACKWARD_FILTER, "f32[2,6,7,3]", "f32[2,6,7,4]", "f32[3,2,3,4]",
                        "size=3x2 pad=1_2x0_1")
    before, m = run_passes(text, PASS)
    (call,) = calls(m)
    assert call.custom_call_target == CONV_BACKWARD_FILTER
    assert call.attr("window").to_text() == "{size=3x2 pad=1_1x0_0}"
    x = call.operands[0]
    assert x.opcode == "pad" and x.attrs["padding"] == "0_0x0_1x0_1x0_0"
    assert m.entry.root is call
    assert same_values(before, m) == 2


@pytest.mark.parametrize("target", [CONV_BACKWARD_INPUT, CONV_BACKWARD_FILTER])
def test_backward_with_symmetric_or_negative_padding_is_left_alone(target):
    for window in ("size=3x3 stride=2x2 pad=1_1x1_1", "size=3x3 pad=-1_1x1_1"):
        text = _call_module(target, "f32[2,3,3,4]", "f32[3,3,5,4]", "f32[2,6,6,5]", window)
        before, m = run_passes(text, PASS)
        assert m.to_text() == before.to_text()


def test_forward_padding_made_explicit():
    text = _call_module(CONV_FORWARD, "f32[2,8,8,3]", "f32[3,3,3,4]", "f32[2,7,7,4]",
                        "size=3x3 pad=0_1x0_1")
    before, m = run_passes(text, PASS)
    (call,) = calls(m)
    assert call.operands[0].opcode == "pad"
    assert call.operands[0].attrs["padding"] == "0_0x0_1x0_1x0_0"
    assert call.attrs["window"] == "{size=3x3}"
    assert same_values(before, m) == 2


def test_forward_negative_padding_and_dilations():
    text = _call_module(CONV_FORWARD, "f32[1,10,10,2]", "f32[2,2,2,2]", "f32[1,17,9,2]",
                        "size=2x2 pad=-1_1x2_-1 lhs_dilate=2x1 rhs_dilate=2x2")
    before, m = run_passes(text, PASS)
    (call,) = calls(m)
    x, w = call.operands
    assert x.opcode == "slice" and x.operands[0].opcode == "pad"
    assert x.operands[0].attrs["padding"] == "0_0x0_1_1x2_0x0_0"
    assert w.opcode == "pad" and w.attrs["padding"] == "0_0_1x0_0_1x0_0x0_0"
    assert call.attrs["window"] == "{size=3x3}"
    assert same_values(before, m) == 2


# ---- from convolutions: cudnn-conv-rewriter, then this pass --------------------------------------
CONVS = {
    # backward input: low 0, high 1 after the rewrite -> slice
    "bw_input": """HloModule bw_input
ENTRY e {
  dy = f32[1,4,4,2] parameter(0)
  w = f32[3,3,3,2] parameter(1)
  rev = f32[3,3,3,2] reverse(w), dimensions={0,1}
  ROOT c = f32[1,8,8,3] convolution(dy, rev), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f
}""",
    # backward filter: low 2, high 1 after the rewrite -> pad of the activations
    "bw_filter": """HloModule bw_filter
ENTRY e {
  x = f32[1,8,8,3] parameter(0)
  dy = f32[1,8,8,2] parameter(1)
  ROOT c = f32[4,4,3,2] convolution(x, dy), window={size=8x8 pad=2_1x2_1}, dim_labels=f01b_i01o->01bf
}""",
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_rewritten_convolutions_keep_their_values(name):
    r = check_pass(parse_hlo(CONVS[name]),
                   "cudnn-conv-rewriter,gpu-conv-padding-legalization", seeds=(0, 1),
                   rtol=1e-4, atol=1e-5)
    assert r.changed and r.compared_runs == 2
    (call,) = calls(r.module)
    w = call.attr("window")
    assert all(d.padding_low == d.padding_high >= 0 for d in w.dims)
    ops = {i.opcode for i in r.module.entry.instructions}
    assert ("slice" if name == "bw_input" else "pad") in ops
