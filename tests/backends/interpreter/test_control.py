"""Control flow, calls, fusions, tuples, tokens, async wrappers and collectives."""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter import Interpreter, evaluator as evaluator_mod
from hlo_opt.errors import UnsupportedError

from .interp_util import run

WHILE = """HloModule w
%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %n = s32[] add(%i, %one)
  %x = f32[4] get-tuple-element(%s), index=1
  %h = f32[] constant(0.5)
  %hb = f32[4] broadcast(%h), dimensions={}
  %y = f32[4] multiply(%x, %hb)
  %c = f32[] constant(1)
  %cb = f32[4] broadcast(%c), dimensions={}
  %z = f32[4] add(%y, %cb)
  ROOT %t = (s32[], f32[4]) tuple(%n, %z)
}

%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %lim = s32[] constant(1000)
  ROOT %lt = pred[] compare(%i, %lim), direction=LT
}

ENTRY e {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %x)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %r = f32[4] get-tuple-element(%w), index=1
}"""


def test_while_runs_1000_iterations_and_plans_each_computation_once(monkeypatch):
    built = []
    original = evaluator_mod.Evaluator._build

    def spy(self, comp, batched):
        built.append(comp.name)
        return original(self, comp, batched)
    monkeypatch.setattr(evaluator_mod.Evaluator, "_build", spy)
    x = np.array([0.0, 2.0, -4.0, 8.0], np.float32)
    r = Interpreter(parse_hlo(WHILE)).run([x])[0]
    exp = x.copy()
    for _ in range(1000):
        exp = exp * np.float32(0.5) + np.float32(1)
    assert r.tolist() == exp.tolist()
    assert sorted(built) == ["body", "cond", "e"]


def test_while_attribute_order_does_not_matter():
    swapped = WHILE.replace("condition=%cond, body=%body", "body=%body, condition=%cond")
    x = np.zeros(4, np.float32)
    assert run(swapped, x).tolist() == run(WHILE, x).tolist()


COND = """HloModule c
%neg (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%x)
}
%dbl (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %d = f32[2] add(%x, %x)
}
%idn (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2] parameter(0)
}
ENTRY e {
  %p = pred[] parameter(0)
  %k = s32[] parameter(1)
  %x = f32[2] parameter(2)
  %a = f32[2] conditional(%p, %x, %x), false_computation=%neg, true_computation=%dbl
  %b = f32[2] conditional(%k, %x, %x, %x), branch_computations={%neg, %dbl, %idn}
  ROOT %t = (f32[2], f32[2]) tuple(%a, %b)
}"""


@pytest.mark.parametrize("pred,index,exp_a,exp_b", [
    (True, 0, [2, -4], [-1, 2]), (False, 1, [-1, 2], [2, -4]), (True, 2, [2, -4], [1, -2]),
    (False, 7, [-1, 2], [1, -2]), (False, -1, [-1, 2], [1, -2]),  # out of range: last
])
def test_conditional_pred_and_indexed(pred, index, exp_a, exp_b):
    x = np.array([1.0, -2.0], np.float32)
    a, b = run(COND, np.bool_(pred), np.int32(index), x)
    assert a.tolist() == exp_a and b.tolist() == exp_b


def test_call_fusion_tuple_and_barriers():
    text = """HloModule f
%fused (a: f32[3], b: f32[3]) -> f32[3] {
  %a = f32[3] parameter(0)
  %b = f32[3] parameter(1)
  %m = f32[3] multiply(%a, %b)
  ROOT %s = f32[3] subtract(%m, %a)
}
%callee (a: f32[3]) -> (f32[3], f32[3]) {
  %a = f32[3] parameter(0)
  %n = f32[3] negate(%a)
  ROOT %t = (f32[3], f32[3]) tuple(%a, %n)
}
ENTRY e {
  %x = f32[3] parameter(0)
  %y = f32[3] parameter(1)
  %f = f32[3] fusion(%x, %y), kind=kLoop, calls=%fused
  %c = (f32[3], f32[3]) call(%f), to_apply=%callee
  %o = (f32[3], f32[3]) opt-barrier(%c)
  %g = f32[3] get-tuple-element(%o), index=1
  %tok = token[] after-all()
  %d = f32[3] add-dependency(%g, %tok)
  %cp = f32[3] copy(%d)
  ROOT %r = ((f32[3], f32[3]), f32[3]) tuple(%o, %cp)
}"""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([2.0, 0.5, -1.0], np.float32)
    (first, second), third = run(text, x, y)
    f = [a * b - a for a, b in zip(x.tolist(), y.tolist())]
    assert first.tolist() == f and second.tolist() == [-v for v in f]
    assert third.tolist() == [-v for v in f]


def test_async_start_done_and_copy_start_done():
    text = """HloModule a
%comp (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %e = f32[2] exponential(%x)
}
ENTRY e {
  %p = f32[2] parameter(0)
  %s = ((f32[2]), f32[2], s32[]) async-start(%p), calls=%comp
  %u = ((f32[2]), f32[2], s32[]) async-update(%s)
  %d = f32[2] async-done(%u)
  %cs = (f32[2], f32[2], u32[]) copy-start(%d)
  ROOT %cd = f32[2] copy-done(%cs)
}"""
    x = np.array([0.0, 1.0], np.float32)
    assert run(text, x).tolist() == np.exp(x).tolist()


def test_single_replica_collectives():
    text = """HloModule c, replica_count=1
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY e {
  %p = f32[4] parameter(0)
  %ar = f32[4] all-reduce(%p), replica_groups={}, to_apply=%add
  %ag = f32[4] all-gather(%ar), replica_groups={{0}}, dimensions={0}
  %rs = f32[4] reduce-scatter(%ag), replica_groups={{0}}, dimensions={0}, to_apply=%add
  %a2a = f32[4] all-to-all(%rs), replica_groups={{0}}, dimensions={0}
  %cp = f32[4] collective-permute(%a2a), source_target_pairs={{0,0}}
  %none = f32[4] collective-permute(%a2a), source_target_pairs={{0,1}}
  %rid = u32[] replica-id()
  %pid = u32[] partition-id()
  %ars = f32[4] all-reduce-start(%cp), replica_groups={{0}}, to_apply=%add
  %ard = f32[4] all-reduce-done(%ars)
  ROOT %t = (f32[4], f32[4], u32[], u32[]) tuple(%ard, %none, %rid, %pid)
}"""
    x = np.array([1, 2, 3, 4], np.float32)
    same, zeros, rid, pid = run(text, x)
    assert same.tolist() == x.tolist() and zeros.tolist() == [0, 0, 0, 0]
    assert int(rid) == 0 and int(pid) == 0 and rid.dtype == np.uint32


@pytest.mark.parametrize("inst", [
    "%r = f32[4] all-reduce(%p), replica_groups={{0,1}}, to_apply=%add",
    "%r = f32[8] all-gather(%p), replica_groups=[1,2]<=[2], dimensions={0}",
    "%r = f32[4] collective-permute(%p), source_target_pairs={{1,0}}",
])
def test_multi_replica_collectives_are_unsupported(inst):
    out = inst.split(" = ")[1].split(" ")[0]
    text = f"""HloModule c
%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}
ENTRY e {{
  %p = f32[4] parameter(0)
  ROOT {inst}
}}"""
    assert out
    with pytest.raises(UnsupportedError, match="replica"):
        run(text, np.zeros(4, np.float32))


def test_io_opcodes_are_unsupported_with_the_instruction_named():
    text = """HloModule io
ENTRY e {
  %tok = token[] after-all()
  %in = ((f32[2]), token[]) infeed(%tok)
  ROOT %v = (f32[2]) get-tuple-element(%in), index=0
}"""
    with pytest.raises(UnsupportedError, match=r"while executing %in = .*infeed.*host"):
        run(text)


SCAN = """HloModule scan_module
%body (x: f32[2], i: s32[], acc: f32[2], n: s32[]) -> (f32[2], s32[], f32[2], s32[]) {
  %x = f32[2] parameter(0)
  %i = s32[] parameter(1)
  %acc = f32[2] parameter(2)
  %n = s32[] parameter(3)
  %sum = f32[2] add(%acc, %x)
  %one = s32[] constant(1)
  %cnt = s32[] add(%n, %one)
  %prod = s32[] multiply(%i, %cnt)
  ROOT %t = (f32[2], s32[], f32[2], s32[]) tuple(%sum, %prod, %sum, %cnt)
}
ENTRY e {
  %xs = f32[3,2] parameter(0)
  %is = s32[3] parameter(1)
  %a0 = f32[2] constant({100, 200})
  %n0 = s32[] constant(0)
  ROOT %s = (f32[3,2], s32[3], f32[2], s32[]) scan(%xs, %is, %a0, %n0), dimensions={0}, REV, to_apply=%body
}"""


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carries_and_outputs(reverse):
    xs = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    idx = np.array([7, 8, 9], np.int32)
    text = SCAN.replace("REV", f"is_reverse={'true' if reverse else 'false'}")
    sums, prods, acc, count = run(text, xs, idx)
    order = [2, 1, 0] if reverse else [0, 1, 2]
    exp_sums, exp_prods = [None] * 3, [None] * 3
    a, c = [100.0, 200.0], 0
    for t in order:
        a = [a[0] + xs[t][0], a[1] + xs[t][1]]
        c += 1
        exp_sums[t], exp_prods[t] = a, int(idx[t]) * c
    assert sums.tolist() == exp_sums and prods.tolist() == exp_prods
    assert acc.tolist() == a and int(count) == 3


def test_ragged_all_to_all_single_replica():
    text = """HloModule r
ENTRY e {
  %in = f32[6] parameter(0)
  %out = f32[6] parameter(1)
  %io = s64[2] parameter(2)
  %ss = s64[2] parameter(3)
  %oo = s64[2] parameter(4)
  %rs = s64[2] parameter(5)
  ROOT %r = f32[6] ragged-all-to-all(%in, %out, %io, %ss, %oo, %rs), replica_groups={{0}}
}"""
    x = np.arange(1, 7, dtype=np.float32)
    out = np.full(6, -1, np.float32)
    r = run(text, x, out, np.array([0, 4], np.int64), np.array([2, 1], np.int64),
            np.array([3, 0], np.int64), np.array([2, 1], np.int64))
    assert r.tolist() == [5, -1, -1, 1, 2, -1]
