"""The persistent worker pool behind kernels split over threads (``pool.py``): every block
runs exactly once whatever the thread count, many calls in a row, two Python threads at
once (one gets the pool, the other runs serially: no deadlock), a forked child (no
workers of its own: it starts a fresh pool); results as the interpreter's."""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from llvmlite import ir  # noqa: E402

from hlo_opt.backends.cpu import THREADS_ENV, CpuExecutable, compiler  # noqa: E402
from hlo_opt.backends.cpu import irtypes as T  # noqa: E402
from hlo_opt.backends.cpu.parallel import threads_global  # noqa: E402
from hlo_opt.backends.cpu.pool import MAX_BLOCKS, TASK, declare_run  # noqa: E402

from .test_cpu_threads import BIG  # noqa: E402

# row-wise softmax over 600 rows: a row-normalisation kernel split over threads
SOFTMAX = """
HloModule softmax
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] maximum(x, y)
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[600,512]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[600]{0} reduce(a, ninf), dimensions={1}, to_apply=max
  mb = f32[600,512]{1,0} broadcast(mx), dimensions={0}
  d = f32[600,512]{1,0} subtract(a, mb)
  ex = f32[600,512]{1,0} exponential(d)
  z = f32[] constant(0)
  s = f32[600]{0} reduce(ex, z), dimensions={1}, to_apply=add
  sb = f32[600,512]{1,0} broadcast(s), dimensions={0}
  ROOT r = f32[600,512]{1,0} divide(ex, sb)
}
"""

# a thread that hangs (a deadlock) fails the test after this long instead of hanging it
_HANG_GUARD_S = 600


def _exe(text, tmp_path, monkeypatch, threads):
    monkeypatch.setenv(THREADS_ENV, str(threads))
    m = parse_hlo_modules(text, "m.hlo")[0]
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert exe.threads == threads
    assert any("parallel" in v for v in exe.meta["native"].values()), exe.meta["native"]
    return m, exe


def _same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _close_to_interpreter(m, args, got):
    """Reductions sum in another order than the interpreter."""
    for a, b in zip(got, Interpreter(m).run(args)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-3)


@pytest.fixture(scope="module")
def pool_counter():
    """``hlo_entry(i8** blocks, i64 n, i64 calls)`` calling ``hlo_pool_run`` ``calls``
    times over ``n`` blocks; block ``i`` holds a pointer to counter ``i``, which the
    task increments."""
    m = ir.Module(name="pool_counter")
    threads_global(m)
    task = ir.Function(m, TASK, "count")
    task.linkage = "internal"
    b = ir.IRBuilder(task.append_basic_block("entry"))
    slot = b.load(b.bitcast(task.args[0], T.I64.as_pointer().as_pointer()))
    b.store(b.add(b.load(slot), ir.Constant(T.I64, 1)), slot)
    b.ret(ir.Constant(T.I8P, None))
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8PP, T.I64, T.I64]), "hlo_entry")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    blocks, n, calls = fn.args
    b.cbranch(b.icmp_signed(">", calls, ir.Constant(T.I64, 0)), loop, done)
    b.position_at_end(loop)
    j = b.phi(T.I64)
    j.add_incoming(ir.Constant(T.I64, 0), entry)
    b.call(declare_run(m), [task, blocks, n, ir.Constant(T.I64, 1)])
    j1 = b.add(j, ir.Constant(T.I64, 1))
    j.add_incoming(j1, loop)
    b.cbranch(b.icmp_signed("<", j1, calls), loop, done)
    b.position_at_end(done)
    b.ret_void()
    tm = compiler.target_machine(2)
    m.triple, m.data_layout = tm.triple, str(tm.target_data)
    obj = compiler.emit_object(compiler.optimize(compiler.parse(str(m)), tm, 2), tm)
    linked = compiler.link(obj, tm, compiler.external_symbols())
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        linked.entry)

    def count(n, calls):
        counters = (ctypes.c_int64 * n)()
        blocks = (ctypes.c_void_p * n)(*[ctypes.addressof(counters) + 8 * i
                                         for i in range(n)])
        run(ctypes.addressof(blocks), n, calls)
        return list(counters)
    count.linked = linked        # keeps the code alive
    return count


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 17])
def test_every_block_runs_once_per_call(pool_counter, n):
    assert pool_counter(n, 2000) == [2000] * n


def test_more_blocks_than_the_state_word_holds_run_serially(pool_counter):
    assert pool_counter(MAX_BLOCKS + 5, 2) == [2] * (MAX_BLOCKS + 5)


def test_two_python_threads_share_the_pool(pool_counter):
    """ctypes lets go of the GIL: both threads are in the pool's code at once, the one
    that finds it busy runs its blocks itself."""
    out = {}
    start = threading.Barrier(2)

    def work(key, n):
        start.wait()
        out[key] = pool_counter(n, 3000)
    ts = [threading.Thread(target=work, args=(k, n)) for k, n in (("a", 2), ("b", 3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(_HANG_GUARD_S)
    assert not any(t.is_alive() for t in ts), "deadlock: a thread never returned"
    assert out == {"a": [3000] * 2, "b": [3000] * 3}


def test_many_calls_in_a_row_give_the_same_bits(tmp_path, monkeypatch):
    m, serial = _exe(BIG, tmp_path, monkeypatch, 1)
    args = random_arguments(m, seed=5)
    want = serial.run(args)
    _, exe = _exe(BIG, tmp_path, monkeypatch, 2)
    for _ in range(100):
        _same(exe.run(args), want)


def test_thread_count_changes_between_executables(tmp_path, monkeypatch):
    """1, 2, 3 and more threads than chunks (outer trips 7 and 5, 16 threads), in an
    order that grows and shrinks the pool's demand; the same bits every time."""
    m, serial = _exe(BIG, tmp_path, monkeypatch, 1)
    args = random_arguments(m, seed=6)
    want = serial.run(args)
    _close_to_interpreter(m, args, want)
    for n in (3, 2, 16, 1, 3, 16, 2):
        _, exe = _exe(BIG, tmp_path, monkeypatch, n)
        assert exe.cache_hit        # a cached object binds the pool when it is loaded
        for _ in range(3):
            _same(exe.run(args), want)


def test_two_python_threads_run_parallel_executables_at_once(tmp_path, monkeypatch):
    cases = []
    for text, seed in ((BIG, 7), (SOFTMAX, 8), (BIG, 9)):
        m, exe = _exe(text, tmp_path, monkeypatch, 3)
        args = random_arguments(m, seed=seed)
        want = exe.run(args)
        _close_to_interpreter(m, args, want)
        cases.append((exe, args, want))
    errors = []
    start = threading.Barrier(len(cases))

    def work(exe, args, want):
        try:
            start.wait()
            for _ in range(40):
                _same(exe.run(args), want)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
    ts = [threading.Thread(target=work, args=c) for c in cases]
    for t in ts:
        t.start()
    for t in ts:
        t.join(_HANG_GUARD_S)
    assert not any(t.is_alive() for t in ts), "deadlock: a thread never returned"
    assert not errors, errors


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_parallel_executables(tmp_path, monkeypatch, pool_counter):
    m, exe = _exe(BIG, tmp_path, monkeypatch, 3)
    args = random_arguments(m, seed=10)
    want = exe.run(args)
    assert pool_counter(3, 100) == [100] * 3     # the parent's workers exist
    pid = os.fork()
    if pid == 0:   # the child: no pytest from here on, only an exit status
        code = 1
        try:
            for _ in range(20):
                _same(exe.run(args), want)
            if pool_counter(3, 500) == [500] * 3:
                code = 0
        except BaseException as e:  # noqa: BLE001
            print(f"forked child failed: {e!r}", file=sys.stderr)
        finally:
            os._exit(code)
    status = None
    for _ in range(_HANG_GUARD_S * 10):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("deadlock: the forked child never exited")
    assert os.waitstatus_to_exitcode(status) == 0
    _same(exe.run(args), want)                   # the parent's pool still works
    assert pool_counter(3, 100) == [100] * 3


_EXIT_SCRIPT = """
import sys, threading
from hlo_opt.backends.cpu import CpuExecutable
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules
m = parse_hlo_modules(sys.stdin.read(), "big.hlo")[0]
args = random_arguments(m, seed=1)
exes = [CpuExecutable(m, cache_dir=sys.argv[1]) for _ in range(2)]
exes[0].run(args)
def forever():
    while True:
        exes[1].run(args)
threading.Thread(target=forever, daemon=True).start()   # still in the pool at exit
for _ in range(20):
    exes[0].run(args)
print("ok")
"""


def test_the_interpreter_exits_with_workers_alive(tmp_path):
    import subprocess
    env = dict(os.environ, **{THREADS_ENV: "3"})
    r = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path)], input=BIG,
                       capture_output=True, text=True, env=env, timeout=_HANG_GUARD_S)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _mxcsr_setter():
    """``hlo_entry(i32 mode) -> i32``: sets this thread's MXCSR, returns the old one."""
    m = ir.Module(name="mxcsr")
    threads_global(m)
    fn = ir.Function(m, ir.FunctionType(T.I32, [T.I32]), "hlo_entry")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    st = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8P]), "llvm.x86.sse.stmxcsr")
    ld = ir.Function(m, ir.FunctionType(ir.VoidType(), [T.I8P]), "llvm.x86.sse.ldmxcsr")
    old, new = b.alloca(T.I32), b.alloca(T.I32)
    b.call(st, [b.bitcast(old, T.I8P)])
    b.store(fn.args[0], new)
    b.call(ld, [b.bitcast(new, T.I8P)])
    b.ret(b.load(old))
    tm = compiler.target_machine(2)
    m.triple, m.data_layout = tm.triple, str(tm.target_data)
    obj = compiler.emit_object(compiler.optimize(compiler.parse(str(m)), tm, 2), tm)
    linked = compiler.link(obj, tm, {})
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(linked.entry)
    fn.linked = linked
    return fn


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="MXCSR is x86's")
def test_blocks_run_under_the_callers_denormal_mode(tmp_path, monkeypatch):
    """Workers started before the caller set flush-to-zero still flush in its blocks:
    the 280,000 products of 1e-20 * 1e-20 (denormal) sum to 0 on every thread."""
    m, serial = _exe(BIG, tmp_path, monkeypatch, 1)
    args = random_arguments(m, seed=12)
    args[0] = (np.abs(args[0]) + 1).astype(np.float32) * np.float32(1e-20)
    args[1] = (np.abs(args[1]) + 1).astype(np.float32) * np.float32(1e-20)
    exes = [_exe(BIG, tmp_path, monkeypatch, n)[1] for n in (2, 3, 16)]
    exes[0].run(args)                                    # workers started meanwhile
    assert np.all(serial.run(args)[2] > 0)               # denormals kept by default
    setter = _mxcsr_setter()
    old = setter(0)
    setter(old | 0x8040)                                 # flush to zero, denormals are zero
    try:
        want = serial.run(args)
        got = [[exe.run(args) for _ in range(10)] for exe in exes]
    finally:
        setter(old)
    assert np.all(want[2] == 0)
    for runs in got:
        for r in runs:
            _same(r, want)
