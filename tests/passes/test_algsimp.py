"""algsimp: every rule has a FileCheck test that fires it; each of those modules is
differentially checked (verifier + interpreter before/after); exact rules are checked bit
for bit on IEEE special values; option-gated rules are tested with their options.

Tolerances: rules marked ``exact=False`` may change float rounding (reassociation,
reordered reductions, dot strength reduction, pow(A,2) => A*A): those modules are
compared with rtol=1e-5/atol=1e-6 (f32), the harness default.  Modules where only exact
rules fired are compared bit for bit, including nan/inf/-0 inputs.
"""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from passes.algsimp import RULES, AlgebraicSimplifier, AlgebraicSimplifierOptions
from tests.support.exactness import assert_bitwise, special_args
from tests.support.harness import check_pass, execute_or_xfail, is_deterministic
from tests.support.lit_chunks import chunks

CHUNKS = chunks("algsimp_*.hlo") + chunks("fidelity_algsimp_*.hlo")
LABELS = {r.label for r in RULES.rules}
EXACT = {r.label for r in RULES.rules if r.exact}

# Rules that only fire with non-default options: tested below with those options.
OPTION_GATED = {
    "exp(A) * exp(B) => exp(A + B)", "exp(A) / exp(B) => exp(A - B)",
    "A / exp(B) => A * exp(-B)", "pow(exp(A), B) => exp(A * B)", "log(exp(A)) => A",
    "sqrt(A * A) => |A|", "A / pow(B, C) => A * pow(B, -C)", "A / sqrt(B) => A * rsqrt(B)",
    "A / rsqrt(B) => A * sqrt(B)", "(A / B) / (C / D) => (A * D) / (B * C)",
    "(A / B) / C => A / (B * C)", "A / (B / C) => (A * C) / B", "pow(A, 3) => A * A * A",
    "pow(A, 0.5) => sqrt(A) for A >= 0", "log(pow(A, B)) => B * log(|A|)",
    "log(sqrt(A)) => 0.5 * log(A)", "log(rsqrt(A)) => -0.5 * log(A)",
    "rsqrt(pow(A, -2)) => A for A >= 0", "rsqrt(1 / A) => sqrt(A) for A >= 0",
    "sqrt(A) * sqrt(A) => A for A >= 0", "rsqrt(A) * rsqrt(A) => 1 / A",
    "convert(constant) => constant", "reduce-precision to its own type => A",
    "copy(copy(A)) => copy(A), or A when layouts match",
    "reshape => bitcast when the layouts make it one (layout sensitive)",
    "transpose => bitcast when the layouts make it one (layout sensitive)",
    "copy => bitcast when the layouts make it one (layout sensitive)",
}


def _run(text, options=None):
    m = parse_hlo(text)
    p = AlgebraicSimplifier(options)
    changed = p.run(m)
    return m, p, changed


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_lit_module_fires_its_rule_and_keeps_values(chunk):
    module = parse_hlo(chunk.text, chunk.file)
    for label in chunk.rules:
        assert label in LABELS, f"unknown rule label {label!r}"
    work = module.clone()
    p = AlgebraicSimplifier()
    p.run(work)
    for label in chunk.rules:
        assert p.last_fired[label] > 0, f"{label!r} did not fire; fired: {dict(p.last_fired)}"
    result = check_pass(module, [AlgebraicSimplifier()])
    if chunk.rules:
        assert result.changed
    if not is_deterministic(module) or p.last_inexact:
        return
    for seed in range(3):
        args = special_args(module, seed)
        if args is None:
            return
        expected = execute_or_xfail(module, args)
        actual = execute_or_xfail(work, args)
        assert_bitwise(expected, actual, f"{chunk.id} special inputs seed {seed}")


def test_every_rule_has_a_filecheck_test():
    covered = {label for c in CHUNKS for label in c.rules}
    missing = sorted(LABELS - covered - OPTION_GATED)
    assert not missing, f"rules without a FileCheck test: {missing}"


def test_option_gated_labels_exist():
    assert OPTION_GATED <= LABELS


# ---- option-gated rules ----------------------------------------------------------------
FAST = AlgebraicSimplifierOptions(enable_fast_math=True)
APPROX = AlgebraicSimplifierOptions(approximate_float_rewrites=True)

GATED_CASES = [
    ("log(exp(A)) => A", FAST, "f32[4]", "%e = f32[4] exponential(%p0)\n"
     "  ROOT %r = f32[4] log(%e)"),
    ("exp(A) * exp(B) => exp(A + B)", FAST, "f32[4]",
     "%e0 = f32[4] exponential(%p0)\n  %e1 = f32[4] exponential(%p1)\n"
     "  ROOT %r = f32[4] multiply(%e0, %e1)"),
    ("exp(A) / exp(B) => exp(A - B)", FAST, "f32[4]",
     "%e0 = f32[4] exponential(%p0)\n  %e1 = f32[4] exponential(%p1)\n"
     "  ROOT %r = f32[4] divide(%e0, %e1)"),
    ("A / exp(B) => A * exp(-B)", FAST, "f32[4]",
     "%e1 = f32[4] exponential(%p1)\n  ROOT %r = f32[4] divide(%p0, %e1)"),
    ("pow(exp(A), B) => exp(A * B)", FAST, "f32[4]",
     "%e0 = f32[4] exponential(%p0)\n  ROOT %r = f32[4] power(%e0, %p1)"),
    ("sqrt(A * A) => |A|", FAST, "f32[4]",
     "%m = f32[4] multiply(%p0, %p0)\n  ROOT %r = f32[4] sqrt(%m)"),
    ("A / pow(B, C) => A * pow(B, -C)", APPROX, "f32[4]",
     "%a = f32[4] abs(%p1)\n  %pw = f32[4] power(%a, %p0)\n  ROOT %r = f32[4] divide(%p0, %pw)"),
    ("A / sqrt(B) => A * rsqrt(B)", APPROX, "f32[4]",
     "%s = f32[4] sqrt(%p1)\n  ROOT %r = f32[4] divide(%p0, %s)"),
    ("A / rsqrt(B) => A * sqrt(B)", APPROX, "f32[4]",
     "%s = f32[4] rsqrt(%p1)\n  ROOT %r = f32[4] divide(%p0, %s)"),
    ("(A / B) / (C / D) => (A * D) / (B * C)", APPROX, "f32[4]",
     "%d0 = f32[4] divide(%p0, %p1)\n  %d1 = f32[4] divide(%p1, %p0)\n"
     "  ROOT %r = f32[4] divide(%d0, %d1)"),
    ("(A / B) / C => A / (B * C)", APPROX, "f32[4]",
     "%d0 = f32[4] divide(%p0, %p1)\n  ROOT %r = f32[4] divide(%d0, %p0)"),
    ("A / (B / C) => (A * C) / B", APPROX, "f32[4]",
     "%d0 = f32[4] divide(%p0, %p1)\n  ROOT %r = f32[4] divide(%p1, %d0)"),
    ("pow(A, 3) => A * A * A", APPROX, "f32[4]",
     "%c = f32[] constant(3)\n  %b = f32[4] broadcast(%c), dimensions={}\n"
     "  ROOT %r = f32[4] power(%p0, %b)"),
    ("pow(A, 0.5) => sqrt(A) for A >= 0", APPROX, "f32[4]",
     "%e = f32[4] exponential(%p0)\n  %c = f32[] constant(0.5)\n"
     "  %b = f32[4] broadcast(%c), dimensions={}\n  ROOT %r = f32[4] power(%e, %b)"),
    ("log(pow(A, B)) => B * log(|A|)", APPROX, "f32[4]",
     "%pw = f32[4] power(%p0, %p1)\n  ROOT %r = f32[4] log(%pw)"),
    ("log(sqrt(A)) => 0.5 * log(A)", APPROX, "f32[4]",
     "%s = f32[4] sqrt(%p0)\n  ROOT %r = f32[4] log(%s)"),
    ("log(rsqrt(A)) => -0.5 * log(A)", APPROX, "f32[4]",
     "%s = f32[4] rsqrt(%p0)\n  ROOT %r = f32[4] log(%s)"),
    ("rsqrt(pow(A, -2)) => A for A >= 0", APPROX, "f32[4]",
     "%e = f32[4] exponential(%p0)\n  %c = f32[] constant(-2)\n"
     "  %b = f32[4] broadcast(%c), dimensions={}\n  %pw = f32[4] power(%e, %b)\n"
     "  ROOT %r = f32[4] rsqrt(%pw)"),
    ("rsqrt(1 / A) => sqrt(A) for A >= 0", APPROX, "f32[4]",
     "%e = f32[4] exponential(%p0)\n  %c = f32[] constant(1)\n"
     "  %b = f32[4] broadcast(%c), dimensions={}\n  %d = f32[4] divide(%b, %e)\n"
     "  ROOT %r = f32[4] rsqrt(%d)"),
    ("sqrt(A) * sqrt(A) => A for A >= 0", APPROX, "f32[4]",
     "%e = f32[4] exponential(%p0)\n  %s = f32[4] sqrt(%e)\n  ROOT %r = f32[4] multiply(%s, %s)"),
    ("rsqrt(A) * rsqrt(A) => 1 / A", APPROX, "f32[4]",
     "%e = f32[4] exponential(%p0)\n  %s = f32[4] rsqrt(%e)\n  ROOT %r = f32[4] multiply(%s, %s)"),
    ("convert(constant) => constant", AlgebraicSimplifierOptions(
        use_convert_constant_folding=True), "f32[4]",
     "%c = f64[4] constant({1, 2, 3, 4})\n  %cv = f32[4] convert(%c)\n"
     "  ROOT %r = f32[4] add(%p0, %cv)"),
]


def _gated_module(body, ty):
    return (f"HloModule gated\nENTRY %main (p0: {ty}, p1: {ty}) -> {ty} {{\n"
            f"  %p0 = {ty} parameter(0)\n  %p1 = {ty} parameter(1)\n  {body}\n}}\n")


@pytest.mark.parametrize("label,options,ty,body", GATED_CASES, ids=[c[0] for c in GATED_CASES])
def test_option_gated_rule(label, options, ty, body):
    text = _gated_module(body, ty)
    _, default, _ = _run(text)
    assert default.last_fired[label] == 0, "must not fire with default options"
    m, p, changed = _run(text, options)
    assert p.last_fired[label] > 0, dict(p.last_fired)
    # value-changing by design: compare loosely, on positive inputs where the identity
    # holds mathematically
    import numpy as np
    args = [np.abs(np.random.default_rng(3).standard_normal(4)).astype(np.float32) + 0.5
            for _ in range(2)]
    expected = execute_or_xfail(parse_hlo(text), args)
    actual = execute_or_xfail(m, args)
    np.testing.assert_allclose(expected[0], actual[0], rtol=2e-5, atol=1e-6)


def test_reduce_precision_noop_option():
    text = ("HloModule rp\nENTRY %main (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n"
            "  ROOT %r = f32[4] reduce-precision(%p0), exponent_bits=8, mantissa_bits=23\n}\n")
    _, p, _ = _run(text)
    assert p.last_fired["reduce-precision to its own type => A"] == 0
    m, p, _ = _run(text, AlgebraicSimplifierOptions(enable_remove_no_op_reduce_precision=True))
    assert p.last_fired["reduce-precision to its own type => A"] == 1
    assert m.entry.root.opcode == "parameter"


def test_float_reassociation_can_be_disabled():
    text = ("HloModule r\nENTRY %main (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n"
            "  %c1 = f32[] constant(0.1)\n  %c2 = f32[] constant(0.2)\n"
            "  %b1 = f32[4] broadcast(%c1), dimensions={}\n"
            "  %b2 = f32[4] broadcast(%c2), dimensions={}\n"
            "  %a1 = f32[4] add(%p0, %b1)\n  ROOT %a2 = f32[4] add(%a1, %b2)\n}\n")
    _, p, _ = _run(text)
    assert p.last_fired["(A + bcast(C1)) + bcast(C2) => A + bcast(C1 + C2)"] == 1
    _, p, changed = _run(text, AlgebraicSimplifierOptions(float_reassociation=False))
    assert not changed and not p.last_fired


def test_layout_sensitive_keeps_layout_changing_rewrites_off():
    text = ("HloModule l\nENTRY %main (p0: f32[4,8]) -> f32[8,4] {\n"
            "  %p0 = f32[4,8]{1,0} parameter(0)\n"
            "  ROOT %c = f32[4,8]{0,1} copy(%p0)\n}\n")
    m, p, changed = _run(text)
    assert changed and m.entry.root.opcode == "parameter"
    m, p, changed = _run(text, AlgebraicSimplifierOptions(is_layout_sensitive=True))
    assert not changed and m.entry.root.opcode == "copy"


def test_copy_of_copy_layout_sensitive():
    text = ("HloModule l\nENTRY %main (p0: f32[4,8]) -> f32[4,8] {\n"
            "  %p0 = f32[4,8]{1,0} parameter(0)\n"
            "  %c0 = f32[4,8]{0,1} copy(%p0)\n"
            "  ROOT %c1 = f32[4,8]{1,0} copy(%c0)\n}\n")
    m, p, changed = _run(text, AlgebraicSimplifierOptions(is_layout_sensitive=True))
    assert p.last_fired["copy(copy(A)) => copy(A), or A when layouts match"] == 1
    assert m.entry.root.opcode == "parameter"


def test_control_dependencies_block_rewrites():
    text = ("HloModule c\nENTRY %main (p0: f32[4]) -> f32[4] {\n  %p0 = f32[4] parameter(0)\n"
            "  %n = f32[4] negate(%p0)\n"
            "  %nn = f32[4] negate(%n), control-predecessors={%p0}\n"
            "  ROOT %r = f32[4] add(%nn, %nn)\n}\n")
    m, p, _ = _run(text)
    assert p.last_fired["negate(negate(A)) => A"] == 0


def test_rules_are_indexed_by_opcode():
    counts = RULES.counts()
    assert sum(counts.values()) == len(RULES)
    for op in ("add", "multiply", "broadcast", "slice", "reduce", "dot", "transpose"):
        assert counts[op] >= 4


LAYOUT_CASES = [
    ("transpose => bitcast when the layouts make it one (layout sensitive)", True,
     "%p0 = f32[4,8]{1,0} parameter(0)\n  ROOT %t = f32[8,4]{0,1} transpose(%p0), "
     "dimensions={1,0}", "f32[4,8]", "f32[8,4]"),
    ("transpose => bitcast when the layouts make it one (layout sensitive)", False,
     "%p0 = f32[4,8]{1,0} parameter(0)\n  ROOT %t = f32[8,4]{1,0} transpose(%p0), "
     "dimensions={1,0}", "f32[4,8]", "f32[8,4]"),
    ("reshape => bitcast when the layouts make it one (layout sensitive)", True,
     "%p0 = f32[4,8]{1,0} parameter(0)\n  ROOT %r = f32[2,2,8]{2,1,0} reshape(%p0)",
     "f32[4,8]", "f32[2,2,8]"),
    ("reshape => bitcast when the layouts make it one (layout sensitive)", False,
     "%p0 = f32[4,8]{0,1} parameter(0)\n  ROOT %r = f32[32]{0} reshape(%p0)",
     "f32[4,8]", "f32[32]"),
    ("copy => bitcast when the layouts make it one (layout sensitive)", True,
     "%p0 = f32[1,8]{1,0} parameter(0)\n  ROOT %c = f32[1,8]{0,1} copy(%p0)",
     "f32[1,8]", "f32[1,8]"),
]


@pytest.mark.parametrize("label,fires,body,tin,tout", LAYOUT_CASES)
def test_layout_sensitive_bitcasts(label, fires, body, tin, tout):
    import numpy as np
    text = f"HloModule l\nENTRY %main (p0: {tin}) -> {tout} {{\n  {body}\n}}\n"
    m, p, _ = _run(text, AlgebraicSimplifierOptions(is_layout_sensitive=True))
    assert (p.last_fired[label] > 0) == fires
    if fires:
        assert m.entry.root.opcode == "bitcast"
    dims = tuple(int(d) for d in tin[4:-1].split(","))
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    expected = execute_or_xfail(parse_hlo(text), [x])
    actual = execute_or_xfail(m, [x])
    assert np.array_equal(expected[0], actual[0])
    _, p2, _ = _run(text)  # layout insensitive: never a bitcast
    assert p2.last_fired[label] == 0


def test_dynamic_slices_with_an_index_vector_are_left_alone():
    """The old form (one start-index vector) is dynamic-index-splitter's to rewrite; the
    per-dimension rules used to index past the operands on it."""
    text = """HloModule v
ENTRY %main (x: f32[5,7], i: s32[2], u: f32[2,3]) -> (f32[2,3], f32[5,7]) {
  %x = f32[5,7] parameter(0)
  %i = s32[2] parameter(1)
  %u = f32[2,3] parameter(2)
  %d = f32[2,3] dynamic-slice(%x, %i), dynamic_slice_sizes={2,3}
  %w = f32[5,7] dynamic-update-slice(%x, %u, %i)
  ROOT %t = (f32[2,3], f32[5,7]) tuple(%d, %w)
}
"""
    m, p, changed = _run(text)
    assert not changed and not p.last_fired
    assert m.to_text() == parse_hlo(text).to_text()


# ---- collectives of a broadcast constant, on several replicas ----------------------------
_COLLECTIVE_SUM = """HloModule ar, replica_count=4
add {
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT s = {t}[] add(x, y)
}
ENTRY e {
  c = {t}[] constant(3)
  b = {t}[8] broadcast(c), dimensions={}
  ROOT r = {t}[{n}] {op}(b), replica_groups={groups}, {extra}to_apply=add
}
"""


@pytest.mark.parametrize("t,op,groups,n,extra", [
    ("f32", "all-reduce", "{{0,1,2,3}}", 8, ""),
    ("s32", "all-reduce", "{{0,1},{2,3}}", 8, ""),
    ("f32", "reduce-scatter", "{{0,1,2,3}}", 2, "dimensions={0}, "),
])
def test_collective_sum_of_broadcast_constant_on_replicas(t, op, groups, n, extra):
    """C summed over a group of n devices is C * n on every device (XLA's
    HandleAllReduceOrReduceScatter), checked on 4 replicas."""
    from tests.support.multi_replica import check_pass_replicated
    text = (_COLLECTIVE_SUM.replace("{t}", t).replace("{op}", op)
            .replace("{groups}", groups).replace("{n}", str(n)).replace("{extra}", extra))
    m = parse_hlo(text)
    result = check_pass_replicated(m, [AlgebraicSimplifier()], num_replicas=4)
    assert result.changed and op not in result.after_text, result.after_text
    size = len(groups.split("},{")[0].strip("{}").split(","))
    assert f"constant({3 * size})" in result.after_text, result.after_text


def test_collective_sum_with_empty_groups_is_left_alone():
    """Empty replica groups do not tell the group size here: no constant is made."""
    text = (_COLLECTIVE_SUM.replace("{t}", "f32").replace("{op}", "all-reduce")
            .replace("{groups}", "{}").replace("{n}", "8").replace("{extra}", ""))
    _, p, _ = _run(text)
    assert p.last_fired["all-reduce(broadcast(C)) => broadcast(C), or broadcast(C * group "
                         "size) for a sum"] == 0
