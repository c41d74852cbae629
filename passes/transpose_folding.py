"""``transpose-folding``: XLA's TransposeFolding.

A transpose feeding a dot is folded into the dot's dimension numbers when the default
``IsRowColumnTransposeDotOperand`` allows it: the operand has exactly batch + 2 dims, one
contracting dim, and the transpose keeps the batch dims in place (both dot operands must
be at least rank 2).  Transposes feeding a convolution are folded into its dim_labels only
when ``fold_convolutions=True`` (XLA's default callback never folds them).
"""
from __future__ import annotations

from hlo_opt.ir.attributes import ConvolutionDimensionNumbers

from hlo_opt.rewrite.builder import Builder, dot_dims, dot_extra_attrs
from hlo_opt.rewrite.rules import control_successors, remove_dead


def _non_identity_transpose(i) -> bool:
    return i.opcode == "transpose" and list(i.dimensions) != list(range(len(i.dimensions)))


def is_row_column_transpose_operand(dot, idx) -> bool:
    t = dot.operands[idx]
    lb, lc, rb, rc = dot_dims(dot)
    batch, contracting = (lb, lc) if idx == 0 else (rb, rc)
    return (len(batch) == t.shape.rank - 2 and len(contracting) == 1
            and all(t.dimensions[d] == d for d in batch))


def _labels_text(lhs, rhs, out) -> str:
    return f"{lhs}_{rhs}->{out}"


def _operand_labels(batch_or_in, feature_or_out, spatial, rank, chars) -> str:
    out = ["?"] * rank
    out[batch_or_in] = chars[0]
    out[feature_or_out] = chars[1]
    for k, d in enumerate(spatial):
        out[d] = str(k)
    return "".join(out)


class TransposeFolding:
    name = "transpose-folding"

    def __init__(self, can_fold_dot_operand=is_row_column_transpose_operand,
                 fold_convolutions: bool = False):
        self.can_fold_dot_operand = can_fold_dot_operand
        self.fold_convolutions = fold_convolutions

    def run(self, module) -> bool:
        skip = {c for comp in module.computations for i in comp.instructions
                if i.opcode == "fusion" or (i.opcode == "call" and
                                            i.attrs.get("is_composite") == "true")
                for c in i.called}
        dots, convs = [], []
        for comp in module.computations:
            if comp in skip:
                continue
            for inst in comp.post_order():
                if inst.opcode == "dot":
                    if inst.operands[0].shape.rank < 2 or inst.operands[1].shape.rank < 2:
                        continue
                    idx = [i for i in (0, 1) if _non_identity_transpose(inst.operands[i])
                           and self.can_fold_dot_operand(inst, i)]
                    if idx:
                        dots.append((comp, inst, idx))
                elif inst.opcode == "convolution" and self.fold_convolutions:
                    idx = [i for i in (0, 1) if inst.operands[i].opcode == "transpose"]
                    if idx:
                        convs.append((comp, inst, idx))
        for comp, dot, idx in dots:
            self._fold_dot(comp, dot, idx)
        for comp, conv, idx in convs:
            self._fold_conv(comp, conv, idx)
        return bool(dots or convs)

    def _fold_dot(self, comp, dot, idx):
        lb, lc, rb, rc = dot_dims(dot)
        lhs, rhs = dot.operands
        if 0 in idx:
            perm = lhs.dimensions
            lc, lb = [perm[d] for d in lc], [perm[d] for d in lb]
            lhs = lhs.operands[0]
        if 1 in idx:
            perm = rhs.dimensions
            rc, rb = [perm[d] for d in rc], [perm[d] for d in rb]
            rhs = rhs.operands[0]
        b = Builder(comp)
        new = b.dot(lhs, rhs, lb, lc, rb, rc, dot.shape.element_type, dot_extra_attrs(dot))
        new.shape = dot.shape
        for k in ("metadata", "frontend_attributes"):
            if k in dot.attrs:
                new.attrs[k] = dot.attrs[k]
        dot.replace_all_uses_with(new)
        remove_dead(comp, dot, control_successors(comp))

    def _fold_conv(self, comp, conv, idx):
        dn = conv.attr("dim_labels")
        lhs, rhs = conv.operands
        ib, ifeat, isp = dn.input_batch, dn.input_feature, list(dn.input_spatial)
        ki, ko, ksp = dn.kernel_input_feature, dn.kernel_output_feature, list(dn.kernel_spatial)
        if 0 in idx:
            p = lhs.dimensions
            ib, ifeat, isp = p[ib], p[ifeat], [p[d] for d in isp]
            lhs = lhs.operands[0]
        if 1 in idx:
            p = rhs.dimensions
            ki, ko, ksp = p[ki], p[ko], [p[d] for d in ksp]
            rhs = rhs.operands[0]
        out = dn.text.split("->")[1]
        labels = _labels_text(_operand_labels(ib, ifeat, isp, lhs.shape.rank, "bf"),
                              _operand_labels(ki, ko, ksp, rhs.shape.rank, "io"), out)
        b = Builder(comp)
        new = b.clone(conv, [lhs, rhs])
        new.set_attr("dim_labels", ConvolutionDimensionNumbers.parse(labels))
        conv.replace_all_uses_with(new)
        remove_dead(comp, conv, control_successors(comp))
