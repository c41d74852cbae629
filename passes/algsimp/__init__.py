"""``algsimp``: XLA's AlgebraicSimplifier as tables of rewrite rules indexed by opcode.

The rules live in ``rules_*.py`` (one table per family); this module composes them and
runs the table over every non-fusion computation in post order until nothing changes
(XLA reruns a computation up to 50 times, ``run_to_fixed_point``).

    from passes.algsimp import AlgebraicSimplifier, AlgebraicSimplifierOptions
    AlgebraicSimplifier(AlgebraicSimplifierOptions(enable_fast_math=True)).run(module)

Each rewrite takes a unit of ``--xla_fuel=algsimp=N`` when fuel is limited.
``last_fired`` (a Counter of rule labels) and ``last_inexact`` (rules that may have changed
float rounding) describe the most recent run.
"""
from __future__ import annotations

from collections import Counter

from hlo_opt.rewrite.rules import Rules, run_rules
from . import (rules_arith, rules_dot, rules_logic, rules_reduce, rules_shape, rules_slice,
               rules_structure, rules_update)
from .options import AlgebraicSimplifierOptions

RULES: Rules = (rules_arith.RULES + rules_logic.RULES + rules_shape.RULES + rules_slice.RULES
                + rules_reduce.RULES + rules_dot.RULES + rules_structure.RULES
                + rules_update.RULES)


def _skipped_computations(module) -> set:
    """Computations called by fusions and async ops: algsimp leaves them alone."""
    out = set()
    for comp in module.computations:
        for inst in comp.iter_instructions():
            if inst.called and (inst.opcode == "fusion" or inst.opcode.startswith("async-")):
                out.update(inst.called)
    return out


class AlgebraicSimplifier:
    name = "algsimp"

    def __init__(self, options: AlgebraicSimplifierOptions | None = None, rules: Rules = RULES):
        self.options = options or AlgebraicSimplifierOptions()
        self.rules = rules
        self.last_fired: Counter = Counter()
        self.last_inexact: Counter = Counter()

    def run(self, module) -> bool:
        self.last_fired = Counter()
        self.last_inexact = Counter()
        skip = _skipped_computations(module)
        sweeps = 50 if self.options.run_to_fixed_point else 1
        changed = False
        for comp in list(module.computation_post_order()):
            if comp in skip or comp.module is not module:
                continue
            if run_rules(comp, self.rules, self.options, self.last_fired, self.last_inexact,
                         max_sweeps=sweeps, fuel=self.name):
                changed = True
        return changed


def rule_counts() -> dict[str, int]:
    """Number of rules per root opcode (for reports and docs)."""
    return RULES.counts()


__all__ = ["AlgebraicSimplifier", "AlgebraicSimplifierOptions", "RULES", "rule_counts"]
