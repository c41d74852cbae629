"""Opcode -> evaluation function table for the numpy interpreter.

A handler is ``fn(inst, args, ctx) -> value`` where ``args`` are the operand values
(numpy arrays, or tuples of values for tuple-shaped operands), ``ctx`` is the evaluator
(``ctx.call(computation, [values]) -> value`` runs a called computation), and the result
is a numpy array of ``inst.shape``'s dtype and dims, or a tuple for tuple shapes.

Optional fast path: ``FAST[opcode]`` is ``fn(inst) -> kernel or None`` (or
``fn(inst, ctx)`` when registered with ``with_ctx=True``); the kernel takes the operand
values positionally (``kernel(*args)``) and returns the result.  The evaluator asks for
a kernel once per instruction when it plans a computation, so the per-call work (type
dispatch, attribute parsing) happens once, not every iteration of a while loop.  Every
opcode with a FAST entry still has a HANDLERS entry.
"""
from __future__ import annotations

from typing import Callable

HANDLERS: dict[str, Callable] = {}
FAST: dict[str, Callable] = {}


def register(*opcodes: str):
    def deco(fn):
        for op in opcodes:
            if op in HANDLERS:
                raise ValueError(f"interpreter handler for {op} registered twice")
            HANDLERS[op] = fn
        return fn
    return deco


def register_fast(*opcodes: str, with_ctx: bool = False):
    """Register ``fn(inst) -> kernel`` (``fn(inst, ctx)`` with ``with_ctx``) and derive
    the generic handler from it."""
    def deco(make_kernel):
        make_kernel.with_ctx = with_ctx
        for op in opcodes:
            if op in FAST:
                raise ValueError(f"interpreter fast kernel for {op} registered twice")
            FAST[op] = make_kernel
        register(*opcodes)(_generic_from_fast(make_kernel, with_ctx))
        return make_kernel
    return deco


def make_kernel(make, inst, ctx):
    return make(inst, ctx) if getattr(make, "with_ctx", False) else make(inst)


def _generic_from_fast(make_kernel, with_ctx):
    def handler(inst, args, ctx):
        k = make_kernel(inst, ctx) if with_ctx else make_kernel(inst)
        return k(*args)
    handler.__name__ = getattr(make_kernel, "__name__", "handler")
    return handler
