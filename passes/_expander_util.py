"""Helpers the expander passes share: XLA's ``hlo_creation_utils`` (reshapes that add or
drop degenerate dims, vector-indexed dynamic slices, zero padding of index vectors),
``WhileUtil::MakeCountedLoop``, ``HloComputation::ReplaceInstruction`` and the
computation lists ``MakeNonfusionComputations`` gives.

Every maker takes a :class:`~hlo_opt.rewrite.builder.Builder` (which adds to its computation) and
returns the new instruction, so a pass writes ``collapse_first_n_dims(b, x, 2)`` where XLA
writes ``CollapseFirstNDims(x, 2)``.
"""
from __future__ import annotations

import math

import numpy as np

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder, array_shape
from .dce import remove_instruction_and_unused_operands

# Attributes ReplaceInstruction carries from the old instruction to a new one lacking them.
_CARRIED_ATTRS = ("metadata", "sharding", "frontend_attributes")


def non_fusion_computations(module) -> list[Computation]:
    """XLA's ``MakeNonfusionComputations``: every computation no fusion calls."""
    return module.nonfusion_computations()


def replace_instruction(comp: Computation, old, new, fresh: bool = True) -> None:
    """``HloComputation::ReplaceInstruction``: ``new`` (added when detached) takes every use
    of ``old`` and inherits its metadata/sharding/frontend attributes when it has none (as
    in XLA, even an existing instruction); ``old`` then goes with the operands it leaves
    unused.  A ``fresh`` replacement (built for this, not an existing value) also takes
    ``old``'s exact shape (its layout) when the dims and type agree, as XLA's creators
    give it ``old``'s shape."""
    if new.parent is None:
        comp.add_instruction(new)
    for key in _CARRIED_ATTRS:
        if key in old.attrs and key not in new.attrs:
            new.attrs[key] = old.attrs[key]
    if fresh and new.shape.same_dims_and_type(old.shape):
        new.shape = old.shape
    old.replace_all_uses_with(new)
    remove_instruction_and_unused_operands(comp, old)


def derived_attrs(old) -> dict:
    """``SetupDerivedInstruction``: the attributes a replacement inherits."""
    return {k: old.attrs[k] for k in _CARRIED_ATTRS if k in old.attrs}


# ---- reshapes (hlo_creation_utils) ----------------------------------------------------------
def reshape_to(b: Builder, inst, dims):
    """MakeReshapeHlo; the operand itself when the dims already match."""
    dims = tuple(int(d) for d in dims)
    if inst.shape.dims == dims:
        return inst
    return b.reshape(inst, dims)


def collapse_first_n_dims(b: Builder, inst, n: int):
    """CollapseFirstNDims: the first ``n`` dims become one."""
    dims = inst.shape.dims
    return b.reshape(inst, (math.prod(dims[:n]),) + tuple(dims[n:]))


def prepend_degenerate_dims(b: Builder, inst, n: int):
    """PrependDegenerateDims."""
    return b.reshape(inst, (1,) * n + tuple(inst.shape.dims))


def elide_degenerate_dims(b: Builder, inst, dims):
    """ElideDegenerateDims: drop the listed size-1 dims."""
    drop = set(dims)
    return b.reshape(inst, [d for i, d in enumerate(inst.shape.dims) if i not in drop])


def insert_degenerate_dims(b: Builder, inst, dims):
    """InsertDegenerateDims: size-1 dims at the (sorted) output positions ``dims``."""
    out = list(inst.shape.dims)
    for d in sorted(dims):
        out.insert(d, 1)
    return b.reshape(inst, out)


def pad_vector_with_zeros(b: Builder, vec, prepend: int, append: int):
    """PadVectorWithZeros: a rank-1 ``pad`` with a zero of the vector's type."""
    zero = b.scalar(0, vec.shape.element_type)
    return b.pad(vec, zero, [(prepend, append, 0)])


def split_index_vector(b: Builder, vec) -> list:
    """The scalar components of a rank-1 index vector (slice + reshape each), as
    MakeDynamicSliceHlo and DynamicIndexSplitter build them."""
    et = vec.shape.element_type
    out = []
    for i in range(vec.shape.dims[0]):
        s = b._add("slice", array_shape(et, (1,)), [vec],
                   attrs={"slice": "{[" + f"{i}:{i + 1}" + "]}"})
        out.append(b.reshape(s, ()))
    return out


def dynamic_slice_vec(b: Builder, operand, start_vec, sizes):
    """MakeDynamicSliceHlo with a vector of start indices."""
    return b.dynamic_slice(operand, split_index_vector(b, start_vec), sizes)


def dynamic_update_slice_vec(b: Builder, operand, update, start_vec):
    """MakeDynamicUpdateSliceHlo with a vector of start indices."""
    return b.dynamic_update_slice(operand, update, split_index_vector(b, start_vec))


def r1_constant(b: Builder, values, et: str):
    """MakeR1ConstantHlo."""
    return b.constant_array(np.asarray(list(values), dtype=np.int64), et)


# ---- computations and loops ------------------------------------------------------------------
def new_computation(name: str, params) -> tuple[Computation, list]:
    """A detached computation with parameters ``[(shape, name), ...]``."""
    comp = Computation(name)
    return comp, [comp.add_parameter(s, n) for s, n in params]


def scalar_binary_computation(module, opcode: str, et: str, name: str,
                              lhs: str = "lhs", rhs: str = "rhs") -> Computation:
    """A fresh ``(lhs, rhs) -> opcode(lhs, rhs)`` computation added to ``module`` (XLA
    builds one per use in the expanders, named as given)."""
    s = Shape.array(et, ())
    comp, (x, y) = new_computation(name, [(s, lhs), (s, rhs)])
    comp.root = comp.add(opcode, s, [x, y], name=opcode)
    module.add_computation(comp)
    return comp


def make_counted_loop(comp: Computation, trip_count: int, init_values, body_fn,
                      attrs: dict | None = None) -> list:
    """``WhileUtil::MakeCountedLoop``: a while over ``(s32[] i, init_values...)`` running
    ``trip_count`` times; ``body_fn(b, i, state) -> new state`` builds the body with the
    Builder of the body computation.  Returns get-tuple-elements of the results."""
    module = comp.module
    s32 = Shape.array("s32", ())
    state_shape = Shape.tuple([s32] + [v.shape for v in init_values])

    cond, (cparam,) = new_computation("while_cond", [(state_shape, "param_0")])
    cb = Builder(cond)
    limit = cb.scalar(trip_count, "s32")
    cond.root = cb.compare(cb.gte(cparam, 0), limit, "LT")

    body, (bparam,) = new_computation("while_body", [(state_shape, "param_0")])
    bb = Builder(body)
    one = bb.scalar(1, "s32")
    indvar = bb.gte(bparam, 0)
    next_indvar = bb.binary("add", indvar, one)
    state = [bb.gte(bparam, i + 1) for i in range(len(init_values))]
    next_state = body_fn(bb, indvar, state)
    body.root = bb.tuple([next_indvar] + list(next_state))

    module.add_computation(cond)
    module.add_computation(body)
    b = Builder(comp)
    zero = b.scalar(0, "s32")
    init = b.tuple([zero] + list(init_values))
    loop = b._add("while", state_shape, [init], attrs={"condition": ""},
                  called=[cond, body], called_attr=("condition", "body"))
    if attrs:
        loop.attrs.update(attrs)
    return [b.gte(loop, i + 1) for i in range(len(init_values))]
