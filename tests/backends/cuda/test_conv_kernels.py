"""Convolutions as CUDA kernels (``hlo_opt/backends/cuda/conv.py``): plain convolutions of
every shape the kernel takes, and the cuDNN custom calls the ``gpu`` pipeline makes of
JAX-style convolutions (forward, bias + activation, backward input, backward filter), each
one launch (no host thunk), run under cuda-sim against the interpreter, and compiled by
NVRTC for sm_80 and sm_90."""
from __future__ import annotations

import functools
import re

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter.heavy_common import window_output_size
from hlo_opt.ir.attributes import ConvolutionDimensionNumbers, Window
from tests.backends.cuda.support import assert_compiled_entries, assert_no_spills, require_gxx, require_nvrtc


def _conv(name, dt, x, w, window, labels, extra="", x_layout="", out_dt=None, out_layout=""):
    """A module of one convolution, its result shape worked out from window and labels."""
    dn = ConvolutionDimensionNumbers.parse(labels)
    win = Window.parse("{" + window + "}")
    g = dict(re.findall(r"(\w+_group_count)=(\d+)", extra))
    bg = int(g.get("batch_group_count", 1))
    out = [0] * len(x)
    out[dn.output_batch] = x[dn.input_batch] // bg
    out[dn.output_feature] = w[dn.kernel_output_feature]
    for i, (xs, os) in enumerate(zip(dn.input_spatial, dn.output_spatial)):
        d = win.dims[i]
        out[os] = window_output_size(x[xs], d.size, d.stride, d.padding_low, d.padding_high,
                                     d.base_dilation, d.window_dilation)
    od = out_dt or dt
    sx = ",".join(map(str, x))
    return f"""HloModule {name}
ENTRY e {{
  x = {dt}[{sx}]{x_layout} parameter(0)
  w = {dt}[{",".join(map(str, w))}] parameter(1)
  ROOT c = {od}[{",".join(map(str, out))}]{out_layout} convolution(x, w), window={{{window}}}, dim_labels={labels}{extra}
}}
"""


def _bias_relu(name, dt, features):
    """A conv, a broadcast bias add and a relu: cudnn-fused-convolution-rewriter's
    convBiasActivationForward with kRelu."""
    return f"""HloModule {name}
ENTRY e {{
  x = {dt}[2,8,8,{features}] parameter(0)
  w = {dt}[3,3,{features},8] parameter(1)
  b = {dt}[8] parameter(2)
  c = {dt}[2,8,8,8] convolution(x, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  bb = {dt}[2,8,8,8] broadcast(b), dimensions={{3}}
  a = {dt}[2,8,8,8] add(c, bb)
  z = {dt}[] constant(0)
  zb = {dt}[2,8,8,8] broadcast(z), dimensions={{}}
  ROOT r = {dt}[2,8,8,8] maximum(a, zb)
}}
"""


PLAIN = {
    "conv1d_stride_pad": _conv("conv1d_stride_pad", "f32", [2, 11, 3], [3, 3, 4],
                               "size=3 stride=2 pad=1_2", "b0f_0io->b0f"),
    "conv2d_nhwc": _conv("conv2d_nhwc", "f32", [2, 9, 9, 4], [3, 3, 4, 6],
                         "size=3x3 pad=1_1x1_1", "b01f_01io->b01f"),
    "conv2d_nchw_stride2": _conv("conv2d_nchw_stride2", "f32", [2, 4, 8, 8], [6, 4, 3, 3],
                                 "size=3x3 stride=2x2 pad=0_1x1_0", "bf01_oi01->bf01"),
    "conv3d": _conv("conv3d", "f32", [1, 5, 6, 7, 2], [2, 3, 2, 2, 3],
                    "size=2x3x2 stride=1x2x1 pad=0_0x1_1x1_0", "b012f_012io->b012f"),
    "negative_pad_dilations_reversal": _conv(
        "negative_pad_dilations_reversal", "f32", [2, 7, 9, 3], [2, 3, 3, 5],
        "size=2x3 pad=-1_1x2_-1 lhs_dilate=2x1 rhs_dilate=1x2 rhs_reversal=1x0",
        "b01f_01io->b01f"),
    "odd_labels_layout": _conv("odd_labels_layout", "f32", [5, 2, 3, 8], [4, 3, 3, 2],
                               "size=3x2 stride=1x2 pad=1_0x0_1", "0bf1_o0i1->f01b",
                               x_layout="{2,0,3,1}"),
    # unit dims whose strides equal a neighbour's, in a transposed result layout
    "unit_dims_layouts": _conv("unit_dims_layouts", "f32", [1, 6, 1, 4], [3, 1, 4, 5],
                               "size=3x1", "b01f_01io->b01f", x_layout="{0,3,2,1}",
                               out_layout="{0,1,2,3}"),
    "depthwise": _conv("depthwise", "f32", [2, 8, 8, 4], [3, 3, 1, 4],
                       "size=3x3 pad=1_1x1_1", "b01f_01io->b01f", ", feature_group_count=4"),
    "grouped": _conv("grouped", "f32", [2, 6, 6, 4], [3, 3, 2, 6], "size=3x3 stride=2x2",
                     "b01f_01io->b01f", ", feature_group_count=2"),
    "batch_grouped": _conv("batch_grouped", "f32", [4, 6, 6, 3], [3, 3, 3, 4], "size=3x3",
                           "b01f_01io->b01f", ", batch_group_count=2"),
    # a filter too big for shared memory (read where it lies)
    "big_filter": _conv("big_filter", "f32", [1, 4, 4, 64], [3, 3, 64, 64],
                        "size=3x3 pad=1_1x1_1", "b01f_01io->b01f"),
    "f16_nhwc": _conv("f16_nhwc", "f16", [2, 7, 7, 8], [3, 3, 8, 4], "size=3x3 pad=1_1x1_1",
                      "b01f_01io->b01f"),
    "bf16_nchw": _conv("bf16_nchw", "bf16", [2, 8, 6, 6], [4, 8, 3, 3],
                       "size=3x3 stride=2x2 pad=1_1x1_1", "bf01_oi01->bf01"),
    "f64_1d": _conv("f64_1d", "f64", [3, 4, 10], [5, 4, 3], "size=3 rhs_dilate=2",
                    "bf0_oi0->bf0"),
    "bf16_to_f32": _conv("bf16_to_f32", "bf16", [2, 6, 6, 4], [3, 3, 4, 4],
                         "size=3x3 pad=1_1x1_1", "b01f_01io->b01f", out_dt="f32"),
}

# JAX-style convolutions the gpu pipeline turns into cuDNN custom calls
GPU = {
    "cudnn_forward": _conv("cudnn_forward", "f32", [2, 9, 9, 4], [3, 3, 4, 8],
                           "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f"),
    "cudnn_forward_f16": _conv("cudnn_forward_f16", "f16", [2, 8, 8, 8], [3, 3, 8, 8],
                               "size=3x3 pad=1_1x1_1", "b01f_01io->b01f"),
    "cudnn_forward_bf16_nchw": _conv("cudnn_forward_bf16_nchw", "bf16", [2, 8, 8, 8],
                                     [8, 8, 3, 3], "size=3x3 pad=1_1x1_1",
                                     "bf01_oi01->bf01"),
    "cudnn_depthwise": _conv("cudnn_depthwise", "f32", [2, 8, 8, 8], [3, 3, 1, 8],
                             "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
                             ", feature_group_count=8"),
    "cudnn_bias_relu": _bias_relu("cudnn_bias_relu", "f32", 4),
    "cudnn_bias_relu_f16": _bias_relu("cudnn_bias_relu_f16", "f16", 8),
    "cudnn_backward_input": """HloModule cudnn_backward_input
ENTRY e {
  dy = f32[1,4,4,2] parameter(0)
  w = f32[3,3,3,2] parameter(1)
  rev = f32[3,3,3,2] reverse(w), dimensions={0,1}
  ROOT c = f32[1,8,8,3] convolution(dy, rev), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f
}
""",
    "cudnn_backward_input_same": """HloModule cudnn_backward_input_same
ENTRY e {
  dy = f32[2,6,6,4] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  rev = f32[3,3,3,4] reverse(w), dimensions={0,1}
  ROOT c = f32[2,6,6,3] convolution(dy, rev), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01oi->b01f
}
""",
    "cudnn_backward_filter": """HloModule cudnn_backward_filter
ENTRY e {
  x = f32[1,8,8,3] parameter(0)
  dy = f32[1,8,8,2] parameter(1)
  ROOT c = f32[4,4,3,2] convolution(x, dy), window={size=8x8 pad=2_1x2_1}, dim_labels=f01b_i01o->01bf
}
""",
    "cudnn_backward_filter_same": """HloModule cudnn_backward_filter_same
ENTRY e {
  x = f32[2,6,6,3] parameter(0)
  dy = f32[2,6,6,4] parameter(1)
  ROOT c = f32[3,3,3,4] convolution(x, dy), window={size=6x6 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
}
""",
    # batch groups as a spatial dim (convolution-group-converter's form): a grouped
    # backward filter
    "cudnn_grouped_backward_filter": """HloModule cudnn_grouped_backward_filter
ENTRY e {
  lhs = f32[4,3,8,16] parameter(0)
  rhs = f32[4,5,8,16] parameter(1)
  ROOT conv = f32[4,3,5,1] convolution(lhs, rhs), window={size=4x16 stride=3x1 lhs_dilate=4x1}, dim_labels=0bf1_0oi1->0bf1
}
""",
}


def _bias_act(name, mode, extra="", side_layout="", scratch=0):
    """A convBiasActivationForward call as written (not from the pipeline): scale, a side
    input in its own layout, ``mode``; the whole result tuple (scratch too) is the root."""
    cfg = ('{"cudnn_conv_backend_config":{"conv_result_scale":0.5,"side_input_scale":2,'
           f'"activation_mode":"{mode}"{extra}}}}}')
    return f"""HloModule {name}
ENTRY e {{
  x = f32[2,6,6,4] parameter(0)
  w = f32[3,3,4,5]{{2,1,0,3}} parameter(1)
  b = f32[5] parameter(2)
  s = f32[2,6,6,5]{side_layout} parameter(3)
  ROOT c = (f32[2,6,6,5], u8[{scratch}]) custom-call(x, w, b, s), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={cfg}
}}
"""


# cuDNN calls written directly: epilogues and groupings the pipeline's inputs above lack
CALLS = {
    "call_side_input_elu": _bias_act("call_side_input_elu", "kElu",
                                     side_layout="{0,3,2,1}", scratch=16),
    "call_leaky_relu": _bias_act("call_leaky_relu", "kLeakyRelu",
                                 extra=',"leakyrelu_alpha":0.125'),
    "call_relu6": _bias_act("call_relu6", "kRelu6"),
    "call_grouped_backward_input": """HloModule call_grouped_backward_input
ENTRY e {
  dy = f32[2,4,4,6] parameter(0)
  w = f32[3,3,3,6] parameter(1)
  c = (f32[2,8,8,6], u8[0]) custom-call(dy, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2, custom_call_target="__cudnn$convBackwardInput"
  ROOT r = f32[2,8,8,6] get-tuple-element(c), index=0
}
""",
}

TARGETS = {
    "cudnn_forward": "__cudnn$convForward",
    "cudnn_forward_f16": "__cudnn$convForward",
    "cudnn_forward_bf16_nchw": "__cudnn$convForward",
    "cudnn_depthwise": "__cudnn$convForward",
    "cudnn_bias_relu": "__cudnn$convBiasActivationForward",
    "cudnn_bias_relu_f16": "__cudnn$convBiasActivationForward",
    "cudnn_backward_input": "__cudnn$convBackwardInput",
    "cudnn_backward_input_same": "__cudnn$convBackwardInput",
    "cudnn_backward_filter": "__cudnn$convBackwardFilter",
    "cudnn_backward_filter_same": "__cudnn$convBackwardFilter",
    "cudnn_grouped_backward_filter": "__cudnn$convBackwardFilter",
}

SAMPLES = {"mobilenet_cluster": "sample_modules/mobilenet_cluster.hlo",
           "conv_block": "benchmarks/xla_gpu_modules/conv_block.hlo"}


def _gpu(module):
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    return passes_api.optimize(module.clone(), DebugOptions.from_sources([]), pipeline="gpu")


@functools.cache
def _raw():
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    out = {n: parse_hlo(t) for n, t in {**PLAIN, **GPU, **CALLS}.items()}
    out.update({n: parse_hlo((root / p).read_text()) for n, p in SAMPLES.items()})
    return out


@functools.cache
def _programs():
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    names: set = set()
    return {n: build_program(m if n in PLAIN or n in CALLS else _gpu(m), H100, names=names)
            for n, m in _raw().items()}


def _thunks(cp):
    for t in cp.thunks:
        yield t
        for c in t.callees:
            yield from _thunks(c)


def _conv_steps(prog):
    from hlo_opt.backends.cuda.conv import is_convolution
    return [t for t in _thunks(prog.entry) if is_convolution(t.step.instruction)]


@pytest.mark.parametrize("name", sorted({**PLAIN, **GPU, **CALLS, **SAMPLES}))
def test_every_convolution_is_a_kernel_launch(name):
    prog = _programs()[name]
    convs = _conv_steps(prog)
    assert convs, "no convolution in the program"
    assert all(t.kind == "launch" and t.kernel.kind.startswith("conv_") for t in convs), \
        [(t.name, t.kind) for t in convs]
    assert not [t for t in _thunks(prog.entry) if t.kind == "host"]
    assert not [f for f in prog.host_fallbacks if "conv" in f[1]], prog.host_fallbacks
    if name in TARGETS:
        got = {t.step.instruction.custom_call_target for t in convs}
        assert got == {TARGETS[name]}, got


@functools.cache
def _sim():
    from hlo_opt.backends.cuda_sim import compile_batch
    progs = _programs()
    return dict(zip(progs, compile_batch(list(progs.values()), parts=4)))


@pytest.mark.parametrize("name", sorted({**PLAIN, **GPU, **CALLS, **SAMPLES}))
def test_cuda_sim_matches_interpreter(name):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    r = check_executable(_raw()[name], _sim()[name], seed=3)
    assert r.status == "pass", r.detail


def test_small_filters_are_staged_in_shared_memory():
    from hlo_opt.backends.cuda.conv import SMEM_FILTER_BYTES
    staged = {}
    for name, prog in _programs().items():
        for t in _conv_steps(prog):
            k = t.kernel
            if k.kind == "conv_forward":
                w = t.step.inputs[1].shape
                small = w.num_elements() * (8 if w.element_type == "f64" else 4) \
                    <= SMEM_FILTER_BYTES
                assert k.extra["filter_in_shared_memory"] == small == k.fibered \
                    == ("__shared__" in k.code), (name, k.name)
                staged[name] = staged.get(name, True) and small
    assert not staged["big_filter"]
    assert staged["conv_block"] and staged["mobilenet_cluster"] and staged["conv2d_nhwc"]


def test_integer_convolutions_stay_on_the_host():
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    m = parse_hlo(_conv("s8_conv", "s8", [1, 5, 5, 2], [3, 3, 2, 2], "size=3x3",
                        "b01f_01io->b01f", out_dt="s32"))
    prog = build_program(m, H100)
    assert [t.kind for t in prog.entry.thunks] == ["host"]
    assert "integer" in prog.host_fallbacks[0][1]


@pytest.fixture(scope="module")
def compiled():
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import combined_source
    src = combined_source(list(_programs().values()))
    return {arch: compile_cuda(src, arch, name="conv.cu") for arch in ("sm_80", "sm_90")}


def _conv_kernels():
    return {k.name for p in _programs().values() for k in p.kernels
            if k.kind.startswith("conv_")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_kernel(compiled, arch):
    assert_compiled_entries(compiled[arch], _conv_kernels())


def test_ptxas_accepts_the_ptx_without_spills(compiled):
    assert_no_spills(compiled["sm_90"].ptx, _conv_kernels())
