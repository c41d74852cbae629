"""``cudnn-fused-convolution-rewriter``: XLA's CudnnFusedConvRewriter (conv + bias +
side input + ReLU -> one cuDNN call).

Patterns, on forward cuDNN convolutions that are not depthwise and whose result has one
use:

* ``add(gte(conv), broadcast(bias))`` with a 1-D bias along the output feature dimension
  -> ``__cudnn$convBiasActivationForward(input, filter, bias)``;
* ``add(gte(conv), side_input)`` (any other same-shaped addend) -> the side input
  (fourth operand, ``side_input_scale`` 1), the bias being zeros;
* ``maximum(gte(conv), broadcast(0))`` -> ``activation_mode`` ``kRelu``.

A bias or side input cannot follow an activation, as in XLA.  Types: f16, bf16 and f32.
The call computes ``act(conv_result_scale * conv(x, w) + side_input_scale * side + bias)``.
"""
from __future__ import annotations

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers
from hlo_opt.ir.shape import Shape

from ._conv_util import (CONV_BIAS_ACTIVATION, CONV_FORWARD, config_text, conv_config,
                         is_cudnn_conv, make_cudnn_conv, replace_call, replace_with_result,
                         window_of)
from hlo_opt.rewrite.graph import fusible_computations

_TYPES = frozenset({"f16", "bf16", "f32"})


def _is_depthwise(conv) -> bool:
    groups = conv.attr("feature_group_count", 1)
    if groups == 1:
        return False
    dn = ConvolutionDimensionNumbers.of(conv)
    return conv.operands[0].shape.dims[dn.input_feature] == groups


def _conv_of(value):
    """The non-depthwise forward cuDNN conv behind ``gte(conv, 0)`` used only there."""
    if value.opcode != "get-tuple-element" or value.attr("index") != 0 or value.user_count != 1:
        return None
    conv = value.operands[0]
    if not is_cudnn_conv(conv, (CONV_FORWARD, CONV_BIAS_ACTIVATION)) or conv.user_count != 1:
        return None
    if _is_depthwise(conv) or value.shape.element_type not in _TYPES:
        return None
    return conv


def _is_zero_scalar_broadcast(inst) -> bool:
    if inst.opcode != "broadcast":
        return False
    c = inst.operands[0]
    return c.opcode == "constant" and c.shape.num_elements() == 1 and not c.literal.elided \
        and float(c.literal.array.reshape(-1)[0]) == 0.0


class _Rewriter:
    def __init__(self, comp):
        self.comp = comp
        self.changed = False

    def ensure_bias_activation(self, conv):
        if conv.custom_call_target == CONV_BIAS_ACTIVATION:
            return conv
        comp = self.comp
        dn = ConvolutionDimensionNumbers.of(conv)
        out = conv.shape.tuple_shapes[0]
        features = out.dims[dn.output_feature]
        zero = comp.add("constant", Shape.array(out.element_type, ()), name="constant",
                        payload="0")
        bias = comp.add("broadcast", Shape.array(out.element_type, (features,)), [zero],
                        name="broadcast", attrs={"dimensions": "{}"})
        config = conv_config(conv)
        new = make_cudnn_conv(comp, CONV_BIAS_ACTIVATION, out, conv.operands[0], conv.operands[1],
                              window_of(conv), dn, conv.attr("feature_group_count", 1),
                              conv.attrs.get("metadata"), [bias], config_text(config))
        replace_call(comp, conv, new)
        return new

    def _with(self, conv, operands, config: dict):
        new = make_cudnn_conv(self.comp, CONV_BIAS_ACTIVATION, conv.shape.tuple_shapes[0],
                              operands[0], operands[1], window_of(conv),
                              ConvolutionDimensionNumbers.of(conv),
                              conv.attr("feature_group_count", 1), conv.attrs.get("metadata"),
                              operands[2:], config_text(config))
        return new

    def _replace_value(self, inst, conv_new) -> None:
        replace_with_result(self.comp, inst, conv_new)
        self.changed = True

    def handle_add(self, inst) -> None:
        for value, addend in ((inst.operands[0], inst.operands[1]),
                              (inst.operands[1], inst.operands[0])):
            conv = _conv_of(value)
            if conv is None:
                continue
            cfg = conv_config(conv).get("cudnn_conv_backend_config", {})
            if cfg.get("activation_mode", "kNone") != "kNone":
                return
            dn = ConvolutionDimensionNumbers.of(conv)
            is_bias = (addend.opcode == "broadcast" and addend.operands[0].shape.rank == 1
                       and list(addend.dimensions) == [dn.output_feature]
                       and addend.shape.element_type == value.shape.element_type)
            can_accept_bias = conv.custom_call_target == CONV_FORWARD or \
                _is_zero_scalar_broadcast(conv.operands[2])
            can_accept_side = len(conv.operands) < 4
            use_bias = is_bias and can_accept_bias
            use_side = not use_bias and can_accept_side and \
                addend.shape.same_dims_and_type(value.shape)
            if not (use_bias or use_side):
                return
            conv = self.ensure_bias_activation(conv)
            full = conv_config(conv)
            operands = list(conv.operands)
            if use_bias:
                operands[2] = addend.operands[0]
            else:
                operands.append(addend)
                full["cudnn_conv_backend_config"]["side_input_scale"] = 1
            new = self._with(conv, operands, full)
            self._replace_value(inst, new)
            return

    def handle_maximum(self, inst) -> None:
        for value, z in ((inst.operands[0], inst.operands[1]),
                         (inst.operands[1], inst.operands[0])):
            conv = _conv_of(value)
            if conv is None or not _is_zero_scalar_broadcast(z):
                continue
            conv = self.ensure_bias_activation(conv)
            full = conv_config(conv)
            cfg = full.setdefault("cudnn_conv_backend_config", {})
            if cfg.get("activation_mode", "kNone") != "kNone":
                return
            cfg["activation_mode"] = "kRelu"
            new = self._with(conv, list(conv.operands), full)
            self._replace_value(inst, new)
            return


class CudnnFusedConvRewriter:
    name = "cudnn-fused-convolution-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            rw = _Rewriter(comp)
            for inst in comp.post_order():
                if inst.parent is not comp:
                    continue
                handler = getattr(rw, f"handle_{inst.opcode}", None)
                if handler is not None:
                    handler(inst)
            changed |= rw.changed
        return changed
