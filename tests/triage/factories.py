"""Pipeline factories for the triage tests: top-level classes, so that they pickle into
worker processes and Ray tasks like hlo_opt.passes_api.PipelineFactory does."""
from __future__ import annotations

from hlo_opt.errors import HloError
from hlo_opt.passes_api import PipelineFactory
from hlo_opt.pipeline import Fixpoint, Pipeline


def find_pipeline(root, name: str):
    """The first (sub-)pipeline called ``name`` in a built pipeline (through fixpoints)."""
    stack = [root]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Fixpoint):
            stack.append(item.body)
        elif isinstance(item, Pipeline):
            if item.name == name:
                return item
            stack.extend(item.items)
    raise KeyError(name)


class Inserted:
    """A named pipeline with a registered pass inserted into sub-pipeline ``where`` at
    ``index`` (negative: from the end, -1 = last)."""

    def __init__(self, pipeline: str, where: str, index: int, pass_name: str):
        self.base = PipelineFactory(pipeline=pipeline)
        self.where, self.index, self.pass_name = where, index, pass_name
        self.label = pipeline

    def __call__(self, options=None):
        from passes.registry import create_pass
        root = self.base(options)
        target = find_pipeline(root, self.where)
        index = self.index if self.index >= 0 else len(target.items) + 1 + self.index
        target.items.insert(index, create_pass(self.pass_name))
        return root

    def single(self, name, options=None):
        return self.base.single(name, options)

    def __repr__(self):
        return f"Inserted({self.label}, {self.where}, {self.index}, {self.pass_name})"


def wrong_max_rule():
    """A deliberately wrong algsimp rule: maximum(A, B) => A."""
    from hlo_opt.rewrite.rules import P, Rule, Rules, X

    def fn(ctx, a, b):
        return a
    return Rules([Rule(P("maximum", X("a"), X("b")), fn, "WRONG max(A, B) => A")])


class WrongAlgsimp:
    """``--passes``/``--pipeline`` with every algsimp given the wrong rule above (first)."""

    def __init__(self, passes=None, pipeline=None):
        self.base = PipelineFactory(passes=passes, pipeline=pipeline)
        self.label = self.base.label

    def __call__(self, options=None):
        from passes.algsimp import RULES, AlgebraicSimplifier
        root = self.base(options)
        rules = wrong_max_rule() + RULES
        stack = [root]
        while stack:
            item = stack.pop()
            if isinstance(item, Fixpoint):
                stack.append(item.body)
            elif isinstance(item, Pipeline):
                stack.extend(item.items)
            elif isinstance(item, AlgebraicSimplifier):
                item.rules = rules
        if isinstance(root, AlgebraicSimplifier):
            root.rules = rules
        return root

    def single(self, name, options=None):
        return self.base.single(name, options)

    def __repr__(self):
        return f"WrongAlgsimp({self.base!r})"


class ExpandFoo:
    """A test pass: custom-call "Foo"(x, y) => add(x, y).  The interpreter cannot run
    "Foo", so a pipeline without this pass breaks at run time."""

    name = "test-expand-foo"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            for inst in comp.post_order():
                if inst.opcode == "custom-call" and inst.custom_call_target == "Foo":
                    new = comp.add("add", inst.shape, list(inst.operands))
                    comp.replace_instruction(inst, new)
                    changed = True
        return changed


class Listed:
    """A transforms pipeline of pass objects and registered names (test passes too)."""

    def __init__(self, *items):
        self.items = items
        self.label = "transforms_pipeline"

    def __call__(self, options=None):
        from passes.registry import create_pass
        return Pipeline("transforms_pipeline",
                        [i() if isinstance(i, type) else create_pass(i) if isinstance(i, str)
                         else i for i in self.items])

    def single(self, name, options=None):
        return PipelineFactory(passes=name).single(name, options)

    def __repr__(self):
        return f"Listed{self.items!r}"


__all__ = ["ExpandFoo", "HloError", "Inserted", "Listed", "WrongAlgsimp", "find_pipeline"]
