"""Opcode -> evaluation function table for the numpy interpreter.

A handler is ``fn(inst, args, ctx) -> value`` where ``args`` are the operand values
(numpy arrays, or tuples of values for tuple-shaped operands), ``ctx`` is the evaluator
(``ctx.call(computation, [values]) -> value`` runs a called computation), and the result
is a numpy array of ``inst.shape``'s dtype and dims, or a tuple for tuple shapes.
"""
from __future__ import annotations

from typing import Callable

HANDLERS: dict[str, Callable] = {}


def register(*opcodes: str):
    def deco(fn):
        for op in opcodes:
            if op in HANDLERS:
                raise ValueError(f"interpreter handler for {op} registered twice")
            HANDLERS[op] = fn
        return fn
    return deco
