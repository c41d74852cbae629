"""``gpu-conv-padding-legalization``: XLA's ConvPaddingLegalization
(xla/service/gpu/transforms/conv_padding_legalization.cc; older XLA named it
``cudnn-conv-padding-legalization``, the seed ``cudnn-conv-padding``).

cuDNN takes only symmetric, non-negative padding and no dilation; each cuDNN call that
has other padding is rewritten (in non-fusion computations):

* forward (and bias-activation): a ``pad`` of the input applies uneven or positive
  padding and base dilation (interior padding), a ``slice`` applies negative padding, a
  ``pad`` of the kernel applies window dilation; the call keeps no dilation and the
  padding left symmetric;
* backward filter with uneven padding: the smaller of low/high stays in the call, the
  rest is a ``pad`` of the input (activations);
* backward input with uneven padding: the call keeps the smaller of low/high on both
  sides and so produces a larger input gradient, which a ``slice`` cuts back to the
  result; the call's value is then ``tuple(slice(gte(call, 0)), gte(call, 1))``.

Backward convolutions with negative padding are left alone, as in XLA (b/32744257;
cudnn-conv-rewriter does not create them).
"""
from __future__ import annotations

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers
from hlo_opt.ir.attributes import Window

from hlo_opt.rewrite.builder import Builder

from ._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_TARGETS, FORWARD_TARGETS,
                         clone_conv, has_dilation, has_negative_padding, has_symmetric_padding,
                         is_cudnn_conv, replace_call, sliced_result, window_of)
from hlo_opt.rewrite.graph import fusible_computations


def is_forward_canonical(conv) -> bool:
    w = window_of(conv)
    return has_symmetric_padding(w) and not has_negative_padding(w) and not has_dilation(w)


def _zero_pad(b: Builder, x, config):
    return b.pad(x, b.scalar(0, x.shape.element_type), config)


def padded_and_sliced_input(b: Builder, window: Window, dn: ConvolutionDimensionNumbers, x):
    """MaybePaddedAndSlicedInput: ``x`` with the window's uneven/positive padding and base
    dilation applied by a ``pad`` and its negative padding by a ``slice``; ``window``
    loses what was applied."""
    dims = window.dims
    if not has_symmetric_padding(window) or any(d.base_dilation != 1 for d in dims):
        config = [(0, 0, 0)] * x.shape.rank
        for i, s in enumerate(dn.input_spatial):
            d = dims[i]
            config[s] = (max(d.padding_low, 0), max(d.padding_high, 0), d.base_dilation - 1)
            d.padding_low = min(d.padding_low, 0)
            d.padding_high = min(d.padding_high, 0)
            d.base_dilation = 1
        x = _zero_pad(b, x, config)
    if has_negative_padding(window):
        starts = [0] * x.shape.rank
        limits = list(x.shape.dims)
        for i, s in enumerate(dn.input_spatial):
            d = dims[i]
            starts[s] -= min(d.padding_low, 0)
            limits[s] += min(d.padding_high, 0)
            d.padding_low = max(d.padding_low, 0)
            d.padding_high = max(d.padding_high, 0)
        x = b.slice(x, starts, limits)
    return x


def padded_kernel(b: Builder, window: Window, dn: ConvolutionDimensionNumbers, w):
    """MaybePaddedKernel: window dilation as interior padding of the kernel."""
    if not any(d.window_dilation != 1 for d in window.dims):
        return w
    config = [(0, 0, 0)] * w.shape.rank
    for i, s in enumerate(dn.kernel_spatial):
        config[s] = (0, 0, window.dims[i].window_dilation - 1)
    return _zero_pad(b, w, config)


def canonicalize_forward(comp, conv) -> bool:
    if is_forward_canonical(conv):
        return False
    b = Builder(comp)
    dn = ConvolutionDimensionNumbers.of(conv)
    window = window_of(conv)
    x = padded_and_sliced_input(b, window, dn, conv.operands[0])
    w = padded_kernel(b, window, dn, conv.operands[1])
    for i, d in enumerate(window.dims):
        d.size = w.shape.dims[dn.kernel_spatial[i]]
        d.window_dilation = 1
    new = clone_conv(comp, conv, [x, w, *conv.operands[2:]], window=window)
    replace_call(comp, conv, new)
    return True


def _even_padding(conv):
    """(window with min(low, high) on both sides, per-dim (low, high) moved out), or None
    when the padding is symmetric already or negative somewhere."""
    window = window_of(conv)
    if has_symmetric_padding(window) or has_negative_padding(window):
        return None
    moved = []
    for d in window.dims:
        keep = min(d.padding_low, d.padding_high)
        moved.append((d.padding_low - keep, d.padding_high - keep))
        d.padding_low = d.padding_high = keep
    return window, moved


def canonicalize_backward_filter(comp, conv) -> bool:
    """The uneven part of the padding becomes a ``pad`` of the activations:
    ``BackwardFilterConv(ABCD, xyz, low=1, high=2)`` =
    ``BackwardFilterConv(pad(ABCD, high=1), xyz, low=high=1)``."""
    even = _even_padding(conv)
    if even is None:
        return False
    window, moved = even
    dn = ConvolutionDimensionNumbers.of(conv)
    x = conv.operands[0]
    config = [(0, 0, 0)] * x.shape.rank
    for (lo, hi), s in zip(moved, dn.input_spatial):
        config[s] = (lo, hi, 0)
    padded = _zero_pad(Builder(comp), x, config)
    new = clone_conv(comp, conv, [padded, *conv.operands[1:]], window=window)
    replace_call(comp, conv, new)
    return True


def canonicalize_backward_input(comp, conv) -> bool:
    """The call keeps the even part of the padding and computes a larger input gradient
    (less padding = more output), sliced back: ``[A] = BackwardInputConv([a b], [x y z],
    low=2, high=1)`` = ``Slice([B A] = BackwardInputConv([a b], [x y z], low=high=1))``."""
    even = _even_padding(conv)
    if even is None:
        return False
    window, moved = even
    dn = ConvolutionDimensionNumbers.of(conv)
    result = conv.shape.tuple_shapes[0]
    dims = list(result.dims)
    starts = [0] * result.rank
    for (lo, hi), s in zip(moved, dn.input_spatial):
        # the call's result is the forward input: input_spatial names its dims
        dims[s] += lo + hi
        starts[s] = lo
    limits = [a + n for a, n in zip(starts, result.dims)]
    new = clone_conv(comp, conv, conv.operands, result=result.with_dims(dims),
                     window=window)
    replace_call(comp, conv, sliced_result(comp, new, result, starts, limits))
    return True


_CANONICALIZE = {CONV_BACKWARD_FILTER: canonicalize_backward_filter,
                 CONV_BACKWARD_INPUT: canonicalize_backward_input,
                 **{t: canonicalize_forward for t in FORWARD_TARGETS}}


class GpuConvPaddingLegalization:
    name = "gpu-conv-padding-legalization"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for conv in comp.post_order():
                if conv.parent is comp and is_cudnn_conv(conv, CONV_TARGETS):
                    changed |= _CANONICALIZE[conv.custom_call_target](comp, conv)
        return changed
