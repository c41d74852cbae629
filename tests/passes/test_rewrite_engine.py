"""The rule engine of passes/_rewrite.py: the compiled matchers and the candidate index
must decide exactly what the plain pattern semantics decide.

The oracle below is the straightforward matcher (one trial copy of the captures per
operand list, commuting binaries tried in order then swapped, no deeper backtracking).
For every instruction of the sample modules, the algsimp lit modules and random graphs,
and every algsimp rule of its opcode: ``Rules.candidates`` keeps the rule whenever the
oracle matches, the rule's generated root matcher returns the oracle's captures, and
``Pat.match`` agrees too.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from hlo_opt.api import parse_hlo
from hlo_opt.errors import HloError
from hlo_opt.text.parser import parse_hlo_modules
from hlo_opt.rewrite.rules import P, RuleList, Rules, X, comp_has_opcode, has_opcode, run_rules
from passes.algsimp import RULES, AlgebraicSimplifierOptions
from passes.algsimp.predicates import ALL
from tests.conftest import sample_files
from tests.support.lit_chunks import chunks
from tests.support.random_graphs import modules


def oracle(p, inst, binds: dict) -> bool:
    """Pattern semantics, written the plain way."""
    if p.ops is not None and inst.opcode not in p.ops:
        return False
    if p.name is not None and binds.get(p.name) not in (None, inst):
        return False
    if p.src is not None:
        ops = inst.operands
        if len(ops) != len(p.src) and not (p.rest and len(ops) > len(p.src)):
            return False
        ops = ops[:len(p.src)]
        orders = [(0, 1), (1, 0)] if p.commute and len(ops) == 2 else [range(len(ops))]
        for order in orders:
            trial = dict(binds)
            if all(oracle(q, ops[i], trial) for q, i in zip(p.src, order)):
                binds.update(trial)
                break
        else:
            return False
    if p.pred is not None and not p.pred(inst):
        return False
    if p.name is not None:
        binds[p.name] = inst
    return True


def check_instruction(inst, rules: Rules = RULES) -> int:
    """Compare the engine with the oracle on every rule for ``inst``; returns how many
    rules matched."""
    cands = rules.candidates(inst)
    matched = 0
    for r in rules.for_op(inst.opcode):
        want: dict = {}
        ok = oracle(r.pat, inst, want)
        if ok:
            matched += 1
            assert r in cands, f"{r.label} dropped for {inst.to_text()}"
        if r in cands:
            got = r.m(inst)
            assert (got is not None) == ok, (r.label, inst.to_text())
            if ok:
                assert got == want, (r.label, inst.to_text())
        binds: dict = {}
        assert r.pat.match(inst, binds) == ok, (r.label, inst.to_text())
        if ok:
            assert binds == want
    return matched


def _all_instructions(module):
    return [i for c in module.computations for i in c.instructions]


def _modules():
    out = []
    for path in sample_files():
        out += parse_hlo_modules(path.read_text(), str(path))
    for chunk in chunks("algsimp_*.hlo"):
        try:
            out.append(parse_hlo(chunk.text, chunk.id))
        except HloError:
            continue
    return out


def test_engine_agrees_with_the_oracle_on_real_and_lit_modules():
    matched = 0
    for module in _modules():
        for inst in _all_instructions(module):
            matched += check_instruction(inst)
    assert matched > 200  # the lit modules exist to make rules match


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
def test_engine_agrees_with_the_oracle_on_random_graphs(text):
    for inst in _all_instructions(parse_hlo(text, "<random>")):
        check_instruction(inst)


_SMALL = """HloModule m
ENTRY %e (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  %g = f32[4] multiply(%x, %y)
  ROOT %f = f32[4] add(%g, %x)
}
"""


def test_commuting_patterns_do_not_backtrack_into_an_operand():
    """add(mul(a, b), b) on add(mul(x, y), x): the inner commuting multiply binds a=x,
    b=y first and keeps it; the outer b then fails and nothing retries the inner swap."""
    module = parse_hlo(_SMALL, "small")
    root = module.entry.root
    pat = P("add", P("multiply", X("a"), X("b"), commute=True), X("b"))
    assert not oracle(pat, root, {})
    assert not pat.match(root, {})
    rl = RuleList()
    rl(pat, "greedy")(lambda ctx, a, b: None)
    table = Rules(rl)
    assert table.candidates(root) and table.rules[0].m(root) is None
    # the swapped order at the top level is tried: add(x, mul(y, x)) with commute
    pat2 = P("add", P("multiply", X("a"), X("b")), X("a"), commute=True)
    binds: dict = {}
    assert pat2.match(root, binds) and binds == {"a": root.operands[1],
                                                 "b": root.operands[0].operands[1]}


def test_candidates_narrow_by_operand_opcodes_and_count():
    module = parse_hlo(_SMALL, "small")
    root = module.entry.root
    labels = {r.label for r in RULES.candidates(root)}
    # add(multiply, parameter): no constant, broadcast or subtract operand
    assert "A + 0 => A" not in labels and "(A + C1) + C2 => A + (C1 + C2)" not in labels
    assert "A*C + B*C => (A+B)*C" not in labels  # needs two multiplies
    assert labels <= {r.label for r in RULES.for_op("add")}
    assert RULES.candidates(module.entry.parameters[0]) == ()


def test_candidates_of_instructions_with_fewer_operands_than_the_key():
    from hlo_opt.ir.instruction import Instruction
    rl = RuleList()
    rl(P("tuple", P("constant"), P("constant"), rest=True), "two constants")(lambda ctx: None)
    rl(P("tuple"), "any tuple")(lambda ctx: None)
    table = Rules(rl)
    module = parse_hlo(_SMALL, "small")
    x = module.entry.parameters[0]
    shape = module.entry.root.shape
    for operands in ([], [x], [x, x, x]):
        inst = Instruction("tuple", shape, operands)
        assert [r.label for r in table.candidates(inst)] == ["any tuple"]
        assert [r.label for r in table.candidates(inst)] == ["any tuple"]  # cached


def test_all_pattern_states_its_opcodes():
    p = ALL(0)
    assert p.allows("constant") and p.allows("broadcast") and not p.allows("add")


def test_rules_needing_options_are_left_out_without_them():
    rl = RuleList()
    rl(P("negate", X("x")), "always")(lambda ctx, x: None)
    rl(P("negate", X("x")), "fast", when=lambda o: o.enable_fast_math)(lambda ctx, x: None)
    table = Rules(rl)
    off = table.for_options(AlgebraicSimplifierOptions())
    on = table.for_options(AlgebraicSimplifierOptions(enable_fast_math=True))
    assert [r.label for r in off.rules] == ["always"]
    assert [r.label for r in on.rules] == ["always", "fast"]
    assert table.for_options(AlgebraicSimplifierOptions()) is off  # cached


def test_when_gate_holds_in_run_rules():
    module = parse_hlo(_SMALL.replace("add(%g, %x)", "negate(%g)"), "small")
    calls = []
    rl = RuleList()
    rl(P("negate", X("x")), "fast", when=lambda o: o.enable_fast_math)(
        lambda ctx, x: calls.append(x))
    run_rules(module.entry, Rules(rl), AlgebraicSimplifierOptions())
    assert calls == []
    run_rules(module.entry, Rules(rl), AlgebraicSimplifierOptions(enable_fast_math=True))
    assert len(calls) == 1


def test_has_opcode():
    module = parse_hlo(_SMALL, "small")
    assert has_opcode(module, ("multiply",)) and not has_opcode(module, ("while", "sort"))
    assert comp_has_opcode(module.entry, frozenset(("add",)))
    assert not comp_has_opcode(module.entry, ("conditional",))

