"""all-gather-broadcast-reorder: XLA's all_gather_broadcast_reorder_test.cc cases, plus
the multi-replica differential check on every rewrite."""
from __future__ import annotations

import pytest

from tests.support.harness import load_text
from tests.support.multi_replica import check_pass_replicated

from .helpers import root, run

PASS = "all-gather-broadcast-reorder"


def ops(inst) -> str:
    if inst.opcode == "parameter":
        return "p"
    return inst.opcode + "(" + ",".join(ops(o) for o in inst.operands) + ")"


CASES = {
    "Simple_GatherAlongNonUniformDim": ("""
HloModule m
ENTRY main {
  x = f32[128, 5] parameter(0)
  bc = f32[5, 4, 8, 128] broadcast(x), dimensions={3, 0}
  ROOT ag = f32[5, 4, 8, 256] all-gather(bc), dimensions={3}, replica_groups={{0, 1}}
}""", "broadcast(all-gather(p))", 2),
    "Simple_GatherAlongUniformDim": ("""
HloModule m
ENTRY main {
  x = f32[128, 5] parameter(0)
  bc = f32[5, 4, 8, 128] broadcast(x), dimensions={3, 0}
  ROOT ag = f32[5, 12, 8, 128] all-gather(bc), dimensions={1}, replica_groups={{0, 1, 2}}
}""", "reshape(broadcast(all-gather(reshape(p))))", 3),
    "Simple_GatherBroadcastScalar": ("""
HloModule m
ENTRY main {
  x = f32[] parameter(0)
  bc = f32[4, 8] broadcast(x), dimensions={}
  ROOT ag = f32[12, 8] all-gather(bc), dimensions={0}, replica_groups={{0, 1, 2}}
}""", "reshape(broadcast(all-gather(reshape(p))))", 3),
    "T5Test": ("""
HloModule m
ENTRY main {
  x = f32[128] parameter(0)
  bc = f32[1,4,84,128]{3,2,1,0} broadcast(x), dimensions={3}
  ROOT ag = f32[8,4,84,128]{3,2,1,0} all-gather(bc), channel_id=6,
    replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
}""", "reshape(broadcast(all-gather(reshape(p))))", 8),
    "FailedMatch": ("""
HloModule m
ENTRY main {
  x = f32[1,4,84,128] parameter(0)
  ROOT ag = f32[8,4,84,128]{3,2,1,0} all-gather(x), channel_id=6,
    replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
}""", None, 8),
    "DoesNotCrossCallBoundaries": ("""
HloModule m
foo {
  param = f32[5, 4, 8, 128] parameter(0)
  ROOT ag = f32[5, 4, 8, 256] all-gather(param), dimensions={3}, replica_groups={{0, 1}}
}
ENTRY main {
  x = f32[128, 5] parameter(0)
  bc = f32[5, 4, 8, 128] broadcast(x), dimensions={3, 0}
  ROOT call = f32[5, 4, 8, 256] call(bc), to_apply=foo
}""", None, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_case(name):
    text, form, replicas = CASES[name]
    changed, m = run(text, PASS)
    assert changed == (form is not None)
    if form is None:
        return
    assert ops(root(m)) == form
    result = check_pass_replicated(load_text(text), PASS, num_replicas=replicas)
    assert result.compared_runs == 2


def test_new_all_gather_gets_fresh_channel_id():
    changed, m = run(CASES["T5Test"][0], PASS)
    ag = [i for i in m.instructions() if i.opcode == "all-gather"][0]
    assert ag.attrs["channel_id"] == "7"
    assert ag.shape.to_text() == "f32[8,128]{1,0}" and ag.attrs["dimensions"] == "{0}"


def test_non_uniform_dim_shapes():
    changed, m = run(CASES["Simple_GatherAlongNonUniformDim"][0], PASS)
    r = root(m)
    assert r.to_text(operand_shapes=False).endswith("broadcast(%ag.1), dimensions={3,0}")
    assert r.operands[0].shape.dims == (256, 5)
    assert r.operands[0].attrs["dimensions"] == "{0}"


def test_uniform_dim_broadcast_dims():
    changed, m = run(CASES["Simple_GatherAlongUniformDim"][0], PASS)
    bc = root(m).operands[0]
    assert bc.shape.dims == (5, 3, 4, 8, 128) and bc.attrs["dimensions"] == "{1,4,0}"


CALLS_FOO = """
HloModule m
foo {
  x_foo = f32[128, 5] parameter(0)
  bc = f32[5, 4, 8, 128] broadcast(x_foo), dimensions={3, 0}
  ROOT ag = f32[5, 4, 8, 256] all-gather(bc), dimensions={3}, replica_groups={{0, 1}}
}
ENTRY main {
  x_main = f32[128, 5] parameter(0)
  ROOT call = f32[5, 4, 8, 256] call(x_main), to_apply=foo
}"""


def test_entry_calls_foo_transformation_on_foo():
    changed, m = run(CALLS_FOO, PASS)
    assert changed
    foo = m.computation("foo")
    assert ops(foo.root) == "broadcast(all-gather(p))"
    assert foo.root.operands[0].shape.dims == (256, 5)
    assert m.entry.root.opcode == "call"
    assert check_pass_replicated(load_text(CALLS_FOO), PASS, num_replicas=2).compared_runs == 2


def test_entry_calls_foo_and_bar_transformation_on_bar():
    text = """
HloModule m
bar {
  x_bar = f32[128, 5] parameter(0)
  bc = f32[5, 4, 8, 128] broadcast(x_bar), dimensions={3, 0}
  ROOT ag = f32[5, 4, 8, 256] all-gather(bc), dimensions={3}, replica_groups={{0, 1}}
}
foo {
  x_foo = f32[128, 5] parameter(0)
  ROOT call_bar = f32[5, 4, 8, 256] call(x_foo), to_apply=bar
}
ENTRY main {
  x_main = f32[128, 5] parameter(0)
  call_foo = f32[5, 4, 8, 256] call(x_main), to_apply=foo
  call_bar = f32[5, 4, 8, 256] call(x_main), to_apply=bar
  ROOT add = f32[5, 4, 8, 256] add(call_foo, call_bar)
}"""
    changed, m = run(text, PASS)
    assert changed
    assert ops(m.computation("bar").root) == "broadcast(all-gather(p))"
    assert m.computation("foo").root.opcode == "call"
    assert check_pass_replicated(load_text(text), PASS, num_replicas=2).compared_runs == 2


def test_nothing_uniform_left():
    """Broadcast dims plus the gather dim cover every dimension of size > 1."""
    text = """
HloModule m
ENTRY main {
  x = f32[4, 2] parameter(0)
  bc = f32[4, 1, 2] broadcast(x), dimensions={0, 2}
  ROOT ag = f32[8, 1, 2] all-gather(bc), dimensions={0}, replica_groups={{0, 1}}
}"""
    assert not run(text, PASS)[0]
