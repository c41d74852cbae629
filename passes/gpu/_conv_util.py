"""What the cuDNN convolution passes share: call targets, dimension numbers and windows as
plain data, the cuDNN custom-call builder, and the small graph edits around a call.

A cuDNN convolution call (``__cudnn$conv*``) returns ``(result, u8[scratch])``; its
``window``, ``dim_labels`` and ``feature_group_count`` describe the *forward*
convolution (XLA's CudnnConvKind):

=====================  =====================  ================  ===============
kind                   operand 0              operand 1         result
=====================  =====================  ================  ===============
forward (+ activation) input                  filter            output
backward input         output (gradient)      filter            input (gradient)
backward filter        input                  output (gradient) filter (gradient)
=====================  =====================  ================  ===============

``dim_labels`` may carry a ``?``: the vectorized-feature dimension of cuDNN's NCHW_VECT_C
layout (``bf?01``), the one dimension the numbers do not name (FindVectorizedFeatureDims);
like XLA, the labels print only up to the largest named dimension, so a trailing vector
dim has no ``?``.
"""
from __future__ import annotations

import json
from hlo_opt.ir.attributes import ConvolutionDimensionNumbers, Window, WindowDim
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.graph import add_gte, remove_dead_operands

CONV_FORWARD = "__cudnn$convForward"
CONV_BACKWARD_INPUT = "__cudnn$convBackwardInput"
CONV_BACKWARD_FILTER = "__cudnn$convBackwardFilter"
CONV_BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
CONV_TARGETS = (CONV_FORWARD, CONV_BACKWARD_INPUT, CONV_BACKWARD_FILTER, CONV_BIAS_ACTIVATION)
FORWARD_TARGETS = (CONV_FORWARD, CONV_BIAS_ACTIVATION)
_NAMES = {CONV_FORWARD: "cudnn-conv", CONV_BACKWARD_INPUT: "cudnn-conv-bw-input",
          CONV_BACKWARD_FILTER: "cudnn-conv-bw-filter",
          CONV_BIAS_ACTIVATION: "cudnn-conv-bias-activation"}


def window_of(inst: Instruction) -> Window:
    """A private copy of the instruction's window (callers edit it)."""
    w = inst.attr("window")
    if w is None:
        return Window([])
    return Window([WindowDim(d.size, d.stride, d.padding_low, d.padding_high, d.base_dilation,
                             d.window_dilation, d.window_reversal) for d in w.dims])


def has_dilation(w: Window) -> bool:
    return any(d.base_dilation != 1 or d.window_dilation != 1 for d in w.dims)


def has_symmetric_padding(w: Window) -> bool:
    return all(d.padding_low == d.padding_high for d in w.dims)


def has_negative_padding(w: Window) -> bool:
    return any(d.padding_low < 0 or d.padding_high < 0 for d in w.dims)


def padding_high_for(low: int, min_high: int, stride: int) -> int:
    """The high padding a backward convolution gets (XLA's conv_rewriter): every amount
    in [min_high, min_high + stride - 1] gives the same result; cuDNN wants it equal to
    ``low``, else the valid amount closest to ``low`` (gpu-conv-padding-legalization then
    evens it out)."""
    max_high = min_high + stride - 1
    if min_high <= low <= max_high:
        return low
    return min_high if low < min_high else max_high


# ---- the custom call -----------------------------------------------------------------------
def default_conv_config() -> str:
    return json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [],
                       "cudnn_conv_backend_config": {
                           "conv_result_scale": 1, "activation_mode": "kNone",
                           "side_input_scale": 0, "leakyrelu_alpha": 0},
                       "force_earliest_schedule": False}, separators=(",", ":"))


def conv_config(inst: Instruction) -> dict:
    from .gemm_rewriter import read_config
    return read_config(inst)


def config_text(config: dict) -> str:
    return json.dumps(config, separators=(",", ":"))


def make_cudnn_conv(comp, target: str, result: Shape, lhs: Instruction, rhs: Instruction,
                    window: Window, dnums: ConvolutionDimensionNumbers, feature_group_count: int,
                    metadata: str | None, extra_operands=(), config: str | None = None,
                    scratch: int = 0) -> Instruction:
    """``(result, u8[scratch]) custom-call(lhs, rhs, ...)`` as XLA's CreateGpuConv."""
    attrs = {"window": window.to_text()} if window.dims else {}   # XLA prints no empty one
    attrs["dim_labels"] = dnums.to_text()
    if feature_group_count != 1:
        attrs["feature_group_count"] = str(feature_group_count)
    attrs["custom_call_target"] = json.dumps(target)
    if metadata:
        attrs["metadata"] = metadata
    attrs["backend_config"] = config or default_conv_config()
    shape = Shape.tuple([result, Shape.array("u8", (scratch,))])
    return comp.add("custom-call", shape, [lhs, rhs, *extra_operands], name=_NAMES[target],
                    attrs=attrs)


def clone_conv(comp, conv: Instruction, operands, result: Shape | None = None,
               window: Window | None = None, dnums: ConvolutionDimensionNumbers | None = None,
               config: str | None = None) -> Instruction:
    """``conv`` with other operands (and, given, another result array shape, window, dim
    labels or backend config), under the same name once ``conv`` is gone."""
    attrs = dict(conv.attrs)
    if window is not None:
        attrs["window"] = window.to_text()
    if dnums is not None:
        attrs["dim_labels"] = dnums.to_text()
    if config is not None:
        attrs["backend_config"] = config
    shape = conv.shape
    if result is not None:
        shape = Shape.tuple([result, *conv.shape.tuple_shapes[1:]])
    return comp.add("custom-call", shape, list(operands), name=conv.name, attrs=attrs)


def is_cudnn_conv(inst: Instruction, targets=CONV_TARGETS) -> bool:
    return inst.opcode == "custom-call" and inst.custom_call_target in targets


# ---- replacing a call or a value -----------------------------------------------------------
def replace_call(comp, old: Instruction, new: Instruction) -> None:
    """Every use of the call ``old`` reads ``new`` (a call or a tuple of the same shape);
    ``old`` and operands only it used are removed."""
    operands = list(old.operands)
    was_root = old.is_root
    old.replace_all_uses_with(new)
    if was_root:
        comp.root = new
    remove_dead_operands(comp, [old])
    remove_dead_operands(comp, operands)


def replace_with_result(comp, value: Instruction, call: Instruction) -> Instruction:
    """Every use of ``value`` reads ``get-tuple-element(call, 0)`` instead; ``value`` and
    operands only it used are removed.  Returns the get-tuple-element."""
    gte = add_gte(comp, call, 0)
    replace_call(comp, value, gte)
    return gte


def sliced_result(comp, call: Instruction, result: Shape, starts, limits) -> Instruction:
    """``tuple(slice(gte(call, 0)), gte(call, 1))``: a call whose result is larger than
    ``result`` made to look like one with ``result`` (what the padding passes put in place
    of the call they grow)."""
    from hlo_opt.rewrite.builder import Builder
    b = Builder(comp)
    value = b.gte(call, 0)
    sliced = b.slice(value, starts, limits)
    sliced.shape = result
    return b.tuple([sliced] + [b.gte(call, i) for i in range(1, len(call.shape.tuple_shapes))])


class ComputeCapabilityPass:
    """A pass for one GPU (XLA constructs these with a se::CudaComputeCapability): the one
    given, else the module's ``config.device`` (default: hlo_opt.analysis.device's)."""

    def __init__(self, compute_capability=None):
        self.compute_capability = compute_capability

    def target(self, module) -> tuple[int, int]:
        return tuple(self.compute_capability or module.config.device.compute_capability)


# ---- integer convolutions ------------------------------------------------------------------
def supports_optimized_integer_conv(conv: Instruction, compute_capability,
                                    vector_size: int) -> bool:
    """CudnnSupportsOptimizedIntegerConvolution: can cuDNN run ``conv`` as an int8x4 or
    int8x32 (``vector_size``) convolution on this GPU?"""
    cc = tuple(compute_capability)
    if vector_size not in (4, 32) or cc < (6, 1) or (vector_size == 32 and cc < (7, 5)):
        return False
    if conv.custom_call_target not in FORWARD_TARGETS:
        return False
    x, w = conv.operands[0].shape, conv.operands[1].shape
    result = conv.shape.tuple_shapes[0]
    if not (is_integral(x.element_type) and is_integral(w.element_type)):
        return False
    dn = ConvolutionDimensionNumbers.of(conv)
    if not (len(dn.input_spatial) == len(dn.kernel_spatial) == len(dn.output_spatial) == 2):
        return False
    window = window_of(conv)
    if vector_size == 32:
        if not is_integral(result.element_type):
            return False
        # cuDNN's int8x32 algorithm needs W > (R-1) * dilation and H > (S-1) * dilation
        for k in range(2):
            size = x.dims[dn.input_spatial[k]]
            kernel = w.dims[dn.kernel_spatial[k]]
            if size <= (kernel - 1) * window.dims[k].base_dilation:
                return False
    return not has_dilation(window)
