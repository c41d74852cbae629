"""``all-reduce-reassociate``: XLA's AllReduceReassociate
(hlo/transforms/collectives/all_reduce_reassociate.cc).

``op(all-reduce(x), all-reduce(y))`` where ``op`` is the all-reduces' reduction becomes
``all-reduce(op(x, y))``: one collective instead of two.  Each side may reach its
all-reduce through single-user reshape / slice / convert / pad-with-the-identity
chains (the chain is then applied to x and y), or be ``dynamic-slice(all-reduce)`` with
identical slicing on both sides (the slice moves after the new all-reduce).  A chain of
adds of all-reduces collapses in one run (post order).

XLA's conditions: no layout-constrained all-reduce in the module; the all-reduces have
one user each, equal keys (reduction opcode and type, channel_id presence,
use_global_device_ids, replica groups), a reduction computation of the same kind as
``op`` and the same ``collective_group_key``; looking through pads must not make the
all-reduce larger than the two were together.  With ``reassociate_converted_ar=True``
(XLA:GPU passes ``--xla_gpu_enable_reassociation_for_converted_ar``; the constructor's
default, used by this pipeline, is False) ``op(convert(ar(x)), convert(ar(y)))`` with
value-preserving widening converts becomes ``ar'(op(convert(x), convert(y)))`` whose
computation is the reduction in the wider type.
"""
from __future__ import annotations

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import BIT_WIDTH, is_complex, is_float

from ._util import (all_reduce_key, compatible_group_keys, contains_layout_constrained,
                    reduction_identity, reduction_kind, reduction_kind_of)

_LOOK_THROUGH = frozenset({"reshape", "pad", "slice", "convert"})


def _literal_equals(constant, value) -> bool:
    if constant.opcode != "constant" or constant.shape.num_elements() != 1:
        return False
    lit = constant.literal
    if lit.elided:
        return False
    v = lit.array.reshape(-1)[0]
    if constant.shape.element_type == "pred":
        return bool(v) == bool(value)
    try:
        return float(v) == float(value)
    except (TypeError, ValueError):
        return False


def look_through_for_all_reduce(inst, identity):
    """LookThroughForAllReduce: the all-reduce (or the dynamic-slice of one) ``inst``
    comes from through single-user formatting ops, else None."""
    if inst.opcode == "dynamic-slice":
        ar = inst.operands[0]
        if ar.opcode != "all-reduce" or ar.user_count != 1 or inst.user_count != 1:
            return None
        return inst
    while inst.opcode != "all-reduce":
        if inst.user_count != 1 or inst.opcode not in _LOOK_THROUGH:
            return None
        if inst.opcode == "pad" and not _literal_equals(inst.operands[1], identity):
            return None
        inst = inst.operands[0]
    return inst if inst.user_count == 1 else None


def _cast_preserves_values(src: str, dst: str) -> bool:
    """primitive_util::CastPreservesValues."""
    if src == dst:
        return True
    if src == "pred":
        return True
    if dst == "pred":
        return False
    if is_complex(src):
        return is_complex(dst) and BIT_WIDTH[dst] >= BIT_WIDTH[src]
    if is_complex(dst):
        return _cast_preserves_values(src, {"c64": "f32", "c128": "f64"}[dst])
    if is_float(src):
        if not is_float(dst):
            return False
        from hlo_opt.ir.types import numpy_dtype
        try:
            (ms, es), (md, ed) = _finfo(numpy_dtype(src)), _finfo(numpy_dtype(dst))
        except (TypeError, ValueError):
            return False
        return md >= ms and ed >= es
    if is_float(dst):  # integer -> float: the mantissa must hold every value
        from hlo_opt.ir.types import numpy_dtype
        digits = _finfo(numpy_dtype(dst))[0]
        bits = BIT_WIDTH[src] - (1 if src.startswith("s") else 0)
        return digits >= bits
    # integer -> integer
    if src.startswith("s") and dst.startswith("u"):
        return False
    if src.startswith("u") and dst.startswith("s"):
        return BIT_WIDTH[dst] > BIT_WIDTH[src]
    return BIT_WIDTH[dst] >= BIT_WIDTH[src]


def _finfo(dtype):
    """(significand digits incl. the implicit bit, max exponent) of a float dtype."""
    import ml_dtypes
    import numpy as np
    try:
        info = np.finfo(dtype)
    except ValueError:
        info = ml_dtypes.finfo(dtype)
    return int(info.nmant) + 1, int(info.maxexp)


def _compatible_converts(c0, c1) -> bool:
    ok = True
    for c in (c0, c1):
        if c is not None:
            ok &= _cast_preserves_values(c.operands[0].shape.element_type,
                                         c.shape.element_type)
    if c0 is not None and c1 is not None:
        ok &= c0.operands[0].shape.element_type == c1.operands[0].shape.element_type
    return ok


def _optional_convert(operand):
    """(convert, all-reduce) when ``operand`` is a one-user convert of an all-reduce."""
    if operand.opcode == "convert" and operand.user_count == 1 and \
            operand.operands[0].opcode == "all-reduce":
        return operand
    return None


def _compatible(ar0, ar1, kind: str, ignore_element_type: bool) -> bool:
    k0, k1 = all_reduce_key(ar0), all_reduce_key(ar1)
    if k0 is None or k1 is None or reduction_kind(ar0.to_apply) != kind:
        return False
    if ignore_element_type:
        k0, k1 = k0[:1] + k0[2:], k1[:1] + k1[2:]
    return k0 == k1 and compatible_group_keys(ar0, ar1)


def _promoted_computation(module, template: Computation, et: str) -> Computation:
    comp = Computation(template.name + "_reassoc_promoted")
    s = Shape.array(et, ())
    x = comp.add_parameter(s, name="x")
    y = comp.add_parameter(s, name="y")
    comp.root = comp.add(template.root.opcode, s, [x, y], name=template.root.opcode)
    return module.add_computation(comp)


class AllReduceReassociate:
    name = "all-reduce-reassociate"

    def __init__(self, reassociate_converted_ar: bool = False):
        self.reassociate_converted_ar = reassociate_converted_ar

    def run(self, module) -> bool:
        if contains_layout_constrained(module, ("all-reduce",)):
            return False
        changed = False
        for comp in list(module.computations):
            for inst in comp.post_order():
                if inst.parent is comp and self._rewrite(module, comp, inst):
                    changed = True
        return changed

    def _rewrite(self, module, comp, inst) -> bool:
        if len(inst.operands) != 2 or not inst.shape.is_array():
            return False
        kind = reduction_kind_of(inst.opcode, inst.shape.element_type)
        if kind is None:
            return False
        identity = reduction_identity(kind, inst.shape.element_type)
        if identity is None:
            return False
        lhs = look_through_for_all_reduce(inst.operands[0], identity)
        if lhs is None:
            return False
        rhs = look_through_for_all_reduce(inst.operands[1], identity)
        if rhs is None:
            return False
        if lhs.opcode != rhs.opcode:
            return False
        rs_pattern = lhs.opcode == "dynamic-slice"
        if rs_pattern:
            if not lhs.operands[0].shape.same_dims_and_type(rhs.operands[0].shape) or \
                    not _identical_slices(lhs, rhs):
                return False
            ar0, ar1 = lhs.operands[0], rhs.operands[0]
        else:
            ar0, ar1 = lhs, rhs
        # ReassociateAllReduceIsProfitable (pads may make the result larger).
        size = lhs.shape.num_elements() + (rhs.shape.num_elements() if lhs is not rhs else 0)
        if size < inst.shape.num_elements():
            return False
        convert0 = _optional_convert(inst.operands[0])
        convert1 = _optional_convert(inst.operands[1])
        promote = convert0 is not None or convert1 is not None
        if promote and (not self.reassociate_converted_ar
                        or not _compatible_converts(convert0, convert1)):
            return False
        if not _compatible(ar0, ar1, kind, ignore_element_type=promote):
            return False
        if not promote and not rs_pattern and \
                ar0.to_apply.root.shape.element_type != inst.shape.element_type:
            return False  # a convert inside a look-through chain: the reduction type
        users = inst.users                            # would not match the new all-reduce
        root = inst.is_root
        new_op0, new_op1 = ar0.operands[0], ar1.operands[0]
        if convert0 is not None:
            convert0.replace_operand_with(ar0, new_op0)
            new_op0 = convert0
        if convert1 is not None:
            convert1.replace_operand_with(ar1, new_op1)
            new_op1 = convert1
        new_op = inst
        if promote or rs_pattern:
            new_op = comp.add(inst.opcode, inst.shape if promote else ar0.shape,
                              [new_op0, new_op1], name=inst.opcode, attrs=dict(inst.attrs))
        if promote:
            out_shape = inst.shape.with_element_type(new_op0.shape.element_type)
        elif rs_pattern:
            out_shape = ar0.shape
        else:
            ar0.replace_all_uses_with(ar0.operands[0])
            ar1.replace_all_uses_with(ar1.operands[0])
            out_shape = inst.shape
        new_ar = comp.add("all-reduce", out_shape, [new_op], name="all-reduce",
                          attrs=dict(ar0.attrs), called=[ar0.to_apply],
                          called_attr="to_apply")
        if promote:
            new_ar.called = [_promoted_computation(module, ar0.to_apply,
                                                   new_ar.shape.element_type)]
            _redirect(inst, users, root, new_ar)
        elif rs_pattern:
            new_ds = comp.add("dynamic-slice", inst.shape, [new_ar] + list(lhs.operands[1:]),
                              name="dynamic-slice", attrs=dict(lhs.attrs))
            _redirect(inst, users, root, new_ds)
        else:
            _redirect(inst, users, root, new_ar)
        if promote or rs_pattern:
            comp.remove_instruction(inst)
        if rs_pattern:
            comp.remove_instruction(lhs)
            if lhs is not rhs:
                comp.remove_instruction(rhs)
        comp.remove_instruction(ar0)
        if ar0 is not ar1:
            comp.remove_instruction(ar1)
        return True


def _identical_slices(a, b) -> bool:
    """The two dynamic-slices are Identical up to their first operand."""
    return (a.shape == b.shape and a.attrs.get("dynamic_slice_sizes") ==
            b.attrs.get("dynamic_slice_sizes")
            and len(a.operands) == len(b.operands)
            and all(x is y for x, y in zip(a.operands[1:], b.operands[1:])))


def _redirect(inst, users, was_root: bool, new) -> None:
    """inst->ReplaceUsesWith(users, new): only the users ``inst`` had before."""
    for u in users:
        if u is not new:
            u.replace_operand_with(inst, new)
    if was_root:
        inst.parent.root = new
