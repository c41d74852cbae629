"""CPU backend behaviour: the disk cache, errors, flags, the CLI surface (--platform,
--stage, --list-stages, run --backend cpu, --xla_dump_to), the cpu pipeline."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from click.testing import CliRunner

from hlo_opt.api import load
from hlo_opt.backends.interpreter import Interpreter
from hlo_opt.backends.interpreter.literals import random_arguments
from hlo_opt.cli import main
from hlo_opt.errors import HloError
from hlo_opt.flags import DebugOptions
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import SAMPLES

pytest.importorskip("llvmlite", reason="the cpu backend needs llvmlite")
from hlo_opt.backends.cpu import CpuExecutable, build  # noqa: E402
from hlo_opt.backends.cpu.cache import ObjectCache  # noqa: E402

SOFTMAX = str(SAMPLES / "softmax.hlo")

SMALL = """
HloModule small
ENTRY e {
  x = f32[4,3]{1,0} parameter(0)
  y = f32[4,3]{0,1} parameter(1)
  a = f32[4,3]{1,0} add(x, y)
  ROOT t = f32[3,4]{1,0} transpose(a), dimensions={1,0}
}
"""


def _small():
    return parse_hlo_modules(SMALL, "small.hlo")[0]


def test_layouts_in_and_out(tmp_path):
    m = _small()
    args = random_arguments(m, seed=3)
    got = CpuExecutable(m, cache_dir=str(tmp_path)).run(args)
    np.testing.assert_array_equal(got[0], (args[0] + args[1]).T)


def test_cache_hit_skips_llvm_and_corrupt_entries_are_rebuilt(tmp_path, monkeypatch):
    m = _small()
    args = random_arguments(m, seed=1)
    first = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not first.cache_hit
    from hlo_opt.backends.cpu import compiler
    calls = []
    monkeypatch.setattr(compiler, "optimize", lambda *a, **k: calls.append(a))
    second = CpuExecutable(m, cache_dir=str(tmp_path))
    assert second.cache_hit and not calls
    np.testing.assert_array_equal(first.run(args)[0], second.run(args)[0])
    monkeypatch.undo()
    (obj,) = glob.glob(os.path.join(tmp_path, "*.o"))
    with open(obj, "r+b") as f:  # flip bytes in the middle of the object
        f.seek(100)
        f.write(b"\xff\xff\xff\xff")
    third = CpuExecutable(m, cache_dir=str(tmp_path))
    assert not third.cache_hit and third.cache.dropped == 1
    np.testing.assert_array_equal(third.run(args)[0], first.run(args)[0])
    assert CpuExecutable(m, cache_dir=str(tmp_path)).cache_hit


def test_cache_size_cap(tmp_path):
    c = ObjectCache(str(tmp_path), max_bytes=3000)
    for i in range(5):
        c.put(f"k{i}", bytes(1000), {"i": i})
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(tmp_path, "*")))
    assert total <= 3000 and c.get("k4") is not None and c.get("k0") is None


def test_no_cache_writes_nothing(tmp_path):
    CpuExecutable(_small(), cache=False, cache_dir=str(tmp_path))
    assert not os.listdir(tmp_path)


def test_fast_math_flags_follow_xla():
    m = load(SOFTMAX)
    plain = build(m, DebugOptions())[1].ir_no_opt
    assert " fast " not in plain and "reassoc" not in plain
    fm = build(m, DebugOptions(xla_cpu_enable_fast_math=True))[1].ir_no_opt
    assert "fadd reassoc contract nsz" in fm or "fsub reassoc contract nsz" in fm


def test_unlowerable_instruction_is_one_clear_error():
    text = """
HloModule bad
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="definitely_not_a_target"
}
"""
    m = parse_hlo_modules(text, "bad.hlo")[0]
    exe = CpuExecutable(m, cache=False)
    with pytest.raises(HloError) as e:
        exe.run([np.zeros(4, np.float32)])
    assert "%c" in str(e.value) or "definitely_not_a_target" in str(e.value)


def test_native_while_and_conditional_run_in_one_call():
    m = load(str(SAMPLES / "while_loop.hlo"))
    exe = CpuExecutable(m, cache=False)
    args = random_arguments(m, seed=0)
    for g, e in zip(exe.run(args), Interpreter(m).run(args)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    assert exe.host.calls == 0 and "while" in exe.meta["native"].values()


# ---- CLI ---------------------------------------------------------------------------------
def _cli(*args):
    r = CliRunner().invoke(main, list(args), catch_exceptions=False, standalone_mode=False)
    return r


def test_list_stages_and_unknown_platform_or_stage():
    r = _cli(SOFTMAX, "--platform=cpu", "--list-stages")
    names = [line.split("\t")[0] for line in r.output.splitlines()]
    assert names == ["hlo", "html", "hlo-backend", "buffer-assignment",
                     "llvm-before-optimizations", "llvm", "asm"]
    with pytest.raises(HloError, match=r"unknown --platform=tpu \(known: .*cpu.*transforms"):
        _cli(SOFTMAX, "--platform=tpu")
    with pytest.raises(HloError, match="known: hlo, html"):
        _cli(SOFTMAX, "--platform=cpu", "--stage=ptx")


@pytest.mark.parametrize("stage,needle", [
    ("hlo", "fusion"), ("buffer-assignment", "BufferAssignment"),
    ("llvm-before-optimizations", "define void @\"hlo_entry\""),
    ("llvm", "define void @hlo_entry"), ("asm", "hlo_entry:"),
    ("hlo-backend", "kernel row_reduction")])
def test_stages(stage, needle):
    r = _cli(SOFTMAX, "--platform=cpu", f"--stage={stage}")
    assert needle in r.output


def test_run_backend_cpu_compares_and_dumps(tmp_path):
    r = _cli("run", SOFTMAX, "--backend", "cpu", "--compare", "interpreter", "--no-cache",
             f"--xla_dump_to={tmp_path}")
    assert "1/1 runs passed" in r.output
    names = os.listdir(tmp_path)
    for suffix in ("ir-no-opt.ll", "ir-with-opt.ll",
                   "cpu_after_optimizations-buffer-assignment.txt"):
        assert any(n.endswith(suffix) for n in names), (suffix, names)


def test_pipelines_cpu_lists_not_ported():
    r = _cli("pipelines", "cpu")
    assert "cpu-instruction-fusion" in r.output and "not ported" in r.output


def test_honor_flags_drop_fast_math_guarantees():
    from hlo_opt.backends.cpu.compiler import fast_math_flags
    assert fast_math_flags(DebugOptions()) == ()
    o = DebugOptions(xla_cpu_enable_fast_math=True, xla_cpu_fast_math_honor_nans=False,
                     xla_cpu_fast_math_honor_functions=False)
    assert fast_math_flags(o) == ("reassoc", "contract", "nsz", "nnan", "afn")


def test_optimization_level_zero_still_runs():
    m = load(SOFTMAX)
    args = random_arguments(m, seed=0)
    exe = CpuExecutable(m, DebugOptions(xla_backend_optimization_level=0), cache=False)
    np.testing.assert_allclose(exe.run(args)[0], Interpreter(m).run(args)[0], rtol=1e-5,
                               atol=1e-6)


NESTED_VARIADIC_MOF = """
HloModule nested_variadic_mof
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  ge = pred[] compare(v0, v1), direction=GE
  v = f32[] select(ge, v0, v1)
  i = s32[] select(ge, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  x = f32[5,7] parameter(0)
  io = s32[5,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  z = s32[] constant(0)
  am = (f32[5], s32[5]) reduce(x, io, ninf, z), dimensions={1}, to_apply=argmax
  zf = f32[] constant(0)
  e = f32[5,7] exponential(x)
  s = f32[5] reduce(e, zf), dimensions={1}, to_apply=sum
  ROOT t = ((f32[5], s32[5]), f32[5]) tuple(am, s)
}
ENTRY e {
  p = f32[5,7] parameter(0)
  f = ((f32[5], s32[5]), f32[5]) fusion(p), kind=kInput, calls=fused
  g0 = (f32[5], s32[5]) get-tuple-element(f), index=0
  g1 = f32[5] get-tuple-element(f), index=1
  ROOT r = ((f32[5], s32[5]), f32[5]) tuple(g0, g1)
}
"""


def test_multi_output_fusion_with_a_variadic_reduce_output(tmp_path):
    # The gpu pipeline's nested form: a tuple-shaped (variadic reduce) element of the
    # fusion's root tuple gives one kernel output per leaf.
    m = parse_hlo_modules(NESTED_VARIADIC_MOF, "nested.hlo")[0]
    args = random_arguments(m, seed=5)
    got = CpuExecutable(m, cache_dir=str(tmp_path)).run(args)
    want = Interpreter(m).run(args)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)
