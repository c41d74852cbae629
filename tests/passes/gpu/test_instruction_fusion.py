"""``fusion`` (GpuInstructionFusion): the decisions XLA's rules make, each checked on the
module structure and through the interpreter (the differential harness)."""
from __future__ import annotations

from pathlib import Path

import pytest

from passes.gpu.instruction_fusion import GpuInstructionFusion

from .util import check, entry_ops, fused_ops, fusions, kinds, run

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

CHAIN = """HloModule chain
ENTRY %main (a: f32[16,32], b: f32[16,32]) -> f32[16,32] {
  %a = f32[16,32] parameter(0)
  %b = f32[16,32] parameter(1)
  %add = f32[16,32] add(%a, %b)
  %neg = f32[16,32] negate(%add)
  %exp = f32[16,32] exponential(%neg)
  %c = f32[] constant(2)
  %bc = f32[16,32] broadcast(%c), dimensions={}
  %mul = f32[16,32] multiply(%exp, %bc)
  ROOT %tanh = f32[16,32] tanh(%mul)
}
"""


def test_elementwise_chain_is_one_loop_fusion():
    result = check(CHAIN, "fusion")
    m = result.module
    assert entry_ops(m) == ["parameter", "parameter", "fusion"]
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kLoop"
    # the scalar constant went in too (it may: the consumer was already a fusion)
    assert fused_ops(f) == ["add", "broadcast", "constant", "exponential", "multiply",
                            "negate", "tanh"]
    assert f.called[0].name.startswith("fused_computation")
    assert result.compared_runs == 2


def test_reduce_sum_xyz_is_one_input_fusion():
    text = (SAMPLES / "reduce_sum_xyz.hlo").read_text()
    m = check(text, "fusion", seeds=(0,)).module
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kInput"
    assert f.is_root
    assert fused_ops(f) == ["add", "constant", "multiply", "reduce"]


def test_scalar_constant_is_not_a_fusion_by_itself():
    text = """HloModule c
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %c = f32[8] constant({1,2,3,4,5,6,7,8})
  ROOT %add = f32[8] add(%a, %c)
}
"""
    m = run(text, "fusion")
    # a non-scalar constant is never fused (GPU keeps it as an external constant); the add
    # alone has nothing to fuse
    assert entry_ops(m) == ["parameter", "constant", "add"]


EXPENSIVE_SHARED = """HloModule dup
ENTRY %main (a: f64[64]) -> (f64[64], f64[64]) {
  %a = f64[64] parameter(0)
  %e = f64[64] exponential(%a)
  %n1 = f64[64] negate(%e)
  %n2 = f64[64] abs(%e)
  ROOT %t = (f64[64], f64[64]) tuple(%n1, %n2)
}
"""
CHEAP_SHARED = EXPENSIVE_SHARED.replace("f64", "f32")


def test_expensive_producer_is_not_duplicated():
    # exp of f64 is expensive: it stays alone, each user becomes its own fusion
    m = check(EXPENSIVE_SHARED, "fusion").module
    assert "exponential" in entry_ops(m)
    assert all("exponential" not in fused_ops(f) for f in fusions(m))


def test_cheap_producer_is_duplicated_into_every_user():
    # exp of f32 is cheap on the GPU: both users get their own copy
    m = check(CHEAP_SHARED, "fusion").module
    assert "exponential" not in entry_ops(m)
    fs = fusions(m)
    assert len(fs) == 2 and all("exponential" in fused_ops(f) for f in fs)


def test_no_duplication_when_may_duplicate_is_false():
    m = run(CHEAP_SHARED, [GpuInstructionFusion(may_duplicate=False)])
    assert "exponential" in entry_ops(m)


def test_broadcast_is_duplicated_freely():
    text = """HloModule b
ENTRY %main (a: f32[128], x: f32[64,128], y: f32[64,128]) -> (f32[64,128], f32[64,128]) {
  %a = f32[128] parameter(0)
  %x = f32[64,128] parameter(1)
  %y = f32[64,128] parameter(2)
  %b = f32[64,128] broadcast(%a), dimensions={1}
  %p = f32[64,128] add(%x, %b)
  %q = f32[64,128] multiply(%y, %b)
  ROOT %t = (f64[64,128], f64[64,128]) tuple(%p, %q)
}
""".replace("(f64[64,128], f64[64,128]) tuple", "(f32[64,128], f32[64,128]) tuple")
    m = check(text, "fusion").module
    assert "broadcast" not in entry_ops(m)
    assert all("broadcast" in fused_ops(f) for f in fusions(m))


def test_reduce_epilogue_of_unary_elementwise_ops():
    """XLA's IsProducerConsumerFusible takes any IsIntermediate(hlo, 1) epilogue (a unary
    elementwise or bitcast-like op); its older IsReduceIntermediate took converts and
    bitcasts only."""
    text = """HloModule epi
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %main (a: f32[32,1024]) -> (f16[32], f32[32]) {
  %a = f32[32,1024] parameter(0)
  %z = f32[] constant(0)
  %r = f32[32] reduce(%a, %z), dimensions={1}, to_apply=%add
  %cv = f16[32] convert(%r)
  %r2 = f32[32] reduce(%a, %z), dimensions={1}, to_apply=%add
  %e = f32[32] exponential(%r2)
  ROOT %t = (f16[32], f32[32]) tuple(%cv, %e)
}
"""
    m = check(text, "fusion").module
    by_root = {f.called[0].root.opcode: f for f in fusions(m)}
    # convert(reduce): the reduction output fusion XLA allows
    assert "convert" in by_root and "reduce" in fused_ops(by_root["convert"])
    # exp(reduce) is an epilogue too
    assert "exponential" in by_root and "reduce" in fused_ops(by_root["exponential"])
    assert not any(i.opcode in ("reduce", "exponential") for i in m.entry.instructions)


def test_root_is_not_fused_into_its_users():
    text = """HloModule root
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  ROOT %n = f32[8] negate(%a)
  %e = f32[8] exponential(%n)
}
"""
    m = run(text, "fusion")
    assert m.entry.root.opcode == "negate"


def test_operand_budget_limits_fusion():
    # 100 distinct parameters added up: no fusion may take more than 96 operands+outputs
    n = 100
    params = ", ".join(f"p{i}: f32[4]" for i in range(n))
    lines = [f"  %p{i} = f32[4] parameter({i})" for i in range(n)]
    lines.append("  %s0 = f32[4] add(%p0, %p1)")
    for i in range(2, n):
        lines.append(f"  %s{i - 1} = f32[4] add(%s{i - 2}, %p{i})")
    lines[-1] = "  ROOT " + lines[-1].strip()
    text = f"HloModule big\nENTRY %main ({params}) -> f32[4] {{\n" + "\n".join(lines) + "\n}\n"
    m = check(text, "fusion", seeds=(0,)).module
    assert all(len(f.operands) + 1 <= 96 for f in fusions(m))
    assert len(fusions(m)) >= 2


def test_softmax_fusion_alone():
    # exp feeds the sum and the divide: without duplication (the first of XLA's two
    # instruction-fusion runs) sub+exp become one loop fusion, which the second run may
    # not duplicate (it is a fusion now): 2 loop fusions and 2 bare reductions
    text = (SAMPLES / "softmax.hlo").read_text()
    m = check(text, "fusion", seeds=(0,)).module
    assert kinds(m) == ["kLoop", "kLoop"]
    assert entry_ops(m).count("reduce") == 2


def test_softmax_fusions_with_merger():
    # XLA's classic result: the max reduction stays a reduction kernel, exp+sum is one
    # input fusion, sub+exp+divide one loop fusion (fusion_merger merges the exp fusion
    # into both users; the next fusion round fuses the scalar init constant)
    text = (SAMPLES / "softmax.hlo").read_text()
    m = check(text, "fusion,fusion_merger,fusion", seeds=(0,)).module
    assert kinds(m) == ["kInput", "kLoop"]
    assert entry_ops(m).count("reduce") == 1
    by_kind = {f.attrs["kind"]: f for f in fusions(m)}
    assert fused_ops(by_kind["kInput"]).count("exponential") == 1
    assert "reduce" in fused_ops(by_kind["kInput"])
    assert "constant" in fused_ops(by_kind["kInput"])
    assert "exponential" in fused_ops(by_kind["kLoop"])
    assert "divide" in fused_ops(by_kind["kLoop"])


@pytest.mark.parametrize("name", ["layer_norm", "mlp_train_step", "mobilenet_cluster",
                                  "while_loop", "conditional"])
def test_samples_differential(name):
    text = (SAMPLES / f"{name}.hlo").read_text()
    result = check(text, "fusion", seeds=(0,))
    assert result.changed


def test_instructions_with_control_edges_stay_unfused():
    text = """HloModule ctrl
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %n = f32[8] negate(%a)
  %e = f32[8] exponential(%n)
  %t = f32[8] tanh(%a), control-predecessors={%n}
  ROOT %r = f32[8] add(%e, %t)
}
"""
    for passes in ("fusion", "priority-fusion", "fusion,fusion_merger,multi_output_fusion"):
        m = run(text, passes)
        names = {i.name for i in m.entry.instructions}
        assert {"n", "t"} <= names
        t = [i for i in m.entry.instructions if i.name == "t"][0]
        assert [p.name for p in t.control_predecessors] == ["n"]
