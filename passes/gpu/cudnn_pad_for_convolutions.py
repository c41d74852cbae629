"""``cudnn_pad_for_convolutions``: XLA's CudnnPadForConvolutions
(xla/service/gpu/transforms/cudnn_pad_for_convolutions.cc).

Zero-pads the feature dimensions of cuDNN convolutions (at their high end) to sizes
cuDNN runs fast, and slices the result back when its features grew:

* integer forward convolutions (bias-activation too): input, kernel and output features
  (bias and side input along) to multiples of 32 on compute capability 7.5+ when cuDNN
  can run the convolution as int8x32 (integer result, 2-D, no dilation, big enough
  spatial dims), else to multiples of 4 (int8x4, 6.1+); an NCHW_VECT_C convolution (a
  vectorized feature dim) pads its outer feature dim so that outer * vector is a
  multiple.  Not when the input or result would grow to 2x or more;
* f16 convolutions, not grouped and not bias-activation, on Volta (7.0) or newer (tensor
  cores): 3 input features with 32 or 64 output features become 4 input features, else
  input/output features to multiples of 8, unless the input, kernel or result would
  grow by more than 1.35x.

Padding adds zero terms only, so the values are unchanged.  The GPU is the module's
``config.device`` (default: hlo_opt.analysis.device's H100, compute capability 9.0) or the
``compute_capability`` given to the pass.  Must run before the algorithm picker (the
scratch buffer is u8[0]).
"""
from __future__ import annotations

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.builder import Builder

from ._conv_util import (CONV_BACKWARD_FILTER, CONV_BACKWARD_INPUT, CONV_BIAS_ACTIVATION,
                         CONV_TARGETS, FORWARD_TARGETS, ComputeCapabilityPass, clone_conv,
                         is_cudnn_conv, replace_call, sliced_result,
                         supports_optimized_integer_conv)
from hlo_opt.rewrite.graph import fusible_computations

TENSOR_CORE_MAX_GROWTH = 1.35   # kMaxBytesTouchedBound, f16 (inclusive)
INTEGER_MAX_GROWTH = 2.0        # kMaxBytesTouchedBound, integers (exclusive)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _with_dim(shape: Shape, dim: int, size: int) -> Shape:
    dims = list(shape.dims)
    dims[dim] = size
    return Shape.array(shape.element_type, dims, shape.layout)


def _pad_dim(shapes: list, index: int, dim: int, multiple: int) -> None:
    s = shapes[index]
    shapes[index] = _with_dim(s, dim, _round_up(s.dims[dim], multiple))


def _padded_to(b: Builder, x, shape: Shape):
    """PadInstruction: ``x`` zero-padded at the high end up to ``shape``."""
    if list(x.shape.dims) == list(shape.dims):
        return x
    config = [(0, n - d, 0) for d, n in zip(x.shape.dims, shape.dims)]
    return b.pad(x, b.scalar(0, x.shape.element_type), config)


def pad_conv(comp, conv, operand_shapes, result: Shape) -> None:
    """PadConv: ``conv`` on operands padded to ``operand_shapes`` with result ``result``,
    sliced back to its old result when that grew."""
    if conv.shape.tuple_shapes[1].dims != (0,):
        raise ValueError(f"%{conv.name}: pad convolutions before the algorithm picker sizes "
                         "their scratch")
    b = Builder(comp)
    operands = [_padded_to(b, x, s) for x, s in zip(conv.operands, operand_shapes)]
    old = conv.shape.tuple_shapes[0]
    new = clone_conv(comp, conv, operands, result=result)
    if list(result.dims) != list(old.dims):
        new = sliced_result(comp, new, old, [0] * old.rank, list(old.dims))
    replace_call(comp, conv, new)


def _grows_at_most(old: Shape, new: Shape, bound: float, inclusive: bool) -> bool:
    a, b = old.byte_size(), new.byte_size()
    return b <= a * bound if inclusive else b < a * bound


def tensor_core_shapes(conv):
    """TryResolvePaddedShapesForTensorCore: (operand shapes, result) or None."""
    result = conv.shape.tuple_shapes[0]
    if result.element_type != "f16" or conv.custom_call_target == CONV_BIAS_ACTIVATION:
        return None
    if conv.attr("feature_group_count", 1) > 1 or conv.attr("batch_group_count", 1) > 1:
        return None
    dn = ConvolutionDimensionNumbers.of(conv)
    shapes = [conv.operands[0].shape, conv.operands[1].shape, result]   # lhs, rhs, result
    # which of them is cuDNN's input, filter and output
    data_in, filt, data_out = {CONV_BACKWARD_INPUT: (2, 1, 0),
                               CONV_BACKWARD_FILTER: (0, 2, 1)}.get(
        conv.custom_call_target, (0, 1, 2))
    in_features = shapes[data_in].dims[dn.input_feature]
    out_features = shapes[data_out].dims[dn.output_feature]
    if in_features == 3 and out_features in (32, 64):
        shapes[data_in] = _with_dim(shapes[data_in], dn.input_feature, 4)
        shapes[filt] = _with_dim(shapes[filt], dn.kernel_input_feature, 4)
    else:
        _pad_dim(shapes, data_in, dn.input_feature, 8)
        _pad_dim(shapes, filt, dn.kernel_input_feature, 8)
        _pad_dim(shapes, filt, dn.kernel_output_feature, 8)
        _pad_dim(shapes, data_out, dn.output_feature, 8)
        old = [conv.operands[0].shape, conv.operands[1].shape, result]
        if not all(_grows_at_most(o, n, TENSOR_CORE_MAX_GROWTH, True)
                   for o, n in zip(old, shapes)):
            return None
    if shapes[0].dims == conv.operands[0].shape.dims and \
            shapes[1].dims == conv.operands[1].shape.dims:
        return None
    return shapes[:2], shapes[2]


def integer_shapes(conv, pad_to: int, compute_capability):
    """TryResolvePaddedShapesForIntegerConvolution: (operand shapes, result) or None."""
    x, w = conv.operands[0].shape, conv.operands[1].shape
    result = conv.shape.tuple_shapes[0]
    if not is_integral(x.element_type) or conv.custom_call_target not in FORWARD_TARGETS:
        return None
    dn = ConvolutionDimensionNumbers.of(conv)
    shapes = [o.shape for o in conv.operands] + [result]
    vect = dn.vectorized_dims(x.rank, w.rank, result.rank)
    in_v, k_v, out_v = (s.dims[d] if d is not None else 1
                        for s, d in zip((x, w, result), vect))
    if pad_to % in_v or pad_to % k_v or pad_to % out_v:
        return None
    if not supports_optimized_integer_conv(conv, compute_capability, pad_to):
        return None
    r = len(shapes) - 1
    _pad_dim(shapes, 0, dn.input_feature, pad_to // in_v)
    _pad_dim(shapes, 1, dn.kernel_input_feature, pad_to // k_v)
    _pad_dim(shapes, 1, dn.kernel_output_feature, pad_to)  # only kernel inputs vectorize
    if conv.custom_call_target == CONV_BIAS_ACTIVATION:
        if len(conv.operands) > 2:
            _pad_dim(shapes, 2, 0, pad_to)                   # bias
        if len(conv.operands) > 3:
            _pad_dim(shapes, 3, dn.output_feature, pad_to // out_v)   # side input
    _pad_dim(shapes, r, dn.output_feature, pad_to // out_v)
    if not (_grows_at_most(x, shapes[0], INTEGER_MAX_GROWTH, False)
            and _grows_at_most(result, shapes[r], INTEGER_MAX_GROWTH, False)):
        return None
    if all(o.shape.dims == s.dims for o, s in zip(conv.operands, shapes)):
        return None
    return shapes[:r], shapes[r]


def _try(comp, conv, resolved) -> bool:
    if resolved is None:
        return False
    pad_conv(comp, conv, *resolved)
    return True


class CudnnPadForConvolutions(ComputeCapabilityPass):
    name = "cudnn_pad_for_convolutions"

    def run(self, module) -> bool:
        cc = self.target(module)
        changed = False
        for comp in fusible_computations(module):
            for conv in _convs(comp):
                # int8x32 where cuDNN can (sm75+), else int8x4
                done = cc >= (7, 5) and _try(comp, conv, integer_shapes(conv, 32, cc))
                changed |= done or _try(comp, conv, integer_shapes(conv, 4, cc))
            if cc >= (7, 0):
                for conv in _convs(comp):
                    changed |= _try(comp, conv, tensor_core_shapes(conv))
        return changed


def _convs(comp) -> list:
    return [i for i in comp.post_order() if is_cudnn_conv(i, CONV_TARGETS)]
