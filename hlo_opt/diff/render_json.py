"""``--json``: the machine-readable report for CI."""
from __future__ import annotations

import json

from .render_text import describe_change
from .result import ModuleDiff
from .summary import summarize


def diff_to_dict(diff: ModuleDiff, include_unchanged: bool = False) -> dict:
    left, right, m = diff.left, diff.right, diff.mapping

    def where(side, i):
        return {"name": side.name(i), "opcode": side.opcode[i],
                "computation": side.comp_name(side.comp_of[i])}

    changed = []
    for l, ch in sorted(diff.changes.items()):
        details = {k: (list(v) if isinstance(v, tuple) else v) for k, v in ch.details.items()}
        changed.append({"left": where(left, l), "right": where(right, ch.right),
                        "kinds": list(ch.kinds), "details": details,
                        "description": describe_change(diff, ch), "matched_by": m.by[l]})
    out = {
        "equal": diff.equal,
        "left": {"file": left.label, "module": left.module.name},
        "right": {"file": right.label, "module": right.module.name},
        "options": diff.options.to_dict(),
        "summary": summarize(diff).to_dict(),
        "module_changes": list(diff.header),
        "notes": list(diff.notes),
        "patterns": [p.to_dict() for p in diff.patterns],
        "changed": changed,
        "removed": [where(left, i) for i in diff.removed],
        "added": [where(right, i) for i in diff.added],
        "computations": [{
            "left": left.comp_name(c.left) if c.left >= 0 else None,
            "right": right.comp_name(c.right) if c.right >= 0 else None,
            "status": c.status} for c in diff.comps],
    }
    if include_unchanged:
        out["unchanged"] = [[left.name(l), right.name(r)] for l, r in m.pairs()
                            if l not in diff.changes]
    return out


def render_json(diff: ModuleDiff, include_unchanged: bool = False) -> str:
    return json.dumps(diff_to_dict(diff, include_unchanged), indent=1) + "\n"
