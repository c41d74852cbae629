"""Literal: a constant's value, numpy (ml_dtypes) backed, parsed from and printed as XLA text.

Constants keep their verbatim text; the numpy value is built on first use.  ``{...}`` is
an elided constant (XLA prints large constants that way): its value is unknown.
"""
from __future__ import annotations

import itertools
import math
import re

import numpy as np

from .shape import Shape
from .types import BIT_WIDTH, is_complex, is_float, is_signed_int, numpy_dtype


class LiteralSyntaxError(ValueError):
    pass


class Literal:
    __slots__ = ("shape", "array", "elements", "elided")

    def __init__(self, shape: Shape, array: np.ndarray | None = None, elements=None,
                 elided: bool = False):
        self.shape = shape
        self.array = array
        self.elements = elements  # tuple literals
        self.elided = elided

    @staticmethod
    def from_array(array, element_type: str | None = None) -> "Literal":
        arr = np.asarray(array)
        from .types import element_type_of
        et = element_type or element_type_of(arr.dtype)
        arr = arr.astype(numpy_dtype(et), copy=False)
        return Literal(Shape.array(et, arr.shape), arr)

    def to_text(self) -> str:
        if self.elided:
            return "{...}"
        if self.shape.is_tuple():
            return "( " + ", ".join(e.to_text() for e in self.elements) + " )"
        if self.shape.is_token():
            return ""
        return _array_text(self.array, self.shape.element_type)

    def __repr__(self):
        return f"Literal({self.shape.to_text()}, {self.to_text()[:60]})"


def _scalar_text(v, et: str) -> str:
    if et == "pred":
        return "true" if bool(v) else "false"
    if is_complex(et):
        return f"({_float_text(v.real)}, {_float_text(v.imag)})"
    if is_float(et):
        return _float_text(v)
    return str(int(v))


def _float_text(v) -> str:
    f = float(v)
    if f != f:
        return "nan"
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    if isinstance(v, (np.floating,)) and v.dtype.itemsize <= 4 and v.dtype != np.float64:
        text = str(np.float32(f)) if v.dtype == np.float32 else repr(f)
    else:
        text = repr(f)
    if text.endswith(".0"):
        text = text[:-2]
    return text


def _array_text(arr: np.ndarray, et: str) -> str:
    if arr.size == 0 and arr.ndim > 1:
        # XLA nests one {} per row even when rows are empty: 24x2048x2048x3x0 would be
        # 300 million of them; the parser reads a flat {} for any zero-element array
        rows = math.prod(itertools.takewhile(bool, arr.shape))  # dims before the first 0
        if rows > 1000:
            return "{}"
    if arr.ndim == 0:
        return _scalar_text(arr[()], et)
    if arr.ndim == 1:
        return "{" + ", ".join(_scalar_text(x, et) for x in arr) + "}"
    return "{ " + ", ".join(_array_text(sub, et) for sub in arr) + " }"


_COMPLEX_RE = re.compile(r"\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)")


def _to_float(tok: str) -> float:
    t = tok.strip()
    low = t.lower()
    if low.startswith(("nan", "-nan", "+nan")):
        return float("nan")
    try:
        return float(t)
    except ValueError:
        try:
            return float.fromhex(t)
        except ValueError:
            raise LiteralSyntaxError(f"bad number '{tok}'") from None


def parse_literal(text: str, shape: Shape) -> Literal:
    """Parse the text inside ``constant(...)`` for ``shape``."""
    body = text.strip()
    if body == "{...}":
        return Literal(shape, elided=True)
    if shape.is_tuple():
        return _parse_tuple_literal(body, shape)
    if not shape.is_array():
        return Literal(shape)
    et = shape.element_type
    dtype = numpy_dtype(et)
    _check_nesting(body, shape)
    if is_complex(et):
        pairs = _COMPLEX_RE.findall(body)
        values = [complex(_to_float(a), _to_float(b)) for a, b in pairs]
        if not pairs and body.strip("{} \n"):
            values = [complex(_to_float(t), 0) for t in _tokens(body)]
    else:
        toks = _tokens(body)
        if et == "pred":
            values = []
            for t in toks:
                if t in ("true", "1"):
                    values.append(True)
                elif t in ("false", "0"):
                    values.append(False)
                else:
                    raise LiteralSyntaxError(f"bad pred value '{t}'")
        elif is_float(et):
            try:
                values = np.array(toks, dtype=np.float64) if toks else []
            except ValueError:
                values = [_to_float(t) for t in toks]
        else:
            try:
                values = [int(t, 0) if t.startswith(("0x", "-0x")) else int(t) for t in toks]
            except ValueError:
                raise LiteralSyntaxError(f"bad integer in literal '{body[:60]}'") from None
            if values and et != "u64":
                info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
                lo, hi = (int(info.min), int(info.max)) if info is not None else (None, None)
                if lo is not None and not lo <= min(values) <= max(values) <= hi:
                    bad = next(v for v in values if not lo <= v <= hi)
                    raise LiteralSyntaxError(f"{str(bad)[:30]} is out of range for {et}")
            elif values and not 0 <= min(values) <= max(values) < 2**64:
                raise LiteralSyntaxError(f"a value is out of range for {et}")
    n = shape.num_elements()
    count = len(values)
    if count != n:
        if count == 1 and n != 1:
            pass  # a scalar broadcast is not XLA text; reject below
        raise LiteralSyntaxError(
            f"literal has {count} elements but shape {shape.to_text(False)} needs {n}")
    _check_range(values, et)
    if et in ("u64",):
        arr = np.array(values, dtype=np.uint64)
    else:
        arr = np.array(values, dtype=np.float64 if is_float(et) and et != "f64" else None)
        with np.errstate(over="ignore", invalid="ignore"):
            arr = arr.astype(dtype) if not is_complex(et) else np.array(values, dtype=dtype)
    return Literal(shape, arr.reshape(shape.dims))


_NOT_BRACES_RE = re.compile(r"[^{},]+")
_PAIR_RE = re.compile(r"\([^()]*\)")


def _skeleton(dims, d: int = 0) -> str:
    if d == len(dims) - 1:
        return "{" + "," * (dims[d] - 1) + "}" if dims[d] else "{}"
    return "{" + ",".join([_skeleton(dims, d + 1)] * dims[d]) + "}"


def _skeleton_length(dims, limit: int) -> int:
    """len(_skeleton(dims)), or ``limit + 1`` as soon as it passes ``limit`` (a skeleton
    is as long as the element count: never built for a text that cannot match it)."""
    if 0 in dims:  # an empty level is "{}" whatever it holds
        dims = dims[:list(dims).index(0) + 1]
    length = 0  # grows level by level from here (no empty level left above the first)
    for d in reversed(dims):
        length = 2 + d * length + max(d - 1, 0) if length else (2 + max(d - 1, 0))
        if length > limit:
            return limit + 1
    return length


def _check_nesting(body: str, shape: Shape) -> None:
    """XLA's dense literal syntax: one brace level per dimension, each level as long as
    its dimension (``{{1,2},{3,4}}`` for [2,2]); a scalar has no braces."""
    if "(" in body:
        body = _PAIR_RE.sub("0", body)  # complex (re, im) pairs
    got = _NOT_BRACES_RE.sub("", body)
    dims = shape.dims
    if not dims:
        if got:
            raise LiteralSyntaxError(f"a literal of shape {shape.to_text(False)} is one "
                                     "value, without braces")
        return
    if got == "{}" and 0 in dims:
        return  # an empty array: the printer's one-brace form (a full skeleton can be huge)
    if _skeleton_length(dims, len(got)) != len(got) or got != _skeleton(dims):
        raise LiteralSyntaxError(f"literal's nesting does not match shape "
                                 f"{shape.to_text(False)} (expected {len(dims)} level(s) of "
                                 f"braces of sizes {list(dims)})")


def _check_range(values, et: str) -> None:
    """XLA's CheckParsedValueIsInRange: integers within the type, finite floats within
    +-max of the type (inf and nan are allowed)."""
    if et == "pred" or is_complex(et) or not len(values):
        return
    if is_float(et):
        arr = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            big = float(np.nanmax(np.abs(np.where(np.isfinite(arr), arr, 0.0))))
        limit = _float_max(et)
        if big > limit:
            raise LiteralSyntaxError(f"value {big:g} is out of range for {et} "
                                     f"(|value| <= {limit:g})")
        return
    bits = BIT_WIDTH.get(et)
    if bits is None:
        return
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed_int(et) else \
        (0, (1 << bits) - 1)
    low, high = min(values), max(values)
    if low < lo or high > hi:
        bad = low if low < lo else high
        raise LiteralSyntaxError(f"value {bad} is out of range for {et} [{lo}, {hi}]")


_SCALAR_LIMITS: dict = {}


def scalar_text_fits(payload: str, et: str) -> bool:
    """Cheap check of a scalar literal written as one plain number (the common constant):
    True when it fits type ``et``; raises LiteralSyntaxError when it does not; False when
    the text needs the full parse."""
    limits = _SCALAR_LIMITS.get(et)
    if limits is None:
        if et == "pred":
            limits = ("p",)
        elif is_float(et):
            limits = ("f", _float_max(et))
        elif et in BIT_WIDTH and not is_complex(et) and et != "pred":
            bits = BIT_WIDTH[et]
            limits = ("i", -(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed_int(et) \
                else ("i", 0, (1 << bits) - 1)
        else:
            limits = ("",)
        _SCALAR_LIMITS[et] = limits
    kind = limits[0]
    if kind == "p":
        return payload in ("true", "false", "0", "1")
    if kind == "i":
        if not payload.lstrip("-").isdigit():
            return False
        v = int(payload)
        if v < limits[1] or v > limits[2]:
            raise LiteralSyntaxError(f"value {v} is out of range for {et} "
                                     f"[{limits[1]}, {limits[2]}]")
        return True
    if kind == "f":
        try:
            v = float(payload)
        except ValueError:
            return False
        if abs(v) > limits[1] and v == v and abs(v) != float("inf"):
            raise LiteralSyntaxError(f"value {abs(v):g} is out of range for {et} "
                                     f"(|value| <= {limits[1]:g})")
        return True
    return False


def _float_max(et: str) -> float:
    try:
        import ml_dtypes
        return float(ml_dtypes.finfo(numpy_dtype(et)).max)
    except (ImportError, ValueError, TypeError):
        return float(np.finfo(numpy_dtype(et)).max)


def _tokens(body: str) -> list[str]:
    flat = body.replace("{", " ").replace("}", " ").replace(",", " ")
    return flat.split()


def _parse_tuple_literal(body: str, shape: Shape) -> Literal:
    if not (body.startswith("(") and body.endswith(")")):
        raise LiteralSyntaxError("expected a tuple literal ( ... )")
    parts = split_top_level(body[1:-1])
    if len(parts) != len(shape.tuple_shapes):
        raise LiteralSyntaxError(
            f"tuple literal has {len(parts)} elements, shape has {len(shape.tuple_shapes)}")
    return Literal(shape, elements=tuple(parse_literal(p, s)
                                         for p, s in zip(parts, shape.tuple_shapes)))


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside (), {}, [] and quotes."""
    out, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail or out:
        out.append(tail)
    return out
