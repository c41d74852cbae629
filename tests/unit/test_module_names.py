"""HloModule's computation-name index and Computation.post_order against the plain
algorithms they replace (an O(#computations) scan per added computation; a stack walk),
under random edits, including edits behind the module's back (list assignment, in-place
list changes, ``comp.name = ...``)."""
from __future__ import annotations

import random
import re

import pytest

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.module import HloModule
from hlo_opt.ir.shape import Shape

_SUFFIX_RE = re.compile(r"^(.*?)(?:\.(\d+))?$")


def _scan_unique(comps, name: str) -> str:
    """The original HloModule._unique_computation_name."""
    taken = {c.name for c in comps}
    if name not in taken:
        return name
    stem = _SUFFIX_RE.match(name).group(1) or name
    n = 1
    while f"{stem}.{n}" in taken:
        n += 1
    return f"{stem}.{n}"


_BASES = ["fused_computation", "fused_computation.3", "add", "add.1", "x.01", ".2", "a.1.1",
          "region_0.5", "body"]


@pytest.mark.parametrize("seed", range(40))
def test_add_remove_rename_match_the_scan(seed):
    rng = random.Random(seed)
    m = HloModule("m")
    for _ in range(300):
        op = rng.random()
        comps = m.computations
        if op < 0.45 or not comps:
            base = rng.choice(_BASES)
            expected = _scan_unique(comps, base)
            before = rng.choice(comps) if comps and rng.random() < 0.2 else None
            c = m.add_computation(Computation(base), before=before)
            assert c.name == expected
        elif op < 0.6:
            m.remove_computation(rng.choice(comps))
        elif op < 0.7:
            dead = set(rng.sample(comps, rng.randint(1, min(3, len(comps)))))
            m.remove_computations(dead)
            assert not dead & set(m.computations)
        elif op < 0.78:
            c = rng.choice(comps)
            stem = rng.choice(_BASES)
            others = [x for x in comps if x is not c]
            m.rename_computation(c, stem, unique=True)
            assert c.name == _scan_unique(others, stem)
        elif op < 0.84:
            rng.choice(comps).name = rng.choice(_BASES) + ".9"  # behind the module's back
        elif op < 0.9:
            c = Computation(rng.choice(_BASES) + ".7")
            c.module = m
            m.computations.append(c)  # in place, behind the module's back
        elif op < 0.95:
            m.computations = list(reversed(comps))  # as the parser assigns it
        else:
            m.computations[:] = comps[1:]
        names = [c.name for c in m.computations]
        for name in set(names):
            assert m.has_computation_name(name)
            assert m.computation(name) is next(c for c in m.computations if c.name == name)
        assert not m.has_computation_name("never-a-name")


def test_unique_names_under_direct_renames():
    """A rename behind the module's back is seen by the next add_computation."""
    m = HloModule("m")
    a = m.add_computation(Computation("fused_computation"))
    b = m.add_computation(Computation("fused_computation"))
    assert (a.name, b.name) == ("fused_computation", "fused_computation.1")
    b.name = "fused_computation.2"
    c = m.add_computation(Computation("fused_computation"))
    assert c.name == "fused_computation.1"
    a.name = "other"
    d = m.add_computation(Computation("fused_computation"))
    assert d.name == "fused_computation"
    assert len({x.name for x in m.computations}) == 4


def test_freed_suffixes_are_reused_smallest_first():
    m = HloModule("m")
    comps = [m.add_computation(Computation("f")) for _ in range(5)]
    assert [c.name for c in comps] == ["f", "f.1", "f.2", "f.3", "f.4"]
    m.remove_computation(comps[3])
    m.remove_computations({comps[1]})
    assert m.add_computation(Computation("f")).name == "f.1"
    assert m.add_computation(Computation("f")).name == "f.3"
    assert m.add_computation(Computation("f")).name == "f.5"
    with pytest.raises(KeyError):
        m.computation("f.6")


def test_computation_lookup_prefers_the_first_of_duplicates():
    m = HloModule("m")
    a, b = Computation("dup"), Computation("dup")
    m.computations = [a, b]  # duplicate names only arrive from outside
    assert m.computation("dup") is a
    m.remove_computation(a)
    assert m.computation("dup") is b


def _stack_post_order(comp):
    """The original Computation.post_order."""
    visited, order = set(), []
    for start in comp.iter_instructions():
        if id(start) in visited:
            continue
        stack = [(start, False)]
        while stack:
            inst, expanded = stack.pop()
            if expanded:
                order.append(inst)
                continue
            if id(inst) in visited:
                continue
            visited.add(id(inst))
            stack.append((inst, True))
            for op in reversed(inst.operands + inst.control_predecessors):
                if id(op) not in visited:
                    stack.append((op, False))
    return order


@pytest.mark.parametrize("seed", range(300))
def test_post_order_matches_the_stack_walk(seed):
    rng = random.Random(seed)
    scalar = Shape.array("f32", ())
    insts = []
    for i in range(rng.randint(1, 30)):
        ops = [rng.choice(insts) for _ in range(rng.randint(0, min(3, i)))]
        inst = Instruction("add" if ops else "constant", scalar, ops, name=f"i{i}")
        if insts and rng.random() < 0.2:
            inst.add_control_predecessor(rng.choice(insts))
        insts.append(inst)
    comp = Computation("c")
    order = insts[:]
    if rng.random() < 0.7:
        rng.shuffle(order)  # insertion order not in def-use order: the depth-first path
    for inst in order:
        comp.link(inst)
    assert comp.post_order() == _stack_post_order(comp)
