"""cholesky and triangular-solve as cuSOLVER / cuBLAS calls on column-major matrices.

Both libraries see a matrix as column-major (element ``(i, j)`` at ``i + j * ld``).  A
matrix stored row-major in its two minor logical dimensions is, to them, its transpose:
its lower triangle is their upper one, and a product with it changes side.  Plans read
that off the layouts; matrices whose two minor dimensions are not the two minor physical
ones (batch dimensions in between) keep the host path (the plan functions return None).

* cholesky (``cholesky`` or the gpu pipeline's ``__cusolver$cholesky`` custom call,
  ``(factor, workspace, info)``): the input's named triangle is copied into the zeroed
  output (cuBLAS ``trttp`` into a packed scratch, then ``tpttr``: the interpreter's result
  has zeros in the other triangle, where cuSOLVER would leave the input), then
  ``potrf`` runs in place, per batch element, its ``info`` into the custom call's info
  output.  An input whose layout is the output's transposed (the custom call's operand
  layout constraint not met) is first transposed by ``geam``.  The plain op NaN-fills the
  batch elements whose ``info`` is not 0, as the interpreter (and XLA's select on
  ``info``) does: that reads ``info`` back to the host, so such a thunk is never put in a
  CUDA graph; neither is the custom call (cuSOLVER's potrf is not known to be capturable).
  A failed factorization's custom-call factor is cuSOLVER's partial result (the
  interpreter's has inf/NaN from the failed pivot on); the pipeline's select on ``info``
  makes both all NaN.
* triangular-solve (``triangular-solve`` or ``__cublas$triangularSolve``, ``(x, temp)``):
  b is copied to x, then ``trsm`` solves in place per batch element.  With ``tA`` / ``tB``
  for "a / b row-major": the library's side is the other one when ``tB``, its triangle the
  other one when ``tA``, and ``op(a)`` (transposed ``t``, conjugated ``c``) becomes
  ``t ^ tA ^ tB`` on the library's view; a conjugate without transpose has no cuBLAS op
  (complex ADJOINT with mixed layouts: host).  Real types solve ADJOINT as TRANSPOSE.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...codegen.index import physical_strides

TYPES = ("f32", "f64", "c64", "c128")
LETTER = {"f32": "s", "f64": "d", "c64": "c", "c128": "z"}
# cuBLAS enums (cusolverDn takes cublasFillMode_t too)
SIDE = {"L": 0, "R": 1}
FILL = {"L": 0, "U": 1}
OP = {"N": 0, "T": 1, "C": 2}
DIAG = {False: 0, True: 1}
CHOLESKY_TARGET = "__cusolver$cholesky"
TRSM_TARGET = "__cublas$triangularSolve"


class _BatchedCalls:
    """What the plans share: one library call per element of ``offsets``, the routine's
    type letter from ``dtype``."""

    @property
    def batch(self) -> int:
        return len(self.offsets)

    @property
    def letter(self) -> str:
        return LETTER[self.dtype]


@dataclass(frozen=True)
class CholeskyPlan(_BatchedCalls):
    dtype: str
    n: int
    uplo: str                 # the library's triangle: "L" | "U"
    transpose_input: bool     # the input is stored as the output's transpose (geam first)
    offsets: tuple            # per batch element: (input, output) element offsets
    info_offsets: tuple       # per batch element: element offset in the info output (or ())
    nan_fill: bool            # the plain op: failed batch elements become NaN


@dataclass(frozen=True)
class TrsmPlan(_BatchedCalls):
    dtype: str
    side: str                 # "L" | "R"
    uplo: str                 # "L" | "U"
    trans: str                # "N" | "T" | "C"
    unit_diagonal: bool
    m: int                    # the library's B (and X): m x n column-major, ld m
    n: int
    lda: int
    offsets: tuple            # per batch element: (a, b and x) element offsets


def _target(inst) -> str:
    return inst.attrs.get("custom_call_target", "").strip('"') \
        if inst.opcode == "custom-call" else ""


def _matrix_order(shape) -> bool | None:
    """True when the two minor logical dims of ``shape`` are stored row-major, False when
    column-major, None when they are not the two minor physical dims (or not square-ish
    contiguous: the other's stride must be the minor one's size)."""
    if shape.rank < 2:
        return None
    s = physical_strides(shape)
    rows, cols = shape.dims[-2], shape.dims[-1]
    r, c = s[-2], s[-1]
    if c == 1 and (r == cols or rows == 1):
        return True
    if r == 1 and (c == rows or cols == 1):
        return False
    return None


def _batch_offsets(shapes) -> tuple | None:
    """Per batch index (the leading dims, row-major order), each shape's element offset."""
    dims = shapes[0].dims[:-2]
    if any(tuple(s.dims[:len(dims)]) != tuple(dims) for s in shapes[1:]):
        return None
    strides = [physical_strides(s) for s in shapes]
    return tuple(tuple(sum(i * st[k] for k, i in enumerate(idx)) for st in strides)
                 for idx in itertools.product(*(range(d) for d in dims)))


def _flag(inst, name: str) -> bool | None:
    text = inst.attrs.get(name)
    if text is None:
        return False
    text = text.strip().lower()
    return {"true": True, "false": False}.get(text)


def _config(inst) -> dict | None:
    from ..interpreter.ops_custom_call import backend_config
    try:
        return backend_config(inst)
    except Exception:  # noqa: BLE001 - unreadable: the host reports it
        return None


def cholesky_plan(inst) -> CholeskyPlan | None:
    """The cuSOLVER potrf calls of a cholesky, or None (it then runs on the host)."""
    if inst.opcode == "cholesky":
        lower, out, info = _flag(inst, "lower"), inst.shape, None
    elif _target(inst) == CHOLESKY_TARGET:
        cfg = _config(inst)
        if cfg is None or not inst.shape.is_tuple() or len(inst.shape.tuple_shapes) != 3:
            return None
        lower = cfg.get("lower", False)
        out, _, info = inst.shape.tuple_shapes
        if not isinstance(lower, bool) or not info.is_array() or info.element_type != "s32" \
                or tuple(info.dims) != tuple(out.dims[:-2]):
            return None
    else:
        return None
    if lower is None or len(inst.operands) != 1:
        return None
    a = inst.operands[0].shape
    if not (a.is_array() and out.is_array()) or a.element_type not in TYPES \
            or out.element_type != a.element_type or a.dims != out.dims or a.rank < 2 \
            or a.dims[-1] != a.dims[-2]:
        return None
    ta, to = _matrix_order(a), _matrix_order(out)
    if ta is None or to is None:
        return None
    offs = _batch_offsets([a, out] if info is None else [a, out, info])
    if offs is None:
        return None
    n = a.dims[-1]
    transpose = ta != to and n > 1
    uplo = "L" if lower != to else "U"
    return CholeskyPlan(a.element_type, n, uplo, transpose,
                        tuple(o[:2] for o in offs),
                        tuple(o[2] for o in offs) if info is not None else (),
                        info is None)


def trsm_plan(inst) -> TrsmPlan | None:
    """The cuBLAS trsm calls of a triangular-solve, or None (it then runs on the host)."""
    if inst.opcode == "triangular-solve":
        left, lower = _flag(inst, "left_side"), _flag(inst, "lower")
        unit = _flag(inst, "unit_diagonal")
        transpose = inst.attrs.get("transpose_a", "NO_TRANSPOSE").strip().upper()
        out = inst.shape
    elif _target(inst) == TRSM_TARGET:
        cfg = _config(inst)
        if cfg is None or not inst.shape.is_tuple() or not inst.shape.tuple_shapes:
            return None
        left, lower = cfg.get("left_side", False), cfg.get("lower", False)
        unit = cfg.get("unit_diagonal", False)
        transpose = str(cfg.get("transpose_a", "TRANSPOSE_INVALID")).upper()
        if transpose == "TRANSPOSE_INVALID":
            transpose = "NO_TRANSPOSE"
        if not all(isinstance(v, bool) for v in (left, lower, unit)):
            return None
        out = inst.shape.tuple_shapes[0]
    else:
        return None
    if None in (left, lower, unit) or len(inst.operands) != 2:
        return None
    op = {"NO_TRANSPOSE": (False, False), "TRANSPOSE": (True, False),
          "ADJOINT": (True, True)}.get(transpose)
    a, b = inst.operands[0].shape, inst.operands[1].shape
    if op is None or not (a.is_array() and b.is_array() and out.is_array()):
        return None
    dt = a.element_type
    if dt not in TYPES or b.element_type != dt or out.element_type != dt \
            or b.dims != out.dims or a.rank != b.rank or a.rank < 2 \
            or a.dims[-1] != a.dims[-2]:
        return None
    k = a.dims[-1]
    if b.dims[-2 if left else -1] != k:
        return None
    ta, tb = _matrix_order(a), _matrix_order(b)
    if ta is None or tb is None or _matrix_order(out) != tb \
            or physical_strides(out) != physical_strides(b):
        return None
    t, c = op
    if not dt.startswith("c"):
        c = False
    t = t ^ ta ^ tb
    if c and not t:
        return None
    offs = _batch_offsets([a, b])
    if offs is None:
        return None
    rows, cols = (b.dims[-1], b.dims[-2]) if tb else (b.dims[-2], b.dims[-1])
    return TrsmPlan(dt, "L" if left != tb else "R", "L" if lower != ta else "U",
                    "C" if c else ("T" if t else "N"), unit, rows, cols, k, offs)
