"""convolution -> GEMMs per kernel tap (from compiled code, through the same cblas).

For a plain 2-D convolution (f32/f64, no groups, no dilation or reversal) whose buffers
are laid out input ``[b, y, x, c]``, kernel ``[ky, kx, i, o]`` and output ``[b, y, x,
o]`` (major to minor; JAX's NHWC/HWIO), each kernel tap ``(ky, kx)`` adds
``in[b, y*sy+ky-py, x*sx+kx-px, :] @ w[ky, kx]`` to a run of output positions: one
GEMM per batch element, output row and tap, over rows ``x0 <= x < x1`` where the input
column is in range (padding is the part left out), ``lda = sx*c``.  The output starts
zeroed; every GEMM accumulates (beta = 1).  Other convolutions (groups, dilation, other
layouts) are host library calls.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ConvPlan:
    dtype: str
    batch: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    o: int
    kh: int
    kw: int
    sy: int
    sx: int
    py: int
    px: int

    def rows(self, ky: int) -> tuple[int, int]:
        """Output rows y whose input row y*sy+ky-py is inside [0, h)."""
        return _range(self.oh, self.sy, ky - self.py, self.h)

    def cols(self, kx: int) -> tuple[int, int]:
        return _range(self.ow, self.sx, kx - self.px, self.w)


def _range(n_out: int, stride: int, offset: int, n_in: int) -> tuple[int, int]:
    lo = 0
    while lo < n_out and lo * stride + offset < 0:
        lo += 1
    hi = n_out
    while hi > lo and (hi - 1) * stride + offset >= n_in:
        hi -= 1
    return lo, hi


def _phys(shape):
    return list(reversed(shape.effective_layout().minor_to_major))


def conv_plan(inst) -> ConvPlan | None:
    if inst.opcode != "convolution" or len(inst.operands) != 2:
        return None
    et = inst.shape.element_type
    lhs, rhs = inst.operands
    if et not in ("f32", "f64") or lhs.shape.element_type != et or \
            rhs.shape.element_type != et:
        return None
    if (inst.attr("feature_group_count") or 1) != 1 or \
            (inst.attr("batch_group_count") or 1) != 1:
        return None
    labels = inst.attr("dim_labels")
    win = inst.attr("window")
    if labels is None or len(labels.input_spatial) != 2:
        return None
    dims = win.dims if win is not None else []
    if len(dims) != 2 or any(d.base_dilation != 1 or d.window_dilation != 1
                             or getattr(d, "window_reversal", False) for d in dims):
        return None
    L, K, O = lhs.shape, rhs.shape, inst.shape
    if _phys(L) != [labels.input_batch, *labels.input_spatial, labels.input_feature]:
        return None
    if _phys(K) != [*labels.kernel_spatial, labels.kernel_input_feature,
                    labels.kernel_output_feature]:
        return None
    if _phys(O) != [labels.output_batch, *labels.output_spatial, labels.output_feature]:
        return None
    b = L.dims[labels.input_batch]
    h, w = (L.dims[d] for d in labels.input_spatial)
    c = L.dims[labels.input_feature]
    kh, kw = (K.dims[d] for d in labels.kernel_spatial)
    o = K.dims[labels.kernel_output_feature]
    oh, ow = (O.dims[d] for d in labels.output_spatial)
    if K.dims[labels.kernel_input_feature] != c or kh != dims[0].size or kw != dims[1].size:
        return None
    if kh * kw > 121:
        return None  # one GEMM call per tap is unrolled in the code
    return ConvPlan(et, b, h, w, c, oh, ow, o, kh, kw, dims[0].stride, dims[1].stride,
                    dims[0].padding_low, dims[1].padding_low)
