"""batch-norm-training / -inference / -grad, as XLA's BatchNormExpander computes them.

``feature_index`` names the feature dim; statistics reduce over every other dim;
the variance is the biased (population) variance.  f16/bf16 compute in f32.

* training(operand, scale, offset) -> (output, batch_mean, batch_var)
* inference(operand, scale, offset, mean, variance) -> output
  ``(x - mean) * rsqrt(var + epsilon) * scale + offset``
* grad(operand, scale, mean, variance, grad_output) -> (grad_operand, grad_scale,
  grad_offset):
  ``grad_offset = sum(dy)``, ``grad_scale = sum(dy * (x - mean)) * rsqrt(var + eps)``,
  ``grad_operand = scale * rsqrt(var + eps) / N *
  (N * dy - sum(dy) - (x - mean) * sum(dy * (x - mean)) / (var + eps))``.
"""
from __future__ import annotations

import numpy as np

from .heavy_common import as_result, is_float_dtype, unsupported
from .registry import register


def _setup(inst, x):
    fi = inst.attr("feature_index")
    eps = inst.attr("epsilon", 0.0)
    if fi is None or not 0 <= fi < x.ndim:
        raise unsupported(inst, f"feature_index={fi} for an operand of rank {x.ndim}")
    if not is_float_dtype(x.dtype):
        raise unsupported(inst, f"batch norm on {x.dtype}")
    work = np.float64 if x.dtype == np.float64 else np.float32
    axes = tuple(d for d in range(x.ndim) if d != fi)
    bshape = [1] * x.ndim
    bshape[fi] = x.shape[fi]
    eps = np.asarray(eps, dtype=work)
    return fi, eps, work, axes, bshape


def _vec(v, work, bshape):
    return np.asarray(v).astype(work).reshape(bshape)


@register("batch-norm-inference")
def batch_norm_inference(inst, args, ctx):
    x = np.asarray(args[0])
    _, eps, work, _, bshape = _setup(inst, x)
    scale, offset, mean, var = (_vec(a, work, bshape) for a in args[1:5])
    xw = x.astype(work)
    out = (xw - mean) * (1 / np.sqrt(var + eps)) * scale + offset
    return as_result(out, inst.shape)


@register("batch-norm-training")
def batch_norm_training(inst, args, ctx):
    x = np.asarray(args[0])
    _, eps, work, axes, bshape = _setup(inst, x)
    scale, offset = (_vec(a, work, bshape) for a in args[1:3])
    xw = x.astype(work)
    mean = xw.mean(axis=axes, keepdims=True)
    var = np.square(xw - mean).mean(axis=axes, keepdims=True)
    out = (xw - mean) * (1 / np.sqrt(var + eps)) * scale + offset
    shapes = inst.shape.tuple_shapes
    return (as_result(out, shapes[0]), as_result(mean.reshape(-1), shapes[1]),
            as_result(var.reshape(-1), shapes[2]))


@register("batch-norm-grad")
def batch_norm_grad(inst, args, ctx):
    x = np.asarray(args[0])
    _, eps, work, axes, bshape = _setup(inst, x)
    scale, mean, var = (_vec(a, work, bshape) for a in args[1:4])
    dy = np.asarray(args[4]).astype(work)
    xw = x.astype(work)
    count = x.size // max(x.shape[inst.attr("feature_index")], 1) if x.size else 0
    rstd = 1 / np.sqrt(var + eps)
    centered = xw - mean
    sum_dy = dy.sum(axis=axes, keepdims=True)
    sum_dy_xc = (dy * centered).sum(axis=axes, keepdims=True)
    grad_offset = sum_dy
    grad_scale = sum_dy_xc * rstd
    if count:
        grad_x = scale * rstd / count * (count * dy - sum_dy
                                         - centered * sum_dy_xc / (var + eps))
    else:
        grad_x = np.zeros_like(xw)
    shapes = inst.shape.tuple_shapes
    return (as_result(grad_x, shapes[0]), as_result(grad_scale.reshape(-1), shapes[1]),
            as_result(grad_offset.reshape(-1), shapes[2]))
