"""Matching and classification: renames, known edits, switches, fusions."""
from __future__ import annotations

import pytest

from hlo_opt.diff import DiffOptions, diff_modules
from hlo_opt.errors import HloError
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from tests.conftest import corpus_files, require_corpus, sample_files

from .cases import (EXPECTED_ADDED, EXPECTED_CHANGED, EXPECTED_PATTERNS, EXPECTED_REMOVED,
                    LEFT, RIGHT, renamed, report)


def _renamed_copy(module, seed):
    copy = parse_hlo(module.to_text(), "copy")
    names = renamed(copy, seed)
    return parse_hlo(copy.to_text(), "renamed"), names


def test_renaming_every_instruction_of_the_corpus_is_no_difference():
    require_corpus()
    checked, failures = 0, []
    for path in corpus_files():
        try:
            modules = parse_hlo_modules(path.read_text(), path.name)
        except HloError:
            continue
        for k, module in enumerate(modules):
            other, names = _renamed_copy(module, checked)
            d = diff_modules(module, other)
            checked += 1
            problems = []
            if not d.equal:
                problems.append(f"{len(d.changes)} changed, {len(d.removed)} removed, "
                                f"{len(d.added)} added, header {d.header}")
            if d.renamed != module.instruction_count():
                problems.append(f"renamed {d.renamed} of {module.instruction_count()}")
            quiet = diff_modules(module, other, DiffOptions(ignore_names=True))
            if not quiet.equal or quiet.renamed:
                problems.append("--ignore-names: not equal or renames reported")
            if problems:
                failures.append(f"{path.name}[{k}]: {'; '.join(problems)}")
    assert checked >= 150, f"only {checked} corpus modules parsed"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_renamed_sample_matches_each_instruction_to_itself(path):
    module = parse_hlo(path.read_text(), path.name)
    other, names = _renamed_copy(module, 1)
    d = diff_modules(module, other)
    assert d.equal
    # Instructions whose text (names aside) is unique must pair with their own renamed self.
    for inst in module.instructions():
        match = d.match_of(inst)
        assert match is not None, inst.name
        if inst.opcode not in ("constant", "parameter", "broadcast"):
            assert match.name == names[inst.name], (inst.name, match.name)


def test_known_edits_are_reported_exactly():
    d = diff_modules(parse_hlo(LEFT), parse_hlo(RIGHT))
    changed, removed, added = report(d)
    assert changed == EXPECTED_CHANGED
    assert removed == EXPECTED_REMOVED
    assert added == EXPECTED_ADDED
    assert {p.description: p.count for p in d.patterns} == EXPECTED_PATTERNS
    assert not d.equal
    ch = {li.name: c for li, _, c in d.changed_pairs()}
    assert ch["cmp"].details["attributes"] == ["direction"]
    assert ch["diff"].details["operands"] == [1]
    assert ch["relu"].details["moved"] == ("main", "fused_relu")
    statuses = {c.status for c in d.comps}
    assert statuses == {"unchanged", "changed", "added"}


def test_known_edits_survive_renaming_everything():
    right = parse_hlo(RIGHT)
    names = renamed(right, 5)
    right = parse_hlo(right.to_text())
    d = diff_modules(parse_hlo(LEFT), right, DiffOptions(ignore_names=True))
    changed, removed, added = report(d)
    assert changed == {(l, names[r], kinds) for l, r, kinds in EXPECTED_CHANGED}
    assert removed == EXPECTED_REMOVED
    assert added == {names[a] for a in EXPECTED_ADDED}
    assert {p.description: p.count for p in d.patterns} == EXPECTED_PATTERNS
    assert d.renamed == 0  # --ignore-names reports none


def test_reverse_direction_is_the_mirror_image():
    d = diff_modules(parse_hlo(RIGHT), parse_hlo(LEFT))
    changed, removed, added = report(d)
    assert changed == {(r, l, kinds) for l, r, kinds in EXPECTED_CHANGED}
    assert removed == EXPECTED_ADDED
    assert added == EXPECTED_REMOVED
    descriptions = {p.description for p in d.patterns}
    assert "broadcast+maximum unfused" in descriptions
    assert "copy added" in descriptions and "sqrt removed" in descriptions


FUSED = """\
HloModule f

%fused (p0: f32[4], p1: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %m = f32[4]{0} multiply(%p0, %p1)
  ROOT %e = f32[4]{0} OP(%m)
}

ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %f = f32[4]{0} fusion(%a, %b), kind=kLoop, calls=%fused
  ROOT %n = f32[4]{0} negate(%f)
}
"""


def test_fusion_is_compared_by_its_fused_computation():
    left = parse_hlo(FUSED.replace("OP", "exponential"))
    right = parse_hlo(FUSED.replace("OP", "tanh"))
    d = diff_modules(left, right)
    changed, removed, added = report(d)
    assert changed == {("f", "f", ("fused computation",))}
    assert removed == {"e"} and added == {"e"}
    assert {(c.status) for c in d.comps} == {"changed"}
    same = diff_modules(left, parse_hlo(FUSED.replace("OP", "exponential")))
    assert same.equal


def test_swapped_operands_are_rewired():
    text = """HloModule s
ENTRY %e (a: f32[2], b: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  %b = f32[2]{0} parameter(1)
  %x = f32[2]{0} exponential(%a)
  %y = f32[2]{0} tanh(%b)
  ROOT %s = f32[2]{0} subtract(@X@, @Y@)
}
"""
    d = diff_modules(parse_hlo(text.replace("@X@", "%x").replace("@Y@", "%y")),
                     parse_hlo(text.replace("@X@", "%y").replace("@Y@", "%x")))
    changed, removed, added = report(d)
    assert changed == {("s", "s", ("operands",))}
    assert not removed and not added
    assert next(iter(d.changes.values())).details["operands"] == [0, 1]


SWITCHES = """HloModule w
ENTRY %e (a: f32[2,3]) -> f32[3,2] {
  %a = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{LAYOUT} transpose(%a), dimensions={1,0}, metadata={op_name="MD"}
}
"""


@pytest.mark.parametrize("layout, md, options, kinds", [
    ("1,0", "x", DiffOptions(), None),
    ("0,1", "x", DiffOptions(), ("layout",)),
    ("0,1", "x", DiffOptions(ignore_layout=True), None),
    ("1,0", "y", DiffOptions(), ("metadata",)),
    ("1,0", "y", DiffOptions(ignore_metadata=True), None),
    ("0,1", "y", DiffOptions(ignore_metadata=True), ("layout",)),
])
def test_layout_and_metadata_switches(layout, md, options, kinds):
    left = parse_hlo(SWITCHES.replace("LAYOUT", "1,0").replace("MD", "x"))
    right = parse_hlo(SWITCHES.replace("LAYOUT", layout).replace("MD", md))
    d = diff_modules(left, right, options)
    if kinds is None:
        assert d.equal
    else:
        assert [tuple(c.kinds) for c in d.changes.values()] == [kinds]
        assert not d.removed and not d.added


def test_shape_change_is_reported_as_shape():
    left = parse_hlo(SWITCHES.replace("LAYOUT", "1,0").replace("MD", "x"))
    right = parse_hlo(SWITCHES.replace("LAYOUT", "1,0").replace("MD", "x")
                      .replace("f32[3,2]{1,0} transpose", "f16[3,2]{1,0} transpose"))
    d = diff_modules(left, right)
    (ch,) = d.changes.values()
    assert ch.kinds == ["shape"]
    assert ch.details["shape"] == ("f32[3,2]{1,0}", "f16[3,2]{1,0}")


TWINS = """HloModule t
ENTRY %e (a: f32[4], b: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  FIRST
  SECOND
  %u = f32[4]{0} add(%a, %c1)
  %v = f32[4]{0} multiply(%b, %c2)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%u, %v)
}
"""


def test_identical_twins_in_another_order_pair_by_their_users():
    c1 = "%c1 = f32[4]{0} broadcast(f32[] %z1), dimensions={}"
    c2 = "%c2 = f32[4]{0} broadcast(f32[] %z2), dimensions={}"
    z = "%z1 = f32[] constant(1)\n  %z2 = f32[] constant(1)"
    left = parse_hlo(TWINS.replace("FIRST", z + "\n  " + c1).replace("SECOND", c2))
    right = parse_hlo(TWINS.replace("FIRST", z + "\n  " + c2).replace("SECOND", c1))
    d = diff_modules(left, right)
    assert d.equal
    for name in ("c1", "c2", "z1", "z2"):
        inst = next(i for i in left.instructions() if i.name == name)
        assert d.match_of(inst).name == name


def test_module_attribute_change_is_a_difference():
    left = parse_hlo(LEFT)
    right = parse_hlo(LEFT.replace("HloModule edits", "HloModule edits, is_scheduled=true"))
    d = diff_modules(left, right)
    assert not d.equal
    assert d.header == ["is_scheduled: <none> -> true"]
    assert not d.changes and not d.removed and not d.added


def test_similarity_matching_looks_at_a_bounded_number_of_candidates(monkeypatch):
    """A hub with many unmatched users on both sides: candidates are capped, not n x n."""
    from hlo_opt.diff import match_similar
    n = 400
    body_l = "\n".join(f"  %u{i} = f32[4]{{0}} add(%hub, %k{i})" for i in range(n))
    body_r = "\n".join(f"  %u{i} = f32[4]{{0}} add(%hub, %j{i})" for i in range(n))
    consts = "\n".join(f"  %k{i} = f32[4]{{0}} constant({{{i}, 0, 0, 0}})" for i in range(n))
    consts_r = "\n".join(f"  %j{i} = f32[4]{{0}} constant({{{i}, 1, 1, 1}})"
                         for i in range(n))
    ops = ", ".join(f"%u{i}" for i in range(n))
    shape = ", ".join(["f32[4]{0}"] * n)
    template = ("HloModule h\nENTRY %e (a: f32[4]) -> ({shape}) {{\n  %a = f32[4]{{0}} "
                "parameter(0)\n  %hub = f32[4]{{0}} negate(%a)\n{c}\n{b}\n"
                "  ROOT %t = ({shape}) tuple({ops})\n}}\n")
    left = parse_hlo(template.format(shape=shape, c=consts, b=body_l, ops=ops))
    right = parse_hlo(template.format(shape=shape, c=consts_r, b=body_r, ops=ops))
    calls = []
    real = match_similar._score
    monkeypatch.setattr(match_similar, "_score",
                        lambda *a: calls.append(1) or real(*a))
    d = diff_modules(left, right)
    assert len(calls) <= match_similar.CANDIDATES * 2 * n
    # every add kept its place (same hub, same tuple slot): changed operand, not re-added
    assert len(d.changes) == n and not any(
        d.left.opcode[i] == "add" for i in d.removed)


MOF_LEFT = """HloModule m
ENTRY %e (a: f32[4], b: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %x = f32[4]{0} add(%a, %b)
  %y = f32[4]{0} exponential(%x)
  %z = f32[4]{0} tanh(%x)
  %u = f32[4]{0} negate(%y)
  %v = f32[4]{0} negate(%z)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%u, %v)
}
"""

MOF_RIGHT = """HloModule m
%fc (p0: f32[4], p1: f32[4]) -> (f32[4], f32[4]) {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %x = f32[4]{0} add(%p0, %p1)
  %y = f32[4]{0} exponential(%x)
  %z = f32[4]{0} tanh(%x)
  ROOT %r = (f32[4]{0}, f32[4]{0}) tuple(%y, %z)
}
ENTRY %e (a: f32[4], b: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %f = (f32[4]{0}, f32[4]{0}) fusion(%a, %b), kind=kLoop, calls=%fc
  %g0 = f32[4]{0} get-tuple-element(%f), index=0
  %g1 = f32[4]{0} get-tuple-element(%f), index=1
  %u = f32[4]{0} negate(%g0)
  %v = f32[4]{0} negate(%g1)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%u, %v)
}
"""


def test_multi_output_fusion_formed():
    d = diff_modules(parse_hlo(MOF_LEFT), parse_hlo(MOF_RIGHT))
    changed, removed, added = report(d)
    assert changed == {("x", "x", ("moved",)), ("y", "y", ("moved",)), ("z", "z", ("moved",))}
    assert not removed
    assert added == {"f", "g0", "g1", "p0", "p1", "r"}
    # the users read the same values through get-tuple-element: unchanged
    assert d.status_of(next(i for i in d.left.insts if i.name == "u")) == "unchanged"
    assert [(p.count, p.description) for p in d.patterns] == [
        (1, "add+exponential+tanh folded into fusion")]
