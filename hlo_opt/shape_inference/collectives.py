"""Collective ops: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
collective-broadcast, ragged-all-to-all and their async -start/-done forms.

The shard count of all-gather / reduce-scatter is read from the declared result (as
hlo_verifier does) and checked against the replica-group size when the module says how
many replicas / partitions there are (``replica_count=``, ``num_partitions=``).
"""
from __future__ import annotations

import re

from ..ir.shape import Shape
from .common import CannotInfer, attr, expect_array, fail, need_operands, text

_IOTA_GROUPS_RE = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")


def replica_groups(inst) -> list[list[int]] | None:
    """The groups as lists of ids ([] when empty); None for forms that do not list ids
    (the iota form ``[2,4]<=[8]``, mesh axes)."""
    raw = (inst.attrs.get("replica_groups") or "{}").strip()
    if not raw.startswith("{"):
        return None
    groups = re.findall(r"\{([^{}]*)\}", raw[1:-1])
    try:
        return [[int(x) for x in g.split(",") if x.strip()] for g in groups]
    except ValueError:
        fail(f"bad replica_groups={raw}")


def group_size(inst) -> int | None:
    """Size of one replica group: None when the groups are empty ("everyone"), 0 when
    the text form does not tell."""
    raw = (inst.attrs.get("replica_groups") or "{}").strip()
    m = _IOTA_GROUPS_RE.match(raw)
    if m:
        return int(m.group(2))
    groups = replica_groups(inst)
    if groups is None:
        return 0
    if not groups:
        return None
    for g in groups:
        if not g:
            fail("a replica group is empty")
    return len(groups[0])


def check_replica_groups(inst, uniform: bool = True) -> None:
    """CheckReplicaGroups: ids 0..n-1 each named once, no empty group, equal sizes."""
    groups = replica_groups(inst)
    if not groups:
        return
    seen: set[int] = set()
    for g in groups:
        if not g:
            fail("a replica group is empty")
        for i in g:
            if i in seen:
                fail(f"replica {i} is repeated in replica_groups")
            seen.add(i)
    for i in range(len(seen)):
        if i not in seen:
            fail(f"replica {i} is not named in replica_groups")
    if uniform and any(len(g) != len(groups[0]) for g in groups):
        fail("replica groups must all have the same size")


def _module_count(inst, name: str) -> int:
    module = inst.parent.module if inst.parent is not None else None
    raw = module.header_attrs.get(name) if module is not None else None
    try:
        return int(raw) if raw else 1
    except ValueError:
        return 1


def subgroup_size(inst, has_global_ids_attr: bool = True) -> int:
    """GetSubgroupSize for the op's CollectiveOpGroupMode; 1 means 'unknown'."""
    replicas = _module_count(inst, "replica_count")
    partitions = _module_count(inst, "num_partitions")
    size = group_size(inst)
    if size == 0:
        return 1
    has_channel = "channel_id" in inst.attrs
    global_ids = attr(inst, "use_global_device_ids", False)
    if not has_channel:
        if global_ids:
            fail("use_global_device_ids needs a channel_id")
        return size or replicas
    if not has_global_ids_attr:  # cross-partition
        return size or partitions
    if global_ids:  # flattened ids
        if size is None:
            fail("use_global_device_ids=true needs explicit replica_groups")
        return size
    return (size or replicas) * partitions


def _one_dimension(inst, rank: int) -> int:
    dims = attr(inst, "dimensions", required=True)
    if len(dims) != 1 or not 0 <= dims[0] < rank:
        fail(f"{inst.opcode} needs one dimension in [0, {rank}), has "
             f"{{{','.join(map(str, dims))}}}")
    return dims[0]


def _arrays(inst) -> list[Shape]:
    if not inst.operands:
        fail(f"{inst.opcode} needs at least one operand")
    return [expect_array(o.shape, f"operand of {inst.opcode}") for o in inst.operands]


def _pack(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def _declared_leaf(inst, i: int, n: int, start: bool) -> Shape | None:
    out = inst.shape
    if out is None:
        return None
    if start:
        if not out.is_tuple() or len(out.tuple_shapes) != 2:
            fail(f"{inst.opcode} must return (inputs, outputs), declares {text(out)}")
        out = out.tuple_shapes[1]
    if n > 1:
        if not out.is_tuple() or len(out.tuple_shapes) != n:
            fail(f"{inst.opcode} with {n} operands must return a tuple of {n}")
        out = out.tuple_shapes[i]
    return out


def all_reduce(inst) -> Shape:
    check_replica_groups(inst, uniform=False)
    return _pack(_arrays(inst))


def all_gather(inst) -> Shape:
    shapes = _arrays(inst)
    start = inst.opcode == "all-gather-start"
    check_replica_groups(inst)
    d = _one_dimension(inst, shapes[0].rank)
    first_out = _declared_leaf(inst, 0, len(shapes), start)
    if first_out is not None:
        if d >= first_out.rank:
            fail(f"{inst.opcode} dimension {d} is out of range for the result")
        in_size = shapes[0].dims[d]
        shards = -(-first_out.dims[d] // in_size) if in_size else 1
    else:
        shards = subgroup_size(inst)
        if shards == 1 and not group_size(inst):
            raise CannotInfer(f"{inst.opcode} needs replica_groups or a declared shape")
    expected = subgroup_size(inst)
    if expected != 1 and shards != expected:
        fail(f"{inst.opcode} gathers {shards} shards but the replica group size is "
             f"{expected}")
    outs = []
    for s in shapes:
        if d >= s.rank:
            fail(f"{inst.opcode} dimension {d} is out of range for {text(s)}")
        dims = list(s.dims)
        dims[d] *= shards
        outs.append(Shape(s.element_type, dims, s.dynamic))
    if start:
        return Shape.tuple([_pack(shapes), _pack(outs)])
    return _pack(outs)


def reduce_scatter(inst) -> Shape:
    shapes = _arrays(inst)
    check_replica_groups(inst)
    d = _one_dimension(inst, shapes[0].rank)
    first_out = _declared_leaf(inst, 0, len(shapes), False)
    if first_out is not None:
        if d >= first_out.rank:
            fail(f"reduce-scatter dimension {d} is out of range for the result")
        out_size = first_out.dims[d]
        shards = -(-shapes[0].dims[d] // out_size) if out_size else 1
    else:
        shards = subgroup_size(inst)
        if shards == 1 and not group_size(inst):
            raise CannotInfer("reduce-scatter needs replica_groups or a declared shape")
    expected = subgroup_size(inst)
    if expected != 1 and shards != expected:
        fail(f"reduce-scatter scatters into {shards} shards but the replica group size is "
             f"{expected}")
    outs = []
    for s in shapes:
        if d >= s.rank:
            fail(f"reduce-scatter dimension {d} is out of range for {text(s)}")
        if s.dims[d] % shards:
            fail(f"reduce-scatter dimension {d} of {text(s)} is not divisible into "
                 f"{shards} shards")
        dims = list(s.dims)
        dims[d] //= shards
        outs.append(Shape(s.element_type, dims, s.dynamic))
    return _pack(outs)


def all_to_all(inst) -> Shape:
    shapes = _arrays(inst)
    check_replica_groups(inst)
    split = subgroup_size(inst, has_global_ids_attr=False)
    if "dimensions" in inst.attrs:
        if len(shapes) != 1:
            fail("an array all-to-all (with dimensions=) takes one operand")
        d = _one_dimension(inst, shapes[0].rank)
        if split > 1 and shapes[0].dims[d] % split:
            fail(f"all-to-all split dimension {d} of {text(shapes[0])} is not divisible by "
                 f"the split count {split}")
        return shapes[0]
    for s in shapes:
        if s.dims != shapes[0].dims or s.element_type != shapes[0].element_type:
            fail(f"tuple all-to-all operands differ: {text(shapes[0])} and {text(s)}")
    if split > 1 and len(shapes) != split:
        fail(f"tuple all-to-all has {len(shapes)} operands for {split} participants")
    return Shape.tuple(shapes)


def _in_place_permute(inst) -> bool:
    return len(inst.operands) == 4 and inst.operands[2].shape.is_tuple()


def collective_permute(inst) -> Shape:
    if _in_place_permute(inst):
        return inst.operands[1].shape
    return _pack(_arrays(inst))


def collective_permute_start(inst) -> Shape:
    if _in_place_permute(inst):
        first, second = inst.operands[0].shape, inst.operands[1].shape
    else:
        first = second = _pack(_arrays(inst))
    out = inst.shape
    rest = list(out.tuple_shapes[2:]) if out is not None and out.is_tuple() else []
    return Shape.tuple([first, second] + rest)


def collective_permute_done(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if not s.is_tuple() or len(s.tuple_shapes) < 2:
        fail(f"collective-permute-done operand must be a start tuple, got {text(s)}")
    return s.tuple_shapes[1]


def all_gather_done(inst) -> Shape:
    need_operands(inst, 1)
    s = inst.operands[0].shape
    if not s.is_tuple() or len(s.tuple_shapes) != 2:
        fail(f"all-gather-done operand must be an all-gather-start tuple, got {text(s)}")
    return s.tuple_shapes[1]


def ragged_all_to_all(inst) -> Shape:
    need_operands(inst, 6)
    return expect_array(inst.operands[1].shape, "output buffer of ragged-all-to-all")
