"""What XLA's collective passes share: ``hlo_query`` (layout-constrained collectives,
NextChannelId), ``GetAllReduceKey``, ``MatchReductionInstruction`` /
``MatchReductionComputation`` / ``GetReductionIdentity`` (collective_ops_utils),
``ShapeUtil::PermuteDimensions`` and the metadata / frontend-attribute / sharding merges
of ``collective_combiner_utils``.
"""
from __future__ import annotations

import re

from hlo_opt.ir.replica_groups import replica_groups
from hlo_opt.ir.shape import Layout, Shape
from hlo_opt.ir.types import BIT_WIDTH

ALL_REDUCE_LIKE = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter"})


# ---- hlo_query --------------------------------------------------------------------------
def contains_layout_constrained(module, opcodes) -> bool:
    """ContainsLayoutConstrainedCollective / ...AllReduce."""
    opcodes = frozenset(opcodes)
    return any(inst.opcode in opcodes and inst.attrs.get("constrain_layout") == "true"
               for inst in module.instructions())


def next_channel_id(module) -> int:
    """NextChannelId: one more than the largest channel_id (1 when none)."""
    top = 0
    for inst in module.instructions():
        if "channel_id" in inst.attrs:
            top = max(top, int(inst.attr("channel_id")))
    return top + 1


# ---- reductions ---------------------------------------------------------------------------
_KIND_OF_OPCODE = {"add": "sum", "multiply": "product", "minimum": "min", "maximum": "max"}


def reduction_kind_of(opcode: str, element_type: str) -> str | None:
    """MatchReductionInstruction (and/or of pred are min/max)."""
    kind = _KIND_OF_OPCODE.get(opcode)
    if kind is None and element_type == "pred":
        kind = {"and": "min", "or": "max"}.get(opcode)
    return kind


def reduction_kind(comp) -> str | None:
    """MatchReductionComputation: the root is a reduction op of parameters 0 and 1 (either
    order) with an (effective) scalar shape."""
    root = comp.root
    kind = reduction_kind_of(root.opcode, root.shape.element_type)
    if kind is None or len(root.operands) != 2 or not root.shape.is_array() \
            or root.shape.num_elements() != 1:
        return None
    numbers = sorted(o.parameter_number if o.opcode == "parameter" else -1
                     for o in root.operands)
    return kind if numbers == [0, 1] else None


def reduction_identity(kind: str, element_type: str):
    """GetReductionIdentity as a Python number (None for types without one)."""
    import numpy as np

    from hlo_opt.ir.types import is_complex, is_float, numpy_dtype
    if kind == "sum":
        return 0
    if kind == "product":
        return 1
    if element_type == "pred":
        return kind == "min"  # and -> true, or -> false
    if is_complex(element_type):
        return None
    dt = numpy_dtype(element_type)
    if is_float(element_type):
        return float("inf") if kind == "min" else float("-inf")
    info = np.iinfo(dt)
    return int(info.max) if kind == "min" else int(info.min)


# ---- keys ---------------------------------------------------------------------------------
def all_reduce_key(inst, ignore_replica_groups: bool = False, domain: int = -1):
    """GetAllReduceKey: equal for all-reduces that may be combined / folded, None for
    instructions that are not all-reduce-like or reduce with a non-trivial computation."""
    if inst.opcode not in ALL_REDUCE_LIKE or not inst.called:
        return None
    comp = inst.to_apply
    if comp.instruction_count() != 3 or len(comp.parameters) != 2:
        return None
    groups = () if ignore_replica_groups else tuple(tuple(g) for g in replica_groups(inst))
    root = comp.root
    return (root.opcode, root.shape.element_type, domain, "channel_id" in inst.attrs,
            inst.attrs.get("use_global_device_ids") == "true", groups)


def groups_key(inst) -> tuple:
    return tuple(tuple(g) for g in replica_groups(inst))


# ---- frontend attributes, metadata, sharding --------------------------------------------------
_FRONTEND_RE = re.compile(r'([A-Za-z_][\w.\-]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_META_RE = re.compile(r'([A-Za-z_]\w*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s}]+)')


def frontend_attributes(inst) -> dict[str, str]:
    return dict(_FRONTEND_RE.findall(inst.attrs.get("frontend_attributes", "")))


def frontend_attributes_text(attrs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(attrs.items())) + "}"


def collective_group_key(inst) -> str | None:
    return frontend_attributes(inst).get("collective_group_key")


def compatible_group_keys(a, b) -> bool:
    """HaveCompatibleCollectiveGroupKeys: both unkeyed, or the same key."""
    return collective_group_key(a) == collective_group_key(b)


def merge_frontend_attributes(insts) -> str | None:
    """MergeFrontendAttributes: every key; values that differ sorted and comma-joined."""
    values: dict[str, set] = {}
    for inst in insts:
        for k, v in frontend_attributes(inst).items():
            values.setdefault(k, set()).add(v)
    if not values:
        return None
    return frontend_attributes_text({k: ",".join(sorted(v)) for k, v in values.items()})


def _metadata(inst) -> dict[str, str]:
    return dict(_META_RE.findall(inst.attrs.get("metadata", "")))


def _unquote(v: str) -> str:
    return v[1:-1] if v.startswith('"') else v


def _merge_op_names(names: list[str]) -> str:
    if len(names) == 1 or len(set(names)) == 1:
        return names[0]
    prefix = names[0]
    for n in names[1:]:
        i = 0
        while i < min(len(prefix), len(n)) and prefix[i] == n[i]:
            i += 1
        prefix = prefix[:i]
    cut = prefix.rfind("/")
    prefix = prefix[:cut + 1] if cut >= 0 else ""
    return prefix + "(" + ":".join(n[len(prefix):] for n in names) + ")"


def merge_metadata(insts) -> str | None:
    """MergeMetadata: the first instruction's metadata with the op_names merged
    (``prefix/(a:b)``) and the source locations joined."""
    if not insts:
        return None
    first = _metadata(insts[0])
    names, sources = [], []
    for inst in insts:
        md = _metadata(inst)
        if md.get("op_name"):
            names.append(_unquote(md["op_name"]))
        if md.get("source_file"):
            sources.append(f"{_unquote(md['source_file'])}:{md.get('source_line', '0')}")
    if not first and not names and not sources:
        return None
    merged = dict(first)
    if sources and len(insts) > 1:
        merged["source_file"] = '"' + ",".join(sources) + '"'
        merged.pop("source_line", None)
        merged.pop("source_end_line", None)
    if names:
        merged["op_name"] = '"' + _merge_op_names(names) + '"'
    order = ["op_type", "op_name", "source_file", "source_line"]
    keys = [k for k in order if k in merged] + [k for k in merged if k not in order]
    return "{" + " ".join(f"{k}={merged[k]}" for k in keys) + "}"


def tuple_sharding(insts) -> str | None:
    """CreateTupleSharding: each element's sharding ({replicated} when it has none); None
    when no instruction has one."""
    if not any("sharding" in i.attrs for i in insts):
        return None
    return "{" + ", ".join(i.attrs.get("sharding", "{replicated}") for i in insts) + "}"


def merged_backend_config(insts) -> str | None:
    """MaybeMergeBackendConfigString: kept when every instruction has the same one."""
    configs = {i.attrs.get("backend_config") for i in insts}
    if len(configs) == 1:
        return next(iter(configs))
    return None


def combined_attrs(insts, tuple_sharded: bool = True) -> dict:
    """metadata / frontend_attributes / sharding / backend_config of a combined op."""
    out = {}
    for name, value in (("sharding", tuple_sharding(insts) if tuple_sharded
                         else insts[0].attrs.get("sharding")),
                        ("frontend_attributes", merge_frontend_attributes(insts)),
                        ("metadata", merge_metadata(insts)),
                        ("backend_config", merged_backend_config(insts))):
        if value is not None:
            out[name] = value
    return out


# ---- shapes -------------------------------------------------------------------------------
def permute_dimensions(perm, shape: Shape) -> Shape:
    """ShapeUtil::PermuteDimensions: dims[i] = shape.dims[perm[i]], with the layout
    chosen so that the permutation is a bitcast."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    dims = [shape.dims[p] for p in perm]
    m2m = tuple(inv[d] for d in shape.effective_layout().minor_to_major)
    return Shape(shape.element_type, dims, [shape.dynamic[p] for p in perm],
                 Layout(m2m, shape.effective_layout().tail))


def byte_size(shape: Shape) -> int:
    """ShapeUtil::ByteSizeOf for an array (sub-byte types take a byte each)."""
    return shape.num_elements() * max(1, BIT_WIDTH[shape.element_type] // 8)


def swap_perm(rank: int, a: int, b: int) -> list[int]:
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm
