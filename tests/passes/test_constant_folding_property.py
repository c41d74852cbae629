"""Property: constant_folding on random constant subgraphs of many element types mixed with
parameters (random_graphs.constant_folding_cases) leaves no foldable instruction behind,
never folds what XLA's HloConstantFolding must not (rng, calls holding an rng, control
edges, pad(broadcast(constant), constant), results or operands over the size limit), and
keeps the values: bit for bit for integer and pred results, within 1e-5 for floats.

The rule is this file's own reading of XLA's ``hlo_constant_folding.cc`` at the default
level: a live instruction other than parameter/constant/tuple with at least one constant
operand (looking through tuples) and only constant, iota or broadcast(constant) operands is
folded unless it is a broadcast, iota, fft or while; it or a computation it calls holds
an rng, after-all or side effect; it has control edges; it is pad(broadcast, constant);
or max(result elements, operand elements) exceeds the limit.  The size limit is lowered
(``MAX_CONSTANT_ELEMENTS``) in some examples so that it bites on small shapes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import passes.constant_folding as cf
from hlo_opt.api import parse_hlo, verify
from tests.support.exactness import special_args
from tests.support.harness import assert_close, execute_or_xfail, random_args
from tests.support.random_graphs import constant_folding_cases

EXAMPLES = 200
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
_EFFECTS = frozenset({"send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng",
                      "rng-get-and-update-state"})
_NEVER = frozenset({"broadcast", "iota", "fft", "while"})


def _op(o, folded) -> str:
    """``o``'s opcode, "constant" once the simulation below has folded it."""
    return "constant" if o.name in folded else o.opcode


def _any_constant(inst, folded=frozenset()) -> bool:
    return any(_op(o, folded) == "constant" or
               (o.opcode == "tuple" and _any_constant(o, folded)) for o in inst.operands)


def _all_constant_like(inst, folded=frozenset()) -> bool:
    return all(_op(o, folded) in ("constant", "iota") or
               (o.opcode == "broadcast" and _op(o.operands[0], folded) == "constant") or
               (o.opcode == "tuple" and _all_constant_like(o, folded)) for o in inst.operands)


def _illegal(inst) -> bool:
    """rng or after-all, here or in any computation it calls."""
    return inst.opcode in ("rng", "after-all") or any(
        _illegal(i) for c in inst.called for i in c.instructions)


def _side_effect(inst) -> bool:
    return (inst.opcode in _EFFECTS or (inst.opcode == "custom-call" and inst.attrs.get(
        "custom_call_has_side_effect") == "true")
        or any(_side_effect(i) for c in inst.called for i in c.instructions))


def is_foldable(inst, limit: int, folded=frozenset()) -> bool:
    if inst.opcode in _NEVER or inst.opcode.startswith("async"):
        return False
    if not all(is_foldable(i, limit) for c in inst.called for i in c.instructions):
        return False
    if _illegal(inst) or _side_effect(inst):
        return False
    if inst.control_predecessors or inst.control_successors:
        return False
    if inst.opcode == "pad" and inst.operands[0].opcode == "broadcast" and \
            _op(inst.operands[1], folded) == "constant":
        return False
    if inst.shape.is_array():
        operands = sum(o.shape.num_elements() for o in inst.operands if o.shape.is_array())
        if max(inst.shape.num_elements(), operands) > limit:
            return False
    return True


def would_fold(inst, limit: int, folded=frozenset()) -> bool:
    """The rule, with the instructions named in ``folded`` taken as constants already."""
    return (not (inst.user_count == 0 and not inst.is_root)
            and inst.opcode not in ("parameter", "constant", "tuple")
            and _any_constant(inst, folded) and _all_constant_like(inst, folded)
            and is_foldable(inst, limit, folded))


def simulate(comp, limit: int) -> tuple[set, set]:
    """(names folded, names removed as dead operands) by one post-order walk of ``comp``
    applying the rule, as XLA's pass does."""
    folded: set = set()
    for inst in comp.post_order():
        if would_fold(inst, limit, folded):
            folded.add(inst.name)
    removed: set = set()
    stack = [o for inst in comp.instructions if inst.name in folded for o in inst.operands]
    while stack:
        o = stack.pop()
        if o.name in folded or o.name in removed or o.is_root or \
                o.control_predecessors or o.control_successors:
            continue  # (XLA cannot remove an instruction with control edges either)
        if all(u.name in folded or u.name in removed for u in o.users):
            removed.add(o.name)
            stack += o.operands
    return folded, removed


def never_folded(inst) -> bool:
    """Live instructions that must survive: nothing about them can become constant."""
    return (inst.opcode == "rng" or bool(inst.control_predecessors or inst.control_successors)
            or (inst.opcode == "call" and _illegal(inst))
            or (inst.opcode == "pad" and inst.operands[0].opcode == "broadcast"
                and inst.operands[1].opcode == "constant"))


def _skipped_computations(module) -> set:
    return {c for comp in module.computations for i in comp.instructions for c in i.called
            if i.opcode == "fusion" or (i.opcode == "call" and
                                        i.attrs.get("is_composite") == "true")}


def _compare(expected, actual, context):
    assert len(expected) == len(actual), context
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        assert e.dtype == a.dtype and e.shape == a.shape, f"{context}: result {i} type"
        if e.dtype.kind in "biu":
            assert np.array_equal(e, a), f"{context}: result {i}: {e} vs {a}"
        else:
            assert_close([e], [a], 1e-5, 1e-6, f"{context}: result {i}")


def check_constant_folding(text: str, limit: int | None = None) -> tuple[bool, int]:
    """Run constant_folding on ``text`` (with the size limit lowered to ``limit``) and check
    every property; returns (changed, instructions folded)."""
    before = parse_hlo(text, "<random constant_folding>")
    verify(before)
    after = before.clone()
    saved = cf.MAX_CONSTANT_ELEMENTS
    if limit is not None:
        cf.MAX_CONSTANT_ELEMENTS = limit
    try:
        p = cf.HloConstantFolding()
        changed = p.run(after)
    finally:
        cf.MAX_CONSTANT_ELEMENTS = saved
    limit = saved if limit is None else limit
    verify(after)
    after_text = after.to_text()
    assert parse_hlo(after_text).to_text() == after_text, "printing is not canonical"

    expected_folds = 0
    for comp in before.computations:
        if comp in _skipped_computations(before):
            continue
        folded, removed = simulate(comp, limit)
        expected_folds += len(folded)
        present = {i.name for i in after.computation(comp.name).instructions}
        assert not (folded | removed) & present, (
            f"not folded: {sorted(folded & present)}, not removed: {sorted(removed & present)}"
            f"\n{after_text}")
        lost = {i.name for i in comp.instructions} - folded - removed - present
        assert not lost, f"folded or removed what it must not: {sorted(lost)}\n{after_text}"
    assert p.folded == expected_folds, (p.folded, expected_folds, after_text)

    skipped = _skipped_computations(after)
    for comp in after.computations:
        if comp in skipped:
            continue
        left = [i.name for i in comp.post_order() if would_fold(i, limit)]
        assert not left, f"foldable instructions left in %{comp.name}: {left}\n{after_text}"
    names_after = {i.name for c in after.computations for i in c.instructions}
    for comp in before.computations:
        for inst in comp.instructions:
            if (inst.user_count or inst.is_root) and never_folded(inst):
                assert inst.name in names_after, f"%{inst.name} was folded:\n{after_text}"
    names_before = {i.name for c in before.computations for i in c.instructions}
    for comp in after.computations:
        for inst in comp.instructions:
            if inst.name not in names_before:
                assert inst.opcode == "constant", inst.name
                assert inst.shape.num_elements() <= limit, (
                    f"%{inst.name} ({inst.shape.num_elements()} elements) is over the "
                    f"limit {limit}\n{after_text}")

    args_list = [a for a in (random_args(before, 0), special_args(before, 1))
                 if a is not None]
    for args in args_list:
        with np.errstate(all="ignore"):
            expected = execute_or_xfail(before, args)
            actual = execute_or_xfail(after, args)
        _compare(expected, actual, text)
    return changed, p.folded


STATS = {"examples": 0, "changed": 0, "folded": 0, "limited": 0}


@SETTINGS
@given(constant_folding_cases(), st.sampled_from([None, None, None, 2, 6, 12]))
def _constant_folding_property(case, limit):
    changed, folded = check_constant_folding(case.text, limit)
    STATS["examples"] += 1
    STATS["changed"] += changed
    STATS["folded"] += folded
    STATS["limited"] += limit is not None


def test_constant_folding_property_on_random_constant_graphs():
    for k in STATS:
        STATS[k] = 0
    _constant_folding_property()
    print(f"constant_folding property: {STATS}")
    assert STATS["examples"] >= EXAMPLES // 2
    assert STATS["changed"] >= 0.6 * STATS["examples"], STATS


# ---- the check itself can fail ----------------------------------------------------------

FOLDS = """HloModule m

ENTRY %e () -> (f32[4], f32[4], f32[4]) {
  %c = f32[4] constant({1, 2, 3, 4})
  %n = f32[4] negate(%c)
  %i = f32[4] iota(), iota_dimension=0
  %m = f32[4] add(%i, %i)
  %lo = f32[] constant(0)
  %hi = f32[] constant(1)
  %r = f32[4] rng(%lo, %hi), distribution=rng_uniform
  ROOT %t = (f32[4], f32[4], f32[4]) tuple(%n, %m, %r)
}
"""


def test_check_passes_on_the_real_pass():
    assert check_constant_folding(FOLDS) == (True, 1)  # %n; not %m (no constant operand)


def _folds_rng(monkeypatch):
    orig = cf._Foldability.__call__
    monkeypatch.setattr(cf._Foldability, "__call__",
                        lambda self, inst: inst.opcode == "rng" or orig(self, inst))


@pytest.mark.parametrize("breaks", [
    lambda mp: mp.setattr(cf.HloConstantFolding, "run", lambda self, module: False),
    _folds_rng,
    lambda mp: mp.setattr(cf, "_any_operand_constant", lambda inst: True),
], ids=["no-op", "folds-rng", "folds-without-a-constant-operand"])
def test_check_fails_on_a_broken_constant_folding(monkeypatch, breaks):
    breaks(monkeypatch)
    with pytest.raises(AssertionError):
        check_constant_folding(FOLDS)
