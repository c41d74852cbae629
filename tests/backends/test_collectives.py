"""Multi-replica / multi-partition interpretation of collectives, checked against a numpy
model of XLA's semantics written here independently of the interpreter (groups from
numpy reshapes/transposes, results from numpy reductions and concatenations)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter import (CollectiveDeadlockError, CollectiveError,
                                          CollectiveTimeoutError, ReplicaGroupError,
                                          execute, execute_replicated)
from hlo_opt.errors import HloError, UnsupportedError

# ---- the model ------------------------------------------------------------------------------


def model_groups(text: str | None, n_ids: int) -> list[list[int]]:
    """replica_groups as lists; ``{}`` -> one group of all ``n_ids``."""
    text = (text or "{}").replace(" ", "")
    m = re.fullmatch(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        dims = [int(x) for x in m.group(3).split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m.group(4):
            ids = ids.transpose([int(x) for x in m.group(4).split(",")])
        return ids.reshape(int(m.group(1)), int(m.group(2))).tolist()
    groups = [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}",
                                                                      text[1:-1])]
    return groups or [list(range(n_ids))]


def model_participants(opcode, attrs, R, P) -> dict[int, list[int]]:
    """device -> its ordered group of devices (device = replica * P + partition)."""
    channel = "channel_id" in attrs
    global_ids = attrs.get("use_global_device_ids") == "true"
    out = {}
    if channel and opcode in ("all-to-all", "collective-broadcast"):
        for g in model_groups(attrs.get("replica_groups"), P):
            for r in range(R):
                for p in g:
                    out[r * P + p] = [r * P + q for q in g]
    elif not channel:
        for g in model_groups(attrs.get("replica_groups"), R):
            for p in range(P):
                for r in g:
                    out[r * P + p] = [s * P + p for s in g]
    elif global_ids:
        for g in model_groups(attrs.get("replica_groups"), R * P):
            for d in g:
                out[d] = list(g)
    else:
        for g in model_groups(attrs.get("replica_groups"), R):
            devs = [r * P + p for r in g for p in range(P)]
            for d in devs:
                out[d] = devs
    return out


_NP_REDUCE = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum,
              "multiply": np.multiply, "and": np.logical_and, "or": np.logical_or}


def model(opcode, attrs, args, R, P, reducer="add"):
    """Every device's expected result of a one-operand collective; ``args[d]`` is device
    d's operand."""
    n = R * P
    groups = model_participants(opcode, attrs, R, P)
    dims = [int(x) for x in re.findall(r"\d+", attrs.get("dimensions", ""))]
    out = []
    for d in range(n):
        g = groups[d]
        k = g.index(d)
        xs = [args[j] for j in g]
        if opcode in ("all-reduce", "reduce-scatter"):
            total = _NP_REDUCE[reducer].reduce(np.stack(xs), axis=0).astype(xs[0].dtype)
            out.append(total if opcode == "all-reduce"
                       else np.split(total, len(g), axis=dims[0])[k])
        elif opcode == "all-gather":
            out.append(np.concatenate(xs, axis=dims[0]))
        elif opcode == "all-to-all":
            out.append(np.concatenate([np.split(x, len(g), axis=dims[0])[k] for x in xs],
                                      axis=dims[0]))
        elif opcode == "collective-broadcast":
            out.append(xs[0])
        else:
            raise AssertionError(opcode)
    return out


# ---- helpers ----------------------------------------------------------------------------------

REDUCERS = {
    "add": "a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] add(a, b)",
    "maximum": "a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] maximum(a, b)",
    "multiply": "a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] multiply(a, b)",
    "and": "a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] and(a, b)",
    "or": "a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT r = {t}[] or(a, b)",
}


def one_op_module(opcode, in_shape, out_shape, attrs: str, R=None, P=None, et="f32",
                  reducer="add"):
    header = "HloModule m"
    if R is not None:
        header += f", replica_count={R}"
    if P is not None:
        header += f", num_partitions={P}"
    to_apply = ""
    if opcode in ("all-reduce", "reduce-scatter"):
        to_apply = f"red {{\n  {REDUCERS[reducer].format(t=et)}\n}}\n"
        attrs += ", to_apply=red"
    return parse_hlo(f"""{header}
{to_apply}
ENTRY e {{
  x = {et}[{in_shape}] parameter(0)
  ROOT c = {et}[{out_shape}] {opcode}(x), {attrs}
}}""")


def device_inputs(n, shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return [rng.integers(0, 2, size=shape).astype(np.bool_) for _ in range(n)]
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-5, 6, size=shape).astype(dtype) for _ in range(n)]
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def run_and_compare(module, inputs, expected, R, P, exact=False):
    outs = execute_replicated(module, [[x] for x in inputs], num_replicas=R, num_partitions=P)
    assert len(outs) == R * P
    for d, (out, want) in enumerate(zip(outs, expected)):
        assert out[0].shape == want.shape, f"device {d}"
        assert out[0].dtype == want.dtype, f"device {d}"
        if exact:
            np.testing.assert_array_equal(out[0], want, err_msg=f"device {d}")
        else:
            np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"device {d}")
    return outs


# ---- all-reduce -------------------------------------------------------------------------------

@pytest.mark.parametrize("R,groups", [
    (2, "{}"), (4, "{}"), (8, "{}"), (4, "{{0,1},{2,3}}"), (4, "{{0,2},{1,3}}"),
    (8, "{{0,4},{1,5},{2,6},{3,7}}"), (8, "{{1,3,2,0},{4,5,6,7}}"),
    (8, "[2,4]<=[8]"), (8, "[2,4]<=[4,2]T(1,0)"), (8, "[4,2]<=[2,2,2]T(2,1,0)"),
    (4, "{{0},{1},{2},{3}}"), (6, "{{0,1,2},{3,4},{5}}"),
])
def test_all_reduce_groups(R, groups):
    m = one_op_module("all-reduce", "3,4", "3,4", f"replica_groups={groups}", R=R)
    xs = device_inputs(R, (3, 4), seed=R)
    run_and_compare(m, xs, model("all-reduce", {"replica_groups": groups}, xs, R, 1), R, 1)


@pytest.mark.parametrize("reducer,et,dtype", [
    ("maximum", "f32", np.float32), ("multiply", "s32", np.int32), ("add", "s32", np.int32),
    ("and", "pred", np.bool_), ("or", "pred", np.bool_), ("maximum", "u8", np.uint8),
])
def test_all_reduce_reducers(reducer, et, dtype):
    R = 4
    m = one_op_module("all-reduce", "5", "5", "replica_groups={}", R=R, et=et, reducer=reducer)
    xs = device_inputs(R, (5,), dtype=dtype, seed=3)
    want = model("all-reduce", {}, xs, R, 1, reducer=reducer)
    run_and_compare(m, xs, want, R, 1, exact=True)


def test_all_reduce_bf16_rounds_every_step():
    """The computation is applied in group order in bf16, as XLA applies to_apply."""
    import ml_dtypes
    m = one_op_module("all-reduce", "1", "1", "replica_groups={}", R=3, et="bf16")
    bf = ml_dtypes.bfloat16
    xs = [np.array([256.0], bf), np.array([1.0], bf), np.array([1.0], bf)]
    outs = execute_replicated(m, [[x] for x in xs])
    # (256 + 1) rounds to 256 in bf16, then + 1 rounds to 256 again
    assert all(float(o[0][0]) == 256.0 for o in outs)


def test_all_reduce_tuple_and_channel_modes():
    """Two operands; channel_id without use_global_device_ids groups replicas across all
    partitions (kCrossReplicaAndPartition)."""
    R, P = 2, 2
    m = parse_hlo(f"""HloModule m, replica_count={R}, num_partitions={P}
red {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[4] parameter(0)
  y = f32[2,2] parameter(1)
  ROOT c = (f32[4], f32[2,2]) all-reduce(x, y), channel_id=1, replica_groups={{{{0}},{{1}}}}, to_apply=red
}}""")
    xs = device_inputs(4, (4,), seed=1)
    ys = device_inputs(4, (2, 2), seed=2)
    outs = execute_replicated(m, [[x, y] for x, y in zip(xs, ys)])
    attrs = {"channel_id": "1", "replica_groups": "{{0},{1}}"}
    for want_list, i, inputs in ((model("all-reduce", attrs, xs, R, P), 0, xs),
                                 (model("all-reduce", attrs, ys, R, P), 1, ys)):
        for d in range(4):
            np.testing.assert_allclose(outs[d][i], want_list[d], rtol=1e-6)
    # replica r's group is both partitions of replica r only
    np.testing.assert_allclose(outs[0][0], xs[0] + xs[1], rtol=1e-6)


def test_all_reduce_global_device_ids():
    R, P = 2, 4
    attrs = "channel_id=1, replica_groups={{0,2,4,6},{1,3,5,7}}, use_global_device_ids=true"
    m = one_op_module("all-reduce", "3", "3", attrs, R=R, P=P)
    xs = device_inputs(8, (3,), seed=5)
    want = model("all-reduce", {"channel_id": "1", "use_global_device_ids": "true",
                                "replica_groups": "{{0,2,4,6},{1,3,5,7}}"}, xs, R, P)
    run_and_compare(m, xs, want, R, P)
    np.testing.assert_allclose(want[3], xs[1] + xs[3] + xs[5] + xs[7], rtol=1e-5)


def test_all_reduce_cross_replica_with_partitions():
    """No channel_id: replica groups within each partition."""
    R, P = 4, 2
    m = one_op_module("all-reduce", "3", "3", "replica_groups={{0,1},{2,3}}", R=R, P=P)
    xs = device_inputs(8, (3,), seed=6)
    want = model("all-reduce", {"replica_groups": "{{0,1},{2,3}}"}, xs, R, P)
    run_and_compare(m, xs, want, R, P)
    np.testing.assert_allclose(want[1], xs[1] + xs[3], rtol=1e-5)  # replica 0/1, partition 1


# ---- all-gather, reduce-scatter, all-to-all, broadcast -------------------------------------------

@pytest.mark.parametrize("R,groups,dim,in_shape,out_shape", [
    (2, "{}", 0, "2,3", "4,3"), (4, "{}", 1, "2,3", "2,12"),
    (8, "[2,4]<=[8]", 0, "2,3", "8,3"), (8, "[2,4]<=[4,2]T(1,0)", 1, "2,3", "2,12"),
    (4, "{{3,1},{0,2}}", 0, "5", "10"),
])
def test_all_gather(R, groups, dim, in_shape, out_shape):
    m = one_op_module("all-gather", in_shape, out_shape,
                      f"replica_groups={groups}, dimensions={{{dim}}}", R=R)
    shape = tuple(int(x) for x in in_shape.split(","))
    xs = device_inputs(R, shape, seed=7)
    want = model("all-gather", {"replica_groups": groups, "dimensions": f"{{{dim}}}"}, xs, R, 1)
    run_and_compare(m, xs, want, R, 1, exact=True)


def test_all_gather_partitions_flattened_ids():
    R, P = 2, 2
    attrs = "channel_id=3, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, " \
            "dimensions={0}"
    m = one_op_module("all-gather", "2", "4", attrs, R=R, P=P)
    xs = device_inputs(4, (2,), seed=8)
    outs = run_and_compare(m, xs, model("all-gather", {
        "channel_id": "3", "use_global_device_ids": "true",
        "replica_groups": "{{0,3},{1,2}}", "dimensions": "{0}"}, xs, R, P), R, P, exact=True)
    np.testing.assert_array_equal(outs[3][0], np.concatenate([xs[0], xs[3]]))


@pytest.mark.parametrize("R,groups,dim,in_shape,out_shape", [
    (2, "{}", 0, "4,3", "2,3"), (4, "{}", 1, "2,8", "2,2"),
    (8, "[2,4]<=[4,2]T(1,0)", 0, "8", "2"), (4, "{{0,1},{2,3}}", 0, "6,2", "3,2"),
])
def test_reduce_scatter(R, groups, dim, in_shape, out_shape):
    m = one_op_module("reduce-scatter", in_shape, out_shape,
                      f"replica_groups={groups}, dimensions={{{dim}}}", R=R)
    shape = tuple(int(x) for x in in_shape.split(","))
    xs = device_inputs(R, shape, seed=9)
    want = model("reduce-scatter", {"replica_groups": groups, "dimensions": f"{{{dim}}}"},
                 xs, R, 1)
    run_and_compare(m, xs, want, R, 1)


@pytest.mark.parametrize("R,groups,dim,shape", [
    (2, "{}", 0, "4,3"), (4, "{}", 1, "2,8"), (8, "[2,4]<=[8]", 0, "8,2"),
])
def test_all_to_all_array(R, groups, dim, shape):
    m = one_op_module("all-to-all", shape, shape,
                      f"replica_groups={groups}, dimensions={{{dim}}}", R=R)
    xs = device_inputs(R, tuple(int(x) for x in shape.split(",")), seed=10)
    want = model("all-to-all", {"replica_groups": groups, "dimensions": f"{{{dim}}}"}, xs, R, 1)
    run_and_compare(m, xs, want, R, 1, exact=True)


def test_all_to_all_tuple_form():
    m = parse_hlo("""HloModule m, replica_count=3
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  c = f32[2] parameter(2)
  ROOT t = (f32[2], f32[2], f32[2]) all-to-all(a, b, c), replica_groups={{0,1,2}}
}""")
    args = [[np.full(2, 10 * d + i, np.float32) for i in range(3)] for d in range(3)]
    outs = execute_replicated(m, args)
    for d in range(3):
        for j in range(3):  # result j on device d = operand d of device j
            np.testing.assert_array_equal(outs[d][j], args[j][d])


def test_all_to_all_cross_partition():
    """channel_id on all-to-all: the groups are partition ids within each replica."""
    R, P = 2, 2
    m = one_op_module("all-to-all", "4", "4", "channel_id=1, replica_groups={{0,1}}, "
                      "dimensions={0}", R=R, P=P)
    xs = device_inputs(4, (4,), seed=11)
    want = model("all-to-all", {"channel_id": "1", "replica_groups": "{{0,1}}",
                                "dimensions": "{0}"}, xs, R, P)
    run_and_compare(m, xs, want, R, P, exact=True)
    np.testing.assert_array_equal(want[2], np.concatenate([xs[2][:2], xs[3][:2]]))


@pytest.mark.parametrize("groups", ["{{0,1,2,3}}", "{{2,0},{3,1}}", "[2,2]<=[2,2]T(1,0)"])
def test_collective_broadcast(groups):
    m = one_op_module("collective-broadcast", "3", "3", f"replica_groups={groups}", R=4)
    xs = device_inputs(4, (3,), seed=12)
    run_and_compare(m, xs, model("collective-broadcast", {"replica_groups": groups}, xs, 4, 1),
                    4, 1, exact=True)


# ---- collective-permute -------------------------------------------------------------------------

@pytest.mark.parametrize("R,pairs", [
    (2, [(0, 1), (1, 0)]), (4, [(0, 1), (1, 2), (2, 3), (3, 0)]),
    (8, [(i, (i + 3) % 8) for i in range(8)]), (4, [(0, 2), (3, 1)]),
])
def test_collective_permute(R, pairs):
    text = "{" + ",".join(f"{{{s},{t}}}" for s, t in pairs) + "}"
    m = one_op_module("collective-permute", "3", "3", f"source_target_pairs={text}", R=R)
    xs = device_inputs(R, (3,), seed=13)
    want = [np.zeros(3, np.float32) for _ in range(R)]
    for s, t in pairs:
        want[t] = xs[s]
    run_and_compare(m, xs, want, R, 1, exact=True)


def test_collective_permute_channel_is_cross_partition():
    R, P = 2, 2
    m = one_op_module("collective-permute", "2", "2",
                      "channel_id=1, source_target_pairs={{0,1}}", R=R, P=P)
    xs = device_inputs(4, (2,), seed=14)
    zero = np.zeros(2, np.float32)
    # partition 0 -> partition 1 within each replica
    run_and_compare(m, xs, [zero, xs[0], zero, xs[2]], R, P, exact=True)


# ---- async forms, ids, loops ----------------------------------------------------------------------

def test_start_done_forms():
    m = parse_hlo("""HloModule m, replica_count=4
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  ars = f32[2] all-reduce-start(x), replica_groups={{0,1},{2,3}}, to_apply=red
  ard = f32[2] all-reduce-done(ars)
  ags = (f32[2], f32[8]) all-gather-start(x), replica_groups={}, dimensions={0}
  agd = f32[8] all-gather-done(ags)
  cps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,3},{3,0}}
  cpd = f32[2] collective-permute-done(cps)
  ROOT t = (f32[2], f32[8], f32[2]) tuple(ard, agd, cpd)
}""")
    xs = device_inputs(4, (2,), seed=15)
    outs = execute_replicated(m, [[x] for x in xs])
    for d in range(4):
        g = [0, 1] if d < 2 else [2, 3]
        np.testing.assert_allclose(outs[d][0], xs[g[0]] + xs[g[1]], rtol=1e-6)
        np.testing.assert_array_equal(outs[d][1], np.concatenate(xs))
    np.testing.assert_array_equal(outs[0][2], xs[3])
    np.testing.assert_array_equal(outs[3][2], xs[0])
    np.testing.assert_array_equal(outs[1][2], np.zeros(2, np.float32))


def test_async_wrapped_collective():
    m = parse_hlo("""HloModule m, replica_count=2
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
wrapped {
  p = f32[3] parameter(0)
  ROOT ar = f32[3] all-reduce(p), replica_groups={}, to_apply=red
}
ENTRY e {
  x = f32[3] parameter(0)
  s = ((f32[3]), f32[3], u32[]) async-start(x), calls=wrapped
  ROOT d = f32[3] async-done(s), calls=wrapped
}""")
    xs = device_inputs(2, (3,), seed=16)
    outs = execute_replicated(m, [[x] for x in xs])
    for o in outs:
        np.testing.assert_allclose(o[0], xs[0] + xs[1], rtol=1e-6)


def test_replica_and_partition_ids():
    m = parse_hlo("""HloModule m, replica_count=2, num_partitions=4
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}""")
    outs = execute_replicated(m, [[] for _ in range(8)])
    assert [(int(o[0]), int(o[1])) for o in outs] == [(d // 4, d % 4) for d in range(8)]


def test_collectives_in_a_while_loop_meet_per_iteration():
    """Each iteration's all-reduce is a separate meeting (keyed by execution count)."""
    m = parse_hlo("""HloModule m, replica_count=4
red {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}
cond {
  t = (s32[], s32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  t = (s32[], s32[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = s32[2] get-tuple-element(t), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ar = s32[2] all-reduce(v), replica_groups={}, to_apply=red
  ROOT o = (s32[], s32[2]) tuple(i1, ar)
}
ENTRY e {
  x = s32[2] parameter(0)
  z = s32[] constant(0)
  t = (s32[], s32[2]) tuple(z, x)
  w = (s32[], s32[2]) while(t), condition=cond, body=body
  ROOT v = s32[2] get-tuple-element(w), index=1
}""")
    xs = [np.array([d, 1], np.int32) for d in range(4)]
    outs = execute_replicated(m, [[x] for x in xs])
    # each all-reduce multiplies the replicated value by 4 after the first sum
    want = (np.array([6, 4]) * 16).astype(np.int32)
    for o in outs:
        np.testing.assert_array_equal(o[0], want)


def test_replica_dependent_control_flow_that_meets():
    """Replicas take different branches but both branches run the same collective."""
    m = parse_hlo("""HloModule m, replica_count=2
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[2] parameter(0)
  rid = u32[] replica-id()
  zero = u32[] constant(0)
  is0 = pred[] compare(rid, zero), direction=EQ
  neg = f32[2] negate(x)
  pick = f32[2] select(is0, x, neg)
  ROOT ar = f32[2] all-reduce(pick), replica_groups={}, to_apply=red
}""")
    xs = device_inputs(2, (2,), seed=17)
    outs = execute_replicated(m, [[x] for x in xs])
    for o in outs:
        np.testing.assert_allclose(o[0], xs[0] - xs[1], rtol=1e-6)


def test_single_device_default_unchanged():
    m = one_op_module("all-reduce", "3", "3", "replica_groups={}")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(execute(m, [x])[0], x)
    m2 = one_op_module("all-reduce", "3", "3", "replica_groups={{0,1}}")
    with pytest.raises(UnsupportedError, match="execute_replicated"):
        execute(m2, [x])
    rid = parse_hlo("HloModule m\nENTRY e {\n  ROOT r = u32[] replica-id()\n}")
    assert int(execute(rid, [])[0]) == 0


# ---- errors ------------------------------------------------------------------------------------

_BRANCHES = """HloModule m, replica_count=2
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
b0 {
  x = f32[4] parameter(0)
  ROOT ar_a = f32[4] all-reduce(x), replica_groups={}, to_apply=red
}
b1 {
  x = f32[4] parameter(0)
  ROOT ar_b = f32[4] %s
}
ENTRY e {
  p = f32[4] parameter(0)
  rid = u32[] replica-id()
  z = u32[] constant(0)
  pr = pred[] compare(rid, z), direction=EQ
  ROOT c = f32[4] conditional(pr, p, p), true_computation=b0, false_computation=b1
}"""


def test_deadlock_replicas_in_different_collectives():
    m = parse_hlo(_BRANCHES % "all-reduce(x), replica_groups={}, to_apply=red")
    with pytest.raises(CollectiveDeadlockError) as e:
        execute_replicated(m, [[np.zeros(4, np.float32)]] * 2, timeout=60)
    msg = str(e.value)
    assert "%ar_a" in msg and "%ar_b" in msg and "replica 1" in msg
    assert isinstance(e.value, HloError)


def test_deadlock_replica_finished_early():
    m = parse_hlo(_BRANCHES % "negate(x)")
    with pytest.raises(CollectiveDeadlockError, match="replica 1 finished"):
        execute_replicated(m, [[np.zeros(4, np.float32)]] * 2, timeout=60)


def test_timeout_when_a_peer_computes_too_long():
    """Replica 1 runs a long loop before the all-reduce; replica 0's wait times out."""
    m = parse_hlo("""HloModule m, replica_count=2
red {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}
cond {
  i = s32[] parameter(0)
  n = s32[] constant(100000)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  i = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT i1 = s32[] add(i, one)
}
ENTRY e {
  x = s32[] parameter(0)
  w = s32[] while(x), condition=cond, body=body
  ROOT ar = s32[] all-reduce(w), replica_groups={}, to_apply=red
}""")
    args = [[np.int32(100000)], [np.int32(0)]]  # replica 0 skips the loop
    with pytest.raises(CollectiveTimeoutError, match="waited more than"):
        execute_replicated(m, args, timeout=0.05)


@pytest.mark.parametrize("groups,match", [
    ("{{0,1}}", "replica 2 is in no replica group"),
    ("{{0,1},{1,2,3}}", "appears more than once"),
    ("{{0,1},{2,5}}", "out of range"),
])
def test_bad_groups_are_replica_group_errors(groups, match):
    m = one_op_module("all-reduce", "2", "2", f"replica_groups={groups}", R=4)
    with pytest.raises(ReplicaGroupError, match=match):
        execute_replicated(m, [[np.zeros(2, np.float32)]] * 4)


def test_non_uniform_groups_for_all_gather():
    m = one_op_module("all-gather", "2", "4", "replica_groups={{0,1},{2}}, dimensions={0}",
                      R=3)
    with pytest.raises(ReplicaGroupError, match="one size"):
        execute_replicated(m, [[np.zeros(2, np.float32)]] * 3)


def test_permute_to_the_same_target_twice():
    m = one_op_module("collective-permute", "2", "2",
                      "source_target_pairs={{0,1},{2,1}}", R=3)
    with pytest.raises(ReplicaGroupError, match="twice"):
        execute_replicated(m, [[np.zeros(2, np.float32)]] * 3)


def test_device_counts_from_header_and_arguments():
    m = one_op_module("all-reduce", "2", "2", "replica_groups={}", R=4)
    with pytest.raises(HloError, match="replica_count=4"):
        execute_replicated(m, [[np.zeros(2, np.float32)]] * 2, num_replicas=2)
    with pytest.raises(HloError, match="need 4 argument lists"):
        execute_replicated(m, [[np.zeros(2, np.float32)]] * 2)
    m2 = one_op_module("all-reduce", "2", "2", "replica_groups={}")
    xs = device_inputs(3, (2,), seed=18)
    outs = execute_replicated(m2, [[x] for x in xs], num_replicas=3)
    np.testing.assert_allclose(outs[2][0], xs[0] + xs[1] + xs[2], rtol=1e-6)


def test_argument_errors_name_the_device():
    m = one_op_module("all-reduce", "2", "2", "replica_groups={}", R=2)
    with pytest.raises(HloError, match="replica 1: argument 0"):
        execute_replicated(m, [[np.zeros(2, np.float32)], [np.zeros(3, np.float32)]])


def test_errors_are_collective_errors():
    assert issubclass(ReplicaGroupError, CollectiveError)
    assert issubclass(CollectiveDeadlockError, CollectiveError)
    assert issubclass(CollectiveError, HloError)
