"""``all-gather-combiner``: XLA's AllGatherCombiner
(hlo/transforms/collectives/all_gather_combiner.cc).

Independent all-gathers with equal keys (gather dimension when ``combine_by_dim``,
channel_id presence, use_global_device_ids, element type unless
``combine_different_dtypes``, replica groups) become one all-gather with a tuple result,
read back with get-tuple-element.  The combined op gathers along the most frequent
dimension of its members (0 when a member's rank lacks it); a member gathering along
another dimension has that dimension and the common one swapped by a bitcast before
and after (the layout is permuted along, so no data moves).

Thresholds: ``combine_threshold_in_bytes`` (``--xla_gpu_all_gather_combine_threshold_bytes``,
30 MiB + 7) and ``combine_threshold_count`` (256); ``combine_by_dim`` from
``--xla_gpu_enable_all_gather_combine_by_dim``.  The combined op takes the first
member's groups, channel_id and use_global_device_ids, a tuple sharding, merged
metadata (``prefix/(a:b)`` op names) and merged frontend attributes (differing values
sorted and comma-joined).
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from ._combine import replace_all, run_dim_combiner
from ._combine_dims import aligned_operands, most_frequent_dim, piece
from ._util import combined_attrs, groups_key


def combine_all_gathers(comp, members) -> None:
    first = members[0]
    dim = most_frequent_dim(members)
    operands, shapes, perms = aligned_operands(comp, members, dim)
    attrs = {}
    for key in ("channel_id", "replica_groups"):
        if key in first.attrs:
            attrs[key] = first.attrs[key]
    attrs["dimensions"] = "{" + str(dim) + "}"
    if first.attrs.get("use_global_device_ids") == "true":
        attrs["use_global_device_ids"] = "true"
    attrs.update(combined_attrs(members))
    combined = comp.add("all-gather", Shape.tuple(shapes), operands, name="all-gather",
                        attrs=attrs)
    replace_all(comp, [(m, piece(comp, combined, i, shape, perm))
                       for i, (m, shape, perm) in enumerate(zip(members, shapes, perms))])


class AllGatherCombiner:
    name = "all-gather-combiner"

    def __init__(self, combine_threshold_in_bytes: int | None = None,
                 combine_threshold_count: int = 256, combine_by_dim: bool | None = None,
                 combine_different_dtypes: bool = True, combine_while_loops: bool = True):
        self.combine_threshold_in_bytes = combine_threshold_in_bytes
        self.combine_threshold_count = combine_threshold_count
        self.combine_by_dim = combine_by_dim
        self.combine_different_dtypes = combine_different_dtypes
        self.combine_while_loops = combine_while_loops

    def key(self, inst, by_dim: bool):
        if inst.opcode != "all-gather":
            return None
        return (inst.dimensions[0] if by_dim and inst.dimensions else -1,
                "channel_id" in inst.attrs, inst.attrs.get("use_global_device_ids") == "true",
                None if self.combine_different_dtypes else inst.shape.element_type,
                groups_key(inst))

    def run(self, module) -> bool:
        return run_dim_combiner(self, module, "all-gather", "all_gather", combine_all_gathers)
