"""cpu-instruction-fusion (CpuInstructionFusion): one run that may duplicate, as XLA:CPU
adds it, so a chain of cheap ops feeding two outputs becomes one loop fusion per output;
an expensive producer (exp, sqrt, float divide on the CPU) is not duplicated."""
from __future__ import annotations

from passes.cpu_instruction_fusion import CpuInstructionFusion

from tests.support.harness import check_pass, load_text

# two rounds of add / rotate / xor over two arrays, then a key added to both (threefry)
CHAIN = """
HloModule chain
ENTRY e {
  x0 = u32[64,32] parameter(0)
  x1 = u32[64,32] parameter(1)
  r = u32[] parameter(2)
  n = u32[] parameter(3)
  rb = u32[64,32] broadcast(r), dimensions={}
  nb = u32[64,32] broadcast(n), dimensions={}
  a0 = u32[64,32] add(x0, x1)
  l0 = u32[64,32] shift-left(x1, rb)
  h0 = u32[64,32] shift-right-logical(x1, nb)
  o0 = u32[64,32] or(l0, h0)
  b0 = u32[64,32] xor(a0, o0)
  a1 = u32[64,32] add(a0, b0)
  l1 = u32[64,32] shift-left(b0, rb)
  h1 = u32[64,32] shift-right-logical(b0, nb)
  o1 = u32[64,32] or(l1, h1)
  b1 = u32[64,32] xor(a1, o1)
  kb = u32[64,32] broadcast(n), dimensions={}
  y0 = u32[64,32] add(a1, kb)
  y1 = u32[64,32] add(b1, kb)
  ROOT t = (u32[64,32], u32[64,32]) tuple(y0, y1)
}
"""

EXPENSIVE = """
HloModule expensive
ENTRY e {
  x = f32[32,8] parameter(0)
  y = f32[32,8] parameter(1)
  e = f32[32,8] exponential(x)
  s = f32[32,8] sqrt(y)
  a = f32[32,8] add(e, s)
  m = f32[32,8] multiply(e, s)
  na = f32[32,8] negate(a)
  ROOT t = (f32[32,8], f32[32,8]) tuple(na, m)
}
"""


def _fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def test_a_shared_cheap_chain_is_duplicated_into_one_fusion_per_output():
    r = check_pass(load_text(CHAIN), "cpu-instruction-fusion")
    assert r.changed and r.compared_runs
    root = r.module.entry.root
    assert [o.opcode for o in root.operands] == ["fusion", "fusion"]
    assert len(_fusions(r.module)) == 2
    assert all(f.fusion_kind == "kLoop" for f in _fusions(r.module))
    # every round is inside both fusions: nothing but parameters is left unfused
    assert {i.opcode for i in r.module.entry.instructions} == {"parameter", "fusion", "tuple"}


def test_expensive_producers_are_not_duplicated():
    r = check_pass(load_text(EXPENSIVE), "cpu-instruction-fusion")
    assert r.changed and r.compared_runs
    unfused = {i.opcode for i in r.module.entry.instructions}
    assert {"exponential", "sqrt"} <= unfused


def test_may_duplicate_false_keeps_shared_producers_unfused():
    r = check_pass(load_text(CHAIN), [CpuInstructionFusion(may_duplicate=False)])
    assert r.compared_runs
    assert any(i.opcode == "add" for i in r.module.entry.instructions)


# a cheap, effectively unary producer read by a dot (not fusible) and by an elementwise op
DOT_USER = """
HloModule dot_user
ENTRY e {
  x = f32[32,32] parameter(0)
  c = f32[] parameter(1)
  cb = f32[32,32] broadcast(c), dimensions={}
  a = f32[32,32] multiply(x, cb)
  d = f32[32,32] dot(a, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[32,32] negate(a)
  ROOT t = (f32[32,32], f32[32,32]) tuple(d, n)
}
"""

# a sum of five arrays read by two elementwise ops
WIDE = """
HloModule wide
ENTRY e {
  x1 = f32[64,64] parameter(0)
  x2 = f32[64,64] parameter(1)
  x3 = f32[64,64] parameter(2)
  x4 = f32[64,64] parameter(3)
  x5 = f32[64,64] parameter(4)
  s1 = f32[64,64] add(x1, x2)
  s2 = f32[64,64] add(s1, x3)
  s3 = f32[64,64] add(s2, x4)
  s4 = f32[64,64] add(s3, x5)
  n = f32[64,64] negate(s4)
  m = f32[64,64] multiply(s4, x1)
  ROOT t = (f32[64,64], f32[64,64]) tuple(n, m)
}
"""


def _fused_count(module, opcode):
    return sum(1 for c in module.computations for i in c.instructions if i.opcode == opcode)


def test_a_producer_that_stays_materialised_is_not_duplicated():
    """Duplicating ``a`` into the negate would recompute it while the dot still needs
    it in memory: on the CPU a producer is duplicated only into all of its users."""
    r = check_pass(load_text(DOT_USER), "cpu-instruction-fusion")
    assert _fused_count(r.module, "multiply") == 1


def test_duplication_stops_at_four_large_inputs():
    """The sum reads five arrays: a copy of it in each consumer would re-read them all."""
    r = check_pass(load_text(WIDE), "cpu-instruction-fusion")
    assert r.changed and r.compared_runs
    assert _fused_count(r.module, "add") == 4
