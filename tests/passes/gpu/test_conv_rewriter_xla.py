"""cudnn-conv-rewriter: XLA's conv_rewriter_test.cc cases (as HLO text; where XLA's test
builds a convolution with a shape that does not follow from its operands, the inferred
shape is used), the interpreter before and after where the module is small enough, and
the batch-group forms XLA's GPU compiler never sees written as a spatial dimension."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from passes.gpu._conv_util import CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_FORWARD

from tests.support.harness import check_pass
from .test_conv_support import calls, run_passes

BW_FILTER = "f01b_i01o->01bf"   # TF's default dnums for backward filter (XLA's test)
BW_INPUT = "b01f_01oi->b01f"    # ... and for backward input


def conv_text(lhs, rhs, out, window, labels, rhs_op=None, extra="", metadata=""):
    rev = ""
    operand = "rhs"
    if rhs_op:
        rev = f"  rev = {rhs} {rhs_op}\n"
        operand = "rev"
    return f"""HloModule m
ENTRY e {{
  lhs = {lhs} parameter(0)
  rhs = {rhs} parameter(1)
{rev}  ROOT conv = {out} convolution(lhs, {operand}), window={{{window}}}, dim_labels={labels}{extra}{metadata}
}}"""


def rewrite(text, **kw):
    """The rewriter through the harness; values are compared on the f64 version of the
    module (the rewritten calls add up products in another order: with the reductions
    of thousands of terms in XLA's cases, f32 sums differ by rounding) and the f32 result
    is returned."""
    if "f32[" in text and kw.get("execute", True):
        check_pass(parse_hlo(text.replace("f32[", "f64[")), "cudnn-conv-rewriter",
                   seeds=(0, 1), rtol=1e-9, atol=1e-9, **kw)
    return check_pass(parse_hlo(text), "cudnn-conv-rewriter", seeds=(0, 1), rtol=1e-4,
                      atol=1e-3, **kw)


def root_call(module):
    root = module.entry.root
    assert root.opcode == "get-tuple-element" and root.attr("index") == 0
    return root.operands[0]


CASES = {
    # name: (text, target, compared by the interpreter)
    "BackwardFilterConvolve": (conv_text(
        "f32[1,1,3,1]", "f32[1,1,2,1]", "f32[1,1,1,1]", "size=1x2 rhs_dilate=1x2", BW_FILTER,
        metadata=', metadata={op_name="foo"}'), CONV_BACKWARD_FILTER, True),
    "BackwardFilterConvolveEquivalentToForwardConvolution": (conv_text(
        "f32[1,1,3,1]", "f32[1,1,3,1]", "f32[1,1,1,1]", "size=1x3", BW_FILTER),
        CONV_FORWARD, True),
    "BackwardFilterConvolveWithPaddedActivations": (conv_text(
        "f32[20,35,35,32]", "f32[20,35,35,32]", "f32[3,3,32,32]",
        "size=35x35 pad=1_1x1_1", BW_FILTER), CONV_BACKWARD_FILTER, False),
    "BackwardFilterConvolveWithPaddedGradients": (conv_text(
        "f32[20,10,10,192]", "f32[20,4,4,320]", "f32[3,3,192,320]",
        "size=4x4 pad=0_-1x0_-1 rhs_dilate=2x2", BW_FILTER), CONV_BACKWARD_FILTER, True),
    "BackwardFilterConvolveWithUnevenPadding": (conv_text(
        "f32[20,35,35,32]", "f32[20,35,35,32]", "f32[2,2,32,32]", "size=35x35 pad=0_1x0_1",
        BW_FILTER), CONV_BACKWARD_FILTER, True),
    "BackwardInputConvolveEvenPadding": (conv_text(
        "f32[4,5,16,16]", "f32[5,3,7,7]", "f32[4,3,16,16]", "size=7x7 pad=3_3x3_3",
        "bf01_io01->bf01", rhs_op="reverse(rhs), dimensions={2,3}"),
        CONV_BACKWARD_INPUT, True),
    "BackwardInputConvolve1x1Filter": (conv_text(
        "f32[1,1,3,1]", "f32[1,1,1,1]", "f32[1,1,5,1]", "size=1x1 lhs_dilate=1x2", BW_INPUT),
        CONV_BACKWARD_INPUT, True),
    "BackwardInputConvolve1x1FilterEquivalentToForwardConvolve": (conv_text(
        "f32[1,1,3,1]", "f32[1,1,1,1]", "f32[1,1,3,1]", "size=1x1", BW_INPUT),
        CONV_FORWARD, True),
    "BackwardInputConvolveUnevenPaddingOnGradients": (conv_text(
        "f32[20,4,4,320]", "f32[3,3,192,320]", "f32[20,10,10,192]",
        "size=3x3 pad=2_3x2_3 lhs_dilate=2x2", BW_INPUT,
        rhs_op="reverse(rhs), dimensions={0,1}"), CONV_BACKWARD_INPUT, False),
    "BackwardInputConvolveLowPaddingTooLarge": (conv_text(
        "f32[20,4,4,320]", "f32[3,3,192,320]", "f32[20,10,10,192]",
        "size=3x3 pad=3_2x3_2 lhs_dilate=2x2", BW_INPUT,
        rhs_op="reverse(rhs), dimensions={0,1}"), CONV_FORWARD, False),
    "BackwardInputConvolveUnevenPaddingOnActivations": (conv_text(
        "f32[1,1,7,1]", "f32[1,3,1,1]", "f32[1,1,14,1]", "size=1x3 pad=0_0x2_1 lhs_dilate=1x2",
        BW_INPUT, rhs_op="reverse(rhs), dimensions={0,1}"), CONV_BACKWARD_INPUT, True),
    "BackwardInputConvolveNegativePaddingHighOnActivations": (conv_text(
        "f32[1,1,3,1]", "f32[1,2,1,1]", "f32[1,1,4,1]", "size=1x2 pad=0_0x0_2", BW_INPUT,
        rhs_op="reverse(rhs), dimensions={0,1}"), CONV_FORWARD, True),
    "TestBackwardFilterPatternMatch": (conv_text(
        "f32[8,120,256,256]", "f32[8,120,256,256]", "f32[120,120,3,3]",
        "size=256x256 pad=1_1x1_1", "fb01_io01->fb01"), CONV_BACKWARD_FILTER, False),
    "TestBackwardFilterPatternNoMatch": (conv_text(
        "f32[8,128,2,32]", "f32[3,3,128,128]", "f32[8,128,2,32]", "size=3x3 pad=1_1x1_1",
        "bf01_01io->bf01"), CONV_FORWARD, True),
    "ForwardConvolutionWithWindowDilation": (conv_text(
        "f32[8,128,32,32]", "f32[3,3,128,128]", "f32[8,128,32,32]",
        "size=3x3 pad=2_2x2_2 rhs_dilate=2x2", "bf01_01io->bf01"), CONV_FORWARD, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_case(name):
    text, target, compared = CASES[name]
    r = rewrite(text)
    call = root_call(r.module)
    assert call.custom_call_target == target
    assert r.compared_runs == (2 if compared else 0), r.notes


def test_metadata_is_kept():
    r = rewrite(CASES["BackwardFilterConvolve"][0])
    assert root_call(r.module).attrs["metadata"] == '{op_name="foo"}'


def test_backward_input_windows():
    even = root_call(rewrite(CASES["BackwardInputConvolveEvenPadding"][0]).module)
    assert even.attrs["window"] == "{size=7x7 pad=3_3x3_3}"   # kernel - 1 - low = 3
    uneven = root_call(rewrite(CASES["BackwardInputConvolveUnevenPaddingOnGradients"][0])
                       .module)
    assert uneven.attrs["window"] == "{size=3x3 stride=2x2}"
    acts = root_call(rewrite(CASES["BackwardInputConvolveUnevenPaddingOnActivations"][0])
                     .module)
    col = acts.attr("window").dims[1]
    assert (col.padding_low, col.padding_high, col.stride) == (0, 1, 2)


def test_backward_filter_operands_are_the_parameters():
    r = rewrite(CASES["TestBackwardFilterPatternMatch"][0], execute=False)
    call = root_call(r.module)
    assert [o.name for o in call.operands] == ["lhs", "rhs"]


def test_backward_input_constant_filter():
    """A constant filter with base dilation is materialised reversed for the call."""
    const = np.arange(4 * 4 * 2 * 2, dtype=np.float32).reshape(4, 4, 2, 2)
    literal = json.dumps(const.tolist()).replace("[", "{").replace("]", "}")
    text = f"""HloModule test
ENTRY entry_computation {{
  param0 = f32[16,2,16,16]{{3,2,1,0}} parameter(0)
  constant = f32[4,4,2,2]{{3,2,1,0}} constant({literal})
  ROOT convolution = f32[16,2,32,32]{{3,2,1,0}} convolution(param0, constant), window={{size=4x4 pad=2_2x2_2 lhs_dilate=2x2}}, dim_labels=bf01_01oi->bf01, feature_group_count=1
}}"""
    r = rewrite(text)
    call = root_call(r.module)
    assert call.custom_call_target == CONV_BACKWARD_INPUT
    assert call.operands[0].opcode == "parameter"
    assert call.operands[1].opcode == "reverse" and \
        call.operands[1].operands[0].opcode == "constant"
    assert r.compared_runs == 2


def test_conv1d_backward_filter():
    text = """HloModule Test
ENTRY Test {
  input = f32[8,256,128] parameter(0)
  filter = f32[8,254,128] parameter(1)
  reshape.1 = f32[8,1,256,128] reshape(input)
  reshape.2 = f32[8,1,254,128] reshape(filter)
  ROOT conv = f32[1,3,128,128] convolution(reshape.1, reshape.2), window={size=1x254}, dim_labels=f01b_i01o->01bf
}"""
    r = rewrite(text, execute=False)
    call = root_call(r.module)
    assert call.custom_call_target == CONV_BACKWARD_FILTER
    assert [o.opcode for o in call.operands] == ["reshape", "reshape"]
    small = text.replace("8,256,128", "2,12,5").replace("8,254,128", "2,10,5") \
        .replace("8,1,256,128", "2,1,12,5").replace("8,1,254,128", "2,1,10,5") \
        .replace("1,3,128,128", "1,3,5,5").replace("1x254", "1x10")
    r = rewrite(small)
    assert root_call(r.module).custom_call_target == CONV_BACKWARD_FILTER
    assert r.compared_runs == 2


def test_conv1d_backward_input():
    text = """HloModule Test
ENTRY Test {
  input = f32[2,14,5] parameter(0)
  filter = f32[3,6,5] parameter(1)
  reverse = f32[3,6,5] reverse(filter), dimensions={0}
  reshape.1 = f32[2,1,14,5] reshape(input)
  reshape.2 = f32[1,3,6,5] reshape(reverse)
  ROOT conv = f32[2,1,16,6] convolution(reshape.1, reshape.2), window={size=1x3 pad=0_0x2_2}, dim_labels=b01f_01oi->b01f
}"""
    r = rewrite(text)
    call = root_call(r.module)
    assert call.custom_call_target == CONV_BACKWARD_INPUT
    assert [o.opcode for o in call.operands] == ["reshape", "reshape"]
    assert call.operands[1].operands[0].name == "filter"   # the reverse is absorbed
    assert r.compared_runs == 2
    # a reverse of another dimension is not the 1-D filter's flip: a forward convolution
    wrong = text.replace("dimensions={0}", "dimensions={1}")
    assert root_call(rewrite(wrong).module).custom_call_target == CONV_FORWARD


@pytest.mark.parametrize("et,cc,rewritten", [
    ("c64", None, False), ("c128", None, False), ("pred", None, False),
    ("f8e4m3fn", (8, 0), False), ("f8e4m3fn", (9, 0), True),
    ("f8e4m3fnuz", (9, 0), False), ("s8", None, True), ("bf16", None, True),
])
def test_types(et, cc, rewritten):
    text = f"""HloModule Test
ENTRY Test {{
  input = {et}[1,17,9,9] parameter(0)
  filter = {et}[3,3,17,32] parameter(1)
  ROOT conv = {et}[1,32,9,9] convolution(input, filter), window={{size=3x3 pad=1_1x1_1}}, dim_labels=bf01_01io->bf01, feature_group_count=1
}}"""
    before, m = run_passes(text, "cudnn-conv-rewriter", cc=cc)
    assert bool(calls(m)) is rewritten
    if not rewritten:
        assert m.to_text() == before.to_text()


# ---- batch groups ----------------------------------------------------------------------------------
BATCH_GROUPED = """HloModule bgc
ENTRY e {
  x = f32[4,5,5,3] parameter(0)
  w = f32[3,3,3,6] parameter(1)
  ROOT c = f32[2,3,3,6] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=2
}"""


def test_batch_grouped_forward_becomes_feature_grouped():
    """ConvertBatchGroupedToFeatureGroupedConvolution: the batch [4] -> [2, 2], the group
    dim moved above the features: a forward call with feature_group_count=2."""
    r = rewrite(BATCH_GROUPED)
    call = root_call(r.module)
    assert call.custom_call_target == CONV_FORWARD
    assert call.attr("feature_group_count") == 2
    assert call.operands[0].shape.dims == (2, 5, 5, 6)
    assert r.compared_runs == 2


# what convolution-group-converter makes of batch_group_count=4: the groups as a spatial
# dim of size 4 with a window of 4, stride 3 over a 4x lhs-dilated input
GROUPS_AS_SPATIAL = """HloModule bg
ENTRY %e (lhs: f32[4,3,5,6], rhs: f32[4,7,5,6]) -> f32[4,3,7,1] {
  %lhs = f32[4,3,5,6] parameter(0)
  %rhs = f32[4,7,5,6] parameter(1)
  ROOT %conv = f32[4,3,7,1] convolution(%lhs, %rhs), window={size=4x6 stride=3x1 lhs_dilate=4x1}, dim_labels=0bf1_0oi1->0bf1
}"""


def test_batch_groups_written_as_a_spatial_dim_are_restored():
    r = rewrite(GROUPS_AS_SPATIAL)
    (call,) = calls(r.module)
    # no lhs dilation left for gpu-conv-padding-legalization to materialise
    assert call.custom_call_target == CONV_BACKWARD_FILTER
    assert call.attr("feature_group_count") == 4
    assert "lhs_dilate" not in call.attrs["window"]
    assert [o.opcode for o in call.operands] == ["reshape", "reshape"]   # no transposes
    assert r.module.entry.root.opcode == "transpose"
    assert r.compared_runs == 2
    full = check_pass(parse_hlo(GROUPS_AS_SPATIAL),
                      "cudnn-conv-rewriter,gpu-conv-padding-legalization", seeds=(0,),
                      rtol=1e-4, atol=1e-4)
    assert "pad(" not in full.after_text


@pytest.mark.parametrize("window,labels,lhs,rhs,out", [
    # group dim last, output group dim next to the features
    ("size=2x3 pad=1_1x0_0 lhs_dilate=1x3 stride=1x2", "b01f_01io->b01f",
     "f32[2,4,3,5]", "f32[2,3,5,4]", "f32[2,5,3,4]"),
    # feature-first layouts, 3 groups
    ("size=3x3 stride=2x1 lhs_dilate=3x1", "f0b1_0io1->f0b1",
     "f32[5,3,2,4]", "f32[3,5,6,3]", "f32[6,3,2,2]"),
    # the group dim is the only spatial dim: a convolution without spatial dims is left
    ("size=3 stride=2 lhs_dilate=3", "0bf_0oi->0bf", "f32[3,4,5]", "f32[3,6,5]",
     "f32[3,4,6]"),
])
def test_other_group_dim_positions(window, labels, lhs, rhs, out):
    text = conv_text(lhs, rhs, out, window, labels)
    r = rewrite(text)
    (call,) = calls(r.module)
    assert "lhs_dilate" not in call.attrs.get("window", "")
    assert r.compared_runs == 2


def test_group_converter_output_is_restored_in_the_pipeline():
    """convolution-group-converter (our optimization pipeline runs it; XLA's GPU compiler
    does not) then the conv rewriter: no base-dilated input is left to pad."""
    text = """HloModule m
ENTRY e {
  x = f32[6,5,5,2] parameter(0)
  dy = f32[6,3,3,4] parameter(1)
  ROOT c = f32[3,3,1,4] convolution(x, dy), window={size=3x3}, dim_labels=f01b_i01o->01bf, batch_group_count=2
}"""
    r = check_pass(parse_hlo(text),
                   "convolution-group-converter,cudnn-conv-rewriter,gpu-conv-padding-legalization",
                   seeds=(0, 1), rtol=1e-4, atol=1e-4)
    (call,) = calls(r.module)
    assert "lhs_dilate" not in call.attrs["window"] and "pad(" not in r.after_text
    assert r.compared_runs == 2
