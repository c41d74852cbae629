"""``gpu-conv-padding-legalization``: XLA's GpuConvPaddingLegalization (the seed's
"cudnn-conv-padding"; older XLA named it ``cudnn-conv-padding-legalization``).

cuDNN only takes symmetric, non-negative padding and no dilation on a forward
convolution.  Other forward cuDNN convolutions get the padding made explicit: a ``pad``
of the input (uneven or positive padding, base dilation as interior padding), a
``slice`` for negative padding, a ``pad`` of the kernel for window dilation; the
convolution keeps no padding and no dilation.  Backward convolutions are left alone
(XLA canonicalizes them too; not done here).
"""
from __future__ import annotations

from hlo_opt.ir.attributes import Window, WindowDim
from hlo_opt.ir.shape import Shape

from ..registry import register
from ._conv_util import CONV_BIAS_ACTIVATION, CONV_FORWARD, DimNums, is_cudnn_conv, window_of
from ._graph import fusible_computations, remove_dead_operands


def _symmetric(w: Window) -> bool:
    return all(d.padding_low == d.padding_high for d in w.dims)


def _negative(w: Window) -> bool:
    return any(d.padding_low < 0 or d.padding_high < 0 for d in w.dims)


def _dilated(w: Window) -> bool:
    return any(d.base_dilation != 1 or d.window_dilation != 1 for d in w.dims)


def is_forward_canonical(conv) -> bool:
    w = window_of(conv)
    return _symmetric(w) and not _negative(w) and not _dilated(w)


def _zero(comp, et):
    return comp.add("constant", Shape.array(et, ()), name="constant", payload="0")


def _pad(comp, x, config):
    dims = [lo + hi + d + max(d - 1, 0) * it for d, (lo, hi, it) in zip(x.shape.dims, config)]
    text = "x".join(f"{lo}_{hi}" + (f"_{it}" if it else "") for lo, hi, it in config)
    return comp.add("pad", Shape.array(x.shape.element_type, dims), [x, _zero(comp, x.shape.element_type)],
                    name="pad", attrs={"padding": text})


def _padded_and_sliced_input(comp, window: Window, dn: DimNums, x):
    dims = window.dims
    if not _symmetric(window) or any(d.base_dilation != 1 for d in dims):
        config = [(0, 0, 0)] * x.shape.rank
        for i, s in enumerate(dn.input_spatial):
            d = dims[i]
            lo = d.padding_low if d.padding_low > 0 else 0
            hi = d.padding_high if d.padding_high > 0 else 0
            it = d.base_dilation - 1
            config[s] = (lo, hi, it)
            if d.padding_low > 0:
                d.padding_low = 0
            if d.padding_high > 0:
                d.padding_high = 0
            d.base_dilation = 1
        x = _pad(comp, x, config)
    if _negative(window):
        starts = [0] * x.shape.rank
        limits = list(x.shape.dims)
        for i, s in enumerate(dn.input_spatial):
            d = dims[i]
            if d.padding_low < 0:
                starts[s] += -d.padding_low
                d.padding_low = 0
            if d.padding_high < 0:
                limits[s] -= -d.padding_high
                d.padding_high = 0
        shape = Shape.array(x.shape.element_type, [b - a for a, b in zip(starts, limits)])
        text = "{" + ", ".join(f"[{a}:{b}]" for a, b in zip(starts, limits)) + "}"
        x = comp.add("slice", shape, [x], name="slice", attrs={"slice": text})
    return x


def _padded_kernel(comp, window: Window, dn: DimNums, w):
    if not any(d.window_dilation != 1 for d in window.dims):
        return w
    config = [(0, 0, 0)] * w.shape.rank
    for i, s in enumerate(dn.kernel_spatial):
        config[s] = (0, 0, window.dims[i].window_dilation - 1)
    return _pad(comp, w, config)


@register
class GpuConvPaddingLegalization:
    name = "gpu-conv-padding-legalization"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for conv in comp.post_order():
                if conv.parent is not comp or not is_cudnn_conv(
                        conv, (CONV_FORWARD, CONV_BIAS_ACTIVATION)):
                    continue
                if is_forward_canonical(conv):
                    continue
                dn = DimNums.of(conv)
                window = window_of(conv)
                x = _padded_and_sliced_input(comp, window, dn, conv.operands[0])
                w = _padded_kernel(comp, window, dn, conv.operands[1])
                new_dims = []
                for i, d in enumerate(window.dims):
                    new_dims.append(WindowDim(w.shape.dims[dn.kernel_spatial[i]], d.stride,
                                              d.padding_low, d.padding_high, 1, 1,
                                              d.window_reversal))
                attrs = dict(conv.attrs)
                attrs["window"] = Window(new_dims).to_text()
                new = comp.add("custom-call", conv.shape, [x, w] + list(conv.operands[2:]),
                               name=conv.name, attrs=attrs)
                old_ops = list(conv.operands)
                for u in conv.users:
                    u.replace_operand_with(conv, new)
                if conv.is_root:
                    comp.root = new
                remove_dead_operands(comp, [conv])
                remove_dead_operands(comp, old_ops)
                changed = True
        return changed
