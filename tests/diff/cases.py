"""Hand-written module pairs with known differences, shared by the diff tests."""
from __future__ import annotations

import random
import sys

import pytest

# Edits from LEFT to RIGHT, each made once:
#   attribute change  %cmp: direction=GT -> GE
#   rewired operand   %diff: subtract(%exp, %tanh) -> subtract(%exp, %sum)
#   removed           %copy (its user %neg now reads %scaled)
#   added             %sq = sqrt(%neg) (its user %exp now reads %sq)
#   fusion formed     %zeros + %relu -> fusion %relu.fusion (constant cloned inside)
LEFT = """\
HloModule edits

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p0: f32[8,16], p1: f32[16], p2: f32[8,16]) -> (f32[8], f32[8,16], pred[8,16]) {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16]{0} parameter(1)
  %p2 = f32[8,16]{1,0} parameter(2)
  %bias = f32[8,16]{1,0} broadcast(%p1), dimensions={1}
  %sum = f32[8,16]{1,0} add(%p0, %bias)
  %zero = f32[] constant(0)
  %zeros = f32[8,16]{1,0} broadcast(%zero), dimensions={}
  %relu = f32[8,16]{1,0} maximum(%sum, %zeros)
  %scaled = f32[8,16]{1,0} multiply(%relu, %p2)
  %copy = f32[8,16]{1,0} copy(%scaled)
  %neg = f32[8,16]{1,0} negate(%copy)
  %exp = f32[8,16]{1,0} exponential(%neg)
  %red = f32[8]{0} reduce(%exp, %zero), dimensions={1}, to_apply=%add_f32
  %tanh = f32[8,16]{1,0} tanh(%p2)
  %cmp = pred[8,16]{1,0} compare(%tanh, %p0), direction=GT
  %diff = f32[8,16]{1,0} subtract(%exp, %tanh)
  ROOT %out = (f32[8]{0}, f32[8,16]{1,0}, pred[8,16]{1,0}) tuple(%red, %diff, %cmp)
}
"""

RIGHT = """\
HloModule edits

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%fused_relu (param_0: f32[8,16]) -> f32[8,16] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %c = f32[] constant(0)
  %bz = f32[8,16]{1,0} broadcast(%c), dimensions={}
  ROOT %mx = f32[8,16]{1,0} maximum(%param_0, %bz)
}

ENTRY %main (p0: f32[8,16], p1: f32[16], p2: f32[8,16]) -> (f32[8], f32[8,16], pred[8,16]) {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16]{0} parameter(1)
  %p2 = f32[8,16]{1,0} parameter(2)
  %bias = f32[8,16]{1,0} broadcast(%p1), dimensions={1}
  %sum = f32[8,16]{1,0} add(%p0, %bias)
  %zero = f32[] constant(0)
  %relu.fusion = f32[8,16]{1,0} fusion(%sum), kind=kLoop, calls=%fused_relu
  %scaled = f32[8,16]{1,0} multiply(%relu.fusion, %p2)
  %neg = f32[8,16]{1,0} negate(%scaled)
  %sq = f32[8,16]{1,0} sqrt(%neg)
  %exp = f32[8,16]{1,0} exponential(%sq)
  %red = f32[8]{0} reduce(%exp, %zero), dimensions={1}, to_apply=%add_f32
  %tanh = f32[8,16]{1,0} tanh(%p2)
  %cmp = pred[8,16]{1,0} compare(%tanh, %p0), direction=GE
  %diff = f32[8,16]{1,0} subtract(%exp, %sum)
  ROOT %out = (f32[8]{0}, f32[8,16]{1,0}, pred[8,16]{1,0}) tuple(%red, %diff, %cmp)
}
"""

# What the diff of LEFT -> RIGHT must report, exactly (left name, right name, kinds).
EXPECTED_CHANGED = {
    ("cmp", "cmp", ("attributes",)),
    ("diff", "diff", ("operands",)),
    ("neg", "neg", ("operands",)),          # consequence of removing %copy
    ("exp", "exp", ("operands",)),          # consequence of adding %sq
    ("zeros", "bz", ("moved",)),            # folded into the fusion
    ("relu", "mx", ("moved",)),
}
EXPECTED_REMOVED = {"copy"}
# The fusion, its parameter and the constant cloned into it are new.
EXPECTED_ADDED = {"sq", "relu.fusion", "param_0", "c"}
EXPECTED_PATTERNS = {
    "broadcast+maximum folded into fusion": 1,
    "compare changed (attributes)": 1,
    "copy removed": 1,
    "sqrt added": 1,
    "subtract changed (operands rewired)": 1,
}


def renamed(module, seed: int = 0) -> dict[str, str]:
    """Give every instruction (and computation) of ``module`` a fresh random name;
    returns old name -> new name for instructions."""
    rng = random.Random(seed)
    mapping = {}
    for k, inst in enumerate(list(module.instructions())):
        new = f"n{rng.randrange(10 ** 6)}_{k}"
        mapping[inst.name] = new
        inst.name = new
    for k, comp in enumerate(module.computations):
        comp.name = f"comp{rng.randrange(10 ** 6)}_{k}"
    return mapping


def run_cli(args, monkeypatch, capsys) -> tuple[int, str, str]:
    """Run ``hlo-opt ARGS`` through the console-script entry; (status, stdout, stderr)."""
    from hlo_opt import cli
    monkeypatch.setattr(sys, "argv", ["hlo-opt", *map(str, args)])
    try:
        cli.run()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def report(diff) -> tuple[set, set, set]:
    """(changed (l, r, kinds), removed names, added names) of a ModuleDiff."""
    changed = {(li.name, ri.name, tuple(ch.kinds)) for li, ri, ch in diff.changed_pairs()}
    return (changed, {diff.left.name(i) for i in diff.removed},
            {diff.right.name(i) for i in diff.added})


def require_pass(name: str):
    from passes.registry import create_pass
    from hlo_opt.errors import PassError
    try:
        return create_pass(name)
    except PassError:
        pytest.skip(f"pass {name!r} is not registered yet")
