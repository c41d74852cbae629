"""all-gather-combiner: XLA's all_gather_combiner_test.cc cases (threshold 1 MiB, count
256 as there), plus the multi-replica differential check on every rewrite."""
from __future__ import annotations

import pytest

from hlo_opt.flags import DebugOptions
from passes.collectives.all_gather_combiner import AllGatherCombiner
from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count, find, root, run

MIB = 1024 * 1024


def combiner(threshold=MIB, by_dim=True, **kw):
    return AllGatherCombiner(threshold, 256, by_dim, **kw)


def tree(inst) -> str:
    if inst.opcode == "parameter":
        return f"p{inst.parameter_number}"
    if inst.opcode == "get-tuple-element":
        return f"gte{inst.attr('index')}({tree(inst.operands[0])})"
    return inst.opcode + "(" + ",".join(tree(o) for o in inst.operands) + ")"


def differential(text, p, replicas=4):
    result = check_pass_replicated(load_text(text), [p], num_replicas=replicas)
    assert result.changed and result.compared_runs == 2


TWO = """
HloModule Module
ENTRY entry {
  param0 = f32[32] parameter(0)
  param1 = f32[32] parameter(1)
  allgather0 = f32[128] all-gather(param0), replica_groups={}, dimensions={0}
  allgather1 = f32[128] all-gather(param1), replica_groups={}, dimensions={0}
  ROOT tuple = (f32[128], f32[128]) tuple(allgather0, allgather1)
}"""


def test_combine_all_gathers():
    changed, m = run(TWO, combiner())
    assert changed
    ag = "all-gather(p0,p1)"
    assert tree(root(m)) == f"tuple(gte0({ag}),gte1({ag}))"
    differential(TWO, combiner())


def test_combine_different_dtypes_off():
    text = TWO.replace("param1 = f32[32]", "param1 = s32[32]").replace(
        "allgather1 = f32[128]", "allgather1 = s32[128]").replace(
        "(f32[128], f32[128])", "(f32[128], s32[128])")
    changed, m = run(text, combiner(combine_different_dtypes=False))
    assert not changed
    assert tree(root(m)) == "tuple(all-gather(p0),all-gather(p1))"
    changed, m = run(text, combiner())  # the default combines them
    assert changed and count(m, "all-gather") == 1
    differential(text, combiner())


def test_do_not_combine_in_while_loop():
    text = """
HloModule Module
while_body {
  param0 = (f32[32], s32[32]) parameter(0)
  param0.0 = f32[32] get-tuple-element(param0), index=0
  param0.1 = s32[32] get-tuple-element(param0), index=1
  allgather0 = f32[128] all-gather(param0.0), replica_groups={}, dimensions={0}
  allgather1 = s32[128] all-gather(param0.1), replica_groups={}, dimensions={0}
  ROOT tuple = (f32[32], s32[32]) tuple(param0.0, param0.1)
}
while_cond {
  param0 = (f32[32], s32[32]) parameter(0)
  ROOT cond = pred[] constant(true)
}
ENTRY entry {
  param0 = f32[32] parameter(0)
  param1 = s32[32] parameter(1)
  while_init = (f32[32], s32[32]) tuple(param0, param1)
  while_loop = (f32[32], s32[32]) while(while_init), condition=while_cond, body=while_body
  ROOT gte = f32[32] get-tuple-element(while_loop), index=0
}"""
    assert not run(text, combiner(combine_while_loops=False))[0]


BY_DIM = """
HloModule Module
ENTRY entry {
  param0 = f32[2,2] parameter(0)
  param1 = f32[2,2] parameter(1)
  param2 = f32[2,2] parameter(2)
  param3 = f32[2,2] parameter(3)
  param4 = f32[2,2] parameter(4)
  allgather0 = f32[8,2] all-gather(param0), replica_groups={}, dimensions={0}
  allgather1 = f32[8,2] all-gather(param1), replica_groups={}, dimensions={0}
  allgather2 = f32[2,8] all-gather(param2), replica_groups={}, dimensions={1}
  allgather3 = f32[2,8] all-gather(param3), replica_groups={}, dimensions={1}
  allgather4 = f32[8,2] all-gather(param4), replica_groups={}, dimensions={0}
  ROOT tuple = (f32[8,2], f32[8,2], f32[2,8], f32[2,8], f32[8,2])
    tuple(allgather0, allgather1, allgather2, allgather3, allgather4)
}"""


def test_combine_all_gathers_by_all_gather_dimension():
    changed, m = run(BY_DIM, combiner())
    assert changed
    a, b = "all-gather(p0,p1,p4)", "all-gather(p2,p3)"
    assert tree(root(m)) == f"tuple(gte0({a}),gte1({a}),gte0({b}),gte1({b}),gte2({a}))"
    differential(BY_DIM, combiner())


@pytest.mark.parametrize("threshold,changes", [(255, False), (256, True)])
def test_threshold(threshold, changes):  # DoNotCombineOverThreshold / CombineUpToThreshold
    text = TWO.replace("f32[32]", "f32[8]").replace("f32[128]", "f32[32]")
    changed, m = run(text, combiner(threshold))
    assert changed == changes
    assert count(m, "all-gather") == (1 if changes else 2)


def test_no_dependent_combination():
    text = """
HloModule Module
ENTRY entry {
  param = f32[1] parameter(0)
  allgather0 = f32[2] all-gather(param), replica_groups={}, dimensions={0}
  ROOT allgather1 = f32[4] all-gather(allgather0), replica_groups={}, dimensions={0}
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-gather") == 2


def test_no_different_replica_groups_combination():
    text = TWO.replace("f32[128]", "f32[64]").replace(
        "allgather0 = f32[64] all-gather(param0), replica_groups={}",
        "allgather0 = f32[64] all-gather(param0), replica_groups={{0, 1}, {2, 3}}").replace(
        "allgather1 = f32[64] all-gather(param1), replica_groups={}",
        "allgather1 = f32[64] all-gather(param1), replica_groups={{0, 2}, {1, 3}}")
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-gather") == 2


def test_domain_prevents_combining():
    """(Here any domain instruction keeps the combiner out of the computation.)"""
    text = """
HloModule Module
ENTRY entry {
  param0 = f32[32] parameter(0), sharding={maximal device=0}
  param1 = f32[32] parameter(1), sharding={maximal device=1}
  allgather0 = f32[128] all-gather(param0),
    replica_groups={}, dimensions={0}, sharding={maximal device=0}
  allgather1 = f32[128] all-gather(param1),
    replica_groups={}, dimensions={0}, sharding={maximal device=1}
  domain0 = f32[128] domain(allgather0),
    domain={kind="sharding", entry={{maximal device=0}, {maximal device=1}},
    exit={maximal device=0}}
  domain1 = f32[128] domain(allgather1),
    domain={kind="sharding", entry={{maximal device=0}, {maximal device=1}},
    exit={maximal device=1}}
  ROOT tuple = (f32[128], f32[128]) tuple(domain0, domain1),
    sharding={{maximal device=0}, {maximal device=1}}
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-gather") == 2


def test_combine_all_gathers_different_dims():
    text = """
HloModule Module
ENTRY entry {
  param0 = f32[2,3]{1,0} parameter(0)
  param1 = f32[2,3]{0,1} parameter(1)
  allgather0 = f32[8,3]{1,0} all-gather(param0), replica_groups={},
      dimensions={0}
  allgather1 = f32[2,12]{0,1} all-gather(param1), replica_groups={},
      dimensions={1}
  ROOT tuple = (f32[8,3]{1,0}, f32[2,12]{0,1}) tuple(allgather0, allgather1)
}"""
    changed, m = run(text, combiner(by_dim=False))
    assert changed
    ag = "all-gather(p0,bitcast(p1))"
    assert tree(root(m)) == f"tuple(gte0({ag}),bitcast(gte1({ag})))"
    bitcast_in = find(m, "bitcast")[0] if find(m, "bitcast")[0].operands[0].opcode == \
        "parameter" else find(m, "bitcast")[1]
    assert bitcast_in.shape.to_text() == "f32[3,2]{1,0}"
    differential(text, combiner(by_dim=False))


MANY = """
HloModule Module
ENTRY entry {
  param0 = f32[2,7]{1,0} parameter(0)
  param1 = f32[3,8]{1,0} parameter(1)
  param2 = f32[4,9]{0,1} parameter(2)
  param3 = f32[5,10]{0,1} parameter(3)
  param4 = f32[6,11]{1,0} parameter(4)
  allgather0 = f32[8,7]{1,0} all-gather(param0), replica_groups={},
      dimensions={0}
  allgather1 = f32[12,8]{1,0} all-gather(param1), replica_groups={},
      dimensions={0}
  allgather2 = f32[4,36]{0,1} all-gather(param2), replica_groups={},
      dimensions={1}
  allgather3 = f32[5,40]{0,1} all-gather(param3), replica_groups={},
      dimensions={1}
  allgather4 = f32[24,11]{1,0} all-gather(param4), replica_groups={},
      dimensions={0}
  ROOT tuple = (f32[8,7]{1,0}, f32[12,8]{1,0}, f32[4,36]{0,1}, f32[5,40]{0,1},
      f32[24,11]{1,0}) tuple(allgather0, allgather1, allgather2, allgather3,
      allgather4)
}"""


def test_combine_many_all_gathers_different_dims():
    changed, m = run(MANY, combiner(by_dim=False))
    assert changed
    ag = "all-gather(p0,p1,bitcast(p2),bitcast(p3),p4)"
    assert tree(root(m)) == (f"tuple(gte0({ag}),gte1({ag}),bitcast(gte2({ag})),"
                             f"bitcast(gte3({ag})),gte4({ag}))")
    ags = find(m, "all-gather")
    assert len(ags) == 1 and ags[0].attrs["dimensions"] == "{0}"
    differential(MANY, combiner(by_dim=False))


def test_combine_many_all_gathers_different_dims_rank4():
    text = """
HloModule Module
ENTRY entry {
  param0 = f32[2,7,2,7]{3,2,1,0} parameter(0)
  param1 = f32[3,8,3,8]{3,2,1,0} parameter(1)
  param2 = f32[4,9,4,9]{3,0,1,2} parameter(2)
  param3 = f32[5,10,5,10]{3,0,1,2} parameter(3)
  param4 = f32[6,11,6,11]{3,2,1,0} parameter(4)
  allgather0 = f32[8,7,2,7]{3,2,1,0} all-gather(param0), replica_groups={},
      dimensions={0}
  allgather1 = f32[12,8,3,8]{3,2,1,0} all-gather(param1), replica_groups={},
      dimensions={0}
  allgather2 = f32[4,9,16,9]{3,0,1,2} all-gather(param2), replica_groups={},
      dimensions={2}
  allgather3 = f32[5,10,20,10]{3,0,1,2} all-gather(param3), replica_groups={},
      dimensions={2}
  allgather4 = f32[24,11,6,11]{3,2,1,0} all-gather(param4), replica_groups={},
      dimensions={0}
  ROOT tuple = (f32[8,7,2,7]{3,2,1,0}, f32[12,8,3,8]{3,2,1,0},
      f32[4,9,16,9]{3,0,1,2}, f32[5,10,20,10]{3,0,1,2},
      f32[24,11,6,11]{3,2,1,0}) tuple(allgather0, allgather1, allgather2,
      allgather3, allgather4)
}"""
    changed, m = run(text, combiner(by_dim=False))
    assert changed
    ag = "all-gather(p0,p1,bitcast(p2),bitcast(p3),p4)"
    assert tree(root(m)) == (f"tuple(gte0({ag}),gte1({ag}),bitcast(gte2({ag})),"
                             f"bitcast(gte3({ag})),gte4({ag}))")
    assert find(m, "all-gather")[0].attrs["dimensions"] == "{0}"
    differential(text, combiner(by_dim=False))


def test_combine_many_all_gathers_different_dims_mixed_ranks():
    text = """
HloModule Module
ENTRY entry {
  param0 = f32[2,7]{1,0} parameter(0)
  param1 = f32[3,8]{1,0} parameter(1)
  param2 = f32[4,9]{0,1} parameter(2)
  param3 = f32[5,10]{0,1} parameter(3)
  param4 = f32[6]{0} parameter(4)
  allgather0 = f32[2,28]{1,0} all-gather(param0), replica_groups={},
      dimensions={1}
  allgather1 = f32[3,32]{1,0} all-gather(param1), replica_groups={},
      dimensions={1}
  allgather2 = f32[4,36]{0,1} all-gather(param2), replica_groups={},
      dimensions={1}
  allgather3 = f32[5,40]{0,1} all-gather(param3), replica_groups={},
      dimensions={1}
  allgather4 = f32[24]{0} all-gather(param4), replica_groups={},
      dimensions={0}
  ROOT tuple = (f32[2,28]{1,0}, f32[3,32]{1,0}, f32[4,36]{0,1}, f32[5,40]{0,1},
      f32[24]{0}) tuple(allgather0, allgather1, allgather2, allgather3,
      allgather4)
}"""
    changed, m = run(text, combiner(by_dim=False))
    assert changed
    ag = "all-gather(bitcast(p0),bitcast(p1),bitcast(p2),bitcast(p3),p4)"
    assert tree(root(m)) == (f"tuple(bitcast(gte0({ag})),bitcast(gte1({ag})),"
                             f"bitcast(gte2({ag})),bitcast(gte3({ag})),gte4({ag}))")
    assert find(m, "all-gather")[0].attrs["dimensions"] == "{0}"
    differential(text, combiner(by_dim=False))


def test_combine_all_gathers_by_dim():
    changed, m = run(MANY, combiner(by_dim=True))
    assert changed
    a, b = "all-gather(p0,p1,p4)", "all-gather(p2,p3)"
    assert tree(root(m)) == f"tuple(gte0({a}),gte1({a}),gte0({b}),gte1({b}),gte2({a}))"
    assert [g.attrs["dimensions"] for g in find(m, "all-gather")] == ["{0}", "{1}"]
    differential(MANY, combiner(by_dim=True))


def test_preserves_metadata():
    text = TWO.replace("allgather0 = f32[128] all-gather(param0), replica_groups={}, dimensions={0}",
                       'allgather0 = f32[128] all-gather(param0), replica_groups={}, '
                       'dimensions={0}, metadata={op_type="test_type0" op_name="test_name0"}').replace(
        "allgather1 = f32[128] all-gather(param1), replica_groups={}, dimensions={0}",
        'allgather1 = f32[128] all-gather(param1), replica_groups={}, dimensions={0}, '
        'metadata={op_type="test_type1" op_name="test_name1"}')
    changed, m = run(text, combiner())
    assert changed
    ag = find(m, "all-gather")[0]
    assert ag.attrs["metadata"] == '{op_type="test_type0" op_name="(test_name0:test_name1)"}'


def test_preserves_frontend_attributes_and_merged_metadata():
    text = TWO.replace("allgather0 = f32[128] all-gather(param0), replica_groups={}, dimensions={0}",
                       'allgather0 = f32[128] all-gather(param0), replica_groups={}, '
                       'dimensions={0}, frontend_attributes={is_pipelineable="true", color="red"}, '
                       'metadata={op_type="ag" op_name="model/layer/ag_0"}').replace(
        "allgather1 = f32[128] all-gather(param1), replica_groups={}, dimensions={0}",
        'allgather1 = f32[128] all-gather(param1), replica_groups={}, dimensions={0}, '
        'frontend_attributes={is_pipelineable="true", color="blue"}, '
        'metadata={op_type="ag" op_name="model/layer/ag_1"}')
    changed, m = run(text, combiner())
    assert changed and count(m, "all-gather") == 1
    ag = find(m, "all-gather")[0]
    assert ag.attrs["frontend_attributes"] == '{color="blue,red",is_pipelineable="true"}'
    assert ag.attrs["metadata"] == '{op_type="ag" op_name="model/layer/(ag_0:ag_1)"}'


def test_threshold_and_by_dim_come_from_the_flags():
    m = load_text(BY_DIM)
    m.config = m.config.replace(debug_options=DebugOptions(
        xla_gpu_all_gather_combine_threshold_bytes=128,
        xla_gpu_enable_all_gather_combine_by_dim=True))
    assert AllGatherCombiner().run(m)
    # 128 bytes: two f32[8,2] per combined op
    assert count(m, "all-gather") == 3
    m2 = load_text(BY_DIM)
    m2.config = m2.config.replace(
        debug_options=DebugOptions(xla_gpu_all_gather_combine_threshold_bytes=0))
    assert not AllGatherCombiner().run(m2)


def test_sharding_is_a_tuple_sharding():
    text = TWO.replace("dimensions={0}\n  allgather1", "dimensions={0}, sharding={maximal device=0}\n  allgather1")
    changed, m = run(text, combiner())
    assert changed
    assert find(m, "all-gather")[0].attrs["sharding"] == "{{maximal device=0}, {replicated}}"
