"""Test helpers for the heavy interpreter opcodes: parse a module, pick an instruction,
and run its handler with a small stand-in evaluation context.

``StandInCtx`` evaluates the scalar computations handlers call (comparators, reducers,
combiners) with its own tiny evaluator, independent of the real one, so the handlers are
tested on their own.  With ``batched=True`` it also offers ``call_batched`` (the same
evaluator on whole arrays), which drives the handlers' vectorised generic paths.
"""
from __future__ import annotations

import numpy as np

from hlo_opt.api import parse_hlo
from hlo_opt.backends.interpreter import (ops_batchnorm, ops_convolution,  # noqa: F401
                                          ops_custom_call, ops_fft, ops_gather_scatter,
                                          ops_linalg, ops_rng, ops_sort, ops_window)
from hlo_opt.backends.interpreter.registry import HANDLERS

_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or}
_COMPARE = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
            "EQ": np.equal, "NE": np.not_equal}


class StandInCtx:
    def __init__(self, batched: bool = False):
        self.calls = 0
        self.batched_calls = 0
        if not batched:
            self.call_batched = None

    def call(self, comp, args):
        self.calls += 1
        return self._eval(comp, args)

    def call_batched(self, comp, args):  # replaced by None when not batched
        self.batched_calls += 1
        return self._eval(comp, args)

    def _eval(self, comp, args):
        vals = {}
        for inst in comp.post_order():
            op = inst.opcode
            ops = [vals[o] for o in inst.operands]
            if op == "parameter":
                v = np.asarray(args[inst.parameter_number])
            elif op == "constant":
                v = np.asarray(inst.literal.array).reshape(())
            elif op == "tuple":
                v = tuple(ops)
            elif op == "get-tuple-element":
                v = ops[0][int(inst.attrs["index"])]
            elif op in _BINARY:
                v = _BINARY[op](ops[0], ops[1])
            elif op == "compare":
                v = _COMPARE[inst.attrs["direction"]](ops[0], ops[1])
            elif op == "select":
                v = np.where(ops[0], ops[1], ops[2])
            elif op == "not":
                v = np.logical_not(ops[0]) if ops[0].dtype == bool else np.invert(ops[0])
            elif op == "negate":
                v = np.negative(ops[0])
            else:
                raise NotImplementedError(f"stand-in ctx: {op}")
            if not isinstance(v, tuple):
                v = np.asarray(v).astype(inst.shape.dtype)
            vals[inst] = v
        return vals[comp.root]


def module(text: str):
    return parse_hlo(text)


def instruction(mod, name: str):
    """The instruction called ``name``, looked up in the entry computation first.  Like
    XLA's, the parser renames an entry instruction whose name a called computation already
    uses (``r`` -> ``r.1``), so in the entry ``name.N`` counts as ``name``."""
    for inst in mod.entry.instructions:
        if inst.name == name or inst.name.rsplit(".", 1)[0] == name:
            return inst
    for comp in mod.computations:
        for inst in comp.instructions:
            if inst.name == name:
                return inst
    raise KeyError(name)


def run(mod_or_text, name: str, args, batched: bool = False, ctx=None):
    mod = parse_hlo(mod_or_text) if isinstance(mod_or_text, str) else mod_or_text
    inst = instruction(mod, name)
    ctx = ctx if ctx is not None else StandInCtx(batched)
    out = HANDLERS[inst.opcode](inst, list(args), ctx)
    _check_shape(out, inst.shape)
    return out


def _check_shape(value, shape):
    if shape.is_tuple():
        assert isinstance(value, tuple) and len(value) == len(shape.tuple_shapes)
        for v, s in zip(value, shape.tuple_shapes):
            _check_shape(v, s)
        return
    assert isinstance(value, np.ndarray), type(value)
    assert value.dtype == shape.dtype, (value.dtype, shape.dtype)
    assert value.shape == tuple(shape.dims), (value.shape, shape.dims)


def execute_or_skip():
    """hlo_opt.execute when the evaluator is wired up, else skip the test."""
    import pytest
    try:
        from hlo_opt.backends import execute  # noqa: F401
    except ImportError as e:
        pytest.skip(f"hlo_opt.execute is not available yet ({e})")
    import hlo_opt
    return hlo_opt.execute
