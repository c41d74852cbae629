"""Collectives for a single replica and partition.

The interpreter is one device: replica-id and partition-id are 0, and a collective whose
groups hold only that device is an identity (all-reduce of one value is the value,
all-gather of one shard is the shard, ...).  A collective that needs other devices'
data (a group of more than one, a permute from another replica) is an UnsupportedError,
never a made-up answer.
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import UnsupportedError
from .registry import register_fast

_IOTA_GROUPS = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")
_GROUP = re.compile(r"\{([^{}]*)\}")


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
            "interpreter runs one")


@register_fast("replica-id", "partition-id")
def _make_device_id(inst):
    dt = inst.shape.dtype
    return lambda: np.zeros((), dtype=dt)


@register_fast("all-reduce", "all-reduce-start", "collective-broadcast", "all-to-all",
               "reduce-scatter", "all-gather", "all-gather-start")
def _make_identity_collective(inst):
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


@register_fast("collective-permute", "collective-permute-start")
def _make_collective_permute(inst):
    text = inst.attrs.get("source_target_pairs", "{}")
    pairs = [tuple(int(v) for v in g.split(",")) for g in _GROUP.findall(text[1:-1])
             if g.strip()]
    sources = [s for s, t in pairs if t == 0]
    if len(inst.operands) != 1:
        raise UnsupportedError("collective-permute with in-place buffers (4 operands) is "
                               "not supported")
    if sources and sources != [0]:
        raise UnsupportedError(f"collective-permute sends replica {sources[0]}'s data to "
                               "replica 0; the interpreter runs one replica")
    keep = bool(sources)
    start = inst.opcode == "collective-permute-start"
    extra = ()
    if start and inst.shape.is_tuple():
        from .values import zeros_for
        extra = tuple(zeros_for(s) for s in inst.shape.tuple_shapes[2:])

    def permute(x):
        y = x if keep else np.zeros(np.shape(x), dtype=x.dtype)
        return (x, y) + extra if start and inst.shape.is_tuple() else y
    return permute


@register_fast("ragged-all-to-all")
def _make_ragged_all_to_all(inst):
    """One replica: every update goes to itself.  Operands: input, output, input_offsets,
    send_sizes, output_offsets, recv_sizes; update k copies
    ``input[in_off[k]:+size[k]]`` to ``output[out_off[k]:+size[k]]`` along dim 0."""
    _single_device(inst)
    if len(inst.operands) != 6:
        raise UnsupportedError("ragged-all-to-all needs 6 operands")

    def ragged(x, out, in_off, send, out_off, recv):
        result = np.array(out, copy=True)
        for a, n, b in zip(np.asarray(in_off).reshape(-1), np.asarray(send).reshape(-1),
                           np.asarray(out_off).reshape(-1)):
            a, n, b = int(a), int(n), int(b)
            if n > 0:
                result[b:b + n] = x[a:a + n]
        return result
    return ragged
