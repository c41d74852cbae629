"""``__cublas$gemm`` / ``__cublas$lt$matmul``: the cuBLAS calls GemmRewriter emits, run
with the semantics of the instructions they replaced.

``backend_config`` holds ``gemm_backend_config`` (older dumps: the fields bare) with
``alpha_real``/``alpha_imag``, ``beta``, ``dot_dimension_numbers`` and ``epilogue``.
Operands: lhs, rhs, then the addend C when ``beta != 0``, then the bias vector when the
epilogue has BIAS.  The value is::

    pre = alpha * dot(lhs, rhs) + beta * C [+ bias]
    out = activation(pre)      RELU: max(pre, 0); GELU: XLA's tanh approximation

* dot dimension numbers may give batch dimensions on one side only (what
  gemm-broadcast-folding-rewriter leaves after folding a broadcast operand): the other
  operand is the same matrix for every batch.
* the bias vector runs along the output's most minor *physical* dimensions (the
  rewriter checks the broadcast it folds has that form): bias dim ``minor_to_major[i]``
  goes with output dim ``minor_to_major[i]``.  A bias shorter than the output along those
  dimensions (the output was padded by cublas-pad-for-gemms and is sliced afterwards)
  adds zero to the padded part.
* the ``*_AUX`` epilogues (GELU_AUX, BIAS_GELU_AUX) also return ``pre`` as the second
  tuple element.  Trailing tuple elements after the value (and the auxiliary output) are
  workspace buffers, returned zero-filled.
"""
from __future__ import annotations

import numpy as np

from .heavy_common import as_result, cast_float_result, compute_dtype, unsupported
from .ops_custom_call import backend_config, target

EPILOGUES = frozenset({"DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "BIAS_GELU",
                       "GELU_AUX", "BIAS_GELU_AUX"})
AUX_EPILOGUES = frozenset({"GELU_AUX", "BIAS_GELU_AUX"})
_GELU_C = np.sqrt(2.0 / np.pi)


def _ints(values):
    return [int(v) for v in values or []]


def _with_batch(x, contracting, batch, nbatch_other, batch_shape):
    """Give an operand without batch dimensions the other side's leading batch dims."""
    if batch or not nbatch_other:
        return x, contracting, batch
    x = np.broadcast_to(x, tuple(batch_shape) + x.shape)
    return x, [c + nbatch_other for c in contracting], list(range(nbatch_other))


def dot_general(lhs, rhs, lc, rc, lb, rb):
    """XLA dot: result dims = batch, lhs free, rhs free.  Batch dims on one side only
    broadcast the other operand over them."""
    if len(lb) != len(rb):
        if lb and rb:
            raise ValueError("batch dimensions on both sides must match in number")
        if lb:
            rhs, rc, rb = _with_batch(rhs, rc, rb, len(lb), [lhs.shape[d] for d in lb])
        else:
            lhs, lc, lb = _with_batch(lhs, lc, lb, len(rb), [rhs.shape[d] for d in rb])
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


def _m2m(shape) -> tuple:
    return shape.effective_layout().minor_to_major


def bias_along_minor_dims(bias: np.ndarray, bias_shape, out_shape) -> np.ndarray:
    """``bias`` placed along the most minor physical dims of ``out_shape`` (bias dim
    ``m2m_b[i]`` <-> output dim ``m2m_o[i]``), zero-padded where the output is larger,
    with size-1 dims elsewhere: ready to add to the output."""
    r = bias.ndim
    out_m2m, bias_m2m = _m2m(out_shape), _m2m(bias_shape)
    pairs = sorted((out_m2m[i], bias_m2m[i]) for i in range(r))  # by output dim
    b = np.transpose(bias, [bd for _, bd in pairs])
    pad = [(0, out_shape.dims[od] - b.shape[j]) for j, (od, _) in enumerate(pairs)]
    if any(hi < 0 for _, hi in pad):
        raise ValueError(f"bias {bias.shape} is larger than the output {out_shape.dims}")
    if any(hi for _, hi in pad):
        b = np.pad(b, pad)
    full = [1] * len(out_shape.dims)
    for j, (od, _) in enumerate(pairs):
        full[od] = b.shape[j]
    return b.reshape(full)


def _results(inst, value, aux):
    """The call's result: the value, the auxiliary output if any, zero workspaces."""
    if not inst.shape.is_tuple():
        return as_result(value, inst.shape)
    shapes = inst.shape.tuple_shapes
    out = [as_result(value, shapes[0])]
    if aux is not None:
        out.append(as_result(aux, shapes[1]))
    out.extend(np.zeros(s.dims, dtype=s.dtype) for s in shapes[len(out):])
    return tuple(out)


@target("__cublas$gemm", "__cublas$lt$matmul")
def cublas_gemm(inst, args, ctx):
    raw = backend_config(inst)
    # current XLA wraps the fields in "gemm_backend_config"; older dumps have them bare
    cfg = raw.get("gemm_backend_config", raw if "dot_dimension_numbers" in raw else None)
    if cfg is None:
        raise unsupported(inst, "backend_config has no gemm_backend_config")
    dnums = cfg.get("dot_dimension_numbers", {})
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in EPILOGUES:
        raise unsupported(inst, f"gemm epilogue {epilogue}")
    has_aux = epilogue in AUX_EPILOGUES
    shapes = inst.shape.tuple_shapes if inst.shape.is_tuple() else (inst.shape,)
    if has_aux and len(shapes) < 2:
        raise unsupported(inst, f"epilogue {epilogue} needs a tuple (value, aux, ...) result")
    out_shape = shapes[0]
    alpha = complex(float(cfg.get("alpha_real", 1.0)), float(cfg.get("alpha_imag", 0.0)))
    beta = float(cfg.get("beta", 0.0))
    acc = compute_dtype(out_shape.dtype)
    expected = 2 + (beta != 0) + ("BIAS" in epilogue)
    if len(args) != expected:
        raise unsupported(inst, f"{len(args)} operands, but beta={beta} and epilogue "
                                f"{epilogue} need {expected}")
    lhs, rhs = args[0].astype(acc), args[1].astype(acc)
    try:
        out = dot_general(lhs, rhs, _ints(dnums.get("lhs_contracting_dimensions")),
                          _ints(dnums.get("rhs_contracting_dimensions")),
                          _ints(dnums.get("lhs_batch_dimensions")),
                          _ints(dnums.get("rhs_batch_dimensions")))
    except ValueError as e:
        raise unsupported(inst, f"dot dimension numbers: {e}") from None
    if alpha != 1:
        out = out * (alpha if np.issubdtype(acc, np.complexfloating) else alpha.real)
    pos = 2
    if beta != 0:
        out = out + beta * args[pos].astype(acc).reshape(out.shape)
        pos += 1
    if "BIAS" in epilogue:
        try:
            out = out + bias_along_minor_dims(args[pos].astype(acc),
                                              inst.operands[pos].shape, out_shape)
        except ValueError as e:
            raise unsupported(inst, str(e)) from None
    pre = out
    if "RELU" in epilogue:
        out = np.maximum(out, 0)
    if "GELU" in epilogue:
        out = 0.5 * out * (1 + np.tanh(_GELU_C * (out + 0.044715 * out ** 3)))
    value = cast_float_result(np.asarray(out).astype(acc), out_shape.dtype)
    aux = cast_float_result(np.asarray(pre).astype(acc), shapes[1].dtype) if has_aux else None
    return _results(inst, value, aux)
