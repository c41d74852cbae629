"""``bfloat16-normalization``: XLA's FloatNormalization (float_normalization.cc) with the
GPU's bf16 table (``_float_support.GpuFloatSupport`` for the target device, Hopper by
default).

Every instruction the GPU cannot compute in bf16 gets converts to f32 around it, in
XLA's order:

1. a bf16 operand the instruction cannot read is converted to f32;
2. a bf16 result it cannot produce is computed in f32 and converted back (users that
   converted it to f32 anyway read the f32 value directly when excess precision is
   allowed, ``--xla_allow_excess_precision``, the default);
3. what is left mixed (bf16 and f32 in one instruction the table does not allow mixed)
   goes all-bf16 when every operand's effective precision already is, else all-f32;
   called computations (a reduce's reducer, a sort's comparator) are then cloned and
   given f32 parameters and root.

Sort, all-reduce and reduce-scatter with several outputs are handled per output.  The
computations of all-reduce and reduce-scatter are never normalized (a shared one is
cloned for its other callers).  Tuples, get-tuple-element, constants, parameters,
fusions, converts, calls, custom-calls, control flow, bitcasts, async ops and
side-effecting instructions are left alone.  Afterwards the tuple-simplifier and DCE
run, as in XLA.  Shapes that leave a computation (the entry's result, a called
computation's root where the caller is not rewritten) keep their element types.
"""
from __future__ import annotations

from hlo_opt.ir.clone import clone_computation
from hlo_opt.ir.shape import Shape

from ..dce import HloDCE
from ..tuple_simplifier import TupleSimplifier
from ._float_support import GpuFloatSupport

_LEFT_ALONE = frozenset({"tuple", "get-tuple-element", "constant", "domain", "parameter",
                         "fusion", "convert", "call", "custom-call", "while", "conditional",
                         "bitcast-convert", "bitcast", "async-start", "async-done"})
_PER_OUTPUT = frozenset({"sort", "all-reduce", "reduce-scatter"})


def count_type(shape: Shape, element_type: str) -> int:
    if shape.is_tuple():
        return sum(count_type(s, element_type) for s in shape.tuple_shapes)
    return 1 if shape.element_type == element_type else 0


def leaf_count(shape: Shape) -> int:
    if shape.is_tuple():
        return sum(leaf_count(s) for s in shape.tuple_shapes)
    return 1


def change_type(shape: Shape, old: str, new: str) -> Shape:
    if shape.is_tuple():
        return Shape.tuple([change_type(s, old, new) for s in shape.tuple_shapes])
    return shape.with_element_type(new) if shape.element_type == old else shape


def _avoid_normalizing_computations(hlo, support) -> bool:
    return hlo.opcode in ("all-reduce", "reduce-scatter") or \
        support.should_skip_computations_of(hlo)


class _Visitor:
    def __init__(self, module, support, allow_excess_precision: bool):
        self.module = module
        self.support = support
        self.low = support.low
        self.high = support.high
        self.excess = allow_excess_precision
        self.changed = False

    # ---- rewriting primitives (FloatNormalizationVisitor's helpers) --------------------
    def _deep_copy(self, comp, hlo, copier, shape: Shape | None = None):
        """DeepCopyInstructionWithCustomCopier: GTEs down to the leaves, ``copier(leaf,
        index)`` at each, tuples back up."""
        def walk(inst, shape, index):
            if not shape.is_tuple():
                return copier(inst, index)
            parts = []
            for k, sub in enumerate(shape.tuple_shapes):
                gte = comp.add("get-tuple-element", sub, [inst], name="get-tuple-element",
                               attrs={"index": str(k)})
                parts.append(walk(gte, sub, index + (k,)))
            return comp.add("tuple", Shape.tuple([p.shape for p in parts]), parts,
                            name="tuple")
        return walk(hlo, shape or hlo.shape, ())

    def _convert_type(self, comp, hlo, old: str, new: str):
        """``hlo`` with its ``old`` leaves converted to ``new`` (``hlo`` itself if none)."""
        if count_type(hlo.shape, old) == 0:
            return hlo
        if hlo.opcode == "convert" and hlo.operands[0].shape.element_type == new and (
                (new == self.low and old == self.high) or self.excess):
            return hlo.operands[0]

        def copier(leaf, index):
            if leaf.shape.element_type != old:
                return leaf
            return comp.add("convert", leaf.shape.with_element_type(new), [leaf],
                            name="convert")
        return self._deep_copy(comp, hlo, copier)

    def insert_convert_after_output(self, comp, hlo, old: str, new: str) -> None:
        is_root = comp.root is hlo
        users = hlo.users
        new_hlo = self._convert_type(comp, hlo, old, new)
        if new_hlo is hlo:
            return
        for user in users:
            user.replace_operand_with(hlo, new_hlo)
        if is_root:
            comp.root = new_hlo
        self.changed = True

    def change_output_type_then_insert_convert_back(self, comp, hlo, old: str,
                                                    new: str) -> None:
        original = hlo.shape
        if count_type(original, old) == 0:
            return
        is_root = comp.root is hlo
        hlo.shape = change_type(original, old, new)
        users = hlo.users

        def copier(leaf, index):
            want = original
            for k in index:
                want = want.tuple_shapes[k]
            if want.element_type == leaf.shape.element_type:
                return leaf
            return comp.add("convert", want, [leaf], name="convert")
        new_hlo = self._deep_copy(comp, hlo, copier)
        to_simplify = []
        for user in users:
            if self.excess and user.opcode == "convert" and \
                    user.shape.element_type == new and new == self.high and old == self.low:
                to_simplify.append(user)
            else:
                user.replace_operand_with(hlo, new_hlo)
        for convert in to_simplify:
            convert.replace_all_uses_with(hlo)
        if is_root:
            comp.root = new_hlo
        self.changed = True

    def insert_convert_before_operand(self, comp, hlo, i: int, old: str, new: str) -> None:
        operand = hlo.operands[i]
        new_operand = self._convert_type(comp, operand, old, new)
        if new_operand is operand:
            return
        hlo.replace_operand(i, new_operand)
        self.changed = True

    def convert_called_computations(self, hlo, comps) -> None:
        clones = {}
        for c in comps:
            clone = clone_computation(c, {}, name=c.name + ".clone")
            self.module.add_computation(clone, before=hlo.parent)
            clones[c] = clone
            self.changed = True
        hlo.called = [clones.get(c, c) for c in hlo.called]
        for clone in clones.values():
            self.insert_convert_after_output(clone, clone.root, self.low, self.high)
            for param in list(clone.parameters):
                self.change_output_type_then_insert_convert_back(clone, param, self.low,
                                                                 self.high)

    # ---- the two handlers ----------------------------------------------------------------
    def _low_called(self, hlo):
        """(high count, low count, called computations holding the low type)."""
        high = low = 0
        comps = []
        if _avoid_normalizing_computations(hlo, self.support):
            return high, low, comps
        for c in hlo.called:
            has_low = False
            high += count_type(c.root.shape, self.high)
            n = count_type(c.root.shape, self.low)
            if n:
                low += n
                has_low = True
            for p in c.parameters:
                high += count_type(p.shape, self.high)
                n = count_type(p.shape, self.low)
                if n:
                    low += n
                    has_low = True
            if has_low:
                comps.append(c)
        return high, low, comps

    def handle_instruction(self, comp, hlo) -> None:
        sup = self.support
        if sup.should_skip_instruction(hlo):
            return
        low_t, high_t = self.low, self.high
        high = sum(count_type(o.shape, high_t) for o in hlo.operands) + \
            count_type(hlo.shape, high_t)
        low = sum(count_type(o.shape, low_t) for o in hlo.operands) + \
            count_type(hlo.shape, low_t)
        ch, cl, low_comps = self._low_called(hlo)
        high += ch
        low += cl
        for i in range(len(hlo.operands)):
            n = count_type(hlo.operands[i].shape, low_t)
            if n and not sup.supports_low_precision_operand(hlo, i):
                self.insert_convert_before_operand(comp, hlo, i, low_t, high_t)
                low -= n
                high += n
        if not sup.supports_low_precision_output(hlo):
            n = count_type(hlo.shape, low_t)
            if n:
                self.change_output_type_then_insert_convert_back(comp, hlo, low_t, high_t)
                low -= n
                high += n
        if sup.supports_mixed_precisions(hlo) or low == 0 or high == 0:
            return
        if not hlo.called and count_type(hlo.shape, low_t) == leaf_count(hlo.shape):
            can_use_low = True
            for i, o in enumerate(hlo.operands):
                if count_type(o.shape, low_t) == leaf_count(o.shape):
                    continue
                if (sup.effective_operand_precision_is_low_precision(hlo, i) or
                        sup.effective_operand_precision_is_output_precision(hlo, i)) and \
                        sup.supports_low_precision_operand(hlo, i):
                    continue
                can_use_low = False
                break
            if can_use_low:
                for i in range(len(hlo.operands)):
                    self.insert_convert_before_operand(comp, hlo, i, high_t, low_t)
                return
        self.change_output_type_then_insert_convert_back(comp, hlo, low_t, high_t)
        for i in range(len(hlo.operands)):
            self.insert_convert_before_operand(comp, hlo, i, low_t, high_t)
        self.convert_called_computations(hlo, low_comps)

    def handle_multiple_outputs(self, comp, hlo) -> None:
        sup = self.support
        low_t, high_t = self.low, self.high
        n = len(hlo.operands)
        operand_types = [o.shape.element_type for o in hlo.operands]
        output_types = [hlo.shape.tuple_shapes[i].element_type for i in range(n)]
        high = low = 0
        bad_operand = bad_output = False
        for i in range(n):
            if operand_types[i] == high_t:
                high += 1
            elif operand_types[i] == low_t:
                low += 1
                if not sup.supports_low_precision_operand(hlo, i):
                    bad_operand = True
            if output_types[i] == high_t:
                high += 1
            elif output_types[i] == low_t:
                low += 1
                if not sup.supports_low_precision_output(hlo):
                    bad_output = True
        if low == 0:
            return

        def should_convert(i):
            if operand_types[i] != low_t:
                return False
            if not sup.supports_low_precision_operand(hlo, i):
                return True
            if sup.supports_mixed_precisions(hlo):
                return False
            return bad_operand or bad_output or high > 0

        for i in range(n):
            if should_convert(i):
                self.insert_convert_before_operand(comp, hlo, i, low_t, high_t)
                high += 1
                low -= 1
        if not bad_output and (sup.supports_mixed_precisions(hlo) or high == 0 or low == 0):
            return
        low_comps = []
        if not _avoid_normalizing_computations(hlo, sup):
            for c in hlo.called:
                has_low = False
                if c.root.shape.element_type == high_t:
                    high += 1
                elif c.root.shape.element_type == low_t:
                    low += 1
                    has_low = True
                for p in c.parameters:
                    if p.shape.element_type == high_t:
                        high += 1
                    elif p.shape.element_type == low_t:
                        low += 1
                        has_low = True
                if has_low:
                    low_comps.append(c)
        users = hlo.users
        is_root = comp.root is hlo
        original = hlo.shape
        subs = list(original.tuple_shapes)
        elements = []
        for i in range(n):
            if output_types[i] != low_t:
                elements.append(comp.add("get-tuple-element", subs[i], [hlo],
                                         name="get-tuple-element", attrs={"index": str(i)}))
                continue
            subs[i] = subs[i].with_element_type(high_t)
            gte = comp.add("get-tuple-element", subs[i], [hlo], name="get-tuple-element",
                           attrs={"index": str(i)})
            elements.append(comp.add("convert", subs[i].with_element_type(low_t), [gte],
                                     name="convert"))
        hlo.shape = Shape.tuple(subs)
        tup = comp.add("tuple", original, elements, name="tuple")
        for user in users:
            user.replace_operand_with(hlo, tup)
        if is_root:
            comp.root = tup
        self.changed = True
        self.convert_called_computations(hlo, low_comps)

    def default_action(self, comp, hlo) -> None:
        if hlo.opcode in _LEFT_ALONE or hlo.has_side_effect_no_recurse():
            return
        if hlo.opcode in _PER_OUTPUT and hlo.shape.is_tuple():
            self.handle_multiple_outputs(comp, hlo)
        else:
            self.handle_instruction(comp, hlo)


def _computations_to_skip(module, support) -> set:
    """CloneComputationsForNonNormalizingInstructions: computations called only by
    all-reduce / reduce-scatter are skipped; one shared with other callers is cloned for
    the collectives, and the clone is skipped."""
    skip = set()
    for comp, callers in module.callers().items():
        avoid = [c for c in callers if _avoid_normalizing_computations(c, support)]
        if not avoid:
            continue
        if len(avoid) == len(callers):
            skip.add(comp)
            continue
        clone = clone_computation(comp, {}, name=comp.name + ".clone")
        module.add_computation(clone, before=comp)
        for site in avoid:
            site.called = [clone if c is comp else c for c in site.called]
        skip.add(clone)
    return skip


class BFloat16Normalization:
    name = "bfloat16-normalization"

    def __init__(self, support=None):
        self.support = support

    def run(self, module) -> bool:
        support = self.support or GpuFloatSupport(module.config.device)
        order = module.computation_post_order()
        skip = _computations_to_skip(module, support)
        cloned = any(c not in order for c in module.computations)
        visitor = _Visitor(module, support,
                           module.config.debug_options.xla_allow_excess_precision)
        for comp in order:
            if comp in skip:
                continue
            for hlo in comp.post_order():
                if hlo.parent is comp:
                    visitor.default_action(comp, hlo)
        if visitor.changed:
            TupleSimplifier().run(module)
            HloDCE().run(module)
        return visitor.changed or cloned


__all__ = ["BFloat16Normalization", "change_type", "count_type"]
