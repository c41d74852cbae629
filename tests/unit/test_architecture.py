"""The layering the architecture promises, enforced (``make lint`` runs these too):

* one import direction: the core (``hlo_opt/`` except the app layer: ``cli.py``,
  ``commands/``, the optimize entry point ``passes_api.py``) never imports ``passes/``
  (at module level or inside functions), click or rich;
* no import cycles (imports inside functions count; ``if TYPE_CHECKING:`` ones do not);
* nothing outside ``hlo_opt/ir`` touches a private IR field.
"""
from __future__ import annotations

import ast

from tests.support.imports import ROOT, cycles, imports, is_core

# Rendering for the terminal: the one core module allowed rich (it draws diffs).
RICH_RENDERERS = {"hlo_opt.diff.render_rich"}



def test_the_core_never_imports_passes_click_or_rich():
    bad = []
    for imp in imports():
        if not is_core(imp.module):
            continue
        top = imp.target.split(".")[0]
        if top == "passes" or top == "click" or \
                (top == "rich" and imp.module not in RICH_RENDERERS):
            bad.append(f"{imp.module}:{imp.line} imports {imp.target}")
    assert bad == []


def test_the_ir_never_imports_text():
    """Printing lives in hlo_opt/text (the IR's to_text methods reach it through
    hlo_opt.ir.printing, where the printer registers itself)."""
    bad = [f"{imp.module}:{imp.line} imports {imp.target}" for imp in imports()
           if imp.module.startswith("hlo_opt.ir") and imp.target.startswith("hlo_opt.text")]
    assert bad == []


def test_the_ir_prints_through_the_text_printer():
    from hlo_opt.api import parse_hlo
    from hlo_opt.text import printer
    text = ("HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n"
            "ENTRY %e (p: f32[2]) -> f32[2] {\n"
            "  %p = f32[2]{0} parameter(0)\n"
            "  ROOT %n = f32[2]{0} negate(f32[2]{0} %p), metadata={op_name=\"x\"}\n}\n")
    m = parse_hlo(text, "m")
    assert m.to_text() == printer.module_to_text(m) == text
    assert m.entry.to_text() == printer.computation_to_text(m.entry)
    assert m.entry.root.to_text(print_metadata=False) == \
        printer.instruction_to_text(m.entry.root, print_metadata=False) == \
        "ROOT %n = f32[2]{0} negate(f32[2]{0} %p)"


def test_no_import_cycles():
    assert cycles() == []


# Private fields of the IR classes (Instruction, Computation, HloModule).
PRIVATE_IR_FIELDS = {
    "_instructions", "_users", "_literal", "_parsed", "_control_predecessors",
    "_control_successors", "_computations", "_names", "_next_suffix", "_stems",
    "_comp_index", "_renames", "_pending_drop", "_name"}


def private_ir_accesses(root=ROOT) -> list[str]:
    """``file:line .field`` for every private IR field read or written outside
    ``hlo_opt/ir`` (``self._x`` of a class of its own does not count)."""
    out = []
    for pkg in ("hlo_opt", "passes", "tests", "benchmarks", "scripts"):
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("hlo_opt/ir/") or rel == "tests/unit/test_architecture.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.Attribute) and node.attr in PRIVATE_IR_FIELDS and \
                        not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    out.append(f"{rel}:{node.lineno} .{node.attr}")
    return out


def test_nothing_outside_the_ir_touches_private_ir_fields():
    assert private_ir_accesses() == []
