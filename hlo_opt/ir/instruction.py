"""Instruction: one HLO operation, with operands and users kept in both directions."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .attributes import ATTR_PARSERS, AttrSyntaxError, typed_to_text
from .dimension_numbers import (DotDimensionNumbers, GatherDimensionNumbers,
                                ScatterDimensionNumbers)
from .opcodes import (ELEMENTWISE, SIDE_EFFECT_ALWAYS, SIDE_EFFECT_LAYOUT_CONSTRAINED,
                      SIDE_EFFECT_POSSIBLE)
from .printing import printer
from .shape import Shape
from .types import BIT_WIDTH

if TYPE_CHECKING:  # pragma: no cover
    from .computation import Computation
    from .literal import Literal


class Instruction:
    """An HLO instruction.

    ``attrs`` maps attribute name -> verbatim text (in input order); typed values come from
    :meth:`attr`, parsed on first use and cached.  Called computations are real references
    (``called``), so renaming a computation never breaks a caller.
    """

    __slots__ = ("name", "opcode", "shape", "operands", "_users", "attrs", "parent", "called",
                 "called_attr", "payload", "_literal", "_parsed", "_control_predecessors",
                 "_control_successors",
                 "__weakref__")

    def __init__(self, opcode: str, shape: Shape, operands=(), attrs: dict | None = None,
                 name: str | None = None, payload: str = "", called=None,
                 called_attr: str | None = None):
        self.name = name or opcode
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Instruction] = list(operands)
        self._users: dict[Instruction, None] = {}
        self.attrs: dict[str, str] = attrs if attrs is not None else {}
        self.parent: Computation | None = None
        self.called: list[Computation] = list(called) if called else []
        self.called_attr = called_attr  # attribute spelling for ``called`` (to_apply, calls, ...)
        self.payload = payload  # text inside the parens for constant/parameter
        self._literal: Literal | None = None
        self._parsed: dict | None = None
        self._control_predecessors: list[Instruction] = []
        self._control_successors: dict[Instruction, None] = {}
        for op in self.operands:
            op._users[self] = None

    # ---- graph ------------------------------------------------------------------------
    @property
    def users(self) -> list["Instruction"]:
        return list(self._users)

    @property
    def user_count(self) -> int:
        return len(self._users)

    @property
    def users_view(self):
        """A read-only live view of the users (no copy; ``len``, membership, iteration)."""
        return self._users.keys()

    def iter_users(self):
        """The users without a copy (read-only: do not edit edges while iterating)."""
        return iter(self._users)

    def has_user(self, user: "Instruction") -> bool:
        return user in self._users

    # Low-level edge edits for graph surgery that moves instructions (fusion): the
    # caller keeps operands and users consistent; everything else uses the methods above.
    def add_user(self, user: "Instruction") -> None:
        self._users[user] = None

    def remove_user(self, user: "Instruction") -> None:
        self._users.pop(user, None)

    def take_users(self) -> dict:
        """Forget every user (returned, in order) so that they can re-register."""
        users, self._users = self._users, {}
        return users

    def operand(self, i: int) -> "Instruction":
        return self.operands[i]

    def replace_operand(self, index: int, new: "Instruction") -> None:
        old = self.operands[index]
        if old is new:
            return
        self.operands[index] = new
        new._users[self] = None
        if old not in self.operands:
            old._users.pop(self, None)

    def replace_operand_with(self, old: "Instruction", new: "Instruction") -> bool:
        changed = False
        for i, op in enumerate(self.operands):
            if op is old:
                self.operands[i] = new
                changed = True
        if changed and old is not new:
            new._users[self] = None
            old._users.pop(self, None)
        return changed

    def set_operands(self, operands) -> None:
        for op in self.operands:
            op._users.pop(self, None)
        self.operands = list(operands)
        for op in self.operands:
            op._users[self] = None

    def replace_all_uses_with(self, new: "Instruction") -> None:
        """Point every user (and the parent's root) at ``new`` instead of ``self``."""
        if new is self:
            return
        for user in list(self._users):
            if user is new:
                continue  # new = f(self): keep the edge
            user.replace_operand_with(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def detach_operands(self) -> None:
        for op in self.operands:
            op._users.pop(self, None)
        self.operands = []
        self.control_predecessors = []

    @property
    def control_predecessors(self) -> list["Instruction"]:
        """Read-only view by convention: assign a new list (or use add_control_predecessor)
        so the reverse edges (``control_successors``) stay right."""
        return self._control_predecessors

    @control_predecessors.setter
    def control_predecessors(self, preds) -> None:
        for p in self._control_predecessors:
            p._control_successors.pop(self, None)
        self._control_predecessors = list(preds)
        for p in self._control_predecessors:
            p._control_successors[self] = None

    def add_control_predecessor(self, pred: "Instruction") -> None:
        if pred not in self._control_predecessors:
            self._control_predecessors.append(pred)
            pred._control_successors[self] = None

    @property
    def control_successors(self) -> list["Instruction"]:
        return list(self._control_successors)

    @property
    def has_control_edges(self) -> bool:
        """A control predecessor or a control successor."""
        return bool(self._control_predecessors or self._control_successors)

    @property
    def has_control_successors(self) -> bool:
        return bool(self._control_successors)

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    # ---- side effects (the one definition: XLA's HasSideEffect) ----------------------
    def has_side_effect_no_recurse(self) -> bool:
        """XLA's ``HasSideEffectNoRecurse``: this instruction's own effect."""
        op = self.opcode
        if op not in SIDE_EFFECT_POSSIBLE:
            return False
        if op in SIDE_EFFECT_ALWAYS:
            return True
        if op == "custom-call":
            return self.attrs.get("custom_call_has_side_effect", "").strip() == "true"
        if op in SIDE_EFFECT_LAYOUT_CONSTRAINED and \
                self.attrs.get("constrain_layout", "").strip() == "true":
            return True
        return "channel_id" in self.attrs

    def has_side_effect(self) -> bool:
        """XLA's ``HasSideEffect``: its own effect, or a called computation holding an
        instruction with one."""
        if self.has_side_effect_no_recurse():
            return True
        return any(c.has_side_effect() for c in self.called)

    # ---- attributes -------------------------------------------------------------------
    def attr(self, name: str, default=None):
        """Typed value of an attribute (parsed once), or ``default`` when absent."""
        raw = self.attrs.get(name)
        if raw is None:
            return default
        if self._parsed is not None and name in self._parsed:
            return self._parsed[name]
        parser = ATTR_PARSERS.get(name)
        if parser is None:
            return raw
        try:
            value = parser(raw)
        except AttrSyntaxError as e:
            from ..errors import HloVerifyError
            raise HloVerifyError(f"bad attribute {name}={raw} on %{self.name}: {e}") from None
        if self._parsed is None:
            self._parsed = {}
        self._parsed[name] = value
        return value

    def set_attr(self, name: str, value) -> None:
        """Set a typed (or verbatim text) attribute; printed canonically."""
        self.attrs[name] = typed_to_text(name, value)
        if self._parsed is not None:
            self._parsed.pop(name, None)

    def remove_attr(self, name: str) -> None:
        self.attrs.pop(name, None)
        if self._parsed is not None:
            self._parsed.pop(name, None)

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    @property
    def dimensions(self) -> tuple[int, ...]:
        return self.attr("dimensions", ())

    @property
    def parameter_number(self) -> int:
        return int(self.payload)

    @property
    def literal(self) -> Literal:
        if self._literal is None:
            from .literal import LiteralSyntaxError, parse_literal
            try:
                self._literal = parse_literal(self.payload, self.shape)
            except LiteralSyntaxError as e:
                from ..errors import HloVerifyError
                raise HloVerifyError(f"bad constant in %{self.name} = {self.shape.to_text()} "
                                     f"constant({self.payload[:80]}): {e}") from None
        return self._literal

    def set_literal(self, literal: Literal) -> None:
        self._literal = literal
        self.payload = literal.to_text()

    @property
    def cached_literal(self) -> "Literal | None":
        """The literal if it was parsed (or set) already, else None: never parses."""
        return self._literal

    def cache_literal(self, literal: "Literal | None") -> None:
        """Remember ``literal`` as the value of the payload text (which it must match)."""
        self._literal = literal

    def cache_attr(self, name: str, value) -> None:
        """Remember ``value`` as the typed value of attribute ``name`` (which it must
        match: what :meth:`attr` would parse from the text), sparing the parse."""
        if self._parsed is None:
            self._parsed = {}
        self._parsed[name] = value

    def copy_caches_from(self, other: "Instruction", attrs_filter=None) -> None:
        """Share ``other``'s parsed literal and (those ``attrs_filter`` keeps of) its
        parsed attributes: a copy need not parse them again."""
        self._literal = other._literal
        parsed = other._parsed
        if parsed and attrs_filter is not None:
            self._parsed = {k: v for k, v in parsed.items() if attrs_filter(v)} or None

    @property
    def fused_computation(self) -> "Computation":
        return self.called[0]

    def is_elementwise(self) -> bool:
        """XLA's HloInstruction::IsElementwise: the elementwise opcodes, copy and map; a
        bitcast-convert only between types of one bit width (otherwise it adds or drops a
        minor dimension); a fusion when every instruction of its body is."""
        op = self.opcode
        if op == "bitcast-convert":
            operands = self.operands
            return bool(operands) and BIT_WIDTH.get(self.shape.element_type) == \
                BIT_WIDTH.get(operands[0].shape.element_type)
        if op in ELEMENTWISE or op == "copy" or op == "map":
            return True
        if op == "fusion":
            any_ = False
            for i in self.called[0].iter_instructions():
                if i.opcode != "parameter":
                    if not i.is_elementwise():
                        return False
                    any_ = True
            return any_
        return False

    @property
    def is_multi_output_fusion(self) -> bool:
        """XLA's IsMultiOutputFusion: a fusion whose fused root is a tuple."""
        return self.opcode == "fusion" and self.called[0].root.opcode == "tuple"

    def fusion_outputs(self) -> list["Instruction"]:
        """GetOutputsOfFusible: the fused values a fusion returns (the instruction itself
        for a non-fusion)."""
        if self.opcode != "fusion":
            return [self]
        root = self.called[0].root
        return list(root.operands) if root.opcode == "tuple" else [root]

    @property
    def to_apply(self) -> "Computation":
        return self.called[0]

    @property
    def fusion_kind(self) -> str:
        """A fusion's kind (``kLoop`` when not written)."""
        return self.attrs.get("kind", "kLoop")

    @property
    def dot_dimension_numbers(self) -> DotDimensionNumbers:
        return DotDimensionNumbers.of(self)

    @property
    def gather_dimension_numbers(self) -> GatherDimensionNumbers:
        return GatherDimensionNumbers.of(self)

    @property
    def scatter_dimension_numbers(self) -> ScatterDimensionNumbers:
        return ScatterDimensionNumbers.of(self)

    @property
    def comparison_direction(self) -> str | None:
        """A compare's ``direction`` (EQ, NE, LT, LE, GT, GE; the verifier checks it)."""
        return self.attrs.get("direction")

    @property
    def custom_call_target(self) -> str:
        return self.attr("custom_call_target", "")

    # ---- text (printed by hlo_opt.text.printer) --------------------------------------
    def to_text(self, operand_shapes: bool = True, print_metadata: bool = True,
                large_constants: bool = True) -> str:
        return printer("instruction")(self, operand_shapes, print_metadata, large_constants)

    def __repr__(self):
        return f"<{self.opcode} %{self.name}>"

    # ---- cloning ----------------------------------------------------------------------
    def clone_with(self, operands, shape: Shape | None = None, name: str | None = None
                   ) -> "Instruction":
        """A detached copy with other operands (same attributes, payload, called)."""
        inst = Instruction(self.opcode, shape or self.shape, operands, dict(self.attrs),
                           name or self.name, self.payload, self.called, self.called_attr)
        inst._literal = self._literal
        return inst
