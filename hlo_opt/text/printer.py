"""Canonical HLO text, as XLA's HloModule::ToString prints it.

``print(parse(print(m)))`` is byte-identical to ``print(m)``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the IR imports this module, not the reverse
    from ..ir.module import HloModule


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
    head = f"HloModule {module.name}"
    for k, v in attrs.items():
        head += f", {k}={v}"
    return head


def module_to_text(module: HloModule, operand_shapes: bool = True, print_metadata: bool = True,
                   large_constants: bool = True) -> str:
    parts = [module_header(module)]
    if module.stack_frames:
        parts.append(module.stack_frames.rstrip("\n"))
    for comp in module.computation_post_order():
        parts.append(comp.to_text(operand_shapes, print_metadata, large_constants))
    return "\n\n".join(parts) + "\n"
