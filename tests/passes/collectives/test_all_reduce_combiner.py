"""all-reduce-combiner: XLA's all_reduce_combiner_test.cc cases (the builder-made ones
written as HLO text), plus the multi-replica differential check on every rewrite."""
from __future__ import annotations

from hlo_opt.flags import DebugOptions
from passes.collectives.all_reduce_combiner import AllReduceCombiner
from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import count, find, root, run

MIB = 1024 * 1024


def combiner(threshold=MIB):
    return AllReduceCombiner(threshold, 256)


def reductions(kinds):
    out = []
    for name, op in kinds:
        out.append(f"{name} {{\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                   f"  ROOT r = f32[] {op}(x, y)\n}}")
    return "\n".join(out)


def cross_replica_reductions(sizes_kib, comps) -> str:
    """MakeCrossReplicaReductions: all-reduce of broadcast(42.3) of size_kib KiB each."""
    body = ["  c = f32[] constant(42.3)"]
    names = []
    for i, (kib, comp) in enumerate(zip(sizes_kib, comps)):
        n = kib * 1024 // 4
        body.append(f"  in{i} = f32[{n}] broadcast(c), dimensions={{}}")
        body.append(f"  ar{i} = f32[{n}] all-reduce(in{i}), replica_groups={{}}, to_apply={comp}")
        names.append(f"ar{i}")
    shapes = ", ".join(f"f32[{kib * 1024 // 4}]" for kib in sizes_kib)
    body.append(f"  ROOT t = ({shapes}) tuple({', '.join(names)})")
    return "\n".join(body)


def module(kinds, body) -> str:
    return "HloModule m\n" + reductions(kinds) + "\nENTRY e {\n" + body + "\n}\n"


def test_combine_all_reduces():
    text = module([("sum", "add")], cross_replica_reductions([1, 2, 10, 7, 6], ["sum"] * 5))
    changed, m = run(text, combiner(10 * MIB))
    assert changed and count(m, "all-reduce") == 1
    combined = find(m, "all-reduce")[0]
    assert [o.name for o in combined.operands] == [f"in{i}" for i in range(5)]
    t = root(m)
    for i, gte in enumerate(t.operands):
        assert gte.opcode == "get-tuple-element" and gte.attr("index") == i
        assert gte.operands[0] is combined
    assert combined.shape == t.shape
    assert all(o.user_count == 1 for o in combined.operands)
    differential(text, combiner(10 * MIB), replicas=2)


def differential(text, p, replicas=4):
    result = check_pass_replicated(load_text(text), [p], num_replicas=replicas, seeds=(0,))
    assert result.changed and result.compared_runs == 1


def test_combine_cross_replica_reductions_in_groups():
    kinds = [("sum", "add"), ("min", "minimum"), ("max", "maximum"), ("sum_2", "add")]
    comps = ["sum", "sum_2", "min", "min", "min", "max", "max", "max", "sum", "sum_2"]
    text = module(kinds, cross_replica_reductions(list(range(1, 11)), comps))
    changed, m = run(text, combiner(10 * MIB))
    assert changed
    assert count(m, "all-reduce") == 3  # one per reduction kind


def test_respect_threshold():
    text = module([("sum", "add")], cross_replica_reductions([8, 4], ["sum", "sum"]))
    changed, m = run(text, combiner((8 + 4) * 1024 - 1))
    assert not changed and count(m, "all-reduce") == 2
    changed, m = run(text, combiner((8 + 4) * 1024))
    assert changed and count(m, "all-reduce") == 1


def test_no_dependent_combination():
    text = module([("sum", "add")], """
  c = f32[] constant(42.3)
  ar0 = f32[] all-reduce(c), replica_groups={}, to_apply=sum
  ROOT ar1 = f32[] all-reduce(ar0), replica_groups={}, to_apply=sum""")
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-reduce") == 2


def test_group_all_reduce():
    text = "HloModule m, replica_count=4\n" + reductions([("sum", "add")]) + """
ENTRY e {
  c = f32[] constant(42.3)
  crs0 = f32[] all-reduce(c), replica_groups={{0,1},{2,3}}, to_apply=sum
  crs1 = f32[] all-reduce(c), replica_groups={{0,2},{1,3}}, to_apply=sum
  ROOT t = (f32[], f32[]) tuple(crs0, crs1)
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-reduce") == 2


SUMMIT = """HloModule Module
summit {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}
"""


def test_domain_prevents_combining():
    """(Here any domain instruction keeps the combiner out of the computation.)"""
    text = SUMMIT + """ENTRY entry {
  param0 = f32[128] parameter(0), sharding={maximal device=0}
  param1 = f32[128] parameter(1), sharding={maximal device=1}
  crs0 = f32[128] all-reduce(param0),
    replica_groups={}, to_apply=summit, sharding={maximal device=0}
  crs1 = f32[128] all-reduce(param1),
    replica_groups={}, to_apply=summit, sharding={maximal device=1}
  domain0 = f32[128] domain(crs0),
    domain={kind="sharding", entry={{maximal device=0}, {maximal device=1}},
    exit={maximal device=0}}
  domain1 = f32[128] domain(crs1),
    domain={kind="sharding", entry={{maximal device=0}, {maximal device=1}},
    exit={maximal device=1}}
  ROOT tuple = (f32[128], f32[128]) tuple(domain0, domain1),
    sharding={{maximal device=0}, {maximal device=1}}
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-reduce") == 2


def test_do_not_combine_cross_shard_and_cross_replica_in_spmd():
    text = SUMMIT + """ENTRY entry {
  param0 = f32[128] parameter(0), sharding={maximal device=0}
  param1 = f32[128] parameter(1), sharding={maximal device=1}
  cross_shard_ar = f32[128] all-reduce(param0),
    replica_groups={{0}}, to_apply=summit, channel_id=1
  cross_replica_ar = f32[128] all-reduce(param1),
    replica_groups={{0}}, to_apply=summit, sharding={maximal device=1}
  ROOT tuple = (f32[128], f32[128]) tuple(cross_shard_ar, cross_replica_ar)
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-reduce") == 2


def test_do_not_combine_with_control_dependencies():
    text = SUMMIT.replace("summit", "add") + """ENTRY entry {
  param0 = f32[128] parameter(0)
  param1 = f32[128] parameter(1)
  lead_ar = f32[128] all-reduce(param0), replica_groups={{0}}, to_apply=add,
      channel_id=1
  ar0 = f32[128] all-reduce(lead_ar),
      replica_groups={{0}}, to_apply=add, channel_id=2,
      control-predecessors={lead_ar}
  ar1 = f32[128] all-reduce(param1),
      replica_groups={{0}}, to_apply=add, channel_id=3,
      control-predecessors={lead_ar}
  ROOT tuple = (f32[128], f32[128]) tuple(ar0, ar1)
}"""
    changed, m = run(text, combiner())
    assert not changed and count(m, "all-reduce") == 3


def test_cross_combine_group_cycle():
    text = """HloModule module
%add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}
%max {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] maximum(lhs, rhs)
}
ENTRY %comp {
  p0 = f32[128] parameter(0)
  p1 = f32[128] parameter(1)
  crs00 = f32[128] all-reduce(p0), to_apply=add
  crs10 = f32[128] all-reduce(p1), to_apply=max
  crs01 = f32[128] all-reduce(crs00), to_apply=max
  crs11 = f32[128] all-reduce(crs10), to_apply=add
  add0 = f32[128] add(crs01, crs11)
  crs02 = f32[128] all-reduce(add0), to_apply=add
  crs12 = f32[128] all-reduce(crs11), to_apply=add
  ROOT tuple = (f32[128], f32[128]) tuple(crs02, crs12)
}"""
    changed, m = run(text, combiner())
    assert changed and count(m, "all-reduce") == 4

    def tree(i):
        if i.opcode == "parameter":
            return f"p{i.parameter_number}"
        if i.opcode == "get-tuple-element":
            return f"gte{i.attr('index')}({tree(i.operands[0])})"
        return i.opcode + "(" + ",".join(tree(o) for o in i.operands) + ")"
    crs0 = "all-reduce(p0,all-reduce(p1))"
    add = f"add(all-reduce(gte0({crs0})),gte1({crs0}))"
    crs1 = f"all-reduce({add},gte1({crs0}))"
    assert tree(root(m)) == f"tuple(gte0({crs1}),gte1({crs1}))"
    differential(text, combiner(), replicas=3)


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
  %all-reduce.0 = f32[32] all-reduce(%param.0), replica_groups={},
      to_apply=%add, metadata={op_type="test_type0" op_name="test_name0"}
  %all-reduce.1 = f32[32] all-reduce(%param.1), replica_groups={},
      to_apply=%add, metadata={op_type="test_type1" op_name="test_name1"}
  ROOT tuple = (f32[32], f32[32]) tuple(%all-reduce.0, %all-reduce.1)
}"""
    changed, m = run(text, combiner())
    assert changed
    combined = find(m, "all-reduce")[0]
    assert combined.attrs["metadata"] == '{op_type="test_type0" op_name="test_name0"}'
    differential(text, combiner())


def test_threshold_comes_from_the_flag():
    text = module([("sum", "add")], cross_replica_reductions([8, 4], ["sum", "sum"]))
    m = load_text(text)
    m.config = m.config.replace(debug_options=DebugOptions(
        xla_gpu_all_reduce_combine_threshold_bytes=12 * 1024 - 1))
    assert not AllReduceCombiner().run(m)
    m.config = m.config.replace(debug_options=DebugOptions())  # XLA's default: 30 MiB + 7
    assert AllReduceCombiner().run(m) and count(m, "all-reduce") == 1


def test_count_threshold():
    text = module([("sum", "add")], cross_replica_reductions([1, 1, 1, 1, 1], ["sum"] * 5))
    changed, m = run(text, AllReduceCombiner(MIB, 2))
    assert changed and count(m, "all-reduce") == 3  # 2 + 2 + 1
    differential(text, AllReduceCombiner(MIB, 2))
