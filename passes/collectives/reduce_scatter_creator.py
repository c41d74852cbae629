"""``reduce-scatter-creator``: XLA's gpu::ReduceScatterCreator
(service/gpu/transforms/reduce_scatter_creator.cc).

An all-reduce whose only use is a dynamic-slice that keeps, on each participant, the
piece at ``index in group x piece size`` (see ``_reduce_scatter_match.py``) is a
reduce-scatter::

    ar = f32[32,8] all-reduce(x)                       rs = f32[4,8] reduce-scatter(x),
    ds = f32[4,8] dynamic-slice(ar, id*4, 0)     =>        dimensions={0}

A reshape between the two is allowed when it leaves the split dimension alone (the
reduce-scatter's result is reshaped to the slice's shape); a dimension the group size
does not divide is first sliced to the largest multiple.  The reduce-scatter keeps the
all-reduce's groups, computation, use_global_device_ids and backend config, with a
fresh channel_id when the all-reduce had one.  Counts of replicas / partitions come
from the module header (``replica_count=``, ``num_partitions=``), 1 when absent.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from ..dce import control_successor_set, remove_instruction_and_unused_operands
from ._reduce_scatter_match import _count, match_reduce_scatter
from ._util import next_channel_id
from hlo_opt.rewrite.builder import slice_text


def non_fusion_non_composite_computations(module):
    """MakeNonFusionNonCompositeComputations."""
    skip = set()
    for inst in module.instructions():
        if inst.opcode == "fusion" or (inst.opcode == "call"
                                       and inst.attrs.get("is_composite") == "true"):
            skip.update(inst.called)
    return [c for c in module.computations if c not in skip]


class ReduceScatterCreator:
    name = "reduce-scatter-creator"

    def run(self, module) -> bool:
        num_replicas = _count(module, "replica_count")
        num_partitions = _count(module, "num_partitions")
        next_channel = next_channel_id(module)
        changed = False
        for comp in non_fusion_non_composite_computations(module):
            ctrl = None  # control predecessors in comp, found once (rewrites add none)
            for ar in comp.post_order():
                if ar.parent is not comp or ar.opcode != "all-reduce":
                    continue
                spec = match_reduce_scatter(ar, num_partitions, num_replicas)
                if spec is None:
                    continue
                ds = spec.dynamic_slice
                d = spec.split_dim
                dims = list(ar.shape.dims)
                scatter_size = dims[d] // spec.group_size
                rs_input = ar.operands[0]
                if dims[d] % spec.group_size:
                    dims[d] = scatter_size * spec.group_size
                    rs_input = comp.add(
                        "slice", Shape(ar.shape.element_type, dims, None, ar.shape.layout),
                        [rs_input], name="slice",
                        attrs={"slice": slice_text([0] * len(dims), dims, [1] * len(dims))})
                dims[d] = scatter_size
                attrs = {}
                if "channel_id" in ar.attrs:
                    attrs["channel_id"] = str(next_channel)
                    next_channel += 1
                attrs["replica_groups"] = ar.attrs.get("replica_groups", "{}")
                for key in ("constrain_layout", "use_global_device_ids"):
                    if ar.attrs.get(key) == "true":
                        attrs[key] = "true"
                attrs["dimensions"] = "{" + str(d) + "}"
                if "backend_config" in ar.attrs:
                    attrs["backend_config"] = ar.attrs["backend_config"]
                rs = comp.add("reduce-scatter",
                              Shape(ar.shape.element_type, dims, None, ar.shape.layout),
                              [rs_input], name="reduce-scatter", attrs=attrs,
                              called=[ar.to_apply], called_attr="to_apply")
                result, reshape = rs, None
                if ds.operands[0] is not ar:
                    reshape = ds.operands[0]
                    result = comp.add("reshape", ds.shape, [rs], name="reshape")
                ds.replace_all_uses_with(result)
                comp.remove_instruction(ds)
                if reshape is not None:
                    comp.remove_instruction(reshape)
                if ctrl is None:
                    ctrl = control_successor_set(comp)
                remove_instruction_and_unused_operands(comp, ar, ctrl_successors=ctrl)
                changed = True
        return changed
