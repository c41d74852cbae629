"""``copy-insertion``: XLA's CopyInsertion, the cases that matter without a buffer
assignment to consult.

* Special cases (AddSpecialCaseCopies): an entry result that is a parameter or a
  constant (read-only buffers cannot be the output unless aliased through
  ``input_output_alias``), or the same value at two places of the result, is copied.
* While loops (AddCopiesForWhile, then RemoveUnnecessaryCopies): the loop updates its
  state in place, so an initial value that is read-only (a parameter or constant) or
  still read by another instruction is copied into the loop; a body result that is a
  parameter element at another index, or one value returned at two indices, is copied so
  no two state elements share a buffer.

Copies are values' identities: the module computes the same thing.
"""
from __future__ import annotations

from ..registry import register
from ._graph import add_gte


def _copy(comp, x):
    return comp.add("copy", x.shape, [x], name="copy")


def _aliased_params(module) -> set[int]:
    raw = module.header_attrs.get("input_output_alias", "")
    import re
    return {int(m) for m in re.findall(r"\(\s*(\d+)\s*,", raw)}


def _fix_root(comp, aliased: set[int]) -> bool:
    """Copy read-only and repeated leaves of the computation's result."""
    root = comp.root
    changed = False
    if root.opcode != "tuple":
        if (root.opcode == "parameter" and root.parameter_number not in aliased) or \
                root.opcode == "constant":
            comp.root = _copy(comp, root)
            return True
        return False
    seen = set()
    for i, o in enumerate(list(root.operands)):
        needs = (o.opcode == "parameter" and o.parameter_number not in aliased) or \
            o.opcode == "constant" or o in seen
        seen.add(o)
        if needs and o.shape.is_array():
            root.replace_operand(i, _copy(comp, o))
            changed = True
    return changed


def _fix_while(comp, w) -> bool:
    init = w.operands[0]
    changed = False
    if init.opcode == "tuple":
        for i, o in enumerate(list(init.operands)):
            read_only = o.opcode in ("parameter", "constant")
            shared = o.user_count > 1 or o in init.operands[:i]
            if (read_only or shared) and o.shape.is_array():
                init.replace_operand(i, _copy(comp, o))
                changed = True
    elif init.shape.is_array() and (init.opcode in ("parameter", "constant")
                                    or init.user_count > 1):
        w.replace_operand(0, _copy(comp, init))
        changed = True
    body = w.called[1] if w.called_attr == ("condition", "body") else None
    if body is None:
        for c in w.called:
            if c.parameters and c.root.shape == c.parameters[0].shape and c.root.opcode == "tuple":
                body = c
    if body is not None and body.root.opcode == "tuple":
        param = body.parameters[0]
        root = body.root
        seen = set()
        for i, o in enumerate(list(root.operands)):
            swapped = o.opcode == "get-tuple-element" and o.operands[0] is param and \
                o.attr("index") != i
            if (swapped or o in seen or o.opcode == "constant") and o.shape.is_array():
                root.replace_operand(i, _copy(body, o))
                changed = True
            seen.add(o)
    return changed


@register
class CopyInsertion:
    name = "copy-insertion"

    def run(self, module) -> bool:
        changed = False
        aliased = _aliased_params(module)
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode == "while":
                    changed |= _fix_while(comp, inst)
        if module.entry is not None:
            changed |= _fix_root(module.entry, aliased)
        return changed


__all__ = ["CopyInsertion", "add_gte"]
