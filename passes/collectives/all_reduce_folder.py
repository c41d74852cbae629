"""``all-reduce-folder``: XLA's AllReduceFolder (hlo/transforms/simplifiers/all_reduce_folder.cc).

Two all-reduces in a row, ``ar1(ar0(x))``, that agree on everything but their replica
groups become one all-reduce when every replica's result sums each contributor exactly
once::

    ar0 = all-reduce(x), replica_groups={{0,1},{2,3}}
    ar1 = all-reduce(ar0), replica_groups={{0,2},{1,3}}    =>   all-reduce(x), replica_groups={{0,1,2,3}}

Conditions (XLA's): no layout-constrained all-reduce in the module; ar0 has one user;
both have a trivial reduction computation with equal keys (``GetAllReduceKey`` ignoring
the groups: reduction opcode and type, channel_id presence, use_global_device_ids) and
non-empty groups; the folded groups exist (no replica reached twice, contributor sets
agree).  The new all-reduce takes ar0's shape, operands and computation, a fresh
channel_id when ar0 had one, sorted groups and both frontend attributes (differing
values joined; a conflicting ``collective_group_key`` dropped); a chain folds in one run
(post order).

One deliberate difference from XLA: all-reduces with a channel_id but without
use_global_device_ids in a module with ``num_partitions`` > 1 are left alone.  Their
groups name replicas and every group spans all partitions (kCrossReplicaAndPartition),
so ``ar1(ar0(x))`` counts each contributor once per partition and the folded op does
not: XLA's fold changes the result there (the multi-replica interpreter shows it, see
tests/passes/collectives/test_all_reduce_folder.py).
"""
from __future__ import annotations

from hlo_opt.ir.replica_groups import module_device_counts, replica_groups, \
    replica_groups_text

from ._util import (all_reduce_key, contains_layout_constrained, frontend_attributes,
                    frontend_attributes_text, next_channel_id)


def merged_frontend_attributes(ar0, ar1) -> str | None:
    """Both all-reduces' frontend attributes; differing values sorted and comma-joined,
    except a conflicting ``collective_group_key``, which is dropped."""
    a, b = frontend_attributes(ar0), frontend_attributes(ar1)
    merged = {}
    for k in dict.fromkeys(list(a) + list(b)):
        values = sorted({v for v in (a.get(k), b.get(k)) if v is not None})
        if k == "collective_group_key" and len(values) > 1:
            continue
        merged[k] = ",".join(values)
    return frontend_attributes_text(merged) if merged else None


def fold_replica_groups(groups0, groups1):
    """FoldReplicaGroups: the groups of ar1(ar0(x)) as one all-reduce, or None."""
    num_replicas = max((i for g in groups0 for i in g), default=0) + 1
    group_of = [-1] * num_replicas
    for n, g in enumerate(groups0):
        for i in g:
            group_of[i] = n
    set_ids: dict[tuple, int] = {}  # contributor set -> id, in first-seen order
    set_of = [0] * num_replicas
    for g in groups1:
        contributors = [False] * num_replicas
        for i in g:
            if not 0 <= i < num_replicas or group_of[i] < 0:
                return None
            for c in groups0[group_of[i]]:
                if contributors[c]:
                    return None
                contributors[c] = True
        key = tuple(contributors)
        sid = set_ids.setdefault(key, len(set_ids) + 1)
        for i in g:
            set_of[i] = sid
    new_groups = []
    for contributors, sid in set_ids.items():
        group = []
        for r in range(num_replicas):
            if contributors[r]:
                if set_of[r] != sid:
                    return None
                group.append(r)
        new_groups.append(group)
    new_groups.sort(key=lambda g: g[0])
    return new_groups


class AllReduceFolder:
    name = "all-reduce-folder"

    def run(self, module) -> bool:
        if contains_layout_constrained(module, ("all-reduce",)):
            return False
        next_channel = next_channel_id(module)
        partitions = module_device_counts(module)[1] or 1
        changed = False
        for comp in list(module.computations):
            for inst in comp.post_order():
                if inst.parent is not comp or inst.opcode != "all-reduce" or \
                        inst.operands[0].opcode != "all-reduce":
                    continue
                ar1, ar0 = inst, inst.operands[0]
                if ar0.user_count != 1:
                    continue
                key0 = all_reduce_key(ar0, ignore_replica_groups=True)
                key1 = all_reduce_key(ar1, ignore_replica_groups=True)
                groups0, groups1 = replica_groups(ar0), replica_groups(ar1)
                if key0 is None or key1 is None or key0 != key1 or not groups0 \
                        or not groups1:
                    continue
                if key0[3] and not key0[4] and partitions > 1:
                    continue  # see the module docstring
                new_groups = fold_replica_groups(groups0, groups1)
                if new_groups is None:
                    continue
                attrs = {}
                if "channel_id" in ar0.attrs:
                    attrs["channel_id"] = str(next_channel)
                    next_channel += 1
                attrs["replica_groups"] = replica_groups_text(new_groups)
                if ar0.attrs.get("use_global_device_ids") == "true":
                    attrs["use_global_device_ids"] = "true"
                frontend = merged_frontend_attributes(ar0, ar1)
                if frontend is not None:
                    attrs["frontend_attributes"] = frontend
                new = comp.add("all-reduce", ar0.shape, list(ar0.operands), name="all-reduce",
                               attrs=attrs, called=[ar0.to_apply], called_attr="to_apply")
                ar1.replace_all_uses_with(new)
                comp.remove_instruction(ar1)
                comp.remove_instruction(ar0)
                changed = True
        return changed
