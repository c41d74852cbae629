"""cudnn_vectorize_convolutions: XLA's cudnn_vectorize_convolutions_test.cc cases (cuDNN
8.3, reordering on as XLA's default), and the interpreter on both sides where the test's
shapes are consistent (several XLA cases pair a bias or side input of the wrong size with
the convolution; those are checked as text only).  XLA's cases leave the output spatial
sizes unchanged by a 2x2 window without padding; ``pad=0_1x0_1`` (which this pass does not
look at) is added where the values are compared so that the shapes agree."""
from __future__ import annotations

import pytest

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers as DimNums
from passes.gpu._conv_util import CONV_BIAS_ACTIVATION, CONV_FORWARD
from passes.gpu.cudnn_vectorize_convolutions import CudnnVectorizeConvolutions

from .test_conv_support import calls, cudnn_config, run_passes, same_values

PASS = "cudnn_vectorize_convolutions"
SAME = "size=2x2 pad=0_1x0_1"  # a 2x2 window that keeps the spatial sizes


def vectorize(text, cc=(7, 5), **flags):
    return run_passes(text, [CudnnVectorizeConvolutions(cc)], **flags)


def conv_module(input_, filter_, result, window="size=2x2", labels="b01f_01io->b01f",
                extra="", extra_params="", config=""):
    return f"""HloModule TestModule
ENTRY TestComputation {{
  input = {input_} parameter(0)
  filter = {filter_} parameter(1)
{extra_params}  ROOT result = ({result}, u8[0]) custom-call(input, filter{extra}), window={{{window}}}, dim_labels={labels}, custom_call_target="__cudnn$convForward"{config}
}}"""


def chain(inst, depth=4):
    """[(opcode, dims)] from ``inst`` down its first operands."""
    out = []
    while inst is not None and len(out) < depth:
        out.append((inst.opcode, list(inst.shape.dims) if inst.shape.is_array() else None))
        inst = inst.operands[0] if inst.operands else None
    return out


def the_conv(m):
    (c,) = calls(m)
    return c


def dnums(c):
    return DimNums.of(c)


# ---- vectorizing to 4 ------------------------------------------------------------------------
def test_vectorize_to_4():
    text = conv_module("s8[10,20,30,40]", "s8[2,2,40,44]", "s8[10,20,30,44]", window=SAME,
                       config=', backend_config="{bar: 0}"')
    before, m = vectorize(text)
    c = the_conv(m)
    root = m.entry.root
    assert root.opcode == "tuple"
    assert chain(root.operands[0], 3) == [("reshape", [10, 20, 30, 44]),
                                           ("get-tuple-element", [10, 20, 30, 11, 4]),
                                           ("custom-call", None)]
    assert chain(c.operands[0]) == [("reshape", [10, 20, 30, 10, 4]), ("parameter",
                                                                        [10, 20, 30, 40])]
    assert chain(c.operands[1]) == [("reshape", [2, 2, 10, 4, 44]), ("parameter",
                                                                      [2, 2, 40, 44])]
    assert c.attrs["backend_config"] == '"{bar: 0}"'   # kept verbatim
    d = dnums(c)
    assert (d.input_batch, d.input_spatial, d.input_feature) == (0, (1, 2), 3)
    assert (d.kernel_spatial, d.kernel_input_feature, d.kernel_output_feature) == \
        ((0, 1), 2, 4)
    assert (d.output_batch, d.output_spatial, d.output_feature) == (0, (1, 2), 3)
    assert same_values(before, m) == 2


def test_no_vectorize_to_4_unsupported_filter_type():
    text = conv_module("s8[10,20,30,40]", "f32[2,2,40,44]", "s8[10,20,30,44]")
    before, m = vectorize(text)
    assert m.to_text() == before.to_text()


def test_vectorize_to_4_nchw():
    text = conv_module("s8[10,48,20,30]", "s8[48,44,2,2]", "s8[10,44,20,30]", window=SAME,
                       labels="bf01_io01->bf01")
    before, m = vectorize(text)
    c = the_conv(m)
    assert c.operands[0].shape.dims == (10, 12, 4, 20, 30)
    assert c.operands[1].shape.dims == (12, 4, 44, 2, 2)
    assert c.shape.tuple_shapes[0].dims == (10, 11, 4, 20, 30)
    d = dnums(c)
    assert (d.input_batch, d.input_feature, d.input_spatial) == (0, 1, (3, 4))
    assert (d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial) == \
        (0, 2, (3, 4))
    assert (d.output_batch, d.output_feature, d.output_spatial) == (0, 1, (3, 4))
    assert same_values(before, m) == 2


def test_increment_all_dnums():
    # XLA's case pairs a 3x3 filter with a 2x2 window: text only
    text = conv_module("s8[16,16,16,16]", "s8[16,16,3,3]", "s8[16,16,16,16]",
                       labels="fb01_i01o->fb01")
    _, m = vectorize(text)
    c = the_conv(m)
    assert c.operands[0].shape.dims == (4, 4, 16, 16, 16)
    assert c.operands[1].shape.dims == (4, 4, 16, 3, 3)
    assert c.shape.tuple_shapes[0].dims == (4, 4, 16, 16, 16)
    d = dnums(c)
    assert (d.input_feature, d.input_batch, d.input_spatial) == (0, 2, (3, 4))
    assert (d.kernel_input_feature, d.kernel_spatial, d.kernel_output_feature) == \
        (0, (2, 3), 4)
    assert (d.output_feature, d.output_batch, d.output_spatial) == (0, 2, (3, 4))
    assert c.attrs["dim_labels"] == "f?b01_i?01o->f?b01"


def test_filter_dnums():
    text = conv_module("s8[1,20,9,9]", "s8[3,3,20,32]", "s8[1,32,9,9]",
                       window="size=3x3 pad=1_1x1_1", labels="bf01_01io->bf01")
    before, m = vectorize(text)
    c = the_conv(m)
    assert c.operands[0].shape.dims == (1, 5, 4, 9, 9)
    assert c.operands[1].shape.dims == (3, 3, 5, 4, 32)
    assert c.shape.tuple_shapes[0].dims == (1, 8, 4, 9, 9)
    d = dnums(c)
    assert (d.input_batch, d.input_feature, d.input_spatial) == (0, 1, (3, 4))
    assert (d.kernel_spatial, d.kernel_input_feature, d.kernel_output_feature) == \
        ((0, 1), 2, 4)
    assert (d.output_batch, d.output_feature, d.output_spatial) == (0, 1, (3, 4))
    assert same_values(before, m) == 2


@pytest.mark.parametrize("result_type,features", [("s8", 41), ("s32", 41), ("f32", 41)])
def test_no_vectorize(result_type, features):
    # 41 input features; int8 -> int32 and int8 -> float are not vectorized
    text = conv_module(f"s8[10,20,30,{features}]", f"s8[2,2,{features},44]",
                       f"{result_type}[10,20,30,44]")
    before, m = vectorize(text)
    assert m.to_text() == before.to_text()


# ---- vectorizing to 32, with the filter reordered -----------------------------------------------
def test_vectorize_to_32():
    text = conv_module("s8[10,20,30,64]", "s8[2,2,64,128]", "s8[10,20,30,128]",
                       window=SAME)
    before, m = vectorize(text)
    c = the_conv(m)
    assert c.operands[0].shape.dims == (10, 20, 30, 2, 32)
    f = c.operands[1]
    assert chain(f) == [("reshape", [128, 2, 2, 2, 32]),
                        ("transpose", [2, 2, 2, 16, 2, 8, 4, 4]),
                        ("reshape", [2, 2, 2, 8, 4, 16, 4, 2]),
                        ("parameter", [2, 2, 64, 128])]
    assert list(f.operands[0].dimensions) == [2, 0, 1, 5, 7, 3, 6, 4]
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 4, 32)
    assert cudnn_config(c)["reordered_int8_nchw_vect"] is True
    assert c.attrs["dim_labels"] == "b01f_oi01->b01f"
    assert same_values(before, m) == 2


def test_vectorize_to_32_without_reordering():
    # --xla_gpu_enable_cudnn_int8x32_convolution_reordering=false (the flag is not declared
    # in hlo_opt/flags.py yet: the pass reads it with getattr, set here on the module)
    from hlo_opt.api import parse_hlo
    from hlo_opt.flags import DebugOptions
    module = parse_hlo(conv_module("s8[10,20,30,64]", "s8[2,2,64,128]", "s8[10,20,30,128]",
                                   window=SAME))
    options = DebugOptions()
    options.xla_gpu_enable_cudnn_int8x32_convolution_reordering = False
    module.config = module.config.replace(debug_options=options)
    before, m = vectorize(module)
    c = the_conv(m)
    assert chain(c.operands[1], 2) == [("reshape", [2, 2, 2, 32, 128]),
                                       ("parameter", [2, 2, 64, 128])]
    assert "reordered_int8_nchw_vect" not in c.attrs.get("backend_config", "")
    assert same_values(before, m) == 2


def test_bias_and_side_input():
    # XLA's case: the side input has the input's 64 features, the output 128: text only
    text = conv_module("s8[10,20,30,64]", "s8[2,2,64,128]", "s8[10,20,30,128]",
                       extra=", bias, side_input",
                       extra_params="  bias = f32[128] parameter(2)\n"
                                    "  side_input = s8[10,20,30,64] parameter(3)\n")
    _, m = vectorize(text)
    c = the_conv(m)
    assert c.operands[0].shape.dims == (10, 20, 30, 2, 32)
    assert c.operands[1].shape.dims == (128, 2, 2, 2, 32)
    bias = c.operands[2]
    assert chain(bias) == [("reshape", [128]), ("transpose", [4, 2, 4, 4]),
                           ("reshape", [4, 4, 2, 4]), ("parameter", [128])]
    assert list(bias.operands[0].dimensions) == [0, 2, 1, 3]
    assert chain(c.operands[3], 2) == [("reshape", [10, 20, 30, 2, 32]),
                                       ("parameter", [10, 20, 30, 64])]
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 4, 32)
    assert cudnn_config(c)["reordered_int8_nchw_vect"] is True


def test_no_vectorize_to_32_before_sm75():
    text = conv_module("s8[10,20,30,64]", "s8[2,2,64,128]", "s8[10,20,30,128]",
                       window=SAME)
    before, m = vectorize(text, cc=(7, 0))
    c = the_conv(m)
    assert c.operands[0].shape.dims == (10, 20, 30, 16, 4)
    assert c.operands[1].shape.dims == (2, 2, 16, 4, 128)
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 32, 4)
    assert "reordered_int8_nchw_vect" not in c.attrs.get("backend_config", "")
    assert same_values(before, m) == 2


# ---- re-vectorizing ----------------------------------------------------------------------------
def _bias_side(bias: str, side: str) -> dict:
    return dict(extra=", bias, side_input",
                extra_params=f"  bias = {bias} parameter(2)\n"
                             f"  side_input = {side} parameter(3)\n")


def test_vectorize_4_to_32():
    text = conv_module("s8[10,20,30,16,4]", "s8[3,5,16,192,4]", "s8[10,20,30,48,4]",
                       window="size=3x5", **_bias_side("f32[64]", "s8[10,20,30,16,4]"),
                       config=', backend_config="{foo: 42}"').replace("__cudnn$convForward",
                                                                      "__cudnn$convForward")
    # "{foo: 42}" is not JSON: XLA would fail to set the reordering flag; here the filter
    # is then not reordered (checked below); XLA's case with a JSON config follows
    _, m = vectorize(text)
    assert the_conv(m).operands[1].shape.dims == (3, 5, 2, 192, 32)
    text = text.replace(', backend_config="{foo: 42}"', "")
    _, m = vectorize(text)
    c = the_conv(m)
    assert chain(c.operands[0]) == [("reshape", [10, 20, 30, 2, 32]),
                                    ("transpose", [10, 20, 30, 2, 8, 4]),
                                    ("reshape", [10, 20, 30, 2, 8, 4]),
                                    ("parameter", [10, 20, 30, 16, 4])]
    f = c.operands[1]
    assert chain(f) == [("reshape", [192, 2, 3, 5, 32]),
                        ("transpose", [2, 3, 5, 24, 2, 8, 4, 4]),
                        ("reshape", [3, 5, 2, 8, 24, 4, 2, 4]),
                        ("parameter", [3, 5, 16, 192, 4])]
    assert list(f.operands[0].dimensions) == [2, 0, 1, 4, 6, 3, 5, 7]
    assert chain(c.operands[2], 3)[:3] == [("reshape", [64]), ("transpose", [2, 2, 4, 4]),
                                           ("reshape", [2, 4, 2, 4])]
    assert c.operands[3].shape.dims == (10, 20, 30, 2, 32)
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 6, 32)
    assert chain(m.entry.root.operands[0], 4) == [
        ("reshape", [10, 20, 30, 48, 4]), ("transpose", [10, 20, 30, 6, 8, 4]),
        ("reshape", [10, 20, 30, 6, 8, 4]), ("get-tuple-element", [10, 20, 30, 6, 32])]
    d = dnums(c)
    assert (d.input_batch, d.input_spatial, d.input_feature) == (0, (1, 2), 3)
    assert (d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial) == \
        (0, 1, (2, 3))
    assert (d.output_batch, d.output_spatial, d.output_feature) == (0, (1, 2), 3)
    assert cudnn_config(c)["reordered_int8_nchw_vect"] is True


def test_vectorize_4_to_32_nchw():
    text = conv_module("s8[10,16,20,30,4]", "s8[16,128,2,2,4]", "s8[10,32,20,30,4]",
                       labels="bf01_io01->bf01",
                       **_bias_side("f32[64]", "s8[10,16,20,30,4]"))
    _, m = vectorize(text)
    c = the_conv(m)
    assert chain(c.operands[0], 3) == [("reshape", [10, 2, 20, 30, 32]),
                                       ("transpose", [10, 2, 20, 30, 8, 4]),
                                       ("reshape", [10, 2, 8, 20, 30, 4])]
    f = c.operands[1]
    assert chain(f, 3) == [("reshape", [128, 2, 2, 2, 32]),
                           ("transpose", [2, 2, 2, 16, 2, 8, 4, 4]),
                           ("reshape", [2, 8, 16, 4, 2, 2, 2, 4])]
    assert list(f.operands[0].dimensions) == [0, 5, 6, 2, 4, 1, 3, 7]
    assert c.shape.tuple_shapes[0].dims == (10, 4, 20, 30, 32)
    assert chain(m.entry.root.operands[0], 3) == [
        ("reshape", [10, 32, 20, 30, 4]), ("transpose", [10, 4, 8, 20, 30, 4]),
        ("reshape", [10, 4, 20, 30, 8, 4])]
    d = dnums(c)
    assert (d.input_batch, d.input_feature, d.input_spatial) == (0, 1, (2, 3))
    assert (d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial) == \
        (0, 1, (2, 3))
    assert (d.output_batch, d.output_feature, d.output_spatial) == (0, 1, (2, 3))


def test_vectorize_4_to_32_vector_dim_first():
    text = conv_module("s8[4,10,20,30,16]", "s8[4,3,5,16,192]", "s8[4,10,20,30,48]",
                       window="size=3x5", labels="?b01f_?01io->?b01f",
                       **_bias_side("f32[64]", "s8[4,10,20,30,16]"))
    _, m = vectorize(text)
    c = the_conv(m)
    assert chain(c.operands[0], 3) == [("reshape", [32, 10, 20, 30, 2]),
                                       ("transpose", [8, 4, 10, 20, 30, 2]),
                                       ("reshape", [4, 10, 20, 30, 2, 8])]
    f = c.operands[1]
    assert chain(f, 3) == [("reshape", [192, 2, 3, 5, 32]),
                           ("transpose", [2, 3, 5, 24, 2, 8, 4, 4]),
                           ("reshape", [4, 3, 5, 2, 8, 24, 4, 2])]
    assert list(f.operands[0].dimensions) == [3, 1, 2, 5, 7, 4, 6, 0]
    assert c.shape.tuple_shapes[0].dims == (32, 10, 20, 30, 6)
    assert chain(m.entry.root.operands[0], 3) == [
        ("reshape", [4, 10, 20, 30, 48]), ("transpose", [4, 10, 20, 30, 6, 8]),
        ("reshape", [8, 4, 10, 20, 30, 6])]
    d = dnums(c)
    assert (d.input_batch, d.input_spatial, d.input_feature) == (1, (2, 3), 4)
    assert (d.kernel_output_feature, d.kernel_input_feature, d.kernel_spatial) == \
        (0, 1, (2, 3))
    assert (d.output_batch, d.output_spatial, d.output_feature) == (1, (2, 3), 4)


def test_no_vectorize_4_to_32_before_sm75():
    text = conv_module("s8[10,20,30,16,4]", "s8[2,2,16,128,4]", "s8[10,20,30,32,4]",
                       **_bias_side("f32[10]", "s8[10,20,30,16,4]"))
    before, m = vectorize(text, cc=(7, 0))
    assert m.to_text() == before.to_text()


def test_vectorize_16_to_32():
    text = conv_module("s8[10,20,30,4,16]", "s8[3,5,4,192,16]", "s8[10,20,30,12,16]",
                       window="size=3x5")
    _, m = vectorize(text)
    c = the_conv(m)
    f = c.operands[1]
    assert chain(f, 6) == [("reshape", [192, 2, 3, 5, 32]),
                           ("transpose", [2, 3, 5, 24, 2, 8, 4, 4]),
                           ("reshape", [3, 5, 2, 24, 4, 2, 8, 4]),
                           ("reshape", [3, 5, 2, 192, 32]),
                           ("transpose", [3, 5, 2, 192, 2, 16]),
                           ("reshape", [3, 5, 2, 2, 192, 16])]
    assert chain(c.operands[0], 3) == [("reshape", [10, 20, 30, 2, 32]),
                                       ("transpose", [10, 20, 30, 2, 2, 16]),
                                       ("reshape", [10, 20, 30, 2, 2, 16])]
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 6, 32)
    assert chain(m.entry.root.operands[0], 3) == [
        ("reshape", [10, 20, 30, 12, 16]), ("transpose", [10, 20, 30, 6, 2, 16]),
        ("reshape", [10, 20, 30, 6, 2, 16])]
    assert cudnn_config(c)["reordered_int8_nchw_vect"] is True


def test_vectorize_mixed_to_32():
    text = conv_module("s8[10,20,30,8,8]", "s8[3,5,2,192,32]", "s8[10,20,30,96,2]",
                       window="size=3x5")
    _, m = vectorize(text)
    c = the_conv(m)
    assert chain(c.operands[0], 3) == [("reshape", [10, 20, 30, 2, 32]),
                                       ("transpose", [10, 20, 30, 2, 4, 8]),
                                       ("reshape", [10, 20, 30, 2, 4, 8])]
    assert chain(c.operands[1], 3) == [("reshape", [192, 2, 3, 5, 32]),
                                       ("transpose", [2, 3, 5, 24, 2, 8, 4, 4]),
                                       ("reshape", [3, 5, 2, 24, 4, 2, 8, 4])]
    assert c.shape.tuple_shapes[0].dims == (10, 20, 30, 6, 32)
    assert chain(m.entry.root.operands[0], 3) == [
        ("reshape", [10, 20, 30, 96, 2]), ("transpose", [10, 20, 30, 6, 16, 2]),
        ("reshape", [10, 20, 30, 6, 16, 2])]


# ---- values: consistent modules through re-vectorizing and reordering -----------------------------
@pytest.mark.parametrize("input_,filter_,result,window,labels", [
    # 16 -> 32 and mixed vectors, padded so the shapes agree
    ("s8[2,6,7,4,16]", "s8[3,3,4,64,16]", "s8[2,6,7,4,16]", "size=3x3 pad=1_1x1_1",
     "b01f_01io->b01f"),
    ("s8[2,6,7,8,8]", "s8[3,3,2,64,32]", "s8[2,6,7,32,2]", "size=3x3 pad=1_1x1_1",
     "b01f_01io->b01f"),
    ("s8[2,16,6,7,4]", "s8[16,64,2,2,4]", "s8[2,16,5,6,4]", "size=2x2", "bf01_io01->bf01"),
    ("s8[4,2,6,7,16]", "s8[4,3,3,16,64]", "s8[4,2,4,5,16]", "size=3x3", "?b01f_?01io->?b01f"),
])
def test_revectorized_values(input_, filter_, result, window, labels):
    before, m = vectorize(conv_module(input_, filter_, result, window=window, labels=labels))
    assert the_conv(m).shape.tuple_shapes[0].dims[-1] == 32 or \
        32 in the_conv(m).shape.tuple_shapes[0].dims
    assert same_values(before, m) == 2


def test_bias_activation_values_with_reordered_bias():
    text = """HloModule m
ENTRY e {
  input = s8[2,6,7,64] parameter(0)
  filter = s8[3,3,64,64] parameter(1)
  bias = f32[64] parameter(2)
  side = s8[2,6,7,64] parameter(3)
  ROOT r = (s8[2,6,7,64], u8[0]) custom-call(input, filter, bias, side), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={"cudnn_conv_backend_config":{"conv_result_scale":1,"activation_mode":"kRelu","side_input_scale":1}}
}"""
    before, m = vectorize(text)
    (c,) = calls(m, CONV_BIAS_ACTIVATION)
    assert cudnn_config(c)["reordered_int8_nchw_vect"] is True
    assert c.operands[2].opcode == "reshape" and c.operands[3].shape.dims == (2, 6, 7, 2, 32)
    assert same_values(before, m) == 2
    assert not calls(m, CONV_FORWARD)
