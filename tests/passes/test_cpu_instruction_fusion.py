"""cpu-instruction-fusion (CpuInstructionFusion): one run that may duplicate, as XLA:CPU
adds it, so a chain of cheap ops feeding two outputs becomes one loop fusion per output;
an expensive producer (exp, sqrt, float divide on the CPU) is not duplicated."""
from __future__ import annotations

from passes.cpu_instruction_fusion import CpuInstructionFusion

from tests.support.harness import check_pass, load_text

# two rounds of add / rotate / xor over two arrays, both outputs reading every round
CHAIN = """
HloModule chain
ENTRY e {
  x0 = u32[16,24] parameter(0)
  x1 = u32[16,24] parameter(1)
  r = u32[] parameter(2)
  n = u32[] parameter(3)
  rb = u32[16,24] broadcast(r), dimensions={}
  nb = u32[16,24] broadcast(n), dimensions={}
  a0 = u32[16,24] add(x0, x1)
  l0 = u32[16,24] shift-left(x1, rb)
  h0 = u32[16,24] shift-right-logical(x1, nb)
  o0 = u32[16,24] or(l0, h0)
  b0 = u32[16,24] xor(a0, o0)
  a1 = u32[16,24] add(a0, b0)
  l1 = u32[16,24] shift-left(b0, rb)
  h1 = u32[16,24] shift-right-logical(b0, nb)
  o1 = u32[16,24] or(l1, h1)
  b1 = u32[16,24] xor(a1, o1)
  ROOT t = (u32[16,24], u32[16,24]) tuple(a1, b1)
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
