"""``all-reduce-combiner``: XLA's AllReduceCombiner
(hlo/transforms/collectives/all_reduce_combiner.cc).

Independent all-reduces with equal keys (``GetAllReduceKey``: reduction opcode and type,
channel_id presence, use_global_device_ids, replica groups) become one all-reduce of a
tuple, read back with get-tuple-element::

    a = f32[8] all-reduce(x)    b = f32[4] all-reduce(y)
  =>
    ab = (f32[8], f32[4]) all-reduce(x, y)    a = get-tuple-element(ab), index=0 ...

Sets are formed by ``_combine.combine_by_key`` up to ``combine_threshold_in_bytes``
(``--xla_gpu_all_reduce_combine_threshold_bytes``, XLA's default 30 MiB + 7) and
``combine_threshold_count`` (256, as XLA:GPU's pipeline passes) per combined op.  The
combined op takes the first one's computation, groups, channel_id and
use_global_device_ids and metadata, the members' shardings as a tuple sharding and
their backend config when they all agree.  Nothing is done when a threshold is zero or
an all-reduce constrains its layout.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from ._combine import combine_by_key, replace_all, skipped_computations
from ._util import all_reduce_key, combined_attrs, contains_layout_constrained


def combine_all_reduces(comp, members) -> None:
    first = members[0]
    operands = [m.operands[0] for m in members]
    attrs = {}
    for key in ("channel_id", "replica_groups"):
        if key in first.attrs:
            attrs[key] = first.attrs[key]
    if first.attrs.get("use_global_device_ids") == "true":
        attrs["use_global_device_ids"] = "true"
    for key, value in combined_attrs(members).items():
        if key in ("sharding", "backend_config"):  # MergeOpMetadata keeps the first
            attrs[key] = value                       # op's metadata; no frontend merge
    if "metadata" in first.attrs:
        attrs["metadata"] = first.attrs["metadata"]
    combined = comp.add("all-reduce", Shape.tuple([o.shape for o in operands]), operands,
                        name="all-reduce", attrs=attrs, called=[first.to_apply],
                        called_attr="to_apply")
    replace_all(comp, [(m, comp.add("get-tuple-element", m.shape, [combined],
                                    name="get-tuple-element", attrs={"index": str(i)}))
                       for i, m in enumerate(members)])


class AllReduceCombiner:
    name = "all-reduce-combiner"

    def __init__(self, combine_threshold_in_bytes: int | None = None,
                 combine_threshold_count: int = 256):
        self.combine_threshold_in_bytes = combine_threshold_in_bytes
        self.combine_threshold_count = combine_threshold_count

    def run(self, module) -> bool:
        threshold = self.combine_threshold_in_bytes
        if threshold is None:
            threshold = module.config.debug_options.xla_gpu_all_reduce_combine_threshold_bytes
        if threshold <= 0 or self.combine_threshold_count <= 0:
            return False
        if contains_layout_constrained(module, ("all-reduce",)):
            return False
        skip = skipped_computations(module, combine_while_loops=True)
        changed = False
        for comp in list(module.computations):
            if comp in skip:
                continue

            def key_fn(inst):
                return all_reduce_key(inst, domain=0) if inst.opcode == "all-reduce" \
                    else None
            changed |= combine_by_key(comp, key_fn,
                                      lambda members: combine_all_reduces(comp, members),
                                      threshold, self.combine_threshold_count)
        return changed
