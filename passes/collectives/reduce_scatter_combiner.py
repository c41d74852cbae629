"""``reduce-scatter-combiner``: XLA's ReduceScatterCombiner
(hlo/transforms/collectives/reduce_scatter_combiner.cc).

Independent reduce-scatters with equal keys (``GetAllReduceKey`` plus the scatter
dimension when ``combine_by_dim``) whose computation is a plain reduction become one
reduce-scatter with a tuple result, read back with get-tuple-element; members scattering
along another dimension than the most frequent one are bitcast with the two dimensions
swapped, as in all-gather-combiner.

Thresholds: ``combine_threshold_in_bytes``
(``--xla_gpu_reduce_scatter_combine_threshold_bytes``, 30 MiB + 7) and
``combine_threshold_count`` (256); ``combine_by_dim`` from
``--xla_gpu_enable_reduce_scatter_combine_by_dim``.  The combined op takes the first
member's computation, groups, channel_id, use_global_device_ids and sharding (XLA does
not build a tuple sharding here), merged metadata and frontend attributes.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from ._combine import replace_all, run_dim_combiner
from ._combine_dims import aligned_operands, most_frequent_dim, piece
from ._util import all_reduce_key, combined_attrs, reduction_kind


def combine_reduce_scatters(comp, members) -> None:
    first = members[0]
    dim = most_frequent_dim(members)
    operands, shapes, perms = aligned_operands(comp, members, dim)
    attrs = {}
    for key in ("channel_id", "replica_groups"):
        if key in first.attrs:
            attrs[key] = first.attrs[key]
    if first.attrs.get("use_global_device_ids") == "true":
        attrs["use_global_device_ids"] = "true"
    attrs["dimensions"] = "{" + str(dim) + "}"
    attrs.update(combined_attrs(members, tuple_sharded=False))
    combined = comp.add("reduce-scatter", Shape.tuple(shapes), operands,
                        name="reduce-scatter", attrs=attrs, called=[first.to_apply],
                        called_attr="to_apply")
    replace_all(comp, [(m, piece(comp, combined, i, shape, perm))
                       for i, (m, shape, perm) in enumerate(zip(members, shapes, perms))])


class ReduceScatterCombiner:
    name = "reduce-scatter-combiner"

    def __init__(self, combine_threshold_in_bytes: int | None = None,
                 combine_threshold_count: int = 256, combine_by_dim: bool | None = None,
                 combine_while_loops: bool = True):
        self.combine_threshold_in_bytes = combine_threshold_in_bytes
        self.combine_threshold_count = combine_threshold_count
        self.combine_by_dim = combine_by_dim
        self.combine_while_loops = combine_while_loops

    @staticmethod
    def key(inst, by_dim: bool):
        if inst.opcode != "reduce-scatter":
            return None
        key = all_reduce_key(inst, domain=0)
        if key is None or reduction_kind(inst.to_apply) is None:
            return None
        return key, (inst.dimensions[0] if by_dim else -1)

    def run(self, module) -> bool:
        return run_dim_combiner(self, module, "reduce-scatter", "reduce_scatter", combine_reduce_scatters)
