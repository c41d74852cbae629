"""Outer loops split over threads, as XLA:CPU's parallel loop emitter does.

A kernel chosen by ``kernels.parallel_trip`` takes two trailing ``i64`` arguments, the
``[lo, hi)`` range of its outermost loop.  Its call site becomes a call of
``hlo_parallel_for(task, args, nargs, trip)`` (emitted once per LLVM module), which cuts
``[0, trip)`` into ``hlo_cpu_threads`` contiguous chunks (fewer when ``trip`` is smaller)
and hands them to the process's persistent worker pool, ``hlo_pool_run`` (``pool.py``,
bound by name when the object is loaded), which runs them on its workers and on the
calling thread and returns when all are done.  ``task`` is a per-kernel thunk
``i8* task(i8** block)`` unpacking ``[args..., lo, hi]``.  The chunks are the same
whichever thread runs them, so every thread count and every schedule give the same bits.

``hlo_cpu_threads`` is a global of the object (1 until the runtime sets it), so the
thread count is a run-time choice and the cached object does not depend on it.
"""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T
from .irloop import counted_loop
from .pool import TASK, declare_run

THREADS_GLOBAL = "hlo_cpu_threads"


def threads_global(module: ir.Module):
    g = module.globals.get(THREADS_GLOBAL)
    if g is None:
        g = ir.GlobalVariable(module, T.I64, THREADS_GLOBAL)
        g.initializer = ir.Constant(T.I64, 1)
        g.align = 8
    return g


def task_thunk(module: ir.Module, kfn: ir.Function, n_ptrs: int) -> ir.Function:
    """``i8* NAME.task(i8* block)``: calls ``kfn(block[0..n_ptrs), lo, hi)``."""
    name = kfn.name + ".task"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, TASK, name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    blk = b.bitcast(fn.args[0], T.I8PP)
    args = [b.load(b.gep(blk, [ir.Constant(T.I64, i)])) for i in range(n_ptrs)]
    lo = b.ptrtoint(b.load(b.gep(blk, [ir.Constant(T.I64, n_ptrs)])), T.I64)
    hi = b.ptrtoint(b.load(b.gep(blk, [ir.Constant(T.I64, n_ptrs + 1)])), T.I64)
    b.call(kfn, args + [lo, hi])
    b.ret(ir.Constant(T.I8P, None))
    return fn


def parallel_for(module: ir.Module) -> ir.Function:
    """``void hlo_parallel_for(i8* (i8*)* task, i8** args, i64 nargs, i64 trip)``."""
    fn = module.globals.get("hlo_parallel_for")
    if fn is not None:
        return fn
    i64 = T.I64
    c = lambda v: ir.Constant(i64, v)  # noqa: E731
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [TASK.as_pointer(), T.I8PP,
                                                            i64, i64]), "hlo_parallel_for")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    task, args, nargs, trip = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    want = b.load(threads_global(module))
    want = b.select(b.icmp_signed("<", want, c(1)), c(1), want)
    nt = b.select(b.icmp_signed("<", trip, want), trip, want)
    stride = b.add(nargs, c(2))
    blocks = b.alloca(T.I8P, b.mul(nt, stride))

    def block_of(t):
        return b.gep(blocks, [b.mul(t, stride)])

    def fill(t):
        blk = block_of(t)
        counted_loop(b, c(0), nargs,
             lambda j: b.store(b.load(b.gep(args, [j])), b.gep(blk, [j])), "copy")
        lo = b.udiv(b.mul(trip, t), nt)
        hi = b.udiv(b.mul(trip, b.add(t, c(1))), nt)
        b.store(b.inttoptr(lo, T.I8P), b.gep(blk, [nargs]))
        b.store(b.inttoptr(hi, T.I8P), b.gep(blk, [b.add(nargs, c(1))]))
    counted_loop(b, c(0), nt, fill, "fill")

    b.call(declare_run(module), [task, blocks, nt, stride])
    b.ret_void()
    return fn
