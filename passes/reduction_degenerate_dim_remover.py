"""``reduction-degenerate-dim-remover``: XLA's GPU ReductionDegenerateDimRemover.

A reduce whose inputs have 1-sized dimensions is rewritten to reduce inputs bitcast to
drop them (with the reduced dimensions renumbered), bitcasting the result back; a reduce
over 1-sized dimensions only becomes a bitcast of its input (XLA assumes the init value
is the reducer's identity).  Bitcasts here are plain reshapes of default-layout arrays.
"""
from __future__ import annotations

from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder
from hlo_opt.rewrite.rules import control_successors, remove_dead


def _drop1(shape: Shape) -> Shape:
    return Shape.array(shape.element_type, [d for d in shape.dims if d != 1])


class ReductionDegenerateDimRemover:
    name = "reduction-degenerate-dim-remover"

    def run(self, module) -> bool:
        fusion = {c for comp in module.computations for i in comp.instructions
                  if i.opcode == "fusion" for c in i.called}
        changed = False
        for comp in list(module.computations):
            if comp in fusion:
                continue
            for r in comp.post_order():
                if r.opcode == "reduce" and not r.control_predecessors:
                    changed |= self._rewrite(comp, r)
        return changed

    def _rewrite(self, comp, red) -> bool:
        n = len(red.operands) // 2
        inputs, inits = red.operands[:n], red.operands[n:]
        if any(1 not in i.shape.dims for i in inputs):
            return False
        shapes = list(red.shape.tuple_shapes) if red.shape.is_tuple() else [red.shape]
        in_shape = inputs[0].shape
        dims = set(red.dimensions)
        new_dims, shift = [], 0
        for d in range(in_shape.rank):
            if in_shape.dims[d] == 1:
                shift += 1
            elif d in dims:
                new_dims.append(d - shift)
        b = Builder(comp)
        if not new_dims:
            if n != 1:
                return False
            new = b.bitcast(inputs[0], red.shape)
        else:
            casts = [b.bitcast(i, _drop1(i.shape)) for i in inputs]
            out_shapes = [_drop1(s) for s in shapes]
            rshape = out_shapes[0] if n == 1 else Shape.tuple(out_shapes)
            new_red = b._add("reduce", rshape, casts + list(inits),
                             attrs={"dimensions": "{" + ",".join(map(str, new_dims)) + "}",
                                    "to_apply": ""},
                             called=list(red.called), called_attr=red.called_attr)
            for k in ("metadata", "frontend_attributes"):
                if k in red.attrs:
                    new_red.attrs[k] = red.attrs[k]
            if n == 1:
                new = new_red if rshape.dims == red.shape.dims else b.bitcast(new_red, red.shape)
            else:
                elems = [b.bitcast(b.gte(new_red, k), shapes[k]) for k in range(n)]
                new = b.tuple(elems)
        if red.is_root:
            new.shape = red.shape
        red.replace_all_uses_with(new)
        remove_dead(comp, red, control_successors(comp))
        return True
