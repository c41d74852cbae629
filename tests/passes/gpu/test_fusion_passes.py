"""fusion_merger, multi_output_fusion, horizontal_loop_fusion, priority-fusion and
rename_fusions: structure of the result and the interpreter's verdict."""
from __future__ import annotations

from pathlib import Path

import pytest

from hlo_opt.api import parse_hlo

from .util import check, entry_ops, fused_ops, fusions, kinds, run

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

ADD = """%add (ax: f32[], ay: f32[]) -> f32[] {
  %ax = f32[] parameter(0)
  %ay = f32[] parameter(1)
  ROOT %asum = f32[] add(%ax, %ay)
}
"""

# ---- fusion_merger -----------------------------------------------------------------------

MERGE = """HloModule merge
ENTRY %main (a: f32[64,64], b: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %a = f32[64,64] parameter(0)
  %b = f32[64,64] parameter(1)
  %f = f32[64,64] fusion(%a), kind=kLoop, calls=%fc
  %u1 = f32[64,64] add(%f, %b)
  %u2 = f32[64,64] multiply(%f, %b)
  ROOT %t = (f32[64,64], f32[64,64]) tuple(%u1, %u2)
}
%fc (fp: f32[64,64]) -> f32[64,64] {
  %fp = f32[64,64] parameter(0)
  ROOT %n = f32[64,64] negate(%fp)
}
"""


def test_fusion_merger_merges_a_loop_fusion_into_all_users():
    m = check(MERGE, "fusion_merger").module
    fs = fusions(m)
    assert len(fs) == 2
    assert all("negate" in fused_ops(f) for f in fs)
    assert {f.called[0].root.opcode for f in fs} == {"add", "multiply"}


def test_fusion_merger_leaves_input_fusions():
    text = MERGE.replace("kind=kLoop", "kind=kInput")
    m = run(text, "fusion_merger")
    assert len(fusions(m)) == 1


def test_fusion_merger_refuses_when_slower():
    # the producer reads a small array and writes a big broadcast that feeds an expensive
    # gather-like reuse: here a reduce-window over a broadcast would repeat the producer
    text = """HloModule slow
%add (ax: f32[], ay: f32[]) -> f32[] {
  %ax = f32[] parameter(0)
  %ay = f32[] parameter(1)
  ROOT %asum = f32[] add(%ax, %ay)
}
%fc (p: f32[512,512]) -> f32[512,512] {
  %p = f32[512,512] parameter(0)
  %e = f32[512,512] exponential(%p)
  %l = f32[512,512] log(%e)
  %th = f32[512,512] tanh(%l)
  ROOT %sn = f32[512,512] sine(%th)
}
ENTRY %main (a: f32[512,512]) -> (f32[512,512], f32[512,512], f32[512,512]) {
  %a = f32[512,512] parameter(0)
  %f = f32[512,512] fusion(%a), kind=kLoop, calls=%fc
  %z = f32[] constant(0)
  %w1 = f32[512,512] reduce-window(%f, %z), window={size=9x9 pad=4_4x4_4}, to_apply=%add
  %w2 = f32[512,512] reduce-window(%f, %z), window={size=7x7 pad=3_3x3_3}, to_apply=%add
  %w3 = f32[512,512] reduce-window(%f, %z), window={size=5x5 pad=2_2x2_2}, to_apply=%add
  ROOT %t = (f32[512,512], f32[512,512], f32[512,512]) tuple(%w1, %w2, %w3)
}
"""
    m = run(text, "fusion_merger")
    assert "fusion" in entry_ops(m) and entry_ops(m).count("reduce-window") == 3


# ---- multi_output_fusion -------------------------------------------------------------------

SIBLINGS = """HloModule siblings
""" + ADD + """
%f1 (p1: f32[128,512]) -> f32[128] {
  %p1 = f32[128,512] parameter(0)
  %z1 = f32[] constant(0)
  ROOT %r1 = f32[128] reduce(%p1, %z1), dimensions={1}, to_apply=%add
}
%f2 (p2: f32[128,512]) -> f32[128] {
  %p2 = f32[128,512] parameter(0)
  %m2 = f32[128,512] multiply(%p2, %p2)
  %z2 = f32[] constant(0)
  ROOT %r2 = f32[128] reduce(%m2, %z2), dimensions={1}, to_apply=%add
}
ENTRY %main (a: f32[128,512]) -> (f32[128], f32[128]) {
  %a = f32[128,512] parameter(0)
  %sa = f32[128] fusion(%a), kind=kInput, calls=%f1
  %q = f32[128] fusion(%a), kind=kInput, calls=%f2
  ROOT %t = (f32[128], f32[128]) tuple(%sa, %q)
}
"""


def test_sibling_reductions_become_one_multi_output_fusion():
    m = check(SIBLINGS, "multi_output_fusion").module
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kInput"
    assert f.shape.is_tuple() and len(f.shape.tuple_shapes) == 2
    assert f.called[0].root.opcode == "tuple"
    assert fused_ops(f).count("reduce") == 2
    assert len(f.operands) == 1  # the shared operand is read once


def test_siblings_with_different_reductions_stay_apart():
    text = SIBLINGS.replace("dimensions={1}, to_apply=%add\n}\nENTRY",
                            "dimensions={1}, to_apply=%add\n}\nENTRY", 1)
    text = text.replace("""%f1 (p1: f32[128,512]) -> f32[128] {
  %p1 = f32[128,512] parameter(0)
  %z1 = f32[] constant(0)
  ROOT %r1 = f32[128] reduce(%p1, %z1), dimensions={1}, to_apply=%add""", """%f1 (p1: f32[128,512]) -> f32[512] {
  %p1 = f32[128,512] parameter(0)
  %z1 = f32[] constant(0)
  ROOT %r1 = f32[512] reduce(%p1, %z1), dimensions={0}, to_apply=%add""")
    text = text.replace("%sa = f32[128] fusion(%a)", "%sa = f32[512] fusion(%a)")
    text = text.replace("-> (f32[128], f32[128]) {\n  %a", "-> (f32[512], f32[128]) {\n  %a")
    text = text.replace("ROOT %t = (f32[128], f32[128])", "ROOT %t = (f32[512], f32[128])")
    m = check(text, "multi_output_fusion").module
    assert len(fusions(m)) == 2


def test_producer_consumer_multi_output_fusion():
    text = """HloModule pc
""" + ADD + """
%fr (pr: f32[256,256]) -> f32[256] {
  %pr = f32[256,256] parameter(0)
  %zr = f32[] constant(0)
  ROOT %rr = f32[256] reduce(%pr, %zr), dimensions={1}, to_apply=%add
}
%fe (pe: f32[256,256]) -> f32[256,256] {
  %pe = f32[256,256] parameter(0)
  ROOT %ee = f32[256,256] exponential(%pe)
}
ENTRY %main (a: f32[256,256]) -> (f32[256,256], f32[256]) {
  %a = f32[256,256] parameter(0)
  %e = f32[256,256] fusion(%a), kind=kLoop, calls=%fe
  %r = f32[256] fusion(%e), kind=kInput, calls=%fr
  ROOT %t = (f32[256,256], f32[256]) tuple(%e, %r)
}
"""
    m = check(text, "multi_output_fusion").module
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kInput"
    assert sorted(fused_ops(f)) == ["constant", "exponential", "reduce", "tuple"]
    # both results come out of the one kernel
    assert all(o.opcode == "get-tuple-element" for o in m.entry.root.operands)


def test_no_multi_output_fusion_that_would_form_a_cycle():
    text = """HloModule cyc
ENTRY %main (a: f32[64]) -> f32[64] {
  %a = f32[64] parameter(0)
  %p = f32[64] exponential(%a)
  %mid = f32[64] sort(%p), dimensions={0}, to_apply=%lt
  ROOT %c = f32[64] add(%p, %mid)
}
%lt (lx: f32[], ly: f32[]) -> pred[] {
  %lx = f32[] parameter(0)
  %ly = f32[] parameter(1)
  ROOT %lr = pred[] compare(%lx, %ly), direction=LT
}
"""
    m = check(text, "multi_output_fusion").module
    # p -> sort -> c and p -> c: putting p into c's kernel would make sort wait on c
    assert "exponential" in entry_ops(m) and "sort" in entry_ops(m)


# ---- horizontal_loop_fusion -----------------------------------------------------------------

def test_horizontal_loop_fusion_of_independent_small_fusions():
    n = 4
    params = ", ".join(f"p{i}: f32[{32 * (i + 1)}]" for i in range(n))
    lines = [f"  %p{i} = f32[{32 * (i + 1)}] parameter({i})" for i in range(n)]
    for i in range(n):
        lines.append(f"  %f{i} = f32[{32 * (i + 1)}] fusion(%p{i}), kind=kLoop, calls=%c{i}")
    shapes = ", ".join(f"f32[{32 * (i + 1)}]" for i in range(n))
    lines.append(f"  ROOT %t = ({shapes}) tuple(" + ", ".join(f"%f{i}" for i in range(n)) + ")")
    comps = "".join(f"""%c{i} (x{i}: f32[{32 * (i + 1)}]) -> f32[{32 * (i + 1)}] {{
  %x{i} = f32[{32 * (i + 1)}] parameter(0)
  %e{i} = f32[{32 * (i + 1)}] exponential(%x{i})
  ROOT %n{i} = f32[{32 * (i + 1)}] negate(%e{i})
}}
""" for i in range(n))
    text = f"HloModule h\n{comps}ENTRY %main ({params}) -> ({shapes}) {{\n" + \
        "\n".join(lines) + "\n}\n"
    m = check(text, "horizontal_loop_fusion").module
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kInput"
    assert f.called[0].name.startswith("horizontally_fused_computation")
    assert fused_ops(f).count("concatenate") == 1 and fused_ops(f).count("slice") == n
    assert [p.name.split(".")[0] for p in f.called[0].parameters] == \
        [f"param_{i}_0" for i in range(n)]


def test_horizontal_fusion_skips_big_fusions():
    text = """HloModule big
%c0 (x0: f32[1024,1024]) -> f32[1024,1024] {
  %x0 = f32[1024,1024] parameter(0)
  ROOT %n0 = f32[1024,1024] negate(%x0)
}
%c1 (x1: f32[1024,1024]) -> f32[1024,1024] {
  %x1 = f32[1024,1024] parameter(0)
  ROOT %n1 = f32[1024,1024] negate(%x1)
}
ENTRY %main (a: f32[1024,1024], b: f32[1024,1024]) -> (f32[1024,1024], f32[1024,1024]) {
  %a = f32[1024,1024] parameter(0)
  %b = f32[1024,1024] parameter(1)
  %f0 = f32[1024,1024] fusion(%a), kind=kLoop, calls=%c0
  %f1 = f32[1024,1024] fusion(%b), kind=kLoop, calls=%c1
  ROOT %t = (f32[1024,1024], f32[1024,1024]) tuple(%f0, %f1)
}
"""
    m = run(text, "horizontal_loop_fusion")
    assert len(fusions(m)) == 2


# ---- priority-fusion ------------------------------------------------------------------------

def test_priority_fusion_chain_and_reduction():
    text = (SAMPLES / "reduce_sum_xyz.hlo").read_text()
    m = check(text, "priority-fusion", seeds=(0,)).module
    (f,) = fusions(m)
    assert f.attrs["kind"] == "kInput" and "multiply" in fused_ops(f)


def test_priority_fusion_softmax():
    text = (SAMPLES / "softmax.hlo").read_text()
    m = check(text, "priority-fusion", seeds=(0,)).module
    assert "reduce" not in entry_ops(m)  # every reduce is in a kernel fusion
    assert kinds(m).count("kInput") == 2


def test_priority_fusion_fuses_small_constants_last():
    text = """HloModule k
ENTRY %main (a: f32[16]) -> f32[16] {
  %a = f32[16] parameter(0)
  %c = f32[] constant(3)
  %b = f32[16] broadcast(%c), dimensions={}
  ROOT %m = f32[16] multiply(%a, %b)
}
"""
    m = check(text, "priority-fusion").module
    assert entry_ops(m) == ["parameter", "fusion"]
    assert "constant" in fused_ops(fusions(m)[0])


# A reshape of a value in another layout moves bytes (XLA's layout normalization makes it
# a transpose and a bitcast): a tiled transpose hero, kept out of the concatenate as a
# transpose would be.
MOVING_RESHAPE = """HloModule r
ENTRY %main (x: f32[64,32,32], y: f32[64,1024]) -> f32[128,1024] {
  %x = f32[64,32,32]{1,2,0} parameter(0)
  %e = f32[64,32,32]{1,2,0} exponential(%x)
  %r = f32[64,1024]{1,0} OP
  %y = f32[64,1024] parameter(1)
  %n = f32[64,1024] negate(%y)
  ROOT %c = f32[128,1024] concatenate(%r, %n), dimensions={0}
}
"""


@pytest.mark.parametrize("form", ["reshape", "copy-bitcast"])
def test_priority_fusion_keeps_a_moving_reshape_out_of_a_concatenate(form):
    if form == "reshape":
        text = MOVING_RESHAPE.replace("OP", "reshape(%e)")
    else:  # the same bytes moved by a layout-changing copy and a bitcast
        text = MOVING_RESHAPE.replace("%r = f32[64,1024]{1,0} OP",
                                      "%t = f32[64,32,32]{2,1,0} copy(%e)\n"
                                      "  %r = f32[64,1024]{1,0} bitcast(%t)")
    m = check(text, "priority-fusion").module
    assert kinds(m) == ["kInput", "kInput"]
    transpose_kernel = next(f for f in fusions(m) if "concatenate" not in fused_ops(f))
    assert "exponential" in fused_ops(transpose_kernel)


# ---- rename_fusions -------------------------------------------------------------------------

def test_rename_fusions_names_after_kind_and_heroes():
    text = (SAMPLES / "softmax.hlo").read_text()
    m = run(text, "fusion,fusion_merger,fusion,rename_fusions")
    names = sorted(f.name for f in fusions(m))
    comps = sorted(f.called[0].name for f in fusions(m))
    assert names == ["input_reduce_fusion", "loop_divide_fusion"]
    assert comps == ["fused_divide", "fused_reduce"]
    reparsed = parse_hlo(m.to_text())
    assert sorted(f.name for f in fusions(reparsed)) == names


@pytest.mark.parametrize("passes", ["fusion_merger", "multi_output_fusion",
                                    "horizontal_loop_fusion", "priority-fusion",
                                    "rename_fusions"])
@pytest.mark.parametrize("name", ["layer_norm", "mlp_train_step", "softmax",
                                  "matmul_bias_gelu"])
def test_after_fusion_on_samples(passes, name):
    text = (SAMPLES / f"{name}.hlo").read_text()
    check(text, f"fusion,{passes}", seeds=(0,))


# ---- fusion-wrapper -------------------------------------------------------------------------

def test_fusion_wrapper_wraps_what_fusion_left_and_keeps_values():
    text = """HloModule w
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
ENTRY %main (a: f32[64,64], b: f32[64,64], w: f32[64,64]) -> (f32[64], f32[64,64], f32[64,64]) {
  %a = f32[64,64] parameter(0)
  %b = f32[64,64] parameter(1)
  %cat = f32[64,128] concatenate(%a, %b), dimensions={1}
  %zero = f32[] constant(0)
  %r = f32[64] reduce(%cat, %zero), dimensions={1}, to_apply=%add
  %c = f32[64,64] copy(%a)
  %w = f32[64,64] parameter(2)
  %d = f32[64,64] dot(%a, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[64], f32[64,64], f32[64,64]) tuple(%r, %c, %d)
}
"""
    m = check(text, "fusion-wrapper").module
    assert sorted(f.name for f in fusions(m)) == ["wrapped_concatenate", "wrapped_reduce"]
    assert kinds(m) == ["kInput", "kLoop"]
    # copies and library calls stay; the reducer is not wrapped
    assert {"copy", "dot"} <= set(entry_ops(m))
    assert m.computation("add").root.opcode == "add"
    # a second run finds nothing left (run checks the no-change claim)
    again = run(m, "fusion-wrapper")
    assert sorted(f.name for f in fusions(again)) == ["wrapped_concatenate", "wrapped_reduce"]
