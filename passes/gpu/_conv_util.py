"""Convolution dimension numbers and windows as plain data, for the cuDNN rewriters."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from hlo_opt.ir.attributes import Window, WindowDim
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

CONV_FORWARD = "__cudnn$convForward"
CONV_BACKWARD_INPUT = "__cudnn$convBackwardInput"
CONV_BACKWARD_FILTER = "__cudnn$convBackwardFilter"
CONV_BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
CONV_TARGETS = (CONV_FORWARD, CONV_BACKWARD_INPUT, CONV_BACKWARD_FILTER, CONV_BIAS_ACTIVATION)
_NAMES = {CONV_FORWARD: "cudnn-conv", CONV_BACKWARD_INPUT: "cudnn-conv-bw-input",
          CONV_BACKWARD_FILTER: "cudnn-conv-bw-filter",
          CONV_BIAS_ACTIVATION: "cudnn-conv-bias-activation"}


@dataclass
class DimNums:
    input_batch: int
    input_feature: int
    input_spatial: list[int]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: list[int]
    output_batch: int
    output_feature: int
    output_spatial: list[int] = field(default_factory=list)

    @staticmethod
    def of(inst: Instruction) -> "DimNums":
        d = inst.attr("dim_labels")
        return DimNums(d.input_batch, d.input_feature, list(d.input_spatial),
                       d.kernel_input_feature, d.kernel_output_feature, list(d.kernel_spatial),
                       d.output_batch, d.output_feature, list(d.output_spatial))

    def to_text(self) -> str:
        def labels(rank, a, a_ch, b, b_ch, spatial):
            chars = ["?"] * rank
            chars[a] = a_ch
            chars[b] = b_ch
            for i, s in enumerate(spatial):
                chars[s] = str(i)
            return "".join(chars)
        n = len(self.input_spatial) + 2
        return (labels(n, self.input_batch, "b", self.input_feature, "f", self.input_spatial)
                + "_" + labels(n, self.kernel_input_feature, "i", self.kernel_output_feature,
                               "o", self.kernel_spatial)
                + "->" + labels(n, self.output_batch, "b", self.output_feature, "f",
                                self.output_spatial))


def window_of(inst: Instruction) -> Window:
    w = inst.attr("window")
    if w is None:
        return Window([])
    return Window([WindowDim(d.size, d.stride, d.padding_low, d.padding_high, d.base_dilation,
                             d.window_dilation, d.window_reversal) for d in w.dims])


def default_conv_config() -> str:
    return json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [],
                       "cudnn_conv_backend_config": {
                           "conv_result_scale": 1, "activation_mode": "kNone",
                           "side_input_scale": 0, "leakyrelu_alpha": 0},
                       "force_earliest_schedule": False}, separators=(",", ":"))


def conv_config(inst: Instruction) -> dict:
    from .gemm_rewriter import read_config
    return read_config(inst)


def make_cudnn_conv(comp, target: str, result: Shape, lhs: Instruction, rhs: Instruction,
                    window: Window, dnums: DimNums, feature_group_count: int,
                    metadata: str | None, extra_operands=(), config: str | None = None,
                    scratch: int = 0) -> Instruction:
    """``(result, u8[scratch]) custom-call(lhs, rhs, ...)`` as XLA's CreateGpuConv."""
    attrs = {"window": window.to_text(), "dim_labels": dnums.to_text()}
    if feature_group_count != 1:
        attrs["feature_group_count"] = str(feature_group_count)
    attrs["custom_call_target"] = json.dumps(target)
    if metadata:
        attrs["metadata"] = metadata
    attrs["backend_config"] = config or default_conv_config()
    shape = Shape.tuple([result, Shape.array("u8", (scratch,))])
    return comp.add("custom-call", shape, [lhs, rhs, *extra_operands], name=_NAMES[target],
                    attrs=attrs)


def is_cudnn_conv(inst: Instruction, targets=CONV_TARGETS) -> bool:
    return inst.opcode == "custom-call" and inst.custom_call_target in targets
