"""Canonical HLO text, as XLA's HloModule::ToString prints it: instructions,
computations and modules.  All printing of the IR lives here; the IR's ``to_text``
methods call these functions through :mod:`hlo_opt.ir.printing` (registered below), so
the IR never imports this package.

``print(parse(print(m)))`` is byte-identical to ``print(m)``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..ir import printing
from ..ir.attributes import COMPACT_ATTRS, quote_string

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.computation import Computation
    from ..ir.instruction import Instruction
    from ..ir.module import HloModule

_PLAIN_NAME_RE = re.compile(r"[A-Za-z_$][\w.\-$]*", re.ASCII)

# Generic attributes XLA prints after the opcode-specific ones.
TRAILING_ATTRS = frozenset({"sharding", "frontend_attributes", "statistics", "metadata",
                            "backend_config", "origin", "parameter_replication",
                            "result_accuracy"})


# ---- instructions ---------------------------------------------------------------------------

def operand_text(inst: Instruction, operand_shapes: bool = True) -> str:
    """What goes between the parentheses: the operands (or a constant's / parameter's
    payload)."""
    if inst.opcode in ("constant", "parameter") or (inst.payload and not inst.operands):
        return inst.payload
    if operand_shapes:
        return ", ".join(f"{op.shape.to_text()} %{op.name}" for op in inst.operands)
    return ", ".join("%" + op.name for op in inst.operands)


def _called_text(inst: Instruction) -> str:
    attr = inst.called_attr
    if isinstance(attr, tuple):  # condition=, body= / select=, scatter= / true_, false_
        return ", ".join(f"{a}=%{c.name}" for a, c in zip(attr, inst.called))
    if attr in ("branch_computations", "called_computations") or len(inst.called) > 1:
        return f"{attr}={{" + ", ".join("%" + c.name for c in inst.called) + "}"
    return f"{attr}=%{inst.called[0].name}"


def _ctrl_text(inst: Instruction) -> str:
    return "control-predecessors={" + ", ".join(
        "%" + p.name for p in inst.control_predecessors) + "}"


def attr_texts(inst: Instruction, print_metadata: bool = True) -> list[str]:
    """Attributes in input order; called computations and control predecessors are
    printed from live references at the place they were written (or before the generic
    trailing attributes when a pass added them)."""
    out = []
    called_attr = inst.called_attr
    pending_called = bool(inst.called) and called_attr is not None
    pending_ctrl = bool(inst.control_predecessors)
    for name, raw in inst.attrs.items():
        if name == called_attr or (isinstance(called_attr, tuple)
                                   and name == called_attr[0]):
            if pending_called:
                out.append(_called_text(inst))
                pending_called = False
            continue
        if name == "control-predecessors":
            if pending_ctrl:
                out.append(_ctrl_text(inst))
                pending_ctrl = False
            continue
        if name in TRAILING_ATTRS:
            if pending_called:
                out.append(_called_text(inst))
                pending_called = False
            if pending_ctrl:
                out.append(_ctrl_text(inst))
                pending_ctrl = False
        if name == "metadata" and not print_metadata:
            continue
        if name in COMPACT_ATTRS:
            raw = raw.replace(" ", "")
        out.append(f"{name}={raw}")
    if pending_called:
        out.append(_called_text(inst))
    if pending_ctrl:
        out.append(_ctrl_text(inst))
    return out


def instruction_to_text(inst: Instruction, operand_shapes: bool = True,
                        print_metadata: bool = True, large_constants: bool = True) -> str:
    payload = operand_text(inst, operand_shapes)
    if not large_constants and inst.opcode == "constant" and inst.shape.is_array() \
            and inst.shape.num_elements() > 10:
        payload = "{...}"
    head = f"%{inst.name} = {inst.shape.to_text()} {inst.opcode}({payload})"
    attrs = attr_texts(inst, print_metadata)
    if attrs:
        head += ", " + ", ".join(attrs)
    return ("ROOT " if inst.is_root else "") + head


# ---- computations ---------------------------------------------------------------------------

def computation_to_text(comp: Computation, operand_shapes: bool = True,
                        print_metadata: bool = True, large_constants: bool = True) -> str:
    params = ", ".join(f"{p.name}: {p.shape.to_text(layout=False)}"
                       for p in comp.parameters if p is not None)
    head = ("ENTRY " if comp.is_entry else "") + \
        f"%{comp.name} ({params}) -> {comp.root.shape.to_text(layout=False)}"
    lines = [head + " {"]
    for inst in comp.post_order():
        lines.append("  " + instruction_to_text(inst, operand_shapes, print_metadata,
                                                large_constants))
    # XLA prints a non-main thread after the closing brace (HloComputation::Print)
    lines.append("}" if comp.execution_thread is None
                 else f"}}, execution_thread=\"{comp.execution_thread}\"")
    return "\n".join(lines)


# ---- modules --------------------------------------------------------------------------------

def entry_computation_layout_text(module: HloModule) -> str:
    entry = module.entry
    params = ", ".join(p.shape.to_text() for p in entry.parameters if p is not None)
    return "{(" + params + ")->" + entry.root.shape.to_text() + "}"


def module_header(module: HloModule) -> str:
    attrs = dict(module.header_attrs)
    if "entry_computation_layout" not in attrs and module.entry is not None \
            and module.entry.root is not None:
        ordered = {}
        if "is_scheduled" in attrs:
            ordered["is_scheduled"] = attrs.pop("is_scheduled")
        ordered["entry_computation_layout"] = entry_computation_layout_text(module)
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
            parts.append(computation_to_text(comp, operand_shapes, print_metadata,
                                             large_constants))
            continue
        text = computation_to_text(comp, operand_shapes, print_metadata, large_constants)
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
        line = instruction_to_text(inst, operand_shapes, print_metadata)
        return line.replace(f" {inst.opcode}(", f" {root.opcode}-{inst.opcode[6:]}(", 1)
    own = [a for a in attr_texts(inst, print_metadata) if not a.startswith("calls=")]
    attrs = own + attr_texts(root, print_metadata)
    head = (f"%{inst.name} = {inst.shape.to_text()} {root.opcode}-start"
            f"({operand_text(inst, operand_shapes)})")
    if attrs:
        head += ", " + ", ".join(attrs)
    return ("ROOT " if inst.is_root else "") + head


printing.register(instruction=instruction_to_text, computation=computation_to_text,
                  module=module_to_text)
