"""From a Mapping to classes: unchanged / changed (which kinds) / removed / added.

A matched pair is changed when its shape, layout, attributes (typed attributes and the
literal or parameter number), operands (an operand whose image is not the other side's
operand at that slot, seen through fusion boundaries; an unmatched identical copy, such
as a constant cloned into a fusion, counts as the same), called computations, control
predecessors, root-ness or metadata differ, or when it moved to a computation that is not
its computation's partner.  Callers are compared by their callees too: a fusion whose
fused computation changed is changed ("fused computation"), decided callees first.
"""
from __future__ import annotations

from ..text.printer import entry_computation_layout_text
from .graph import attr_items
from .mapping import Mapping
from .options import DiffOptions
from .result import ADDED, CHANGED, REMOVED, UNCHANGED, Change, CompPair, ModuleDiff


def _same_operand(m: Mapping, a: int, b: int) -> bool:
    left, right, l2r = m.left, m.right, m.l2r
    if l2r[a] == b:
        return True
    ea = left.param_src[a] if left.param_src[a] >= 0 else a
    eb = right.param_src[b] if right.param_src[b] >= 0 else b
    if l2r[ea] == eb:
        return True
    fr = right.fused_root(eb)
    if fr >= 0 and l2r[ea] == fr:
        return True
    fl = left.fused_root(ea)
    if fl >= 0 and l2r[fl] == eb:
        return True
    # An identical copy (a constant cloned into a fusion, a CSE twin) is the same operand.
    return left.fp[ea] == right.fp[eb] and (l2r[ea] < 0 or m.r2l[eb] < 0)


def _attr_names(li, ri) -> list[str]:
    a, b = dict(attr_items(li)), dict(attr_items(ri))
    names = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if li.payload != ri.payload:
        names.append({"constant": "literal", "parameter": "parameter_number"}.get(
            li.opcode, "payload"))
    return names


def compare_pair(m: Mapping, l: int, r: int, options: DiffOptions) -> Change | None:
    left, right = m.left, m.right
    li, ri = left.insts[l], right.insts[r]
    ch = Change(l, r, [])
    if left.shape_fp[l] != right.shape_fp[r] or not li.shape.same_dims_and_type(ri.shape):
        ch.add("shape", (li.shape.to_text(), ri.shape.to_text()))
    elif not options.ignore_layout and li.shape != ri.shape:
        ch.add("layout", (li.shape.to_text(), ri.shape.to_text()))
    if left.attr_fp[l] != right.attr_fp[r]:
        names = _attr_names(li, ri)
        if names:
            ch.add("attributes", names)
    ol, orr = left.ops[l], right.ops[r]
    if len(ol) != len(orr):
        ch.add("operands", f"count {len(ol)}->{len(orr)}")
    else:
        slots = [k for k, (a, b) in enumerate(zip(ol, orr)) if not _same_operand(m, a, b)]
        if slots:
            ch.add("operands", slots)
    cl, cr = left.called[l], right.called[r]
    if cl or cr:
        if len(cl) != len(cr) or any(
                m.comp_l2r[x] != y and left.comp_fp[x] != right.comp_fp[y]
                for x, y in zip(cl, cr)):
            ch.add("called computation", [right.comp_name(y) for y in cr])
    moved = m.comp_l2r[left.comp_of[l]] != right.comp_of[r]
    if moved:
        ch.add("moved", (left.comp_name(left.comp_of[l]), right.comp_name(right.comp_of[r])))
    if li.control_predecessors or ri.control_predecessors:
        mapped = {m.l2r[left.index[p]] for p in li.control_predecessors}
        if mapped != {right.index[p] for p in ri.control_predecessors}:
            ch.add("control")
    if not moved and left.is_root[l] != right.is_root[r]:
        ch.add("root")
    if not options.ignore_metadata and li.attrs.get("metadata") != ri.attrs.get("metadata"):
        ch.add("metadata")
    return ch if ch.kinds else None


def classify(m: Mapping, options: DiffOptions) -> ModuleDiff:
    left, right = m.left, m.right
    status_l = [REMOVED] * left.n
    status_r = [ADDED] * right.n
    changes: dict[int, Change] = {}
    renamed = 0
    use_names = not options.ignore_names
    l2r = m.l2r
    lfp, rfp = left.local_fp, right.local_fp
    lops, rops = left.ops, right.ops
    lcomp, rcomp, comp_l2r = left.comp_of, right.comp_of, m.comp_l2r
    lroot, rroot = left.is_root, right.is_root
    lcalled, rcalled = left.called, right.called
    check_layout, check_md = not options.ignore_layout, not options.ignore_metadata
    for l, r in m.pairs():
        li, ri = left.insts[l], right.insts[r]
        # Fast path for the common case: identical, nothing to look at twice.
        if lfp[l] == rfp[r] and comp_l2r[lcomp[l]] == rcomp[r] and lroot[l] == rroot[r] \
                and not lcalled[l] and not rcalled[r] \
                and not li.control_predecessors and not ri.control_predecessors \
                and (not check_layout or li.shape == ri.shape) \
                and (not check_md or li.attrs.get("metadata") == ri.attrs.get("metadata")) \
                and len(lops[l]) == len(rops[r]) \
                and all(l2r[a] == b for a, b in zip(lops[l], rops[r])):
            ch = None
        else:
            ch = compare_pair(m, l, r, options)
        if ch is None:
            status_l[l] = status_r[r] = UNCHANGED
        else:
            status_l[l] = status_r[r] = CHANGED
            changes[l] = ch
        if use_names and li.name != ri.name:
            renamed += 1
    _callees_changed(m, status_l, status_r, changes)
    diff = ModuleDiff(left, right, m, options, status_l, status_r, changes,
                      [i for i in range(left.n) if status_l[i] == REMOVED],
                      [i for i in range(right.n) if status_r[i] == ADDED], renamed,
                      _comp_pairs(m, status_l, status_r), _header(m, options))
    if use_names:
        if left.module.name != right.module.name:
            diff.notes.append(f"module renamed: {left.module.name} -> {right.module.name}")
    return diff


def _callees_changed(m: Mapping, status_l, status_r, changes) -> None:
    left, right = m.left, m.right
    changed_l = [False] * len(left.comps)
    for l, st in enumerate(status_l):
        if st != UNCHANGED:
            changed_l[left.comp_of[l]] = True
    for r, st in enumerate(status_r):
        if st != UNCHANGED:
            cl = m.comp_r2l[right.comp_of[r]]
            if cl >= 0:
                changed_l[cl] = True
    for ci, (start, end) in enumerate(left.comp_range):  # callees first
        for l in range(start, end):
            called = left.called[l]
            r = m.l2r[l]
            if not called or r < 0:
                continue
            for x, y in zip(called, right.called[r]):
                if changed_l[x] and m.comp_l2r[x] == y:
                    ch = changes.get(l)
                    if ch is None:
                        ch = changes[l] = Change(l, r, [])
                        status_l[l] = status_r[r] = CHANGED
                    kind = "fused computation" if left.opcode[l] == "fusion" \
                        else "called computation"
                    ch.add(kind, right.comp_name(y))
                    changed_l[ci] = True


def _comp_pairs(m: Mapping, status_l, status_r) -> list[CompPair]:
    left, right = m.left, m.right
    out = []
    for cl, cr in enumerate(m.comp_l2r):
        if cr < 0:
            out.append(CompPair(cl, -1, REMOVED))
            continue
        s, e = left.comp_range[cl]
        s2, e2 = right.comp_range[cr]
        same = all(status_l[i] == UNCHANGED for i in range(s, e)) and \
            all(status_r[i] == UNCHANGED for i in range(s2, e2))
        out.append(CompPair(cl, cr, UNCHANGED if same else CHANGED))
    for cr, cl in enumerate(m.comp_r2l):
        if cl < 0:
            out.append(CompPair(-1, cr, ADDED))
    return out


def _header(m: Mapping, options: DiffOptions) -> list[str]:
    a, b = _header_attrs(m.left.module), _header_attrs(m.right.module)
    if options.ignore_layout:
        a.pop("entry_computation_layout", None)
        b.pop("entry_computation_layout", None)
    out = []
    for k in list(a) + [k for k in b if k not in a]:
        if a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k, '<none>')} -> {b.get(k, '<none>')}")
    return out



def _header_attrs(module) -> dict[str, str]:
    """Module attributes as printed (the entry layout is printed even when not written)."""
    attrs = dict(module.header_attrs)
    if "entry_computation_layout" not in attrs and module.entry is not None \
            and module.entry.root is not None:
        attrs["entry_computation_layout"] = entry_computation_layout_text(module)
    return attrs
