"""reduce-scatter-creator: XLA's gpu/transforms/reduce_scatter_creator_test.cc cases
(replica / partition counts as module header attributes, where XLA's test passes a
module config), plus the multi-replica differential check on every rewrite."""
from __future__ import annotations

import pytest

from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count, root, run

PASS = "reduce-scatter-creator"

SUM = """
%sum {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}
"""


def module(header: str, body: str) -> str:
    return f"HloModule AllReduce, {header}\n{SUM}\nENTRY %AllReduce {{\n{body}\n}}\n"


ALL_REPLICAS = """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param), replica_groups={}, to_apply=%sum
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %rid = u32[] replica-id()
  %id = s32[1] dynamic-slice(%table, %rid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%id)
  %slice_size = s32[] constant(4)
  %offset = s32[] multiply(%reshape, %slice_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[4,8,128] dynamic-slice(%all-reduce, %offset, %zero, %zero),
    dynamic_slice_sizes={4,8,128}"""

CASES = {
    "AllReplicas": ("replica_count=8", ALL_REPLICAS, "rs", 0),
    "AllReplicasWithOffsetReshape": ("replica_count=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param), replica_groups={}, to_apply=%sum
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %rid = u32[] replica-id()
  %id = s32[1] dynamic-slice(%table, %rid), dynamic_slice_sizes={1}
  %slice_size = s32[1] constant({4})
  %offset = s32[1] multiply(%id, %slice_size)
  %reshape = s32[] reshape(%offset)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[4,8,128] dynamic-slice(%all-reduce, %reshape, %zero, %zero),
    dynamic_slice_sizes={4,8,128}""", "rs", 0),
    "AllReplicasWithReshape": ("replica_count=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param), replica_groups={}, to_apply=%sum
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %rid = u32[] replica-id()
  %id = s32[1] dynamic-slice(%table, %rid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%id)
  %slice_size = s32[] constant(4)
  %offset = s32[] multiply(%reshape, %slice_size)
  %zero = s32[] constant(0)
  %reshape.1 = f32[32,16,64] reshape(%all-reduce)
  ROOT %dynamic-slice = f32[4,16,64] dynamic-slice(%reshape.1, %offset, %zero, %zero),
    dynamic_slice_sizes={4,16,64}""", "reshape(rs)", 0),
    "AllReplicasWithReshapeSplitDimModified": ("replica_count=8", """
  %param = f32[336,1024] parameter(0)
  %all-reduce = f32[336,1024] all-reduce(%param), replica_groups={}, to_apply=%sum
  %rid = u32[] replica-id()
  %id = s32[] convert(%rid)
  %slice_size = s32[] constant(128)
  %offset = s32[] multiply(%id, %slice_size)
  %zero = s32[] constant(0)
  %reshape.1 = f32[4,84,1024] reshape(%all-reduce)
  ROOT %dynamic-slice = f32[4,84,128] dynamic-slice(%reshape.1, %zero, %zero, %offset),
    dynamic_slice_sizes={4,84,128}""", "reshape(rs)", 1),
    "AllReplicasDim2": ("replica_count=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param), replica_groups={}, to_apply=%sum
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %rid = u32[] replica-id()
  %rid_s32 = s32[] convert(%rid)
  %slice_size = s32[] constant(16)
  %offset = s32[] multiply(%rid_s32, %slice_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[32,8,16] dynamic-slice(%all-reduce, %zero, %zero, %offset),
    dynamic_slice_sizes={32,8,16}""", "rs", 2),
    "AllReplicasWrongOffsets": ("replica_count=8", ALL_REPLICAS.replace(
        "{0,1,2,3,4,5,6,7}", "{0,1,2,3,4,5,6,8}"), None, None),
    "AllReplicasIotaTable": ("replica_count=8, num_partitions=2", ALL_REPLICAS.replace(
        "%table = s32[8]{0} constant({0,1,2,3,4,5,6,7})",
        "%table = s32[8]{0} iota(), iota_dimension=0"), "rs", 0),
    "SubgroupedReplicas": ("replica_count=8, num_partitions=2", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param),
    replica_groups={{1,3,2,0},{4,5,6,7}}, to_apply=%sum
  %gtable = s32[8]{0} constant({3,0,2,1,0,1,2,3})
  %rid = u32[] replica-id()
  %id = s32[1] dynamic-slice(%gtable, %rid), dynamic_slice_sizes={1}
  %reshape.0 = s32[] reshape(%id)
  %table = s32[4]{0} constant({0,8,16,24})
  %offset = s32[1] dynamic-slice(%table, %reshape.0), dynamic_slice_sizes={1}
  %reshape.1 = s32[] reshape(%offset)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[8,8,128] dynamic-slice(%all-reduce, %reshape.1, %zero, %zero),
    dynamic_slice_sizes={8,8,128}""", "rs", 0),
    "AllPartitions": ("replica_count=2, num_partitions=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param),
    replica_groups={{0},{1}}, to_apply=%sum, channel_id=1
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %pid = u32[] partition-id()
  %id = s32[1] dynamic-slice(%table, %pid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%id)
  %slice_size = s32[] constant(4)
  %offset = s32[] multiply(%reshape, %slice_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[4,8,128] dynamic-slice(%all-reduce, %offset, %zero, %zero),
    dynamic_slice_sizes={4,8,128}""", "rs", 0),
    "SubgroupsGlobals": ("replica_count=2, num_partitions=4", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param),
    replica_groups={{1,3,2,0},{4,5,6,7}}, to_apply=%sum, channel_id=1, use_global_device_ids=true
  %pid = u32[] partition-id()
  %rid = u32[] replica-id()
  %pcount = u32[] constant(4)
  %ridxp = u32[] multiply(%rid, %pcount)
  %gid = u32[] add(%ridxp, %pid)
  %gtable = s32[8]{0} constant({3,0,2,1,0,1,2,3})
  %id = s32[1] dynamic-slice(%gtable, %gid), dynamic_slice_sizes={1}
  %reshape.0 = s32[] reshape(%id)
  %table = s32[4]{0} constant({0,8,16,24})
  %offset = s32[1] dynamic-slice(%table, %reshape.0), dynamic_slice_sizes={1}
  %reshape.1 = s32[] reshape(%offset)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[8,8,128] dynamic-slice(%all-reduce, %reshape.1, %zero, %zero),
    dynamic_slice_sizes={8,8,128}""", "rs", 0),
    "SubgroupsGlobalsOrthogonalReplicas": ("replica_count=2, num_partitions=4", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param),
    replica_groups={{1,3,2,0},{5,7,6,4}}, to_apply=%sum, channel_id=1, use_global_device_ids=true
  %pid = u32[] partition-id()
  %pid_table = s32[4]{0} constant({3,0,2,1})
  %offset = s32[1] dynamic-slice(%pid_table, %pid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%offset)
  %shard_size = s32[] constant(8)
  %mul = s32[] multiply(%reshape, %shard_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[8,8,128] dynamic-slice(%all-reduce, %mul, %zero, %zero),
    dynamic_slice_sizes={8,8,128}""", "rs", 0),
    "NonUniformSplit": ("replica_count=1, num_partitions=8", """
  %param = f32[1,7]{1,0} parameter(0)
  %all-reduce = f32[1,7]{1,0} all-reduce(%param),
    replica_groups={{0,1},{2,3},{4,5},{6,7}}, to_apply=%sum, channel_id=1, use_global_device_ids=true
  %pid = u32[] partition-id()
  %pid_table = s32[8]{0} constant({0, 1, 0, 1, 0, 1, 0, 1})
  %offset = s32[1] dynamic-slice(%pid_table, %pid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%offset)
  %shard_size = s32[] constant(3)
  %mul = s32[] multiply(%reshape, %shard_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[1,3] dynamic-slice(%all-reduce, %zero, %mul),
    dynamic_slice_sizes={1,3}""", "rs(slice)", 1),
    "ReduceScatterCreatorWithSPMDPartitioningDisabled": ("replica_count=1, num_partitions=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce = f32[32,8,128]{2,1,0} all-reduce(%param),
      replica_groups={{0,1,2,3,4,5,6,7}}, channel_id=1,
      use_global_device_ids=true, to_apply=%sum
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %pid = u32[] partition-id()
  %id = s32[1] dynamic-slice(%table, %pid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%id)
  %slice_size = s32[] constant(4)
  %offset = s32[] multiply(%reshape, %slice_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[4,8,128] dynamic-slice(%all-reduce, %offset, %zero,
      %zero), dynamic_slice_sizes={4,8,128}""", "rs", 0),
}
CASES["SubgroupsGlobalsNonOrthogonalReplicas"] = (
    "replica_count=2, num_partitions=4",
    CASES["SubgroupsGlobalsOrthogonalReplicas"][1].replace("{5,7,6,4}", "{7,5,6,4}"),
    None, None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_case(name):
    header, body, form, dim = CASES[name]
    text = module(header, body)
    changed, m = run(text, PASS)
    assert changed == (form is not None)
    if form is None:
        assert count(m, "reduce-scatter") == 0
        return
    assert count(m, "all-reduce") == 0
    r = root(m)
    rs = r.operands[0] if form.startswith("reshape") else r
    if form.startswith("reshape"):
        assert r.opcode == "reshape"
    assert rs.opcode == "reduce-scatter"
    assert rs.attrs["dimensions"] == f"{{{dim}}}"
    src = rs.operands[0]
    assert src.opcode == ("slice" if form == "rs(slice)" else "parameter")
    result = check_pass_replicated(load_text(text), PASS, seeds=(0,))
    assert result.compared_runs == 1


def test_all_reduce_followed_by_all_reduce():
    text = module("replica_count=2, num_partitions=8", """
  %param = f32[32,8,128]{2,1,0} parameter(0)
  %all-reduce.scattered = f32[32,8,128]{2,1,0} all-reduce(%param),
    replica_groups={{0,1,2,3,4,5,6,7},{8,9,10,11,12,13,14,15}}, to_apply=%sum, use_global_device_ids=true, channel_id=1
  %table = s32[8]{0} constant({0,1,2,3,4,5,6,7})
  %pid = u32[] partition-id()
  %id = s32[1] dynamic-slice(%table, %pid), dynamic_slice_sizes={1}
  %reshape = s32[] reshape(%id)
  %slice_size = s32[] constant(4)
  %offset = s32[] multiply(%reshape, %slice_size)
  %zero = s32[] constant(0)
  %dynamic-slice = f32[4,8,128] dynamic-slice(%all-reduce.scattered, %offset, %zero, %zero),
    dynamic_slice_sizes={4,8,128}
  ROOT %all-reduce.sync = f32[4,8,128]{2,1,0} all-reduce(%dynamic-slice),
    replica_groups={{0,8},{1,9},{2,10},{3,11},{4,12},{5,13},{6,14},{7,15}}, to_apply=%sum, use_global_device_ids=true, channel_id=2""")
    changed, m = run(text, PASS)
    assert changed
    assert count(m, "all-reduce") == 1 and count(m, "reduce-scatter") == 1
    rs = root(m).operands[0]
    assert rs.attrs["channel_id"] == "3"  # a fresh one
    assert check_pass_replicated(load_text(text), PASS, seeds=(0,)).compared_runs == 1


def test_preserves_backend_config():
    text = module("replica_count=8", ALL_REPLICAS.replace(
        "replica_groups={}, to_apply=%sum",
        'replica_groups={}, to_apply=%sum, '
        'backend_config={"collective_backend_config":{"is_pipelined":true}}'))
    changed, m = run(text, PASS)
    assert changed
    assert '"is_pipelined":true' in root(m).attrs["backend_config"]


THROUGH_TUPLE = module("replica_count=1, num_partitions=8", """
  %param0 = f32[64,16]{1,0} parameter(0)
  %param1 = f32[16,16]{1,0} parameter(1)
  %all-reduce = f32[64,16]{1,0} all-reduce(%param0),
    replica_groups={{0,1,2,3,4,5,6,7}}, channel_id=5, use_global_device_ids=true, to_apply=%sum
  %tuple = (f32[64,16]{1,0}, f32[16,16]{1,0}) tuple(%all-reduce, %param1)
  %get-tuple-element = f32[64,16]{1,0} get-tuple-element(%tuple), index=0
  %pid = u32[] partition-id()
  %pid_s32 = s32[] convert(%pid)
  %slice_size = s32[] constant(8)
  %offset = s32[] multiply(%pid_s32, %slice_size)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice = f32[8,16]{1,0} dynamic-slice(%get-tuple-element, %offset, %zero),
    dynamic_slice_sizes={8,16}""")


def test_all_reduce_through_tuple_needs_algsimp_first():
    """XLA's AllReduceThroughTuple (shapes scaled down from 4096x4096): no match through
    tuple/get-tuple-element; after algsimp folds them it matches."""
    changed, m = run(THROUGH_TUPLE, PASS)
    assert not changed and count(m, "all-reduce") == 1
    result = check_pass_replicated(load_text(THROUGH_TUPLE), ["algsimp", PASS], seeds=(0,))
    assert result.changed and "reduce-scatter(" in result.after_text
    assert result.compared_runs == 1


def test_offset_not_per_id_is_left_alone():
    """A clamp whose bound is too small for the last shard."""
    text = module("replica_count=4", """
  %param = f32[8,2] parameter(0)
  %all-reduce = f32[8,2] all-reduce(%param), replica_groups={}, to_apply=%sum
  %rid = u32[] replica-id()
  %id = s32[] convert(%rid)
  %two = s32[] constant(2)
  %offset = s32[] multiply(%id, %two)
  %lo = s32[] constant(0)
  %hi = s32[] constant(4)
  %c = s32[] clamp(%lo, %offset, %hi)
  %zero = s32[] constant(0)
  ROOT %ds = f32[2,2] dynamic-slice(%all-reduce, %c, %zero), dynamic_slice_sizes={2,2}""")
    assert not run(text, PASS)[0]
    assert run(text.replace("constant(4)", "constant(6)"), PASS)[0]
