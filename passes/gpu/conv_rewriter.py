"""``cudnn-conv-rewriter``: XLA's ConvRewriter (xla/service/gpu/transforms/conv_rewriter.cc).

Each ``convolution`` becomes a cuDNN custom-call returning ``(result, u8[0] scratch)``
(the algorithm picker later sizes the scratch); users read ``get-tuple-element(0)``.
The call's ``window``, ``dim_labels`` and ``feature_group_count`` describe the forward
convolution, as in XLA.  Tried in XLA's order:

* backward input (``__cudnn$convBackwardInput``, MatchBackwardInput): an ungrouped
  stride-1 convolution whose filter is spatially reversed (also ``reshape(reverse(f))``
  of a 1-D convolution written as 2-D), or, with base (lhs) dilation, a constant or 1x1
  filter; the forward window is recovered (stride = base dilation, padding from the
  kernel size) and the reverse is absorbed;
* backward filter (``__cudnn$convBackwardFilter``, MatchBackwardFilter): an ungrouped
  stride-1 convolution without base dilation that does not look like a forward one (batch
  and output features kept, no kernel larger than the output) and whose kernel is larger
  than the output in more than one spatial dim (one, for a 1-D convolution written as
  2-D), or has window dilation; ``batch_group_count`` becomes the call's
  ``feature_group_count``;
* otherwise forward (``__cudnn$convForward``) when cuDNN can run it (at most 3 spatial
  dims, no zero-sized operand, all or no spatial dims reversed); a batch-grouped one is
  first made feature-grouped (ConvertBatchGroupedToFeatureGroupedConvolution).

Convolutions of types cuDNN does not take (pred, complex; f8 other than e4m3fn/e5m2 or
below compute capability 8.9) are left alone (XLA reports them as unimplemented).

One addition to XLA (``restore_batch_groups``): a spatial dimension of size B with a
window of size B, stride B-1 and lhs dilation B over an input and kernel of size B (what
convolution-group-converter makes of ``batch_group_count=B``, a pass XLA's GPU compiler
does not run) pairs input slice k with kernel slice k only.  Written that way, the
forward call would read a base-dilated input B times the size of the real one, which
gpu-conv-padding-legalization materialises with a ``pad``; instead the dimension goes
back into the batch and output-feature dims as ``batch_group_count=B`` and the
convolution is rewritten as XLA rewrites batch-grouped ones (tried when the convolution
is not a backward input one, before the other matches).
"""
from __future__ import annotations

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers
from hlo_opt.ir.attributes import Window, WindowDim, int_list_text
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_float, is_integral

from hlo_opt.rewrite.builder import Builder

from ._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_FORWARD, make_cudnn_conv,
                         padding_high_for, replace_call, replace_with_result, window_of)
from hlo_opt.rewrite.graph import add_gte, fusible_computations, remove_dead_operands

_F8_SUPPORTED = frozenset({"f8e4m3fn", "f8e5m2"})


def check_types(conv, compute_capability) -> bool:
    """CheckTypes: floating-point or integral operands and result; f8 only e4m3fn and
    e5m2, on compute capability 8.9 or newer (cuDNN 9.8+)."""
    for shape in (conv.shape, conv.operands[0].shape, conv.operands[1].shape):
        et = shape.element_type
        if et.startswith("f8"):
            if et not in _F8_SUPPORTED or tuple(compute_capability) < (8, 9):
                return False
        elif not (is_float(et) or is_integral(et)):
            return False
    return True


def _degenerate_insertion(reshape) -> int | None:
    """The one dimension a reshape inserts (of size 1, deleting none), else None."""
    src, dst = reshape.operands[0].shape.dims, reshape.shape.dims
    if len(dst) != len(src) + 1:
        return None
    for k in range(len(dst)):
        if dst[k] == 1 and list(dst[:k]) + list(dst[k + 1:]) == list(src):
            return k
    return None


def conv1d_as_2d(conv, dn: ConvolutionDimensionNumbers, window: Window) -> bool:
    """MaybeConv1dToConv2d: a 2-D convolution whose filter is a reshape inserting one
    degenerate kernel spatial dimension."""
    if len(window.dims) != 2 or conv.operands[1].opcode != "reshape":
        return False
    return _degenerate_insertion(conv.operands[1]) in dn.kernel_spatial


def looks_like_forward(conv, dn: ConvolutionDimensionNumbers) -> bool:
    """LooksLikeForwardConvolution: batch and output features kept, no kernel spatial dim
    larger than the output's (backward-filter convolutions swap these)."""
    lhs, rhs, out = conv.operands[0].shape, conv.operands[1].shape, conv.shape
    if lhs.dims[dn.input_batch] != out.dims[dn.output_batch]:
        return False
    if rhs.dims[dn.kernel_output_feature] != out.dims[dn.output_feature]:
        return False
    return all(rhs.dims[k] <= out.dims[o] for k, o in zip(dn.kernel_spatial, dn.output_spatial))


def can_implement_forward(conv, dn: ConvolutionDimensionNumbers, window: Window) -> bool:
    """CanImplementAsGpuForwardConv."""
    if len(dn.input_spatial) > 3:
        return False
    if conv.operands[0].shape.num_elements() == 0 or conv.operands[1].shape.num_elements() == 0:
        return False
    reversed_ = [d.window_reversal for d in window.dims]
    if len(dn.input_spatial) == 2:
        return all(reversed_) or not any(reversed_)
    return not any(reversed_)


def _backward_dim(size: int, stride: int, low: int, count: int, unpadded: int):
    """A window dim of ``count`` positions of ``size`` with ``stride`` over ``unpadded``
    elements padded ``low`` below, with the high padding cuDNN likes (None if either
    padding would be negative, which gpu-conv-padding-legalization cannot undo)."""
    padded = size + (count - 1) * stride
    high = padding_high_for(low, padded - unpadded - low, stride)
    return None if low < 0 or high < 0 else WindowDim(size, stride, low, high)


def _backward_window(dims) -> Window | None:
    """The backward call's window from one (size, stride, low, count, unpadded) per
    spatial dim, or None."""
    out = [_backward_dim(*d) for d in dims]
    return None if any(d is None for d in out) else Window(out)


def match_backward_filter(conv, dn: ConvolutionDimensionNumbers, window: Window):
    """MatchBackwardFilter: (window, dim numbers, lhs) of the backward-filter call."""
    if conv.attr("feature_group_count", 1) > 1 or looks_like_forward(conv, dn):
        return None
    for d in window.dims:
        if d.stride != 1 or d.base_dilation != 1 or d.padding_low < 0 or d.window_reversal:
            return None
    rhs = conv.operands[1].shape
    small = sum(1 for k, o in zip(dn.kernel_spatial, dn.output_spatial)
                if rhs.dims[k] <= conv.shape.dims[o])
    dilated = any(d.window_dilation != 1 for d in window.dims)
    if (not dn.kernel_spatial or small > 1
            or (small == 1 and not conv1d_as_2d(conv, dn, window))) and not dilated:
        return None
    # window size = the forward output's size, stride = the forward window dilation
    w = _backward_window((conv.shape.dims[o], d.window_dilation, d.padding_low, d.size,
                          conv.operands[0].shape.dims[s])
                         for d, s, o in zip(window.dims, dn.input_spatial, dn.output_spatial))
    if w is None:
        return None
    bdn = ConvolutionDimensionNumbers(dn.input_feature, dn.input_batch, list(dn.input_spatial),
                  dn.output_batch, dn.output_feature, list(dn.output_spatial),
                  dn.kernel_input_feature, dn.kernel_output_feature, list(dn.kernel_spatial))
    return w, bdn, conv.operands[0]


def _reversed_conv1d_filter(conv, dn: ConvolutionDimensionNumbers, window: Window):
    """The filter under ``reshape(reverse(filter))`` of a 1-D convolution written as 2-D
    when the reverse flips exactly the real kernel spatial dim (XLA only asks for a
    reverse; flipping another dim would change the result), else None."""
    if not conv1d_as_2d(conv, dn, window):
        return None
    reshape = conv.operands[1]
    rev = reshape.operands[0]
    if rev.opcode != "reverse":
        return None
    inserted = _degenerate_insertion(reshape)
    spatial = [d - (d > inserted) for d in dn.kernel_spatial if d != inserted]
    return rev.operands[0] if sorted(rev.dimensions) == sorted(spatial) else None


def match_backward_input(conv, dn: ConvolutionDimensionNumbers, window: Window):
    """MatchBackwardInput: (window, dim numbers, make_rhs) of the backward-input call;
    ``make_rhs(comp)`` adds what the call's filter operand needs (nothing is added
    before)."""
    if conv.attr("feature_group_count", 1) > 1:
        return None
    filt = conv.operands[1]
    is_reversed = filt.opcode == "reverse" and \
        sorted(filt.dimensions) == sorted(dn.kernel_spatial)
    conv1d_filter = None if is_reversed else _reversed_conv1d_filter(conv, dn, window)
    is_1x1 = all(d.size == 1 for d in window.dims)
    base_dilated = any(d.base_dilation != 1 for d in window.dims)
    if not is_reversed and conv1d_filter is None and not (
            base_dilated and (filt.opcode == "constant" or is_1x1)):
        return None
    for d in window.dims:
        if d.stride != 1 or d.window_dilation != 1 or d.window_reversal:
            return None
    # stride = the forward base dilation, low padding = kernel size - 1 - forward low
    w = _backward_window((d.size, d.base_dilation, d.size - 1 - d.padding_low,
                          conv.operands[0].shape.dims[s], conv.shape.dims[o])
                         for d, s, o in zip(window.dims, dn.input_spatial, dn.output_spatial))
    if w is None:
        return None
    bdn = ConvolutionDimensionNumbers(dn.output_batch, dn.output_feature, list(dn.output_spatial),
                  dn.kernel_output_feature, dn.kernel_input_feature, list(dn.kernel_spatial),
                  dn.input_batch, dn.input_feature, list(dn.input_spatial))

    def make_rhs(comp) -> Instruction:
        if is_reversed:
            return filt.operands[0]
        if conv1d_filter is not None:
            return comp.add("reshape", filt.shape, [conv1d_filter], name="reshape")
        if filt.opcode == "constant":
            # XLA puts in a double reverse (a no-op) and the call subsumes one of them
            return comp.add("reverse", filt.shape, [filt], name="reverse",
                            attrs={"dimensions": int_list_text(dn.kernel_spatial)})
        return filt
    return w, bdn, make_rhs


def _merge_before(b: Builder, x: Instruction, src: int, dst: int):
    """``x`` with dimension ``src`` moved just above ``dst`` and merged into it (``src``
    the major part); returns the new instruction and old dim -> new dim for the others."""
    order = [d for d in range(x.shape.rank) if d != src]
    j = order.index(dst)
    t = b.maybe_transpose(x, order[:j] + [src] + order[j:])
    dims = [x.shape.dims[d] for d in order]
    dims[j] *= x.shape.dims[src]
    return b.reshape(t, dims), {d: k for k, d in enumerate(order)}


def batch_groups_to_feature_groups(b: Builder, conv, dn: ConvolutionDimensionNumbers
                                   ) -> Instruction:
    """ConvertBatchGroupedToFeatureGroupedConvolution's new lhs: the input batch N split
    into [G, N/G] and G merged above the input features."""
    lhs = conv.operands[0]
    groups = conv.attr("batch_group_count", 1)
    dims = list(lhs.shape.dims)
    ib = dn.input_batch
    dims[ib] //= groups
    dims.insert(ib, groups)
    split = b.reshape(lhs, dims)
    feature = dn.input_feature + (dn.input_feature > ib)
    merged, _ = _merge_before(b, split, ib, feature)
    return merged


def _carried_attrs(conv) -> dict:
    return {k: conv.attrs[k] for k in ("operand_precision", "metadata") if k in conv.attrs}


def rewrite_convolution(conv) -> Instruction | None:
    """CreateCustomCallHelper: the cuDNN call that computes ``conv`` (its result element
    0), or None when cuDNN cannot."""
    comp = conv.parent
    if not check_types(conv, comp.module.config.device.compute_capability):
        return None
    dn = ConvolutionDimensionNumbers.of(conv)
    window = window_of(conv)
    groups = conv.attr("feature_group_count", 1)
    batch_groups = conv.attr("batch_group_count", 1)
    metadata = conv.attrs.get("metadata")
    m = match_backward_input(conv, dn, window)
    if m is not None:
        w, bdn, make_rhs = m
        return make_cudnn_conv(comp, CONV_BACKWARD_INPUT, conv.shape, conv.operands[0],
                               make_rhs(comp), w, bdn, groups, metadata)
    m = match_backward_filter(conv, dn, window)
    if m is not None:
        w, bdn, lhs = m
        return make_cudnn_conv(comp, CONV_BACKWARD_FILTER, conv.shape, lhs, conv.operands[1],
                               w, bdn, batch_groups, metadata)
    if not can_implement_forward(conv, dn, window):
        return None
    lhs = conv.operands[0]
    if batch_groups > 1:
        lhs, groups = batch_groups_to_feature_groups(Builder(comp), conv, dn), batch_groups
    return make_cudnn_conv(comp, CONV_FORWARD, conv.shape, lhs, conv.operands[1], window, dn,
                           groups, metadata)


# ---- batch groups written as a spatial dimension ----------------------------------------------
def batch_group_spatial_dim(conv, dn: ConvolutionDimensionNumbers, window: Window) -> int | None:
    """The first spatial dim that pairs input slice k with kernel slice k only (window
    size = lhs dilation = B >= 2, stride B-1, no padding, window dilation or reversal;
    input, kernel and output of size B), in an ungrouped convolution."""
    if conv.attr("feature_group_count", 1) != 1 or conv.attr("batch_group_count", 1) != 1:
        return None
    lhs, rhs = conv.operands[0].shape, conv.operands[1].shape
    for i, d in enumerate(window.dims):
        g = d.size
        if (g >= 2 and d.base_dilation == g and d.stride == g - 1 and d.padding_low == 0
                and d.padding_high == 0 and d.window_dilation == 1 and not d.window_reversal
                and lhs.dims[dn.input_spatial[i]] == g and rhs.dims[dn.kernel_spatial[i]] == g
                and conv.shape.dims[dn.output_spatial[i]] == g):
            return i
    return None


def restore_batch_groups(conv) -> Instruction | None:
    """A value equal to ``conv`` computed by a cuDNN call on the batch-grouped form of
    its batch-group spatial dim (None, with nothing added, when there is none or cuDNN
    cannot run the batch-grouped convolution)."""
    dn = ConvolutionDimensionNumbers.of(conv)
    window = window_of(conv)
    i = batch_group_spatial_dim(conv, dn, window)
    if i is None:
        return None
    comp = conv.parent
    b = Builder(comp)
    groups = window.dims[i].size
    lhs, m_in = _merge_before(b, conv.operands[0], dn.input_spatial[i], dn.input_batch)
    rhs, m_k = _merge_before(b, conv.operands[1], dn.kernel_spatial[i],
                             dn.kernel_output_feature)
    s_out = dn.output_spatial[i]
    order = [d for d in range(conv.shape.rank) if d != s_out]
    m_out = {d: k for k, d in enumerate(order)}
    gdn = ConvolutionDimensionNumbers(m_in[dn.input_batch], m_in[dn.input_feature],
                  [m_in[s] for k, s in enumerate(dn.input_spatial) if k != i],
                  m_k[dn.kernel_input_feature], m_k[dn.kernel_output_feature],
                  [m_k[s] for k, s in enumerate(dn.kernel_spatial) if k != i],
                  m_out[dn.output_batch], m_out[dn.output_feature],
                  [m_out[s] for k, s in enumerate(dn.output_spatial) if k != i])
    out_dims = [conv.shape.dims[d] for d in order]
    out_dims[gdn.output_feature] *= groups
    attrs = {"window": Window([d for k, d in enumerate(window.dims) if k != i]).to_text(),
             "dim_labels": gdn.to_text(), "batch_group_count": str(groups),
             **_carried_attrs(conv)}
    grouped = comp.add("convolution", Shape.array(conv.shape.element_type, out_dims),
                       [lhs, rhs], name="convolution", attrs=attrs)
    call = rewrite_convolution(grouped)
    if call is None:
        remove_dead_operands(comp, [grouped])
        return None
    value = add_gte(comp, call, 0)
    remove_dead_operands(comp, [grouped])
    # output features [G*O] -> [G, O], then G back where the spatial dim was
    split = list(out_dims)
    split[gdn.output_feature] //= groups
    split.insert(gdn.output_feature, groups)
    current = list(order)
    current.insert(order.index(dn.output_feature), s_out)
    value = b.reshape(value, split)
    return b.maybe_transpose(value, [current.index(d) for d in range(conv.shape.rank)])


class GpuConvRewriter:
    name = "cudnn-conv-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for conv in comp.post_order():
                if conv.opcode != "convolution" or conv.parent is not comp:
                    continue
                dn, window = ConvolutionDimensionNumbers.of(conv), window_of(conv)
                value = None
                if match_backward_input(conv, dn, window) is None:
                    value = restore_batch_groups(conv)
                if value is not None:
                    replace_call(comp, conv, value)
                    changed = True
                    continue
                call = rewrite_convolution(conv)
                if call is not None:
                    replace_with_result(comp, conv, call)
                    changed = True
        return changed
