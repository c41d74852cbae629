"""convolution: XLA's general convolution through im2col + GEMM.

Semantics (xla/hlo/evaluator: HandleConvolutionWithLiterals): for every window dim the
input is base-dilated (``lhs_dilate``), padded (``pad``, negative values crop), and read
at ``out*stride + k*rhs_dilate``; ``rhs_reversal`` flips the kernel; ``dim_labels`` give
any order of batch/feature/spatial dims for input, kernel and output.
``feature_group_count`` G splits the input features into G groups, each convolved with
its slice of output features; ``batch_group_count`` B splits the input batch into B groups
that feed consecutive slices of the output features (the output batch is N/B).
Operands are converted to the result element type first; integers accumulate in int64
and are clamped to the result type, f16/bf16 accumulate in f32.

Method (``conv_forward``): kernel offsets along base-dilated dims (and, for very large
patch buffers, along the largest windows) are looped over, each iteration reading just
the input elements it touches; the remaining dims go im2col-style into the columns of one
GEMM per group.  A MobileNet layer takes tens of milliseconds.

The same machinery serves the cuDNN custom calls (ops_custom_call.py): ``conv_forward``,
``conv_backward_input`` and ``conv_backward_filter`` all take canonical (N, C, spatial)
arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir.attributes import ConvolutionDimensionNumbers, Window, WindowDim
from .heavy_common import (as_result, cast_float_result, compute_dtype, dilate_and_pad,
                           unsupported, window_output_size)
from .registry import register


@dataclass
class ConvParams:
    window: list[WindowDim]
    feature_group_count: int = 1
    batch_group_count: int = 1


def conv_params(inst, spatial_rank: int) -> ConvParams:
    window = inst.attr("window") or Window([])
    dims = list(window.dims)
    if not dims:
        dims = [WindowDim() for _ in range(spatial_rank)]
    if len(dims) != spatial_rank:
        raise unsupported(inst, f"window has {len(dims)} dims, convolution has "
                                f"{spatial_rank} spatial dims")
    return ConvParams(dims, inst.attr("feature_group_count", 1) or 1,
                      inst.attr("batch_group_count", 1) or 1)


def dim_labels(inst, rank: int):
    labels = inst.attr("dim_labels")
    if labels is None:  # XlaBuilder::CreateDefaultConvDimensionNumbers: bf01_oi01->bf01
        sp = "".join(str(i) for i in range(rank - 2))
        labels = ConvolutionDimensionNumbers.parse(f"bf{sp}_oi{sp}->bf{sp}")
    return labels


def to_canonical(lhs, rhs, labels):
    """Input as (N, C, spatial...), kernel as (O, I, spatial...)."""
    x = np.transpose(lhs, [labels.input_batch, labels.input_feature] + list(labels.input_spatial))
    w = np.transpose(rhs, [labels.kernel_output_feature, labels.kernel_input_feature]
                     + list(labels.kernel_spatial))
    return x, w


def from_canonical_output(out, labels):
    """(N, O, spatial...) -> the output dim order of ``labels``."""
    order = [labels.output_batch, labels.output_feature] + list(labels.output_spatial)
    perm = [0] * len(order)
    for canonical_axis, dim in enumerate(order):
        perm[dim] = canonical_axis
    return np.transpose(out, perm)


def _padded_input(x, params: ConvParams):
    sp = len(params.window)
    axes = list(range(2, 2 + sp))
    return dilate_and_pad(x, axes, [d.base_dilation for d in params.window],
                          [(d.padding_low, d.padding_high) for d in params.window], 0)


def _reverse_kernel(w, params: ConvParams):
    for i, d in enumerate(params.window):
        if d.window_reversal:
            w = np.flip(w, axis=2 + i)
    return w


def padded_sizes(x_spatial, params: ConvParams):
    """Spatial sizes of the base-dilated, padded input."""
    return [max(((n - 1) * d.base_dilation + 1 if n > 0 else 0)
                + d.padding_low + d.padding_high, 0) for n, d in zip(x_spatial, params.window)]


def output_spatial(x_shape, params: ConvParams):
    return [window_output_size(n, d.size, d.stride, d.padding_low, d.padding_high,
                               d.base_dilation, d.window_dilation)
            for n, d in zip(x_shape[2:], params.window)]


def _patches(xp, windows, out_sp):
    """im2col over the spatial dims of an already padded (N, C, S...) array:
    (N, C, K..., P...) windows (a strided view)."""
    sp = len(windows)
    if any(o == 0 for o in out_sp) or any(s == 0 for s in xp.shape[:2]) or sp == 0:
        if sp == 0:
            return xp
        return np.zeros(xp.shape[:2] + tuple(d.size for d in windows) + tuple(out_sp),
                        xp.dtype)
    eff = [(d.size - 1) * d.window_dilation + 1 for d in windows]
    view = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + sp)))
    # view: (N, C, Pfull..., Eff...); subsample strides and window dilations.
    idx = [slice(None), slice(None)]
    idx += [slice(0, o * d.stride, d.stride) for o, d in zip(out_sp, windows)]
    idx += [slice(None, None, d.window_dilation) for d in windows]
    view = view[tuple(idx)]
    perm = [0, 1] + list(range(2 + sp, 2 + 2 * sp)) + list(range(2, 2 + sp))
    return np.transpose(view, perm)


# Patch buffers (N*C*K*P elements) above this are avoided by looping over more kernel dims.
IM2COL_LIMIT = 1 << 25
FORCE_LOOPED: str | None = None  # tests: "none" (pure im2col) or "all" (pure offsets)


def _choose_looped(x_shape, params: ConvParams, out_sp) -> list[int]:
    """Spatial dims whose kernel offsets are looped over (the rest go into im2col
    columns): base-dilated dims (so their holes are never materialised), then the
    largest-window dims while the patch buffer would exceed IM2COL_LIMIT."""
    sp = len(params.window)
    if FORCE_LOOPED == "all":
        return list(range(sp))
    if FORCE_LOOPED == "none":
        return []
    looped = [d for d in range(sp) if params.window[d].base_dilation > 1]
    columns = [d for d in range(sp) if d not in looped]
    rest = x_shape[0] * x_shape[1] * int(np.prod(out_sp, dtype=np.int64))
    while columns and rest * int(np.prod([params.window[d].size for d in columns],
                                         dtype=np.int64)) > IM2COL_LIMIT:
        big = max(columns, key=lambda d: params.window[d].size)
        columns.remove(big)
        looped.append(big)
    return sorted(looped)


def _looped_indices(pos, windows, out_sizes, in_sizes):
    """For kernel offsets ``pos`` in looped dims: per dim, the outputs that read a real
    input element and the undilated input index each reads."""
    outs, ins = [], []
    for kk, d, osz, isz in zip(pos, windows, out_sizes, in_sizes):
        dil = np.arange(osz) * d.stride + kk * d.window_dilation - d.padding_low
        ok = (dil % d.base_dilation == 0) & (dil >= 0) & (dil < isz * d.base_dilation)
        outs.append(np.flatnonzero(ok))
        ins.append(dil[ok] // d.base_dilation)
    return outs, ins


def conv_forward(x, w, params: ConvParams, looped=None):
    """Canonical convolution: x (N, C, S...), w (O, C/G, K...) -> (N/B, O, P...).

    Kernel offsets along ``looped`` spatial dims are iterated, each reading only the input
    elements it touches; the other dims are unrolled im2col-style into the columns of one
    batched matmul per iteration.  No looped dims = plain im2col; all looped = one small
    matmul per kernel offset."""
    sp = len(params.window)
    out_sp = output_spatial(x.shape, params)
    w = _reverse_kernel(w, params)
    if looped is None:
        looped = _choose_looped(x.shape, params, out_sp)
    columns = [d for d in range(sp) if d not in looped]
    order = list(looped) + columns                   # spatial dims: looped ones first
    nl = len(looped)
    xo = np.transpose(x, [0, 1] + [2 + d for d in order])
    wo = np.transpose(w, [0, 1] + [2 + d for d in order])
    win = [params.window[d] for d in order]
    osz = [out_sp[d] for d in order]
    n, c = x.shape[:2]
    o = w.shape[0]
    nb = n // params.batch_group_count
    out = np.zeros((nb, o) + tuple(osz), dtype=np.result_type(x, w))
    if out.size and c and n:
        col_axes = range(2 + nl, 2 + sp)
        xp = dilate_and_pad(xo, col_axes, [d.base_dilation for d in win[nl:]],
                            [(d.padding_low, d.padding_high) for d in win[nl:]], 0)
        kcol = int(np.prod([d.size for d in win[nl:]], dtype=np.int64))
        pcol = int(np.prod(osz[nl:], dtype=np.int64))
        for pos in np.ndindex(*[d.size for d in win[:nl]]):
            outs, ins = _looped_indices(pos, win[:nl], osz[:nl], xo.shape[2:2 + nl])
            if any(len(v) == 0 for v in outs):
                continue
            xs = xp[(slice(None), slice(None)) + np.ix_(*ins)] if nl else xp
            nv = xs.shape[2:2 + nl]
            v = int(np.prod(nv, dtype=np.int64))
            cols = _patches(xs.reshape((n, c * v) + xs.shape[2 + nl:]), win[nl:], osz[nl:])
            cols = np.ascontiguousarray(cols).reshape(n, c, v, kcol, pcol)
            cols = np.transpose(cols, (0, 1, 3, 2, 4)).reshape(n, c, kcol, v * pcol)
            wsub = wo[(slice(None), slice(None)) + tuple(pos)].reshape(o, wo.shape[1], kcol)
            contrib = _group_matmul(cols, wsub, params)
            region = (slice(None), slice(None)) + (np.ix_(*outs) if nl else ())
            out[region] += contrib.reshape((nb, o) + tuple(nv) + tuple(osz[nl:]))
    inverse = [0, 1] + [2 + order.index(d) for d in range(sp)]
    return np.transpose(out, inverse)


def _group_matmul(x_cols, w_mat, params: ConvParams):
    """(N, C, Q, P) columns and (O, C/G, Q) weights -> (N/B, O, P), with feature groups
    G or batch groups B; one GEMM per group over all batch elements and positions."""
    n, c, q, p = x_cols.shape
    o = w_mat.shape[0]
    g, b = params.feature_group_count, params.batch_group_count
    if b > 1:
        nb = n // b
        cols = x_cols.reshape(b, nb, c * q, p).transpose(0, 2, 1, 3).reshape(b, c * q, nb * p)
        out = np.matmul(w_mat.reshape(b, o // b, c * q), cols)        # (B, O/B, Nb*P)
        return out.reshape(b, o // b, nb, p).transpose(2, 0, 1, 3).reshape(nb, o, p)
    cg = c // g
    cols = x_cols.reshape(n, g, cg * q, p).transpose(1, 2, 0, 3).reshape(g, cg * q, n * p)
    out = np.matmul(w_mat.reshape(g, o // g, cg * q), cols)            # (G, O/G, N*P)
    return out.reshape(g, o // g, n, p).transpose(2, 0, 1, 3).reshape(n, o, p)


def _kernel_offsets(params: ConvParams):
    return np.ndindex(*[d.size for d in params.window])


def _strided_region(pos, params: ConvParams, out_sp):
    """Slices into the padded input read by kernel offset ``pos`` for every output."""
    return tuple(slice(kk * d.window_dilation, kk * d.window_dilation + (o - 1) * d.stride + 1,
                       d.stride)
                 for kk, d, o in zip(pos, params.window, out_sp))


def _unpad(xp_grad, x_spatial, params: ConvParams):
    """Adjoint of dilate_and_pad: gradient on the padded input -> gradient on the input."""
    out = xp_grad
    for i, (n, d) in enumerate(zip(x_spatial, params.window)):
        axis = 2 + i
        lo, hi = d.padding_low, d.padding_high
        dilated = (n - 1) * d.base_dilation + 1 if n > 0 else 0
        # Undo cropping (negative padding) by re-growing with zeros, then drop padding.
        if lo < 0 or hi < 0:
            widths = [(0, 0)] * out.ndim
            widths[axis] = (max(-lo, 0), max(-hi, 0))
            out = np.pad(out, widths)
        idx = [slice(None)] * out.ndim
        idx[axis] = slice(max(lo, 0), max(lo, 0) + dilated, d.base_dilation)
        out = out[tuple(idx)]
    return out


def conv_backward_input(dy, w, x_shape, params: ConvParams):
    """Gradient of conv_forward w.r.t. x: dy (N, O, P...), w (O, C/G, K...) -> (N, C, S...).
    ``params`` are the forward convolution's."""
    if params.batch_group_count != 1:
        raise ValueError("backward-input convolution with batch_group_count > 1")
    n, c = x_shape[:2]
    o, ci = w.shape[:2]
    g = params.feature_group_count
    out_sp = list(dy.shape[2:])
    w = _reverse_kernel(w, params)
    padded = padded_sizes(x_shape[2:], params)
    grad = np.zeros((n, c) + tuple(padded), dtype=dy.dtype)
    wg = w.reshape(g, o // g, ci, -1)                        # (G, O/G, C/G, K)
    dyg = dy.reshape((n, g, o // g) + tuple(out_sp))
    for kidx, pos in enumerate(_kernel_offsets(params)):
        if any(x == 0 for x in out_sp):
            break
        region = _strided_region(pos, params, out_sp)
        contrib = np.einsum("ngo...,goc->ngc...", dyg, wg[..., kidx])
        grad[(slice(None), slice(None)) + region] += contrib.reshape(
            (n, c) + tuple(out_sp))
    return _unpad(grad, x_shape[2:], params)


def conv_backward_filter(x, dy, w_shape, params: ConvParams):
    """Gradient of conv_forward w.r.t. w: x (N, C, S...), dy (N, O, P...) -> (O, C/G, K...)."""
    if params.batch_group_count != 1:
        raise ValueError("backward-filter convolution with batch_group_count > 1")
    n, c = x.shape[:2]
    o, ci = w_shape[:2]
    g = params.feature_group_count
    out_sp = list(dy.shape[2:])
    xp = _padded_input(x, params)
    dw = np.zeros((g, o // g, ci) + tuple(d.size for d in params.window), dtype=dy.dtype)
    dyg = dy.reshape((n, g, o // g, -1))
    for pos in _kernel_offsets(params):
        if any(x_ == 0 for x_ in out_sp):
            break
        region = _strided_region(pos, params, out_sp)
        xs = xp[(slice(None), slice(None)) + region].reshape(n, g, ci, -1)
        dw[(slice(None),) * 3 + tuple(pos)] = np.einsum("ngop,ngcp->goc", dyg, xs)
    dw = dw.reshape((o, ci) + tuple(d.size for d in params.window))
    return _reverse_kernel(dw, params)


@register("convolution")
def convolution(inst, args, ctx):
    lhs, rhs = np.asarray(args[0]), np.asarray(args[1])
    out_dtype = inst.shape.dtype
    acc = compute_dtype(out_dtype)
    labels = dim_labels(inst, lhs.ndim)
    params = conv_params(inst, lhs.ndim - 2)
    x, w = to_canonical(_as(_as(lhs, out_dtype), acc), _as(_as(rhs, out_dtype), acc), labels)
    _check_groups(inst, x.shape, w.shape, params)
    out = conv_forward(x, w, params)
    out = from_canonical_output(out, labels)
    return as_result(cast_float_result(out, out_dtype), inst.shape)


def _as(arr, dtype):
    return arr if arr.dtype == dtype else arr.astype(dtype)


def _check_groups(inst, x_shape, w_shape, params: ConvParams) -> None:
    g, b = params.feature_group_count, params.batch_group_count
    if g < 1 or b < 1 or (g > 1 and b > 1):
        raise unsupported(inst, f"feature_group_count={g} batch_group_count={b}")
    if x_shape[1] % g or x_shape[1] // g != w_shape[1] or w_shape[0] % g:
        raise unsupported(inst, f"input features {x_shape[1]}, kernel {w_shape[:2]} do not "
                                f"fit feature_group_count={g}")
    if x_shape[0] % b or w_shape[0] % b:
        raise unsupported(inst, f"batch {x_shape[0]} / output features {w_shape[0]} do not "
                                f"fit batch_group_count={b}")
