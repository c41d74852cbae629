"""Per-opcode value-at-index rules (XLA's ``ElementalIrEmitter``), as one table.

``ElementalEmitter(inputs).value(inst, idx)`` is the :class:`Expr` of ``inst``'s element
at multi-index ``idx`` (a tuple of ``s64`` index expressions).  Instructions listed in
``inputs`` (``{(inst, leaf): input_number}``) are read from kernel input buffers with a
layout-aware ``load``; everything else is computed by the opcode's row in ``RULES``.
Rules never look at a backend: the renderers (LLVM IR for ``cpu``, CUDA C++ for
``cuda``) give meaning to the value ops, which keep HLO's spellings (``add``,
``compare`` with ``attr`` = direction/type, ``convert`` whose source type is the
argument's dtype, ``select``, ``clamp``, ...).

An opcode without a row (``dot``, ``sort``, ``scatter``, ``fft``, custom
calls, RNG, collectives ...) raises :class:`ElementalUnsupported`; the planner turns
such instructions into library calls instead of loop kernels.

Index safety: branches of ``select`` are both evaluated, so every load that a
``select`` may discard (concatenate, pad, reduce-window padding) has its index clamped
into the operand's range first.
"""
from __future__ import annotations

from ..ir.opcodes import ELEMENTWISE
from . import index as ix
from .expr import Expr, ReduceSpec, const, load, var

S64 = "s64"


class ElementalUnsupported(Exception):
    """No elemental rule for this instruction (the planner falls back to a library
    call); carries the instruction."""

    def __init__(self, inst, why: str):
        super().__init__(f"%{inst.name} ({inst.opcode}): {why}")
        self.instruction = inst


def _scalar_const(inst) -> Expr | None:
    if inst.opcode != "constant" or not inst.shape.is_array() or inst.shape.dims:
        return None
    lit = inst.literal
    if lit.elided:
        return None
    v = lit.array.reshape(()).item()
    if isinstance(v, complex):
        return None
    return const(v, inst.shape.element_type)


class ElementalEmitter:
    """Value-at-index for the instructions of one kernel."""

    def __init__(self, inputs: dict):
        self.inputs = inputs          # (inst, leaf) -> input number
        self._memo: dict = {}
        self._counter = 0

    def fresh(self, stem: str, trip: int) -> Expr:
        self._counter += 1
        return ix.loop_var(f"{stem}{self._counter}", trip)

    def value(self, inst, idx: tuple, leaf: int = 0) -> Expr:
        key = (inst, leaf, idx)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        n = self.inputs.get((inst, leaf))
        if n is not None:
            shape = inst.shape.leaves()[leaf] if inst.shape.is_tuple() else inst.shape
            e = load(n, ix.linear_index(shape, idx), shape.element_type)
        else:
            rule = RULES.get(inst.opcode)
            if rule is None:
                if inst.opcode in ELEMENTWISE:
                    rule = _elementwise
                else:
                    raise ElementalUnsupported(inst, "no elemental rule")
            e = rule(self, inst, idx, leaf)
        self._memo[key] = e
        return e

    def bind(self, inst, idx: tuple, value: Expr, leaf: int = 0) -> None:
        """Let ``inst``'s element at ``idx`` be ``value`` (a value the kernel computes
        itself, e.g. a gemm's accumulator, seen by the instructions that use it)."""
        self._memo[(inst, leaf, idx)] = value

    def operand(self, inst, i: int, idx: tuple) -> Expr:
        return self.value(inst.operands[i], idx)


# ---- rules -------------------------------------------------------------------------------
_ELEMENTWISE_ATTRS = {"compare": ("direction", "type")}


def _elementwise(em, inst, idx, leaf):
    et = inst.shape.element_type
    args = tuple(em.operand(inst, i, idx) for i in range(len(inst.operands)))
    attr = None
    if inst.opcode == "compare":
        attr = (inst.attrs.get("direction", "").strip(), inst.attrs.get("type", "").strip())
    elif inst.opcode == "reduce-precision":
        attr = (inst.attr("exponent_bits"), inst.attr("mantissa_bits"))
    if inst.opcode in ("rng", "stochastic-convert"):
        raise ElementalUnsupported(inst, "not elemental")
    return Expr(inst.opcode, et, args, attr)


def _constant(em, inst, idx, leaf):
    e = _scalar_const(inst)
    if e is None:
        raise ElementalUnsupported(inst, "non-scalar constant must be a kernel input")
    return e


def _broadcast(em, inst, idx, leaf):
    dims = inst.dimensions
    return em.operand(inst, 0, tuple(idx[d] for d in dims))


def _reshape(em, inst, idx, leaf):
    op = inst.operands[0]
    return em.value(op, ix.reshape_index(inst.shape.dims, op.shape.dims, idx))


def _bitcast(em, inst, idx, leaf):
    op = inst.operands[0]
    if op.shape.element_type != inst.shape.element_type:
        raise ElementalUnsupported(inst, "bitcast changing the element type")
    # physical offset of the output element, re-read in the operand's physical order
    lin = ix.linear_index(inst.shape, idx)
    m2m = op.shape.effective_layout().minor_to_major
    strides = ix.physical_strides(op.shape)
    out = [None] * len(op.shape.dims)
    for d in m2m:
        out[d] = ix.rem(ix.div(lin, strides[d]), op.shape.dims[d])
    return em.value(op, tuple(out))


def _copy(em, inst, idx, leaf):
    return em.operand(inst, 0, idx)


def _transpose(em, inst, idx, leaf):
    perm = inst.dimensions
    src = [None] * len(perm)
    for i, p in enumerate(perm):
        src[p] = idx[i]
    return em.operand(inst, 0, tuple(src))


def _slice(em, inst, idx, leaf):
    spec = inst.attr("slice")
    src = tuple(ix.add(ix.mul(i, ix.c(st)), ix.c(s0))
                for i, (s0, _, st) in zip(idx, spec.dims))
    return em.operand(inst, 0, src)


def _iota(em, inst, idx, leaf):
    d = inst.attr("iota_dimension", 0)
    return Expr("convert", inst.shape.element_type, (idx[d],))


def _reverse(em, inst, idx, leaf):
    dims = set(inst.dimensions)
    n = inst.shape.dims
    src = tuple(ix.add(ix.c(n[d] - 1), ix.mul(i, ix.c(-1))) if d in dims else i
                for d, i in enumerate(idx))
    return em.operand(inst, 0, src)


def _lt(a, b):
    return Expr("compare", "pred", (a, b), ("LT", ""))


def _ge(a, b):
    return Expr("compare", "pred", (a, b), ("GE", ""))


def _and(a, b):
    if a is None:
        return b
    return Expr("and", "pred", (a, b))


def _select(p, a, b, et):
    if p is None:
        return a
    return Expr("select", et, (p, a, b))


def _concatenate(em, inst, idx, leaf):
    d = inst.dimensions[0]
    et = inst.shape.element_type
    offs = []
    o = 0
    for op in inst.operands:
        offs.append(o)
        o += op.shape.dims[d]
    out = None
    for k in range(len(inst.operands) - 1, -1, -1):
        size = inst.operands[k].shape.dims[d]
        j = ix.clamp(ix.add(idx[d], ix.c(-offs[k])), 0, max(size - 1, 0))
        v = em.operand(inst, k, idx[:d] + (j,) + idx[d + 1:])
        if out is None:
            out = v
        else:
            out = _select(_lt(idx[d], ix.c(offs[k] + size)), v, out, et)
    return out


def _pad(em, inst, idx, leaf):
    cfg = inst.attr("padding").dims
    op = inst.operands[0]
    et = inst.shape.element_type
    cond = None
    src = []
    for d, (lo, _hi, interior) in enumerate(cfg):
        j = ix.add(idx[d], ix.c(-lo))
        n = op.shape.dims[d]
        if lo == 0 and interior == 0 and cfg[d][1] >= 0:
            cond = _and(cond, _lt(j, ix.c(n))) if cfg[d][1] > 0 else cond
            src.append(ix.clamp(j, 0, max(n - 1, 0)) if cfg[d][1] > 0 else j)
            continue
        step = interior + 1
        # j must be >= 0, a multiple of step, and j/step < n
        jj = ix.add(j, ix.c(step * 0))
        cond = _and(cond, _ge(jj, ix.c(0)))
        cond = _and(cond, _lt(jj, ix.c((n - 1) * step + 1)))
        if step > 1:
            cond = _and(cond, Expr("compare", "pred",
                                   (ix.rem(ix.clamp(jj, 0, (n - 1) * step), step), ix.c(0)),
                                   ("EQ", "")))
        src.append(ix.clamp(ix.div(ix.clamp(jj, 0, max((n - 1) * step, 0)), step),
                            0, max(n - 1, 0)))
    v = em.value(op, tuple(src))
    return _select(cond, v, em.operand(inst, 1, ()), et)


def _index_scalar(em, inst, i) -> Expr:
    e = em.operand(inst, i, ())
    return e if e.dtype == S64 else Expr("convert", S64, (e,))


def _dynamic_slice(em, inst, idx, leaf):
    op = inst.operands[0]
    sizes = inst.attr("dynamic_slice_sizes")
    src = []
    for d, i in enumerate(idx):
        start = Expr("clamp", S64, (ix.c(0), _index_scalar(em, inst, 1 + d),
                                    ix.c(op.shape.dims[d] - sizes[d])))
        src.append(ix.add(i, start))
    return em.value(op, tuple(src))


def _dynamic_update_slice(em, inst, idx, leaf):
    op, upd = inst.operands[0], inst.operands[1]
    et = inst.shape.element_type
    cond = None
    src = []
    for d, i in enumerate(idx):
        start = Expr("clamp", S64, (ix.c(0), _index_scalar(em, inst, 2 + d),
                                    ix.c(op.shape.dims[d] - upd.shape.dims[d])))
        j = ix.add(i, Expr("multiply", S64, (start, ix.c(-1))))
        cond = _and(cond, _and(_ge(j, ix.c(0)), _lt(j, ix.c(upd.shape.dims[d]))))
        src.append(Expr("clamp", S64, (ix.c(0), j, ix.c(max(upd.shape.dims[d] - 1, 0)))))
    return _select(cond, em.value(upd, tuple(src)), em.operand(inst, 0, idx), et)


def _get_tuple_element(em, inst, idx, leaf):
    op = inst.operands[0]
    i = inst.attr("index")
    if op.opcode == "tuple":
        return em.value(op.operands[i], idx)
    if not all(not s.is_tuple() for s in op.shape.tuple_shapes):
        raise ElementalUnsupported(inst, "nested tuples")
    return em.value(op, idx, leaf=i)


def _reducer_exprs(em, comp, n, dtypes):
    """The combiner of a reduce-like op as expressions over acc<i>/x<i> vars."""
    accs = tuple(f"acc{k}" for k in range(n))
    xs = tuple(f"x{k}" for k in range(n))
    outs = computation_exprs(comp, [(a, dt) for a, dt in zip(accs, dtypes)]
                             + [(x, dt) for x, dt in zip(xs, dtypes)])
    return outs, accs, xs


def computation_exprs(comp, params) -> tuple:
    """The results of a scalar computation (a reducer, a sort comparator) as expressions
    over vars: ``params[k]`` is the ``(name, dtype)`` of parameter number ``k``."""
    by_number = {p.parameter_number: p for p in comp.parameters}
    sub = ElementalEmitter({})
    for k, (name, dtype) in enumerate(params):
        sub._memo[(by_number[k], 0, ())] = var(name, dtype)
    root = comp.root
    if root.opcode == "tuple":
        return tuple(sub.value(r, ()) for r in root.operands)
    return (sub.value(root, ()),)


def _reduce(em, inst, idx, leaf):
    n = len(inst.operands) // 2
    ins, inits = inst.operands[:n], inst.operands[n:]
    rdims = set(inst.dimensions)
    shape = ins[0].shape
    loop = []
    full = []
    it = iter(idx)
    # iterate reduced dims in physical order, minor-most innermost
    phys = list(reversed(shape.effective_layout().minor_to_major))
    lvars = {}
    for d in phys:
        if d in rdims:
            lvars[d] = em.fresh("r", shape.dims[d])
    for d in range(shape.rank):
        full.append(lvars[d] if d in rdims else next(it))
    for d in phys:
        if d in rdims and lvars[d].op == "var":
            loop.append((lvars[d].attr[0], shape.dims[d]))
    full = tuple(full)
    dtypes = [op.shape.element_type for op in ins]
    combiner, accs, xs = _reducer_exprs(em, inst.to_apply, n, dtypes)
    values = tuple(em.value(op, full) for op in ins)
    init = tuple(em.value(op, ()) for op in inits)
    spec = ReduceSpec(tuple(loop), values, combiner, accs, xs, leaf, full)
    return Expr("reduce", dtypes[leaf], init, spec)


def _reduce_window(em, inst, idx, leaf):
    n = len(inst.operands) // 2
    ins, inits = inst.operands[:n], inst.operands[n:]
    win = inst.attr("window")
    shape = ins[0].shape
    dims = win.dims if win is not None else []
    loop, full, conds = [], [], None
    init = tuple(em.value(op, ()) for op in inits)
    for d in range(shape.rank):
        w = dims[d] if d < len(dims) else None
        size = w.size if w else 1
        stride = w.stride if w else 1
        pad_lo = w.padding_low if w else 0
        wdil = w.window_dilation if w else 1
        bdil = w.base_dilation if w else 1
        if w is not None and getattr(w, "window_reversal", False):
            raise ElementalUnsupported(inst, "window reversal")
        v = em.fresh("w", size)
        if size > 1:
            loop.append((v.attr[0], size))
        else:
            v = ix.c(0)
        pos = ix.add(ix.add(ix.mul(idx[d], ix.c(stride)), ix.mul(v, ix.c(wdil))), ix.c(-pad_lo))
        extent = (shape.dims[d] - 1) * bdil + 1
        b = ix.bounds(pos)
        if b is None or b[0] < 0 or b[1] >= extent:
            conds = _and(conds, _and(_ge(pos, ix.c(0)), _lt(pos, ix.c(extent))))
            pos = ix.clamp(pos, 0, extent - 1)
        if bdil > 1:
            conds = _and(conds, Expr("compare", "pred", (ix.rem(pos, bdil), ix.c(0)),
                                     ("EQ", "")))
            pos = ix.div(pos, bdil)
        full.append(pos)
    full = tuple(full)
    dtypes = [op.shape.element_type for op in ins]
    combiner, accs, xs = _reducer_exprs(em, inst.to_apply, n, dtypes)
    values = tuple(_select(conds, em.value(op, full), init[k], dtypes[k])
                   for k, op in enumerate(ins))
    spec = ReduceSpec(tuple(loop), values, combiner, accs, xs, leaf)
    return Expr("reduce", dtypes[leaf], init, spec)


def _map(em, inst, idx, leaf):
    comp = inst.to_apply
    sub = ElementalEmitter({})
    params = {p.parameter_number: p for p in comp.parameters}
    for k in range(len(inst.operands)):
        sub._memo[(params[k], 0, ())] = em.operand(inst, k, idx)
    return sub.value(comp.root, ())


def _fusion(em, inst, idx, leaf):
    """A nested fusion: its parameters are this fusion's operands."""
    comp = inst.fused_computation
    sub = _Nested(em, inst)
    root = comp.root
    if root.opcode == "tuple":
        return sub.value(root.operands[leaf], idx)
    return sub.value(root, idx, leaf)


class _Nested(ElementalEmitter):
    def __init__(self, outer, inst):
        super().__init__({})
        self.outer, self.inst = outer, inst
        self._counter = outer._counter + 1000

    def value(self, inst, idx, leaf=0):
        if inst.opcode == "parameter" and inst.parent is self.inst.fused_computation:
            return self.outer.value(self.inst.operands[inst.parameter_number], idx, leaf)
        return super().value(inst, idx, leaf)


def _gather(em, inst, idx, leaf):
    """XLA's gather: output batch dims walk the start indices, offset dims the slice;
    starts are clamped so the slice stays inside the operand.  An operand batching dim
    takes the index of its start-indices batching dim (and is not part of the slice)."""
    op, starts = inst.operands
    op_batching = list(inst.attr("operand_batching_dims") or ())
    start_batching = list(inst.attr("start_indices_batching_dims") or ())
    offset_dims = list(inst.attr("offset_dims") or ())
    collapsed = set(inst.attr("collapsed_slice_dims") or ()) | set(op_batching)
    start_map = list(inst.attr("start_index_map") or ())
    sizes = list(inst.attr("slice_sizes") or ())
    ivd = inst.attr("index_vector_dim")
    srank = starts.shape.rank
    if ivd is None:
        ivd = srank
    batch_out = [d for d in range(inst.shape.rank) if d not in offset_dims]
    batch_idx = [idx[d] for d in batch_out]
    start_of = {}
    for k, od in enumerate(start_map):
        sidx = list(batch_idx)
        if ivd < srank:
            sidx.insert(ivd, ix.c(k))
        v = em.value(starts, tuple(sidx))
        v = v if v.dtype == S64 else Expr("convert", S64, (v,))
        start_of[od] = Expr("clamp", S64, (ix.c(0), v, ix.c(op.shape.dims[od] - sizes[od])))
    window_dims = [d for d in range(op.shape.rank) if d not in collapsed]
    offs = dict(zip(window_dims, (idx[d] for d in offset_dims)))
    start_dims = [d for d in range(srank) if d != ivd]
    for od, sd in zip(op_batching, start_batching):
        offs[od] = batch_idx[start_dims.index(sd)]
    src = []
    for d in range(op.shape.rank):
        o = offs.get(d, ix.c(0))
        src.append(ix.add(o, start_of[d]) if d in start_of else o)
    return em.value(op, tuple(src))


def _parameter(em, inst, idx, leaf):
    raise ElementalUnsupported(inst, "a parameter that is not a kernel input")


RULES = {
    "constant": _constant, "broadcast": _broadcast, "reshape": _reshape,
    "bitcast": _bitcast, "copy": _copy, "transpose": _transpose, "slice": _slice,
    "iota": _iota, "reverse": _reverse, "concatenate": _concatenate, "pad": _pad,
    "dynamic-slice": _dynamic_slice, "dynamic-update-slice": _dynamic_update_slice,
    "get-tuple-element": _get_tuple_element, "reduce": _reduce,
    "reduce-window": _reduce_window, "map": _map, "fusion": _fusion, "gather": _gather,
    "parameter": _parameter,
}
# Elementwise opcodes use ``_elementwise`` (one value op named after the opcode) except
# those that are not pure functions of their operands.
NOT_ELEMENTAL = frozenset({"rng", "stochastic-convert"})


def has_rule(inst) -> bool:
    return inst.opcode in RULES or (inst.opcode in ELEMENTWISE
                                    and inst.opcode not in NOT_ELEMENTAL)
