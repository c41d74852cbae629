"""FlattenCallGraph (``flatten-call-graph``): give every computation called in a control-flow
context (``call``, ``while``, ``conditional``, async ops) exactly one call site, by cloning
(``xla/hlo/transforms/simplifiers/flatten_call_graph.cc``).

Nodes are visited callees first.  For a computation called from several control-flow
sites, every site but the first gets a clone (all of them when the computation is also
called from an embedded context such as a fusion or a reduce's ``to_apply``), and the
control-flow callees of each clone are cloned in turn.  Clones are named like XLA's
``HloComputation::Clone()``: ``<name>.clone``, instructions ``<name>.clone``.

Unlike XLA (whose ``Run`` always returns true) this reports whether anything was cloned,
so it can sit in a fixpoint.
"""
from __future__ import annotations

from hlo_opt.ir.clone import clone_computation


_CONTROL_FLOW = frozenset({"call", "while", "conditional", "async-start", "async-update",
                           "async-done"})
_EMBEDDED = frozenset({"all-reduce", "reduce-scatter", "all-reduce-start", "map", "reduce",
                       "reduce-window", "scatter", "select-and-scatter", "sort", "topk",
                       "fusion", "custom-call"})
_SUFFIX = "clone"


def _call_context(opcode: str) -> str:
    if opcode in _CONTROL_FLOW:
        return "control"
    if opcode in _EMBEDDED:
        return "embedded"
    return "none"


def add_suffix(name: str, suffix: str = _SUFFIX) -> str:
    """XLA's AddSuffixToInstructionName: ``x`` -> ``x.clone`` -> ``x.clone2`` -> ..."""
    dot_suffix = "." + suffix
    i = name.rfind(dot_suffix)
    if i < 0:
        return name + dot_suffix
    after = name[i + len(dot_suffix):]
    if not after:
        return name + "2"
    if after.isdigit():
        return name[:i] + dot_suffix + str(int(after) + 1)
    return name + dot_suffix


def clone_into_module(module, comp):
    """A copy of ``comp`` added to ``module`` with XLA's clone names.  Fused computations
    are cloned too (a fusion computation has exactly one fusion instruction, as
    ``HloComputation::Clone`` keeps it); other callees are shared."""
    new = clone_computation(comp, {}, add_suffix(comp.name))
    for inst in new.iter_instructions():
        inst.name = add_suffix(inst.name)
        if inst.opcode == "fusion" and inst.called:
            inst.called = [clone_into_module(module, c) for c in inst.called]
    new.is_entry = False
    module.add_computation(new, before=None)
    return new


def _call_sites(module) -> dict:
    """computation -> [(instruction, context)] in module/instruction order (CallGraph)."""
    sites: dict = {c: [] for c in module.computations}
    for comp in module.computations:
        for inst in comp.iter_instructions():
            ctx = _call_context(inst.opcode)
            for callee in dict.fromkeys(inst.called):
                sites.setdefault(callee, []).append((inst, ctx))
    return sites


def _replace_callee(inst, old, new) -> None:
    inst.called = [new if c is old else c for c in inst.called]


def _flatten_node(module, comp, sites: list) -> bool:
    contexts = {ctx for _, ctx in sites}
    both = "control" in contexts and "embedded" in contexts
    changed = False
    first_control = True
    for inst, ctx in sites:
        if ctx != "control":
            continue
        if first_control and not both:
            first_control = False
            continue
        first_control = False
        clone = clone_into_module(module, comp)
        _replace_callee(inst, comp, clone)
        changed = True
        worklist = [clone]
        while worklist:
            current = worklist.pop()
            for sub in current.instructions:
                if _call_context(sub.opcode) != "control":
                    continue
                clones = {c: clone_into_module(module, c) for c in dict.fromkeys(sub.called)}
                sub.called = [clones[c] for c in sub.called]
                worklist.extend(clones.values())
    return changed


def run_flatten_call_graph(module) -> bool:
    sites = _call_sites(module)
    changed = False
    for comp in module.computation_post_order():
        changed |= _flatten_node(module, comp, sites.get(comp, []))
    return changed


class FlattenCallGraph:
    name = "flatten-call-graph"

    def run(self, module) -> bool:
        return run_flatten_call_graph(module)
