"""Candidates that run on the host with numpy: the gemm and convolution custom calls
the ``gpu`` pipeline emits, computed by the interpreter's handlers on the bytes of the
candidate buffers.  They let every level, check and cache be exercised without a GPU,
and give host backends something to tune.

Gemm candidates (``gemm_backend_config.selected_algorithm`` = the index):
  0  the interpreter's cuBLAS-semantics gemm (the heuristic default)
  1  split-K by 2, 2  split-K by 4: the contracting dimension cut into slices whose
     products are summed (only without a matrix bias or epilogue, where that is exact)
Convolution candidates: 0, the interpreter's cuDNN-semantics convolution.
"""
from __future__ import annotations

import platform

import numpy as np

from .buffers import array_shapes, from_physical, to_physical
from .candidates import CandidateError, measure_wall
from .kinds import default_kind_of
from .redzone import HostMemory
from .results import CandidateKey


class HostCandidate:
    """Reads the operand buffers, computes with ``compute(args)``, writes the outputs."""

    def __init__(self, inst, key: CandidateKey, name: str, compute, scratch_bytes: int = 0):
        self.inst = inst
        self.key = key
        self.name = name
        self.compute = compute
        self.scratch_bytes = scratch_bytes

    def run(self, inputs, outputs, scratch) -> None:
        args = [from_physical(op.shape, buf.read()) for op, buf in zip(self.inst.operands, inputs)]
        try:
            value = self.compute(args)
        except (ValueError, TypeError, ArithmeticError) as e:
            raise CandidateError(str(e)) from None
        values = value if isinstance(value, tuple) else (value,)
        for shape, buf, v in zip(array_shapes(self.inst.shape), outputs, values):
            if shape.byte_size():
                buf.write(to_physical(shape, v))


def _interpreter_handler(target: str):
    from hlo_opt.backends.interpreter import ops_custom_call, ops_gemm  # noqa: F401 (registers)
    from hlo_opt.backends.interpreter.ops_custom_call import TARGETS
    return TARGETS[target]


def _split_k(inst, handler, parts: int):
    """Sum of the gemm over ``parts`` slices of the contracting dimension."""
    from hlo_opt.backends.interpreter.ops_custom_call import backend_config
    cfg = backend_config(inst).get("gemm_backend_config", {})
    dnums = cfg.get("dot_dimension_numbers", {})
    lc = [int(d) for d in dnums.get("lhs_contracting_dimensions", [])]
    rc = [int(d) for d in dnums.get("rhs_contracting_dimensions", [])]
    if (len(inst.operands) != 2 or cfg.get("epilogue", "DEFAULT") != "DEFAULT"
            or float(cfg.get("beta", 0.0)) != 0 or len(lc) != 1 or len(rc) != 1):
        return None
    k = inst.operands[0].shape.dims[lc[0]]
    if k < parts:
        return None
    bounds = np.linspace(0, k, parts + 1).astype(int)

    def compute(args):
        lhs, rhs = args
        total = None
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            part = handler(inst, [np.take(lhs, range(lo, hi), axis=lc[0]),
                                  np.take(rhs, range(lo, hi), axis=rc[0])], None)
            value = part[0] if isinstance(part, tuple) else part
            total = value.astype(np.float64 if value.dtype == np.float64 else np.float32) \
                if total is None else total + value
        out = total.astype(inst.shape.tuple_shapes[0].dtype if inst.shape.is_tuple()
                           else inst.shape.dtype)
        if inst.shape.is_tuple():
            rest = tuple(np.zeros(s.dims, s.dtype) for s in inst.shape.tuple_shapes[1:])
            return (out,) + rest
        return out
    return compute


class HostProvider:
    """The host (numpy) candidate provider.  ``measure`` defaults to wall-clock timing;
    pass another (e.g. a fixed cost per candidate) for deterministic choices."""

    name = "host"

    def __init__(self, measure=None):
        self.memory = HostMemory()
        self.measure = measure or measure_wall

    def device_key(self) -> str:
        return f"Host: {platform.machine() or 'cpu'}, numpy {np.__version__}"

    def kind_of(self, inst) -> str | None:
        return default_kind_of(inst)

    def candidates(self, inst) -> list:
        kind = self.kind_of(inst)
        if kind is None:
            return []
        handler = _interpreter_handler(inst.custom_call_target)
        full = lambda args: handler(inst, args, None)  # noqa: E731
        if kind == "conv":
            return [HostCandidate(inst, CandidateKey.cudnn(0), "host-conv", full)]
        out = [HostCandidate(inst, CandidateKey.gemm(0), "host-gemm", full)]
        for i, parts in enumerate((2, 4), start=1):
            compute = _split_k(inst, handler, parts)
            if compute is not None:
                out.append(HostCandidate(inst, CandidateKey.gemm(i),
                                         f"host-gemm-split-k-{parts}", compute))
        return out
