"""``MatchReduceScatter`` (xla/service/collective_opt_utils.cc): an all-reduce whose only
use is a dynamic-slice (maybe through a reshape) that gives each participant the piece
``its index in the group x piece size`` along one dimension.

The offset of the dynamic-slice is followed back to the device id through the forms XLA
accepts: ``multiply`` by a constant, reshape / bitcast / copy, widening integer
``convert``, ``clamp(0, x, hi)`` with a large enough ``hi``, table lookups (a
dynamic-slice of a rank-1 s32/u32 constant or iota indexed by an id, nested), and the
ids themselves (replica-id, partition-id, or ``partition-id + replica-id * P`` for
global device ids).  Only the single-split-dimension form is ported (ReduceScatterCreator
calls it with ``allow_multiple_split_dims=false``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hlo_opt.ir.replica_groups import replica_groups
from hlo_opt.ir.types import BIT_WIDTH, is_float

from hlo_opt.analysis.shape_util import dims_unmodified_by_reshape


@dataclass
class ReduceScatterSpec:
    split_dim: int = -1
    group_size: int = 0
    dynamic_slice: object = None
    original_split_dims: list = field(default_factory=list)
    sharded_replicas: int = 1
    sharded_partitions: int = 1


def _strip(hlo):
    while hlo.opcode in ("bitcast", "reshape", "copy"):
        hlo = hlo.operands[0]
    return hlo


def _is_integer_type(et: str) -> bool:
    return et[0] in "su" and et != "pred" and not is_float(et)


def is_table_lookup(hlo) -> bool:
    hlo = _strip(hlo)
    if hlo.opcode != "dynamic-slice":
        return False
    table = hlo.operands[0]
    return table.opcode in ("constant", "iota") and table.shape.rank == 1 and \
        table.shape.element_type in ("s32", "u32")


def scalar_int(constant) -> int | None:
    """GetScalarInt64Value of an (effectively) scalar integer constant, else None."""
    if constant.opcode != "constant" or not constant.shape.is_array() or \
            constant.shape.num_elements() != 1:
        return None
    lit = constant.literal
    if lit.elided or lit.array is None:
        return None
    try:
        return int(lit.array.reshape(-1)[0])
    except (TypeError, ValueError, OverflowError):
        return None


def _table_entry(table, index: int) -> int | None:
    if table.opcode == "iota":
        return index
    lit = table.literal
    if lit.elided or not 0 <= index < lit.array.size:
        return None
    return int(lit.array.reshape(-1)[index])


def index_for_id(index, id_, map_id) -> int:
    """GetIndexForId: the value ``index`` takes on device ``id_`` (-1: unknown)."""
    mapped = map_id(index, id_)
    if mapped >= 0:
        return mapped
    if not is_table_lookup(index):
        return -1
    index = _strip(index)
    inner = index_for_id(index.operands[1], id_, map_id)
    if inner < 0:
        return -1
    entry = _table_entry(index.operands[0], inner)
    return -1 if entry is None else entry


def is_per_id_offset(offset, shard_size: int, map_id, group_size: int, inst,
                     is_cross_module: bool, use_global_device_ids: bool) -> bool:
    """IsPerIdOffset: on the j-th device of every group ``offset`` is ``shard_size * j``."""
    groups = replica_groups(inst)
    iota_group = not groups or (is_cross_module and not use_global_device_ids)
    recurse = lambda o, s: is_per_id_offset(o, s, map_id, group_size, inst,  # noqa: E731
                                            is_cross_module, use_global_device_ids)
    op = offset.opcode
    if op == "multiply":
        if offset.shape.num_elements() != 1:
            return False
        if offset.operands[0].opcode == "constant":
            c = 0
        elif offset.operands[1].opcode == "constant":
            c = 1
        else:
            return False
        multiplier = scalar_int(offset.operands[c])
        if not multiplier or shard_size % multiplier:
            return False
        return recurse(offset.operands[1 - c], shard_size // multiplier)
    if shard_size == 1 and iota_group and \
            all(map_id(offset, i) == i for i in range(group_size)):
        return True
    if op in ("bitcast", "reshape", "copy"):
        return recurse(offset.operands[0], shard_size)
    if op == "convert":
        src = offset.operands[0].shape.element_type
        dst = offset.shape.element_type
        if _is_integer_type(src) and BIT_WIDTH[src] <= BIT_WIDTH[dst]:
            return recurse(offset.operands[0], shard_size)
    if op == "clamp":
        lo, hi = scalar_int(offset.operands[0]), scalar_int(offset.operands[2])
        if lo is None or hi is None or lo != 0 or hi < (group_size - 1) * shard_size:
            return False
        return recurse(offset.operands[1], shard_size)
    num_groups = 1 if iota_group else len(groups)
    if is_table_lookup(offset):
        for i in range(num_groups):
            for j in range(group_size):
                id_ = j if iota_group else groups[i][j]
                table_index = index_for_id(offset.operands[1], id_, map_id)
                if table_index < 0:
                    return False
                entry = _table_entry(offset.operands[0], table_index)
                if entry != shard_size * j:
                    return False
        return True
    for i in range(num_groups):
        for j in range(group_size):
            id_ = j if iota_group else groups[i][j]
            if map_id(offset, id_) != shard_size * j:
                return False
    return True


def _split_dim_spec(ds, allow_multiple_split_dims: bool):
    """ExtractSplitDimSpec: (split_dim, split_dims) or None."""
    src = ds.operands[0].shape
    differing = [d for d in range(src.rank) if src.dims[d] != ds.shape.dims[d]]
    if len(differing) == 1:
        return differing[0], differing
    split_dim, split_dims = -1, []
    for d in range(src.rank):
        offset = ds.operands[d + 1]
        if src.dims[d] == 1 or (offset.opcode == "constant" and scalar_int(offset) == 0):
            continue
        split_dims.append(d)
        if split_dim != -1:
            if not allow_multiple_split_dims or split_dim != d - 1:
                return None
            continue
        split_dim = d
    return split_dim, split_dims


def _dynamic_slice_user(inst, allow_intervening_reshape: bool):
    """FindUniqueDynamicSliceUserFromCollective (one user, no bitcast): (ds, reshape)."""
    if inst.user_count == 0:
        return None
    user, reshape = inst.users[0], None
    if allow_intervening_reshape and user.opcode == "reshape":
        if user.user_count != 1:
            return None
        reshape, user = user, user.users[0]
    return (user, reshape) if user.opcode == "dynamic-slice" else None


def _count(module, name: str) -> int:
    try:
        return int(module.header_attrs.get(name) or 1)
    except ValueError:
        return 1


def match_reduce_scatter(ar, num_partitions: int, num_replicas: int,
                         allow_intervening_reshape: bool = True, min_rank: int = 1,
                         match_partition_id=lambda h: h.opcode == "partition-id",
                         match_replica_id=lambda h: h.opcode == "replica-id"):
    """MatchReduceScatter for an all-reduce (single split dimension): the spec or None."""
    module = ar.parent.module
    use_global = ar.attrs.get("use_global_device_ids") == "true"
    is_cross_module = "channel_id" in ar.attrs and ar.opcode == "all-reduce"
    shape = ar.shape
    if not shape.is_array() or ar.attrs.get("constrain_layout") == "true" or \
            (is_cross_module and _count(module, "num_partitions") <= 1):
        return None
    if shape.rank - sum(1 for d in shape.dims if d == 1) < min_rank:
        return None
    if ar.user_count != 1:
        return None
    groups = replica_groups(ar)
    if len({len(g) for g in groups}) > 1:
        return None
    found = _dynamic_slice_user(ar, allow_intervening_reshape)
    if found is None:
        return None
    ds, reshape = found
    spec = ReduceScatterSpec(dynamic_slice=ds)
    P, R = num_partitions, num_replicas
    if not is_cross_module:
        spec.sharded_replicas = R
        group_size = len(groups[0]) if groups else R

        def map_id(hlo, id_):
            return id_ if match_replica_id(hlo) else -1
    elif use_global:
        spec.sharded_replicas, spec.sharded_partitions = R, P
        if not groups:
            return None
        group_size = len(groups[0])
        orthogonal = True
        index_of_partition = [-1] * P
        for g in groups:
            for i, gid in enumerate(g):
                pid = gid % P
                if index_of_partition[pid] == -1:
                    index_of_partition[pid] = i
                    continue
                if index_of_partition[pid] != i or gid // P != g[0] // P:
                    orthogonal = False
                    break

        def is_replica_times_p(o):
            if o.opcode != "multiply":
                return False
            a, b = o.operands
            return (a.opcode == "replica-id" and b.opcode == "constant"
                    and scalar_int(b) == P) or (b.opcode == "replica-id"
                                                and a.opcode == "constant"
                                                and scalar_int(a) == P)

        def map_id(hlo, id_):
            if match_replica_id(hlo):
                return id_ if P == 1 else -1
            if match_partition_id(hlo):
                if R == 1:
                    return id_
                return id_ % P if orthogonal else -1
            if hlo.opcode == "add":
                a, b = hlo.operands
                if (match_partition_id(a) and is_replica_times_p(b)) or \
                        (match_partition_id(b) and is_replica_times_p(a)):
                    return id_
            return -1
    else:
        if len(groups) != R or (groups and len(groups[0]) != 1):
            return None
        spec.sharded_partitions = P
        group_size = P

        def map_id(hlo, id_):
            return id_ if match_partition_id(hlo) else -1
    if group_size < 2:
        return None
    spec.group_size = group_size
    split = _split_dim_spec(ds, allow_multiple_split_dims=False)
    if split is None:
        return None
    spec.split_dim, split_dims = split
    sizes = ds.attr("dynamic_slice_sizes", ())
    product = 1
    for d in split_dims:
        product *= ds.operands[0].shape.dims[d] // sizes[d]
    if product != group_size or len(split_dims) != 1:
        return None
    if not is_per_id_offset(ds.operands[spec.split_dim + 1], sizes[spec.split_dim], map_id,
                            group_size, ar, is_cross_module, use_global):
        return None
    if reshape is not None:
        unmodified = {out: inp for inp, out in dims_unmodified_by_reshape(
            reshape.operands[0].shape.dims, reshape.shape.dims)}
        if any(d not in unmodified for d in split_dims):
            return None
        spec.split_dim = unmodified[spec.split_dim]
        split_dims = [unmodified[d] for d in split_dims]
    spec.original_split_dims = split_dims
    return spec
