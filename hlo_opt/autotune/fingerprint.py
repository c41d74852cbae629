"""The instruction half of a cache key: a canonical, name-free text of what is tuned
(XLA's ``AutotuneCacheKey``'s ``hlo``, printed with ``HloPrintOptions::Canonical``).

* any instruction but a fusion: ``shape opcode(operand shapes), attributes`` with the
  backend config's JSON keys sorted, metadata dropped;
* a fusion: its fused computation, instructions renamed ``tmp_0, tmp_1, ...`` in
  post order, operands printed with their shapes, called computations inline.

Two instructions with the same text compute the same function on the same shapes, so
they share tuning results across modules and runs.
"""
from __future__ import annotations

import json

from hlo_opt.text.printer import attr_texts


def _canonical_backend_config(raw: str) -> str:
    text = raw.strip()
    if text.startswith('"'):
        from hlo_opt.ir.attributes import parse_string
        text = parse_string(text)
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        return text


def _attrs(inst, depth: int) -> list[str]:
    called_names = {"%" + c.name for c in inst.called}
    out = []
    for text in attr_texts(inst, print_metadata=False):
        name, _, value = text.partition("=")
        if name in ("control-predecessors", "metadata"):
            continue
        if called_names and any(n in value for n in called_names):
            continue  # printed below, canonically
        if name == "backend_config":
            value = _canonical_backend_config(value)
        out.append(f"{name}={value}")
    for i, comp in enumerate(inst.called):
        out.append(f"called_{i}={{{canonical_computation(comp, depth + 1)}}}")
    return out


def canonical_computation(comp, depth: int = 0) -> str:
    names: dict = {}
    lines = []
    for inst in comp.post_order():
        names[inst] = f"tmp_{len(names)}"
        if inst.opcode in ("parameter", "constant") or (inst.payload and not inst.operands):
            payload = inst.payload
        else:
            payload = ", ".join(f"{o.shape.to_text()} {names[o]}" for o in inst.operands)
        head = f"{names[inst]} = {inst.shape.to_text()} {inst.opcode}({payload})"
        attrs = _attrs(inst, depth)
        lines.append(head + (", " + ", ".join(attrs) if attrs else ""))
    root = comp.root
    return "; ".join(lines) + (f"; ROOT {names[root]}" if root is not None else "")


def canonical_text(inst) -> str:
    if inst.opcode == "fusion" and inst.called:
        return canonical_computation(inst.called[0])
    operands = ", ".join(o.shape.to_text() for o in inst.operands)
    attrs = _attrs(inst, 0)
    return f"{inst.shape.to_text()} {inst.opcode}({operands})" + (
        ", " + ", ".join(attrs) if attrs else "")
