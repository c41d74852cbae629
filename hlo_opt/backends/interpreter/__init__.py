"""The numpy reference interpreter: the oracle every pass and backend is judged against.

    exe = Interpreter(module)          # plans are cached per computation
    leaves = exe.run([x, w])           # list of numpy arrays: the result's leaves in order

    # several replicas / partitions, one thread each (replicas.py):
    per_device = execute_replicated(module, [args_dev0, args_dev1], num_replicas=2)

Handlers live in small modules by family and register themselves in ``registry``; any
``ops_*.py`` module of this package is imported automatically, so a new family is one
new file.
"""
from __future__ import annotations

import importlib
import pkgutil
import warnings

import numpy as np

from ...errors import HloError
from . import ops_collectives, ops_control, ops_convert, ops_dot, ops_elementwise, ops_movement, ops_reduction  # noqa: F401
from .evaluator import Evaluator, InterpreterError
from .registry import FAST, HANDLERS, register, register_fast
from .replicas import (CollectiveAbortedError, CollectiveDeadlockError, CollectiveError,
                       CollectiveTimeoutError, ReplicaGroupError, ReplicatedInterpreter,
                       execute_replicated)
from .values import TOKEN, leaves, shape_mismatch


def _import_op_modules() -> list[str]:
    failed = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("ops_"):
            try:
                importlib.import_module(f"{__name__}.{info.name}")
            except Exception as e:  # noqa: BLE001 - one broken family must not take
                failed.append(f"{info.name}: {type(e).__name__}: {e}")  # the rest down
                warnings.warn(f"interpreter handlers {info.name} failed to import: {e}",
                              RuntimeWarning, stacklevel=2)
    return failed


IMPORT_FAILURES = _import_op_modules()


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


__all__ = ["CollectiveAbortedError", "CollectiveDeadlockError", "CollectiveError",
           "CollectiveTimeoutError", "Evaluator", "FAST", "HANDLERS", "IMPORT_FAILURES",
           "Interpreter", "InterpreterError", "ReplicaGroupError", "ReplicatedInterpreter",
           "TOKEN", "execute", "execute_replicated", "register", "register_fast"]
