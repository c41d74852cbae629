"""The interpreter's executable: :class:`Interpreter` (one module, plans cached per
computation), :func:`execute`, and the argument checks every entry point shares
(``replicas.py`` runs one evaluator per device with the same checks)."""
from __future__ import annotations

import numpy as np

from ...errors import HloError
from .evaluator import Evaluator
from .values import TOKEN, leaves, shape_mismatch


class Interpreter:
    """An executable for one module on the interpreter backend.

    Plans (and their compiled functions) are cached for the life of the object, so the
    module must not be changed while an Interpreter of it is in use: run passes first,
    then make the Interpreter (``hlo_opt.execute`` makes a fresh one per call)."""

    name = "interpreter"

    def __init__(self, module, always_check: bool = False):
        if module.entry is None:
            raise HloError(f"module {module.name} has no entry computation")
        self.module = module
        self.evaluator = Evaluator(always_check=always_check)

    def run_value(self, args):
        """Run the entry computation; returns the (possibly tuple) result value."""
        entry = self.module.entry
        args = check_arguments(entry, args)
        result = self.evaluator.call(entry, args)
        return _own(result, {id(a) for a in leaves(tuple(args))})

    def run(self, args) -> list[np.ndarray]:
        """Run the entry computation; returns the leaves of the result, in order."""
        return [v for v in leaves(self.run_value(args))]


def execute(module, args, always_check: bool = False) -> list[np.ndarray]:
    return Interpreter(module, always_check=always_check).run(args)


def check_arguments(entry, args) -> list:
    """Validate ``args`` against the entry parameters; Python scalars/lists are converted
    to the parameter's dtype, numpy arrays must already have it."""
    params = entry.parameters
    args = list(args)
    if len(args) != len(params):
        raise HloError(f"the entry computation %{entry.name} takes {len(params)} "
                       f"argument(s), got {len(args)}")
    out = []
    for i, (a, p) in enumerate(zip(args, params)):
        a = _coerce(a, p.shape)
        why = shape_mismatch(a, p.shape)
        if why:
            raise HloError(f"argument {i} (parameter %{p.name}): {why}")
        out.append(a)
    return out


def _coerce(a, shape):
    if shape.is_tuple():
        if isinstance(a, (tuple, list)) and len(a) == len(shape.tuple_shapes):
            return tuple(_coerce(v, s) for v, s in zip(a, shape.tuple_shapes))
        return a
    if not shape.is_array():
        return TOKEN if a is None or a is TOKEN else a
    if isinstance(a, (np.ndarray, np.generic)):
        return a
    try:
        return np.asarray(a, dtype=shape.dtype)
    except (TypeError, ValueError):
        return a


def _own(value, borrowed: set[int]):
    """Results never alias the caller's arguments or the plans' cached constants: copy
    views, read-only arrays and numpy scalars into fresh arrays."""
    if isinstance(value, tuple):
        return tuple(_own(v, borrowed) for v in value)
    if value is TOKEN:
        return value
    if isinstance(value, np.ndarray) and value.flags.owndata and value.flags.writeable \
            and id(value) not in borrowed:
        return value
    return np.array(value, copy=True)
