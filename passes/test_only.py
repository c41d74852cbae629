"""Test-only passes, registered as XLA registers its ``test-only-*`` passes: deliberately
wrong, so that the tools that find wrong passes (``hlo-opt bisect``, ``hlo-opt ablate``)
can be demonstrated and tested on any module.  They are listed by ``--list-passes`` and
never named by a pipeline (``passes/registry.py`` lists them with the others).

- ``test-only-miscompile``: rewrites the first floating-point ``add`` (computations in
  module order, instructions in post order) into a ``subtract``: a wrong result that the
  verifier cannot see.
- ``test-only-break-verifier``: gives the first floating-point instruction of the entry
  computation (after the parameters) a wrong element type, so the verifier fails after it.
- ``test-only-crash``: raises an internal error, as a pass with a bug would.

Each rewrite takes a unit of ``--xla_fuel`` (fuel for their name).
"""
from __future__ import annotations

from hlo_opt.fuel import consume_fuel
from hlo_opt.ir.types import is_float


def _plain(inst) -> bool:
    return not inst.control_predecessors and not inst.control_successors


class TestOnlyMiscompile:
    name = "test-only-miscompile"

    def run(self, module) -> bool:
        for comp in module.computations:
            for inst in comp.post_order():
                if inst.opcode != "add" or not inst.shape.is_array() or \
                        not is_float(inst.shape.element_type) or not _plain(inst):
                    continue
                if not consume_fuel(self.name, lambda: f"add %{inst.name} => subtract"):
                    return False
                attrs = {k: v for k, v in inst.attrs.items() if k != "control-predecessors"}
                new = comp.add("subtract", inst.shape, list(inst.operands), attrs=attrs,
                               name=inst.name.replace("add", "subtract", 1))
                comp.replace_instruction(inst, new)
                return True
        return False


class TestOnlyBreakVerifier:
    name = "test-only-break-verifier"

    def run(self, module) -> bool:
        for inst in module.entry.post_order():
            if inst.opcode in ("parameter", "constant") or not inst.shape.is_array() or \
                    not is_float(inst.shape.element_type):
                continue
            if not consume_fuel(self.name, lambda: f"%{inst.name}: wrong element type"):
                return False
            wrong = "f64" if inst.shape.element_type != "f64" else "f32"
            inst.shape = inst.shape.with_element_type(wrong)
            return True
        return False


class TestOnlyCrash:
    name = "test-only-crash"

    def run(self, module) -> bool:
        raise RuntimeError("test-only-crash: a deliberate internal error")
