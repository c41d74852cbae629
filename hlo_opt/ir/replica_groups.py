"""Replica groups and the device groups of a collective (XLA's CollectiveDeviceList,
``GetCollectiveOpGroupMode`` and ``GetParticipatingFlattenedIdGroups``).

``replica_groups`` is written either as a list ``{{0,1},{2,3}}`` (``{}``: one group of
everybody) or in the iota form ``[G,S]<=[d0,d1,...]T(p0,p1,...)``: the ids
``iota(prod(d)).reshape(d).transpose(p).reshape(G, S)``.  Pure Python: passes and the
interpreter share it, and nothing here imports numpy.

Device ids are XLA's *flattened ids*, ``replica_id * num_partitions + partition_id``.
"""
from __future__ import annotations

import functools
import math
import re

from ..errors import HloError

CROSS_REPLICA = "kCrossReplica"
CROSS_PARTITION = "kCrossPartition"
CROSS_REPLICA_AND_PARTITION = "kCrossReplicaAndPartition"
FLATTENED_ID = "kFlattenedID"

# Opcodes whose instruction class carries use_global_device_ids (HloAllGatherInstruction,
# HloAllReduceInstructionBase); for the others a channel_id alone means cross-partition.
_HAS_GLOBAL_IDS = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter",
                             "all-gather", "all-gather-start"})

_IOTA_RE = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=\s*\[([\d\s,]*)\]"
                      r"(?:\s*T\s*\(([\d\s,]*)\))?\s*$")
_GROUP_RE = re.compile(r"\{([^{}]*)\}")


class ReplicaGroupsError(HloError, ValueError):
    """Malformed replica_groups / source_target_pairs text, or ids that do not fit (the
    user's input: an :class:`HloError`)."""


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ReplicaGroupsError(f"expected integers in '{text}'") from None


def parse_replica_groups(text: str | None) -> list[list[int]]:
    """The groups as lists of ids; ``[]`` for ``{}`` (or no attribute): everybody."""
    return [list(g) for g in _parse_cached((text or "{}").strip())]


@functools.lru_cache(maxsize=4096)
def _parse_cached(raw: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g) for g in _parse(raw))


def _parse(raw: str) -> list[list[int]]:
    m = _IOTA_RE.match(raw)
    if m:
        return _expand_iota(int(m.group(1)), int(m.group(2)), _ints(m.group(3)),
                            _ints(m.group(4)) if m.group(4) is not None else None, raw)
    if not (raw.startswith("{") and raw.endswith("}")):
        raise ReplicaGroupsError(f"bad replica_groups={raw}")
    inner = raw[1:-1].strip()
    if not inner:
        return []
    groups = [_ints(g) for g in _GROUP_RE.findall(inner)]
    rest = _GROUP_RE.sub("", inner).replace(",", "").strip()
    if rest or not groups:
        raise ReplicaGroupsError(f"bad replica_groups={raw}")
    return groups


def _expand_iota(num_groups: int, group_size: int, dims: list[int], perm, raw: str):
    total = math.prod(dims) if dims else 0
    if num_groups * group_size != total:
        raise ReplicaGroupsError(f"replica_groups={raw}: {num_groups}x{group_size} groups "
                                 f"but the iota has {total} ids")
    rank = len(dims)
    if perm is None:
        perm = list(range(rank))
    if sorted(perm) != list(range(rank)):
        raise ReplicaGroupsError(f"replica_groups={raw}: T({perm}) is not a permutation "
                                 f"of {rank} dimensions")
    # id at transposed position (i_0..i_{r-1}) is the row-major offset of the source
    # position j with j[perm[k]] = i_k.
    strides = [1] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    tdims = [dims[p] for p in perm]
    tstrides = [strides[p] for p in perm]
    ids = []
    index = [0] * rank
    for _ in range(total):
        ids.append(sum(i * s for i, s in zip(index, tstrides)))
        for k in range(rank - 1, -1, -1):
            index[k] += 1
            if index[k] < tdims[k]:
                break
            index[k] = 0
    return [ids[g * group_size:(g + 1) * group_size] for g in range(num_groups)]


def replica_groups_text(groups) -> str:
    """``{{0,1},{2,3}}`` (XLA's printing of an explicit list)."""
    return "{" + ",".join("{" + ",".join(str(int(i)) for i in g) + "}" for g in groups) + "}"


def replica_groups(inst) -> list[list[int]]:
    """``inst``'s groups, expanded (``[]`` when empty)."""
    try:
        return parse_replica_groups(inst.attrs.get("replica_groups"))
    except ReplicaGroupsError as e:
        raise ReplicaGroupsError(f"%{inst.name}: {e}") from None


def parse_source_target_pairs(text: str | None) -> list[tuple[int, int]]:
    raw = (text or "{}").strip()
    if not (raw.startswith("{") and raw.endswith("}")):
        raise ReplicaGroupsError(f"bad source_target_pairs={raw}")
    pairs = []
    for g in _GROUP_RE.findall(raw[1:-1]):
        ids = _ints(g)
        if len(ids) != 2:
            raise ReplicaGroupsError(f"source_target_pairs={raw}: {{{g}}} is not a pair")
        pairs.append((ids[0], ids[1]))
    return pairs


# ---- group modes --------------------------------------------------------------------------
def group_mode(inst) -> str:
    """XLA's CollectiveOpGroupMode from channel_id / use_global_device_ids."""
    has_channel = "channel_id" in inst.attrs
    global_ids = None
    if inst.opcode in _HAS_GLOBAL_IDS:
        global_ids = inst.attrs.get("use_global_device_ids", "false") == "true"
    if not has_channel:
        if global_ids:
            raise ReplicaGroupsError(f"%{inst.name}: use_global_device_ids=true needs a "
                                     "channel_id")
        return CROSS_REPLICA
    if global_ids is None:
        return CROSS_PARTITION
    return FLATTENED_ID if global_ids else CROSS_REPLICA_AND_PARTITION


def flattened_id_groups(groups, mode: str, num_replicas: int, num_partitions: int
                        ) -> list[list[int]]:
    """GetParticipatingFlattenedIdGroups: the device groups (flattened ids) that ``groups``
    (as written, ``[]`` = everybody) stand for in ``mode``.  Raises ReplicaGroupsError
    for ids out of range."""
    R, P = num_replicas, num_partitions
    if not groups:
        if mode == FLATTENED_ID:
            raise ReplicaGroupsError("use_global_device_ids=true needs explicit "
                                     "replica_groups")
        groups = [list(range(P if mode == CROSS_PARTITION else R))]
    limit = {CROSS_REPLICA: R, CROSS_REPLICA_AND_PARTITION: R, CROSS_PARTITION: P,
             FLATTENED_ID: R * P}[mode]
    what = {CROSS_REPLICA: "replica", CROSS_REPLICA_AND_PARTITION: "replica",
            CROSS_PARTITION: "partition", FLATTENED_ID: "device"}[mode]
    for g in groups:
        for i in g:
            if not 0 <= i < limit:
                raise ReplicaGroupsError(
                    f"{what} id {i} in replica_groups is out of range: the run has {R} "
                    f"replica(s) x {P} partition(s) ({mode})")
    if mode == FLATTENED_ID:
        return [list(g) for g in groups]
    out = []
    if mode == CROSS_REPLICA:
        for g in groups:
            for p in range(P):
                out.append([r * P + p for r in g])
    elif mode == CROSS_PARTITION:
        for g in groups:
            for r in range(R):
                out.append([r * P + p for p in g])
    else:
        for g in groups:
            out.append([r * P + p for r in g for p in range(P)])
    return out


def device_groups(inst, num_replicas: int, num_partitions: int) -> list[list[int]]:
    """The participating device groups (flattened ids) of collective ``inst``."""
    return flattened_id_groups(replica_groups(inst), group_mode(inst), num_replicas,
                               num_partitions)


def module_device_counts(module) -> tuple[int | None, int | None]:
    """(replica_count, num_partitions) from the module header, None where absent."""
    def count(name):
        raw = module.header_attrs.get(name)
        try:
            return int(raw) if raw else None
        except ValueError:
            return None
    return count("replica_count"), count("num_partitions")
