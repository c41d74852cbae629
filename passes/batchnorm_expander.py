"""``batchnorm_expander``: XLA's BatchNormExpander.

batch-norm-training, -inference and -grad become reductions and elementwise ops with
XLA's formulas:

* inference: ``x * scale' + (offset - mean * scale')`` with
  ``scale' = scale * rsqrt(var + epsilon)``;
* training: mean ``E[x] = sum(x)/N``, ``var = E[x^2] - E[x]^2`` (XLA's one-pass form),
  ``(x - E[x]) * rsqrt(var + epsilon) * scale + offset``; returns (out, mean, var);
* grad: ``grad_offset = sum(dy)``, ``grad_scale = sum(dy * (x - mean)) * rsqrt(var + eps)``,
  ``grad_x = scale * rsqrt(var + eps) / N * (N * dy - sum(dy) - (x - mean) *
  sum(dy * (x - mean)) / (var + eps))``.

N (elements per feature) is a constant for static dims and a product of
get-dimension-size for dynamic ones (XLA always emits get-dimension-size and leaves the
static ones to a later rewriter).
"""
from __future__ import annotations

import math

from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder, scalar_computation
from hlo_opt.rewrite.rules import control_successors, has_opcode, remove_dead


class _Expand:
    def __init__(self, comp, bn):
        self.b = Builder(comp)
        self.bn = bn
        self.module = comp.module

    def add(self, inst):
        if "metadata" in self.bn.attrs:
            inst.attrs["metadata"] = self.bn.attrs["metadata"]
        return inst

    def binary(self, op, a, c):
        return self.add(self.b.binary(op, a, c))

    def bcast(self, x, shape, dims):
        return self.add(self.b.broadcast(x, shape.dims, dims))

    def scalar(self, v, et):
        return self.add(self.b.scalar(v, et))

    def count(self, operand, feature):
        """Elements per feature, as a scalar of the operand's type."""
        s = operand.shape
        if not any(s.dynamic[i] for i in range(s.rank) if i != feature):
            n = math.prod(d for i, d in enumerate(s.dims) if i != feature)
            return self.scalar(n, s.element_type)
        total = self.scalar(1, "s32")
        for i in range(s.rank):
            if i == feature:
                continue
            size = self.add(self.b._add("get-dimension-size", Shape.array("s32", ()),
                                        [operand], attrs={"dimensions": "{" + str(i) + "}"}))
            total = self.binary("multiply", size, total)
        return self.add(self.b.convert(total, s.element_type))

    def mean(self, count, x):
        return self.binary("divide", x, self.bcast(count, x.shape, ()))

    def reduce(self, x, zero, dims):
        add = scalar_computation(self.module, "add", x.shape.element_type,
                                 "scalar_add_computation")
        return self.add(self.b.reduce(x, zero, dims, add))

    def rsqrt(self, x):
        return self.add(self.b.unary("rsqrt", x))


def _epsilon(bn) -> float:
    return float(bn.attr("epsilon", 0.0))


def expand_inference(e: _Expand, bn):
    x, scale, offset, mean, var = bn.operands
    f = bn.attr("feature_index")
    et = x.shape.element_type
    eps = e.bcast(e.scalar(_epsilon(bn), et), scale.shape, ())
    true_scale = e.binary("multiply", scale, e.rsqrt(e.binary("add", var, eps)))
    true_shift = e.binary("subtract", offset, e.binary("multiply", mean, true_scale))
    scaled = e.binary("multiply", x, e.bcast(true_scale, x.shape, [f]))
    return e.binary("add", scaled, e.bcast(true_shift, x.shape, [f]))


def expand_training(e: _Expand, bn):
    x, scale, offset = bn.operands
    f = bn.attr("feature_index")
    s = x.shape
    et = s.element_type
    zero = e.scalar(0, et)
    eps = e.bcast(e.scalar(_epsilon(bn), et), s, ())
    dims = [i for i in range(s.rank) if i != f]
    n = e.count(x, f)
    scale_b = e.bcast(scale, s, [f])
    offset_b = e.bcast(offset, s, [f])
    x2 = e.binary("multiply", x, x)
    total = e.reduce(x, zero, dims)
    total2 = e.reduce(x2, zero, dims)
    mean = e.mean(n, total)
    mean_b = e.bcast(mean, s, [f])
    square_mean = e.mean(n, total2)
    mean_square = e.binary("multiply", mean, mean)
    var = e.binary("subtract", square_mean, mean_square)
    var_b = e.bcast(var, s, [f])
    rsqrt = e.rsqrt(e.binary("add", var_b, eps))
    normalized = e.binary("multiply", e.binary("subtract", x, mean_b), rsqrt)
    out = e.binary("add", e.binary("multiply", normalized, scale_b), offset_b)
    return e.add(e.b.tuple([out, mean, var]))


def expand_grad(e: _Expand, bn):
    x, scale, mean, var, dy = bn.operands
    f = bn.attr("feature_index")
    s = x.shape
    et = s.element_type
    fs = scale.shape
    n = e.count(x, f)
    zero = e.scalar(0, et)
    eps_s = e.scalar(_epsilon(bn), et)
    eps_x = e.bcast(eps_s, s, ())
    eps_f = e.bcast(eps_s, fs, ())
    dims = [i for i in range(s.rank) if i != f]
    scale_b = e.bcast(scale, s, [f])
    var_b = e.bcast(var, s, [f])
    mean_b = e.bcast(mean, s, [f])
    rsqrt_b = e.rsqrt(e.binary("add", var_b, eps_x))
    rsqrt_f = e.rsqrt(e.binary("add", var, eps_f))
    centered = e.binary("subtract", x, mean_b)
    dy_centered = e.binary("multiply", dy, centered)
    sum_dy_centered = e.reduce(dy_centered, zero, dims)
    grad_beta = e.reduce(dy, zero, dims)
    grad_scale = e.binary("multiply", sum_dy_centered, rsqrt_f)
    i2 = e.bcast(grad_beta, s, [f])
    i3 = e.bcast(sum_dy_centered, s, [f])
    i4 = e.binary("multiply", i3, centered)
    i5 = e.binary("divide", i4, e.binary("add", var_b, eps_x))
    scale_rsqrt = e.mean(n, e.binary("multiply", scale_b, rsqrt_b))
    i1 = e.binary("multiply", dy, e.bcast(n, s, ()))
    i6 = e.binary("subtract", e.binary("subtract", i1, i2), i5)
    grad_x = e.binary("multiply", scale_rsqrt, i6)
    return e.add(e.b.tuple([grad_x, grad_scale, grad_beta]))


_BATCH_NORM = frozenset(("batch-norm-training", "batch-norm-inference", "batch-norm-grad"))


class BatchNormExpander:
    name = "batchnorm_expander"

    def __init__(self, rewrite_training_op: bool = True, rewrite_inference_op: bool = True,
                 rewrite_grad_op: bool = True):
        self.enabled = {"batch-norm-training": (rewrite_training_op, expand_training),
                        "batch-norm-inference": (rewrite_inference_op, expand_inference),
                        "batch-norm-grad": (rewrite_grad_op, expand_grad)}

    def run(self, module) -> bool:
        if not has_opcode(module, _BATCH_NORM):
            return False
        fusion = {c for comp in module.computations for i in comp.instructions
                  if i.opcode == "fusion" for c in i.called}
        changed = False
        for comp in list(module.computations):
            if comp in fusion:
                continue
            for bn in comp.post_order():
                on, fn = self.enabled.get(bn.opcode, (False, None))
                if not on or bn.control_predecessors:
                    continue
                new = fn(_Expand(comp, bn), bn)
                if "sharding" in bn.attrs:
                    new.attrs["sharding"] = bn.attrs["sharding"]
                if bn.is_root:
                    new.shape = bn.shape
                bn.replace_all_uses_with(new)
                remove_dead(comp, bn, control_successors(comp))
                changed = True
        return changed
