"""reduce-scatter-combiner: XLA's reduce_scatter_combiner_test.cc cases (byte threshold
10 MiB, count 256, combine_by_dim as there), plus the multi-replica differential check."""
from __future__ import annotations

from passes.collectives.reduce_scatter_combiner import ReduceScatterCombiner
from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count, find, run

MAX_BYTES = 10 * 1024 * 1024


def combiner(threshold=MAX_BYTES, count_=256, by_dim=True, while_loops=True):
    return ReduceScatterCombiner(threshold, count_, by_dim, while_loops)


SUM = """HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.2 = f32[] add(a, b)
}
"""


def differential(text, p, replicas=2):
    result = check_pass_replicated(load_text(text), [p], num_replicas=replicas)
    assert result.changed and result.compared_runs == 2


SIMPLE = SUM + """ENTRY main {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  rs0 = f32[4] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  rs1 = f32[4] reduce-scatter(p1), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  ROOT t = (f32[4], f32[4]) tuple(rs0, rs1)
}"""


def test_simple():
    changed, m = run(SIMPLE, combiner())
    assert changed and count(m, "reduce-scatter") == 1
    rs = find(m, "reduce-scatter")[0]
    assert rs.shape.to_text() == "(f32[4]{0}, f32[4]{0})"
    differential(SIMPLE, combiner())


MULTI = SUM + """ENTRY main {
  p0 = f32[8, 8] parameter(0)
  p1 = f32[8, 8] parameter(1)
  rs0 = f32[4, 8] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  rs1 = f32[4, 8] reduce-scatter(p1), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  rs2 = f32[8, 4] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={1},
      to_apply=sum
  rs3 = f32[8, 4] reduce-scatter(p1), replica_groups={{0,1}}, dimensions={1},
      to_apply=sum
  ROOT t = (f32[4, 8], f32[4, 8], f32[8, 4], f32[8, 4])
      tuple(rs0, rs1, rs2, rs3)
}"""


def test_simple_multiple_groups():
    changed, m = run(MULTI, combiner())
    assert changed and count(m, "reduce-scatter") == 2
    differential(MULTI, combiner())


def test_different_dimensions():
    changed, m = run(MULTI, combiner(by_dim=False))
    assert changed and count(m, "reduce-scatter") == 1
    assert find(m, "reduce-scatter")[0].attrs["dimensions"] == "{0}"
    assert len(find(m, "bitcast")) == 4  # two operands in, two results out
    differential(MULTI, combiner(by_dim=False))


def test_different_dimensions_and_ranks():
    text = SUM + """ENTRY main {
  p0 = f32[8, 8] parameter(0)
  p1 = f32[8] parameter(1)
  rs0 = f32[8, 4] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={1},
      to_apply=sum
  rs1 = f32[8, 4] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={1},
      to_apply=sum
  rs2 = f32[4] reduce-scatter(p1), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  ROOT t = (f32[8, 4], f32[8, 4], f32[4])
      tuple(rs0, rs1, rs2)
}"""
    changed, m = run(text, combiner(by_dim=False))
    assert changed and count(m, "reduce-scatter") == 1
    # the most frequent dimension (1) does not exist in rank 1: dimension 0
    assert find(m, "reduce-scatter")[0].attrs["dimensions"] == "{0}"
    differential(text, combiner(by_dim=False))


def test_dependent_reduce_scatter():
    text = SUM + """ENTRY main {
  p0 = f32[8, 8] parameter(0)
  rs0 = f32[4, 8] reduce-scatter(p0), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  rs1 = f32[2, 8] reduce-scatter(rs0), replica_groups={{0,1}}, dimensions={0},
      to_apply=sum
  ROOT t = (f32[4, 8], f32[2, 8]) tuple(rs0, rs1)
}"""
    assert not run(text, combiner())[0]


def test_do_not_combine_mismatched():
    text = SIMPLE.replace("rs1 = f32[4] reduce-scatter(p1), replica_groups={{0,1}}",
                          "rs1 = f32[4] reduce-scatter(p1), replica_groups={{1,0}}")
    assert not run(text, combiner())[0]


def test_do_not_combine_without_reduction_kind():
    text = """HloModule TestModule
region_0 {
  Arg_1 = bf16[] parameter(1)
  Arg_0 = bf16[] parameter(0)
  convert_1 = f32[] convert(Arg_1)
  convert_0 = f32[] convert(Arg_0)
  add0 = f32[] add(convert_1, convert_0)
  ROOT convert_2 = bf16[] convert(add0)
}
region_1 {
  Arg_1 = bf16[] parameter(1)
  Arg_0 = bf16[] parameter(0)
  convert_1 = f32[] convert(Arg_1)
  convert_0 = f32[] convert(Arg_0)
  add0 = f32[] add(convert_1, convert_0)
  ROOT convert_2 = bf16[] convert(add0)
}
ENTRY entry{
  param0 = bf16[512,256]{1,0} parameter(0)
  param1 = bf16[512,256]{1,0} parameter(1)
  reduce-scatter.0 = bf16[512,256]{1,0} reduce-scatter(param0),
      replica_groups={{0}}, dimensions={0}, to_apply=region_0
  reduce-scatter.1 = bf16[512,256]{1,0} reduce-scatter(param1),
      replica_groups={{0}}, dimensions={0}, to_apply=region_1
  ROOT add.0 = tuple(reduce-scatter.0, reduce-scatter.1)
}"""
    assert not run(text, combiner())[0]


HIGH = """HloModule m
sum_reduce {
  lhs = bf16[] parameter(0)
  rhs = bf16[] parameter(1)
  ROOT add = bf16[] add(lhs, rhs)
}
ENTRY main {
  param.0 = bf16[1024,32768]{1,0} parameter(0)
  param.1 = bf16[4096,8192]{1,0} parameter(1)
  param.2 = bf16[3,128,64,1024]{2,1,0,3}parameter(2)
  param.3 = bf16[1024,128,64]{2,1,0} parameter(3)
  reduce-scatter.19 = bf16[1024,32768]{1,0} reduce-scatter(param.0),
      channel_id=132, replica_groups={{0}}, dimensions={0}, to_apply=sum_reduce
  reduce-scatter.21 = bf16[4096,8192]{1,0} reduce-scatter(param.1),
      channel_id=134, replica_groups={{0}}, dimensions={0}, to_apply=sum_reduce
  reduce-scatter.23 = bf16[3,128,64,1024]{2,1,0,3} reduce-scatter(param.2),
      channel_id=136, replica_groups={{0}}, dimensions={3}, to_apply=sum_reduce
  reduce-scatter.25 = bf16[1024,128,64]{2,1,0} reduce-scatter(param.3),
      channel_id=138, replica_groups={{0}}, dimensions={0}, to_apply=sum_reduce
  ROOT tuple = tuple(reduce-scatter.19, reduce-scatter.21, reduce-scatter.23,
      reduce-scatter.25)
}"""


def test_high_threshold():
    combined_bytes = 67108864 + 67108864 + 50331648 + 16777216
    changed, m = run(HIGH, combiner(combined_bytes, by_dim=False))
    assert changed and count(m, "reduce-scatter") == 1
    # a byte less and the last one no longer fits
    changed, m = run(HIGH, combiner(combined_bytes - 1, by_dim=False))
    assert changed and count(m, "reduce-scatter") == 2


def test_do_not_combine_in_while_loop():
    text = """HloModule m
sum_reduce {
  lhs = bf16[] parameter(0)
  rhs = bf16[] parameter(1)
  ROOT add = bf16[] add(lhs, rhs)
}
while_body {
  param = (bf16[1024,32768]{1,0}, bf16[4096,8192]{1,0}) parameter(0)
  param.0 = bf16[1024,32768]{1,0} get-tuple-element(param), index=0
  param.1 = bf16[4096,8192]{1,0} get-tuple-element(param), index=1
  reduce-scatter.0 = bf16[1024,32768]{1,0} reduce-scatter(param.0),
      channel_id=132, replica_groups={{0}}, dimensions={0}, to_apply=sum_reduce
  reduce-scatter.1 = bf16[4096,8192]{1,0} reduce-scatter(param.1),
      channel_id=134, replica_groups={{0}}, dimensions={0}, to_apply=sum_reduce
  ROOT tuple = tuple(reduce-scatter.0, reduce-scatter.1)
}
while_cond {
  param = (bf16[1024,32768], bf16[4096,8192]) parameter(0)
  ROOT cond = pred[] constant(true)
}
ENTRY main {
  param.0 = bf16[1024,32768]{1,0} parameter(0)
  param.1 = bf16[4096,8192]{1,0} parameter(1)
  while_init = (bf16[1024,32768], bf16[4096,8192]) tuple(param.0, param.1)
  while_loop = (bf16[1024,32768], bf16[4096,8192]) while(while_init), condition=while_cond, body=while_body
  gte.0 = bf16[1024,32768] get-tuple-element(while_loop), index=0
  gte.1 = bf16[4096,8192] get-tuple-element(while_loop), index=1
  ROOT tuple = tuple(gte.0, gte.1)
}"""
    assert not run(text, combiner(1024 * 1024, by_dim=False, while_loops=False))[0]


def test_preserves_metadata():
    text = """HloModule Module
%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %x, f32[] %y)
}
ENTRY entry {
  %param.0 = f32[32] parameter(0)
  %param.1 = f32[32] parameter(1)
  %rs.0 = f32[16] reduce-scatter(%param.0), replica_groups={{0,1}}, dimensions={0}, to_apply=%add, metadata={op_type="test_type0" op_name="test_name0"}
  %rs.1 = f32[16] reduce-scatter(%param.1), replica_groups={{0,1}}, dimensions={0}, to_apply=%add, metadata={op_type="test_type1" op_name="test_name1"}
  ROOT tuple = (f32[16], f32[16]) tuple(%rs.0, %rs.1)
}"""
    changed, m = run(text, combiner())
    assert changed
    rs = find(m, "reduce-scatter")[0]
    assert rs.attrs["metadata"] == '{op_type="test_type0" op_name="(test_name0:test_name1)"}'
    differential(text, combiner())


def test_groups_of_four_on_eight_replicas():
    """Not in XLA's test: iota groups, combined and checked on 8 replicas."""
    text = SUM + """ENTRY main {
  p0 = f32[8,2] parameter(0)
  p1 = f32[4] parameter(1)
  rs0 = f32[2,2] reduce-scatter(p0), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0},
      to_apply=sum
  rs1 = f32[1] reduce-scatter(p1), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0},
      to_apply=sum
  ROOT t = (f32[2,2], f32[1]) tuple(rs0, rs1)
}"""
    changed, m = run(text, combiner())
    assert changed and count(m, "reduce-scatter") == 1
    differential(text, combiner(), replicas=8)
