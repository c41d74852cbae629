"""``cudnn_vectorize_convolutions``: XLA's CudnnVectorizeConvolutions
(xla/service/gpu/transforms/cudnn_vectorize_convolutions.cc).

An int8 -> int8 (s8 or u8) forward or bias-activation cuDNN convolution is reshaped to
cuDNN's NCHW_VECT_C form: the input, kernel-input and output feature dims ``C`` are split
into ``[C/k, k]`` with the vector ``k`` (32 on compute capability 7.5+ when cuDNN can run
int8x32, else 4) as a new dimension right after the feature dim, which the dim labels
leave unnamed (``bf?01``; a trailing one is not printed: ``b01f`` on a rank-5 operand).
A convolution already vectorized with another ``k`` (``[C/k', k']``) is re-vectorized to
32 (transposes move the factor between the two dims).  The result is reshaped (and
transposed) back, so the call is replaced by ``tuple(value, scratch)`` of the old shape;
sizes must already be multiples of ``k`` (cudnn_pad_for_convolutions pads them).

s8 int8x32 convolutions also get the filter (and bias) reordered the way
``cudnnReorderFilterAndBias`` does (a reshape-transpose-reshape to ``[O, I/32, H, W, 32]``
with dim labels ``oi01``) and ``reordered_int8_nchw_vect: true`` in the backend config,
unless ``--xla_gpu_enable_cudnn_int8x32_convolution_reordering=false``; cuDNN 8.3 or newer
is assumed.  XLA builds the new instructions in a computation that it calls (and
call-inliner inlines); they are added inline here, which is the same after call-inliner.
"""
from __future__ import annotations

import json

from hlo_opt.ir.dimension_numbers import ConvolutionDimensionNumbers
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_integral

from hlo_opt.rewrite.builder import Builder

from ._conv_util import (CONV_BIAS_ACTIVATION, CONV_FORWARD, ComputeCapabilityPass, clone_conv,
                         replace_call, supports_optimized_integer_conv)
from hlo_opt.rewrite.graph import fusible_computations


def relevant(conv) -> bool:
    """GetRelevantConvs: int8 -> int8 forward / bias-activation calls."""
    if conv.opcode != "custom-call" or len(conv.operands) < 2 or \
            conv.custom_call_target not in (CONV_FORWARD, CONV_BIAS_ACTIVATION):
        return False
    x, y = conv.operands[0].shape.element_type, conv.shape.tuple_shapes[0].element_type
    return x == y and x in ("s8", "u8")


# ---- shape surgery (the XlaBuilder helpers of the XLA pass) ----------------------------------
def split_at_dim(b: Builder, x, dim: int, vect: int):
    """``x`` with an extra dimension of size ``vect`` right after ``dim``."""
    dims = list(x.shape.dims)
    assert dims[dim] % vect == 0
    dims[dim] //= vect
    dims.insert(dim + 1, vect)
    return b.reshape(x, dims)


def move_dim(b: Builder, x, src: int, dst: int):
    """Transposes dimension ``src`` to right before ``dst``."""
    idxs = list(range(x.shape.rank))
    if src < dst:
        idxs.insert(dst, src)
        del idxs[src]
    else:
        del idxs[src]
        idxs.insert(dst, src)
    return b.transpose(x, idxs)


def collapse(b: Builder, x, dim: int):
    """Dimensions ``dim`` and ``dim + 1`` merged."""
    dims = list(x.shape.dims)
    dims[dim:dim + 2] = [dims[dim] * dims[dim + 1]]
    return b.reshape(x, dims)


def revectorize(b: Builder, x, dim: int, vect_dim: int, vect_size: int):
    """RevectorizeInstr: ``vect_dim`` grown to ``vect_size`` with a factor split off
    ``dim``."""
    factor = vect_size // x.shape.dims[vect_dim]
    x = split_at_dim(b, x, dim, factor)
    if vect_dim > dim:
        vect_dim += 1
    x = move_dim(b, x, dim + 1, vect_dim)
    if vect_dim > dim:
        vect_dim -= 1
    return collapse(b, x, vect_dim)


def unrevectorize(b: Builder, x, dim: int, vect_dim: int, orig_vect_size: int):
    """UnrevectorizeInstr: the inverse of :func:`revectorize`."""
    x = split_at_dim(b, x, vect_dim, orig_vect_size)
    if dim > vect_dim:
        dim += 1
    x = move_dim(b, x, vect_dim, dim + 1)
    if dim > vect_dim:
        dim -= 1
    return collapse(b, x, dim)


def vectorize_dnums(dn: ConvolutionDimensionNumbers, reordered_filter: bool
                    ) -> ConvolutionDimensionNumbers:
    """VectorizeDnums: room for a vector dim right after each feature dim."""
    def bump(d, at):
        return d + 1 if d > at else d
    changes = {}
    at = dn.input_feature
    changes["input_batch"] = bump(dn.input_batch, at)
    changes["input_spatial"] = [bump(d, at) for d in dn.input_spatial]
    if not reordered_filter:
        at = dn.kernel_input_feature
        changes["kernel_output_feature"] = bump(dn.kernel_output_feature, at)
        changes["kernel_spatial"] = [bump(d, at) for d in dn.kernel_spatial]
    at = dn.output_feature
    changes["output_batch"] = bump(dn.output_batch, at)
    changes["output_spatial"] = [bump(d, at) for d in dn.output_spatial]
    return dn.with_(**changes)


# ---- cudnnReorderFilterAndBias as HLO --------------------------------------------------------
def filter_reordering(dims, dn: ConvolutionDimensionNumbers):
    """CudnnInferTransposeForFilterReordering: (split dims, permutation, result dims) of
    the reshape-transpose-reshape that puts an [O, I, H, W] (or [O, I/k, H, W, k], k = 4 or
    32) filter into cuDNN's reordered int8x32 layout [O, I/32, H, W, 32]."""
    d_o, d_i = dn.kernel_output_feature, dn.kernel_input_feature
    d_h, d_w = dn.kernel_spatial
    revectorized = len(dims) == 5
    d_z = 10 - d_o - d_i - d_h - d_w if revectorized else -1
    vsize = dims[d_z] if revectorized else 1
    if dims[d_o] % 32 or dims[d_i] % (32 // vsize) or (revectorized and vsize not in (4, 32)):
        raise ValueError("filter shape is not vectorizable")
    split_v = vsize == 32

    def index(dim):
        if revectorized:
            base = (2 - split_v if d_i < dim else 0) + (1 + split_v if d_z < dim else 0)
        else:
            base = 3 if d_i < dim else 0
        return base + (3 if d_o < dim else 0) + (d_h < dim) + (d_w < dim)
    i_o, i_i, i_h, i_w = index(d_o), index(d_i), index(d_h), index(d_w)
    i_y = index(d_z) if vsize == 32 else i_i + 1
    i_z = index(d_z) if vsize == 4 else (i_y + 1 if vsize == 32 else i_i + 2)
    split = [0] * 8
    split[i_o], split[i_o + 1], split[i_o + 2] = dims[d_o] // 8, 4, 2
    split[i_i] = dims[d_i] // (32 // vsize)
    split[i_y], split[i_z] = 8, 4
    split[i_h], split[i_w] = dims[d_h], dims[d_w]
    perm = [i_i, i_h, i_w, i_o, i_o + 2, i_y, i_o + 1, i_z]
    result = [dims[d_o], dims[d_i] // (32 // vsize), dims[d_h], dims[d_w], 32]
    return split, perm, result


BIAS_PERMUTATION = (0, 2, 1, 3)  # [O/32, 4, 2, 4] -> [O/32, 2, 4, 4] (self-inverse)


def _reshape_transpose_reshape(b: Builder, x, split, perm, result):
    return b.reshape(b.transpose(b.reshape(x, split), perm), result)


def reorder_int8_nchw_vect(b: Builder, operands, dn: ConvolutionDimensionNumbers
                           ) -> ConvolutionDimensionNumbers:
    """ReorderInt8NchwVect: reorder operands[1] (filter) and operands[2] (bias, if any) in
    place; returns the dim numbers with the filter as ``oi01?``."""
    operands[1] = _reshape_transpose_reshape(b, operands[1],
                                             *filter_reordering(operands[1].shape.dims, dn))
    out = dn.with_(kernel_output_feature=0, kernel_input_feature=1, kernel_spatial=[2, 3])
    if len(operands) > 2:
        n = operands[2].shape.dims[0]
        if n % 32:
            raise ValueError("bias shape is not vectorizable")
        operands[2] = _reshape_transpose_reshape(b, operands[2], [n // 32, 4, 2, 4],
                                                 BIAS_PERMUTATION, [n])
    return out


def _reordered_config(conv) -> str | None:
    """The backend config with ``reordered_int8_nchw_vect: true`` (None if it is not
    JSON)."""
    try:
        config = json.loads(conv.attrs.get("backend_config", "") or "{}")
    except json.JSONDecodeError:
        return None
    if not isinstance(config, dict):
        return None
    config.setdefault("cudnn_conv_backend_config", {})["reordered_int8_nchw_vect"] = True
    return json.dumps(config, separators=(",", ":"))


def _use_reordering(conv, vect_size: int) -> bool:
    opts = conv.parent.module.config.debug_options
    return conv.operands[0].shape.element_type == "s8" and vect_size == 32 and \
        getattr(opts, "xla_gpu_enable_cudnn_int8x32_convolution_reordering", True) and \
        _reordered_config(conv) is not None


def _finish(comp, conv, operands, dn: ConvolutionDimensionNumbers, result_dims, reorder: bool,
            restore):
    """The new call (same name, window and config but for the reordering flag) and the
    ``tuple(restore(value), scratch)`` that replaces ``conv``."""
    b = Builder(comp)
    et = conv.shape.tuple_shapes[0].element_type
    new = clone_conv(comp, conv, operands, result=Shape.array(et, result_dims), dnums=dn,
                     config=_reordered_config(conv) if reorder else None)
    value = restore(b, b.gte(new, 0))
    replace_call(comp, conv, b.tuple([value, b.gte(new, 1)]))


def _cudnn_can_vectorize(conv, cc, vect_size: int) -> bool:
    """An integer convolution only where cuDNN has the vectorized kernel; at most input,
    filter, bias and side input (XLA reports more as an error)."""
    if is_integral(conv.operands[0].shape.element_type) and \
            not supports_optimized_integer_conv(conv, cc, vect_size):
        return False
    return len(conv.operands) <= 4


def try_revectorize(comp, conv, cc, vect_size: int) -> bool:
    """TryRevectorizeConv: an NCHW_VECT_C convolution ([.., C/k, .., k]) to vector
    ``vect_size``."""
    x, w = conv.operands[0], conv.operands[1]
    result = conv.shape.tuple_shapes[0]
    dn = ConvolutionDimensionNumbers.of(conv)
    in_v, k_v, out_v = dn.vectorized_dims(x.shape.rank, w.shape.rank, result.rank)
    if in_v is None or k_v is None or out_v is None:
        return False
    in_vs, out_vs = x.shape.dims[in_v], result.dims[out_v]
    if vect_size % in_vs or vect_size % out_vs or \
            x.shape.dims[dn.input_feature] % (vect_size // in_vs) or \
            result.dims[dn.output_feature] % (vect_size // out_vs):
        return False
    if not _cudnn_can_vectorize(conv, cc, vect_size):
        return False
    b = Builder(comp)
    reorder = _use_reordering(conv, vect_size)
    # the reordering takes filters vectorized by 4 or 32 as they are
    filt = w if reorder and w.shape.dims[k_v] in (4, 32) else \
        revectorize(b, w, dn.kernel_input_feature, k_v, vect_size)
    operands = [revectorize(b, x, dn.input_feature, in_v, vect_size), filt]
    if len(conv.operands) > 2:
        operands.append(conv.operands[2])           # bias: unchanged
    if len(conv.operands) > 3:
        operands.append(revectorize(b, conv.operands[3], dn.input_feature, in_v, vect_size))
    new_dn = reorder_int8_nchw_vect(b, operands, dn) if reorder else dn
    dims = list(result.dims)
    dims[new_dn.output_feature] //= vect_size // out_vs
    dims[out_v] = vect_size

    def restore(b, value):
        return unrevectorize(b, value, new_dn.output_feature, out_v, out_vs)
    _finish(comp, conv, operands, new_dn, dims, reorder, restore)
    return True


def try_vectorize(comp, conv, cc, vect_size: int) -> bool:
    """TryVectorizeConv: a plain convolution to NCHW_VECT_C with vector ``vect_size``."""
    x, w = conv.operands[0], conv.operands[1]
    result = conv.shape.tuple_shapes[0]
    dn = ConvolutionDimensionNumbers.of(conv)
    if x.shape.dims[dn.input_feature] % vect_size or \
            result.dims[dn.output_feature] % vect_size:
        return False
    if x.shape.rank > 2 + len(dn.input_spatial):   # already vectorized
        return False
    if not _cudnn_can_vectorize(conv, cc, vect_size):
        return False
    b = Builder(comp)
    reorder = _use_reordering(conv, vect_size)
    # a reordered filter is reordered from its unsplit form
    operands = [split_at_dim(b, x, dn.input_feature, vect_size),
                w if reorder else split_at_dim(b, w, dn.kernel_input_feature, vect_size)]
    if len(conv.operands) > 2:
        operands.append(conv.operands[2])
    if len(conv.operands) > 3:  # the side input has the output's shape
        operands.append(split_at_dim(b, conv.operands[3], dn.output_feature, vect_size))
    if reorder:
        dn = reorder_int8_nchw_vect(b, operands, dn)
    new_dn = vectorize_dnums(dn, reorder)
    dims = list(result.dims)
    dims[dn.output_feature] //= vect_size
    dims.insert(dn.output_feature + 1, vect_size)
    feature = new_dn.output_feature

    def restore(b, value):
        return collapse(b, value, feature)
    _finish(comp, conv, operands, new_dn, dims, reorder, restore)
    return True


class CudnnVectorizeConvolutions(ComputeCapabilityPass):
    name = "cudnn_vectorize_convolutions"

    def run(self, module) -> bool:
        cc = self.target(module)
        changed = False
        for comp in fusible_computations(module):
            for conv in [i for i in comp.post_order() if relevant(i)]:
                # int8x32 on sm75+ (re-vectorizing an int8x4 one first), else int8x4
                done = cc >= (7, 5) and (try_revectorize(comp, conv, cc, 32)
                                         or try_vectorize(comp, conv, cc, 32))
                changed |= done or try_vectorize(comp, conv, cc, 4)
        return changed
