"""Matrix-vector dots as LLVM loops instead of a BLAS call (XLA:CPU's "tiled LLVM IR
GEMV" strategy, dot_op_emitter.cc: a dot with a vector operand is emitted inline).

OpenBLAS's GEMM is no faster than a plain loop on a matrix-vector product (nothing to
reuse) and much slower on a large one (1x1024x1024: ~470 us against ~80 us; 1x4096x4096:
17 ms against 4.8 ms), and a recurrent cell's ``h @ w`` in a while loop pays its call
every iteration.  A dot whose ``gemm_plan`` has ``m == 1`` or ``n == 1`` and at most
``GEMV_MAX_FLOPS`` multiply-adds per batch element becomes ``void name(i8* a, i8* b,
i8* c)``:

- the row form, when ``B``'s rows are contiguous (``B(p, j)`` and ``B(p, j + 1)``
  adjacent) and ``n > 1``: ``C[i, :] += A(i, p) * B(p, :)`` for ``ROWS`` rows ``p`` per
  pass over the output row; every output element is summed in ``p`` order and the loop
  over ``j`` vectorises without reassociating anything;
- otherwise the dot-product form: one sum per output element over ``p`` with
  ``UNROLL`` partial sums folded in order at the end (XLA:CPU's GEMV keeps vector
  accumulators the same way), which SLP turns into one vector operation.

Small GEMMs (both ``m`` and ``n`` above 1) stay BLAS calls: measured at 32x32x32 and
8x(16x16x16), OpenBLAS beats these loops.  The plan's column-major form (``order ==
COL_MAJOR``) is the row-major one of ``C^T = B^T A^T``: operands and flags swap.
"""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T
from .blas import COL_MAJOR, NO_TRANS, Gemm
from .irloop import counted_loop

GEMV_MAX_FLOPS = 1 << 24      # m * n * k of one batch element
UNROLL = 8    # partial sums of the dot-product form
ROWS = 8      # rows of B per pass over an output row (the row form)


def is_inline(g: Gemm) -> bool:
    """Whether the dot ``g`` plans is emitted as loops (a matrix-vector product)."""
    if g.m == 0 or g.n == 0 or g.k == 0:
        return False
    return (g.m == 1 or g.n == 1) and g.m * g.n * g.k <= GEMV_MAX_FLOPS


def _row_major(g: Gemm):
    """(m, n, k, a strides (i, p), b strides (p, j), ldc, swapped): C(i, j) at
    ``i * ldc + j``; ``swapped``: A is the plan's B and B the plan's A."""
    if g.order == COL_MAJOR:
        m, n = g.n, g.m
        ta, lda, tb, ldb = g.trans_b, g.ldb, g.trans_a, g.lda
        swapped = True
    else:
        m, n = g.m, g.n
        ta, lda, tb, ldb = g.trans_a, g.lda, g.trans_b, g.ldb
        swapped = False
    sa = (lda, 1) if ta == NO_TRANS else (1, lda)
    sb = (ldb, 1) if tb == NO_TRANS else (1, ldb)
    return m, n, g.k, sa, sb, g.ldc, swapped


class _Loops:
    def __init__(self, b: ir.IRBuilder):
        self.b = b

    def loop(self, trip: int, body, start: int = 0):
        """for v in [start, trip): body(v) -- ``trip`` > ``start``."""
        counted_loop(self.b, start, trip, body, "dot.loop")


def render_inline_dot(module: ir.Module, name: str, g: Gemm) -> ir.Function:
    """``void name(i8* a, i8* b, i8* c)`` (the plan's operands and output)."""
    ty = T.F32 if g.dtype == "f32" else T.F64
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.I8P] * 3), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    for a in fn.args:
        a.add_attribute("noalias")
    entry = fn.append_basic_block("entry")
    body = fn.append_basic_block("body")
    b = ir.IRBuilder(body)
    eb = ir.IRBuilder(entry)
    m, n, k, sa, sb, ldc, swapped = _row_major(g)
    pa, pb, pc = (b.bitcast(a, ty.as_pointer()) for a in fn.args)
    if swapped:
        pa, pb = pb, pa
    # batch strides of the plan's operands (``_gemm``'s): a batch element is contiguous
    a_step, b_step = g.m * g.k, g.k * g.n
    if swapped:
        a_step, b_step = b_step, a_step
    loops = _Loops(b)
    c64 = lambda v: ir.Constant(T.I64, v)  # noqa: E731
    zero = ir.Constant(ty, 0.0)

    def at(p, *terms):
        off = None
        for v, s in terms:
            t = v if s == 1 else b.mul(v, c64(s))
            off = t if off is None else b.add(off, t)
        return b.gep(p, [off if off is not None else c64(0)])

    def mul_add(acc, x, y):
        return b.fadd(acc, b.fmul(x, y))

    row_form = n > 1 and sb[1] == 1

    def one(bt):
        a0 = b.gep(pa, [b.mul(bt, c64(a_step))])
        b0 = b.gep(pb, [b.mul(bt, c64(b_step))])
        c0 = b.gep(pc, [b.mul(bt, c64(g.m * g.n))])
        if row_form:
            def row(i):
                crow = at(c0, (i, ldc))
                loops.loop(n, lambda j: b.store(zero, b.gep(crow, [j])))

                def rows(p0, count):
                    # ``count`` rows of B per pass over the output row: its elements
                    # stay in registers while they take ``count`` products, in p order
                    avs = [b.load(at(a0, (i, sa[0]), (b.add(p0, c64(u)), sa[1])))
                           for u in range(count)]
                    brows = [at(b0, (b.add(p0, c64(u)), sb[0])) for u in range(count)]

                    def col(j):
                        cp = b.gep(crow, [j])
                        acc = b.load(cp)
                        for av, brow in zip(avs, brows):
                            acc = mul_add(acc, av, b.load(b.gep(brow, [j])))
                        b.store(acc, cp)
                    loops.loop(n, col)
                blocks = k // ROWS
                if blocks:
                    loops.loop(blocks, lambda q: rows(b.mul(q, c64(ROWS)), ROWS))
                if k % ROWS:
                    rows(c64(blocks * ROWS), k % ROWS)
            loops.loop(m, row)
            return

        def row(i):
            def col(j):
                def x(p):
                    return b.fmul(b.load(at(a0, (i, sa[0]), (p, sa[1]))),
                                  b.load(at(b0, (p, sb[0]), (j, sb[1]))))
                acc = eb.alloca(ty)
                b.store(zero, acc)
                blocks = k // UNROLL if k >= 4 * UNROLL else 0
                if blocks:
                    parts = [eb.alloca(ty) for _ in range(UNROLL)]
                    for s in parts:
                        b.store(zero, s)

                    def blk(q):
                        base = b.mul(q, c64(UNROLL))
                        for u, s in enumerate(parts):
                            b.store(b.fadd(b.load(s), x(b.add(base, c64(u)))), s)
                    loops.loop(blocks, blk)
                    total = zero
                    for s in parts:
                        total = b.fadd(total, b.load(s))
                    b.store(total, acc)
                if blocks * UNROLL < k:
                    loops.loop(k, lambda p: b.store(b.fadd(b.load(acc), x(p)), acc),
                               start=blocks * UNROLL)
                b.store(b.load(acc), at(c0, (i, ldc), (j, 1)))
            loops.loop(n, col)
        loops.loop(m, row)

    loops.loop(g.batch, one)
    b.ret_void()
    eb.branch(body)
    return fn
