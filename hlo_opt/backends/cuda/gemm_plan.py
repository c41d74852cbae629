"""A gemm of the ``gpu`` pipeline (``__cublas$gemm`` / ``__cublas$lt$matmul`` custom calls,
plain ``dot``) as cuBLASLt calls: column-major matrix layouts with leading dimensions and
strided batches, read off the operands' physical layouts.

cuBLASLt computes ``D = act(alpha * op(A) . op(B) + beta * C + bias)`` on column-major
matrices (``rows x cols``, element ``(i, j)`` at ``i + j * ld``), ``batch`` of them at
``batch_stride`` elements apart.  An HLO dot ``out[b.., m, n] = sum_k lhs[b.., m, k] *
rhs[b.., k, n]`` (XLA's canonical form: one contracting dimension, at most one free one
per side) is one such call when its output is column-major (``D = lhs . rhs``) or
row-major (``D = out^T = rhs^T . lhs^T``, the usual case) in the minor two dimensions;
every operand's matrix dims may sit anywhere in its layout as long as one of them is the
minor-most (``op`` says which).  Batch dimensions that do not collapse into one uniform
stride become a host loop of calls at fixed offsets (``outer``).  Batch dimensions on one
side only (gemm-broadcast-folding) give the other side a batch stride of 0.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...codegen.index import physical_strides

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")
# cublasLtEpilogue_t of the epilogues this backend hands to cuBLASLt
CUBLASLT_EPILOGUE = {"DEFAULT": 1, "RELU": 2, "BIAS": 4, "BIAS_RELU": 6, "GELU": 32,
                     "BIAS_GELU": 36, "GELU_AUX": 160, "BIAS_GELU_AUX": 164}
# the auxiliary output (the pre-activation, tuple element 1) of these: cuBLASLt needs its
# leading dimension to be a multiple of 8
AUX_EPILOGUES = ("GELU_AUX", "BIAS_GELU_AUX")
AUX_LD_MULTIPLE = 8
TYPES = ("f32", "f16", "bf16", "f64")


@dataclass(frozen=True)
class Matrix:
    """cuBLASLt's matrix layout: column-major ``rows x cols``, leading dimension ``ld``,
    ``batch_stride`` elements between the matrices of a batch."""
    rows: int
    cols: int
    ld: int
    batch_stride: int = 0


@dataclass(frozen=True)
class GemmPlan:
    m: int                       # the HLO dot's sizes (for flops and messages)
    n: int
    k: int
    dtype: str                   # A and B
    out_dtype: str               # C and D
    alpha: float
    beta: float
    epilogue: str
    trans_a: bool
    trans_b: bool
    a: Matrix
    b: Matrix
    d: Matrix                    # C has D's layout
    swapped: bool                # cuBLAS's A is the HLO rhs (D is the output transposed)
    batch: int
    outer: tuple                 # (A, B, D) element offsets of each call
    c_operand: int | None        # operand index of C (beta != 0)
    bias_operand: int | None     # operand index of the bias vector
    algorithm: int = -1          # the autotuner's selected_algorithm: an index into
    #                              cuBLASLt's heuristic list (-1: its first)
    aux: bool = False            # *_AUX epilogues: output 1 holds the pre-activation, in
    #                              D's type and layout

    @property
    def first_workspace(self) -> int:
        """Output index of the first workspace buffer (after the value and the aux)."""
        return 2 if self.aux else 1

    @property
    def operands(self) -> tuple[int, int]:
        """HLO operand indices of cuBLAS's A and B."""
        return (1, 0) if self.swapped else (0, 1)

    def pointers(self, operand, out: int, aux: int | None = None) -> tuple:
        """``CublasLt.run``'s (a, b, c, d, bias, aux) device pointers: ``operand(i)`` is
        HLO operand ``i``'s address, ``out`` the value's, ``aux`` the aux output's."""
        ia, ib = self.operands
        return (operand(ia), operand(ib),
                operand(self.c_operand) if self.c_operand is not None else out, out,
                operand(self.bias_operand) if self.bias_operand is not None else None,
                aux if self.aux else None)


def has_gemms(module) -> bool:
    """Whether ``module`` has a dot or a cuBLAS gemm call (something cuBLASLt may run)."""
    return any(i.opcode == "dot" or (i.opcode == "custom-call" and i.attrs.get(
        "custom_call_target", "").strip('"') in GEMM_TARGETS)
        for c in module.computations for i in c.instructions)


def gemm_plan(inst) -> GemmPlan | None:
    """The cuBLASLt calls for ``inst``, or None (it then runs elsewhere)."""
    dims = _dot_dims(inst)
    if dims is None:
        return None
    lc, rc, lb, rb, alpha, beta, epilogue, algorithm = dims
    ops = inst.operands
    lhs, rhs = ops[0].shape, ops[1].shape
    out = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    if not (lhs.is_array() and rhs.is_array() and out.is_array()):
        return None
    dt, odt = lhs.element_type, out.element_type
    if dt not in TYPES or rhs.element_type != dt or odt not in (dt, "f32"):
        return None
    if len(lc) != 1 or len(rc) != 1 or (len(lb) != len(rb) and lb and rb):
        return None
    nb = max(len(lb), len(rb))
    lfree = [d for d in range(lhs.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.rank) if d not in rc and d not in rb]
    if len(lfree) > 1 or len(rfree) > 1 or out.rank != nb + len(lfree) + len(rfree):
        return None
    ls, rs, os_ = physical_strides(lhs), physical_strides(rhs), physical_strides(out)
    k = lhs.dims[lc[0]]
    if rhs.dims[rc[0]] != k:
        return None
    m, s_lm = (lhs.dims[lfree[0]], ls[lfree[0]]) if lfree else (1, 0)
    n, s_rn = (rhs.dims[rfree[0]], rs[rfree[0]]) if rfree else (1, 0)
    s_om = os_[nb] if lfree else 0
    s_on = os_[nb + len(lfree)] if rfree else 0
    pos = 2
    c_operand = bias_operand = None
    if beta != 0:
        c_operand, pos = pos, pos + 1
        c = ops[c_operand].shape
        if c.element_type != odt or c.dims != out.dims or physical_strides(c) != os_:
            return None
    if epilogue.startswith("BIAS"):
        bias_operand, pos = pos, pos + 1
    if len(ops) != pos:
        return None
    # row-major output first (D = out^T = rhs^T . lhs^T), then column-major (D = lhs . rhs)
    for swapped in (True, False):
        if swapped:
            d = _column_major(n, m, s_on, s_om)
            a, b = _operand(n, k, s_rn, rs[rc[0]]), _operand(k, m, ls[lc[0]], s_lm)
        else:
            d = _column_major(m, n, s_om, s_on)
            a, b = _operand(m, k, s_lm, ls[lc[0]]), _operand(k, n, rs[rc[0]], s_rn)
        if d is not None and a is not None and b is not None:
            break
    else:
        return None
    aux = epilogue in AUX_EPILOGUES
    if aux:
        shapes = inst.shape.tuple_shapes if inst.shape.is_tuple() else ()
        if len(shapes) < 2 or shapes[1].element_type != odt or shapes[1].dims != out.dims \
                or physical_strides(shapes[1]) != os_ or d[2] % AUX_LD_MULTIPLE:
            return None
    if bias_operand is not None:
        bias = ops[bias_operand].shape
        minor = out.effective_layout().minor_to_major[0] if out.rank else None
        d_rows_dim = (nb + len(lfree)) if swapped else nb   # the out dim D's rows run along
        if bias.rank != 1 or bias.element_type != odt or bias.dims[0] != d[0] \
                or (d[0] > 1 and minor != d_rows_dim):
            return None
    # batch dimensions: (size, A stride, B stride, D stride), outermost first
    lhs_b = [ls[x] for x in lb] if lb else [0] * nb
    rhs_b = [rs[x] for x in rb] if rb else [0] * nb
    batch_dims = []
    for i in range(nb):
        size = out.dims[i]
        if (lb and lhs.dims[lb[i]] != size) or (rb and rhs.dims[rb[i]] != size):
            return None
        sa, sb = (rhs_b[i], lhs_b[i]) if swapped else (lhs_b[i], rhs_b[i])
        if size > 1:
            batch_dims.append((size, sa, sb, os_[i]))
    batch_dims = _collapse(batch_dims)
    inner = batch_dims[-1] if batch_dims else (1, 0, 0, 0)
    outer = tuple(tuple(sum(idx[j] * batch_dims[j][1 + t] for j in range(len(idx)))
                        for t in range(3))
                  for idx in itertools.product(*(range(s) for s, *_ in batch_dims[:-1]))
                  ) if len(batch_dims) > 1 else ()
    ta, (ar, ac, ald) = a
    tb, (br, bc, bld) = b
    return GemmPlan(m, n, k, dt, odt, alpha, beta, epilogue, ta, tb,
                    Matrix(ar, ac, ald, inner[1]), Matrix(br, bc, bld, inner[2]),
                    Matrix(d[0], d[1], d[2], inner[3]), swapped, inner[0], outer,
                    c_operand, bias_operand, algorithm, aux)


def _dot_dims(inst):
    """(lhs contracting, rhs contracting, lhs batch, rhs batch, alpha, beta, epilogue,
    selected algorithm)."""
    if inst.opcode == "dot":
        return (list(inst.attr("lhs_contracting_dims", ())),
                list(inst.attr("rhs_contracting_dims", ())),
                list(inst.attr("lhs_batch_dims", ())), list(inst.attr("rhs_batch_dims", ())),
                1.0, 0.0, "DEFAULT", -1)
    if inst.opcode != "custom-call" or \
            inst.attrs.get("custom_call_target", "").strip('"') not in GEMM_TARGETS:
        return None
    from ..interpreter.ops_custom_call import backend_config
    try:
        raw = backend_config(inst)
    except Exception:  # noqa: BLE001 - an unreadable config: not ours to run
        return None
    cfg = raw.get("gemm_backend_config", raw if "dot_dimension_numbers" in raw else None)
    if not cfg:
        return None
    epilogue = cfg.get("epilogue", "DEFAULT")
    if epilogue not in CUBLASLT_EPILOGUE or float(cfg.get("alpha_imag", 0) or 0) != 0:
        return None
    d = cfg.get("dot_dimension_numbers", {})
    ints = lambda key: [int(v) for v in d.get(key) or []]  # noqa: E731
    return (ints("lhs_contracting_dimensions"), ints("rhs_contracting_dimensions"),
            ints("lhs_batch_dimensions"), ints("rhs_batch_dimensions"),
            float(cfg.get("alpha_real", 1) or 1), float(cfg.get("beta", 0) or 0), epilogue,
            int(cfg.get("selected_algorithm", -1) or -1))


def _column_major(rows, cols, s_rows, s_cols):
    """(rows, cols, ld) of a logical ``rows x cols`` matrix stored column-major, or None."""
    if rows != 1 and s_rows != 1:
        return None
    ld = s_cols if cols > 1 else rows
    return (rows, cols, ld) if ld >= rows else None


def _operand(rows, cols, s_rows, s_cols):
    """(transposed, (stored rows, stored cols, ld)) for a logical ``rows x cols`` operand:
    stored column-major as it is, or as its transpose (cuBLAS's op = T)."""
    straight = _column_major(rows, cols, s_rows, s_cols)
    if straight is not None:
        return False, straight
    flipped = _column_major(cols, rows, s_cols, s_rows)
    return (True, flipped) if flipped is not None else None


def _collapse(dims: list) -> list:
    """Merge neighbouring batch dims whose strides continue each other (for every operand),
    innermost first."""
    out = []
    for size, *strides in dims:
        if out and all(po == size * s for po, s in zip(out[-1][1:], strides)):
            out[-1] = (out[-1][0] * size, *strides)
        else:
            out.append((size, *strides))
    return out
