"""cudnn_pad_for_convolutions: XLA's cudnn_pad_for_convolutions_test.cc cases, and the
interpreter on both sides where the case's shapes agree (XLA's cases use 2x2 windows
that keep the spatial sizes; ``pad=0_1x0_1`` is added for the value checks)."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from passes.gpu._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT,
                                   CONV_BIAS_ACTIVATION, CONV_FORWARD)
from passes.gpu.cudnn_pad_for_convolutions import CudnnPadForConvolutions

from .test_conv_support import calls, run_passes, same_values

SAME = "size=2x2 pad=0_1x0_1"


def pad(text, cc):
    return run_passes(text, [CudnnPadForConvolutions(cc)])


def module(lhs, rhs, result, target=CONV_FORWARD, window="size=2x2", extra="",
           extra_params="", labels="b01f_01io->b01f", gte=False):
    root = "result = " if gte else "ROOT result = "
    tail = "\n  ROOT gte = {} get-tuple-element(result), index=0".format(result) if gte else ""
    return f"""HloModule TestModule
ENTRY TestComputation {{
  lhs = {lhs} parameter(0)
  rhs = {rhs} parameter(1)
{extra_params}  {root}({result}, u8[0]) custom-call(lhs, rhs{extra}), window={{{window}}}, dim_labels={labels}, custom_call_target="{target}"{tail}
}}"""


def the_call(m):
    (c,) = calls(m)
    return c


def padded(inst, dims):
    """``inst`` is a pad of a parameter to ``dims``."""
    return inst.opcode == "pad" and inst.operands[0].opcode == "parameter" and \
        list(inst.shape.dims) == dims


def sliced_back(m, call):
    """The call's value reaches the root through tuple(slice(gte(call)), ...)."""
    users = [u for u in call.users if u.attr("index") == 0]
    return len(users) == 1 and users[0].users[0].opcode == "slice" and \
        users[0].users[0].users[0].opcode == "tuple"


# ---- f16 (tensor cores) ------------------------------------------------------------------------
@pytest.mark.parametrize("window", ["size=2x2", SAME])
def test_pad_f16_forward_conv_input_channels(window):
    before, m = pad(module("f16[10,20,30,41]", "f16[2,2,41,40]", "f16[10,20,30,40]",
                           window=window), (7, 0))
    c = m.entry.root
    assert c.custom_call_target == CONV_FORWARD
    assert padded(c.operands[0], [10, 20, 30, 48]) and padded(c.operands[1], [2, 2, 48, 40])
    if window == SAME:
        assert same_values(before, m, rtol=1e-3, atol=1e-3) == 2


def test_pad_f16_backward_input_conv_output_channels():
    _, m = pad(module("f16[10,20,30,41]", "f16[2,2,40,41]", "f16[10,20,30,40]",
                      target=CONV_BACKWARD_INPUT), (7, 0))
    c = m.entry.root
    assert c.custom_call_target == CONV_BACKWARD_INPUT
    assert padded(c.operands[0], [10, 20, 30, 48]) and padded(c.operands[1], [2, 2, 40, 48])


def test_pad_f16_forward_conv_output_channels():
    before, m = pad(module("f16[10,20,30,40]", "f16[2,2,40,41]", "f16[10,20,30,41]",
                           window=SAME), (7, 0))
    c = the_call(m)
    assert m.entry.root.opcode == "tuple" and sliced_back(m, c)
    assert c.operands[0].opcode == "parameter" and padded(c.operands[1], [2, 2, 40, 48])
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 48)
    assert same_values(before, m, rtol=1e-3, atol=1e-3) == 2


def test_pad_f16_backward_input_conv_input_channels():
    _, m = pad(module("f16[10,20,30,40]", "f16[2,2,41,40]", "f16[10,20,30,41]",
                      target=CONV_BACKWARD_INPUT, gte=True), (7, 0))
    c = the_call(m)
    assert m.entry.root.opcode == "get-tuple-element" and sliced_back(m, c)
    assert c.operands[0].opcode == "parameter" and padded(c.operands[1], [2, 2, 48, 40])


def test_pad_f16_backward_filter_conv_input_channels():
    _, m = pad(module("f16[10,20,30,41]", "f16[10,20,30,40]", "f16[2,2,41,40]",
                      target=CONV_BACKWARD_FILTER, gte=True), (7, 0))
    c = the_call(m)
    assert sliced_back(m, c)
    assert padded(c.operands[0], [10, 20, 30, 48]) and c.operands[1].opcode == "parameter"


def test_pad_f16_backward_filter_conv_output_channels():
    _, m = pad(module("f16[10,20,30,40]", "f16[10,20,30,41]", "f16[2,2,40,41]",
                      target=CONV_BACKWARD_FILTER, gte=True), (7, 0))
    c = the_call(m)
    assert sliced_back(m, c)
    assert c.operands[0].opcode == "parameter" and padded(c.operands[1], [10, 20, 30, 48])


def test_pad_input_features_3_to_4():
    before, m = pad(module("f16[10,20,30,3]", "f16[2,2,3,32]", "f16[10,20,30,32]",
                           window=SAME), (7, 0))
    c = m.entry.root
    assert padded(c.operands[0], [10, 20, 30, 4]) and padded(c.operands[1], [2, 2, 4, 32])
    assert same_values(before, m, rtol=1e-3, atol=1e-3) == 2


def test_f16_padding_needs_tensor_cores_and_bounded_growth():
    text = module("f16[10,20,30,41]", "f16[2,2,41,40]", "f16[10,20,30,40]")
    before, m = pad(text, (6, 1))             # before Volta: no tensor cores
    assert m.to_text() == before.to_text()
    # 2 -> 8 features quadruples the input: over the 1.35x bound
    before, m = pad(module("f16[10,20,30,2]", "f16[2,2,2,40]", "f16[10,20,30,40]"), (7, 0))
    assert m.to_text() == before.to_text()
    # grouped convolutions are not padded
    before, m = pad(module("f16[10,20,30,82]", "f16[2,2,41,40]", "f16[10,20,30,40]",
                           extra="") .replace('custom_call_target=', 'feature_group_count=2, '
                                              'custom_call_target='), (7, 0))
    assert m.to_text() == before.to_text()


# ---- integers ---------------------------------------------------------------------------------
def test_pad_int_forward_conv_input_channels():
    before, m = pad(module("s8[10,20,30,41]", "s8[2,2,41,40]", "f32[10,20,30,40]",
                           window=SAME), (7, 0))
    c = m.entry.root
    assert padded(c.operands[0], [10, 20, 30, 44]) and padded(c.operands[1], [2, 2, 44, 40])
    assert same_values(before, m) == 2


def test_pad_int_forward_conv_output_channels():
    before, m = pad(module("s8[10,20,30,40]", "s8[2,2,40,41]", "f32[10,20,30,41]",
                           window=SAME), (7, 0))
    c = the_call(m)
    assert sliced_back(m, c)
    assert c.operands[0].opcode == "parameter" and padded(c.operands[1], [2, 2, 40, 44])
    assert same_values(before, m) == 2


def test_pad_int8_to_32_on_sm75():
    before, m = pad(module("s8[10,20,30,40]", "s8[2,2,40,41]", "s8[10,20,30,41]",
                           window=SAME), (7, 5))
    c = the_call(m)
    assert sliced_back(m, c)
    assert padded(c.operands[0], [10, 20, 30, 64]) and padded(c.operands[1], [2, 2, 64, 64])
    assert same_values(before, m) == 2


def test_no_pad_int8_to_32_on_sm70():
    _, m = pad(module("s8[10,20,30,40]", "s8[2,2,40,41]", "s8[10,20,30,41]"), (7, 0))
    c = the_call(m)
    assert sliced_back(m, c)
    assert c.operands[0].opcode == "parameter" and padded(c.operands[1], [2, 2, 40, 44])


def test_no_pad_int8_to_32_float_output_sm75():
    # int8x32 needs an integer result: padded to int8x4 instead
    _, m = pad(module("s8[10,20,30,38]", "s8[2,2,38,41]", "f32[10,20,30,41]"), (7, 5))
    c = the_call(m)
    assert sliced_back(m, c)
    assert padded(c.operands[0], [10, 20, 30, 40]) and padded(c.operands[1], [2, 2, 40, 44])


def test_no_pad_int8_unsupported_filter_type_sm75():
    before, m = pad(module("s8[10,20,30,38]", "f32[2,2,38,41]", "s8[10,20,30,41]"), (7, 5))
    assert m.to_text() == before.to_text()


def test_no_pad_to_int8x32_excessive_blowup():
    before, m = pad(module("s8[128,4,48,48]", "s8[64,4,3,3]", "f32[128,64,48,48]",
                           window="size=3x3", labels="bf01_io01->bf01"), (7, 5))
    assert m.to_text() == before.to_text()


def test_pad_int8x4_to_32():
    _, m = pad(module("s8[10,20,30,41,4]", "s8[2,2,41,4,168]", "s8[10,20,30,42,4]",
                      labels="b01f?_01i?o->b01f?"), (7, 5))
    c = the_call(m)
    assert sliced_back(m, c)
    assert padded(c.operands[0], [10, 20, 30, 48, 4])
    assert padded(c.operands[1], [2, 2, 48, 4, 192])
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 48, 4)


def test_pad_int8x4_to_32_bias_activation():
    _, m = pad(module("s8[10,20,30,41,4]", "s8[2,2,41,4,168]", "s8[10,20,30,42,4]",
                      target=CONV_BIAS_ACTIVATION, labels="b01f?_01i?o->b01f?",
                      extra=", bias, side_input",
                      extra_params="  bias = f32[10] parameter(2)\n"
                                   "  side_input = s8[10,20,30,42,4] parameter(3)\n"), (7, 5))
    c = the_call(m)
    assert sliced_back(m, c)
    assert padded(c.operands[0], [10, 20, 30, 48, 4])
    assert padded(c.operands[1], [2, 2, 48, 4, 192])
    assert padded(c.operands[2], [32]) and padded(c.operands[3], [10, 20, 30, 48, 4])
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 48, 4)


def test_pad_int_fused_forward_conv_input_and_output_channels():
    # XLA's case (its filter has 2 input features for an input with 3): text only
    text = """HloModule Test
ENTRY %Test (input: s8[1,3,3,3], filter: s8[3,3,2,5], side_input: f32[1,3,3,5], bias: s8[5]) -> f32[1,3,3,5] {
  %input = s8[1,3,3,3]{3,2,1,0} parameter(0)
  %filter = s8[3,3,2,5]{3,2,1,0} parameter(1)
  %bias = s8[5]{0} parameter(3)
  %convert = f32[5]{0} convert(s8[5]{0} %bias)
  %side_input = f32[1,3,3,5]{3,2,1,0} parameter(2)
  %custom-call.1 = (f32[1,3,3,5]{3,2,1,0}, u8[0]{0}) custom-call(s8[1,3,3,3]{3,2,1,0} %input, s8[3,3,2,5]{3,2,1,0} %filter, f32[5]{0} %convert, f32[1,3,3,5]{3,2,1,0} %side_input), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config="{\\"activationMode\\":\\"2\\",\\"convResultScale\\":1,\\"sideInputScale\\":1}"
  ROOT %get-tuple-element.1 = f32[1,3,3,5]{3,2,1,0} get-tuple-element((f32[1,3,3,5]{3,2,1,0}, u8[0]{0}) %custom-call.1), index=0
}"""
    _, m = pad(text, (7, 0))
    c = the_call(m)
    assert m.entry.root.opcode == "get-tuple-element" and sliced_back(m, c)
    assert [o.opcode for o in c.operands] == ["pad"] * 4
    assert [o.operands[0].opcode for o in c.operands] == ["parameter", "parameter", "convert",
                                                          "parameter"]
    assert [list(o.shape.dims) for o in c.operands] == [[1, 3, 3, 4], [3, 3, 4, 8], [8],
                                                        [1, 3, 3, 8]]


def test_int_bias_activation_values():
    text = """HloModule m
ENTRY e {
  input = s8[2,5,6,3] parameter(0)
  filter = s8[3,3,3,5] parameter(1)
  bias = f32[5] parameter(2)
  side = f32[2,5,6,5] parameter(3)
  call = (f32[2,5,6,5], u8[0]) custom-call(input, filter, bias, side), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={"cudnn_conv_backend_config":{"conv_result_scale":1,"activation_mode":"kRelu","side_input_scale":1}}
  ROOT r = f32[2,5,6,5] get-tuple-element(call), index=0
}"""
    before, m = pad(text, (7, 5))   # float result: int8x4
    c = the_call(m)
    assert [list(o.shape.dims) for o in c.operands] == [[2, 5, 6, 4], [3, 3, 4, 8], [8],
                                                        [2, 5, 6, 8]]
    assert same_values(before, m) == 2


def test_pads_in_the_gpu_conv_pipeline():
    """An f16 convolution through the conv passes: 7 features padded to 8 (the filter
    grows 1.31x, within the 1.35x bound), and the same values."""
    text = """HloModule m
ENTRY e {
  x = f16[2,6,7,7] parameter(0)
  w = f16[3,3,7,7] parameter(1)
  ROOT c = f16[2,6,7,7] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""
    before, m = run_passes(text, "cudnn-conv-rewriter,gpu-conv-padding-legalization,"
                                 "cudnn_pad_for_convolutions")
    (c,) = calls(m)
    assert c.operands[0].shape.dims == (2, 6, 7, 8) and c.operands[1].shape.dims == (3, 3, 8, 8)
    assert same_values(parse_hlo(text), m, rtol=2e-3, atol=2e-3) == 2
