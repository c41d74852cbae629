"""horizontal_input_fusion (XLA's GpuHorizontalInputFusion): XLA's test cases from
horizontal_input_fusion_test.cc plus the rules they do not cover; each is checked on the
resulting graph and by the interpreter (outputs before == after)."""
from __future__ import annotations

from hlo_opt.api import parse_hlo
from passes.pipelines import build_pipeline

from .util import check, entry_ops, fusions, run

PASS = "horizontal_input_fusion"

ADD_F16 = """%add_f16 (x: f16[], y: f16[]) -> f16[] {
  %x = f16[] parameter(0)
  %y = f16[] parameter(1)
  ROOT %add = f16[] add(%x, %y)
}
"""

ADD_F32 = """%add (ax: f32[], ay: f32[]) -> f32[] {
  %ax = f32[] parameter(0)
  %ay = f32[] parameter(1)
  ROOT %asum = f32[] add(%ax, %ay)
}
"""

# XLA: HorizontalInputFusionTest.BasicTest
BASIC = "HloModule BasicTest\n" + ADD_F16 + """
fused_computation.1 {
  arg.1 = f16[1024]{0} parameter(0)
  constant0 = f16[] constant(0)
  ROOT reduce1 = f16[] reduce(arg.1, constant0), dimensions={0}, to_apply=%add_f16
}

fused_computation.2 {
  arg.1 = f16[1024]{0} parameter(0)
  constant0 = f16[] constant(0)
  ROOT reduce1 = f16[] reduce(arg.1, constant0), dimensions={0}, to_apply=%add_f16
}

ENTRY entry_computation {
  arg.1 = f16[1024]{0} parameter(0)
  arg.2 = f16[1024]{0} parameter(1)
  fusion.1 = f16[] fusion(arg.1), kind=kInput, calls=fused_computation.1
  fusion.2 = f16[] fusion(arg.2), kind=kInput, calls=fused_computation.2
  ROOT tuple.1 = (f16[], f16[]) tuple(fusion.1, fusion.2)
}
"""


def _root_reads_one_mof(m):
    root = m.entry.root
    assert root.opcode == "tuple"
    assert [o.opcode for o in root.operands] == ["get-tuple-element"] * 2
    fusion = root.operands[0].operands[0]
    assert fusion.opcode == "fusion" and root.operands[1].operands[0] is fusion
    fused_root = fusion.called[0].root
    assert fused_root.opcode == "tuple"
    assert [o.opcode for o in fused_root.operands] == ["reduce", "reduce"]
    return fusion


def test_basic():
    r = check(BASIC, PASS, rtol=1e-2, atol=1e-2)
    assert r.changed and r.compared_runs == 2
    fusion = _root_reads_one_mof(r.module)
    assert fusion.attrs["kind"] == "kInput"
    assert len(fusions(r.module)) == 1


# XLA: HorizontalInputFusionTest.NonfusionInstrs
NONFUSION = "HloModule NonfusionInstrs\n" + ADD_F16 + """
ENTRY entry_computation {
  arg.0 = f16[1024]{0} parameter(0)
  arg.1 = f16[1024]{0} parameter(1)
  constant0 = f16[] constant(0)
  reduce.0 = f16[] reduce(arg.0, constant0), dimensions={0}, to_apply=%add_f16
  reduce.1 = f16[] reduce(arg.1, constant0), dimensions={0}, to_apply=%add_f16
  ROOT tuple.0 = (f16[], f16[]) tuple(reduce.0, reduce.1)
}
"""


def test_nonfusion_instrs():
    r = check(NONFUSION, PASS, rtol=1e-2, atol=1e-2)
    assert r.changed
    fusion = _root_reads_one_mof(r.module)
    # the shared scalar init is one operand of the merged fusion
    assert [o.opcode for o in fusion.operands].count("constant") == 1
    assert "reduce" not in entry_ops(r.module)


# XLA: HorizontalInputFusionTest.MultiOutputFusionTest (GTEs of the merged fusions stay
# valid: gte.2 and gte.6 read fusion.2, which is merged into fusion.1)
MOF = "HloModule MultiOutputFusionTest\n" + ADD_F16 + """
fused_computation.1 {
  arg.1 = f16[1024]{0} parameter(0)
  constant0 = f16[] constant(0)
  reduce.1 = f16[] reduce(arg.1, constant0), dimensions={0}, to_apply=%add_f16
  add.0 = f16[1024] add(arg.1, arg.1)
  ROOT tuple.1 = (f16[], f16[1024]) tuple(reduce.1, add.0)
}

fused_computation.2 {
  arg.1 = f16[1024]{0} parameter(0)
  constant0 = f16[] constant(0)
  reduce.1 = f16[] reduce(arg.1, constant0), dimensions={0}, to_apply=%add_f16
  add.0 = f16[1024] add(arg.1, arg.1)
  ROOT tuple.1 = (f16[], f16[1024]) tuple(reduce.1, add.0)
}

fused_computation.3 {
  arg.0 = f16[1024]{0} parameter(0)
  arg.1 = f16[1024]{0} parameter(1)
  add.0 = f16[1024] add(arg.0, arg.1)
  mul.0 = f16[1024] multiply(arg.0, arg.1)
  ROOT tuple.1 = (f16[1024], f16[1024]) tuple(add.0, mul.0)
}

ENTRY entry_computation {
  arg.1 = f16[1024]{0} parameter(0)
  arg.2 = f16[1024]{0} parameter(1)
  fusion.1 = (f16[],f16[1024]) fusion(arg.1), kind=kInput, calls=fused_computation.1
  fusion.2 = (f16[],f16[1024]) fusion(arg.2), kind=kInput, calls=fused_computation.2
  gte.3 = f16[] get-tuple-element(fusion.1), index=0
  gte.1 = f16[1024]{0} get-tuple-element(fusion.1), index=1
  gte.2 = f16[1024]{0} get-tuple-element(fusion.2), index=1
  gte.6 = f16[] get-tuple-element(fusion.2), index=0
  fusion.3 = (f16[1024],f16[1024]) fusion(gte.1, gte.2),
      kind=kLoop, calls=fused_computation.3
  gte.4 = f16[1024] get-tuple-element(fusion.3), index=0
  gte.5 = f16[1024]{0} get-tuple-element(fusion.3), index=1
  ROOT tuple.1 = (f16[], f16[1024], f16[1024]{0}, f16[])
      tuple(gte.3, gte.4, gte.5, gte.6)
}
"""


def test_multi_output_fusion():
    r = check(MOF, PASS, rtol=1e-2, atol=1e-2)
    assert r.changed
    kinds = sorted(f.attrs["kind"] for f in fusions(r.module))
    assert kinds == ["kInput", "kLoop"]
    (merged,) = [f for f in fusions(r.module) if f.attrs["kind"] == "kInput"]
    assert len(merged.shape.tuple_shapes) == 4
    assert sorted(o.opcode for o in merged.called[0].root.operands) == \
        ["add", "add", "reduce", "reduce"]


def _many(n: int, rows: int = 16, cols: int = 64) -> str:
    """XLA: HorizontalInputFusionTest.ManyInputFusions (130 row reductions of
    ``var_in * alpha`` into one tuple), with smaller arrays."""
    params = []
    body = []
    outs = []
    for i in range(n):
        params += [f"v{i}: f32[{rows},{cols}]", f"a{i}: f32[]"]
        body += [f"  %v{i} = f32[{rows},{cols}] parameter({2 * i})",
                 f"  %a{i} = f32[] parameter({2 * i + 1})",
                 f"  %b{i} = f32[{rows},{cols}] broadcast(%a{i}), dimensions={{}}",
                 f"  %m{i} = f32[{rows},{cols}] multiply(%v{i}, %b{i})",
                 f"  %c{i} = f32[] constant(0)",
                 f"  %r{i} = f32[{rows}] reduce(%m{i}, %c{i}), dimensions={{1}}, "
                 "to_apply=%add"]
        outs.append(f"%r{i}")
    shape = ", ".join([f"f32[{rows}]"] * n)
    return (f"HloModule ManyInputFusions\n{ADD_F32}\nENTRY %main ({', '.join(params)}) -> "
            f"({shape}) {{\n" + "\n".join(body) +
            f"\n  ROOT %t = ({shape}) tuple({', '.join(outs)})\n}}\n")


def _reduces(fusion) -> int:
    return sum(1 for i in fusion.called[0].instructions if i.opcode == "reduce")


def test_many_input_fusions_are_grouped_within_the_budget():
    r = check(_many(130), PASS, seeds=(0,))
    fs = fusions(r.module)
    counts = sorted((_reduces(f) for f in fs), reverse=True)
    # at most 8 unnested reductions per fusion (FusionFitsInBudget): 16 x 8 + 2
    assert sum(counts) == 130 and max(counts) == 8
    assert counts == [8] * 16 + [2]
    assert "reduce" not in entry_ops(r.module)


def test_many_input_fusions_through_the_gpu_pipeline():
    # XLA runs this one through its whole pipeline too (RunAndCompare)
    module = parse_hlo(_many(20))
    r = check(module, build_pipeline("gpu"), seeds=(0,), rtol=1e-4, atol=1e-4)
    # priority fusion leaves 20 input fusions (the multiplies fused in); horizontal input
    # fusion groups them within the budget of 8 reductions: 3 kernels
    assert sorted(_reduces(f) for f in fusions(r.module)) == [4, 8, 8]


def test_other_users_block_the_fusion():
    # reduce.1 also feeds a negate: merging it with reduce.0 could create a cycle
    # through the consumer, so XLA only takes reductions the consumer alone reads
    text = NONFUSION.replace("ROOT tuple.0 = (f16[], f16[]) tuple(reduce.0, reduce.1)",
                             "n = f16[] negate(reduce.1)\n"
                             "  ROOT tuple.0 = (f16[], f16[], f16[]) tuple(reduce.0, reduce.1, n)")
    text = text.replace("HloModule NonfusionInstrs", "HloModule Blocked")
    m = run(text, PASS)
    assert entry_ops(m).count("reduce") == 2 and not fusions(m)


def test_incompatible_reductions_are_wrapped_but_not_merged():
    text = "HloModule mixed\n" + ADD_F32 + """
ENTRY %main (a: f32[32,64], b: f32[32,64]) -> (f32[32], f32[64]) {
  %a = f32[32,64] parameter(0)
  %b = f32[32,64] parameter(1)
  %z = f32[] constant(0)
  %rows = f32[32] reduce(%a, %z), dimensions={1}, to_apply=%add
  %cols = f32[64] reduce(%b, %z), dimensions={0}, to_apply=%add
  ROOT %t = (f32[32], f32[64]) tuple(%rows, %cols)
}
"""
    r = check(text, PASS)
    # XLA turns every candidate into a kInput fusion first (a change), then a row and a
    # column reduction have incompatible heroes: two kernels stay
    assert r.changed
    fs = fusions(r.module)
    assert len(fs) == 2 and all(_reduces(f) == 1 for f in fs)
    assert all(f.attrs["kind"] == "kInput" for f in fs)


def test_candidates_are_sorted_by_input_shape():
    # operands interleave two input shapes: sorted by (rank, dims) the like ones are
    # neighbours, so two merged fusions result instead of four single ones
    text = "HloModule sorted\n" + ADD_F32 + """
ENTRY %main (a: f32[32,64], b: f32[16,64], c: f32[32,64], d: f32[16,64]) -> (f32[32], f32[16], f32[32], f32[16]) {
  %a = f32[32,64] parameter(0)
  %b = f32[16,64] parameter(1)
  %c = f32[32,64] parameter(2)
  %d = f32[16,64] parameter(3)
  %z = f32[] constant(0)
  %ra = f32[32] reduce(%a, %z), dimensions={1}, to_apply=%add
  %rb = f32[16] reduce(%b, %z), dimensions={1}, to_apply=%add
  %rc = f32[32] reduce(%c, %z), dimensions={1}, to_apply=%add
  %rd = f32[16] reduce(%d, %z), dimensions={1}, to_apply=%add
  ROOT %t = (f32[32], f32[16], f32[32], f32[16]) tuple(%ra, %rb, %rc, %rd)
}
"""
    r = check(text, PASS)
    fs = fusions(r.module)
    assert len(fs) == 2 and [_reduces(f) for f in fs] == [2, 2]
    for f in fs:
        dims = {i.operands[0].shape.dims for i in f.called[0].instructions
                if i.opcode == "reduce"}
        assert len(dims) == 1


def test_shared_operand_is_read_once():
    # sum and max of the same rows: one kernel reading the input once
    text = "HloModule shared\n" + ADD_F32 + """
%max (mx: f32[], my: f32[]) -> f32[] {
  %mx = f32[] parameter(0)
  %my = f32[] parameter(1)
  ROOT %m = f32[] maximum(%mx, %my)
}
ENTRY %main (a: f32[32,64]) -> (f32[32], f32[32]) {
  %a = f32[32,64] parameter(0)
  %z = f32[] constant(0)
  %s = f32[32] reduce(%a, %z), dimensions={1}, to_apply=%add
  %ninf = f32[] constant(-inf)
  %m = f32[32] reduce(%a, %ninf), dimensions={1}, to_apply=%max
  ROOT %t = (f32[32], f32[32]) tuple(%s, %m)
}
"""
    r = check(text, PASS)
    (f,) = fusions(r.module)
    assert [o.opcode for o in f.operands].count("parameter") == 1


def test_custom_fusions_and_loop_fusions_are_not_candidates():
    text = BASIC.replace("kind=kInput, calls=fused_computation.2",
                         "kind=kCustom, calls=fused_computation.2")
    assert not check(text, PASS, rtol=1e-2, atol=1e-2).changed
    # a kLoop fusion without a reduction hero is no input fusible reduction
    text = "HloModule loops\n" + """
%fa (p: f32[64]) -> f32[64] {
  %p = f32[64] parameter(0)
  ROOT %n = f32[64] negate(%p)
}
%fb (q: f32[64]) -> f32[64] {
  %q = f32[64] parameter(0)
  ROOT %e = f32[64] exponential(%q)
}
ENTRY %main (a: f32[64], b: f32[64]) -> (f32[64], f32[64]) {
  %a = f32[64] parameter(0)
  %b = f32[64] parameter(1)
  %x = f32[64] fusion(%a), kind=kLoop, calls=%fa
  %y = f32[64] fusion(%b), kind=kLoop, calls=%fb
  ROOT %t = (f32[64], f32[64]) tuple(%x, %y)
}
"""
    assert not check(text, PASS).changed


def test_runs_in_non_entry_computations():
    # a while body is a non-fusion computation: XLA's pass visits it too
    text = "HloModule loop\n" + ADD_F32 + """
%cond (cp: (s32[], f32[8,16], f32[8], f32[8])) -> pred[] {
  %cp = (s32[], f32[8,16], f32[8], f32[8]) parameter(0)
  %ci = s32[] get-tuple-element(%cp), index=0
  %lim = s32[] constant(3)
  ROOT %lt = pred[] compare(%ci, %lim), direction=LT
}
%body (bp: (s32[], f32[8,16], f32[8], f32[8])) -> (s32[], f32[8,16], f32[8], f32[8]) {
  %bp = (s32[], f32[8,16], f32[8], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%bp), index=0
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %x = f32[8,16] get-tuple-element(%bp), index=1
  %z = f32[] constant(0)
  %s = f32[8] reduce(%x, %z), dimensions={1}, to_apply=%add
  %e = f32[8,16] exponential(%x)
  %se = f32[8] reduce(%e, %z), dimensions={1}, to_apply=%add
  ROOT %out = (s32[], f32[8,16], f32[8], f32[8]) tuple(%i1, %x, %s, %se)
}
ENTRY %main (a: f32[8,16]) -> (s32[], f32[8,16], f32[8], f32[8]) {
  %a = f32[8,16] parameter(0)
  %zero = s32[] constant(0)
  %zs = f32[8] constant({0,0,0,0,0,0,0,0})
  %init = (s32[], f32[8,16], f32[8], f32[8]) tuple(%zero, %a, %zs, %zs)
  ROOT %w = (s32[], f32[8,16], f32[8], f32[8]) while(%init), condition=%cond, body=%body
}
"""
    r = check(text, PASS)
    body = r.module.computation("body")
    assert [i.opcode for i in body.instructions].count("fusion") == 1
    assert "reduce" not in [i.opcode for i in body.instructions]


def test_in_the_gpu_pipeline():
    leaves = [p.name for _, p in build_pipeline("horizontal-fusion").leaves()]
    assert leaves[:2] == ["horizontal_loop_fusion", "horizontal_input_fusion"]
