"""HloModule: computations, the entry, module-level attributes and unique names."""
from __future__ import annotations

import contextlib
import re

from .computation import Computation
from .config import HloModuleConfig
from .instruction import Instruction
from .printing import printer

_SUFFIX_RE = re.compile(r"^(.*?)(?:\.(\d+))?$")


class HloModule:
    """A module.  ``header_attrs`` keeps module attributes verbatim (in input order)."""

    def __init__(self, name: str, config: HloModuleConfig | None = None):
        self.name = name
        # debug options + target device (XLA's HloModuleConfig)
        self.config: HloModuleConfig = config if config is not None else HloModuleConfig()
        self._computations = _ComputationList()
        self.entry: Computation | None = None
        self.header_attrs: dict[str, str] = {}
        self.stack_frames: str = ""  # FileNames/FunctionNames/... tables, verbatim
        self.filename: str = "<string>"
        self.source = None  # text.source_map.SourceMap: where the parser read each instruction
        self._names: set[str] = set()
        self._next_suffix: dict[str, int] = {}
        self._stems: dict[str, str] = {}  # name -> its stem (memo of _SUFFIX_RE)
        self._comp_index: _ComputationIndex | None = None
        self._renames = 0  # plain renames of this module's computations (Computation.name)
        self._pending_drop: set | None = None  # within computation_batch: dropped ones

    # ---- the computation list ---------------------------------------------------------
    @property
    def computations(self) -> list[Computation]:
        """The computations, in order.  A plain list to its users; it counts its in-place
        changes so the name index below knows when to rebuild."""
        return self._computations

    @computations.setter
    def computations(self, value) -> None:
        if value is not self._computations:  # (``+=`` assigns the same list back)
            self._computations = _ComputationList(value)
        self._comp_index = None

    # ---- names ------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """``base`` if unused, else ``base.N`` with a fresh N (XLA's NameUniquer spirit)."""
        if base not in self._names:
            self._names.add(base)
            return base
        stem = self._stems.get(base)
        if stem is None:
            stem = self._stems[base] = _SUFFIX_RE.match(base).group(1) or base
        n = self._next_suffix.get(stem, 1)
        name = f"{stem}.{n}"
        while name in self._names:
            n += 1
            name = f"{stem}.{n}"
        self._next_suffix[stem] = n + 1
        self._names.add(name)
        return name

    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    def reserve_names(self, names) -> None:
        self._names.update(names)

    def name_count(self) -> int:
        """How many instruction names are taken."""
        return len(self._names)

    def release_name(self, name: str) -> None:
        self._names.discard(name)

    # ---- computations -----------------------------------------------------------------
    def add_computation(self, comp: Computation, entry: bool = False,
                        before: Computation | None = None) -> Computation:
        if comp.module is not self:
            for inst in comp.instructions:
                inst.name = self.unique_name(inst.name)
        index = self._index()
        name = index.unique(comp.name)
        if comp.module is None:
            comp._name = name  # in no module's list, so no index knows its old name
        else:
            comp.name = name  # it may be listed somewhere already: a real rename
        comp.module = self
        if before is not None and before in self._computations:
            self._computations.insert(self._computations.index(before), comp)
        else:
            self._computations.append(comp)
        index.added(comp, self._computations)
        if entry:
            if self.entry is not None:
                self.entry.is_entry = False
            self.entry = comp
            comp.is_entry = True
        return comp

    def _unique_computation_name(self, name: str) -> str:
        """``name`` if no computation has it, else ``stem.N`` with the smallest free N."""
        return self._index().unique(name)

    def has_computation_name(self, name: str) -> bool:
        return name in self._index().names

    def rename_computation(self, comp: Computation, name: str, unique: bool = False) -> None:
        """``comp.name = name`` for a computation of this module, keeping the name index
        current (a plain assignment works too: the index is rebuilt on its next use).
        ``unique``: ``name`` or, if another computation has it, ``stem.N`` as
        :meth:`add_computation` picks."""
        index = self._index()
        if comp.module is not self or index.by_name.get(comp.name) is not comp:
            # not indexed under its name (not listed here, or a duplicate name): the
            # plain way, which has the index rebuilt on its next use
            if unique:
                taken = {c.name for c in self._computations if c is not comp}
                name = _first_free(taken, name, 1)
            comp.name = name
            return
        index.removed(comp)
        comp._name = index.unique(name) if unique else name
        index.added(comp, self._computations)

    def remove_computation(self, comp: Computation) -> None:
        index = self._index()
        self._computations.remove(comp)
        index.removed(comp)
        index.version = self._computations.version
        for inst in comp.instructions:
            self._names.discard(inst.name)
        comp.module = None

    def drop_computation(self, comp: Computation) -> None:
        """Remove ``comp`` and release its instructions' names; within
        :meth:`computation_batch` it leaves the list at the end of the batch (its
        ``module`` is None from now on)."""
        for inst in comp._instructions:
            self.release_name(inst.name)
        if self._pending_drop is not None:
            self._pending_drop.add(comp)
            comp.module = None
            return
        self.remove_computation(comp)

    @property
    def in_computation_batch(self) -> bool:
        return self._pending_drop is not None

    @contextlib.contextmanager
    def computation_batch(self):
        """Within the block, :meth:`drop_computation` defers the removals: the dropped
        computations leave the list in one O(#computations) sweep at the end (a fusion
        pass drops one per merge).  Nested batches join the outer one."""
        if self._pending_drop is not None:
            yield
            return
        self._pending_drop = set()
        try:
            yield
        finally:
            dead, self._pending_drop = self._pending_drop, None
            self.remove_computations(dead)

    def remove_computations(self, comps) -> None:
        """Remove every computation in the set ``comps`` in one sweep, O(#computations).
        Unlike :meth:`remove_computation` their instructions' names stay reserved (the
        caller releases them) and their ``module`` is left as it is."""
        if not comps:
            return
        index = self._index()
        kept, gone = [], []
        for c in self._computations:
            (gone if c in comps else kept).append(c)
        if not gone:
            return
        self._computations[:] = kept
        for c in gone:
            index.removed(c)
        index.version = self._computations.version

    def computation(self, name: str) -> Computation:
        comp = self._index().by_name.get(name)
        if comp is None:
            raise KeyError(name)
        return comp

    def _index(self) -> "_ComputationIndex":
        """The name index of the computations, rebuilt when the list changed behind the
        module's back (in place or by assignment) or any computation was renamed."""
        index = self._comp_index
        comps = self._computations
        if index is None or index.stale or index.version != comps.version or \
                index.renames != self._renames:
            index = self._comp_index = _ComputationIndex(comps, self._renames)
        return index

    def computation_post_order(self, computations=None,
                               callees: dict | None = None) -> list[Computation]:
        """Callees before callers; stored order breaks ties; the entry last when nothing
        calls it.  ``computations`` (default: all) and ``callees`` (computation -> the ones
        it calls, where a caller already knows them) let graph edits reuse this order."""
        comps = self.computations if computations is None else computations
        seen: set[int] = set()
        order: list[Computation] = []

        def called(comp):
            known = callees.get(comp) if callees is not None else None
            return comp.called_computations() if known is None else list(known)

        for start in comps:
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
                for callee in reversed(called(comp)):
                    if id(callee) not in seen and callee.module is self:
                        stack.append((callee, False))
        entry = self.entry
        if entry is not None and order and order[-1] is not entry \
                and not any(entry in called(c) for c in comps):
            order.remove(entry)
            order.append(entry)
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

    def nonfusion_computations(self, post_order: bool = False) -> list[Computation]:
        """XLA's ``MakeNonfusionComputations``: every computation no fusion calls, in
        stored order (``post_order``: callees first, :meth:`computation_post_order`)."""
        fused = self.fusion_computations()
        comps = self.computation_post_order() if post_order else self.computations
        return [c for c in comps if c not in fused]

    def fusion_computations(self) -> set[Computation]:
        return {c for comp in self.computations for inst in comp.instructions
                if inst.opcode == "fusion" for c in inst.called}

    # ---- text (printed by hlo_opt.text.printer) --------------------------------------
    def to_text(self, operand_shapes: bool = True, print_metadata: bool = True,
                large_constants: bool = True, syntax_sugar_async_ops: bool = False) -> str:
        return printer("module")(self, operand_shapes, print_metadata, large_constants,
                                 syntax_sugar_async_ops)

    def __str__(self):
        return self.to_text()

    def clone(self, suffix: str = "") -> "HloModule":
        """A deep copy (by printing and re-parsing is avoided: a direct graph copy)."""
        from .clone import clone_module
        return clone_module(self, suffix)

    def __repr__(self):
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


def _first_free(taken, name: str, start: int) -> str:
    """``name`` if not in ``taken``, else ``stem.N`` for the first free N >= ``start``
    (``stem``: ``name`` without a ``.digits`` suffix)."""
    if name not in taken:
        return name
    stem = _SUFFIX_RE.match(name).group(1) or name
    n = start
    while f"{stem}.{n}" in taken:
        n += 1
    return f"{stem}.{n}"


class _ComputationList(list):
    """``HloModule.computations``: a list whose ``version`` counts in-place changes."""

    def __init__(self, *args):
        super().__init__(*args)
        self.version = 0

    def _changed(method):  # noqa: N805 - a decorator for the mutating methods below
        def wrapper(self, *args, **kwargs):
            self.version += 1
            return method(self, *args, **kwargs)
        wrapper.__name__ = method.__name__
        wrapper.__doc__ = method.__doc__
        return wrapper

    append = _changed(list.append)
    extend = _changed(list.extend)
    insert = _changed(list.insert)
    remove = _changed(list.remove)
    pop = _changed(list.pop)
    clear = _changed(list.clear)
    sort = _changed(list.sort)
    reverse = _changed(list.reverse)
    __setitem__ = _changed(list.__setitem__)
    __delitem__ = _changed(list.__delitem__)
    __iadd__ = _changed(list.__iadd__)
    __imul__ = _changed(list.__imul__)
    del _changed


class _ComputationIndex:
    """Names of a module's computations, kept in step with the module's own edits:
    ``names`` (live name -> how many computations have it), ``by_name`` (name -> the
    first computation with it) and, per stem, a number below which every ``stem.N`` is
    taken, so picking a unique name is O(1) amortized yet gives exactly what scanning
    N = 1, 2, ... over every computation gives.  ``stale`` asks for a rebuild."""

    def __init__(self, comps: _ComputationList, renames: int):
        self.version = comps.version
        self.renames = renames
        self.stale = False
        self.names: dict[str, int] = {}
        self.by_name: dict[str, Computation] = {}
        self.hint: dict[str, int] = {}
        for c in comps:
            self.names[c.name] = self.names.get(c.name, 0) + 1
            self.by_name.setdefault(c.name, c)

    def unique(self, name: str) -> str:
        if name not in self.names:
            return name
        stem = _SUFFIX_RE.match(name).group(1) or name
        unique = _first_free(self.names, name, self.hint.get(stem, 1))
        self.hint[stem] = int(unique[len(stem) + 1:])  # every stem.K below it is taken
        return unique

    def added(self, comp: Computation, comps: _ComputationList) -> None:
        """``comp`` (already in ``comps``) now has its name."""
        name = comp.name
        if name in self.names:
            self.stale = True  # a duplicate name: which one is first is left to a rebuild
        self.names[name] = self.names.get(name, 0) + 1
        self.by_name.setdefault(name, comp)
        self.version = comps.version

    def removed(self, comp: Computation) -> None:
        """``comp`` (which was in the list under its current name) is gone."""
        name = comp.name
        left = self.names.get(name, 0) - 1
        if left > 0:
            self.names[name] = left
            self.stale = True  # another computation keeps the name: rebuild by_name
            return
        self.names.pop(name, None)
        self.by_name.pop(name, None)
        m = _SUFFIX_RE.match(name)
        stem, digits = m.group(1), m.group(2)
        if digits is not None and stem and str(int(digits)) == digits:
            n = int(digits)
            if 1 <= n < self.hint.get(stem, 1):
                self.hint[stem] = n
