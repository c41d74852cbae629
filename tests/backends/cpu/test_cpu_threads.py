"""Large kernels split their outermost loop over threads: every thread count gives the
same bits, agreeing with the interpreter; small kernels, in-place kernels and
``xla_cpu_multi_thread_eigen=false`` stay on one thread."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.errors import HloError
from hlo_opt.flags import DebugOptions
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import THREADS_ENV, CpuExecutable, kernel_threads  # noqa: E402

# outer trips 7 (row-major) and 5 (column-major): chunks of unequal size for 2 and 3 threads
BIG = """
HloModule big
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[7,40000]{1,0} parameter(0)
  b = f32[7,40000]{1,0} parameter(1)
  m = f32[7,40000]{1,0} multiply(a, b)
  sum = f32[7,40000]{1,0} add(m, a)
  c = f32[60000,5]{0,1} parameter(2)
  t = f32[60000,5]{0,1} negate(c)
  z = f32[] constant(0)
  r = f32[7]{0} reduce(m, z), dimensions={1}, to_apply=add
  small = f32[7]{0} add(r, r)
  ROOT out = (f32[7,40000]{1,0}, f32[60000,5]{0,1}, f32[7]{0}, f32[7]{0}) tuple(sum, t, r, small)
}
"""


def _module():
    return parse_hlo_modules(BIG, "big.hlo")[0]


def _run(monkeypatch, tmp_path, threads, options=None):
    monkeypatch.setenv(THREADS_ENV, str(threads))
    m = _module()
    exe = CpuExecutable(m, cache_dir=str(tmp_path), debug_options=options)
    return exe, exe.run(random_arguments(m, seed=11))


def test_thread_counts_agree_bitwise_and_with_the_interpreter(monkeypatch, tmp_path):
    m = _module()
    args = random_arguments(m, seed=11)
    ref = Interpreter(m).run(args)
    outs = {}
    for n in (1, 2, 3):
        exe, outs[n] = _run(monkeypatch, tmp_path, n)
        assert exe.threads == n
        native = exe.meta["native"]
        parallel = {k for k, v in native.items() if "parallel" in v}
        # the elementwise ops and the 280,000-element reduction split; the 7-element
        # add does not
        assert {"m", "sum", "t", "r"} <= parallel and "small" not in parallel, native
        assert f"split over {n} threads" in exe.report()
    for n in (2, 3):
        for a, b in zip(outs[1], outs[n]):
            np.testing.assert_array_equal(a, b)
    for k in (0, 1):   # elementwise: bitwise as the interpreter
        np.testing.assert_array_equal(outs[3][k], np.asarray(ref[k]))
    for k in (2, 3):   # the sum's order differs (8 partial sums, as XLA:CPU)
        np.testing.assert_allclose(outs[3][k], np.asarray(ref[k]), rtol=1e-4, atol=1e-3)


def test_cached_object_serves_every_thread_count(monkeypatch, tmp_path):
    _, one = _run(monkeypatch, tmp_path, 1)
    exe, two = _run(monkeypatch, tmp_path, 2)
    assert exe.cache_hit and exe.threads == 2
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_multi_thread_eigen_off_and_bad_env(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "4")
    assert kernel_threads(DebugOptions()) == 4
    assert kernel_threads(DebugOptions(xla_cpu_multi_thread_eigen=False)) == 1
    monkeypatch.delenv(THREADS_ENV)
    assert kernel_threads(DebugOptions()) >= 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(HloError, match=THREADS_ENV):
            kernel_threads(DebugOptions())


def test_small_and_in_place_kernels_stay_serial(tmp_path):
    m = parse_hlo_modules("""
HloModule dus
ENTRY e {
  a = f32[600,600]{1,0} parameter(0)
  u = f32[500,500]{1,0} parameter(1)
  i = s32[] parameter(2)
  ROOT d = f32[600,600]{1,0} dynamic-update-slice(a, u, i, i)
}
""", "dus.hlo")[0]
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not any("parallel" in v for v in exe.meta["native"].values()), exe.meta["native"]
    args = random_arguments(m, seed=2)
    np.testing.assert_array_equal(exe.run(args)[0], np.asarray(Interpreter(m).run(args)[0]))


def test_stage_hlo_backend_names_the_split_kernels(tmp_path):
    from click.testing import CliRunner

    from hlo_opt.cli import main
    path = tmp_path / "big.hlo"
    path.write_text(BIG)
    r = CliRunner().invoke(main, [str(path), "--platform=cpu", "--stage=hlo-backend"],
                           catch_exceptions=False, standalone_mode=False)
    assert "parallel outer loop" in r.output, r.output[-2000:]
