"""Property: reshape-mover on random elementwise graphs over reshapes/transposes
(random_graphs.reshape_mover_cases) moves exactly the rearranges XLA's ReshapeMover moves
(the pass's own count, ``ReshapeMover.moved``, against this file's oracle), removes the
instructions it replaced and the reshapes it sank (a sunk transpose stays, under the
inverse transpose, for algsimp, as in XLA), leaves everything else, keeps the result valid
and the values bit for bit.

The oracle is written here from ``xla/hlo/transforms/simplifiers/reshape_mover.cc`` and
``HloInstruction::IsElementwise``: a candidate is an elementwise instruction with a
rearrange operand that cannot trivially take the inverse rearrange; every other operand is
an equivalent rearrange (same opcode and dims, same permutation or same source dims) or
trivially rearrangeable (nop reshape/transpose, constant, rng with one user, broadcast
with sorted dimensions that stay sorted under the transpose or that broadcasts a scalar
under a reshape); candidates are dropped while some rearrange operand of theirs has a user
outside the set.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from hlo_opt.api import parse_hlo, verify
from hlo_opt.ir.types import BIT_WIDTH
from passes.reshape_mover import ReshapeMover
from tests.support.exactness import assert_bitwise, special_args
from tests.support.harness import execute_or_xfail, random_args
from tests.support.random_graphs import reshape_mover_cases

EXAMPLES = 200
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

# HloInstruction::IsOpElementwise
XLA_ELEMENTWISE = frozenset("""abs round-nearest-afz round-nearest-even ceil
count-leading-zeros convert bitcast-convert copy cosine exponential exponential-minus-one
floor imag is-finite log log-plus-one not negate popcnt real reduce-precision rsqrt logistic
sign sine sqrt cbrt tan tanh erf add atan2 compare complex divide maximum minimum multiply
power remainder subtract and or xor shift-left shift-right-arithmetic shift-right-logical
stochastic-convert select clamp""".split())


def is_elementwise(inst) -> bool:
    if inst.opcode == "bitcast-convert":
        return BIT_WIDTH[inst.shape.element_type] == \
            BIT_WIDTH[inst.operands[0].shape.element_type]
    return inst.opcode in XLA_ELEMENTWISE


def is_rearrange(inst) -> bool:
    return inst.opcode in ("reshape", "transpose")


def equivalent(a, b) -> bool:
    if a.opcode != b.opcode or a.shape.dims != b.shape.dims:
        return False
    if a.opcode == "transpose":
        return tuple(a.dimensions) == tuple(b.dimensions)
    return a.operands[0].shape.dims == b.operands[0].shape.dims


def trivially_rearranged(inst, rearrange) -> bool:
    if rearrange.opcode == "reshape" and rearrange.shape == rearrange.operands[0].shape:
        return True
    if rearrange.opcode == "transpose" and \
            list(rearrange.dimensions) == list(range(len(rearrange.dimensions))):
        return True
    if inst.opcode == "constant" or (inst.opcode == "rng" and inst.user_count == 1):
        return True
    if inst.opcode == "broadcast":
        dims = list(inst.dimensions)
        if dims != sorted(dims):
            return False
        if rearrange.opcode == "reshape":
            return inst.operands[0].shape.rank == 0
        perm = list(rearrange.dimensions)  # bcast dim d lands at perm[d] after the inverse
        moved = [perm[d] for d in dims]
        return moved == sorted(moved)
    return False


def first_nontrivial(inst):
    return next((o for o in inst.operands
                 if is_rearrange(o) and not trivially_rearranged(o.operands[0], o)), None)


def is_candidate(inst) -> bool:
    if not is_elementwise(inst) or inst.control_predecessors:
        return False
    r = first_nontrivial(inst)
    return r is not None and all(
        equivalent(o, r) if is_rearrange(o) else trivially_rearranged(o, r)
        for o in inst.operands)


def expected_moves(comp) -> set:
    """Names of the instructions of ``comp`` whose rearrange operands XLA sinks."""
    candidates = {i for i in comp.instructions if is_candidate(i)}
    removed = True
    while candidates and removed:
        removed = False
        for r in {o for i in candidates for o in i.operands if is_rearrange(o)}:
            if any(u not in candidates for u in r.users):
                for u in r.users:
                    if u in candidates:
                        candidates.discard(u)
                        removed = True
    return {i.name for i in candidates}


def check_reshape_mover(text: str) -> tuple[bool, int]:
    """Run reshape-mover on ``text`` and check every property; returns (changed, moved)."""
    before = parse_hlo(text, "<random reshape-mover>")
    verify(before)
    after = before.clone()
    p = ReshapeMover()
    changed = p.run(after)
    verify(after)
    after_text = after.to_text()
    assert parse_hlo(after_text).to_text() == after_text, "printing is not canonical"

    expected = 0
    for comp in before.computations:
        moves = expected_moves(comp)
        expected += len(moves)
        # reshape operands are bypassed (the inverse of reshape(x) is x) and go; XLA
        # writes transpose'(transpose(x)) for a transpose operand and leaves it to algsimp
        sunk = {o.name for i in comp.instructions if i.name in moves
                for o in i.operands if o.opcode == "reshape"}
        present = {i.name for i in after.computation(comp.name).instructions}
        assert not (moves | sunk) & present, (
            f"still there: {sorted((moves | sunk) & present)}\n{after_text}")
        names = {i.name for i in comp.instructions}
        lost = names - moves - sunk - present
        assert not lost, f"removed {sorted(lost)}\n{after_text}"
    assert p.moved == expected, f"moved {p.moved}, XLA moves {expected}\n{text}"
    assert changed == bool(expected)

    args_list = [a for a in (random_args(before, 0), random_args(before, 1),
                             special_args(before, 2)) if a is not None]
    for args in args_list:
        with np.errstate(all="ignore"):
            assert_bitwise(execute_or_xfail(before, args), execute_or_xfail(after, args),
                           text)
    return changed, p.moved


STATS = {"examples": 0, "changed": 0, "moved": 0}


@SETTINGS
@given(reshape_mover_cases())
def _reshape_mover_property(case):
    changed, moved = check_reshape_mover(case.text)
    STATS["examples"] += 1
    STATS["changed"] += changed
    STATS["moved"] += moved


def test_reshape_mover_property_on_random_rearrange_graphs():
    for k in STATS:
        STATS[k] = 0
    _reshape_mover_property()
    print(f"reshape-mover property: {STATS}")
    assert STATS["examples"] >= EXAMPLES // 2
    assert STATS["changed"] >= 0.5 * STATS["examples"], STATS


# ---- found by the property test (the generator's copies=True / wide_bitcasts=True) -------

WIDE_BITCAST = """HloModule m

ENTRY %e (p: f32[2,3]) -> u8[6,4] {
  %p = f32[2,3] parameter(0)
  %r = f32[6] reshape(%p)
  ROOT %b = u8[6,4] bitcast-convert(%r)
}
"""

COPY = """HloModule m

ENTRY %e (p: f32[2,3], q: f32[3,2]) -> f32[2,3] {
  %p = f32[2,3] parameter(0)
  %q = f32[3,2] parameter(1)
  %t = f32[2,3] transpose(%q), dimensions={1,0}
  ROOT %c = f32[2,3] copy(%t)
}
"""


def test_bitcast_convert_of_another_width_is_not_moved():
    module = parse_hlo(WIDE_BITCAST)
    p = ReshapeMover()
    changed = p.run(module)
    verify(module)
    assert not changed and p.moved == 0


def test_copy_is_moved_like_xla():
    module = parse_hlo(COPY)
    assert expected_moves(module.entry) == {"c"}  # the oracle's XLA reading
    p = ReshapeMover()
    p.run(module)
    assert p.moved == 1, module.to_text()


@pytest.mark.parametrize("text", [WIDE_BITCAST, COPY], ids=["wide_bitcast", "copy"])
def test_oracle_reads_the_reproductions_like_xla(text):
    module = parse_hlo(text)
    assert expected_moves(module.entry) == (set() if "bitcast" in text else {"c"})


# ---- the check itself can fail ----------------------------------------------------------

MOVES = """HloModule m

ENTRY %e (p: f32[2,3], q: f32[2,3], s: f32[3,2]) -> (f32[6], f32[6]) {
  %p = f32[2,3] parameter(0)
  %q = f32[2,3] parameter(1)
  %s = f32[3,2] parameter(2)
  %rp = f32[6] reshape(%p)
  %rq = f32[6] reshape(%q)
  %rs = f32[6] reshape(%s)
  %a = f32[6] add(%rp, %rq)
  %b = f32[6] multiply(%rs, %rs)
  %c = f32[6] subtract(%b, %rs)
  ROOT %t = (f32[6], f32[6]) tuple(%a, %c)
}
"""


def test_check_passes_on_the_real_pass():
    assert check_reshape_mover(MOVES) == (True, 1)  # %a; %rs also feeds %c


@pytest.mark.parametrize("attr,broken", [
    ("run", lambda self, module: False),
    ("is_candidate", lambda self, inst: inst.opcode in ("add", "multiply", "subtract")),
], ids=["no-op", "moves-past-a-non-rearrangeable-operand"])
def test_check_fails_on_a_broken_reshape_mover(monkeypatch, attr, broken):
    monkeypatch.setattr(ReshapeMover, attr, broken)
    with pytest.raises(AssertionError):
        check_reshape_mover(MOVES)
