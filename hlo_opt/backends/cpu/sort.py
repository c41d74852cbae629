"""Native ``sort``: a generated comparator function (inlined) and a stable sort of row
indices in LLVM IR -- insertion sort of runs of 16, then bottom-up merge passes --, then
every operand permuted the same way.

``sort_plan(inst)`` says whether an (unfused) sort is lowered: every operand and result
an array of one shape and one layout (the sort dimension's physical stride is then the
same for all), element types the renderer handles.  The comparator computation
``to_apply(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` is rendered by the kernel expression
renderer with each parameter a pointer to one element.  A comparator that is one
float ``compare`` LT/GT (not TOTALORDER) orders NaNs last, as the interpreter's fast
path does (XLA leaves that order to the implementation).

The sort is always stable (XLA's ``is_stable`` or not: a stable result is a valid one),
as the interpreter's: merging takes the right run's element only when it is strictly
less.  Scratch (two index arrays and one row of values) comes from ``malloc`` per call.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.elemental import ElementalEmitter
from ...codegen.expr import Expr
from . import irtypes as T
from .kernels import KernelRenderer, Scope
from .ops import NoRow


def sort_plan(inst):
    """(n, stride, total) of the sort, or None when it is not lowered natively."""
    if inst.opcode != "sort":
        return None
    shapes = [o.shape for o in inst.operands]
    if not shapes or any(not s.is_array() for s in shapes):
        return None
    s0 = shapes[0]
    m2m = list(s0.effective_layout().minor_to_major)
    for s in shapes[1:]:
        if list(s.dims) != list(s0.dims) or list(s.effective_layout().minor_to_major) != m2m:
            return None
    outs = inst.shape.leaves() if inst.shape.is_tuple() else [inst.shape]
    for s in outs:
        if list(s.dims) != list(s0.dims) or list(s.effective_layout().minor_to_major) != m2m:
            return None
    if any(s.element_type not in T.NATIVE for s in shapes):
        return None
    d = inst.dimensions[0] if inst.dimensions else s0.rank - 1
    stride = 1
    for dd in m2m:
        if dd == d:
            break
        stride *= s0.dims[dd]
    return s0.dims[d], stride, s0.num_elements()


class _Comparator(KernelRenderer):
    """``i1 NAME(i8* lhs_0, i8* rhs_0, ...)``: the comparator at those elements."""

    def __init__(self, cx, comp, name):
        super().__init__(cx, None, name)
        self.comp = comp

    def render(self):
        comp = self.comp
        params = sorted(comp.parameters, key=lambda p: p.parameter_number)
        fn = ir.Function(self.cx.module, ir.FunctionType(T.I1, [T.I8P] * len(params)),
                         self.fname)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        self.fn = fn
        self.entry_block = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self.cx.b = self.b
        self.inputs = list(fn.args)
        self.em = ElementalEmitter({(p, 0): i for i, p in enumerate(params)})
        try:
            root = comp.root
            if root.shape.element_type != "pred" or root.shape.dims:
                raise NoRow("comparator does not return a pred scalar")
            e = self.em.value(root, ())
            e = _nan_last(e)
            v = self.emit(e, Scope())
            self.b.ret(v)
        except Exception:
            fn.parent.globals.pop(self.fname, None)
            raise
        ir.IRBuilder(self.entry_block).branch(body)
        return fn


def _nan_last(e: Expr) -> Expr:
    """compare(x, y) LT/GT on floats (not TOTALORDER) -> that, or x is not NaN and y is."""
    if e.op != "compare" or e.attr[0] not in ("LT", "GT") or e.attr[1] == "TOTALORDER":
        return e
    x, y = e.args
    if T.kind(x.dtype) != "f" or x.op != "load" or y.op != "load":
        return e
    x_ok = Expr("compare", "pred", (x, x), ("EQ", ""))
    y_nan = Expr("compare", "pred", (y, y), ("NE", ""))
    return Expr("or", "pred", (e, Expr("and", "pred", (x_ok, y_nan))))


class SortRenderer:
    """The sort step's IR, emitted at the builder's position in the caller."""

    def __init__(self, cx, module, malloc, free):
        self.cx, self.module, self.malloc, self.free = cx, module, malloc, free

    def comparator(self, inst, name):
        return _Comparator(self.cx, inst.to_apply, name).render()

    def render(self, b, inst, plan, outs, cmp):
        """Sorts the outputs in place (the caller has copied the operands there)."""
        n, stride, total = plan
        if total == 0 or n <= 1:
            return
        self.cx.b = b
        self.b = b
        ets = [o.shape.element_type for o in inst.operands]
        c = lambda v: ir.Constant(T.I64, v)  # noqa: E731
        idx_a = b.bitcast(b.call(self.malloc, [c(8 * n)]), T.I64.as_pointer())
        idx_b = b.bitcast(b.call(self.malloc, [c(8 * n)]), T.I64.as_pointer())
        row = b.call(self.malloc, [c(16 * n)])
        bases = [b.bitcast(o, T.storage(et).as_pointer()) for o, et in zip(outs, ets)]
        var = self._var
        # for every row start p (physical offsets whose sort-dim index is 0)
        p = var(c(0))
        self._while(lambda: b.icmp_signed("<", b.load(p), c(total)), lambda: self._row(
            b.load(p), n, stride, bases, ets, cmp, idx_a, idx_b, row, c),
            lambda: b.store(self._next_row(b.load(p), n, stride, c), p))
        for q in (idx_a, idx_b):
            b.call(self.free, [b.bitcast(q, T.I8P)])
        b.call(self.free, [row])

    # ---- helpers --------------------------------------------------------------------
    def _var(self, init):
        eb = ir.IRBuilder(self.b.function.entry_basic_block)
        eb.position_at_start(self.b.function.entry_basic_block)
        slot = eb.alloca(init.type)
        self.b.store(init, slot)
        return slot

    def _while(self, cond, body, step=None):
        b = self.b
        head = b.append_basic_block("sort.head")
        loop = b.append_basic_block("sort.body")
        after = b.append_basic_block("sort.after")
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(cond(), loop, after)
        b.position_at_end(loop)
        body()
        if step is not None:
            step()
        b.branch(head)
        b.position_at_end(after)

    def _next_row(self, p, n, stride, c):
        """The next physical offset after ``p`` whose sort-dim index is 0."""
        b = self.b
        q = b.add(p, c(1))
        # when q's sort-dim index left 0, jump over the rest of this dimension's block
        inner = b.urem(q, c(stride))
        at_zero = b.icmp_unsigned("==", inner, c(0))
        jump = b.add(p, b.add(c(1), c(stride * (n - 1))))
        return b.select(at_zero, jump, q)

    def _row(self, base, n, stride, bases, ets, cmp, idx_a, idx_b, row, c):
        b = self.b
        var = self._var

        def elem_ptr(k, j):
            return b.bitcast(b.gep(bases[k], [b.add(base, b.mul(j, c(stride)))]), T.I8P)

        def less(j1, j2):
            args = []
            for k in range(len(bases)):
                args += [elem_ptr(k, j1), elem_ptr(k, j2)]
            return b.call(cmp, args)
        i = var(c(0))
        self._while(lambda: b.icmp_signed("<", b.load(i), c(n)),
                    lambda: b.store(b.load(i), b.gep(idx_a, [b.load(i)])),
                    lambda: b.store(b.add(b.load(i), c(1)), i))
        # stable insertion sort of runs of RUN, then merge passes from width RUN
        lo = var(c(0))

        def insertion_run():
            lo_v = b.load(lo)
            hi = _min(b, b.add(lo_v, c(RUN)), c(n))
            i2 = var(b.add(lo_v, c(1)))

            def insert():
                iv = b.load(i2)
                x = b.load(b.gep(idx_a, [iv]))
                j = var(iv)

                def cond():
                    jv = b.load(j)
                    prev = b.load(b.gep(idx_a, [b.sub(_max(b, jv, b.add(lo_v, c(1))),
                                                      c(1))]))
                    return b.and_(b.icmp_signed(">", jv, lo_v), less(x, prev))

                def shift():
                    jv = b.load(j)
                    b.store(b.load(b.gep(idx_a, [b.sub(jv, c(1))])), b.gep(idx_a, [jv]))
                    b.store(b.sub(jv, c(1)), j)
                self._while(cond, shift)
                b.store(x, b.gep(idx_a, [b.load(j)]))
            self._while(lambda: b.icmp_signed("<", b.load(i2), hi), insert,
                        lambda: b.store(b.add(b.load(i2), c(1)), i2))
        self._while(lambda: b.icmp_signed("<", b.load(lo), c(n)), insertion_run,
                    lambda: b.store(b.add(b.load(lo), c(RUN)), lo))
        src, dst = var(idx_a), var(idx_b)
        width = var(c(RUN))

        def merge_pass():
            lo = var(c(0))

            def merge_runs():
                lo_v = b.load(lo)
                w = b.load(width)
                mid = _min(b, b.add(lo_v, w), c(n))
                hi = _min(b, b.add(lo_v, b.add(w, w)), c(n))
                ii, jj, kk = var(lo_v), var(mid), var(lo_v)
                s, d = b.load(src), b.load(dst)

                def take():
                    iv, jv = b.load(ii), b.load(jj)
                    left_done = b.icmp_signed(">=", iv, mid)
                    right_left = b.icmp_signed("<", jv, hi)
                    # clamped reads: the comparator is pure, its result unused then
                    iidx = b.load(b.gep(s, [_min(b, iv, c(n - 1))]))
                    jidx = b.load(b.gep(s, [_min(b, jv, c(n - 1))]))
                    # the right run's element only when the left run is done or it is
                    # strictly less (stable)
                    right = b.and_(right_left, b.or_(left_done, less(jidx, iidx)))
                    kv = b.load(kk)
                    src_pos = b.select(right, jv, iv)
                    b.store(b.load(b.gep(s, [src_pos])), b.gep(d, [kv]))
                    b.store(b.select(right, b.add(jv, c(1)), jv), jj)
                    b.store(b.select(right, iv, b.add(iv, c(1))), ii)
                    b.store(b.add(kv, c(1)), kk)
                self._while(lambda: b.icmp_signed("<", b.load(kk), hi), take)
            self._while(lambda: b.icmp_signed("<", b.load(lo), c(n)), merge_runs,
                        lambda: b.store(b.add(b.load(lo), b.add(b.load(width),
                                                                b.load(width))), lo))
            s, d = b.load(src), b.load(dst)
            b.store(d, src)
            b.store(s, dst)
        self._while(lambda: b.icmp_signed("<", b.load(width), c(n)), merge_pass,
                    lambda: b.store(b.add(b.load(width), b.load(width)), width))
        perm = b.load(src)
        # permute every operand through the row buffer
        for k, et in enumerate(ets):
            ty = T.storage(et)
            tmp = b.bitcast(row, ty.as_pointer())
            m = var(c(0))

            def gather(k=k, tmp=tmp):
                mv = b.load(m)
                j = b.load(b.gep(perm, [mv]))
                v = b.load(b.gep(bases[k], [b.add(base, b.mul(j, c(stride)))]))
                b.store(v, b.gep(tmp, [mv]))

            self._while(lambda: b.icmp_signed("<", b.load(m), c(n)), gather,
                        lambda: b.store(b.add(b.load(m), c(1)), m))
            b.store(c(0), m)

            def scatter(k=k, tmp=tmp):
                mv = b.load(m)
                b.store(b.load(b.gep(tmp, [mv])),
                        b.gep(bases[k], [b.add(base, b.mul(mv, c(stride)))]))
            self._while(lambda: b.icmp_signed("<", b.load(m), c(n)), scatter,
                        lambda: b.store(b.add(b.load(m), c(1)), m))


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


RUN = 16
