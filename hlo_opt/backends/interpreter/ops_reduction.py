"""reduce and map.

reduce has three paths, chosen once per instruction:

1. fast: the reducer is one add/multiply/maximum/minimum/and/or/xor of its two
   parameters -> numpy's ``ufunc.reduce`` over the dimensions, with the init value
   folded in as ``op(init, result)`` (floats narrower than f32 accumulate in f32);
2. batched: the reducer is made only of elementwise ops (variadic argmax/argmin
   reducers, compare+select chains) -> evaluated on whole arrays in a pairwise tree over
   the reduced elements, log2(n) calls; element order is kept (left operand = lower
   indices), so associative reducers give XLA's result;
3. scalar: anything else -> the reducer is called once per element, in index order.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from .registry import register, register_fast
from .values import compute_dtype, from_compute, is_low_precision_float

_FAST_REDUCERS = {
    "add": (np.add, np.add), "multiply": (np.multiply, np.multiply),
    "maximum": (np.maximum, np.maximum), "minimum": (np.minimum, np.minimum),
    "and": (np.bitwise_and, np.logical_and), "or": (np.bitwise_or, np.logical_or),
    "xor": (np.bitwise_xor, np.logical_xor),
}


def simple_reducer(comp) -> str | None:
    """The opcode when ``comp`` is ``ROOT op(p0, p1)`` over its two scalar parameters."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root.opcode not in _FAST_REDUCERS or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    if not all(p.shape.is_scalar() for p in params):
        return None
    if params[0].shape.element_type != params[1].shape.element_type \
            or root.shape.element_type != params[0].shape.element_type:
        return None
    et = root.shape.element_type
    if root.opcode in ("and", "or", "xor") and (et.startswith(("f", "c", "bf"))):
        return None
    return root.opcode


class _Reduce:
    """Per-instruction state of a reduce (the chosen path, axes, shapes)."""

    def __init__(self, inst):
        self.inst = inst
        n = len(inst.operands) // 2
        if n == 0 or len(inst.operands) != 2 * n:
            raise UnsupportedError("reduce needs N inputs and N init values")
        self.n = n
        self.dims = tuple(sorted(inst.dimensions))
        in_shape = inst.operands[0].shape
        self.in_dims = in_shape.dims
        self.kept = tuple(d for i, d in enumerate(self.in_dims) if i not in self.dims)
        self.count = 1
        for d in self.dims:
            self.count *= self.in_dims[d]
        self.out_shapes = inst.shape.tuple_shapes if inst.shape.is_tuple() else (inst.shape,)
        self.fast = simple_reducer(inst.to_apply) if n == 1 else None
        # a reducer may return a tuple even for one input (a 1-tuple)
        self.tupled = inst.to_apply.root.shape.is_tuple()

    def run(self, args, ctx):
        xs, inits = args[:self.n], args[self.n:]
        if self.count == 0:
            return self._pack([np.broadcast_to(np.asarray(i, dtype=s.dtype), self.kept)
                               for i, s in zip(inits, self.out_shapes)])
        if self.fast is not None:
            return self._fast(xs[0], inits[0])
        comp = self.inst.to_apply
        if ctx.batchable(comp):
            return self._pack(self._tree(xs, inits, ctx))
        return self._pack(self._scalar(xs, inits, ctx))

    def _pack(self, results):
        if self.inst.shape.is_tuple():
            return tuple(results)
        return results[0]

    def _fast(self, x, init):
        et = self.out_shapes[0].element_type
        bitwise, logical = _FAST_REDUCERS[self.fast]
        uf = logical if et == "pred" and self.fast in ("and", "or", "xor") else bitwise
        cdt = compute_dtype(et)
        cx = x if x.dtype == cdt else np.asarray(x).astype(cdt)
        ci = init if np.asarray(init).dtype == cdt else np.asarray(init).astype(cdt)
        if et == "pred":
            r = uf.reduce(cx, axis=self.dims)
        else:
            r = uf.reduce(cx, axis=self.dims, dtype=cdt)
        r = uf(ci, r)
        if is_low_precision_float(et) or r.dtype != self.out_shapes[0].dtype:
            r = from_compute(np.asarray(r), et)
        return r

    def _flatten(self, x):
        """[reduced elements (row-major), kept dims...]"""
        moved = np.moveaxis(x, self.dims, tuple(range(len(self.dims))))
        return np.reshape(moved, (self.count,) + self.kept)

    def _tree(self, xs, inits, ctx):
        comp = self.inst.to_apply
        vals = [self._flatten(x) for x in xs]
        m = self.count
        while m > 1:
            h = m // 2
            left = [v[0:2 * h:2] for v in vals]
            right = [v[1:2 * h:2] for v in vals]
            r = ctx.call_batched(comp, left + right)
            r = list(r) if self.tupled else [r]
            r = [np.broadcast_to(a, (h,) + self.kept) for a in r]
            if m % 2:
                r = [np.concatenate([a, v[m - 1:m]]) for a, v in zip(r, vals)]
            vals = r
            m = h + m % 2
        final = ctx.call_batched(comp, list(inits) + [v[0] for v in vals])
        final = list(final) if self.tupled else [final]
        return [np.array(np.broadcast_to(a, self.kept), dtype=s.dtype)
                for a, s in zip(final, self.out_shapes)]

    def _scalar(self, xs, inits, ctx):
        comp = self.inst.to_apply
        vals = [self._flatten(x) for x in xs]
        outs = [np.empty(self.kept, dtype=s.dtype) for s in self.out_shapes]
        for idx in np.ndindex(*self.kept):
            acc = [np.asarray(i) for i in inits]
            for j in range(self.count):
                r = ctx.call(comp, acc + [v[(j,) + idx] for v in vals])
                acc = list(r) if self.tupled else [r]
            for o, a in zip(outs, acc):
                o[idx] = a
        return outs


@register_fast("reduce", with_ctx=True)
def _make_reduce(inst, ctx):
    state = _Reduce(inst)
    return lambda *args: state.run(args, ctx)


@register("map")
def _map(inst, args, ctx):
    comp = inst.to_apply
    out = inst.shape
    if ctx.batchable(comp):
        r = ctx.call_batched(comp, list(args))
        return np.array(np.broadcast_to(r, out.dims), dtype=out.dtype)
    result = np.empty(out.dims, dtype=out.dtype)
    for idx in np.ndindex(*out.dims):
        result[idx] = ctx.call(comp, [a[idx] for a in args])
    return result
