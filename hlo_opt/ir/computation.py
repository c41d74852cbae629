"""Computation: an ordered set of instructions with a root and numbered parameters."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from .instruction import Instruction
from .printing import printer
from .shape import Shape

if TYPE_CHECKING:  # pragma: no cover
    from .module import HloModule


def _preds(inst: Instruction):
    """An iterator over the operands, then the control predecessors, of ``inst``."""
    ctrl = inst._control_predecessors
    return iter(inst.operands + ctrl if ctrl else inst.operands)


class Computation:
    __slots__ = ("_name", "_instructions", "root", "parameters", "module", "execution_thread",
                 "is_entry", "__weakref__")

    def __init__(self, name: str):
        self._name = name
        self._instructions: dict[Instruction, None] = {}
        self.root: Instruction | None = None
        self.parameters: list[Instruction] = []
        self.module: HloModule | None = None
        self.execution_thread: str | None = None
        self.is_entry = False

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if value != self._name:
            if self.module is not None:
                # the module's name index is rebuilt after a plain rename
                # (HloModule.rename_computation renames without costing that)
                self.module._renames += 1
            self._name = value

    # ---- membership -------------------------------------------------------------------
    @property
    def instructions(self) -> list[Instruction]:
        return list(self._instructions)

    def instructions_view(self):
        """A read-only live view of the instructions (no copy; membership, ``len`` and
        iteration), for the hot loops that look without editing."""
        return self._instructions.keys()

    def iter_instructions(self):
        """The instructions in insertion order, without a copy (read-only: do not add or
        remove while iterating; :attr:`instructions` is a copy to edit over)."""
        return iter(self._instructions)

    def instruction_count(self) -> int:
        return len(self._instructions)

    def __contains__(self, inst: Instruction) -> bool:
        return inst in self._instructions

    def add_instruction(self, inst: Instruction, name: str | None = None) -> Instruction:
        """Add ``inst`` (its operands must already be here); gives it a module-unique name."""
        if self.module is not None:
            inst.name = self.module.unique_name(name or inst.name)
        elif name:
            inst.name = name
        inst.parent = self
        self._instructions[inst] = None
        if inst.opcode == "parameter":
            n = inst.parameter_number
            while len(self.parameters) <= n:
                self.parameters.append(None)  # type: ignore[arg-type]
            self.parameters[n] = inst
        return inst

    def add(self, opcode: str, shape: Shape, operands: Iterable[Instruction] = (), *,
            name: str | None = None, attrs: dict | None = None, called=None,
            called_attr: str | None = None, payload: str = "") -> Instruction:
        """Create and add an instruction in one call."""
        inst = Instruction(opcode, shape, operands, attrs, name or opcode, payload, called,
                           called_attr)
        return self.add_instruction(inst)

    def add_parameter(self, shape: Shape, name: str | None = None) -> Instruction:
        n = len(self.parameters)
        return self.add("parameter", shape, name=name or f"param_{n}", payload=str(n))

    def set_instructions(self, insts) -> None:
        """Bulk: the computation holds exactly ``insts`` (in this order; each already has
        this computation as ``parent``), the parser's fast path."""
        self._instructions = dict.fromkeys(insts)

    def unlink(self, inst: Instruction) -> None:
        """Take ``inst`` out of this computation only: operands, users and names stay as
        they are (graph surgery that moves it elsewhere, or drops it wholesale)."""
        del self._instructions[inst]

    def link(self, inst: Instruction) -> None:
        """Put an instruction that keeps its name into this computation (``parent`` set;
        the counterpart of :meth:`unlink`)."""
        inst.parent = self
        self._instructions[inst] = None

    def remove_parameter(self, param: Instruction) -> int:
        """Remove an unused parameter and renumber the later ones; returns its number."""
        n = int(param.payload)
        if param.user_count:
            raise ValueError(f"parameter %{param.name} still has users")
        del self._instructions[param]
        if self.module is not None:
            self.module.release_name(param.name)
        param.parent = None
        del self.parameters[n]
        for k in range(n, len(self.parameters)):
            self.parameters[k].payload = str(k)
        return n

    def remove_instruction(self, inst: Instruction) -> None:
        """Remove an instruction that has no users (and is not the root)."""
        if inst.user_count:
            raise ValueError(f"cannot remove %{inst.name}: it still has users "
                             f"{[u.name for u in inst.users]}")
        if inst is self.root:
            raise ValueError(f"cannot remove the root %{inst.name}")
        inst.detach_operands()
        for succ in inst.control_successors:
            succ.control_predecessors = [p for p in succ.control_predecessors if p is not inst]
        del self._instructions[inst]
        if self.module is not None:
            self.module.release_name(inst.name)
        inst.parent = None

    def replace_instruction(self, old: Instruction, new: Instruction) -> None:
        """Redirect every use of ``old`` to ``new`` (added here if needed), then drop ``old``."""
        if new.parent is None:
            self.add_instruction(new)
        old.replace_all_uses_with(new)
        if old.opcode != "parameter" and old.user_count == 0 and old is not self.root:
            self.remove_instruction(old)

    def set_root(self, inst: Instruction) -> None:
        self.root = inst

    # ---- order ------------------------------------------------------------------------
    def post_order(self) -> list[Instruction]:
        """Operands before users; instructions in insertion order seed the walk (XLA's
        MakeInstructionPostOrder), so text already in def-use order keeps its order."""
        # Instructions hash by identity.  Fast path: an instruction whose operands (and
        # control predecessors) are all placed already is placed at once, which is what the
        # depth-first walk would do; text in def-use order never takes the slow path.
        visited: set[Instruction] = set()
        order: list[Instruction] = []
        place = order.append
        mark = visited.add
        for start in self._instructions:
            if start in visited:
                continue
            for op in start.operands:
                if op not in visited:
                    break
            else:
                for op in start._control_predecessors:
                    if op not in visited:
                        break
                else:
                    mark(start)
                    place(start)
                    continue
            # Depth-first from `start`: operands first (in order), then control preds.
            mark(start)
            stack = [(start, _preds(start))]
            while stack:
                inst, preds = stack[-1]
                for op in preds:
                    if op not in visited:
                        mark(op)
                        stack.append((op, _preds(op)))
                        break
                else:
                    stack.pop()
                    place(inst)
        return order

    def called_computations(self) -> list["Computation"]:
        seen: dict[Computation, None] = {}
        for inst in self._instructions:
            for c in inst.called:
                seen[c] = None
        return list(seen)

    def has_side_effect(self) -> bool:
        """Does any instruction here have a side effect (XLA's
        ``HloComputation::HasSideEffect``, called computations included)?"""
        return any(i.has_side_effect() for i in self._instructions)

    @property
    def signature_shape(self) -> Shape:
        return self.root.shape

    # ---- text (printed by hlo_opt.text.printer) --------------------------------------
    def to_text(self, operand_shapes: bool = True, print_metadata: bool = True,
                large_constants: bool = True) -> str:
        return printer("computation")(self, operand_shapes, print_metadata, large_constants)

    def __repr__(self):
        return f"<Computation %{self.name} ({len(self._instructions)} instructions)>"
