"""A stopgap: the interpreter handler for ``__cudnn$convBiasActivationForward`` (what
``cudnn-fused-convolution-rewriter`` emits), installed into the interpreter's custom-call
table only when the table lacks it.  The same function belongs in
``hlo_opt/backends/interpreter/ops_custom_call.py`` (the interpreter engineer's file);
once it is there, :func:`install` does nothing."""
from __future__ import annotations

import numpy as np

TARGET = "__cudnn$convBiasActivationForward"


def cudnn_conv_bias_activation(inst, args, ctx):
    from hlo_opt.backends.interpreter.heavy_common import cast_float_result, compute_dtype
    from hlo_opt.backends.interpreter.ops_convolution import (conv_forward,
                                                              from_canonical_output,
                                                              to_canonical)
    from hlo_opt.backends.interpreter.ops_custom_call import (_array_and_scratch, _conv_setup,
                                                              _value_shape, backend_config)
    out_shape = _value_shape(inst)
    acc = compute_dtype(out_shape.dtype)
    labels, params = _conv_setup(inst, args[0].ndim)
    x, w = to_canonical(args[0].astype(acc), args[1].astype(acc), labels)
    out = from_canonical_output(conv_forward(x, w, params), labels)
    cfg = backend_config(inst).get("cudnn_conv_backend_config", {})
    out = out * float(cfg.get("conv_result_scale", 1))
    if len(args) > 3:
        out = out + float(cfg.get("side_input_scale", 0)) * args[3].astype(acc)
    if len(args) > 2:
        shape = [1] * out.ndim
        shape[labels.output_feature] = -1
        out = out + args[2].astype(acc).reshape(shape)
    mode = cfg.get("activation_mode", "kNone")
    if mode == "kRelu":
        out = np.maximum(out, 0)
    elif mode == "kRelu6":
        out = np.clip(out, 0, 6)
    elif mode == "kElu":
        out = np.where(out > 0, out, np.expm1(out))
    elif mode == "kLeakyRelu":
        out = np.where(out > 0, out, float(cfg.get("leakyrelu_alpha", 0)) * out)
    return _array_and_scratch(inst, cast_float_result(np.asarray(out).astype(acc),
                                                      out_shape.dtype))


def install() -> bool:
    """Register the handler if the interpreter lacks it; True when installed here."""
    from hlo_opt.backends.interpreter import ops_custom_call
    if TARGET in ops_custom_call.TARGETS:
        return False
    ops_custom_call.TARGETS[TARGET] = cudnn_conv_bias_activation
    return True
