"""``dot_decomposer``: XLA's DotDecomposer.

Canonicalizes every dot to ``[batch..., M, K] x [batch..., K, N]``: batch dimensions first
(in order), one contracting dimension per operand, at most one non-contracting dimension
per operand.  Operands are transposed to (batch, non-contracting, contracting) for the lhs
and (batch, contracting, non-contracting) for the rhs and reshaped to merge each group; a
reshape brings the result back to the original shape.  (Like XLA it emits the transposes
and reshapes even when they are identities; algsimp removes those.)
"""
from __future__ import annotations

from hlo_opt.rewrite.builder import Builder, dot_dims, dot_extra_attrs
from hlo_opt.rewrite.rules import control_successors, remove_dead


def is_canonical(rank: int, contracting, batch) -> bool:
    if len(contracting) != 1:
        return False
    if len(batch) + 2 < rank:
        return False
    return list(batch) == list(range(len(batch)))


def _canonicalize_operand(b: Builder, op, batch, contracting, contracting_minor: bool):
    dims = op.shape.dims
    non = [i for i in range(len(dims)) if i not in contracting and i not in batch]
    k = 1
    for i in contracting:
        k *= dims[i]
    n = 1
    for i in non:
        n *= dims[i]
    perm = list(batch) + (non + list(contracting) if contracting_minor
                          else list(contracting) + non)
    t = b.transpose(op, perm)
    shape = [dims[i] for i in batch]
    if contracting_minor:
        cdim = len(batch) + (1 if n != 1 else 0)
        if n != 1:
            shape.append(n)
        shape.append(k)
    else:
        cdim = len(batch)
        shape.append(k)
        if n != 1:
            shape.append(n)
    return b.reshape(t, shape), cdim


class DotDecomposer:
    name = "dot_decomposer"

    def run(self, module) -> bool:
        fusion = {c for comp in module.computations for i in comp.instructions
                  if i.opcode == "fusion" for c in i.called}
        changed = False
        for comp in module.computations:
            if comp in fusion:
                continue
            dots = [i for i in comp.instructions if i.opcode == "dot"]
            ctrl = control_successors(comp)
            for dot in dots:
                lhs, rhs = dot.operands
                lb, lc, rb, rc = dot_dims(dot)
                if is_canonical(lhs.shape.rank, lc, lb) and is_canonical(rhs.shape.rank, rc, rb):
                    continue
                b = Builder(comp)
                nl, lcd = _canonicalize_operand(b, lhs, lb, lc, True)
                nr, rcd = _canonicalize_operand(b, rhs, rb, rc, False)
                nb = len(lb)
                new = b.dot(nl, nr, list(range(nb)), [lcd], list(range(nb)), [rcd],
                            dot.shape.element_type, dot_extra_attrs(dot))
                if "metadata" in dot.attrs:
                    new.attrs["metadata"] = dot.attrs["metadata"]
                out = b.reshape(new, dot.shape.dims)
                out.shape = dot.shape
                dot.replace_all_uses_with(out)
                remove_dead(comp, dot, ctrl)
                changed = True
        return changed
