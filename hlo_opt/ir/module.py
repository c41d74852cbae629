"""HloModule: computations, the entry, module-level attributes and unique names."""
from __future__ import annotations

import re

from .computation import Computation
from .instruction import Instruction

_SUFFIX_RE = re.compile(r"^(.*?)(?:\.(\d+))?$")


class HloModule:
    """A module.  ``header_attrs`` keeps module attributes verbatim (in input order)."""

    def __init__(self, name: str):
        self.name = name
        self.computations: list[Computation] = []
        self.entry: Computation | None = None
        self.header_attrs: dict[str, str] = {}
        self.stack_frames: str = ""  # FileNames/FunctionNames/... tables, verbatim
        self.filename: str = "<string>"
        self._names: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    # ---- names ------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """``base`` if unused, else ``base.N`` with a fresh N (XLA's NameUniquer spirit)."""
        if base not in self._names:
            self._names.add(base)
            return base
        stem = _SUFFIX_RE.match(base).group(1) or base
        n = self._next_suffix.get(stem, 1)
        while f"{stem}.{n}" in self._names:
            n += 1
        self._next_suffix[stem] = n + 1
        name = f"{stem}.{n}"
        self._names.add(name)
        return name

    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    def release_name(self, name: str) -> None:
        self._names.discard(name)

    # ---- computations -----------------------------------------------------------------
    def add_computation(self, comp: Computation, entry: bool = False,
                        before: Computation | None = None) -> Computation:
        if comp.module is not self:
            for inst in comp.instructions:
                inst.name = self.unique_name(inst.name)
        comp.module = self
        comp.name = self._unique_computation_name(comp.name)
        if before is not None and before in self.computations:
            self.computations.insert(self.computations.index(before), comp)
        else:
            self.computations.append(comp)
        if entry:
            if self.entry is not None:
                self.entry.is_entry = False
            self.entry = comp
            comp.is_entry = True
        return comp

    def _unique_computation_name(self, name: str) -> str:
        taken = {c.name for c in self.computations}
        if name not in taken:
            return name
        stem = _SUFFIX_RE.match(name).group(1) or name
        n = 1
        while f"{stem}.{n}" in taken:
            n += 1
        return f"{stem}.{n}"

    def remove_computation(self, comp: Computation) -> None:
        self.computations.remove(comp)
        for inst in comp.instructions:
            self._names.discard(inst.name)
        comp.module = None

    def computation(self, name: str) -> Computation:
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(name)

    def computation_post_order(self) -> list[Computation]:
        """Callees before callers; stored order breaks ties."""
        seen: set[int] = set()
        order: list[Computation] = []
        for start in self.computations:
            if id(start) in seen:
                continue
            stack = [(start, False)]
            while stack:
                comp, expanded = stack.pop()
                if expanded:
                    order.append(comp)
                    continue
                if id(comp) in seen:
                    continue
                seen.add(id(comp))
                stack.append((comp, True))
                for callee in reversed(comp.called_computations()):
                    if id(callee) not in seen and callee.module is self:
                        stack.append((callee, False))
        if self.entry is not None and order and order[-1] is not self.entry \
                and not any(self.entry in c.called_computations() for c in self.computations):
            order.remove(self.entry)
            order.append(self.entry)
        return order

    def instructions(self):
        for comp in self.computations:
            yield from comp.instructions

    def instruction_count(self) -> int:
        return sum(c.instruction_count() for c in self.computations)

    def callers(self) -> dict[Computation, list[Instruction]]:
        """computation -> instructions that call it."""
        out: dict[Computation, list[Instruction]] = {c: [] for c in self.computations}
        for comp in self.computations:
            for inst in comp.instructions:
                for callee in inst.called:
                    out.setdefault(callee, []).append(inst)
        return out

    def fusion_computations(self) -> set[Computation]:
        return {c for comp in self.computations for inst in comp.instructions
                if inst.opcode == "fusion" for c in inst.called}

    # ---- text -------------------------------------------------------------------------
    def entry_computation_layout_text(self) -> str:
        entry = self.entry
        params = ", ".join(p.shape.to_text() for p in entry.parameters if p is not None)
        return "{(" + params + ")->" + entry.root.shape.to_text() + "}"

    def to_text(self, operand_shapes: bool = True, print_metadata: bool = True,
                large_constants: bool = True) -> str:
        from ..text.printer import module_to_text
        return module_to_text(self, operand_shapes, print_metadata, large_constants)

    def __str__(self):
        return self.to_text()

    def clone(self, suffix: str = "") -> "HloModule":
        """A deep copy (by printing and re-parsing is avoided: a direct graph copy)."""
        from .clone import clone_module
        return clone_module(self, suffix)

    def __repr__(self):
        return f"<HloModule {self.name}: {len(self.computations)} computations>"
