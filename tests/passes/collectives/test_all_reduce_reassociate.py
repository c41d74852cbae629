"""all-reduce-reassociate: XLA's all_reduce_reassociate_test.cc cases, plus the
multi-replica differential check on every rewrite (4 replicas)."""
from __future__ import annotations

import pytest

from passes.collectives.all_reduce_reassociate import AllReduceReassociate
from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count, root, run

PASS = "all-reduce-reassociate"

HEAD = """HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.2 = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
"""


def entry(body: str) -> str:
    return HEAD + "ENTRY main {\n" + body + "\n}\n"


def ops(inst) -> str:
    """A compact tree: opcode(operand trees), parameters as p<n>."""
    if inst.opcode == "parameter":
        return f"p{inst.parameter_number}"
    if inst.opcode == "constant":
        return "c"
    return inst.opcode + "(" + ",".join(ops(o) for o in inst.operands) + ")"


def differential(text, **kwargs):
    result = check_pass_replicated(load_text(text), kwargs.get("pass_", PASS), num_replicas=4,
                                   rtol=kwargs.get("rtol", 1e-5), atol=kwargs.get("atol", 1e-5))
    assert result.changed and result.compared_runs == 2


SIMPLE = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum
  ROOT add = f32[8] add(ar0, ar1)""")


def test_simple():
    changed, m = run(SIMPLE, PASS)
    assert changed
    assert ops(root(m)) == "all-reduce(add(p0,p1))"
    assert "channel_id" not in root(m).attrs
    assert count(m, "all-reduce") == 1
    differential(SIMPLE)


def test_simple_with_channel_id():
    text = SIMPLE.replace("replica_groups={}", "channel_id=1, replica_groups={}")
    changed, m = run(text, PASS)
    assert changed and ops(root(m)) == "all-reduce(add(p0,p1))"
    assert root(m).attrs["channel_id"] == "1"
    result = check_pass_replicated(load_text(text), PASS, num_replicas=2, num_partitions=2)
    assert result.compared_runs == 2


FOUR = """
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  p2 = f32[8] parameter(2)
  p3 = f32[8] parameter(3)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum
  ar2 = f32[8] all-reduce(p2), replica_groups={}, to_apply=sum
  ar3 = f32[8] all-reduce(p3), replica_groups={}, to_apply=sum"""


def test_simple_chain():
    text = entry(FOUR + """
  add0 = f32[8] add(ar0, ar1)
  add1 = f32[8] add(add0, ar2)
  ROOT add2 = f32[8] add(add1, ar3)""")
    changed, m = run(text, PASS)
    assert changed
    assert ops(root(m)) == "all-reduce(add(add(add(p0,p1),p2),p3))"
    differential(text)


def test_simple_tree():
    text = entry(FOUR + """
  add0 = f32[8] add(ar0, ar1)
  add1 = f32[8] add(ar2, ar3)
  ROOT add2 = f32[8] add(add0, add1)""")
    changed, m = run(text, PASS)
    assert changed
    assert ops(root(m)) == "all-reduce(add(add(p0,p1),add(p2,p3)))"
    differential(text)


@pytest.mark.parametrize("name,ar0,ar1", [
    ("MismatchOp0", "replica_groups={}, to_apply=sum", "replica_groups={}, to_apply=max"),
    ("MismatchOp1", "replica_groups={}, to_apply=max", "replica_groups={}, to_apply=max"),
    ("MismatchReplicaGroups", "replica_groups={{0}}, to_apply=sum",
     "replica_groups={}, to_apply=sum"),
    ("MismatchHasChannelId", "replica_groups={}, channel_id=3, to_apply=sum",
     "replica_groups={}, to_apply=sum"),
    ("MismatchUseGlobalDeviceId",
     "replica_groups={{0, 1}}, channel_id=3, use_global_device_ids=true, to_apply=sum",
     "replica_groups={{0, 1}}, channel_id=4, to_apply=sum"),
])
def test_mismatch(name, ar0, ar1):
    text = entry(f"""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), {ar0}
  ar1 = f32[8] all-reduce(p1), {ar1}
  ROOT add = f32[8] add(ar0, ar1)""")
    changed, m = run(text, PASS)
    assert not changed and count(m, "all-reduce") == 2


def test_not_single_user():
    text = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum
  add = f32[8] add(ar0, ar1)
  ROOT t = (f32[8], f32[8]) tuple(ar0, add)""")
    assert not run(text, PASS)[0]


def test_double_use():
    text = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  add = f32[8] add(ar0, ar0)
  ROOT c = f32[8] copy(add)""")
    changed, m = run(text, PASS)
    assert changed and ops(root(m)) == "copy(all-reduce(add(p0,p0)))"
    differential(text)


PADDED = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum
  %constant.1 = f32[] constant(0)
  pad = f32[12]{0} pad(ar0, constant.1), padding=0_4
  pad.1 = f32[12]{0} pad(ar1, constant.1), padding=0_4
  ROOT add = f32[12] add(pad, pad.1)""")


def test_padded_use():
    changed, m = run(PADDED, PASS)
    assert changed and ops(root(m)) == "all-reduce(add(pad(p0,c),pad(p1,c)))"
    differential(PADDED)


def test_padded_use_invalid_reduce_value():
    changed, m = run(PADDED.replace("constant(0)", "constant(-1.0)"), PASS)
    assert not changed and count(m, "all-reduce") == 2


def test_padded_use_not_profitable():
    text = PADDED.replace("f32[12]", "f32[17]").replace("padding=0_4", "padding=0_9")
    changed, m = run(text, PASS)
    assert not changed and count(m, "all-reduce") == 2


def test_padded_use_double_use_not_profitable():
    text = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum
  %constant.1 = f32[] constant(0)
  pad = f32[9]{0} pad(ar0, constant.1), padding=0_1
  ROOT add = f32[9] add(pad, pad)""")
    changed, m = run(text, PASS)
    assert not changed and count(m, "all-reduce") == 1


@pytest.mark.parametrize("shape,fmt", [
    ("f32[1,8]", "rshp{n} = f32[8]{{0}} reshape(ar{n})"),          # ReshapeUse
    ("f32[8]", "rshp{n} = f32[4]{{0}} slice(ar{n}), slice={{[0:4]}}"),  # SliceUse
])
def test_formatting_uses(shape, fmt):
    out = "f32[8]" if "reshape" in fmt else "f32[4]"
    text = entry(f"""
  p0 = {shape} parameter(0)
  p1 = {shape} parameter(1)
  ar0 = {shape} all-reduce(p0), replica_groups={{}}, to_apply=sum
  ar1 = {shape} all-reduce(p1), replica_groups={{}}, to_apply=sum
  {fmt.format(n=0)}
  {fmt.format(n=1)}
  ROOT add = {out} add(rshp0, rshp1)""")
    changed, m = run(text, PASS)
    op = "reshape" if "reshape" in fmt else "slice"
    assert changed and ops(root(m)) == f"all-reduce(add({op}(p0),{op}(p1)))"
    differential(text)


CONVERT_CHAIN = """HloModule m
add.1 {
  x.47 = bf16[] parameter(0)
  y.47 = bf16[] parameter(1)
  ROOT add.2532 = bf16[] add(x.47, y.47)
}
ENTRY main {
  p0 = bf16[8] parameter(0)
  p1 = bf16[8] parameter(1)
  p2 = bf16[8] parameter(2)
  p3 = bf16[8] parameter(3)
  ar0 = bf16[8] all-reduce(p0), replica_groups={}, to_apply=add.1
  ar1 = bf16[8] all-reduce(p1), replica_groups={}, to_apply=add.1
  ar2 = bf16[8] all-reduce(p2), replica_groups={}, to_apply=add.1
  ar3 = bf16[8] all-reduce(p3), replica_groups={}, to_apply=add.1
  convert0 = f32[8] convert(ar0)
  convert1 = f32[8] convert(ar1)
  add0 = f32[8] add(convert0, convert1)
  convert2 = f32[8] convert(ar2)
  add1 = f32[8] add(add0, convert2)
  convert3 = f32[8] convert(ar3)
  add2 = f32[8] add(add1, convert3)
  ROOT convert4 = bf16[8] convert(add2)
}
"""


def test_chain_with_convert():
    changed, m = run(CONVERT_CHAIN, AllReduceReassociate(reassociate_converted_ar=True))
    assert changed
    assert ops(root(m)) == ("convert(all-reduce(add(add(add(convert(p0),convert(p1)),"
                            "convert(p2)),convert(p3))))")
    assert count(m, "all-reduce") == 1
    assert root(m).operands[0].shape.element_type == "f32"
    assert root(m).operands[0].to_apply.root.shape.element_type == "f32"
    # the sums are now done in f32: equal to bf16 precision
    differential(CONVERT_CHAIN, pass_=AllReduceReassociate(reassociate_converted_ar=True),
                 rtol=5e-2, atol=1e-1)


def test_converted_all_reduces_need_the_option():
    assert not run(CONVERT_CHAIN, PASS)[0]


def test_all_reduce_with_convert_incompatible_type():
    text = CONVERT_CHAIN.replace("ENTRY", """max.1 {
  x.48 = bf16[] parameter(0)
  y.48 = bf16[] parameter(1)
  ROOT max.2533 = bf16[] maximum(x.48, y.48)
}
min.1 {
  x.49 = bf16[] parameter(0)
  y.49 = bf16[] parameter(1)
  ROOT min.2534 = bf16[] minimum(x.49, y.49)
}
mul.1 {
  x.50 = bf16[] parameter(0)
  y.50 = bf16[] parameter(1)
  ROOT mul.2535 = bf16[] multiply(x.50, y.50)
}
ENTRY""").replace("ar1 = bf16[8] all-reduce(p1), replica_groups={}, to_apply=add.1",
                  "ar1 = bf16[8] all-reduce(p1), replica_groups={}, to_apply=max.1").replace(
        "ar2 = bf16[8] all-reduce(p2), replica_groups={}, to_apply=add.1",
        "ar2 = bf16[8] all-reduce(p2), replica_groups={}, to_apply=min.1").replace(
        "ar3 = bf16[8] all-reduce(p3), replica_groups={}, to_apply=add.1",
        "ar3 = bf16[8] all-reduce(p3), replica_groups={}, to_apply=mul.1")
    assert not run(text, AllReduceReassociate(reassociate_converted_ar=True))[0]


def test_all_reduce_with_lossy_convert():
    text = CONVERT_CHAIN.replace("f32[8] convert", "u32[8] convert").replace(
        "f32[8] add", "u32[8] add")
    assert not run(text, AllReduceReassociate(reassociate_converted_ar=True))[0]


DYN = entry("""
  p0 = f32[1,8] parameter(0)
  p1 = f32[1,8] parameter(1)
  p2 = f32[1,8] parameter(2)
  p3 = s32[] parameter(3)
  cst = s32[] constant(0)
  ar0 = f32[1,8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar1 = f32[1,8] all-reduce(p1), replica_groups={}, to_apply=sum
  ar2 = f32[1,8] all-reduce(p2), replica_groups={}, to_apply=sum
  dyn0 = f32[1,4] dynamic-slice(ar0, cst, p3), dynamic_slice_sizes={1,4}
  dyn1 = f32[1,4] dynamic-slice(ar1, cst, p3), dynamic_slice_sizes={1,4}
  dyn2 = f32[1,4] dynamic-slice(ar2, cst, p3), dynamic_slice_sizes={1,4}
  add = f32[1,4] add(dyn0, dyn1)
  ROOT add1 = f32[1,4] add(add, dyn2)""")


def test_all_reduce_dynamic_slice_pattern():
    changed, m = run(DYN, PASS)
    assert changed
    assert ops(root(m)) == "dynamic-slice(all-reduce(add(add(p0,p1),p2)),c,p3)"
    assert count(m, "all-reduce") == 1
    differential(DYN)


def test_all_reduce_dynamic_slice_pattern_same_operand():
    text = entry("""
  p0 = f32[1,8] parameter(0)
  p1 = f32[1,8] parameter(1)
  p2 = s32[] parameter(2)
  cst = s32[] constant(0)
  ar0 = f32[1,8] all-reduce(p0), replica_groups={}, to_apply=sum
  ar2 = f32[1,8] all-reduce(p1), replica_groups={}, to_apply=sum
  dyn0 = f32[1,4] dynamic-slice(ar0, cst, p2), dynamic_slice_sizes={1,4}
  dyn2 = f32[1,4] dynamic-slice(ar2, cst, p2), dynamic_slice_sizes={1,4}
  add = f32[1,4] add(dyn0, dyn0)
  ROOT add1 = f32[1,4] add(add, dyn2)""")
    changed, m = run(text, PASS)
    assert changed
    assert ops(root(m)) == "dynamic-slice(all-reduce(add(add(p0,p0),p1)),c,p2)"
    differential(text)


def test_all_reduce_dynamic_slice_different_slices():
    text = DYN.replace("p2 = f32[1,8] parameter(2)", "p2 = f32[1,16] parameter(2)").replace(
        "ar2 = f32[1,8] all-reduce(p2)", "ar2 = f32[1,16] all-reduce(p2)")
    changed, m = run(text, PASS)
    assert changed
    r = root(m)
    assert r.opcode == "add" and ops(r.operands[1]) == "dynamic-slice(all-reduce(p2),c,p3)"
    assert count(m, "all-reduce") == 2
    differential(text)


@pytest.mark.parametrize("k0,k1,changes", [
    ('collective_group_key="g0"', 'collective_group_key="g0"', True),
    ('collective_group_key="g0"', 'collective_group_key="g1"', False),
    ('collective_group_key="g0"', None, False),
])
def test_collective_group_keys(k0, k1, changes):
    def fa(k):
        return f", frontend_attributes={{{k}}}" if k else ""
    text = SIMPLE.replace("ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum",
                          "ar0 = f32[8] all-reduce(p0), replica_groups={}, to_apply=sum"
                          + fa(k0)).replace(
        "ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum",
        "ar1 = f32[8] all-reduce(p1), replica_groups={}, to_apply=sum" + fa(k1))
    changed, m = run(text, PASS)
    assert changed == changes
    assert count(m, "all-reduce") == (1 if changes else 2)
    if changes:
        assert 'collective_group_key="g0"' in root(m).attrs["frontend_attributes"]


def test_max_of_all_reduce_max_with_groups():
    """Not in XLA's test: maximum over grouped all-reduces, checked on 4 replicas."""
    text = entry("""
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ar0 = f32[8] all-reduce(p0), replica_groups={{0,2},{1,3}}, to_apply=max
  ar1 = f32[8] all-reduce(p1), replica_groups={{0,2},{1,3}}, to_apply=max
  ROOT m = f32[8] maximum(ar0, ar1)""")
    changed, m = run(text, PASS)
    assert changed and ops(root(m)) == "all-reduce(maximum(p0,p1))"
    differential(text)
