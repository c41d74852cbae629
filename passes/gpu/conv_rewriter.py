"""``cudnn-conv-rewriter``: XLA's GpuConvRewriter.

Each ``convolution`` becomes a cuDNN custom-call returning ``(result, u8[0] scratch)``
(the algorithm picker later sizes the scratch); users read ``get-tuple-element(0)``:

* backward input (``__cudnn$convBackwardInput``): a stride-1 convolution of the output
  gradient with a spatially reversed filter (or a 1x1 / constant filter with base
  dilation); the forward window is recovered (stride = base dilation, padding from the
  kernel size) and the reverse is absorbed;
* backward filter (``__cudnn$convBackwardFilter``): a stride-1, undilated-base
  convolution whose "kernel" is larger than its output (or with window dilation);
* otherwise forward (``__cudnn$convForward``), when cuDNN can run it (at most 3 spatial
  dims, no zero-sized operand, all or no spatial dims reversed).

The custom-call's ``window``, ``dim_labels`` and ``feature_group_count`` describe the
forward convolution, as in XLA.  Not rewritten (left as convolutions): batch-grouped
convolutions (XLA first turns them into feature-grouped ones), grouped backward-input
convolutions (XLA does not match them either).
"""
from __future__ import annotations

from hlo_opt.ir.attributes import Window, WindowDim

from ..registry import register
from ._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_FORWARD, DimNums,
                         make_cudnn_conv, window_of)
from ._graph import add_gte, fusible_computations, remove_dead_operands


def _can_implement_forward(conv, dn: DimNums, window: Window) -> bool:
    if len(dn.input_spatial) > 3:
        return False
    if conv.operands[0].shape.num_elements() == 0 or conv.operands[1].shape.num_elements() == 0:
        return False
    reversed_ = [d.window_reversal for d in window.dims]
    if len(dn.input_spatial) == 2:
        return all(reversed_) or not any(reversed_)
    return not any(reversed_)


def match_backward_filter(conv, dn: DimNums, window: Window):
    if conv.attr("feature_group_count", 1) > 1:
        return None
    for d in window.dims:
        if d.stride != 1 or d.base_dilation != 1 or d.padding_low < 0 or d.window_reversal:
            return None
    rhs = conv.operands[1].shape
    has_window_dilation = any(d.window_dilation != 1 for d in window.dims)
    if (not dn.kernel_spatial or rhs.dims[dn.kernel_spatial[0]] <=
            conv.shape.dims[dn.output_spatial[0]]) and not has_window_dilation:
        return None
    new_dims = []
    for i, s in enumerate(dn.input_spatial):
        filter_size = conv.shape.dims[dn.output_spatial[i]]
        stride = window.dims[i].window_dilation
        low = window.dims[i].padding_low
        input_size = conv.operands[0].shape.dims[s]
        output_size = window.dims[i].size
        padded = filter_size + (output_size - 1) * stride
        min_high = padded - input_size - low
        max_high = min_high + stride - 1
        if min_high <= low <= max_high:
            high = low
        elif low < min_high:
            high = min_high
        else:
            high = max_high
        if high < 0:
            return None
        new_dims.append(WindowDim(filter_size, stride, low, high, 1, 1, False))
    bdn = DimNums(dn.input_feature, dn.input_batch, list(dn.input_spatial),
                  dn.output_batch, dn.output_feature, list(dn.output_spatial),
                  dn.kernel_input_feature, dn.kernel_output_feature, list(dn.kernel_spatial))
    return Window(new_dims), bdn, conv.operands[0]


def match_backward_input(conv, dn: DimNums, window: Window):
    if conv.attr("feature_group_count", 1) > 1:
        return None
    reverse_filter = conv.operands[1]
    is_reversed = reverse_filter.opcode == "reverse" and \
        sorted(reverse_filter.dimensions) == sorted(dn.kernel_spatial)
    is_1x1 = all(d.size == 1 for d in window.dims)
    has_base_dilation = any(d.base_dilation != 1 for d in window.dims)
    if not is_reversed and not (has_base_dilation and (reverse_filter.opcode == "constant"
                                                       or is_1x1)):
        return None
    for d in window.dims:
        if d.stride != 1 or d.window_dilation != 1 or d.window_reversal:
            return None
    new_dims = []
    for i in range(len(dn.input_spatial)):
        old = window.dims[i]
        stride = old.base_dilation
        kernel = old.size
        low = kernel - 1 - old.padding_low
        if low < 0:
            return None
        unpadded = conv.shape.dims[dn.output_spatial[i]]
        out_size = conv.operands[0].shape.dims[dn.input_spatial[i]]
        padded = kernel + stride * (out_size - 1)
        total = padded - unpadded
        min_high = total - low
        max_high = min_high + stride - 1
        if min_high <= low <= max_high:
            high = low
        elif low < min_high:
            high = min_high
        else:
            high = max_high
        if high < 0:
            return None
        new_dims.append(WindowDim(kernel, stride, low, high, 1, 1, False))
    bdn = DimNums(dn.output_batch, dn.output_feature, list(dn.output_spatial),
                  dn.kernel_output_feature, dn.kernel_input_feature, list(dn.kernel_spatial),
                  dn.input_batch, dn.input_feature, list(dn.input_spatial))
    rhs = reverse_filter
    comp = conv.parent
    if rhs.opcode != "reverse" and rhs.opcode == "constant":
        # a double reverse (a no-op) that the cuDNN call subsumes once
        r1 = comp.add("reverse", rhs.shape, [rhs], name="reverse",
                      attrs={"dimensions": "{" + ",".join(map(str, dn.kernel_spatial)) + "}"})
        return Window(new_dims), bdn, r1
    if rhs.opcode == "reverse":
        rhs = rhs.operands[0]
    return Window(new_dims), bdn, rhs


def rewrite_convolution(conv):
    comp = conv.parent
    if conv.attr("batch_group_count", 1) > 1:
        return None
    dn = DimNums.of(conv)
    window = window_of(conv)
    groups = conv.attr("feature_group_count", 1)
    metadata = conv.attrs.get("metadata")
    m = match_backward_input(conv, dn, window)
    if m is not None:
        w, bdn, rhs = m
        return make_cudnn_conv(comp, CONV_BACKWARD_INPUT, conv.shape, conv.operands[0], rhs, w,
                               bdn, groups, metadata)
    m = match_backward_filter(conv, dn, window)
    if m is not None:
        w, bdn, lhs = m
        return make_cudnn_conv(comp, CONV_BACKWARD_FILTER, conv.shape, lhs, conv.operands[1],
                               w, bdn, conv.attr("batch_group_count", 1), metadata)
    if _can_implement_forward(conv, dn, window):
        return make_cudnn_conv(comp, CONV_FORWARD, conv.shape, conv.operands[0],
                               conv.operands[1], window, dn, groups, metadata)
    return None


@register
class GpuConvRewriter:
    name = "cudnn-conv-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for conv in comp.post_order():
                if conv.opcode != "convolution" or conv.parent is not comp:
                    continue
                call = rewrite_convolution(conv)
                if call is None:
                    continue
                gte = add_gte(comp, call, 0)
                was_root = conv.is_root
                operands = list(conv.operands)
                conv.replace_all_uses_with(gte)
                if was_root:
                    comp.root = gte
                remove_dead_operands(comp, [conv])
                remove_dead_operands(comp, operands)
                changed = True
        return changed
