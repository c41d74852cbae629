"""The small, language-neutral expression IR the kernel layer hands to renderers.

An :class:`Expr` is an immutable node ``(op, dtype, args, attr)``: ``op`` is an HLO
opcode spelling where one exists (``add``, ``compare``, ``select``, ``convert``,
``exponential`` ...) plus a handful of structural ops:

=============  =======================================================================
op             meaning
=============  =======================================================================
``const``      ``attr`` is the Python value (int / float / bool)
``var``        a loop variable (``attr`` = ``(name, trip_count)``) or a scalar
               (``attr`` = name: reducer accumulators and incoming values)
``load``       ``attr`` = kernel input number; ``args[0]`` = linear element index (s64)
``floordiv``   integer division of non-negative index values (``args[1]`` > 0)
``rem``        remainder of non-negative index values (HLO's ``remainder`` on ints is
               C's; ``rem`` is only made by index arithmetic, where both agree)
``reduce``     an inner loop: ``attr`` is a :class:`ReduceSpec` (loop vars with their
               trip counts, the values to accumulate per input, the combiner as
               expressions over ``var`` nodes ``acc<i>`` / ``x<i>``); ``args`` are the
               init values; the node's value is accumulator ``ReduceSpec.result``
``tuple-get``  ``args[0]`` is a multi-valued ``reduce``; ``attr`` is which value
=============  =======================================================================

``dtype`` is an XLA element type name (``f32``, ``s64``, ``pred``).  Index arithmetic
is ``s64``.  Nodes are hash-consed structurally, so equal sub-expressions are the same
key and renderers CSE them with a dict.  Renderers (``backends/cpu/renderer.py``,
``backends/cuda/renderer.py``) are tables from ``op`` to code.
"""
from __future__ import annotations

from dataclasses import dataclass


class Expr:
    __slots__ = ("op", "dtype", "args", "attr", "_hash")

    def __init__(self, op: str, dtype: str, args: tuple = (), attr=None):
        self.op = op
        self.dtype = dtype
        self.args = tuple(args)
        self.attr = attr
        self._hash = hash((op, dtype, self.args, _hashable(attr)))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Expr) and self._hash == other._hash
                                 and self.op == other.op and self.dtype == other.dtype
                                 and self.attr == other.attr and self.args == other.args)

    def __repr__(self):
        return to_text(self)

    @property
    def is_const(self) -> bool:
        return self.op == "const"


def _hashable(attr):
    if isinstance(attr, float) and attr != attr:
        return "nan"
    if isinstance(attr, (list, dict)):
        return repr(attr)
    return attr


@dataclass(frozen=True)
class ReduceSpec:
    """One inner reduction loop (see the module docstring)."""
    loop_vars: tuple          # ((name, trip_count), ...), outermost first
    values: tuple             # Expr per reduced input, over the loop vars
    combiner: tuple           # Expr per accumulator, over vars acc<i> and x<i>
    acc_names: tuple          # names of the accumulator vars
    x_names: tuple            # names of the incoming-value vars
    result: int = 0           # which accumulator is this node's value
    operand_index: tuple = ()  # a reduce's operand index (Exprs over the loop vars)

    def __hash__(self):
        return hash((self.loop_vars, self.values, self.combiner, self.acc_names,
                     self.x_names, self.result))


def const(value, dtype: str) -> Expr:
    if dtype == "pred":
        value = bool(value)
    elif dtype[0] in "su":
        value = int(value)
    else:
        value = float(value)
    return Expr("const", dtype, (), value)


def var(name: str, dtype: str = "s64") -> Expr:
    return Expr("var", dtype, (), name)


def load(input_number: int, index: Expr, dtype: str) -> Expr:
    return Expr("load", dtype, (index,), input_number)


def to_text(e: Expr, depth: int = 0) -> str:
    if e.op == "const":
        return repr(e.attr)
    if e.op == "var":
        return e.attr[0] if isinstance(e.attr, tuple) else e.attr
    if e.op == "load":
        return f"in{e.attr}[{to_text(e.args[0], depth + 1)}]"
    if depth > 12:
        return f"{e.op}(...)"
    inner = ", ".join(to_text(a, depth + 1) for a in e.args)
    extra = "" if e.attr is None or e.op == "reduce" else f"; {e.attr}"
    return f"{e.op}.{e.dtype}({inner}{extra})"


def walk(root: Expr):
    """Every node under ``root`` once, operands before users (reduce bodies included)."""
    seen: set = set()
    out: list[Expr] = []
    stack = [(root, False)]
    while stack:
        e, done = stack.pop()
        if done:
            out.append(e)
            continue
        if e in seen:
            continue
        seen.add(e)
        stack.append((e, True))
        kids = list(e.args)
        if e.op == "reduce":
            kids += list(e.attr.values) + list(e.attr.combiner)
        for a in reversed(kids):
            if a not in seen:
                stack.append((a, False))
    return out
