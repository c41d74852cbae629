"""Row normalisation: the structure one kernel per row can evaluate (softmax, layer norm).

A *row-normalisation* computation has an array root of shape ``R = B + [N]`` (``B`` the
batch dims, ``N`` the row) in the default layout, and every ``reduce`` in it folds
exactly the last dimension of an ``R``-shaped operand into a ``B``-shaped result.  Values
that depend on a reduction stay per-row: ``R``-shaped elementwise ops, per-row values
(``B``, give or take dimensions of size 1: elementwise ops, reshapes and bitcasts among
them), and broadcasts of per-row values along the batch dims.  Everything else
(parameters, constants, broadcasts of them, any elemental op on them) is free and is read
at whatever index the row asks for.

So one row is computed as: each reduction in post order (its operand evaluated at
``(row, c)`` for every column ``c``, earlier reductions of the same row already known),
then the root at ``(row, c)``.  :func:`analyze` checks the structure and returns the
reductions in that order; the ``softmax-rewriter-triton`` pass uses it to decline what
the backends could not emit, and the planner to choose the ``row_normalization`` kind.

``TRITON_FUSION_KIND`` is XLA's ``fusion_backend_config.kind`` of such fusions.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.layout import has_default_layout
from ..ir.opcodes import is_elementwise
from . import index as ix
from .elemental import ElementalEmitter
from .expr import Expr, const, var, walk
from .gemm_fusion import fusion_backend_config

TRITON_FUSION_KIND = "__triton"


@dataclass
class RowNorm:
    root: object
    batch: tuple          # B
    row: int              # N
    reduces: list         # the reductions, in post order


def _squeeze(dims) -> tuple:
    return tuple(n for n in dims if n != 1)


def is_per_row(dims, r_dims) -> bool:
    """A per-row shape of rows ``r_dims``: not the rows, the batch dims give or take
    dimensions of size 1."""
    dims, r_dims = tuple(dims), tuple(r_dims)
    return dims != r_dims and _squeeze(dims) == _squeeze(r_dims[:-1])


def _along_batch(bcast, b_dims) -> bool:
    """A broadcast of a per-row value along the row: the operand's non-degenerate dims
    are the batch dims, in order."""
    op = bcast.operands[0].shape.dims
    if _squeeze(op) != _squeeze(b_dims):
        return False
    mapped = [bcast.dimensions[i] for i, n in enumerate(op) if n != 1]
    return mapped == [d for d, n in enumerate(b_dims) if n != 1]


def analyze(comp, seeds=()) -> tuple[RowNorm | None, str]:
    """(structure, "") when ``comp`` is a row normalisation, else (None, why not).
    ``seeds``: instructions to treat as computed from a reduction (the parameter through
    which another normalisation would feed this one, were the two merged)."""
    return analyze_instructions(comp.root, comp.post_order(), seeds)


def analyze_instructions(root, order, seeds=()) -> tuple[RowNorm | None, str]:
    """:func:`analyze` for the instructions ``order`` (in post order, ``root`` last) as
    if they were fused: operands from elsewhere are parameters."""
    shape = root.shape
    if not shape.is_array() or shape.rank == 0:
        return None, "the root is not an array of rank >= 1"
    r_dims = tuple(shape.dims)
    b_dims = r_dims[:-1]
    dependent: set = set(seeds)   # values computed from a reduction of the row
    reduces = []
    for inst in order:
        if not inst.shape.is_array() or not has_default_layout(inst.shape):
            return None, f"%{inst.name} is not an array in the default layout"
        if inst.opcode == "reduce":
            op = inst.operands[0]
            if len(inst.operands) != 2 or tuple(op.shape.dims) != r_dims or \
                    tuple(inst.dimensions) != (len(r_dims) - 1,) or \
                    tuple(inst.shape.dims) != b_dims:
                return None, f"%{inst.name} does not reduce the row dimension of the root"
            if inst.operands[1] in dependent:
                return None, f"%{inst.name}: the init value depends on a reduction"
            reduces.append(inst)
            dependent.add(inst)
            continue
        if inst in dependent or not any(o in dependent for o in inst.operands):
            continue
        dims = tuple(inst.shape.dims)
        per_row = is_per_row(dims, r_dims)
        if is_elementwise(inst.opcode) and (dims == r_dims or per_row):
            dependent.add(inst)
            continue
        if inst.opcode in ("reshape", "bitcast") and per_row and \
                _squeeze(inst.operands[0].shape.dims) == _squeeze(b_dims):
            dependent.add(inst)
            continue
        if inst.opcode == "broadcast" and dims == r_dims and \
                _along_batch(inst, b_dims):
            dependent.add(inst)
            continue
        return None, (f"%{inst.name} ({inst.opcode}) uses a reduction but is neither "
                      "elementwise per row nor a broadcast along the row")
    if not reduces:
        return None, "no reduction"
    return RowNorm(root, b_dims, r_dims[-1], reduces), ""


def fusion_backend_kind(inst) -> str | None:
    """``backend_config.fusion_backend_config.kind`` of a fusion (None when absent)."""
    if "fusion_backend_config" not in inst.attrs.get("backend_config", ""):
        return None
    return fusion_backend_config(inst).get("kind")


def is_triton_norm_fusion(inst) -> bool:
    """A ``__triton`` kCustom fusion (what ``softmax-rewriter-triton`` forms)."""
    return inst.opcode == "fusion" and inst.attrs.get("kind") == "kCustom" and \
        fusion_backend_kind(inst) == TRITON_FUSION_KIND


def row_norm_of(inst) -> RowNorm | None:
    """The structure of a ``__triton`` kCustom fusion that is a row normalisation."""
    if not is_triton_norm_fusion(inst):
        return None
    rn, _ = analyze(inst.fused_computation)
    return rn


class RowEmitter(ElementalEmitter):
    """The elemental emitter of one row: a reduction already computed for the current row
    (``known``: instruction -> its value, a ``var`` the renderer has bound) is that value
    at every index, which :func:`analyze` guarantees is the row's own."""

    def __init__(self, inputs: dict, batch: tuple = (), staged=frozenset()):
        super().__init__(inputs)
        self.known: dict = {}
        self.batch = tuple(batch)
        self.staged = staged      # input numbers whose current row a renderer has staged
        self.cached: dict = {}    # instruction -> number of the row buffer holding it

    def value(self, inst, idx: tuple, leaf: int = 0) -> Expr:
        hit = self.known.get(inst)
        if hit is not None:
            return hit
        in_row = tuple(idx[:-1]) == self.batch
        n = self.inputs.get((inst, leaf))
        if n is not None and n in self.staged and in_row:
            # an element of the current row of a staged input: ("row", n) loads index
            # the staged row by column
            return Expr("load", inst.shape.element_type, (idx[-1],), ("row", n))
        c = self.cached.get(inst)
        if c is not None and leaf == 0 and in_row:
            # a reduction's operand the renderer kept while reducing it (softmax's exp):
            # ("cache", c) loads index that row buffer by column
            return Expr("load", inst.shape.element_type, (idx[-1],), ("cache", c))
        if inst.opcode == "divide" and inst.shape.element_type in ("f32", "f64"):
            return self._divide(inst, idx)
        return super().value(inst, idx, leaf)

    def _divide(self, inst, idx) -> Expr:
        """``x / d`` with ``d`` the same along the row (softmax's sum) is ``x * (1 / d)``:
        one reciprocal per row instead of a division per element, as Triton's approximate
        division (at most 1.5 ulp from the correctly rounded quotient; as there, a
        divisor below 2^-126 in f32 may overflow its reciprocal)."""
        key = (inst, 0, idx)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        x, d = self.operand(inst, 0, idx), self.operand(inst, 1, idx)
        et = inst.shape.element_type
        col = idx[-1] if idx else None
        if col is not None and col.op == "var" and all(e != col for e in walk(d)):
            e = Expr("multiply", et, (x, Expr("divide", et, (const(1.0, et), d))))
        else:
            e = Expr("divide", et, (x, d))
        self._memo[key] = e
        return e


def reached_from_root(rn: RowNorm, inst) -> bool:
    """Whether the root's elementwise tree reads ``inst`` (not only through a reduction
    of the row): a value worth keeping per element while its reduction runs."""
    seen, stack = set(), [rn.root]
    while stack:
        x = stack.pop()
        if x is inst:
            return True
        if x in seen or x.opcode == "reduce":
            continue
        seen.add(x)
        stack.extend(x.operands)
    return False


def row_indices(shape) -> tuple[tuple, Expr]:
    """(batch index, column) loop variables of a row-normalisation output: ``rn_b<d>`` per
    batch dim and ``rn_c`` for the row (size-1 dims are the constant 0)."""
    dims = shape.dims
    batch = tuple(ix.loop_var(f"rn_b{d}", n) for d, n in enumerate(dims[:-1]))
    return batch, ix.loop_var("rn_c", dims[-1])


def reduction_var(i: int, inst) -> Expr:
    """The scalar a renderer binds to reduction ``i`` of the row."""
    return var(f"rn_red{i}", inst.shape.element_type)
