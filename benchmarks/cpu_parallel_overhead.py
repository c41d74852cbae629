"""Per-call cost of the CPU backend's parallel loop (``hlo_parallel_for``): prints figures,
never asserted anywhere.

    python benchmarks/cpu_parallel_overhead.py [--calls 20000] [--threads 1,2,3,4]

A tiny kernel (64 doubles incremented, split into one chunk per thread) is called
through ``hlo_parallel_for`` from a native loop, so the figure is the microseconds one
parallel kernel call costs beyond its work: ``back to back`` (calls in a row, as the
kernels of one executable run) and ``after 1 ms idle`` (the first parallel kernel of a
run, whose workers have gone to sleep; median of ``--spaced`` calls).  Uses only
``parallel.py`` and ``compiler.py``, so it also runs against older versions of them (put
the other tree first on ``PYTHONPATH``, or run its copy of this script).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llvmlite import ir  # noqa: E402

from hlo_opt.backends.cpu import compiler  # noqa: E402
from hlo_opt.backends.cpu import irtypes as T  # noqa: E402
from hlo_opt.backends.cpu.parallel import parallel_for, task_thunk, threads_global  # noqa: E402

N = 64


def build():
    m = ir.Module(name="overhead")
    threads_global(m)
    i64, f64p = T.I64, T.F64.as_pointer()
    k = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8P, i64, i64]), "kernel")
    k.linkage = "internal"
    entry, body, out = (k.append_basic_block(n) for n in ("entry", "body", "out"))
    b = ir.IRBuilder(entry)
    p, lo, hi = k.args
    data = b.bitcast(p, f64p)
    b.cbranch(b.icmp_signed("<", lo, hi), body, out)
    b.position_at_end(body)
    i = b.phi(i64)
    i.add_incoming(lo, entry)
    q = b.gep(data, [i])
    b.store(b.fadd(b.load(q), ir.Constant(T.F64, 1.0)), q)
    i1 = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(i1, body)
    b.cbranch(b.icmp_signed("<", i1, hi), body, out)
    b.position_at_end(out)
    b.ret_void()
    # hlo_entry(i8* data, i64 calls, i64 trip): `calls` parallel kernel calls in a row
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8P, i64, i64]), "hlo_entry")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    args = b.alloca(T.I8P)
    b.store(fn.args[0], args)
    b.cbranch(b.icmp_signed(">", fn.args[1], ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    j = b.phi(i64)
    j.add_incoming(ir.Constant(i64, 0), entry)
    b.call(parallel_for(m), [task_thunk(m, k, 1), args, ir.Constant(i64, 1), fn.args[2]])
    j1 = b.add(j, ir.Constant(i64, 1))
    j.add_incoming(j1, loop)
    b.cbranch(b.icmp_signed("<", j1, fn.args[1]), loop, done)
    b.position_at_end(done)
    b.ret_void()
    tm = compiler.target_machine(3)
    m.triple = tm.triple
    m.data_layout = str(tm.target_data)
    mod = compiler.optimize(compiler.parse(str(m)), tm, 3)
    return compiler.link(compiler.emit_object(mod, tm), tm, compiler.external_symbols())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--spaced", type=int, default=200)
    ap.add_argument("--threads", default="1,2,3,4")
    a = ap.parse_args()
    linked = build()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        linked.entry)
    threads = ctypes.c_int64.from_address(linked.threads)
    data = (ctypes.c_double * N)()
    print(f"hlo_parallel_for per-call cost ({compiler.__file__}), "
          f"{len(os.sched_getaffinity(0))} CPUs")
    for n in (int(x) for x in a.threads.split(",")):
        threads.value = n
        before = sum(data)
        run(ctypes.addressof(data), 100, N)   # warm up (workers started)
        t0 = time.perf_counter()
        run(ctypes.addressof(data), a.calls, N)
        row = (time.perf_counter() - t0) / a.calls * 1e6
        spaced = []
        for _ in range(a.spaced):
            time.sleep(0.001)
            t0 = time.perf_counter()
            run(ctypes.addressof(data), 1, N)
            spaced.append((time.perf_counter() - t0) * 1e6)
        assert sum(data) == before + N * (100 + a.calls + a.spaced)
        print(f"  {n} threads: back to back {row:8.2f} us/call; after 1 ms idle "
              f"{statistics.median(spaced):8.2f} us/call (median)")


if __name__ == "__main__":
    main()
