"""One counted loop in LLVM IR, for the CPU backend's hand-built functions."""
from __future__ import annotations

from llvmlite import ir

from . import irtypes as T


def counted_loop(b: ir.IRBuilder, start, end, body, name: str = "loop") -> None:
    """``for (i64 i = start; i < end; ++i) body(i)``; ``start`` and ``end`` are i64 values
    or ints.  Constant bounds emit no entry test (a constant empty range emits nothing; a
    single trip calls ``body`` with the constant); the builder ends after the loop."""
    const = isinstance(start, int) and isinstance(end, int)
    if const and end - start <= 1:
        if end - start == 1:
            body(ir.Constant(T.I64, start))
        return
    start = ir.Constant(T.I64, start) if isinstance(start, int) else start
    end = ir.Constant(T.I64, end) if isinstance(end, int) else end
    pre = b.block
    head = b.append_basic_block(name)
    after = b.append_basic_block(name + ".after")
    if const:
        b.branch(head)
    else:
        b.cbranch(b.icmp_signed("<", start, end), head, after)
    b.position_at_end(head)
    i = b.phi(T.I64)
    i.add_incoming(start, pre)
    body(i)
    nxt = b.add(i, ir.Constant(T.I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, end), head, after)
    b.position_at_end(after)
