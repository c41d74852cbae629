"""bfloat16-normalization: XLA's FloatNormalization with the GPU's bf16 table.

Ported: float_normalization_test.cc (with its TestFloatSupport / TestFloatNoComputeSupport
tables) and the bf16 cases of gpu_float_support_test.cc; then the GPU table on the
interpreter (bf16 results unchanged bit for bit where the normalized op rounds once, as
every elementwise op does) and the corpus modules holding bf16.
"""
from __future__ import annotations

import numpy as np
import pytest

from hlo_opt.analysis.device import A100, H100, DeviceInfo
from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.errors import HloError
from hlo_opt.verifier import module_errors
from passes.gpu._float_support import FloatSupport, GpuFloatSupport
from passes.gpu.bfloat16_normalization import BFloat16Normalization
from tests.conftest import corpus_files, sample_files

from hlo_opt.flags import DebugOptions

from .util import check, run

V100 = DeviceInfo(name="Tesla V100", compute_capability=(7, 0))


class TestFloatSupport(FloatSupport):
    """float_normalization_test.cc's table: add/subtract/reduce take bf16 (add mixed),
    only the first dot operand may be bf16, dot results may be."""

    __test__ = False

    def supports_low_precision_operand(self, hlo, i):
        if hlo.opcode in ("add", "subtract", "reduce", "tuple", "get-tuple-element",
                          "all-to-all"):
            return True
        return hlo.opcode == "dot" and i == 0

    def supports_low_precision_output(self, hlo):
        return hlo.opcode in ("add", "reduce", "subtract", "dot", "tuple",
                              "get-tuple-element", "all-to-all")

    def supports_mixed_precisions(self, hlo):
        return hlo.opcode in ("add", "tuple", "get-tuple-element")


class TestFloatNoComputeSupport(FloatSupport):
    __test__ = False
    _OPS = ("tuple", "get-tuple-element", "all-to-all", "all-reduce", "reduce-scatter")

    def supports_low_precision_operand(self, hlo, i):
        return hlo.opcode in self._OPS

    def supports_low_precision_output(self, hlo):
        return hlo.opcode in self._OPS


def normalize(text, support=None, device=H100, excess=True, execute=True, mixed=False):
    """Run the pass with ``support`` (or the GPU table of ``device``) through the
    harness; returns (changed, module).  ``mixed``: the module mixes f32 and bf16 in one
    instruction, as XLA's tests may (their verifier allows it, ours does not): the pass
    runs alone, without verifier."""
    p = BFloat16Normalization(support or GpuFloatSupport(device))
    module = parse_hlo(text) if isinstance(text, str) else text
    if mixed:
        m = module.clone()
        m.config = m.config.replace(
            debug_options=DebugOptions(xla_allow_excess_precision=excess))
        changed = p.run(m)
        assert changed == (m.to_text() != module.to_text())
        return changed, m
    if execute:
        r = check(module, [p], rtol=0, atol=0, xla_allow_excess_precision=excess)
        return r.changed, r.module
    m = run(module, [p], xla_allow_excess_precision=excess)
    return m.to_text() != module.to_text(), m


def find(m, name):
    for inst in m.instructions():
        if inst.name == name:
            return inst
    raise KeyError(name)


def et(inst) -> str:
    return inst.shape.element_type


# ---- float_normalization_test.cc ------------------------------------------------------------

MIXED = """HloModule m
ENTRY %main (a: f32[2,4], b: bf16[2,4], c: f32[2,4]) -> {out}[2,4] {{
  %a = f32[2,4] parameter(0)
  %b = bf16[2,4] parameter(1)
  %c = f32[2,4] parameter(2)
  %op0 = bf16[2,4] {op}(%a, %b)
  ROOT %op1 = {out}[2,4] {op}(%op0, %c)
}}
"""


def test_noop_if_supported():
    changed, m = normalize(MIXED.format(op="add", out="f32"), TestFloatSupport(), mixed=True)
    assert not changed
    assert m.entry.root.name == "op1" and et(find(m, "op0")) == "bf16" and et(m.entry.root) == "f32"


def test_resolve_if_unsupported_bf16():
    changed, m = normalize(MIXED.format(op="multiply", out="bf16"), TestFloatSupport(),
                           excess=False, mixed=True)
    assert changed
    root = m.entry.root
    assert root.opcode == "convert" and root.operands[0].name == "op1"
    assert et(find(m, "op0")) == "f32" and et(find(m, "op1")) == "f32"
    assert find(m, "op1").operands[0].opcode == "convert"


def test_resolve_if_unsupported_bf16_excess_precision_reads_the_f32_value():
    # with --xla_allow_excess_precision (the default) the f32 -> bf16 -> f32 pair goes
    changed, m = normalize(MIXED.format(op="multiply", out="bf16"), TestFloatSupport(),
                           mixed=True)
    assert changed and find(m, "op1").operands[0].name == "op0"


def test_resolve_if_unsupported_bf16_called_computation():
    changed, m = normalize("""HloModule m
%callee (x0: f32[2,4], x1: bf16[2,4], x2: f32[2,4]) -> bf16[2,4] {
  %x0 = f32[2,4] parameter(0)
  %x1 = bf16[2,4] parameter(1)
  %x2 = f32[2,4] parameter(2)
  %multiply.0 = bf16[2,4] multiply(%x0, %x1)
  ROOT %multiply.1 = bf16[2,4] multiply(%multiply.0, %x2)
}
ENTRY %main (a: f32[2,4], b: bf16[2,4], c: f32[2,4]) -> bf16[2,4] {
  %a = f32[2,4] parameter(0)
  %b = bf16[2,4] parameter(1)
  %c = f32[2,4] parameter(2)
  ROOT %call.0 = bf16[2,4] call(%a, %b, %c), to_apply=%callee
}""", TestFloatSupport(), excess=False, mixed=True)
    assert changed
    callee = find(m, "call.0").called[0]
    assert callee.root.opcode == "convert" and callee.root.operands[0].name == "multiply.1"
    mul1 = find(m, "multiply.1")
    assert et(mul1) == "f32" and mul1.operands[0].opcode == "convert"


def test_resolve_unsupported_mixed_precision_subtraction():
    changed, m = normalize(MIXED.format(op="subtract", out="bf16"), TestFloatSupport(),
                           excess=False, mixed=True)
    assert changed
    assert m.entry.root.opcode == "convert" and m.entry.root.operands[0].name == "op1"
    assert et(find(m, "op0")) == "f32" and et(find(m, "op1")) == "f32"
    assert find(m, "op1").operands[0].opcode == "convert"


REDUCE = """HloModule m
%reduce_comp (param0: bf16[], param1: bf16[]) -> bf16[] {
  %param0 = bf16[] parameter(0)
  %param1 = bf16[] parameter(1)
  ROOT %add = bf16[] add(%param0, %param1)
}
ENTRY %main (a: f32[2,4], init: bf16[]) -> f32[4] {
  %a = f32[2,4] parameter(0)
  %init = bf16[] parameter(1)
  ROOT %reduce = f32[4] reduce(%a, %init), dimensions={0}, to_apply=%reduce_comp
}
"""


def test_resolve_unsupported_mixed_precision_reduce():
    changed, m = normalize(REDUCE, TestFloatSupport(), mixed=True)
    assert changed
    reduce = m.entry.root
    assert reduce.name == "reduce" and et(reduce) == "f32"
    (comp,) = reduce.called
    assert [et(p) for p in comp.parameters] == ["f32", "f32"] and et(comp.root) == "f32"
    assert reduce.operands[0].name == "a"
    assert reduce.operands[1].opcode == "convert" and et(reduce.operands[1]) == "f32"


def test_resolve_mixed_precision_tuple_all_reduce():
    changed, m = normalize("""HloModule m
%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(%x, %y)
}
ENTRY %main (a: f32[2,4], b: bf16[2,4]) -> bf16[2,4] {
  %a = f32[2,4] parameter(0)
  %b = bf16[2,4] parameter(1)
  %crs = (f32[2,4], bf16[2,4]) all-reduce(%a, %b), replica_groups={}, to_apply=%sum
  ROOT %gte = bf16[2,4] get-tuple-element(%crs), index=1
}""", TestFloatSupport(), mixed=True)
    assert changed
    crs = find(m, "crs")
    assert et(m.entry.root) == "bf16"
    assert et(crs.operands[1]) == "f32" and crs.shape.tuple_shapes[1].element_type == "f32"


A2A = """HloModule m, replica_count=2
ENTRY %main (a: f32[2,4]) -> (bf16[2,4], {second}[2,4]) {{
  %a = f32[2,4] parameter(0)
  ROOT %a2a = (bf16[2,4], {second}[2,4]) all-to-all(%a, %a), replica_groups={{{{0,1}}}}
}}
"""


def test_resolve_mixed_precision_tuple_all_to_all_to_bf16():
    changed, m = normalize(A2A.format(second="bf16"), TestFloatSupport(), mixed=True)
    assert changed
    a2a = find(m, "a2a")
    assert m.entry.root is a2a
    assert [s.element_type for s in a2a.shape.tuple_shapes] == ["bf16", "bf16"]
    assert all(o.opcode == "convert" and et(o) == "bf16" for o in a2a.operands)


def test_resolve_mixed_precision_tuple_all_to_all_to_f32():
    changed, m = normalize(A2A.format(second="f32"), TestFloatSupport(), mixed=True)
    assert changed
    a2a = find(m, "a2a")
    assert m.entry.root.opcode == "tuple"
    assert [s.element_type for s in a2a.shape.tuple_shapes] == ["f32", "f32"]
    assert all(o.opcode == "parameter" for o in a2a.operands)


SORT = """HloModule m
%compare (p0: {k}[], p1: {k}[], p2: {v}[], p3: {v}[]) -> pred[] {{
  %p0 = {k}[] parameter(0)
  %p1 = {k}[] parameter(1)
  %p2 = {v}[] parameter(2)
  %p3 = {v}[] parameter(3)
  ROOT %lt = pred[] compare(%p0, %p1), direction=LT
}}
ENTRY %main (key: f32[1024], value: bf16[1024]) -> {result} {{
  %key = f32[1024] parameter(0)
  %value = bf16[1024] parameter(1)
  {body}
}}
"""


def test_resolve_mixed_precision_tuple_sort():
    changed, m = normalize(SORT.format(k="bf16", v="bf16", result="bf16[1024]", body="""
  %sort = (bf16[1024], bf16[1024]) sort(%key, %value), dimensions={0}, to_apply=%compare
  ROOT %gte = bf16[1024] get-tuple-element(%sort), index=0"""), TestFloatSupport(),
        mixed=True)
    assert changed
    sort = find(m, "sort")
    assert et(m.entry.root) == "bf16"
    assert et(sort.operands[0]) == "f32" and sort.shape.tuple_shapes[0].element_type == "f32"


def test_resolve_mixed_precision_tuple_sort_root():
    changed, m = normalize(SORT.format(k="bf16", v="f32", result="(bf16[1024], f32[1024])",
                                       body="""
  ROOT %sort = (bf16[1024], f32[1024]) sort(%key, %value), dimensions={0}, to_apply=%compare"""),
        TestFloatSupport(), mixed=True)
    assert changed
    sort = find(m, "sort")
    assert et(sort.operands[0]) == "f32" and sort.shape.tuple_shapes[0].element_type == "f32"
    assert m.entry.root is not sort and m.entry.root.opcode == "tuple"
    comparator = sort.called[0]
    assert et(comparator.parameters[1]) == "f32"
    # no convert back to bf16 was added inside the comparator
    assert all(u.opcode != "convert" for u in comparator.parameters[1].users)


def test_do_not_add_unsupported_mixed_precision():
    changed, m = normalize("""HloModule m
ENTRY %main (a: bf16[4,4], b: bf16[4,4]) -> bf16[4,4] {
  %a = bf16[4,4] parameter(0)
  %b = bf16[4,4] parameter(1)
  ROOT %dot = bf16[4,4] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", TestFloatSupport(), execute=False)
    assert changed
    dot = find(m, "dot")
    assert m.entry.root.opcode == "convert" and et(dot) == "f32"
    assert all(o.opcode == "convert" and et(o) == "f32" for o in dot.operands)


def test_do_not_change_bitcast_convert():
    changed, m = normalize("""HloModule m
ENTRY %main (a: u16[4,4]) -> bf16[4,4] {
  %a = u16[4,4] parameter(0)
  ROOT %bc = bf16[4,4] bitcast-convert(%a)
}""", TestFloatSupport())
    assert not changed
    assert m.entry.root.opcode == "bitcast-convert" and et(m.entry.root) == "bf16"


ALL_REDUCE_SUM = """%sum (x: bf16[], y: bf16[]) -> bf16[] {
  %x = bf16[] parameter(0)
  %y = bf16[] parameter(1)
  ROOT %add = bf16[] add(%x, %y)
}
"""


def test_no_normalization_for_to_apply_multi_output_all_reduce():
    changed, m = normalize("HloModule m\n" + ALL_REDUCE_SUM + """
ENTRY %main (a: bf16[2,4], b: bf16[16,16]) -> bf16[16,16] {
  %a = bf16[2,4] parameter(0)
  %b = bf16[16,16] parameter(1)
  %crs = (bf16[2,4], bf16[16,16]) all-reduce(%a, %b), replica_groups={}, to_apply=%sum
  ROOT %gte = bf16[16,16] get-tuple-element(%crs), index=1
}""", TestFloatNoComputeSupport())
    assert not changed
    crs = find(m, "crs")
    assert crs.called[0].root.opcode == "add" and et(crs.called[0].root) == "bf16"


def test_normalization_clones_shared_apply_of_all_reduce_and_reduce():
    changed, m = normalize("HloModule m\n" + ALL_REDUCE_SUM + """
ENTRY %main (a: bf16[2,4], b: bf16[2,4,2], init: bf16[]) -> bf16[2,4] {
  %a = bf16[2,4] parameter(0)
  %b = bf16[2,4,2] parameter(1)
  %init = bf16[] parameter(2)
  %all-reduce = bf16[2,4] all-reduce(%a), replica_groups={}, to_apply=%sum
  %reduce = bf16[2,4] reduce(%b, %init), dimensions={2}, to_apply=%sum
  ROOT %add = bf16[2,4] add(%all-reduce, %reduce)
}""", TestFloatNoComputeSupport(), excess=False, execute=False)
    assert changed
    ar, reduce = find(m, "all-reduce"), find(m, "reduce")
    assert et(m.entry.root) == "bf16" and et(ar.operands[0]) == "bf16"
    assert ar.called[0].root.opcode == "add" and et(ar.called[0].root) == "bf16"
    assert ar.called[0] is not reduce.called[0]
    assert reduce.called[0].root.opcode == "convert" and et(reduce.called[0].root) == "f32"
    assert et(reduce) == "f32"


# ---- gpu_float_support_test.cc (bf16 on CUDA) ------------------------------------------------

def _unary(op, t="bf16"):
    return f"""HloModule m
ENTRY %main (p0: {t}[]) -> {t}[] {{
  %p0 = {t}[] parameter(0)
  ROOT %r = {t}[] {op}(%p0)
}}"""


def _binary(op):
    return f"""HloModule m
ENTRY %main (p0: bf16[], p1: bf16[]) -> bf16[] {{
  %p0 = bf16[] parameter(0)
  %p1 = bf16[] parameter(1)
  ROOT %r = bf16[] {op}(%p0, %p1)
}}"""


@pytest.mark.parametrize("device", [A100, H100])
def test_should_keep_bf16_dot(device):
    changed, _ = normalize("""HloModule m
ENTRY %main (a: bf16[3,3], b: bf16[3,3]) -> f32[3,3] {
  %a = bf16[3,3] parameter(0)
  %b = bf16[3,3] parameter(1)
  ROOT %dot = f32[3,3] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}""", device=device)
    assert not changed


def test_bf16_reduce_precision_is_not_normalized():
    changed, _ = normalize("""HloModule m
ENTRY %main (p0: bf16[]) -> bf16[] {
  %p0 = bf16[] parameter(0)
  ROOT %r = bf16[] reduce-precision(%p0), exponent_bits=8, mantissa_bits=7
}""", device=A100)
    assert not changed


@pytest.mark.parametrize("device", [V100, A100, H100])
def test_bf16_total_order_sort_is_not_normalized(device):
    changed, _ = normalize("""HloModule m
%total_order_comparator (p0: bf16[], p1: bf16[]) -> pred[] {
  %p0 = bf16[] parameter(0)
  %convert0 = f32[] convert(%p0)
  %bitcast-convert0 = s32[] bitcast-convert(%convert0)
  %zero = s32[] constant(0)
  %compare0 = pred[] compare(%bitcast-convert0, %zero), direction=LT
  %maxint = s32[] constant(2147483647)
  %xor0 = s32[] xor(%maxint, %bitcast-convert0)
  %select0 = s32[] select(%compare0, %xor0, %bitcast-convert0)
  %p1 = bf16[] parameter(1)
  %convert1 = f32[] convert(%p1)
  %bitcast-convert1 = s32[] bitcast-convert(%convert1)
  %compare1 = pred[] compare(%bitcast-convert1, %zero), direction=LT
  %xor1 = s32[] xor(%maxint, %bitcast-convert1)
  %select1 = s32[] select(%compare1, %xor1, %bitcast-convert1)
  ROOT %compare = pred[] compare(%select0, %select1), direction=LT
}
ENTRY %sort (p0: bf16[1024]) -> bf16[1024] {
  %p0 = bf16[1024] parameter(0)
  ROOT %sort = bf16[1024] sort(%p0), dimensions={0}, is_stable=false, to_apply=%total_order_comparator
}""", device=device)
    assert not changed


@pytest.mark.parametrize("op", ["exponential", "log"])
def test_bf16_exp_and_log_are_not_normalized(op):
    assert not normalize(_unary(op), device=A100)[0]


@pytest.mark.parametrize("op", ["minimum", "maximum"])
def test_bf16_min_max_are_only_normalized_pre_ampere(op):
    assert not normalize(_binary(op), device=H100)[0]
    assert not normalize(_binary(op), device=A100)[0]
    assert normalize(_binary(op), device=V100)[0]


@pytest.mark.parametrize("op", ["negate", "abs"])
def test_bf16_unary_op_is_only_normalized_pre_ampere(op):
    assert not normalize(_unary(op), device=H100)[0]
    assert not normalize(_unary(op), device=A100)[0]
    assert normalize(_unary(op), device=V100)[0]


@pytest.mark.parametrize("op", ["add", "multiply", "subtract"])
def test_bf16_add_multiply_subtract_are_native_from_hopper(op):
    assert not normalize(_binary(op), device=H100)[0]
    changed, m = normalize(_binary(op), device=A100)
    assert changed
    r = find(m, "r")
    assert et(r) == "f32" and m.entry.root.opcode == "convert"
    assert [o.opcode for o in r.operands] == ["convert", "convert"]


def test_bf16_reduction_on_hopper_is_only_normalized_if_reducer_is_unsupported():
    text = """HloModule m
%reducer (p0: bf16[], p1: bf16[]) -> bf16[] {{
  %p0 = bf16[] parameter(0)
  %p1 = bf16[] parameter(1)
  ROOT %reducer = bf16[] {op}(%p0, %p1)
}}
ENTRY %main (p0: bf16[1024]) -> bf16[] {{
  %p0 = bf16[1024] parameter(0)
  %init = bf16[] constant(1337)
  ROOT %r = bf16[] reduce(%p0, %init), dimensions={{0}}, to_apply=%reducer
}}"""
    assert not normalize(text.format(op="add"), device=H100)[0]
    changed, m = normalize(text.format(op="divide"), device=H100, execute=False)
    assert changed
    r = find(m, "r")
    assert et(r) == "f32" and et(r.called[0].root) == "f32"
    assert m.entry.root.opcode == "convert" and et(m.entry.root) == "bf16"


def test_scaled_dot_is_ignored():
    changed, _ = normalize("""HloModule m
ENTRY %main (lhs: bf16[16,16], rhs: bf16[16,16], ls: bf16[1,1], rs: bf16[1,1]) -> bf16[16,16] {
  %lhs = bf16[16,16] parameter(0)
  %rhs = bf16[16,16] parameter(1)
  %ls = bf16[1,1] parameter(2)
  %rs = bf16[1,1] parameter(3)
  ROOT %r = bf16[16,16] scaled-dot(%lhs, %rhs, %ls, %rs), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}""", device=H100, execute=False)
    assert not changed


# ---- the GPU table on real arithmetic ----------------------------------------------------------

CHAIN = """HloModule m
ENTRY %main (x: bf16[64], y: bf16[64], z: f32[64]) -> (bf16[64], f32[64]) {
  %x = bf16[64] parameter(0)
  %y = bf16[64] parameter(1)
  %z = f32[64] parameter(2)
  %abs = bf16[64] abs(%y)
  %one = bf16[] constant(1)
  %ones = bf16[64] broadcast(%one), dimensions={}
  %d = bf16[64] add(%abs, %ones)
  %q = bf16[64] divide(%x, %d)
  %s = bf16[64] sqrt(%d)
  %t = bf16[64] tanh(%q)
  %m = bf16[64] multiply(%s, %t)
  %e = bf16[64] exponential(%m)
  %c = bf16[64] clamp(%ones, %e, %d)
  %w = f32[64] convert(%c)
  %v = f32[64] add(%w, %z)
  ROOT %r = (bf16[64], f32[64]) tuple(%c, %v)
}
"""


@pytest.mark.parametrize("device", [V100, A100, H100])
def test_elementwise_chain_is_bit_exact_and_keeps_the_result_types(device):
    """Without excess precision every normalized op rounds to bf16 once, as the
    interpreter's bf16 arithmetic does: the results are bit for bit the same."""
    before = parse_hlo(CHAIN)
    changed, m = normalize(before, device=device, excess=False)  # rtol=0, atol=0
    assert changed
    assert m.entry.root.shape == before.entry.root.shape
    by_name = {i.name: i for i in m.entry.instructions}
    # what the GPU cannot compute in bf16 runs in f32, on every compute capability
    for name in ("q", "s", "t", "c"):
        assert et(by_name[name]) == "f32", name
    # exponential is native on CUDA; add and multiply from Hopper; abs from Ampere
    assert et(by_name["e"]) == "bf16"
    assert et(by_name["d"]) == ("bf16" if device is H100 else "f32")
    assert et(by_name["abs"]) == ("f32" if device is V100 else "bf16")


def test_excess_precision_skips_the_intermediate_rounding():
    """With --xla_allow_excess_precision (the default) f32 -> bf16 -> f32 round trips
    between normalized ops go: values may only differ by bf16 rounding."""
    before = parse_hlo(CHAIN)
    r = check(before, [BFloat16Normalization(GpuFloatSupport(A100))], rtol=2e-2, atol=2e-2)
    strict = run(before, [BFloat16Normalization(GpuFloatSupport(A100))],
                 xla_allow_excess_precision=False)
    assert r.after_text.count("convert(") < strict.to_text().count("convert(")


def test_iota_gets_an_f32_result():
    changed, m = normalize("""HloModule m
ENTRY %main () -> bf16[8] {
  ROOT %iota = bf16[8] iota(), iota_dimension=0
}""")
    assert changed
    assert m.entry.root.opcode == "convert" and et(find(m, "iota")) == "f32"


def test_ampere_reduce_with_add_accumulates_in_f32_exactly_as_before():
    # the interpreter reduces bf16 with an add reducer in f32 already: bit-exact
    changed, m = normalize("""HloModule m
%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}
ENTRY %main (x: bf16[16,128]) -> bf16[16] {
  %x = bf16[16,128] parameter(0)
  %zero = bf16[] constant(0)
  ROOT %r = bf16[16] reduce(%x, %zero), dimensions={1}, to_apply=%add
}""", device=A100)
    assert changed and et(find(m, "r")) == "f32"


def _bf16_modules():
    out = []
    for path in sample_files() + corpus_files():
        if "bf16" in path.read_text():
            out.append(path)
    return out


@pytest.mark.parametrize("device", [V100, A100, H100], ids=["sm70", "sm80", "sm90"])
@pytest.mark.parametrize("path", _bf16_modules(), ids=lambda p: p.stem[:60])
def test_real_modules(path, device):
    try:
        modules = parse_hlo_modules(path.read_text(), str(path))
    except HloError as e:
        pytest.skip(f"does not parse: {e}")
    for module in modules:
        if module_errors(module):
            continue
        before = module.entry.root.shape
        r = check(module, [BFloat16Normalization(GpuFloatSupport(device))], seeds=(0,),
                  rtol=2e-2, atol=1e-2)
        assert r.module.entry.root.shape == before
        assert not module_errors(r.module)


def test_registered_under_xla_name_in_the_gpu_pipeline():
    from passes.pipelines import build_pipeline
    assert "bfloat16-normalization" in repr(build_pipeline("post-layout-assignment"))
    assert np.dtype("float32")  # numpy present for the interpreter runs
