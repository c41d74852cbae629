"""Native sort: stable merge sort with a generated comparator, every operand permuted,
bitwise as the interpreter (duplicate keys, NaNs, -0/+0, TOTALORDER, multi-key
comparators, a column-major layout), with no host library call."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.text.parser import parse_hlo_modules

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable  # noqa: E402

SORTS = """
HloModule sorts
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT
}
tot {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
multi {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  lt2 = pred[] compare(c, d), direction=GT
  both = pred[] and(eq, lt2)
  ROOT r = pred[] or(lt, both)
}
ENTRY e {
  k = f32[5,37]{1,0} parameter(0)
  v = s32[5,37]{1,0} iota(), iota_dimension=1
  s1 = (f32[5,37]{1,0}, s32[5,37]{1,0}) sort(k, v), dimensions={1}, to_apply=lt, is_stable=true
  kc = f32[40,6]{0,1} parameter(1)
  s2 = f32[40,6]{0,1} sort(kc), dimensions={0}, to_apply=gt
  s3 = f32[40,6]{0,1} sort(kc), dimensions={0}, to_apply=tot
  ki = s32[3,50]{1,0} parameter(2)
  kf = f32[3,50]{1,0} parameter(3)
  s4 = (s32[3,50]{1,0}, f32[3,50]{1,0}) sort(ki, kf), dimensions={1}, to_apply=multi
  ROOT t = ((f32[5,37]{1,0}, s32[5,37]{1,0}), f32[40,6]{0,1}, f32[40,6]{0,1}, (s32[3,50]{1,0}, f32[3,50]{1,0})) tuple(s1, s2, s3, s4)
}
"""


def test_sorts_match_the_interpreter_bitwise(tmp_path):
    m = parse_hlo_modules(SORTS, "sorts.hlo")[0]
    args = random_arguments(m, seed=1)
    args[0] = np.round(args[0] * 2) / 2          # many equal keys: stability shows
    args[1] = args[1].copy()
    args[1][::7, 1] = np.nan
    args[1][3, :] = -0.0
    args[1][4, ::2] = 0.0
    args[2] = (args[2] % 4).astype(np.int32)     # ties for the second key
    ref = Interpreter(m).run(args)
    exe = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not exe.meta["host_reasons"], exe.report()
    assert sum("sort" in v for v in exe.meta["native"].values()) == 4
    got = exe.run(args)
    assert len(got) == len(ref) == 6
    for i, (g, r) in enumerate(zip(got, ref)):
        r = np.ascontiguousarray(np.asarray(r))
        assert g.shape == r.shape and g.dtype == r.dtype, i
        assert np.array_equal(np.ascontiguousarray(g).view(np.uint8), r.view(np.uint8)), i


def test_stage_hlo_backend_names_the_native_sort(tmp_path):
    from click.testing import CliRunner

    from hlo_opt.cli import main
    path = tmp_path / "sorts.hlo"
    path.write_text(SORTS)
    r = CliRunner().invoke(main, [str(path), "--platform=cpu", "--stage=hlo-backend"],
                           catch_exceptions=False, standalone_mode=False)
    assert "host library calls: 0" in r.output
    assert r.output.count("sort (merge sort, generated comparator)") == 4, r.output[-2000:]
