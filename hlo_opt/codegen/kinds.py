"""Kernel kinds, chosen from the fusion's hero (as XLA's GPU emitters are).

``choose_kind(inst) -> (kind, reason, heroes)`` for a fusion or an unfused instruction
(which XLA wraps in a fusion of its own).  The hero of a root is found by walking up
through the cheap ops XLA's ``FindNonTrivialHero`` skips (bitcast, reshape, copy,
unary elementwise with one user).
"""
from __future__ import annotations

from ..ir.opcodes import is_elementwise
from .row_norm import row_norm_of
from .gemm_fusion import is_triton_gemm_fusion

KINDS = ("loop", "row_normalization", "row_reduction", "column_reduction", "multi_output_reduction",
         "transpose", "concatenate", "in_place_dynamic_update_slice", "scatter",
         "reduce_window", "sort", "triton_gemm", "library_call")

# Opcodes that always become a library call (XLA:CPU calls runtime functions / BLAS).
LIBRARY_OPCODES = frozenset({
    "dot", "convolution", "fft", "cholesky", "triangular-solve", "custom-call",
    "rng-bit-generator", "rng", "rng-get-and-update-state", "topk",
    "select-and-scatter", "batch-norm-training", "batch-norm-inference",
    "batch-norm-grad", "ragged-dot", "scaled-dot", "stochastic-convert", "scan",
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "replica-id", "partition-id", "infeed", "outfeed",
    "send", "recv", "send-done", "recv-done", "after-all", "all-reduce-start",
    "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "async-start", "async-update",
    "async-done", "copy-start", "copy-done", "get-dimension-size", "set-dimension-size",
    "dynamic-reshape", "domain", "add-dependency", "ragged-all-to-all", "shuffle",
    "collective-reduce",
})
_TRIVIAL = frozenset({"bitcast", "reshape", "copy"})


def roots_of(inst):
    """The root instructions of a fusion (tuple operands) or the instruction itself."""
    if inst.opcode == "fusion":
        r = inst.fused_computation.root
        return list(r.operands) if r.opcode == "tuple" else [r]
    return [inst]


def find_hero(root):
    h = root
    while h.opcode in _TRIVIAL or (is_elementwise(h.opcode) and len(h.operands) == 1
                                  and h.opcode not in ("convert",)):
        op = h.operands[0]
        if op.opcode == "parameter" or op.user_count != 1:
            break
        h = op
    return h


def is_physical_transpose(t) -> bool:
    """A transpose that moves data (not a layout-only bitcast)."""
    if t.opcode != "transpose":
        return False
    src = t.operands[0].shape
    perm = t.dimensions
    phys_out = [perm[d] for d in t.shape.effective_layout().minor_to_major
                if t.shape.dims[d] != 1]
    phys_in = [d for d in src.effective_layout().minor_to_major if src.dims[d] != 1]
    return phys_out != phys_in


def reduction_is_row(r) -> bool:
    """Row reduction: the reduced dims include the operand's minor-most (non-degenerate)
    physical dimension, so a thread walks contiguous memory."""
    shape = r.operands[0].shape
    m2m = [d for d in shape.effective_layout().minor_to_major if shape.dims[d] != 1]
    if not m2m:
        return True
    return m2m[0] in set(r.dimensions)


def choose_kind(inst):
    op = inst.opcode
    if op != "fusion":
        if op in LIBRARY_OPCODES:
            return "library_call", f"{op} is a library call", [inst]
        if op == "sort":
            return "sort", "sort", [inst]
        if op == "scatter":
            return "scatter", "scatter updates its operand in place", [inst]
    rn = row_norm_of(inst)
    if rn is not None:
        return ("row_normalization",
                f"__triton fusion: {len(rn.reduces)} reductions of rows of {rn.row}, "
                "then the elementwise, per row", list(rn.reduces))
    if is_triton_gemm_fusion(inst):
        return "triton_gemm", "gemm fusion (__triton_gemm): one tiled gemm kernel with " \
                              "its prologue and epilogue", [find_hero(roots_of(inst)[0])]
    roots = roots_of(inst)
    # an unfused instruction is its own hero (its operands are other kernels' outputs)
    heroes = [find_hero(r) for r in roots] if op == "fusion" else [inst]
    reduces = [h for h in heroes if h.opcode == "reduce"]
    for h in heroes:
        if h.opcode in LIBRARY_OPCODES:
            return "library_call", f"hero %{h.name} is {h.opcode}", heroes
    if any(h.opcode == "sort" for h in heroes):
        return "sort", "hero is a sort", heroes
    if any(h.opcode == "scatter" for h in heroes):
        return "scatter", "hero is a scatter (updates its operand in place)", heroes
    if reduces:
        if len(roots) > 1:
            return ("multi_output_reduction",
                    f"{len(roots)} outputs, {len(reduces)} reduction heroes", heroes)
        r = reduces[0]
        if reduction_is_row(r):
            return "row_reduction", (f"hero %{r.name} reduces dims {list(r.dimensions)}, "
                                     "which include the minor-most"), heroes
        return "column_reduction", (f"hero %{r.name} reduces dims {list(r.dimensions)}, "
                                    "not the minor-most"), heroes
    if any(h.opcode == "reduce-window" for h in heroes):
        return "reduce_window", "hero is a reduce-window", heroes
    if len(roots) == 1 and roots[0].opcode == "dynamic-update-slice":
        return ("in_place_dynamic_update_slice",
                "root is a dynamic-update-slice: only the update is written", heroes)
    if len(roots) == 1 and roots[0].opcode == "concatenate":
        return "concatenate", "root is a concatenate: one loop per operand", heroes
    for h in heroes:
        if is_physical_transpose(h):
            return "transpose", f"hero %{h.name} moves the minor-most dimension", heroes
    return "loop", "elementwise / data movement: one loop over the output", heroes
