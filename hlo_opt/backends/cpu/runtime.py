"""Running a linked module: one native call per run, plus the host library calls.

Arguments go in as physical (layout-ordered) contiguous arrays, constants as a pointer
table, the arena is one aligned buffer per executable.  Host library calls
(``hlo_cpu_host(step, ptrs)``) run the interpreter's handler for that instruction on
numpy views of the buffers and write its result back into the output buffers; an error
inside one is kept and raised when the native call returns.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from ...errors import HloError
from ..interpreter import HANDLERS, TOKEN, Evaluator
from ..interpreter.values import leaves as value_leaves

HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))
ENTRY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p)


def physical_order(shape) -> list[int]:
    return list(reversed(shape.effective_layout().minor_to_major))


def to_physical(a: np.ndarray, shape) -> np.ndarray:
    """``a`` (logical dims) as ``shape``'s layout lays it out in memory."""
    return Leaf(shape).to_physical(a)


def view(ptr: int, shape):
    """A numpy view (logical dims) of a buffer holding ``shape`` in its layout."""
    if not shape.is_array():
        return TOKEN
    dt = shape.dtype
    n = shape.num_elements()
    if n == 0 or not ptr:
        return np.zeros(shape.dims, dt)
    order = physical_order(shape)
    buf = (ctypes.c_char * (n * dt.itemsize)).from_address(ptr)
    phys = np.frombuffer(buf, dtype=dt).reshape([shape.dims[d] for d in order])
    if order == list(range(len(order))):
        return phys
    return phys.transpose(np.argsort(order))


class Leaf:
    """One array leaf of a parameter or of the result, its layout worked out once per
    executable (a run of a small module is mostly this bookkeeping)."""

    __slots__ = ("shape", "array", "order", "identity", "back", "dtype", "nbytes",
                 "phys_dims")

    def __init__(self, shape):
        self.shape = shape
        self.array = shape.is_array()
        if not self.array:
            return
        self.order = physical_order(shape)
        self.identity = self.order == list(range(len(self.order)))
        self.back = list(np.argsort(self.order))
        self.dtype = shape.dtype
        self.nbytes = shape.num_elements() * self.dtype.itemsize
        self.phys_dims = [shape.dims[d] for d in self.order]

    def to_physical(self, a: np.ndarray) -> np.ndarray:
        if not self.identity:
            a = a.transpose(self.order)
        return np.ascontiguousarray(a)

    def copy_out(self, ptr: int):
        """A new array (logical dims) with the buffer's contents (``view`` then a copy)."""
        if not self.array:
            return TOKEN
        if self.nbytes == 0 or not ptr:
            return np.zeros(self.shape.dims, self.dtype)
        out = np.empty(self.phys_dims, self.dtype)
        ctypes.memmove(out.ctypes.data, ptr, self.nbytes)
        return out if self.identity else out.transpose(self.back)


def nest(shape, flat: list, pos: int = 0):
    """Rebuild a (tuple) value of ``shape`` from its flat leaves."""
    if shape.is_tuple():
        out = []
        for s in shape.tuple_shapes:
            v, pos = nest(s, flat, pos)
            out.append(v)
        return tuple(out), pos
    return flat[pos], pos + 1


class HostCalls:
    """The ``hlo_cpu_host`` callback of one executable."""

    def __init__(self, steps: list):
        self.steps = steps              # [(step, plan)] by host id
        self.evaluator = Evaluator()
        self.error: BaseException | None = None
        self.calls = 0
        self.mismatches: list[str] = []   # check_steps mode
        self.fn = HOST_FN(self._call)
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value

    def _call(self, sid, ptrs):
        if self.error is not None:
            return
        try:
            self.calls += 1
            self._run(sid, ptrs)
        except BaseException as e:  # noqa: BLE001 - re-raised after the native call
            self.error = e

    def _run(self, sid, ptrs):
        check = sid >= (1 << 32)
        st, _plan = self.steps[sid & 0xFFFFFFFF]
        inst = st.instruction
        n_in = len(st.inputs)
        # the operands' own shapes: a value may alias one of another shape (a bitcast)
        shapes = [s for op in inst.operands
                  for s in (op.shape.leaves() if op.shape.is_tuple() else [op.shape])]
        flat = [view(ptrs[i], s) for i, s in enumerate(shapes)]
        args, pos = [], 0
        for op in inst.operands:
            v, pos = nest(op.shape, flat, pos)
            args.append(v)
        h = HANDLERS.get(inst.opcode)
        if h is None:
            raise HloError(f"the CPU backend cannot run %{inst.name} ({inst.opcode}) in "
                           f"computation %{inst.parent.name}: no lowering and no host "
                           "handler")
        result = self.evaluator.run_handler(h, inst, args)
        outs = value_leaves(result)
        if check:
            for j, (v, val) in enumerate(zip(st.outputs, outs)):
                if not v.shape.is_array() or v.shape.num_elements() == 0:
                    continue
                got = np.asarray(view(ptrs[n_in + j], v.shape))
                exp = np.asarray(val).reshape(v.shape.dims)
                if got.dtype.kind in "fc" or str(got.dtype) in ("bfloat16",):
                    g64, e64 = got.astype(np.float64), exp.astype(np.float64)
                    bad = ~np.isclose(g64, e64, rtol=1e-3, atol=1e-4, equal_nan=True)
                else:
                    bad = got != exp
                if np.any(bad):
                    self.mismatches.append(f"%{inst.name} ({inst.opcode}) leaf {j}: "
                                           f"{int(np.sum(bad))} of {bad.size} differ")
            return
        for j, (v, val) in enumerate(zip(st.outputs, outs)):
            if not v.shape.is_array() or v.shape.num_elements() == 0:
                continue
            dst = view(ptrs[n_in + j], v.shape)
            np.copyto(dst, np.asarray(val, dtype=v.shape.dtype).reshape(v.shape.dims))


class Runner:
    def __init__(self, linked, mplan, host: HostCalls, blas_threads: int = 0,
                 threads: int = 1):
        self.linked = linked
        if linked.threads:
            ctypes.c_int64.from_address(linked.threads).value = max(1, int(threads))
        self.entry = ENTRY_FN(linked.entry)
        self.host = host
        plan = mplan.entry_plan
        asg = mplan.assignment
        self.param_leaves = [[Leaf(v.shape) for v in leaves] for leaves in plan.params]
        root = plan.computation.root.shape  # not the values' (a root may be a bitcast)
        self.root_leaves = [Leaf(s) for s in (root.leaves() if root.is_tuple() else [root])]
        self.consts = []
        for c in asg.constants:
            lit = c.literal
            arr = np.asarray(lit.array).astype(c.shape.dtype).reshape(c.shape.dims)
            self.consts.append(to_physical(arr, c.shape))
        self.const_ptrs = (ctypes.c_void_p * max(len(self.consts), 1))(
            *[a.ctypes.data for a in self.consts])
        self.arena = np.zeros(asg.arena_size + 64, dtype=np.uint8)
        base = self.arena.ctypes.data
        self.arena_ptr = base + (-base) % 64
        self.lock = threading.Lock()
        from .blas import BlasThreads
        self.blas = BlasThreads(blas_threads)

    def run(self, args: list) -> list:
        flat = []
        for a, layouts in zip(args, self.param_leaves):
            leaves = value_leaves(a) if isinstance(a, tuple) else [a]
            for v, lf in zip(leaves, layouts):
                flat.append(lf.to_physical(np.asarray(v)) if lf.array else None)
        ptrs = (ctypes.c_void_p * max(len(flat), 1))(
            *[(x.ctypes.data if x is not None and x.size else 0) for x in flat])
        n_out = len(self.root_leaves)
        out = (ctypes.c_void_p * max(n_out, 1))()
        with self.lock:
            self.host.error = None
            with self.blas:
                self.entry(ctypes.addressof(ptrs), ctypes.addressof(out), self.arena_ptr,
                           ctypes.addressof(self.const_ptrs))
            err = self.host.error
            if err is not None:
                self.host.error = None
                if isinstance(err, HloError):
                    raise err
                raise HloError(f"CPU backend host call failed: {type(err).__name__}: "
                               f"{err}") from err
            results = [lf.copy_out(out[i] or 0) for i, lf in enumerate(self.root_leaves)]
        del flat
        return results
