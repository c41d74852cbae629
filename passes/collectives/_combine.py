"""``CombineInstructionsByKey`` (xla/service/collective_combiner_utils.h), shared by the
three combiners.

Instructions with control edges never combine.  Rounds, each over the computation in
post order: the first instruction with a key picks
the group (its key); instructions of that group join the set in order until the set
would pass the byte threshold, would include an instruction that depends on a member,
or reaches the count threshold; a set of two or more is combined.  An instruction with
more than one operand (or a tuple result), or larger than the threshold alone, never
joins.  Every
instruction that joined (or was dropped) leaves the key table, so the rounds end.

Dependence is "reachable from a member through operands or control edges", found by
walking the post order once per round and marking what the members reach; the order is
recomputed only after a round that changed the graph.
"""
from __future__ import annotations

from ._util import byte_size


def combine_by_key(comp, key_fn, combine_fn, threshold_bytes: int,
                   threshold_count: int) -> bool:
    keys: dict = {}
    groups: dict = {}
    for inst in comp.instructions:
        if inst.control_predecessors or inst.control_successors:
            continue  # ordered by control edges: never combined (XLA's test
        key = key_fn(inst)  # DoNotCombineWithControlDependencies)
        if key is not None:
            keys[inst] = key
            groups.setdefault(key, set()).add(inst)
    changed = False
    order = None
    while keys:
        if order is None:
            order = comp.post_order()
            keyed = [(i, inst) for i, inst in enumerate(order) if inst in keys]
            next_key = 0
        while keyed[next_key][1] not in keys:  # the first instruction still keyed
            next_key += 1
        start = keyed[next_key][0]
        members: list = []
        member_set: set = set()
        reached: set = set()  # instructions that depend on a member
        total = 0
        group = None
        for index in range(start, len(order)):
            inst = order[index]
            if members:
                preds = inst.operands + inst.control_predecessors
                if any(p in member_set or p in reached for p in preds):
                    reached.add(inst)
            key = keys.get(inst)
            if key is None:
                continue
            if not members:
                group = groups[key]
            if inst not in group:
                continue
            if len(inst.operands) != 1 or not inst.shape.is_array():
                del keys[inst]
                continue
            size = byte_size(inst.shape)
            if size > threshold_bytes:
                del keys[inst]
                continue
            if total + size > threshold_bytes:
                break
            if inst in reached:
                break
            members.append(inst)
            member_set.add(inst)
            total += size
            del keys[inst]
            if len(members) >= threshold_count:
                break
        if len(members) > 1:
            combine_fn(members)
            changed = True
            order = None
    return changed


def replace_all(comp, replacements) -> None:
    """HloComputation::ReplaceInstruction for every (old, new) pair of a combine: ``new``
    inherits ``old``'s metadata / sharding / frontend attributes when it has none and
    takes its uses; ``old`` (never one with control edges) goes.  Each user is rewired
    once, however many of the old instructions it reads (a root tuple of thousands)."""
    mapping = dict(replacements)
    users: dict = {}
    for old, new in mapping.items():
        for key in ("metadata", "sharding", "frontend_attributes"):
            if key in old.attrs and key not in new.attrs:
                new.attrs[key] = old.attrs[key]
        for u in old.users:
            users[u] = None
    for u in users:
        u.set_operands([mapping.get(o, o) for o in u.operands])
    for old, new in mapping.items():
        if comp.root is old:
            comp.root = new
        comp.remove_instruction(old)


def skipped_computations(module, combine_while_loops: bool) -> set:
    """Computations a combiner leaves alone: fusion bodies (MakeNonfusionComputations),
    computations with domain instructions (domain metadata is not modelled) and, without
    ``combine_while_loops``, while bodies and conditions."""
    skip = set(module.fusion_computations())
    for inst in module.instructions():
        if inst.opcode == "domain":
            skip.add(inst.parent)
        if inst.opcode == "while" and not combine_while_loops:
            skip.update(inst.called)
    return skip


def run_dim_combiner(combiner, module, opcode: str, flag_prefix: str, combine_fn) -> bool:
    """The run of the all-gather and reduce-scatter combiners: thresholds and combine-by-dim
    from the pass or else from ``--xla_gpu_<flag_prefix>_combine_*`` flags, then
    :func:`combine_by_key` over every computation not skipped."""
    from ._util import contains_layout_constrained
    opts = module.config.debug_options
    threshold = combiner.combine_threshold_in_bytes
    if threshold is None:
        threshold = getattr(opts, f"xla_gpu_{flag_prefix}_combine_threshold_bytes")
    by_dim = combiner.combine_by_dim
    if by_dim is None:
        by_dim = getattr(opts, f"xla_gpu_enable_{flag_prefix}_combine_by_dim")
    if threshold <= 0 or combiner.combine_threshold_count <= 0:
        return False
    if contains_layout_constrained(module, (opcode,)):
        return False
    skip = skipped_computations(module, combiner.combine_while_loops)
    changed = False
    for comp in list(module.computations):
        if comp in skip:
            continue
        changed |= combine_by_key(comp, lambda i: combiner.key(i, by_dim),
                                  lambda members, c=comp: combine_fn(c, members),
                                  threshold, combiner.combine_threshold_count)
    return changed
