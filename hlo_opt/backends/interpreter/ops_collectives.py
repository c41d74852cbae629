"""Collectives: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
collective-broadcast, ragged-all-to-all, their -start forms, replica-id and partition-id.

One device (a plain :class:`Interpreter`): replica-id and partition-id are 0, and a
collective whose groups hold only that device is an identity (all-reduce of one value is
the value, all-gather of one shard is the shard, ...).  A collective that needs other
devices' data is an UnsupportedError, never a made-up answer.

Several devices (``replicas.py`` gives each device's evaluator a ``device`` context):
each collective finds its participants from ``replica_groups`` and the group mode XLA
derives from ``channel_id`` / ``use_global_device_ids`` (``hlo_opt/ir/replica_groups.py``),
exchanges its operands with them and computes its own result:

* all-reduce: ``to_apply`` folded over the participants' operands in group order;
* all-gather: the operands concatenated along ``dimensions`` in group order;
* reduce-scatter: the all-reduce split along ``dimensions``; participant k keeps piece k;
* all-to-all: array form: piece k of every participant, concatenated in group order;
  tuple form: result j is operand k of participant j;
* collective-broadcast: the first participant's operand;
* collective-permute: the operand of the source paired with this device (replica ids
  without ``channel_id``, partition ids with one), zeros when none is.

The -done forms are in ``control.py``.
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import UnsupportedError
from ...ir.replica_groups import (CROSS_PARTITION, ReplicaGroupsError, device_groups,
                                  group_mode, parse_source_target_pairs)
from .registry import register_fast
from .values import zeros_for

_IOTA_GROUPS = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")
_GROUP = re.compile(r"\{([^{}]*)\}")

_COLLECTIVES = ("all-reduce", "all-reduce-start", "collective-broadcast", "all-to-all",
                "reduce-scatter", "all-gather", "all-gather-start")


# ---- one device ---------------------------------------------------------------------------
def group_size(inst) -> int:
    """Size of the largest replica group of a collective (1 = this device alone)."""
    text = inst.attrs.get("replica_groups", "").strip()
    module = inst.parent.module if inst.parent is not None else None
    header = module.header_attrs if module is not None else {}
    m = _IOTA_GROUPS.match(text)
    if m:
        return int(m.group(2))
    groups = [g for g in _GROUP.findall(text[1:-1] if text.startswith("{") else text)]
    sizes = [len([x for x in g.split(",") if x.strip()]) for g in groups]
    sizes = [s for s in sizes if s]
    if sizes:
        return max(sizes)
    replicas = int(header.get("replica_count", "1") or 1)
    partitions = int(header.get("num_partitions", "1") or 1)
    if inst.attrs.get("use_global_device_ids", "") == "true":
        return replicas * partitions
    if "channel_id" in inst.attrs and inst.opcode != "all-reduce":
        return partitions
    return replicas


def _single_device(inst):
    n = group_size(inst)
    if n != 1:
        raise UnsupportedError(
            f"{inst.opcode} over replica groups of {n} devices needs {n} replicas; the "
            "interpreter runs one (run it with execute_replicated)")


def _device(ctx):
    return getattr(ctx, "device", None)


@register_fast("replica-id", "partition-id", with_ctx=True)
def _make_device_id(inst, ctx):
    dt = inst.shape.dtype
    dev = _device(ctx)
    value = 0 if dev is None else (dev.replica_id if inst.opcode == "replica-id"
                                   else dev.partition_id)
    return lambda: np.array(value, dtype=dt)


@register_fast(*_COLLECTIVES, with_ctx=True)
def _make_collective(inst, ctx):
    dev = _device(ctx)
    if dev is not None:
        return _multi_device(inst, ctx, dev)
    _single_device(inst)
    op = inst.opcode
    shape = inst.shape
    if op == "all-gather-start" and shape.is_tuple() and len(inst.operands) == 1 \
            and len(shape.tuple_shapes) == 2 and not shape.tuple_shapes[0].is_tuple():
        return lambda x: (x, x)  # (operand, result) pair
    if shape.is_tuple():
        if len(shape.tuple_shapes) != len(inst.operands):
            raise UnsupportedError(f"{op} result {shape.to_text()} does not match "
                                   f"{len(inst.operands)} operands")
        return lambda *xs: xs
    return lambda x: x


@register_fast("collective-permute", "collective-permute-start", with_ctx=True)
def _make_collective_permute(inst, ctx):
    if len(inst.operands) != 1:
        raise UnsupportedError("collective-permute with in-place buffers (4 operands) is "
                               "not supported")
    dev = _device(ctx)
    if dev is not None:
        return _multi_device_permute(inst, dev)
    text = inst.attrs.get("source_target_pairs", "{}")
    pairs = [tuple(int(v) for v in g.split(",")) for g in _GROUP.findall(text[1:-1])
             if g.strip()]
    sources = [s for s, t in pairs if t == 0]
    if sources and sources != [0]:
        raise UnsupportedError(f"collective-permute sends replica {sources[0]}'s data to "
                               "replica 0; the interpreter runs one replica (run it with "
                               "execute_replicated)")
    keep = bool(sources)

    def permute(x):
        return x if keep else np.zeros(np.shape(x), dtype=x.dtype)
    return _permute_result(inst, permute)


def _permute_result(inst, compute):
    """collective-permute-start returns (operand, result, context...)."""
    if inst.opcode == "collective-permute-start" and inst.shape.is_tuple():
        extra = tuple(zeros_for(s) for s in inst.shape.tuple_shapes[2:])
        return lambda x: (x, compute(x)) + extra
    return compute


@register_fast("ragged-all-to-all", with_ctx=True)
def _make_ragged_all_to_all(inst, ctx):
    """Operands: input, output, input_offsets, send_sizes, output_offsets, recv_sizes.
    Update j sends ``input[input_offsets[j]:+send_sizes[j]]`` (along dim 0) to the j-th
    participant, which writes it at ``output_offsets[j]`` of its output."""
    if len(inst.operands) != 6:
        raise UnsupportedError("ragged-all-to-all needs 6 operands")
    dev = _device(ctx)
    if dev is not None:
        return _multi_device_ragged(inst, dev)
    _single_device(inst)

    def ragged(x, out, in_off, send, out_off, recv):
        result = np.array(out, copy=True)
        for a, n, b in zip(np.asarray(in_off).reshape(-1), np.asarray(send).reshape(-1),
                           np.asarray(out_off).reshape(-1)):
            a, n, b = int(a), int(n), int(b)
            if n > 0:
                result[b:b + n] = x[a:a + n]
        return result
    return ragged


# ---- several devices ------------------------------------------------------------------------
def _participants(inst, dev) -> tuple[tuple[int, ...], int]:
    """(this device's group in order, its index there)."""
    from .replicas import ReplicaGroupError
    try:
        groups = device_groups(inst, dev.num_replicas, dev.num_partitions)
    except ReplicaGroupsError as e:
        raise dev.error(ReplicaGroupError(str(e))) from None
    mine = [g for g in groups if dev.device_id in g]
    if not mine:
        raise dev.error(ReplicaGroupError(
            f"{dev.rendezvous.device_name(dev.device_id)} is in no replica group of "
            f"{inst.opcode} (replica_groups={inst.attrs.get('replica_groups', '{}')}, "
            f"{group_mode(inst)})"))
    group = mine[0]
    if len(mine) > 1 or group.count(dev.device_id) > 1:
        raise dev.error(ReplicaGroupError(
            f"{dev.rendezvous.device_name(dev.device_id)} appears more than once in the "
            f"replica groups of {inst.opcode} "
            f"(replica_groups={inst.attrs.get('replica_groups', '{}')})"))
    uniform = inst.opcode not in ("all-reduce", "all-reduce-start", "collective-broadcast")
    if uniform and any(len(g) != len(group) for g in groups):
        raise dev.error(ReplicaGroupError(
            f"{inst.opcode} needs replica groups of one size, has sizes "
            f"{sorted({len(g) for g in groups})}"))
    return tuple(group), group.index(dev.device_id)


def _checked_exchange(inst, dev, participants, value) -> list:
    values = dev.exchange(inst, participants, value)
    first = _shapes(values[0])
    for d, v in zip(participants, values):
        if _shapes(v) != first:
            from .replicas import CollectiveError
            name = dev.rendezvous.device_name
            raise dev.error(CollectiveError(
                f"{inst.opcode} operands differ between devices: {name(participants[0])} "
                f"has {first}, {name(d)} has {_shapes(v)}"))
    return values


def _shapes(value):
    if isinstance(value, tuple):
        return tuple(_shapes(v) for v in value)
    return (np.asarray(value).dtype.str, np.shape(value))


def _reducer(inst, ctx):
    """Fold a list of same-shaped arrays with ``to_apply`` in list order."""
    comp = inst.to_apply
    if comp is None or len(comp.parameters) != 2:
        raise UnsupportedError(f"{inst.opcode} needs a binary to_apply computation")
    batchable = ctx.batchable(comp)

    def reduce(arrays, shape):
        acc = arrays[0]
        for a in arrays[1:]:
            if batchable:
                acc = ctx.call_batched(comp, [acc, a])
            else:
                out = np.empty(shape.dims, dtype=shape.dtype)
                for idx in np.ndindex(*shape.dims):
                    out[idx] = ctx.call(comp, [np.asarray(acc)[idx], np.asarray(a)[idx]])
                acc = out
        return np.array(np.broadcast_to(acc, shape.dims), dtype=shape.dtype)
    return reduce


def _leaf_shapes(inst, start: bool):
    shape = inst.shape
    if start:  # all-gather-start: (operands, results)
        shape = shape.tuple_shapes[1]
    return list(shape.tuple_shapes) if shape.is_tuple() else [shape]


def _multi_device(inst, ctx, dev):
    op = inst.opcode
    participants, k = _participants(inst, dev)
    n = len(participants)
    start = op == "all-gather-start"
    out_shapes = _leaf_shapes(inst, start)
    tuple_out = (inst.shape.tuple_shapes[1] if start else inst.shape).is_tuple()
    dims = inst.attr("dimensions", ())

    def pack(outs):
        return tuple(outs) if tuple_out else outs[0]

    if op in ("all-reduce", "all-reduce-start", "reduce-scatter"):
        reduce = _reducer(inst, ctx)
        if op == "reduce-scatter":
            d = _one_dim(inst, dims)

        def all_reduce(*xs):
            vals = _checked_exchange(inst, dev, participants, xs)
            outs = []
            for i, s in enumerate(out_shapes):
                arrays = [v[i] for v in vals]
                if op == "reduce-scatter":
                    full_shape = inst.operands[i].shape
                    total = reduce(arrays, full_shape)
                    piece = np.split(total, n, axis=d)[k]
                    outs.append(np.ascontiguousarray(piece))
                else:
                    outs.append(reduce(arrays, s))
            return pack(outs)
        return all_reduce

    if op in ("all-gather", "all-gather-start"):
        d = _one_dim(inst, dims)

        def all_gather(*xs):
            vals = _checked_exchange(inst, dev, participants, xs)
            outs = [np.concatenate([np.asarray(v[i]) for v in vals], axis=d)
                    for i in range(len(xs))]
            if start:
                return (xs if len(xs) > 1 else xs[0], pack(outs))
            return pack(outs)
        return all_gather

    if op == "all-to-all":
        if "dimensions" in inst.attrs:
            d = _one_dim(inst, dims)

            def all_to_all_array(x):
                vals = _checked_exchange(inst, dev, participants, (x,))
                pieces = [np.split(np.asarray(v[0]), n, axis=d)[k] for v in vals]
                return np.concatenate(pieces, axis=d)
            return all_to_all_array
        if len(inst.operands) != n:
            from .replicas import ReplicaGroupError
            raise dev.error(ReplicaGroupError(
                f"tuple all-to-all has {len(inst.operands)} operands for {n} participants"))

        def all_to_all_tuple(*xs):
            vals = _checked_exchange(inst, dev, participants, xs)
            return tuple(np.array(v[k], copy=True) for v in vals)
        return all_to_all_tuple

    if op == "collective-broadcast":
        def broadcast(*xs):
            vals = _checked_exchange(inst, dev, participants, xs)
            return pack([np.array(x, copy=True) for x in vals[0]])
        return broadcast
    raise UnsupportedError(f"{op} is not a collective the interpreter knows")


def _one_dim(inst, dims) -> int:
    if len(dims) != 1:
        raise UnsupportedError(f"{inst.opcode} needs one dimension, has {list(dims)}")
    return dims[0]


def _multi_device_permute(inst, dev):
    from .replicas import ReplicaGroupError
    R, P = dev.num_replicas, dev.num_partitions
    if group_mode(inst) == CROSS_PARTITION:  # channel_id: partition ids, same replica
        scope = tuple(dev.replica_id * P + p for p in range(P))
        me, what = dev.partition_id, "partition"
    else:
        scope = tuple(r * P + dev.partition_id for r in range(R))
        me, what = dev.replica_id, "replica"
    try:
        pairs = parse_source_target_pairs(inst.attrs.get("source_target_pairs"))
    except ReplicaGroupsError as e:
        raise dev.error(ReplicaGroupError(f"%{inst.name}: {e}")) from None
    targets = set()
    for s, t in pairs:
        for i in (s, t):
            if not 0 <= i < len(scope):
                raise dev.error(ReplicaGroupError(
                    f"collective-permute pair {{{s},{t}}} names {what} {i}, but the run "
                    f"has {len(scope)} {what}(s)"))
        if t in targets:
            raise dev.error(ReplicaGroupError(
                f"collective-permute sends twice to {what} {t}"))
        targets.add(t)
    source = next((s for s, t in pairs if t == me), None)

    def permute(x):
        vals = _checked_exchange(inst, dev, scope, x)
        if source is None:
            return np.zeros(np.shape(x), dtype=np.asarray(x).dtype)
        return np.array(vals[source], copy=True)
    return _permute_result(inst, permute)


def _multi_device_ragged(inst, dev):
    participants, k = _participants(inst, dev)
    n = len(participants)

    def ragged(x, out, in_off, send, out_off, recv):
        offsets = [np.asarray(a).reshape(-1) for a in (in_off, send, out_off)]
        if any(len(a) != n for a in offsets):
            raise UnsupportedError(f"ragged-all-to-all with {len(offsets[0])} updates for "
                                   f"{n} participants: only one update per participant "
                                   "is supported")
        vals = dev.exchange(inst, participants, (x, *offsets))
        result = np.array(out, copy=True)
        for sx, s_in, s_send, s_out in vals:
            a, size, b = int(s_in[k]), int(s_send[k]), int(s_out[k])
            if size > 0:
                result[b:b + size] = np.asarray(sx)[a:a + size]
        return result
    return ragged
