"""Shape and Layout, immutable, with a cached text parser.

Shapes repeat heavily in real modules, so ``Shape.parse`` memoises by text: parsing a
20 MB module touches the shape grammar only a few thousand times.
"""
from __future__ import annotations

import math
import re

from .types import BIT_WIDTH, ELEMENT_TYPES, numpy_dtype


class ShapeSyntaxError(ValueError):
    """Raised with the offset into the shape text where parsing failed."""

    def __init__(self, what: str, offset: int):
        super().__init__(what)
        self.what = what
        self.offset = offset


class Layout:
    """minor_to_major plus everything after ':' (tiles, memory space, ...), kept verbatim."""

    __slots__ = ("minor_to_major", "tail")

    def __init__(self, minor_to_major: tuple[int, ...], tail: str = ""):
        self.minor_to_major = tuple(minor_to_major)
        self.tail = tail

    def to_text(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.tail if self.tail else "") + "}"

    def __eq__(self, other):
        return (isinstance(other, Layout) and self.minor_to_major == other.minor_to_major
                and self.tail == other.tail)

    def __hash__(self):
        return hash((self.minor_to_major, self.tail))

    def __repr__(self):
        return f"Layout({self.to_text()})"

    @staticmethod
    def default(rank: int) -> "Layout":
        return Layout(tuple(range(rank - 1, -1, -1)))

    @property
    def memory_space(self) -> int:
        m = re.search(r"S\((\d+)\)", self.tail)
        return int(m.group(1)) if m else 0


class Shape:
    """An array shape (element type, dims, dynamic bounds, layout), a tuple, token or opaque."""

    __slots__ = ("element_type", "dims", "dynamic", "layout", "tuple_shapes", "_hash", "_text")

    def __init__(self, element_type: str, dims=(), dynamic=None, layout: Layout | None = None,
                 tuple_shapes=None):
        self.element_type = element_type
        self.dims = tuple(dims)
        self.dynamic = tuple(dynamic) if dynamic is not None else (False,) * len(self.dims)
        self.layout = layout
        self.tuple_shapes = tuple(tuple_shapes) if tuple_shapes is not None else ()
        self._hash = None
        self._text = None  # (with layout, without): shapes are immutable, like _hash

    # ---- construction -----------------------------------------------------------------
    @staticmethod
    def array(element_type: str, dims, layout: Layout | None = None) -> "Shape":
        return Shape(element_type, dims, None, layout)

    @staticmethod
    def tuple(shapes) -> "Shape":
        return Shape("tuple", (), None, None, shapes)

    @staticmethod
    def token() -> "Shape":
        return Shape("token")

    def with_element_type(self, element_type: str) -> "Shape":
        return Shape(element_type, self.dims, self.dynamic, self.layout)

    def with_dims(self, dims, layout: Layout | None = None) -> "Shape":
        return Shape(self.element_type, dims, None, layout)

    def with_layout(self, layout: Layout | None) -> "Shape":
        if self.is_tuple():
            return self
        return Shape(self.element_type, self.dims, self.dynamic, layout)

    def without_layout(self) -> "Shape":
        if self.is_tuple():
            return Shape.tuple(s.without_layout() for s in self.tuple_shapes)
        return Shape(self.element_type, self.dims, self.dynamic, None)

    # ---- queries ----------------------------------------------------------------------
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque")

    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    def num_elements(self) -> int:
        return math.prod(self.dims)

    def is_scalar(self) -> bool:
        return self.is_array() and not self.dims

    def is_dynamic(self) -> bool:
        return any(self.dynamic) or any(s.is_dynamic() for s in self.tuple_shapes)

    @property
    def dtype(self):
        return numpy_dtype(self.element_type)

    def byte_size(self) -> int:
        """Bytes of the array (sum of leaves for tuples); sub-byte types round up."""
        if self.is_tuple():
            return sum(s.byte_size() for s in self.tuple_shapes)
        if not self.is_array():
            return 0
        return (self.num_elements() * BIT_WIDTH[self.element_type] + 7) // 8

    def leaves(self) -> list["Shape"]:
        """Array/token leaves of a (nested) tuple shape in order."""
        if not self.is_tuple():
            return [self]
        out = []
        for s in self.tuple_shapes:
            out.extend(s.leaves())
        return out

    def effective_layout(self) -> Layout:
        return self.layout if self.layout is not None else Layout.default(len(self.dims))

    def same_dims_and_type(self, other: "Shape") -> bool:
        """Equal ignoring layouts (XLA's ShapeUtil::Compatible, dynamic bits included)."""
        if self.element_type != other.element_type:
            return False
        if self.is_tuple():
            return (len(self.tuple_shapes) == len(other.tuple_shapes) and all(
                a.same_dims_and_type(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        return self.dims == other.dims and self.dynamic == other.dynamic

    # ---- text -------------------------------------------------------------------------
    def to_text(self, layout: bool = True) -> str:
        cached = self._text
        if cached is None:
            cached = self._text = (self._make_text(True), self._make_text(False))
        return cached[0] if layout else cached[1]

    def _make_text(self, layout: bool) -> str:
        if self.element_type == "tuple":
            return "(" + ", ".join(s.to_text(layout) for s in self.tuple_shapes) + ")"
        if self.element_type in ("token", "opaque"):
            return self.element_type + "[]"
        dims = ",".join(("<=" + str(d) if dyn else str(d)) if d >= 0 else "?"
                        for d, dyn in zip(self.dims, self.dynamic))
        text = f"{self.element_type}[{dims}]"
        if layout and self.dims:
            text += (self.layout or Layout.default(len(self.dims))).to_text()
        elif layout and self.layout is not None and self.layout.tail:
            text += self.layout.to_text()
        return text

    def __str__(self):
        return self.to_text()

    def __repr__(self):
        return f"Shape({self.to_text()})"

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Shape):
            return NotImplemented
        return (self.element_type == other.element_type and self.dims == other.dims
                and self.dynamic == other.dynamic
                and self.effective_layout_or_none() == other.effective_layout_or_none()
                and self.tuple_shapes == other.tuple_shapes)

    def effective_layout_or_none(self):
        if not self.is_array():
            return None
        return self.effective_layout()

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.element_type, self.dims, self.dynamic, self.tuple_shapes))
        return self._hash

    @staticmethod
    def parse(text: str) -> "Shape":
        """Parse a whole shape string (cached)."""
        shape = _cache.get(text)
        if shape is None:
            shape, end = parse_shape_at(text, 0)
            if text[end:].strip():
                raise ShapeSyntaxError("unexpected text after shape", end)
            if len(_cache) < 100_000:
                _cache[text] = shape
        return shape


_cache: dict[str, Shape] = {}
# Limits of what the tool accepts (documented in README "Limits"): deeper tuples, higher
# ranks or bigger arrays than these are rejected where the shape is written.
MAX_TUPLE_DEPTH = 64          # real modules nest tuples a few levels deep
MAX_RANK = 64                 # numpy's limit on array dimensions
MAX_ARRAY_BYTES = 2**63 - 1   # XLA: an array's byte size must fit in int64
MAX_TUPLE_LEAVES = 1_000_000  # tuple(t, t) doubles: built shapes could outgrow any text


def tuple_limits(shape: "Shape") -> str | None:
    """Why a (built, not written) tuple shape is beyond the limits, or None.  Iterative
    and linear in the distinct sub-shapes, however they are shared."""
    info: dict[int, tuple[int, int]] = {}  # id -> (depth, leaves)
    stack = [(shape, False)]
    while stack:
        s, ready = stack.pop()
        if id(s) in info:
            continue
        if not s.tuple_shapes:
            info[id(s)] = (0, 0 if s.is_tuple() else 1)
            continue
        if not ready:
            stack.append((s, True))
            stack.extend((c, False) for c in s.tuple_shapes if id(c) not in info)
            continue
        kids = [info[id(c)] for c in s.tuple_shapes]
        depth = 1 + max(k[0] for k in kids)
        leaves = sum(k[1] for k in kids)
        if depth > MAX_TUPLE_DEPTH:
            return f"the tuple shape nests more than {MAX_TUPLE_DEPTH} levels deep (the limit)"
        if leaves > MAX_TUPLE_LEAVES:
            return f"the tuple shape has more than {MAX_TUPLE_LEAVES} leaves (the limit)"
        info[id(s)] = (depth, leaves)
    return None
_ARRAY_RE = re.compile(r"\s*([a-z][a-z0-9]*)\[([^\]]*)\]")
_LAYOUT_RE = re.compile(r"\{([0-9,\s]*)(?::((?:[^{}()]|\([^{}()]*\)|\{[^{}()]*\})*))?\}")
_prefix_cache: dict[str, tuple[Shape, int]] = {}
# what a layout's tail (tiles, element size, memory space, ...) never holds: kept verbatim,
# it must print back as it parsed
_BAD_TAIL_RE = re.compile(r"[\[\]\"'<>=%;]")


def parse_shape_at(text: str, pos: int, depth: int = 0) -> tuple[Shape, int]:
    """Parse one shape starting at ``pos``; return (shape, end offset).  Shapes beyond the
    limits above (tuple depth, rank, byte size) and layouts that are not a permutation of
    the dimensions raise :class:`ShapeSyntaxError` at their offset."""
    n = len(text)
    while pos < n and text[pos] in " \t\n\r":
        pos += 1
    if pos < n and text[pos] == "(":
        if depth >= MAX_TUPLE_DEPTH:
            raise ShapeSyntaxError(f"tuple shapes nest more than {MAX_TUPLE_DEPTH} levels "
                                   "deep (the limit)", pos)
        pos += 1
        elems = []
        while True:
            while pos < n and text[pos] in " \t\n\r":
                pos += 1
            if pos < n and text[pos] == ")":
                return Shape.tuple(elems), pos + 1
            s, pos = parse_shape_at(text, pos, depth + 1)
            elems.append(s)
            while pos < n and text[pos] in " \t\n\r":
                pos += 1
            if pos < n and text[pos] == ",":
                pos += 1
                continue
            if pos < n and text[pos] == ")":
                return Shape.tuple(elems), pos + 1
            raise ShapeSyntaxError("expected ',' or ')' in tuple shape", pos)
    m = _ARRAY_RE.match(text, pos)
    if not m:
        raise ShapeSyntaxError("expected a shape", pos)
    etype = m.group(1)
    if etype not in ELEMENT_TYPES:
        raise ShapeSyntaxError(f"unknown element type '{etype}'", m.start(1))
    dims, dynamic = [], []
    body = m.group(2).strip()
    if body:
        for item in body.split(","):
            item = item.strip()
            if item.startswith("<=") and item[2:].strip().isdigit() and len(item) <= 21:
                dims.append(int(item[2:]))
                dynamic.append(True)
            elif item == "?":
                dims.append(-1)
                dynamic.append(True)
            elif item.isdigit() and len(item) <= 19:
                dims.append(int(item))
                dynamic.append(False)
            else:
                raise ShapeSyntaxError(f"bad dimension '{item[:20]}'", m.start(2))
        if len(dims) > MAX_RANK:
            raise ShapeSyntaxError(f"rank {len(dims)} is above the limit of {MAX_RANK}",
                                   m.start(2))
        if etype in BIT_WIDTH and \
                (math.prod(dims) * BIT_WIDTH[etype] + 7) // 8 > MAX_ARRAY_BYTES:
            raise ShapeSyntaxError("the array's byte size does not fit in int64", m.start(2))
    pos = m.end()
    layout = None
    if pos < n and text[pos] == "{":
        lm = _LAYOUT_RE.match(text, pos)
        if not lm:
            raise ShapeSyntaxError("bad layout", pos)
        m2m_text = lm.group(1).strip()
        try:
            m2m = tuple(int(x) for x in m2m_text.split(",")) if m2m_text else ()
        except ValueError:
            raise ShapeSyntaxError("bad layout", pos) from None
        if etype not in ("token", "opaque") and len(m2m) != len(dims) and (m2m or dims):
            raise ShapeSyntaxError(
                f"layout {{{m2m_text[:40]}}} does not match rank {len(dims)}", pos)
        if m2m and sorted(m2m) != list(range(len(dims))):
            raise ShapeSyntaxError(f"layout {{{m2m_text[:40]}}} is not a permutation of the "
                                   f"dimensions 0..{len(dims) - 1}", pos)
        tail = (lm.group(2) or "").strip()
        if _BAD_TAIL_RE.search(tail):
            raise ShapeSyntaxError("bad layout", pos)
        layout = Layout(m2m, tail)
        pos = lm.end()
    return Shape(etype, dims, dynamic, layout), pos
