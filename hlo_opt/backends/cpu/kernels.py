"""Kernels -> LLVM functions: loop nests over index spaces, values by the op table.

``KernelRenderer(module, kernel, name).render()`` adds ``void name(i8* in0.., i8*
out0..)`` to the LLVM module, or raises ``NoRow``/``ElementalUnsupported`` when some
value has no row (the caller then makes the step a host library call).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen import index as ix
from ...codegen.elemental import ElementalEmitter, _index_scalar
from ...codegen.expr import Expr
from . import irtypes as T
from . import complex_ops
from .ops import NO_ROUND, OPS, NoRow, convert_value
from .row_norm import render_row_norm, row_trip


def _complex_convert(cx, e, args):
    return complex_ops._convert(cx, e, args, convert_value)


class Scope:
    """Rendered values visible at a point of the loop nest (inner scopes see outer
    values; values made inside a loop body die with it)."""

    def __init__(self, parent=None):
        self.parent = parent
        self.vals: dict = {}

    def get(self, e):
        s = self
        while s is not None:
            v = s.vals.get(e)
            if v is not None:
                return v
            s = s.parent
        return None


class RenderContext:
    """Shared by everything that emits IR into one LLVM module."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.b: ir.IRBuilder | None = None
        self.libm_used: set = set()

    def intrinsic(self, name, args, overload=None):
        tys = overload or [args[0].type]
        fn = self.module.declare_intrinsic(name, tys, ir.FunctionType(
            tys[0] if name not in ("llvm.fptosi.sat", "llvm.fptoui.sat") else tys[0],
            [a.type for a in args]))
        return self.b.call(fn, args)

    def call_libm(self, name, args, ty):
        full = name + ("f" if ty == T.F32 else "")
        self.libm_used.add(full)
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ty, [ty] * len(args)), full)
        return self.b.call(fn, args)


# Kernels with at least this much work (elements touched, summed over the kernel's
# instructions) split their outermost loop over threads (``parallel.py``, on the
# persistent pool of ``pool.py``): a call costs well under a microsecond back to back but
# 10-30 us when the workers sleep, and lower thresholds (2**15, 2**16) measured slower on
# layer norm and softmax.
PARALLEL_MIN_WORK = 1 << 18


def parallel_trip(kernel) -> int:
    """The trip count of the kernel's outermost loop when that loop may be split into
    chunks run on several threads, else 0.  Every output is written only at its own loop
    index, so chunks of the outermost loop write disjoint elements; in-place kernels
    (dynamic-update-slice, scatter) and kernels whose outputs iterate different index
    spaces stay on one thread, as do kernels below ``PARALLEL_MIN_WORK``."""
    if kernel.kind == "in_place_dynamic_update_slice" or kernel.in_place:
        return 0
    spaces = kernel.index_spaces
    if not spaces:
        return 0
    if kernel.kind == "row_normalization":
        return row_trip(kernel) if _work(kernel) >= PARALLEL_MIN_WORK else 0
    s0 = spaces[0]
    order = list(reversed(s0.effective_layout().minor_to_major))
    for s in spaces[1:]:
        if list(s.dims) != list(s0.dims) or \
                list(reversed(s.effective_layout().minor_to_major)) != order:
            return 0
    trips = [s0.dims[d] for d in order if s0.dims[d] != 1]
    if not trips or trips[0] < 2 or any(n == 0 for n in s0.dims):
        return 0
    if _work(kernel) < PARALLEL_MIN_WORK:
        return 0
    return trips[0]


def _work(kernel) -> int:
    inst = kernel.instruction
    insts = inst.fused_computation.instructions if inst.opcode == "fusion" else [inst]
    total = 0
    for m in insts:
        sizes = [_elements(m.shape)] + [_elements(o.shape) for o in m.operands]
        total += max(sizes)
    return total


def _elements(shape) -> int:
    if shape.is_tuple():
        return sum(_elements(s) for s in shape.tuple_shapes)
    return shape.num_elements() if shape.is_array() else 0


class KernelRenderer:
    def __init__(self, cx: RenderContext, kernel, fname: str, noalias: bool = True,
                 parallel: bool = False):
        self.cx = cx
        self.k = kernel
        self.fname = fname
        self.noalias = noalias
        # parallel: two trailing i64 arguments bound the outermost loop ([lo, hi))
        self.parallel = parallel

    # ---- entry ----------------------------------------------------------------------
    def render(self) -> ir.Function:
        k = self.k
        self._check_types()
        n_in, n_out = len(k.inputs), len(k.outputs)
        extra = [T.I64, T.I64] if self.parallel else []
        fnty = ir.FunctionType(ir.VoidType(), [T.I8P] * (n_in + n_out) + extra)
        fn = ir.Function(self.cx.module, fnty, self.fname)
        fn.linkage = "internal"
        # one function per kernel, as XLA:CPU emits them: inlining ~1,000 kernels into
        # the entry function made LLVM's O3 superlinear (62 s for a 3,000-instruction
        # module)
        fn.attributes.add("noinline")
        in_place_inputs = set(k.in_place.values())
        for i, a in enumerate(fn.args[:n_in + n_out]):
            if i < n_in and i in in_place_inputs:
                continue
            if i >= n_in and (i - n_in) in k.in_place:
                continue
            if self.noalias:
                a.add_attribute("noalias")
        self.fn = fn
        self.entry_block = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self.cx.b = self.b
        self.inputs = []
        for i in range(n_in):
            self.inputs.append(fn.args[i])
        self.outputs = list(fn.args[n_in:n_in + n_out])
        self.bounds = tuple(fn.args[n_in + n_out:]) if self.parallel else None
        self.em = ElementalEmitter(k.input_map)
        try:
            if k.kind == "in_place_dynamic_update_slice":
                self._render_dus()
            elif k.kind == "row_normalization":
                render_row_norm(self, Scope)
            else:
                for n, shape in enumerate(k.index_spaces):
                    self._render_output(n, shape)
            self.b.ret_void()
        except Exception:
            fn.parent.globals.pop(self.fname, None)
            raise
        ir.IRBuilder(self.entry_block).branch(body)
        return fn

    def _check_types(self):
        for v in list(self.k.inputs) + list(self.k.outputs):
            if v.shape.element_type not in T.NATIVE:
                raise NoRow(f"element type {v.shape.element_type}")
        insts = (self.k.instruction.fused_computation.instructions
                 if self.k.instruction.opcode == "fusion" else [self.k.instruction])
        for m in insts:
            for s in (m.shape.leaves() if m.shape.is_tuple() else [m.shape]):
                if s.is_array() and s.element_type not in T.NATIVE:
                    raise NoRow(f"element type {s.element_type}")

    # ---- loops ----------------------------------------------------------------------
    def _loop_nest(self, shape, body_fn, scope):
        """Loops over ``shape`` in physical order (minor-most innermost)."""
        order = list(reversed(shape.effective_layout().minor_to_major))
        idx = [None] * shape.rank
        vars_ = []
        for d in order:
            v = ix.loop_var(f"i{d}_{id(shape) % 997}", shape.dims[d])
            idx[d] = v
            if shape.dims[d] != 1:
                vars_.append((v, shape.dims[d]))
        if any(n == 0 for n in shape.dims):
            return
        self._nest(vars_, 0, lambda sc: body_fn(tuple(idx), sc), scope,
                   bounds=self.bounds)

    def _nest(self, vars_, i, body, scope, bounds=None):
        """``bounds`` ([lo, hi) as IR values) replace the outermost loop's [0, trip)."""
        if i == len(vars_):
            body(scope)
            return
        v, trip = vars_[i]
        b = self.b
        lo, hi = (bounds if bounds is not None and i == 0
                  else (ir.Constant(T.I64, 0), ir.Constant(T.I64, trip)))
        pre = b.block
        head = b.append_basic_block("loop")
        after = b.append_basic_block("after")
        if bounds is not None and i == 0:
            b.cbranch(b.icmp_signed("<", lo, hi), head, after)
        else:
            b.branch(head)
        b.position_at_end(head)
        phi = b.phi(T.I64)
        phi.add_incoming(lo, pre)
        inner = Scope(scope)
        inner.vals[v] = phi
        self._nest(vars_, i + 1, body, inner)
        nxt = b.add(phi, ir.Constant(T.I64, 1))
        phi.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, hi), head, after)
        b.position_at_end(after)

    def _render_output(self, n, shape):
        inst, leaf = self.k.roots[n]
        out = self.outputs[n]
        et = shape.element_type
        ptr = self.b.bitcast(out, T.storage(et).as_pointer())

        def body(idx, scope):
            e = self.em.value(inst, idx, leaf)
            v = self.emit(e, scope)
            lin = self.emit(ix.linear_index(shape, idx), scope)
            self.b.store(T.to_storage(self.b, v, et), self.b.gep(ptr, [lin]))
        self._loop_nest(shape, body, Scope())

    def _render_dus(self):
        root = self.k.roots[0][0]
        base, upd = root.operands[0], root.operands[1]
        et = root.shape.element_type
        ptr = self.b.bitcast(self.outputs[0], T.storage(et).as_pointer())
        em = self.em
        starts = [Expr("clamp", "s64", (ix.c(0), _index_scalar(em, root, 2 + d),
                                        ix.c(base.shape.dims[d] - upd.shape.dims[d])))
                  for d in range(root.shape.rank)]

        def body(idx, scope):
            v = self.emit(em.value(upd, idx), scope)
            at = tuple(ix.add(i, s) for i, s in zip(idx, starts))
            lin = self.emit(ix.linear_index(root.shape, at), scope)
            self.b.store(T.to_storage(self.b, v, et), self.b.gep(ptr, [lin]))
        self._loop_nest(upd.shape, body, Scope())

    # ---- expressions ----------------------------------------------------------------
    def emit(self, e: Expr, scope: Scope):
        v = scope.get(e)
        if v is not None:
            return v
        op = e.op
        b = self.b
        if op == "const":
            if e.dtype not in T.NATIVE:
                raise NoRow(f"constant of {e.dtype}")
            v = T.const(e.attr, e.dtype)
        elif op == "var":
            raise NoRow(f"unbound variable {e.attr}")
        elif op == "load":
            idx = self.emit(e.args[0], scope)
            et = e.dtype
            p = b.bitcast(self.inputs[e.attr], T.storage(et).as_pointer())
            v = T.from_storage(b, b.load(b.gep(p, [idx])), et)
        elif op == "reduce":
            v = self._reduce(e, scope)
        else:
            if e.dtype not in T.NATIVE or any(a.dtype not in T.NATIVE for a in e.args):
                raise NoRow(f"{op} on {e.dtype}")
            cplx = e.dtype in T.COMPLEX or any(a.dtype in T.COMPLEX for a in e.args)
            if cplx and op not in complex_ops.HANDLED:
                raise NoRow(f"{op} on complex values")
            row = (complex_ops.ROWS.get(op) or OPS.get(op)) if cplx else OPS.get(op)
            if op == "convert" and cplx:
                row = _complex_convert
            if row is None:
                raise NoRow(op)
            args = [self.emit(a, scope) for a in e.args]
            self.cx.b = b
            v = row(self.cx, e, args)
            if e.dtype in ("bf16", "f16") and op not in NO_ROUND:
                v = T.round_narrow(b, v, e.dtype)
        scope.vals[e] = v
        return v

    def _reduce(self, e, scope):
        spec = e.attr
        key = ("reduce", spec.loop_vars, spec.values, spec.combiner, e.args)
        cached = scope.get(key)
        if cached is None:
            cached = self._reduce_loop(e, spec, scope)
            scope.vals[key] = cached
        return cached[spec.result]

    def _reduce_loop(self, e, spec, scope):
        b = self.b
        inits = [self.emit(a, scope) for a in e.args]
        accs = []
        eb = ir.IRBuilder(self.entry_block)
        for v in inits:
            slot = eb.alloca(v.type)
            b.store(v, slot)
            accs.append(slot)
        loop_vars = [(ix.loop_var(name, trip), trip) for name, trip in spec.loop_vars]

        combiner = _wide_combiner(spec)
        narrow = combiner is not spec.combiner

        def body(sc):
            xs = [self.emit(val, sc) for val in spec.values]
            inner = Scope(sc)
            for name, slot in zip(spec.acc_names, accs):
                dt = "f32" if narrow else _dt(spec, name, e)
                inner.vals[Expr("var", dt, (), name)] = b.load(slot)
            for k, name in enumerate(spec.x_names):
                dt = "f32" if narrow else spec.values[k].dtype
                inner.vals[Expr("var", dt, (), name)] = xs[k]
            news = [self.emit(c, inner) for c in combiner]
            for slot, nv in zip(accs, news):
                b.store(nv, slot)
        if all(t > 0 for _, t in spec.loop_vars):
            if _unrollable(spec, combiner, loop_vars):
                self._nest(loop_vars[:-1], 0,
                           lambda sc: self._unrolled_inner(spec, combiner, narrow, e,
                                                           loop_vars[-1], accs[0], sc),
                           scope)
            else:
                self._nest(loop_vars, 0, body, scope)
        out = [b.load(slot) for slot in accs]
        if narrow:
            out = [T.round_narrow(b, v, spec.values[k].dtype) for k, v in enumerate(out)]
        return out


    def _unrolled_inner(self, spec, combiner, narrow, e, inner, acc_slot, scope):
        """The innermost reduction loop with UNROLL independent partial results (XLA:CPU
        vectorises its reductions the same way), so that SLP turns them into one vector
        op; partials are folded into the accumulator in order, then the remainder."""
        b = self.b
        var, trip = inner
        n = UNROLL
        dt = "f32" if narrow else spec.values[0].dtype
        acc_var = Expr("var", dt, (), spec.acc_names[0])
        x_var = Expr("var", dt, (), spec.x_names[0])

        def combine(a, x):
            sc = Scope()
            sc.vals[acc_var] = a
            sc.vals[x_var] = x
            return self.emit(combiner[0], sc)

        def value_at(reg, sc):
            inner_sc = Scope(sc)
            inner_sc.vals[var] = reg
            return self.emit(spec.values[0], inner_sc)
        eb = ir.IRBuilder(self.entry_block)
        parts = []
        for k in range(n):
            v = value_at(ir.Constant(T.I64, k), scope)
            slot = eb.alloca(v.type)
            b.store(v, slot)
            parts.append(slot)
        blocks = trip // n
        j = ix.loop_var(f"{var.attr[0]}_blk", blocks - 1)

        def step(sc):
            base = b.mul(b.add(sc.get(j), ir.Constant(T.I64, 1)), ir.Constant(T.I64, n))
            for k in range(n):
                x = value_at(b.add(base, ir.Constant(T.I64, k)), sc)
                b.store(combine(b.load(parts[k]), x), parts[k])
        if blocks > 1:
            self._nest([(j, blocks - 1)], 0, step, scope)
        acc = b.load(acc_slot)
        for k in range(n):
            acc = combine(acc, b.load(parts[k]))
        b.store(acc, acc_slot)
        rest = trip - blocks * n
        if rest:
            r = ix.loop_var(f"{var.attr[0]}_rest", rest)

            def tail(sc):
                reg = sc.get(r) if rest > 1 else ir.Constant(T.I64, 0)
                x = value_at(b.add(reg, ir.Constant(T.I64, blocks * n)), sc)
                b.store(combine(b.load(acc_slot), x), acc_slot)
            if rest > 1:
                self._nest([(r, rest)], 0, tail, scope)
            else:
                tail(scope)


UNROLL = 8
# LLVM already vectorises integer reductions and float max/min ones (exact in any
# order); float add/multiply it keeps in order without fast-math.
_ASSOC = frozenset({"add", "multiply"})


def _unrollable(spec, combiner, loop_vars) -> bool:
    """One accumulator combined by one associative op of (acc, x), an innermost loop of
    at least 4 * UNROLL trips."""
    if len(spec.values) != 1 or len(combiner) != 1 or not loop_vars:
        return False
    c = combiner[0]
    if c.op not in _ASSOC or len(c.args) != 2 or any(a.op != "var" for a in c.args):
        return False
    if {a.attr for a in c.args} != {spec.acc_names[0], spec.x_names[0]}:
        return False
    if c.dtype not in ("f32", "f64"):
        return False
    var, trip = loop_vars[-1]
    return var.op == "var" and trip >= 4 * UNROLL


_WIDE_OPS = frozenset({"add", "multiply", "maximum", "minimum"})


def _wide_combiner(spec):
    """f16/bf16 reductions whose reducer is one add/multiply/max/min accumulate in f32
    and round once at the end (XLA and the interpreter do)."""
    if not all(v.dtype in ("f16", "bf16") for v in spec.values):
        return spec.combiner
    out = []
    for k, c in enumerate(spec.combiner):
        if c.op not in _WIDE_OPS or len(c.args) != 2:
            return spec.combiner
        names = {a.attr for a in c.args if a.op == "var"}
        if names != {spec.acc_names[k], spec.x_names[k]}:
            return spec.combiner
        out.append(Expr(c.op, "f32", tuple(Expr("var", "f32", (), a.attr) for a in c.args)))
    return tuple(out)


def _dt(spec, name, e):
    k = spec.acc_names.index(name)
    return spec.values[k].dtype if k < len(spec.values) else e.dtype
