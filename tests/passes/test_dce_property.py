"""Property: dce on random graphs with dead code and planted dead side effects
(random_graphs.dce_cases) keeps exactly what is live, side-effecting, under a control edge
or a parameter (and what those use), removes every computation nothing live calls, leaves
no removable instruction behind, is idempotent and keeps the values bit for bit.

The oracle is written here from XLA's HloDCE (``hlo_dce.cc``) and
``HloInstruction::HasSideEffect``: send/send-done/recv/recv-done/infeed/outfeed/rng and
custom-calls with ``custom_call_has_side_effect=true`` have side effects, and so does an
instruction calling a computation that holds one; after-all does not.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from hlo_opt.api import parse_hlo, verify
from passes.dce import HloDCE
from tests.support.exactness import assert_bitwise, special_args
from tests.support.harness import execute_or_xfail, random_args
from tests.support.random_graphs import dce_cases

EXAMPLES = 200
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
_EFFECTS = frozenset({"send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng",
                      "rng-get-and-update-state"})


def has_effect(inst, memo: dict) -> bool:
    if inst.opcode in _EFFECTS or (inst.opcode == "custom-call" and
                                   inst.attrs.get("custom_call_has_side_effect") == "true"):
        return True
    for c in inst.called:
        if c not in memo:
            memo[c] = False
            memo[c] = any(has_effect(i, memo) for i in c.instructions)
        if memo[c]:
            return True
    return False


def must_stay(inst, memo: dict) -> bool:
    """Kept whether used or not."""
    return (inst.is_root or inst.opcode == "parameter" or has_effect(inst, memo)
            or bool(inst.control_predecessors or inst.control_successors))


def expected_after(module) -> dict:
    """computation name -> names of its instructions HloDCE keeps, for every computation
    still called from the entry afterwards."""
    memo: dict = {}
    kept: dict = {}
    agenda = [module.entry]
    while agenda:
        comp = agenda.pop()
        if comp.name in kept:
            continue
        stack = [i for i in comp.instructions if must_stay(i, memo)]
        live: set = set()
        while stack:
            inst = stack.pop()
            if inst.name in live:
                continue
            live.add(inst.name)
            stack += inst.operands
            agenda += inst.called
        kept[comp.name] = live
    return kept


def _run(module, args_list) -> list:
    out = []
    for args in args_list:
        with np.errstate(all="ignore"):
            out.append(execute_or_xfail(module, args))
    return out


def check_dce(text: str, case=None) -> tuple[bool, int]:
    """Run dce on ``text`` and check every property; returns (changed, removed count)."""
    before = parse_hlo(text, "<random dce>")
    verify(before)
    expected = expected_after(before)
    after = before.clone()
    changed = HloDCE().run(after)
    verify(after)
    after_text = after.to_text()
    assert parse_hlo(after_text).to_text() == after_text, "printing is not canonical"
    assert not HloDCE().run(after.clone()), f"dce is not idempotent:\n{after_text}"

    actual = {c.name: {i.name for i in c.instructions} for c in after.computations}
    assert set(actual) == set(expected), (
        f"computations: kept {sorted(actual)}, expected {sorted(expected)}\n{after_text}")
    for name, names in expected.items():
        assert actual[name] == names, (
            f"%{name}: removed live {sorted(names - actual[name])}, kept dead "
            f"{sorted(actual[name] - names)}\n{after_text}")
    memo: dict = {}
    for comp in after.computations:
        for inst in comp.instructions:
            assert inst.user_count or must_stay(inst, memo), (
                f"%{inst.name} is unused and removable:\n{after_text}")
    if case is not None:
        every = set().union(*actual.values())
        assert case.keep <= every, f"lost {sorted(case.keep - every)}\n{after_text}"
        assert not case.gone & every, f"kept {sorted(case.gone & every)}\n{after_text}"
        assert case.keep_computations <= set(actual)
        assert not case.gone_computations & set(actual)

    args_list = [a for a in (random_args(before, 0), random_args(before, 1),
                             special_args(before, 2)) if a is not None]
    for exp, act in zip(_run(before, args_list), _run(after, args_list)):
        assert_bitwise(exp, act, text)
    removed = sum(len(c.instructions) for c in before.computations) - \
        sum(len(c.instructions) for c in after.computations)
    return changed, removed


STATS = {"examples": 0, "changed": 0, "removed": 0}


@SETTINGS
@given(dce_cases())
def _dce_property(case):
    changed, removed = check_dce(case.text, case)
    STATS["examples"] += 1
    STATS["changed"] += changed
    STATS["removed"] += removed


def test_dce_property_on_random_graphs_with_dead_code():
    for k in STATS:
        STATS[k] = 0
    _dce_property()
    print(f"dce property: {STATS}")
    assert STATS["examples"] >= EXAMPLES // 2
    assert STATS["changed"] >= 0.8 * STATS["examples"], STATS


# ---- the check itself can fail ----------------------------------------------------------

DEAD = """HloModule m

ENTRY %e (p: f32[4]) -> f32[4] {
  %p = f32[4] parameter(0)
  %dead = f32[4] negate(%p)
  %log = f32[4] custom-call(%p), custom_call_target="log", custom_call_has_side_effect=true
  ROOT %r = f32[4] abs(%p)
}
"""


def test_check_passes_on_the_real_pass():
    assert check_dce(DEAD) == (True, 1)


@pytest.mark.parametrize("attr,broken", [
    ("run_dce", lambda module: False),                 # removes nothing
    ("Instruction.has_side_effect_no_recurse", lambda inst: False),  # drops the call
], ids=["no-op", "drops-side-effects"])
def test_check_fails_on_a_broken_dce(monkeypatch, attr, broken):
    import passes.dce as dce
    from hlo_opt.ir.instruction import Instruction
    if attr.startswith("Instruction."):  # the IR's one definition of side effects
        monkeypatch.setattr(Instruction, attr.split(".")[1], broken)
    else:
        monkeypatch.setattr(dce, attr, broken)
    with pytest.raises(AssertionError):
        check_dce(DEAD)
