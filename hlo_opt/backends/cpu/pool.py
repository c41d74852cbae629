"""The process's persistent worker pool for kernels split over threads (``parallel.py``),
as XLA:CPU runs its parallel loops on a persistent thread pool.

One LLVM module, compiled and linked once per process (``compiler.pool_address``), exports

    void hlo_pool_run(i8* (i8*)* task, i8** blocks, i64 nblocks, i64 stride)

which runs ``task(blocks + i * stride)`` for every ``i`` in ``[0, nblocks)`` and returns
when all have finished.  Every loaded object imports it by name, as it imports libc.

Workers are pthreads created lazily (up to ``nblocks - 1``, at most ``MAX_WORKERS``) and
detached: the process exits without joining them, and the pool's JIT code is never freed
(``compiler.py`` keeps it).  Blocks are claimed one at a time by a compare-and-swap on
one word, ``state = generation << 32 | nblocks << 16 | next``, by the workers and by the
caller alike, so a block runs exactly once, on whichever thread gets to it first: a
caller whose workers are asleep or descheduled runs the blocks itself rather than wait
for them.  The job's ``task``, ``blocks`` and ``stride`` are read only after a successful
claim, so a late worker never sees a half-written job; ``done`` counts finished blocks
and the caller spins (``pause``, then ``sched_yield``) until it reaches ``nblocks``.
A block runs under the caller's floating-point modes (x86's MXCSR: rounding, flush to
zero), as a thread started for it would, whichever thread runs it.
An idle worker spins ``WORKER_SPIN`` rounds (at most one worker fewer than the
process's CPUs spin at a time), then sleeps on a condition variable (``sleepers`` says
whether the caller must broadcast).

One caller at a time: ``owner = pid << 1 | busy``.  A caller that finds the pool busy (a
second Python thread running another executable, or a nested call) runs its blocks
itself, serially.  A caller whose pid differs from the owner's (the pool was copied by a
``fork``: the child has none of the parent's workers) takes the pool over and starts it
afresh (mutex and condition variable initialised again, no workers).
"""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T

POOL_RUN = "hlo_pool_run"
TASK = ir.FunctionType(T.I8P, [T.I8P])
RUN_TYPE = ir.FunctionType(ir.VoidType(), [TASK.as_pointer(), T.I8PP, T.I64, T.I64])
MAX_WORKERS = 255
MAX_BLOCKS = 0xFFFF          # the 16-bit fields of ``state``; more runs serially
# pause rounds an idle worker waits before it sleeps: a few microseconds, for kernels
# in a row.  Longer spins (2**10, 2**14) made benchmarks/cpu_vs_xla.py slower and
# bimodal on a busy 2-core machine (the spinning worker takes the CPU the caller needs).
WORKER_SPIN = 1 << 8
CALLER_SPIN = 1 << 12        # pause rounds the caller waits before it yields
# glibc's pthread_mutex_t / pthread_cond_t are 40 / 48 bytes on x86_64, 48 / 48 on
# aarch64: both live in 64 aligned bytes of their own
_OPAQUE = ir.ArrayType(T.I8, 64)
# the symbols the pool module imports (``compiler.external_symbols`` finds them)
LIBC = ("getpid", "sched_yield", "pthread_create", "pthread_detach", "pthread_mutex_init",
        "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_init",
        "pthread_cond_wait", "pthread_cond_broadcast")


def declare_run(module: ir.Module) -> ir.Function:
    """``hlo_pool_run`` declared in an object that calls it."""
    fn = module.globals.get(POOL_RUN)
    if fn is None:
        fn = ir.Function(module, RUN_TYPE, POOL_RUN)
    return fn


class _Pool:
    def __init__(self, triple: str, max_spinners: int):
        self.m = m = ir.Module(name="hlo_pool")
        i32, i64 = T.I32, T.I64
        self.c = lambda v: ir.Constant(i64, v)  # noqa: E731

        def glob(name, ty, init):
            g = ir.GlobalVariable(m, ty, "hlo_pool." + name)
            g.linkage = "internal"
            g.initializer = init
            g.align = 64
            return g
        self.owner = glob("owner", i64, self.c(0))
        self.state = glob("state", i64, self.c(0))
        self.done = glob("done", i64, self.c(0))
        self.sleepers = glob("sleepers", i64, self.c(0))
        self.workers = glob("workers", i64, self.c(0))
        self.spinning = glob("spinning", i64, self.c(0))
        self.max_spinners = glob("max_spinners", i64, self.c(max_spinners))
        self.task = glob("task", TASK.as_pointer(), ir.Constant(TASK.as_pointer(), None))
        self.blocks = glob("blocks", T.I8PP, ir.Constant(T.I8PP, None))
        self.stride = glob("stride", i64, self.c(0))
        self.mutex = glob("mutex", _OPAQUE, ir.Constant(_OPAQUE, None))
        self.cond = glob("cond", _OPAQUE, ir.Constant(_OPAQUE, None))

        def ext(name, ret, args):
            return ir.Function(m, ir.FunctionType(ret, args), name)
        self.getpid = ext("getpid", i32, [])
        self.sched_yield = ext("sched_yield", i32, [])
        self.pthread_create = ext("pthread_create", i32,
                                  [i64.as_pointer(), T.I8P, TASK.as_pointer(), T.I8P])
        self.pthread_detach = ext("pthread_detach", i32, [i64])
        self.mutex_init = ext("pthread_mutex_init", i32, [T.I8P, T.I8P])
        self.mutex_lock = ext("pthread_mutex_lock", i32, [T.I8P])
        self.mutex_unlock = ext("pthread_mutex_unlock", i32, [T.I8P])
        self.cond_init = ext("pthread_cond_init", i32, [T.I8P, T.I8P])
        self.cond_wait = ext("pthread_cond_wait", i32, [T.I8P, T.I8P])
        self.cond_broadcast = ext("pthread_cond_broadcast", i32, [T.I8P])
        self.fpenv = glob("fpenv", i32, ir.Constant(i32, 0))
        self.stmxcsr = self.ldmxcsr = None
        if triple.startswith(("x86_64", "i386", "i686")):
            self.pause_fn = ext("llvm.x86.sse2.pause", ir.VoidType(), [])
            self.pause_args = []
            self.stmxcsr = ext("llvm.x86.sse.stmxcsr", ir.VoidType(), [T.I8P])
            self.ldmxcsr = ext("llvm.x86.sse.ldmxcsr", ir.VoidType(), [T.I8P])
        elif triple.startswith(("aarch64", "arm64")):
            self.pause_fn = ext("llvm.aarch64.hint", ir.VoidType(), [i32])
            self.pause_args = [ir.Constant(i32, 1)]    # yield
        else:
            self.pause_fn = None
        self.run_blocks = self._run_blocks()
        self.worker = self._worker()
        self._run()

    # ---- helpers -------------------------------------------------------------------------
    def pause(self, b):
        if self.pause_fn is not None:
            b.call(self.pause_fn, self.pause_args)

    def ptr(self, b, g):
        return b.bitcast(g, T.I8P)

    def claimable(self, b, v):
        nxt = b.and_(v, self.c(0xFFFF))
        n = b.and_(b.lshr(v, self.c(16)), self.c(0xFFFF))
        return b.icmp_unsigned("<", nxt, n)

    # ---- void run_blocks(): claim and run blocks of the current job until none is left
    def _run_blocks(self):
        c = self.c
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), []), "hlo_pool.run_blocks")
        fn.linkage = "internal"
        entry = fn.append_basic_block("entry")
        head, claim, run, out = (fn.append_basic_block(n)
                                 for n in ("head", "claim", "run", "out"))
        b = ir.IRBuilder(entry)
        v0 = b.load_atomic(self.state, "acquire", 8)
        b.branch(head)
        b.position_at_end(head)
        v = b.phi(T.I64)
        v.add_incoming(v0, entry)
        b.cbranch(self.claimable(b, v), claim, out)
        b.position_at_end(claim)
        res = b.cmpxchg(self.state, v, b.add(v, c(1)), "acq_rel", "acquire")
        seen, ok = b.extract_value(res, 0), b.extract_value(res, 1)
        v.add_incoming(seen, claim)
        b.cbranch(ok, run, head)
        b.position_at_end(run)
        i = b.and_(v, c(0xFFFF))
        task = b.load(self.task)
        blocks = b.load(self.blocks)
        stride = b.load(self.stride)
        if self.ldmxcsr is not None:     # the caller's rounding and denormal modes
            b.call(self.ldmxcsr, [self.ptr(b, self.fpenv)])
        b.call(task, [b.bitcast(b.gep(blocks, [b.mul(i, stride)]), T.I8P)])
        b.atomic_rmw("add", self.done, c(1), "release")
        v.add_incoming(b.load_atomic(self.state, "acquire", 8), run)
        b.branch(head)
        b.position_at_end(out)
        b.ret_void()
        return fn

    # ---- i8* worker(i8*): run blocks, spin, sleep; forever
    def _worker(self):
        c = self.c
        fn = ir.Function(self.m, TASK, "hlo_pool.worker")
        fn.linkage = "internal"
        entry = fn.append_basic_block("entry")
        top, spin, spin_more, spun, spun_idle, sleep, wait, block, woke = (
            fn.append_basic_block(n) for n in
            ("top", "spin", "spin_more", "spun", "spun_idle", "sleep", "wait", "block",
             "woke"))
        b = ir.IRBuilder(entry)
        b.branch(top)
        b.position_at_end(top)
        b.call(self.run_blocks, [])
        # spin only while fewer than `max_spinners` workers do (no more than the CPUs)
        others = b.atomic_rmw("add", self.spinning, c(1), "monotonic")
        b.cbranch(b.icmp_unsigned("<", others, b.load(self.max_spinners)), spin, spun_idle)
        b.position_at_end(spin)
        k = b.phi(T.I64)
        k.add_incoming(c(0), top)
        v = b.load_atomic(self.state, "monotonic", 8)
        b.cbranch(self.claimable(b, v), spun, spin_more)
        b.position_at_end(spin_more)
        self.pause(b)
        k1 = b.add(k, c(1))
        k.add_incoming(k1, spin_more)
        b.cbranch(b.icmp_unsigned("<", k1, c(WORKER_SPIN)), spin, spun_idle)
        b.position_at_end(spun)
        b.atomic_rmw("sub", self.spinning, c(1), "monotonic")
        b.branch(top)
        b.position_at_end(spun_idle)
        b.atomic_rmw("sub", self.spinning, c(1), "monotonic")
        b.branch(sleep)
        b.position_at_end(sleep)
        b.call(self.mutex_lock, [self.ptr(b, self.mutex)])
        b.atomic_rmw("add", self.sleepers, c(1), "seq_cst")
        b.branch(wait)
        b.position_at_end(wait)
        v = b.load_atomic(self.state, "seq_cst", 8)
        b.cbranch(self.claimable(b, v), woke, block)
        b.position_at_end(block)
        b.call(self.cond_wait, [self.ptr(b, self.cond), self.ptr(b, self.mutex)])
        b.branch(wait)
        b.position_at_end(woke)
        b.atomic_rmw("sub", self.sleepers, c(1), "seq_cst")
        b.call(self.mutex_unlock, [self.ptr(b, self.mutex)])
        b.branch(top)
        return fn

    # ---- void hlo_pool_run(task, blocks, nblocks, stride)
    def _run(self):
        c = self.c
        fn = ir.Function(self.m, RUN_TYPE, POOL_RUN)
        task, blocks, n, stride = fn.args
        bb = {name: fn.append_basic_block(name) for name in (
            "entry", "try", "same", "other", "take", "fresh", "owned", "spawn",
            "spawn_one", "spawned", "publish", "wake", "work", "wait", "wait_more",
            "wait_pause", "wait_yield", "finish", "serial", "serial_body", "serial_end")}
        b = ir.IRBuilder(bb["entry"])
        tid = b.alloca(T.I64)
        small = b.or_(b.icmp_signed("<=", n, c(1)), b.icmp_signed(">", n, c(MAX_BLOCKS)))
        b.cbranch(small, bb["serial"], bb["try"])

        # the pool: ours (idle), ours (busy), or another process's (a fork's parent)
        b.position_at_end(bb["try"])
        pid = b.sext(b.call(self.getpid, []), T.I64)
        mine = b.shl(pid, c(1))
        v = b.load_atomic(self.owner, "acquire", 8)
        b.cbranch(b.icmp_unsigned("==", v, mine), bb["same"], bb["other"])
        b.position_at_end(bb["same"])
        ok = b.extract_value(b.cmpxchg(self.owner, mine, b.or_(mine, c(1)), "acq_rel",
                                       "monotonic"), 1)
        b.cbranch(ok, bb["owned"], bb["serial"])
        b.position_at_end(bb["other"])
        # another pid (or none yet): take the pool over; ours and busy: serial
        b.cbranch(b.icmp_unsigned("!=", b.lshr(v, c(1)), pid), bb["take"], bb["serial"])
        b.position_at_end(bb["take"])
        ok = b.extract_value(b.cmpxchg(self.owner, v, b.or_(mine, c(1)), "acq_rel",
                                       "monotonic"), 1)
        b.cbranch(ok, bb["fresh"], bb["serial"])

        b.position_at_end(bb["fresh"])
        null = ir.Constant(T.I8P, None)
        b.call(self.mutex_init, [self.ptr(b, self.mutex), null])
        b.call(self.cond_init, [self.ptr(b, self.cond), null])
        b.store(c(0), self.workers)
        b.store_atomic(c(0), self.sleepers, "monotonic", 8)
        b.store_atomic(c(0), self.spinning, "monotonic", 8)
        b.store_atomic(c(0), self.state, "monotonic", 8)
        b.branch(bb["owned"])

        # enough workers for n - 1 blocks (a thread that cannot start: fewer workers)
        b.position_at_end(bb["owned"])
        want = b.sub(n, c(1))
        want = b.select(b.icmp_signed(">", want, c(MAX_WORKERS)), c(MAX_WORKERS), want)
        b.branch(bb["spawn"])
        b.position_at_end(bb["spawn"])
        have = b.load(self.workers)
        b.cbranch(b.icmp_signed("<", have, want), bb["spawn_one"], bb["publish"])
        b.position_at_end(bb["spawn_one"])
        rc = b.call(self.pthread_create, [tid, null, self.worker, null])
        b.cbranch(b.icmp_signed("==", rc, ir.Constant(T.I32, 0)), bb["spawned"],
                  bb["publish"])
        b.position_at_end(bb["spawned"])
        b.call(self.pthread_detach, [b.load(tid)])
        b.store(b.add(have, c(1)), self.workers)
        b.branch(bb["spawn"])

        # publish the job: fields first, then the state word (a new generation)
        b.position_at_end(bb["publish"])
        b.store(task, self.task)
        b.store(blocks, self.blocks)
        b.store(stride, self.stride)
        if self.stmxcsr is not None:
            b.call(self.stmxcsr, [self.ptr(b, self.fpenv)])
        b.store_atomic(c(0), self.done, "monotonic", 8)
        old = b.load_atomic(self.state, "monotonic", 8)
        gen = b.add(b.lshr(old, c(32)), c(1))
        b.store_atomic(b.or_(b.shl(gen, c(32)), b.shl(n, c(16))), self.state, "seq_cst", 8)
        asleep = b.load_atomic(self.sleepers, "seq_cst", 8)
        b.cbranch(b.icmp_unsigned("!=", asleep, c(0)), bb["wake"], bb["work"])
        b.position_at_end(bb["wake"])
        # a worker that saw the old state holds the mutex until it waits: once we have
        # held it, every such worker waits, and the broadcast (outside the mutex, so a
        # woken worker does not block on it) reaches it
        b.call(self.mutex_lock, [self.ptr(b, self.mutex)])
        b.call(self.mutex_unlock, [self.ptr(b, self.mutex)])
        b.call(self.cond_broadcast, [self.ptr(b, self.cond)])
        b.branch(bb["work"])

        # the caller claims blocks too, then waits for the ones the workers took
        b.position_at_end(bb["work"])
        b.call(self.run_blocks, [])
        b.branch(bb["wait"])
        b.position_at_end(bb["wait"])
        k = b.phi(T.I64)
        k.add_incoming(c(0), bb["work"])
        finished = b.icmp_unsigned("==", b.load_atomic(self.done, "acquire", 8), n)
        b.cbranch(finished, bb["finish"], bb["wait_more"])
        b.position_at_end(bb["wait_more"])
        b.cbranch(b.icmp_unsigned("<", k, c(CALLER_SPIN)), bb["wait_pause"],
                  bb["wait_yield"])
        b.position_at_end(bb["wait_pause"])
        self.pause(b)
        k.add_incoming(b.add(k, c(1)), bb["wait_pause"])
        b.branch(bb["wait"])
        b.position_at_end(bb["wait_yield"])
        b.call(self.sched_yield, [])
        k.add_incoming(k, bb["wait_yield"])
        b.branch(bb["wait"])
        b.position_at_end(bb["finish"])
        b.store_atomic(mine, self.owner, "release", 8)
        b.ret_void()

        # no pool: every block on the calling thread, in order
        b.position_at_end(bb["serial"])
        b.cbranch(b.icmp_signed(">", n, c(0)), bb["serial_body"], bb["serial_end"])
        b.position_at_end(bb["serial_body"])
        i = b.phi(T.I64)
        i.add_incoming(c(0), bb["serial"])
        b.call(task, [b.bitcast(b.gep(blocks, [b.mul(i, stride)]), T.I8P)])
        i1 = b.add(i, c(1))
        i.add_incoming(i1, bb["serial_body"])
        b.cbranch(b.icmp_signed("<", i1, n), bb["serial_body"], bb["serial_end"])
        b.position_at_end(bb["serial_end"])
        b.ret_void()
        return fn


def pool_module(triple: str, cpus: int) -> ir.Module:
    """The pool's LLVM module for a target triple (``pause`` is per architecture) and a
    process allowed ``cpus`` CPUs (at most ``cpus - 1`` workers spin while idle: more
    would take the CPUs from the threads with work)."""
    return _Pool(triple, max(0, cpus - 1)).m
