"""One definition of side effects (XLA's HloInstruction::HasSideEffect), read by dce,
algsimp's dead-code removal, cse, constant folding, the while-loop passes and fusion.

Before it was one definition, algsimp kept a dead channel-less ``all-reduce`` and a dead
``after-all`` that dce removed; now both remove them, and both keep a collective with a
channel, a layout-constrained one and a side-effecting custom-call."""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.ir.opcodes import OPCODES, SIDE_EFFECT_POSSIBLE
from passes.algsimp import AlgebraicSimplifier
from passes.dce import HloDCE

ADD = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
"""


def _module(dead: str, dead_shape: str) -> str:
    """``dead`` becomes dead once algsimp folds get-tuple-element(tuple(p, dead))."""
    return f"""HloModule m
{ADD}
ENTRY %main (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  %x = {dead}
  %t = (f32[4]{{0}}, {dead_shape}) tuple(f32[4]{{0}} %p, {dead_shape} %x)
  ROOT %g = f32[4]{{0}} get-tuple-element((f32[4]{{0}}, {dead_shape}) %t), index=0
}}
"""


AR = "f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups={}, to_apply=%add"
CASES = {
    "all-reduce without channel": (AR, "f32[4]{0}", False),
    "after-all": ("token[] after-all()", "token[]", False),
    "all-reduce with channel": (AR + ", channel_id=1", "f32[4]{0}", True),
    "layout-constrained all-reduce": (AR + ", constrain_layout=true", "f32[4]{0}", True),
    "side-effecting custom-call": (
        'f32[4]{0} custom-call(f32[4]{0} %p), custom_call_target="t", '
        "custom_call_has_side_effect=true", "f32[4]{0}", True),
    "pure custom-call": ('f32[4]{0} custom-call(f32[4]{0} %p), custom_call_target="t"',
                         "f32[4]{0}", False),
}


def _dead(dead: str) -> str:
    return f"""HloModule m
{ADD}
ENTRY %main (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  %x = {dead}
  ROOT %n = f32[4]{{0}} negate(f32[4]{{0}} %p)
}}
"""


def _has_x(module) -> bool:
    return "x" in {i.name for i in module.entry.instructions}


@pytest.mark.parametrize("case", list(CASES))
def test_algsimp_and_dce_agree(case):
    dead, shape, kept = CASES[case]
    m = parse_hlo(_module(dead, shape))
    assert next(i for i in m.entry.instructions if i.name == "x").has_side_effect() is kept
    assert AlgebraicSimplifier().run(m)  # gte(tuple(p, x)) -> p; the tuple dies ...
    assert m.entry.root.name == "p" and _has_x(m) is kept  # ... and x with it, or not
    m = parse_hlo(_dead(dead))
    HloDCE().run(m)
    assert _has_x(m) is kept


def test_side_effects_recurse_into_called_computations():
    text = f"""HloModule m
{ADD}
%callee (q: f32[4]) -> f32[4] {{
  %q = f32[4]{{0}} parameter(0)
  ROOT %r = f32[4]{{0}} all-reduce(f32[4]{{0}} %q), channel_id=3, replica_groups={{}}, to_apply=%add
}}
ENTRY %main (p: f32[4]) -> f32[4] {{
  %p = f32[4]{{0}} parameter(0)
  %c = f32[4]{{0}} call(f32[4]{{0}} %p), to_apply=%callee
  ROOT %n = f32[4]{{0}} negate(f32[4]{{0}} %p)
}}
"""
    m = parse_hlo(text)
    call = next(i for i in m.entry.instructions if i.opcode == "call")
    assert not call.has_side_effect_no_recurse() and call.has_side_effect()
    assert m.computation("callee").has_side_effect()
    assert not m.computation("add").has_side_effect()


def test_every_possibly_side_effecting_opcode_is_an_opcode():
    assert SIDE_EFFECT_POSSIBLE <= set(OPCODES)
