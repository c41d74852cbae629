"""The kernel layer shared by the ``cpu`` and ``cuda`` backends (no llvmlite, no CUDA).

* ``plan.make_plan(module)`` -> :class:`plan.ModulePlan`: per computation, the steps
  (``Kernel`` with a kind chosen from the hero and the reason, ``LibraryCall``,
  ``Control`` for while/conditional/call, ``Copy``), each with its input/output
  values and, after buffer assignment, their :class:`buffers.BufferSlice`.
* ``buffers``: liveness-based buffer assignment into one arena, in-place outputs, a
  printable dump (``BufferAssignment.to_text``).
* ``index``: layout-aware index expressions and the simplification rule table.
* ``elemental``: the value of an instruction's element at a multi-index, one rule per
  opcode, as a small expression IR (``expr``) that renderers turn into LLVM IR or CUDA
  C++ by table.

A renderer's loop for a ``Kernel`` output ``n``::

    em = ElementalEmitter(kernel.input_map)
    idx = tuple(index.loop_var(f"i{d}", dim) for d, dim in enumerate(shape.dims))
    inst, leaf = kernel.roots[n]
    value = em.value(inst, idx, leaf)          # Expr; loads read kernel.input_slices
    store(kernel.output_slices[n], index.linear_index(shape, idx), value)
"""
from .buffers import BufferAssignment, BufferSlice
from .elemental import ElementalEmitter, ElementalUnsupported
from .expr import Expr, ReduceSpec
from .plan import ComputationPlan, Control, Copy, Kernel, LibraryCall, ModulePlan, Value, make_plan

__all__ = ["BufferAssignment", "BufferSlice", "ComputationPlan", "Control", "Copy",
           "ElementalEmitter", "ElementalUnsupported", "Expr", "Kernel", "LibraryCall",
           "ModulePlan", "ReduceSpec", "Value", "make_plan"]
