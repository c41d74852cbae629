"""custom-call: a table ``custom_call_target -> handler`` for the targets our own passes
emit; any other target is an UnsupportedError that names it.

* ``__cublas$gemm`` / ``__cublas$lt$matmul`` (GemmRewriter): ``backend_config`` holds
  ``gemm_backend_config`` with ``alpha_real``/``alpha_imag``, ``beta``,
  ``dot_dimension_numbers`` and ``epilogue``.  Operands: lhs, rhs, then the addend C when
  ``beta != 0``, then the bias vector when the epilogue has BIAS.  Result:
  ``epilogue(alpha * dot(lhs, rhs) + beta * C [+ bias])`` where the bias broadcasts along
  the last dim, RELU is ``max(x, 0)`` and GELU the tanh approximation XLA fuses.  A tuple
  result gets zero-filled workspace buffers after the first element.
* ``__cudnn$convForward``, ``__cudnn$convBackwardInput``, ``__cudnn$convBackwardFilter``
  (GpuConvRewriter): ``window``, ``dim_labels`` and ``feature_group_count`` describe the
  *forward* convolution; forward takes (input, filter) -> output, backward-input
  (output-grad, filter) -> input-grad, backward-filter (input, output-grad) ->
  filter-grad.  The result is the tuple (value, u8[0] scratch) XLA emits (a plain array
  result is accepted too).
"""
from __future__ import annotations

import json

import numpy as np

from ...ir.attributes import parse_string
from .heavy_common import as_result, cast_float_result, compute_dtype, unsupported
from .ops_convolution import (conv_backward_filter, conv_backward_input, conv_forward,
                              conv_params, dim_labels, from_canonical_output, to_canonical)
from .registry import register

TARGETS: dict = {}


def target(*names):
    def deco(fn):
        for n in names:
            TARGETS[n] = fn
        return fn
    return deco


@register("custom-call")
def custom_call(inst, args, ctx):
    name = inst.custom_call_target
    fn = TARGETS.get(name)
    if fn is None:
        raise unsupported(inst, f"custom_call_target \"{name}\" is not supported by the "
                                f"interpreter (known: {', '.join(sorted(TARGETS))})")
    return fn(inst, [np.asarray(a) if not isinstance(a, tuple) else a for a in args], ctx)


def backend_config(inst) -> dict:
    raw = inst.attrs.get("backend_config")
    if raw is None:
        return {}
    text = raw.strip()
    if text.startswith('"'):
        text = parse_string(text)
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise unsupported(inst, f"backend_config is not JSON: {e}") from None


def _array_and_scratch(inst, value):
    """``value`` shaped as the result: the first tuple element, zero scratch after it."""
    if not inst.shape.is_tuple():
        return as_result(value, inst.shape)
    shapes = inst.shape.tuple_shapes
    rest = tuple(np.zeros(s.dims, dtype=s.dtype) for s in shapes[1:])
    return (as_result(value, shapes[0]),) + rest


def _value_shape(inst):
    return inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape


# ---- GEMM -------------------------------------------------------------------------------
def dot_general(lhs, rhs, lc, rc, lb, rb):
    """XLA dot: result dims = batch, lhs free, rhs free."""
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    lt = np.transpose(lhs, list(lb) + lfree + list(lc))
    rt = np.transpose(rhs, list(rb) + list(rc) + rfree)
    bshape = lt.shape[:len(lb)]
    lf = [lhs.shape[d] for d in lfree]
    rf = [rhs.shape[d] for d in rfree]
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    l2 = lt.reshape(bshape + (int(np.prod(lf, dtype=np.int64)), k))
    r2 = rt.reshape(bshape + (k, int(np.prod(rf, dtype=np.int64))))
    return np.matmul(l2, r2).reshape(bshape + tuple(lf) + tuple(rf))


_GELU_C = np.sqrt(2.0 / np.pi)


def _ints(values):
    return [int(v) for v in values or []]


@target("__cublas$gemm", "__cublas$lt$matmul")
def cublas_gemm(inst, args, ctx):
    raw = backend_config(inst)
    # current XLA wraps the fields in "gemm_backend_config"; older dumps have them bare
    cfg = raw.get("gemm_backend_config", raw if "dot_dimension_numbers" in raw else None)
    if cfg is None:
        raise unsupported(inst, "backend_config has no gemm_backend_config")
    dnums = cfg.get("dot_dimension_numbers", {})
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in ("DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU"):
        raise unsupported(inst, f"gemm epilogue {epilogue}")
    alpha = complex(float(cfg.get("alpha_real", 1.0)), float(cfg.get("alpha_imag", 0.0)))
    beta = float(cfg.get("beta", 0.0))
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    lhs, rhs = args[0].astype(acc), args[1].astype(acc)
    expected = 2 + (beta != 0) + ("BIAS" in epilogue)
    if len(args) != expected:
        raise unsupported(inst, f"{len(args)} operands, but beta={beta} and epilogue "
                                f"{epilogue} need {expected}")
    out = dot_general(lhs, rhs, _ints(dnums.get("lhs_contracting_dimensions")),
                      _ints(dnums.get("rhs_contracting_dimensions")),
                      _ints(dnums.get("lhs_batch_dimensions")),
                      _ints(dnums.get("rhs_batch_dimensions")))
    if alpha != 1:
        out = out * (alpha if np.issubdtype(acc, np.complexfloating) else alpha.real)
    pos = 2
    if beta != 0:
        out = out + beta * args[pos].astype(acc).reshape(out.shape)
        pos += 1
    if "BIAS" in epilogue:
        bias = args[pos].astype(acc)
        out = out + bias.reshape((1,) * (out.ndim - bias.ndim) + bias.shape)
    if "RELU" in epilogue:
        out = np.maximum(out, 0)
    if "GELU" in epilogue:
        out = 0.5 * out * (1 + np.tanh(_GELU_C * (out + 0.044715 * out ** 3)))
    out = np.asarray(out).astype(acc)
    return _array_and_scratch(inst, cast_float_result(out, out_shape.dtype))


# ---- cuDNN convolutions -----------------------------------------------------------------
def _conv_setup(inst, rank):
    labels = dim_labels(inst, rank)
    params = conv_params(inst, rank - 2)
    if params.batch_group_count != 1:
        raise unsupported(inst, "cuDNN convolution with batch_group_count > 1")
    return labels, params


def _input_canonical(arr, labels):
    return np.transpose(arr, [labels.input_batch, labels.input_feature] + labels.input_spatial)


def _output_canonical(arr, labels):
    return np.transpose(arr, [labels.output_batch, labels.output_feature]
                        + labels.output_spatial)


def _kernel_canonical(arr, labels):
    return np.transpose(arr, [labels.kernel_output_feature, labels.kernel_input_feature]
                        + labels.kernel_spatial)


def _from_canonical(arr, order):
    perm = [0] * len(order)
    for axis, dim in enumerate(order):
        perm[dim] = axis
    return np.transpose(arr, perm)


@target("__cudnn$convForward")
def cudnn_conv_forward(inst, args, ctx):
    if len(args) != 2:
        raise unsupported(inst, f"convForward with {len(args)} operands")
    out, _, out_shape, _ = _forward(inst, args)
    return _array_and_scratch(inst, cast_float_result(out, out_shape.dtype))


def _forward(inst, args):
    """The forward convolution of operands 0 and 1 in the accumulation type: (out, acc
    dtype, result shape, dim labels)."""
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    labels, params = _conv_setup(inst, args[0].ndim)
    x, w = to_canonical(args[0].astype(acc), args[1].astype(acc), labels)
    return from_canonical_output(conv_forward(x, w, params), labels), acc, out_shape, labels


_ACTIVATIONS = {
    "kNone": lambda out, cfg: out,
    "kRelu": lambda out, cfg: np.maximum(out, 0),
    "kRelu6": lambda out, cfg: np.clip(out, 0, 6),
    "kElu": lambda out, cfg: np.where(out > 0, out, np.expm1(out)),
    "kLeakyRelu": lambda out, cfg: np.where(out > 0, out,
                                            float(cfg.get("leakyrelu_alpha", 0)) * out),
}


@target("__cudnn$convBiasActivationForward")
def cudnn_conv_bias_activation(inst, args, ctx):
    """activation(conv * conv_result_scale + side_input_scale * side + bias), bias along
    the output feature dimension (what cudnn-fused-convolution-rewriter emits)."""
    out, acc, out_shape, labels = _forward(inst, args)
    cfg = backend_config(inst).get("cudnn_conv_backend_config", {})
    out = out * float(cfg.get("conv_result_scale", 1))
    if len(args) > 3:
        out = out + float(cfg.get("side_input_scale", 0)) * args[3].astype(acc)
    if len(args) > 2:
        shape = [1] * out.ndim
        shape[labels.output_feature] = -1
        out = out + args[2].astype(acc).reshape(shape)
    mode = cfg.get("activation_mode", "kNone")
    if mode not in _ACTIVATIONS:
        raise unsupported(inst, f"convBiasActivationForward activation_mode {mode}")
    out = _ACTIVATIONS[mode](out, cfg)
    return _array_and_scratch(inst, cast_float_result(np.asarray(out).astype(acc),
                                                      out_shape.dtype))


@target("__cudnn$convBackwardInput")
def cudnn_conv_backward_input(inst, args, ctx):
    if len(args) != 2:
        raise unsupported(inst, f"convBackwardInput with {len(args)} operands")
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    labels, params = _conv_setup(inst, args[0].ndim)
    dy = _output_canonical(args[0].astype(acc), labels)
    w = _kernel_canonical(args[1].astype(acc), labels)
    dims = out_shape.dims
    x_shape = [dims[labels.input_batch], dims[labels.input_feature]] + \
        [dims[d] for d in labels.input_spatial]
    dx = conv_backward_input(dy, w, x_shape, params)
    dx = _from_canonical(dx, [labels.input_batch, labels.input_feature] + labels.input_spatial)
    return _array_and_scratch(inst, cast_float_result(dx, out_shape.dtype))


@target("__cudnn$convBackwardFilter")
def cudnn_conv_backward_filter(inst, args, ctx):
    if len(args) != 2:
        raise unsupported(inst, f"convBackwardFilter with {len(args)} operands")
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    labels, params = _conv_setup(inst, args[0].ndim)
    x = _input_canonical(args[0].astype(acc), labels)
    dy = _output_canonical(args[1].astype(acc), labels)
    dims = out_shape.dims
    w_shape = [dims[labels.kernel_output_feature], dims[labels.kernel_input_feature]] + \
        [dims[d] for d in labels.kernel_spatial]
    dw = conv_backward_filter(x, dy, w_shape, params)
    order = [labels.kernel_output_feature, labels.kernel_input_feature] + labels.kernel_spatial
    return _array_and_scratch(inst, cast_float_result(_from_canonical(dw, order),
                                                      out_shape.dtype))
