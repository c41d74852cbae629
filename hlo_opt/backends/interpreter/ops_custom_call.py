"""custom-call: a table ``custom_call_target -> handler`` for the targets our own passes
emit; any other target is an UnsupportedError that names it.

* ``__cublas$gemm`` / ``__cublas$lt$matmul`` (GemmRewriter): in ``ops_gemm.py``.
* ``TopK`` (what XLA:CPU emits for ``jax.lax.top_k``; operand [n] or [batch, n], result
  (values [.., k], s32 indices [.., k])): the k largest in the total order with -0 < +0,
  ties by the lower index, as XLA:CPU's runtime; a comparator computing ``LT`` asks for
  the k smallest instead.
* ``__cudnn$convForward``, ``__cudnn$convBackwardInput``, ``__cudnn$convBackwardFilter``
  (GpuConvRewriter): ``window``, ``dim_labels`` and ``feature_group_count`` describe the
  *forward* convolution; forward takes (input, filter) -> output, backward-input
  (output-grad, filter) -> input-grad, backward-filter (input, output-grad) ->
  filter-grad.  The result is the tuple (value, u8[0] scratch) XLA emits (a plain array
  result is accepted too).  ``__cudnn$convBiasActivationForward`` adds the bias, side
  input and activation.  NCHW_VECT_C operands (an extra dimension the dim labels do not
  name, cudnn_vectorize_convolutions) and int8x32 filters/biases in cuDNN's reordered
  layout (``reordered_int8_nchw_vect``) are taken too.
"""
from __future__ import annotations

import json

import numpy as np

from ...errors import UnsupportedError
from ...ir.attributes import parse_string
from .heavy_common import as_result, cast_float_result, compute_dtype, unsupported
from .ops_convolution import (conv_backward_filter, conv_backward_input, conv_forward,
                              conv_params, dim_labels)
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


# ---- cuDNN convolutions -----------------------------------------------------------------
# Each operand and the result plays a role of the forward convolution the call describes:
# its input, kernel or output (see passes/gpu/_conv_util.py).  Values are computed on
# canonical arrays: input/output (N, C, spatial...), kernel (O, I, spatial...).  A
# dimension the dim labels do not name is cuDNN's NCHW_VECT_C vector: it is the minor
# part of the features (of the kernel's input features), C = C_outer * k.
CUDNN_ROLES = {
    "__cudnn$convForward": ("input", "kernel", "output"),
    "__cudnn$convBiasActivationForward": ("input", "kernel", "output"),
    "__cudnn$convBackwardInput": ("output", "kernel", "input"),
    "__cudnn$convBackwardFilter": ("input", "output", "kernel"),
}


def role_dims(labels, role):
    """(major dim, feature dim the vector dim belongs to, spatial dims) of a role."""
    if role == "input":
        return labels.input_batch, labels.input_feature, labels.input_spatial
    if role == "output":
        return labels.output_batch, labels.output_feature, labels.output_spatial
    return labels.kernel_output_feature, labels.kernel_input_feature, labels.kernel_spatial


def _canonical_order(labels, role, ndim):
    """The dims of a role's array in canonical order, the vector dim (if any) right after
    the feature dim."""
    a, c, spatial = role_dims(labels, role)
    named = {a, c, *spatial}
    vect = [d for d in range(ndim) if d not in named][:1]
    return [a, c] + vect + list(spatial), bool(vect)


def _to_canonical(arr, labels, role):
    order, vect = _canonical_order(labels, role, arr.ndim)
    out = np.transpose(arr, order)
    if vect:
        out = out.reshape((out.shape[0], out.shape[1] * out.shape[2]) + out.shape[3:])
    return out


def _canonical_dims(dims, labels, role):
    order, vect = _canonical_order(labels, role, len(dims))
    sizes = [dims[d] for d in order]
    return [sizes[0], sizes[1] * sizes[2]] + sizes[3:] if vect else sizes


def _from_canonical(arr, labels, role, dims):
    """A canonical array back in the dim order (and vector split) of ``dims``."""
    order, vect = _canonical_order(labels, role, len(dims))
    if vect:
        arr = arr.reshape((arr.shape[0], dims[order[1]], dims[order[2]]) + arr.shape[2:])
    return np.transpose(arr, [order.index(d) for d in range(len(dims))])


def _unreordered_filter(arr):
    """The canonical (O, I, H, W) filter of a filter in cuDNN's reordered int8x32 layout
    [O, I/32, H, W, 32] (cudnn_vectorize_convolutions' reshape-transpose-reshape, whose
    transposed dims are (I/32, H, W, O/8, o2, i8, o4, i4) with O = (O/8, o4, o2) and
    I = (I/32, i8, i4))."""
    o, ih, h, w = arr.shape[:4]
    t = arr.reshape(ih, h, w, o // 8, 2, 8, 4, 4).transpose(3, 6, 4, 0, 5, 7, 1, 2)
    return t.reshape(o, ih * 32, h, w)


def _unreordered_bias(arr):
    """The inverse of the int8x32 bias reordering [O/32, 4, 2, 4] -> [O/32, 2, 4, 4]."""
    n = arr.shape[0]
    return arr.reshape(n // 32, 2, 4, 4).transpose(0, 2, 1, 3).reshape(n)


def cudnn_config(inst, required: bool = True) -> dict:
    """``cudnn_conv_backend_config``; where only the reordering flag is wanted
    (``required=False``), a backend config that is not JSON counts as empty."""
    try:
        return backend_config(inst).get("cudnn_conv_backend_config", {})
    except UnsupportedError:
        if required:
            raise
        return {}


def _operand(inst, arr, labels, role, acc):
    arr = arr.astype(acc)
    if role == "kernel" and arr.ndim == 5 and \
            cudnn_config(inst, required=False).get("reordered_int8_nchw_vect", False):
        return _unreordered_filter(arr)
    return _to_canonical(arr, labels, role)


# what computes the result, by the result's role
_COMPUTE = {
    "output": lambda x, w, dims, params: conv_forward(x, w, params),
    # backward input: (output grad, filter) -> input grad
    "input": lambda dy, w, dims, params: conv_backward_input(dy, w, dims, params),
    # backward filter: (input, output grad) -> filter grad
    "kernel": lambda x, dy, dims, params: conv_backward_filter(x, dy, dims, params),
}


def _cudnn_conv(inst, args, operands: int):
    """The call's value on canonical arrays: (value, accumulation dtype, labels)."""
    if len(args) < 2 or (operands and len(args) != operands):
        raise unsupported(inst, f"{inst.custom_call_target} with {len(args)} operands")
    roles = CUDNN_ROLES[inst.custom_call_target]
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    labels = dim_labels(inst, args[0].ndim)
    params = conv_params(inst, len(labels.input_spatial))
    if params.batch_group_count != 1:
        raise unsupported(inst, "cuDNN convolution with batch_group_count > 1")
    a = _operand(inst, args[0], labels, roles[0], acc)
    b = _operand(inst, args[1], labels, roles[1], acc)
    dims = _canonical_dims(out_shape.dims, labels, roles[2])
    return _COMPUTE[roles[2]](a, b, dims, params), acc, labels


def _result(inst, value, labels):
    out_shape = _value_shape(inst)
    role = CUDNN_ROLES[inst.custom_call_target][2]
    value = _from_canonical(value, labels, role, out_shape.dims)
    return _array_and_scratch(inst, cast_float_result(value, out_shape.dtype))


@target("__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter")
def cudnn_conv(inst, args, ctx):
    value, _, labels = _cudnn_conv(inst, args, 2)
    return _result(inst, value, labels)


CUDNN_ACTIVATIONS = {
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
    the output features (what cudnn-fused-convolution-rewriter emits)."""
    out, acc, labels = _cudnn_conv(inst, args, 0)
    cfg = cudnn_config(inst)
    out = out * float(cfg.get("conv_result_scale", 1))
    if len(args) > 3:
        side = _to_canonical(args[3].astype(acc), labels, "output")
        out = out + float(cfg.get("side_input_scale", 0)) * side
    if len(args) > 2:
        bias = args[2].astype(acc)
        if cfg.get("reordered_int8_nchw_vect", False):
            bias = _unreordered_bias(bias)
        out = out + bias.reshape((1, -1) + (1,) * (out.ndim - 2))
    mode = cfg.get("activation_mode", "kNone")
    if mode not in CUDNN_ACTIVATIONS:
        raise unsupported(inst, f"convBiasActivationForward activation_mode {mode}")
    return _result(inst, np.asarray(CUDNN_ACTIVATIONS[mode](out, cfg)).astype(acc), labels)


# ---- TopK (XLA:CPU's custom call for jax.lax.top_k) -------------------------------------
@target("TopK")
def _topk(inst, args, ctx):
    from .ops_sort import top_k
    shape = inst.shape
    if (len(args) != 1 or not shape.is_tuple() or len(shape.tuple_shapes) != 2
            or args[0].ndim not in (1, 2) or shape.tuple_shapes[0].rank != args[0].ndim):
        raise unsupported(inst, "TopK takes one [n] or [batch, n] operand and returns "
                                "(values, indices) of [.., k]")
    k = shape.tuple_shapes[0].dims[-1]
    if k > args[0].shape[-1]:
        raise unsupported(inst, f"TopK with k={k} over {args[0].shape[-1]} elements")
    return top_k(inst, args[0], k, not _comparator_is_less(inst))


def _comparator_is_less(inst) -> bool:
    called = inst.called[0] if inst.called else None
    root = called.root if called is not None else None
    return bool(root is not None and root.opcode == "compare"
                and str(root.attr("direction", "")).upper() == "LT")
