"""Repeated diff patterns: "24 x broadcast+maximum folded into fusion".

Every difference is attributed to one event, and equal event descriptions are counted:

* moved instructions, grouped by (from computation, to computation): "X+Y folded into
  fusion" (into a fused computation), "X+Y moved between fusions", "X+Y unfused", "X+Y
  inlined" (out of a call that is gone), "X+Y moved to another computation"; the new
  fusion instruction and what its new fused computation adds (parameters, cloned
  constants) are part of that event, and likewise on the side that lost a computation;
* a computation only one side has: "called computation added (add+parameter)", "fusion
  removed (...)" (a fusion together with its fused computation);
* connected groups of removed and added instructions (joined through operand edges on
  each side and through the rewired operand slots of changed pairs): "X removed",
  "X added", "X replaced by Y";
* changed pairs not explained by the above: "X changed (attributes)", "X changed
  (operands rewired)"...
  (a pair whose only change is an operand slot now fed by a removed/added/moved
  instruction, or a fused computation that changed, is a consequence, not an event).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .result import ADDED, REMOVED, ModuleDiff

MAX_OPCODES = 4
EXAMPLES = 3


@dataclass
class Pattern:
    description: str
    count: int
    kind: str  # fusion | moved | removed | added | replaced | changed
    examples: list[str] = field(default_factory=list)  # names, right side when it has one

    def text(self) -> str:
        return f"{self.count} x {self.description}"

    def to_dict(self) -> dict:
        return {"count": self.count, "description": self.description, "kind": self.kind,
                "examples": self.examples}


def _ops_text(opcodes) -> str:
    names = sorted(set(opcodes))
    if len(names) > MAX_OPCODES:
        return "+".join(names[:MAX_OPCODES]) + f"+... ({len(opcodes)} instructions)"
    return "+".join(names)


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def find_patterns(diff: ModuleDiff) -> list[Pattern]:
    events: dict[str, Pattern] = {}

    def event(desc: str, kind: str, example: str) -> None:
        p = events.get(desc)
        if p is None:
            p = events[desc] = Pattern(desc, 0, kind)
        p.count += 1
        if len(p.examples) < EXAMPLES:
            p.examples.append(example)

    explained_l, explained_r = _moved_events(diff, event)
    _computation_events(diff, explained_l, explained_r, event)
    _component_events(diff, explained_l, explained_r, event)
    _changed_events(diff, event)
    return sorted(events.values(), key=lambda p: (-p.count, p.description))


def _moved_events(diff: ModuleDiff, event) -> tuple[set[int], set[int]]:
    left, right, m = diff.left, diff.right, diff.mapping
    groups: dict[tuple[int, int], list[int]] = {}
    for l, ch in diff.changes.items():
        if "moved" in ch.kinds:
            groups.setdefault((left.comp_of[l], right.comp_of[ch.right]), []).append(l)
    explained_l: set[int] = set()
    explained_r: set[int] = set()
    for (cl, cr), ls in groups.items():
        src, dst = left.comp_kind[cl], right.comp_kind[cr]
        what = _ops_text([left.opcode[l] for l in ls])
        if dst == "fused" and src != "fused":
            desc, kind = f"{what} folded into fusion", "fusion"
        elif dst == "fused":
            desc, kind = f"{what} moved between fusions", "fusion"
        elif src == "fused":
            desc, kind = f"{what} unfused", "fusion"
        elif src == "called" and m.comp_l2r[cl] < 0 and left.inline_caller[cl] >= 0:
            desc, kind = f"{what} inlined", "moved"  # the call and its callee are gone
        else:
            desc, kind = f"{what} moved to another computation", "moved"
        if right.inline_caller[cr] >= 0:
            example = right.name(right.inline_caller[cr])
        elif left.inline_caller[cl] >= 0:
            example = left.name(left.inline_caller[cl])
        else:
            example = right.comp_name(cr)
        event(desc, kind, example)
        # A new (or dropped) computation: its parameters, cloned constants and caller come
        # and go with the move.
        _explain(right, cr, m.comp_r2l[cr], diff.status_r, ADDED, explained_r)
        _explain(left, cl, m.comp_l2r[cl], diff.status_l, REMOVED, explained_l)
    return explained_l, explained_r


def _explain(side, ci: int, partner: int, status, cls: str, explained: set[int]) -> None:
    if partner >= 0:
        return
    s, e = side.comp_range[ci]
    explained.update(i for i in range(s, e) if status[i] == cls)
    caller = side.inline_caller[ci]
    if caller >= 0 and status[caller] == cls:
        explained.add(caller)  # with the get-tuple-elements of a multi-output fusion
        explained.update(u for u in side.users[caller]
                         if side.opcode[u] == "get-tuple-element" and status[u] == cls)


def _computation_events(diff: ModuleDiff, explained_l: set[int], explained_r: set[int],
                        event) -> None:
    """A computation only one side has is one event ("called computation added (...)")."""
    for side, status, cls, explained, partner_of in (
            (diff.left, diff.status_l, REMOVED, explained_l, diff.mapping.comp_l2r),
            (diff.right, diff.status_r, ADDED, explained_r, diff.mapping.comp_r2l)):
        for ci, partner in enumerate(partner_of):
            if partner >= 0:
                continue
            s, e = side.comp_range[ci]
            nodes = [i for i in range(s, e) if status[i] == cls and i not in explained]
            if not nodes:
                continue
            explained.update(nodes)
            what = _ops_text([side.opcode[i] for i in nodes])
            caller = side.inline_caller[ci]
            if side.comp_kind[ci] == "fused" and caller >= 0 and status[caller] == cls \
                    and caller not in explained:
                explained.add(caller)  # the fusion goes with its fused computation
                event(f"fusion {cls} ({what})", cls, side.name(caller))
            else:
                event(f"{side.comp_kind[ci]} computation {cls} ({what})", cls,
                      side.comp_name(ci))


def _component_events(diff: ModuleDiff, explained_l: set[int], explained_r: set[int],
                      event) -> None:
    left, right = diff.left, diff.right
    uf = _UnionFind()
    removed = [l for l in diff.removed if l not in explained_l]
    added = [r for r in diff.added if r not in explained_r]
    st_l, st_r = diff.status_l, diff.status_r
    for l in removed:
        uf.find(("L", l))
        for o in left.ops[l]:
            if st_l[o] == REMOVED and o not in explained_l:
                uf.union(("L", l), ("L", o))
    for r in added:
        uf.find(("R", r))
        for o in right.ops[r]:
            if st_r[o] == ADDED and o not in explained_r:
                uf.union(("R", r), ("R", o))
    for l, ch in diff.changes.items():
        slots = ch.details.get("operands")
        if not isinstance(slots, list):
            continue
        ol, orr = left.ops[l], right.ops[ch.right]
        for k in slots:
            a, b = ol[k], orr[k]
            if st_l[a] == REMOVED and st_r[b] == ADDED and a not in explained_l \
                    and b not in explained_r:
                uf.union(("L", a), ("R", b))
    groups: dict = {}
    for node in list(uf.parent):
        groups.setdefault(uf.find(node), []).append(node)
    for nodes in groups.values():
        ls = sorted(i for s, i in nodes if s == "L")
        rs = sorted(i for s, i in nodes if s == "R")
        gone = _ops_text([left.opcode[i] for i in ls])
        new = _ops_text([right.opcode[i] for i in rs])
        if ls and rs:
            event(f"{gone} replaced by {new}", "replaced", right.name(rs[-1]))
        elif ls:
            event(f"{gone} removed", "removed", left.name(ls[-1]))
        else:
            event(f"{new} added", "added", right.name(rs[-1]))


_OWN_KINDS = ("shape", "layout", "attributes", "control", "metadata", "called computation")


def _changed_events(diff: ModuleDiff, event) -> None:
    left, right = diff.left, diff.right
    st_l, st_r = diff.status_l, diff.status_r
    for l, ch in diff.changes.items():
        if "moved" in ch.kinds:
            continue
        own = [k for k in ch.kinds if k in _OWN_KINDS]
        slots = ch.details.get("operands")
        pure_rewire = False
        if isinstance(slots, list):
            ol, orr = left.ops[l], right.ops[ch.right]
            pure_rewire = any(st_l[ol[k]] != REMOVED and st_r[orr[k]] != ADDED
                              for k in slots)
        elif slots is not None:
            own.append("operand count")
        if pure_rewire:
            own.append("operands rewired")
        if own:
            event(f"{left.opcode[l]} changed ({', '.join(own)})", "changed",
                  right.name(ch.right))

