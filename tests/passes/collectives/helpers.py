"""Small helpers for the collective pass tests: run one pass on HLO text, count opcodes,
find instructions."""
from __future__ import annotations

from hlo_opt.api import parse_hlo
from hlo_opt.verifier import verify_module
from passes.registry import create_pass


def run(text: str, pass_or_name, **kwargs):
    """(changed, module) after one run of the pass on a fresh parse of ``text``; the
    result is verified and prints canonically."""
    module = parse_hlo(text)
    p = create_pass(pass_or_name, **kwargs) if isinstance(pass_or_name, str) else pass_or_name
    changed = p.run(module)
    verify_module(module)
    printed = module.to_text()
    assert parse_hlo(printed).to_text() == printed
    return changed, module


def count(module, opcode: str) -> int:
    fused = module.fusion_computations()
    return sum(1 for c in module.computations if c not in fused
               for i in c.instructions if i.opcode == opcode)


def find(module, opcode: str) -> list:
    return [i for i in module.instructions() if i.opcode == opcode]


def root(module):
    return module.entry.root


def shape_of(inst) -> str:
    return inst.shape.to_text()
