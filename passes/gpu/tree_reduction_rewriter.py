"""``gpu-tree-reduction-rewriter``: XLA's GpuTreeReductionRewriter.

A row or column reduction too large to be race free (row: more than 1024x16 reduced
elements or a batch over 8; column: more than 32x128) is done in two stages: the reduced
dimension n is padded (with the init value) to a multiple of k ~ sqrt(n) (the split with
the least padding, preferring powers of two), bitcast to [.., k, n/k, ..], reduced over
the minor part, then over the rest.  A batched reduction whose batch does not fit is
split into a reduction of the row and then of the batch.  Min/max reductions are left
alone (XLA does so unless its MLIR emitters are fully enabled).
"""
from __future__ import annotations

import math

from hlo_opt.rewrite.graph import fusible_computations, replace_and_remove_dead
from ._reduce_util import array, bitcast, make_reduce, maybe_tuple
from hlo_opt.analysis.gpu.reduction import (BATCHED_REDUCTION_RACE_FREE_BOUND, race_free_bound,
                                            reduction_dimensions, reduction_is_race_free,
                                            reduction_kind,
                                            is_reduction_from_or_to_contiguous_dimensions)


def _should_swap(k, n_div_k, n, bound, is_row) -> bool:
    if k > bound:
        return False
    if is_row:
        maybe_vectorized = n_div_k % 2 == 0 and n % 2 == 0
        if maybe_vectorized:
            return n_div_k * 2 < k or k % 2 == 0
        return n % 2 == 0 or k % 2 != 0
    return True


def rewrite(reduce):
    if reduction_kind(reduce.to_apply) in ("maximum", "minimum"):
        return None
    if not is_reduction_from_or_to_contiguous_dimensions(reduce):
        return None
    rd = reduction_dimensions(reduce)
    n_in = len(reduce.operands) // 2
    inputs, inits = reduce.operands[:n_in], reduce.operands[n_in:]
    in_dims = list(inputs[0].shape.dims)
    dims = sorted(reduce.dimensions)
    if not _grouped(dims) or any(
            x.shape.effective_layout().minor_to_major != tuple(range(x.shape.rank - 1, -1, -1))
            for x in inputs):
        return None  # (XLA runs it after the grouper and reduction-layout-normalizer)
    reduce_batch = len(dims) > 1
    reduced_dim = dims[-1]
    comp = reduce.parent
    if reduce_batch and in_dims[0] > BATCHED_REDUCTION_RACE_FREE_BOUND:
        if not rd.is_row_reduction:
            return None
        shapes = [array(x.shape.element_type, [d for i, d in enumerate(in_dims) if i != reduced_dim])
                  for x in inputs]
        inner = make_reduce(comp, maybe_tuple(shapes), inputs, inits, [reduced_dim],
                            reduce.to_apply, reduce)
        return make_reduce(comp, reduce.shape, [inner] if n_in == 1 else _gtes(comp, inner, n_in),
                           inits, [0], reduce.to_apply, reduce)
    if reduction_is_race_free(rd):
        return None
    n = in_dims[reduced_dim]
    n_div_k = int(math.floor(math.sqrt(n)))
    bound = race_free_bound(rd)
    if n_div_k > bound:
        n_div_k = bound
    min_pad = (n_div_k - n % n_div_k) % n_div_k
    best_k = (n + min_pad) // n_div_k
    for i in range(n_div_k - 1, n_div_k // 2, -1):
        pad = (i - n % i) % i
        if pad < min_pad or (pad == min_pad and (i & (i - 1)) == 0):
            min_pad = pad
            best_k = (n + pad) // i
    padded_n = n + min_pad
    if _should_swap(best_k, padded_n // best_k, n, bound, rd.is_row_reduction):
        best_k = padded_n // best_k
    padded = list(inputs)
    if min_pad:
        padded = []
        for x, init in zip(inputs, inits):
            config = ["0_0"] * len(in_dims)
            config[reduced_dim] = f"0_{padded_n - n}"
            pdims = list(in_dims)
            pdims[reduced_dim] = padded_n
            padded.append(comp.add("pad", array(x.shape.element_type, pdims), [x, init],
                                   name="pad", attrs={"padding": "x".join(config)}))
    reshaped = []
    for i, d in enumerate(in_dims):
        if i == reduced_dim:
            reshaped += [best_k, padded_n // best_k]
        else:
            reshaped.append(d)
    inner_dims = list(reshaped)
    inner_reduced = len(inner_dims) - 1 if rd.is_row_reduction else reduced_dim + 1
    del inner_dims[inner_reduced]
    if reduce_batch:
        del inner_dims[0]
    dims_to_reduce = [inner_reduced]
    if reduce_batch:
        dims_to_reduce.append(0)
        inner_reduced -= 1
    bitcasts = [bitcast(comp, p, array(p.shape.element_type, reshaped)) for p in padded]
    inner_shapes = [array(p.shape.element_type, inner_dims) for p in padded]
    inner = make_reduce(comp, maybe_tuple(inner_shapes), bitcasts, inits, dims_to_reduce,
                        reduce.to_apply, reduce)
    outer_dims = list(inner_dims)
    outer_reduced = len(outer_dims) - 1 if rd.is_row_reduction else reduced_dim
    return make_reduce(comp, reduce.shape, [inner] if n_in == 1 else _gtes(comp, inner, n_in),
                       inits, [outer_reduced], reduce.to_apply, reduce)


def _grouped(dims) -> bool:
    """Whether the reduced dimensions are in reduction-dimension-grouper's form, the only
    one the split below understands (as XLA's, which runs after the grouper): at most two
    reduced dimensions, none adjacent to another, and a second one only as a leading batch
    dimension.  Any other valid reduction (the grouper disabled) is left alone."""
    if len(dims) > 2 or any(b == a + 1 for a, b in zip(dims, dims[1:])):
        return False
    return len(dims) < 2 or dims[0] == 0


def _gtes(comp, tup, n):
    from hlo_opt.rewrite.graph import add_gte
    return [add_gte(comp, tup, i) for i in range(n)]


class GpuTreeReductionRewriter:
    name = "gpu-tree-reduction-rewriter"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.post_order():
                if inst.opcode == "reduce" and inst.parent is comp:
                    new = rewrite(inst)
                    if new is not None:
                        replace_and_remove_dead(comp, inst, new)
                        changed = True
        return changed
