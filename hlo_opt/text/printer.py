"""Canonical HLO text, as XLA's HloModule::ToString prints it.

``print(parse(print(m)))`` is byte-identical to ``print(m)``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..ir.attributes import quote_string

if TYPE_CHECKING:  # pragma: no cover - the IR imports this module, not the reverse
    from ..ir.module import HloModule

_PLAIN_NAME_RE = re.compile(r"[A-Za-z_$][\w.\-$]*", re.ASCII)


def module_header(module: HloModule) -> str:
    attrs = dict(module.header_attrs)
    if "entry_computation_layout" not in attrs and module.entry is not None \
            and module.entry.root is not None:
        ordered = {}
        if "is_scheduled" in attrs:
            ordered["is_scheduled"] = attrs.pop("is_scheduled")
        ordered["entry_computation_layout"] = module.entry_computation_layout_text()
        ordered.update(attrs)
        attrs = ordered
    name = module.name
    if not _PLAIN_NAME_RE.fullmatch(name) or name in ("ENTRY", "ROOT"):
        name = quote_string(name)  # (`HloModule "a/b"` parses again; a bare a/b does not)
    head = f"HloModule {name}"
    for k, v in attrs.items():
        head += f", {k}={v}"
    return head


def module_to_text(module: HloModule, operand_shapes: bool = True, print_metadata: bool = True,
                   large_constants: bool = True, syntax_sugar_async_ops: bool = False) -> str:
    """``syntax_sugar_async_ops`` (XLA's flag of that name): an async op whose computation
    holds one op is printed as that op's ``-start`` / ``-update`` / ``-done`` (its
    attributes on the start), and the computation is not printed."""
    parts = [module_header(module)]
    if module.stack_frames:
        parts.append(module.stack_frames.rstrip("\n"))
    sugar = _sugared_async(module) if syntax_sugar_async_ops else {}
    hidden = {inst.called[0] for inst in sugar if inst.opcode == "async-start"}
    for comp in module.computation_post_order():
        if comp in hidden:
            continue
        if not sugar or not any(i in sugar for i in comp.iter_instructions()):
            parts.append(comp.to_text(operand_shapes, print_metadata, large_constants))
            continue
        text = comp.to_text(operand_shapes, print_metadata, large_constants)
        lines = text.split("\n")
        for k, inst in enumerate(comp.post_order(), start=1):
            if inst in sugar:
                lines[k] = "  " + _sugared_line(inst, sugar[inst], operand_shapes,
                                                print_metadata)
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _wrapped_op(start):
    """The one op an async-start's computation wraps (its parameters, in order, are the
    op's operands, and nothing else calls it), else None."""
    comp = start.called[0] if start.called else None
    if comp is None or comp.instruction_count() != len(comp.parameters) + 1:
        return None
    root = comp.root
    if root is None or root.opcode in ("parameter", "tuple") or \
            list(root.operands) != list(comp.parameters) or root.opcode.startswith("async"):
        return None
    return root


def _sugared_async(module) -> dict:
    """async instruction -> the op it wraps, for the ones printed in the short form."""
    callers: dict = {}
    for comp in module.computations:
        for inst in comp.iter_instructions():
            for callee in inst.called:
                callers[callee] = callers.get(callee, 0) + 1
    out: dict = {}
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst.opcode == "async-start" and inst.called and \
                    callers.get(inst.called[0]) == 1:
                root = _wrapped_op(inst)
                if root is not None:
                    out[inst] = root
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst.opcode in ("async-update", "async-done"):
                start = inst.operands[0] if inst.operands else None
                while start is not None and start.opcode == "async-update":
                    start = start.operands[0] if start.operands else None
                if start is not None and start in out:
                    out[inst] = out[start]
    return out


def _sugared_line(inst, root, operand_shapes: bool, print_metadata: bool) -> str:
    if inst.opcode != "async-start":
        line = inst.to_text(operand_shapes, print_metadata)
        return line.replace(f" {inst.opcode}(", f" {root.opcode}-{inst.opcode[6:]}(", 1)
    own = [a for a in inst.attr_texts(print_metadata) if not a.startswith("calls=")]
    attrs = own + list(root.attr_texts(print_metadata))
    head = (f"%{inst.name} = {inst.shape.to_text()} {root.opcode}-start"
            f"({inst.operand_text(operand_shapes)})")
    if attrs:
        head += ", " + ", ".join(attrs)
    return ("ROOT " if inst.is_root else "") + head
