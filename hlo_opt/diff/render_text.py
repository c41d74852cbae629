"""The text form: summary, then a unified-style diff per computation.

Lines are lists of ``(text, style)`` segments so that one renderer serves both the plain
form (pipes, files) and the coloured one (render_rich maps the style names: ``removed``,
``added``, ``changed``, ``moved``, ``header``, ``hunk``, ``dim``, ``title``).
"""
from __future__ import annotations

from .align import ADDED, CHANGED, DIFF_TAGS, MOVED_OUT, REMOVED, SAME, align, sections
from .result import Change, ModuleDiff
from .summary import summarize

Line = list[tuple[str, "str | None"]]
MAX_OPCODE_ROWS = 20
MAX_PATTERNS = 12


def inst_text(inst, metadata: bool = False) -> str:
    return inst.to_text(operand_shapes=False, print_metadata=metadata)


def describe_change(diff: ModuleDiff, ch: Change) -> str:
    parts = []
    for kind in ch.kinds:
        d = ch.details.get(kind)
        if kind in ("shape", "layout"):
            parts.append(f"{kind} {d[0]} -> {d[1]}")
        elif kind == "attributes":
            parts.append("attributes " + ",".join(d))
        elif kind == "operands":
            if isinstance(d, list):
                parts.append(("operand " if len(d) == 1 else "operands ")
                             + ",".join(map(str, d)) + " rewired")
            else:
                parts.append(f"operand {d}")
        elif kind == "moved":
            parts.append(f"moved %{d[0]} -> %{d[1]}")
        elif kind in ("fused computation", "called computation"):
            parts.append(f"{kind} %{d if isinstance(d, str) else ', %'.join(d)}")
        elif kind == "control":
            parts.append("control predecessors")
        else:
            parts.append(kind)
    return "; ".join(parts)


def summary_lines(diff: ModuleDiff) -> list[Line]:
    left, right = diff.left, diff.right
    s = summarize(diff)
    out: list[Line] = [
        [("--- ", "removed"), (f"{left.label} (module {left.module.name})", "title")],
        [("+++ ", "added"), (f"{right.label} (module {right.module.name})", "title")],
    ]
    if diff.equal:
        out.append([("no difference", "title")])
    out.append([("instructions: ", "header"), (
        f"{s.unchanged} unchanged, ", None), (f"{s.changed} changed", "changed"), (", ", None),
        (f"{s.removed} removed", "removed"), (", ", None), (f"{s.added} added", "added")]
        + ([(f"  ({s.renamed} renamed; --ignore-names hides renames)", "dim")]
           if s.renamed else []))
    if s.kinds:
        out.append([("changes: ", "header"), (", ".join(
            f"{n} {k}" for k, n in sorted(s.kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
            None)])
    comps = ", ".join(f"{s.comps[k]} {k}" for k in ("unchanged", "changed", "removed", "added")
                      if s.comps[k])
    out.append([("computations: ", "header"), (comps, None)])
    for h in diff.header:
        out.append([("module: ", "header"), (h, "changed")])
    for note in diff.notes:
        out.append([(note, "dim")])
    if s.by_opcode:
        out.append([("by opcode:".ljust(28) + "changed  removed    added", "header")])
        rows = sorted(s.by_opcode.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        for op, c in rows[:MAX_OPCODE_ROWS]:
            out.append([(f"  {op:<26}", None), (f"{c['changed']:>7}", "changed"),
                        (f"{c['removed']:>9}", "removed"), (f"{c['added']:>9}", "added")])
        if len(rows) > MAX_OPCODE_ROWS:
            out.append([(f"  ... {len(rows) - MAX_OPCODE_ROWS} more opcodes", "dim")])
    if diff.patterns:
        out.append([("patterns:", "header")])
        for p in diff.patterns[:MAX_PATTERNS]:
            out.append([(f"  {p.text()}", None),
                        (f"   (e.g. %{', %'.join(p.examples)})", "dim")])
        if len(diff.patterns) > MAX_PATTERNS:
            out.append([(f"  ... {len(diff.patterns) - MAX_PATTERNS} more", "dim")])
    return out


def _row_lines(diff: ModuleDiff, tag: str, l: int, r: int) -> list[Line]:
    left, right = diff.left, diff.right
    show_md = not diff.options.ignore_metadata
    if tag == SAME:
        line: Line = [("  " + inst_text(right.insts[r]), None)]
        if left.insts[l].name != right.insts[r].name and not diff.options.ignore_names:
            line.append((f"  // was %{left.insts[l].name}", "dim"))
        return [line]
    if tag == CHANGED:
        ch = diff.changes[l]
        md = show_md and "metadata" in ch.kinds
        return [[("- " + inst_text(left.insts[l], md), "removed")],
                [("+ " + inst_text(right.insts[r], md), "added"),
                 (f"  // {describe_change(diff, ch)}", "changed")]]
    if tag == REMOVED:
        return [[("- " + inst_text(left.insts[l]), "removed")]]
    if tag == ADDED:
        return [[("+ " + inst_text(right.insts[r]), "added")]]
    if tag == MOVED_OUT:
        return [[("- " + inst_text(left.insts[l]), "moved"),
                  (f"  // moved to %{right.comp_name(right.comp_of[r])} as %{right.name(r)}",
                   "dim")]]
    ch = diff.changes.get(l)
    note = f"  // moved from %{left.comp_name(left.comp_of[l])} (was %{left.name(l)})"
    extra = [k for k in ch.kinds if k != "moved"] if ch else []
    if extra:
        note += "; " + describe_change(diff, Change(l, r, extra, ch.details))
    return [[("+ " + inst_text(right.insts[r]), "moved"), (note, "dim")]]


def _section_title(diff: ModuleDiff, cl: int, cr: int, status: str) -> Line:
    left, right = diff.left, diff.right
    if cl < 0:
        return [(f"@@ added computation %{right.comp_name(cr)} "
                 f"({right.comp_kind[cr]}) @@", "hunk")]
    if cr < 0:
        return [(f"@@ removed computation %{left.comp_name(cl)} "
                 f"({left.comp_kind[cl]}) @@", "hunk")]
    name_l, name_r = left.comp_name(cl), right.comp_name(cr)
    names = f"%{name_r}" if name_l == name_r else f"%{name_l} -> %{name_r}"
    return [(f"@@ {names} ({right.comp_kind[cr]}) @@", "hunk")]


def diff_lines(diff: ModuleDiff, context: int = 3) -> list[Line]:
    """Every difference, computation by computation, with ``context`` unchanged rows around
    (all rows when ``context`` < 0)."""
    out: list[Line] = []
    for cl, cr, status in sections(diff):
        rows = align(diff, cl, cr)
        out.append(_section_title(diff, cl, cr, status))
        if context < 0 or cl < 0 or cr < 0:
            keep = [True] * len(rows)
        else:
            keep = [False] * len(rows)
            for i, (tag, _, _) in enumerate(rows):
                if tag in DIFF_TAGS:
                    for j in range(max(0, i - context), min(len(rows), i + context + 1)):
                        keep[j] = True
        skipped = False
        for i, (tag, l, r) in enumerate(rows):
            if not keep[i]:
                skipped = True
                continue
            if skipped:
                out.append([("  ...", "dim")])
                skipped = False
            out.extend(_row_lines(diff, tag, l, r))
        if skipped:
            out.append([("  ...", "dim")])
    return out


def render_lines(diff: ModuleDiff, context: int = 3, summary_only: bool = False
                 ) -> list[Line]:
    lines = summary_lines(diff)
    if not summary_only and not diff.equal:
        lines.append([])
        lines.extend(diff_lines(diff, context))
    return lines


def to_plain(lines: list[Line]) -> str:
    return "".join("".join(t for t, _ in line) + "\n" for line in lines)


def render_text(diff: ModuleDiff, context: int = 3, summary_only: bool = False) -> str:
    """The plain-text report (what a pipe gets)."""
    return to_plain(render_lines(diff, context, summary_only))
