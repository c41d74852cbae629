"""A module plan -> one LLVM module whose ``hlo_entry`` runs the whole entry computation.

Each planned computation becomes ``void comp(i8* arena, i8** params, i8** consts,
i8** out)``: its steps in order -- kernel functions (``kernels.py``), BLAS calls
(matrix-vector dots are loops: ``inline_dot.py``), host library calls, and while /
conditional / call as native control flow calling the callee's function -- then the
root leaves' pointers stored to ``out``.  ``hlo_entry(i8** params, i8** out, i8* arena,
i8** consts)`` calls the entry computation's function, so a run is one native call.

External symbols are bound by name when the object is loaded (``compiler.py``):
``hlo_cpu_host`` (host library calls: ``void(i64 step, i8** ptrs)``), the cblas gemms,
libm, ``malloc``/``free`` and ``hlo_pool_run`` (large kernels split their outer loop
over the process's worker pool: ``parallel.py``, ``pool.py``; ``hlo_cpu_threads`` is
exported).
Nothing address-dependent is baked into the IR, so the object can be cached on disk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir

from ...codegen.elemental import ElementalUnsupported
from ...codegen.plan import Control, Kernel, LibraryCall
from . import irtypes as T
from .blas import NO_TRANS, gemm_plan
from .irloop import counted_loop
from .kernels import KernelRenderer, RenderContext, parallel_trip
from .parallel import parallel_for, task_thunk, threads_global
from .inline_dot import is_inline, render_inline_dot
from .sort import SortRenderer, sort_plan
from .ops import NoRow


@dataclass
class RenderResult:
    module: ir.Module
    host_steps: list = field(default_factory=list)   # [(step, plan)] by host id
    native: dict = field(default_factory=dict)       # step name -> "kernel <kind>" / "blas"
    host_reasons: dict = field(default_factory=dict)  # step name -> why it went to host
    libm: set = field(default_factory=set)
    shared_kernels: int = 0                           # kernels that reuse an identical one


# A while state leaf that moves to another index (``(a, b) -> (b, a)``) goes through a
# temporary: on the stack up to this size, else malloc'ed per iteration.
STACK_TEMP_MAX = 1 << 16


class ModuleRenderer:
    def __init__(self, mplan, use_blas: bool = True, check_steps: bool = False):
        self.mplan = mplan
        self.check_steps = check_steps
        self.use_blas = use_blas
        self.module = ir.Module(name=mplan.module.name)
        self.cx = RenderContext(self.module)
        self.res = RenderResult(self.module)
        self.fns: dict = {}
        self.kernel_bodies: dict = {}
        self._names: set = set()
        m = self.module
        self.host_fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I64, T.I8PP]),
                                   "hlo_cpu_host")
        self.malloc = ir.Function(m, ir.FunctionType(T.I8P, [T.I64]), "malloc")
        self.free = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8P]), "free")
        threads_global(m)
        self.gemm = {}
        for et, ty in (("f32", T.F32), ("f64", T.F64)):
            fnty = ir.FunctionType(ir.VoidType(), [T.I32, T.I32, T.I32, T.I64, T.I64, T.I64,
                                                   ty, ty.as_pointer(), T.I64,
                                                   ty.as_pointer(), T.I64, ty,
                                                   ty.as_pointer(), T.I64])
            self.gemm[et] = ir.Function(m, fnty, "hlo_cblas_" + ("s" if et == "f32" else "d")
                                        + "gemm")

    def _unique(self, base: str) -> str:
        name = "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in base)
        out, n = name, 0
        while out in self._names:
            n += 1
            out = f"{name}.{n}"
        self._names.add(out)
        return out

    # ---- module ---------------------------------------------------------------------
    def render(self) -> RenderResult:
        sig = ir.FunctionType(ir.VoidType(), [T.I8P, T.I8PP, T.I8PP, T.I8PP])
        for comp, plan in self.mplan.plans.items():
            self.fns[comp] = ir.Function(self.module, sig, self._unique("comp." + comp.name))
            self.fns[comp].linkage = "internal"
        for comp, plan in self.mplan.plans.items():
            self._render_computation(plan)
        entry = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [T.I8PP, T.I8PP, T.I8P, T.I8PP]), "hlo_entry")
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        params, out, arena, consts = entry.args
        b.call(self.fns[self.mplan.entry_plan.computation], [arena, params, consts, out])
        b.ret_void()
        self.res.libm = set(self.cx.libm_used)
        return self.res

    def _render_computation(self, plan):
        fn = self.fns[plan.computation]
        arena, params, consts, out = fn.args
        for a in (arena, params, consts, out):
            a.add_attribute("noalias")
        self.entry_block = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        b = ir.IRBuilder(body)
        self.b = b
        self.plan = plan
        self.args = (arena, params, consts)
        flat, n = {}, 0
        for pn, leaves in enumerate(plan.params):
            for j in range(len(leaves)):
                flat[(pn, j)] = n
                n += 1
        self.flat = flat
        for st in plan.steps:
            self._render_step(st)
        for i, v in enumerate(plan.root_values):
            s = plan.assignment.slices[v]
            b.store(self.ptr(s), b.gep(out, [ir.Constant(T.I64, i)]))
        b.ret_void()
        ir.IRBuilder(self.entry_block).branch(body)

    # ---- pointers -------------------------------------------------------------------
    def ptr(self, s):
        b = self.b
        arena, params, consts = self.args
        if s.kind == "arena":
            return b.gep(arena, [ir.Constant(T.I64, s.offset)])
        if s.kind == "param":
            return b.load(b.gep(params, [ir.Constant(T.I64, self.flat[(s.index, s.offset)])]))
        return b.load(b.gep(consts, [ir.Constant(T.I64, s.index)]))

    def memmove(self, dst, src, size):
        if size <= 0:
            return
        mm = self.module.declare_intrinsic("llvm.memmove", [T.I8P, T.I8P, T.I64])
        self.b.call(mm, [dst, src, ir.Constant(T.I64, size), ir.Constant(T.I1, 0)])

    def ptr_array(self, ptrs):
        eb = ir.IRBuilder(self.entry_block)
        arr = eb.alloca(T.I8P, max(len(ptrs), 1))
        for i, p in enumerate(ptrs):
            self.b.store(p, self.b.gep(arr, [ir.Constant(T.I64, i)]))
        return arr

    # ---- steps ----------------------------------------------------------------------
    def _render_step(self, st):
        if isinstance(st, Control):
            return self._control(st)
        if isinstance(st, Kernel) and st.kind == "triton_gemm":
            return self._host(st, "gemm fusion (__triton_gemm): runs on the host")
        if isinstance(st, Kernel):
            name = self._unique("kernel." + st.name)
            trip = parallel_trip(st)
            try:
                kfn = KernelRenderer(self.cx, st, name, parallel=bool(trip)).render()
            except (NoRow, ElementalUnsupported) as e:
                self._names.discard(name)
                return self._host(st, f"{type(e).__name__}: {e}")
            kfn = self._dedup(kfn, name)
            self.cx.b = self.b
            for o, i in st.in_place.items():
                if st.output_slices[o] != st.input_slices[i]:
                    self.memmove(self.ptr(st.output_slices[o]), self.ptr(st.input_slices[i]),
                                 st.output_slices[o].size)
            args = [self.ptr(s) for s in st.input_slices + st.output_slices]
            if trip:
                task = task_thunk(self.module, kfn, len(args))
                self.b.call(parallel_for(self.module), [task, self.ptr_array(args),
                                                        ir.Constant(T.I64, len(args)),
                                                        ir.Constant(T.I64, trip)])
                self.res.native[st.name] = f"kernel {st.kind} (parallel outer loop: {trip})"
            else:
                self.b.call(kfn, args)
                self.res.native[st.name] = f"kernel {st.kind}"
            self._check(st)
            return
        if isinstance(st, LibraryCall) and st.target == "dot" \
                and st.instruction.opcode == "dot":
            g = gemm_plan(st.instruction)
            if g is not None and is_inline(g):
                name = self._unique("dot." + st.name)
                kfn = self._dedup(render_inline_dot(self.module, name, g), name)
                self.cx.b = self.b
                self.b.call(kfn, [self.ptr(s) for s in st.input_slices + st.output_slices])
                self.res.native[st.name] = "dot loops (matrix-vector: no BLAS call)"
                self._check(st)
                return
            if g is not None and self.use_blas:
                self._gemm(st, g)
                self.res.native[st.name] = "blas gemm"
                self._check(st)
                return
        if isinstance(st, LibraryCall) and st.instruction.opcode == "convolution" \
                and self.use_blas:
            from .conv import conv_plan
            cp = conv_plan(st.instruction)
            if cp is not None:
                self._conv(st, cp)
                self.res.native[st.name] = "blas conv"
                self._check(st)
                return
        if isinstance(st, LibraryCall) and st.instruction.opcode == "sort":
            sp = sort_plan(st.instruction)
            if sp is not None and self._sort(st, sp):
                self.res.native[st.name] = "sort (merge sort, generated comparator)"
                self._check(st)
                return
        why = "no native lowering of " + (st.target if isinstance(st, LibraryCall)
                                          else st.kind)
        if isinstance(st, LibraryCall) and st.target == "dot":
            why = "dot that is not a plain f32/f64 GEMM"
        self._host(st, why)

    def _sort(self, st, sp) -> bool:
        sr = SortRenderer(self.cx, self.module, self.malloc, self.free)
        name = self._unique("sort." + st.name + ".cmp")
        try:
            cmp = sr.comparator(st.instruction, name)
        except (NoRow, ElementalUnsupported):
            self._names.discard(name)
            return False
        self.cx.b = self.b
        for o, i in zip(st.output_slices, st.input_slices):
            if o != i:
                self.memmove(self.ptr(o), self.ptr(i), o.size)
        sr.render(self.b, st.instruction, sp, [self.ptr(o) for o in st.output_slices], cmp)
        return True

    def _dedup(self, kfn, name):
        """Identical kernels (a transformer's layers) share one function: LLVM then
        optimises and compiles each distinct kernel once."""
        body = str(kfn).replace(f'@"{name}"', "@KERNEL", 1)
        other = self.kernel_bodies.get(body)
        if other is None:
            self.kernel_bodies[body] = kfn
            return kfn
        del self.module.globals[name]
        self.res.shared_kernels += 1
        return other

    def _host(self, st, why):
        from ..interpreter import HANDLERS
        inst = st.instruction
        if inst.opcode not in HANDLERS:
            from ...errors import UnsupportedError
            err = UnsupportedError(
                f"the cpu backend cannot lower %{inst.name} ({inst.opcode}) in computation "
                f"%{self.plan.computation.name}: {why}, and no host handler exists")
            err.instruction = inst
            raise err
        hid = len(self.res.host_steps)
        self.res.host_steps.append((st, self.plan))
        self.res.host_reasons[st.name] = why
        ptrs = [self.ptr(s) for s in st.input_slices + st.output_slices]
        arr = self.ptr_array(ptrs)
        self.b.call(self.host_fn, [ir.Constant(T.I64, hid), arr])

    def _check(self, st):
        """Debug mode: after a native step, the host recomputes it with the
        interpreter's handler on the same input buffers and compares (ids >= 2**32)."""
        if not self.check_steps or any(s.kind == "arena" and s in st.input_slices
                                       for s in st.output_slices):
            return
        hid = len(self.res.host_steps)
        self.res.host_steps.append((st, self.plan))
        ptrs = [self.ptr(s) for s in st.input_slices + st.output_slices]
        self.b.call(self.host_fn, [ir.Constant(T.I64, hid + (1 << 32)),
                                   self.ptr_array(ptrs)])

    def _gemm(self, st, g):
        b = self.b
        ty = T.F32 if g.dtype == "f32" else T.F64
        pa, pb = (b.bitcast(self.ptr(s), ty.as_pointer()) for s in st.input_slices)
        pc = b.bitcast(self.ptr(st.output_slices[0]), ty.as_pointer())
        fn = self.gemm[g.dtype]
        c64 = lambda v: ir.Constant(T.I64, v)  # noqa: E731
        c32 = lambda v: ir.Constant(T.I32, v)  # noqa: E731
        if g.k == 0 or g.m == 0 or g.n == 0:
            if g.m * g.n * g.batch:
                mm = self.module.declare_intrinsic("llvm.memset", [T.I8P, T.I64])
                b.call(mm, [b.bitcast(pc, T.I8P), ir.Constant(T.I8, 0),
                            c64(g.m * g.n * g.batch * (4 if g.dtype == "f32" else 8)),
                            ir.Constant(T.I1, 0)])
            return
        args = lambda a, bb, c: [c32(g.order), c32(g.trans_a), c32(g.trans_b),  # noqa: E731
                                 c64(g.m), c64(g.n), c64(g.k), ir.Constant(ty, 1.0), a,
                                 c64(g.lda), bb, c64(g.ldb), ir.Constant(ty, 0.0), c,
                                 c64(g.ldc)]
        if g.batch == 1:
            b.call(fn, args(pa, pb, pc))
            return
        counted_loop(b, 0, g.batch, lambda i: b.call(fn, args(
            b.gep(pa, [b.mul(i, c64(g.m * g.k))]), b.gep(pb, [b.mul(i, c64(g.k * g.n))]),
            b.gep(pc, [b.mul(i, c64(g.m * g.n))]))), "gemm.batch")
        _ = NO_TRANS

    def _conv(self, st, cp):
        """One GEMM per (batch, output row, kernel tap) over the output row's valid run."""
        b = self.b
        ty = T.F32 if cp.dtype == "f32" else T.F64
        esize = 4 if cp.dtype == "f32" else 8
        pin, pw = (b.bitcast(self.ptr(s), ty.as_pointer()) for s in st.input_slices)
        out8 = self.ptr(st.output_slices[0])
        pout = b.bitcast(out8, ty.as_pointer())
        c64 = lambda v: ir.Constant(T.I64, v)  # noqa: E731
        c32 = lambda v: ir.Constant(T.I32, v)  # noqa: E731
        total = cp.batch * cp.oh * cp.ow * cp.o
        if total == 0:
            return
        mm = self.module.declare_intrinsic("llvm.memset", [T.I8P, T.I64])
        b.call(mm, [out8, ir.Constant(T.I8, 0), c64(total * esize), ir.Constant(T.I1, 0)])
        if cp.c == 0:
            return
        fn = self.gemm[cp.dtype]
        from .blas import NO_TRANS, ROW_MAJOR
        pre = b.block
        head = b.append_basic_block("conv.batch")
        after = b.append_basic_block("conv.after")
        b.branch(head)
        b.position_at_end(head)
        bi = b.phi(T.I64)
        bi.add_incoming(c64(0), pre)
        for ky in range(cp.kh):
            y0, y1 = cp.rows(ky)
            if y1 <= y0:
                continue
            for kx in range(cp.kw):
                x0, x1 = cp.cols(kx)
                if x1 <= x0:
                    continue
                pre2 = b.block
                rh = b.append_basic_block("conv.row")
                ra = b.append_basic_block("conv.row.after")
                b.branch(rh)
                b.position_at_end(rh)
                y = b.phi(T.I64)
                y.add_incoming(c64(y0), pre2)
                iy = b.add(b.mul(y, c64(cp.sy)), c64(ky - cp.py))
                ix = x0 * cp.sx + kx - cp.px
                a_off = b.mul(b.add(b.mul(b.add(b.mul(bi, c64(cp.h)), iy), c64(cp.w)),
                                    c64(ix)), c64(cp.c))
                c_off = b.mul(b.add(b.mul(b.add(b.mul(bi, c64(cp.oh)), y), c64(cp.ow)),
                                    c64(x0)), c64(cp.o))
                w_off = c64((ky * cp.kw + kx) * cp.c * cp.o)
                b.call(fn, [c32(ROW_MAJOR), c32(NO_TRANS), c32(NO_TRANS), c64(x1 - x0),
                            c64(cp.o), c64(cp.c), ir.Constant(ty, 1.0), b.gep(pin, [a_off]),
                            c64(cp.sx * cp.c), b.gep(pw, [w_off]), c64(cp.o),
                            ir.Constant(ty, 1.0), b.gep(pout, [c_off]), c64(cp.o)])
                nxt = b.add(y, c64(1))
                y.add_incoming(nxt, b.block)
                b.cbranch(b.icmp_signed("<", nxt, c64(y1)), rh, ra)
                b.position_at_end(ra)
        nb = b.add(bi, c64(1))
        bi.add_incoming(nb, b.block)
        b.cbranch(b.icmp_signed("<", nb, c64(cp.batch)), head, after)
        b.position_at_end(after)

    # ---- control flow ---------------------------------------------------------------
    def _call_comp(self, cplan, param_ptrs):
        params = self.ptr_array(param_ptrs)
        out = self.ptr_array([ir.Constant(T.I8P, None)] * len(cplan.root_values))
        arena, _, consts = self.args
        self.b.call(self.fns[cplan.computation], [arena, params, consts, out])
        return [self.b.load(self.b.gep(out, [ir.Constant(T.I64, i)]))
                for i in range(len(cplan.root_values))]

    def _control(self, st):
        b = self.b
        outs = [self.ptr(s) for s in st.output_slices]
        if st.kind == "while":
            cond, body = st.computations
            if st.instruction.called[0] is not cond.computation:
                cond, body = body, cond
            for o, (si, so) in enumerate(zip(st.input_slices, st.output_slices)):
                if si != so:
                    self.memmove(outs[o], self.ptr(si), so.size)
            head = b.append_basic_block("while.cond")
            loop = b.append_basic_block("while.body")
            after = b.append_basic_block("while.after")
            b.branch(head)
            b.position_at_end(head)
            p = self._call_comp(cond, outs)[0]
            flag = b.load(p)
            b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(T.I8, 0)), loop, after)
            b.position_at_end(loop)
            res = self._call_comp(body, outs)
            self._copy_state(body, res, outs, st.output_slices)
            b.branch(head)
            b.position_at_end(after)
            self.res.native[st.name] = "while"
            return
        if st.kind == "call":
            res = self._call_comp(st.computations[0], [self.ptr(s) for s in st.input_slices])
            for o, s in enumerate(st.output_slices):
                self.memmove(outs[o], res[o], s.size)
            self.res.native[st.name] = "call"
            self._check(st)
            return
        # conditional
        inst = st.instruction
        branches = st.computations
        # operand leaves per branch operand
        groups, k = [], 0
        for op in inst.operands:
            n = len(op.shape.leaves()) if op.shape.is_tuple() else 1
            if op.shape.is_tuple() and not op.shape.tuple_shapes:
                n = 0
            groups.append(list(range(k, k + n)))
            k += n
        sel_slice = st.input_slices[groups[0][0]]
        sel_et = inst.operands[0].shape.element_type
        raw = b.load(b.bitcast(self.ptr(sel_slice), T.storage(sel_et).as_pointer()))
        nb = len(branches)
        if sel_et == "pred":
            index = b.select(b.icmp_unsigned("!=", raw, ir.Constant(T.I8, 0)),
                             ir.Constant(T.I64, 0), ir.Constant(T.I64, 1))
        else:
            i64 = b.sext(raw, T.I64) if raw.type.width < 64 else raw
            bad = b.or_(b.icmp_signed("<", i64, ir.Constant(T.I64, 0)),
                        b.icmp_signed(">=", i64, ir.Constant(T.I64, nb)))
            index = b.select(bad, ir.Constant(T.I64, nb - 1), i64)
        after = b.append_basic_block("cond.after")
        sw = b.switch(index, after)
        by_comp = {}
        for bi, comp in enumerate(inst.called):
            blk = b.append_basic_block(f"cond.branch{bi}")
            sw.add_case(ir.Constant(T.I64, bi), blk)
            b.position_at_end(blk)
            cplan = by_comp.get(comp) or next(c for c in branches if c.computation is comp)
            by_comp[comp] = cplan
            ptrs = [self.ptr(st.input_slices[j]) for j in groups[bi + 1]]
            res = self._call_comp(cplan, ptrs)
            for o, s in enumerate(st.output_slices):
                self.memmove(outs[o], res[o], s.size)
            b.branch(after)
        b.position_at_end(after)
        self.res.native[st.name] = "conditional"

    def _copy_state(self, body, res, state, slices):
        """state[j] = res[j] for every leaf, as a parallel assignment."""
        b = self.b
        roots = [body.assignment.slices[v] for v in body.root_values]
        temps, heap = {}, set()
        for j, s in enumerate(roots):
            if s.kind == "param" and s.offset != j and slices[j].size:
                size = slices[j].size
                if size <= STACK_TEMP_MAX:   # no allocation per iteration
                    t = ir.IRBuilder(self.entry_block).alloca(ir.ArrayType(T.I8, size))
                    t.align = 64
                    t = b.bitcast(t, T.I8P)
                else:
                    t = b.call(self.malloc, [ir.Constant(T.I64, size)])
                    heap.add(j)
                self.memmove(t, res[j], size)
                temps[j] = t
        for j, s in enumerate(roots):
            if j in temps or (s.kind == "param" and s.offset == j):
                continue
            self.memmove(state[j], res[j], slices[j].size)
        for j, t in temps.items():
            self.memmove(state[j], t, slices[j].size)
            if j in heap:
                b.call(self.free, [t])
