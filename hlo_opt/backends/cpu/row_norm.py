"""The CPU kernel of a row normalisation (``row_normalization`` kind: a ``__triton``
softmax / layer-norm fusion): one function, a loop over the rows; per row, each
reduction in order (an inner loop over the row, earlier reductions of the row already
known), then a loop over the row storing the root.  The rows split over threads as loop
kernels' outer loops do."""
from __future__ import annotations

from ...codegen import index as ix
from ...codegen.row_norm import RowEmitter, reduction_var, row_indices, row_norm_of


def row_trip(kernel) -> int:
    """The outermost batch loop's trip count (0 when there is no batch loop)."""
    dims = [n for n in kernel.index_spaces[0].dims[:-1] if n != 1]
    return dims[0] if dims else 0


def render_row_norm(r, scope_cls) -> None:
    """Render ``r.k`` (a KernelRenderer's kernel) into ``r``'s function."""
    k = r.k
    rn = row_norm_of(k.instruction)
    shape = k.index_spaces[0]
    if any(n == 0 for n in shape.dims):
        return
    em = r.em = RowEmitter(k.input_map)
    batch, col = row_indices(shape)
    idx = batch + (col,)
    et = shape.element_type
    from . import irtypes as T
    b = r.b
    ptr = b.bitcast(r.outputs[0], T.storage(et).as_pointer())
    root = rn.root

    def row_body(scope):
        em.known.clear()
        for i, red in enumerate(rn.reduces):
            v = r.emit(em.value(red, batch), scope)
            name = reduction_var(i, red)
            scope.vals[name] = v
            em.known[red] = name

        def col_body(sc):
            v = r.emit(em.value(root, idx), sc)
            lin = r.emit(ix.linear_index(shape, idx), sc)
            r.b.store(T.to_storage(r.b, v, et), r.b.gep(ptr, [lin]))
        cols = [(col, shape.dims[-1])] if shape.dims[-1] != 1 else []
        r._nest(cols, 0, col_body, scope_cls(scope))

    loops = [(v, n) for v, n in zip(batch, shape.dims[:-1]) if n != 1]
    r._nest(loops, 0, row_body, scope_cls(), bounds=r.bounds)
