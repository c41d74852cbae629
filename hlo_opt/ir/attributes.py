"""Typed attribute values that passes read, parsed lazily from their verbatim text.

An instruction keeps each attribute as written (``dimensions={0,1}``) and parses it to a
typed value on first use through ``ATTR_PARSERS``.  Typed values print themselves back
with ``to_text()`` in XLA's canonical spelling.  Attributes passes never read (metadata,
backend_config, sharding, ...) stay verbatim strings forever.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace


class AttrSyntaxError(ValueError):
    pass


def parse_int_list(text: str) -> tuple[int, ...]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise AttrSyntaxError(f"expected {{i,j,...}}, got '{text}'")
    body = body[1:-1].strip()
    if not body:
        return ()
    try:
        return tuple(int(x) for x in body.split(","))
    except ValueError:
        raise AttrSyntaxError(f"expected integers in '{text}'") from None


def int_list_text(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def parse_bool(text: str) -> bool:
    if text == "true":
        return True
    if text == "false":
        return False
    raise AttrSyntaxError(f"expected true or false, got '{text}'")


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise AttrSyntaxError(f"expected an integer, got '{text}'") from None


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise AttrSyntaxError(f"expected a number, got '{text}'") from None


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r"}


def parse_string(text: str) -> str:
    """A quoted C-escaped string (or a bare word, returned as is)."""
    if not text.startswith('"'):
        return text
    if not text.endswith('"') or len(text) < 2:
        raise AttrSyntaxError(f"unterminated string {text}")
    body = text[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def quote_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@dataclass
class WindowDim:
    size: int = 1
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    base_dilation: int = 1
    window_dilation: int = 1
    window_reversal: bool = False


@dataclass
class Window:
    """``window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}``"""
    dims: list[WindowDim] = field(default_factory=list)

    @staticmethod
    def parse(text: str) -> "Window":
        body = text.strip()
        if not (body.startswith("{") and body.endswith("}")):
            raise AttrSyntaxError(f"expected window={{...}}, got '{text}'")
        fields: dict[str, list[str]] = {}
        for item in body[1:-1].split():
            if "=" not in item:
                raise AttrSyntaxError(f"bad window item '{item}'")
            k, v = item.split("=", 1)
            fields[k] = v.split("x")
        rank = max((len(v) for v in fields.values()), default=0)
        dims = [WindowDim() for _ in range(rank)]
        try:
            for k, vals in fields.items():
                if len(vals) != rank:
                    raise AttrSyntaxError(f"window field {k} has {len(vals)} dims, expected {rank}")
                for d, v in zip(dims, vals):
                    if k == "size":
                        d.size = int(v)
                    elif k == "stride":
                        d.stride = int(v)
                    elif k == "pad":
                        lo, hi = v.split("_")
                        d.padding_low, d.padding_high = int(lo), int(hi)
                    elif k == "lhs_dilate":
                        d.base_dilation = int(v)
                    elif k == "rhs_dilate":
                        d.window_dilation = int(v)
                    elif k == "rhs_reversal":
                        d.window_reversal = v == "1"
                    else:
                        raise AttrSyntaxError(f"unknown window field '{k}'")
        except ValueError:
            raise AttrSyntaxError(f"bad window '{text}'") from None
        return Window(dims)

    def to_text(self) -> str:
        if not self.dims:
            return "{}"
        parts = ["size=" + "x".join(str(d.size) for d in self.dims)]
        if any(d.stride != 1 for d in self.dims):
            parts.append("stride=" + "x".join(str(d.stride) for d in self.dims))
        if any(d.padding_low or d.padding_high for d in self.dims):
            parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in self.dims))
        if any(d.base_dilation != 1 for d in self.dims):
            parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in self.dims))
        if any(d.window_dilation != 1 for d in self.dims):
            parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in self.dims))
        if any(d.window_reversal for d in self.dims):
            parts.append("rhs_reversal=" + "x".join("1" if d.window_reversal else "0"
                                                    for d in self.dims))
        return "{" + " ".join(parts) + "}"


@dataclass
class PaddingConfig:
    """``padding=0_0x1_2_1``: (low, high, interior) per dimension."""
    dims: list[tuple[int, int, int]]

    @staticmethod
    def parse(text: str) -> "PaddingConfig":
        dims = []
        if text.strip() in ("", "{}"):
            return PaddingConfig([])
        for item in text.strip().split("x"):
            parts = item.split("_")
            if len(parts) not in (2, 3):
                raise AttrSyntaxError(f"bad padding '{text}'")
            try:
                lo, hi = int(parts[0]), int(parts[1])
                interior = int(parts[2]) if len(parts) == 3 else 0
            except ValueError:
                raise AttrSyntaxError(f"bad padding '{text}'") from None
            dims.append((lo, hi, interior))
        return PaddingConfig(dims)

    def to_text(self) -> str:
        return "x".join(f"{lo}_{hi}" + (f"_{it}" if it else "") for lo, hi, it in self.dims)


@dataclass
class SliceSpec:
    """``slice={[0:10:1],[0:5]}``: (start, limit, stride) per dimension."""
    dims: list[tuple[int, int, int]]

    @staticmethod
    def parse(text: str) -> "SliceSpec":
        items = re.findall(r"\[([^\]]*)\]", text)
        dims = []
        for item in items:
            parts = item.split(":")
            try:
                start, limit = int(parts[0]), int(parts[1])
                stride = int(parts[2]) if len(parts) > 2 else 1
            except (ValueError, IndexError):
                raise AttrSyntaxError(f"bad slice '{text}'") from None
            dims.append((start, limit, stride))
        return SliceSpec(dims)

    def to_text(self) -> str:
        return "{" + ", ".join(f"[{a}:{b}" + (f":{s}]" if s != 1 else "]")
                               for a, b, s in self.dims) + "}"

    @property
    def starts(self):
        return [d[0] for d in self.dims]

    @property
    def limits(self):
        return [d[1] for d in self.dims]

    @property
    def strides(self):
        return [d[2] for d in self.dims]


def _labels_text(a: int, a_ch: str, b: int, b_ch: str, spatial) -> str:
    """One side of dim_labels, as long as its largest named dimension needs (XLA's
    ConvolutionDimensionNumbersToString: unnamed dims in between print as ``?``)."""
    chars = ["?"] * (max(a, b, *spatial) + 1)
    chars[a] = a_ch
    chars[b] = b_ch
    for i, s in enumerate(spatial):
        chars[s] = str(i)
    return "".join(chars)


def _missing_dim(rank: int, named) -> int | None:
    """FindVectorizedDim: the first dimension below ``rank`` not in ``named``."""
    named = set(named)
    return next((d for d in range(rank) if d not in named), None)


@dataclass(frozen=True)
class ConvolutionDimensionNumbers:
    """``dim_labels=b01f_01io->b01f`` (XLA's ConvolutionDimensionNumbers; ``?`` marks a
    dimension the numbers do not name: cuDNN's vectorized-feature dim, ``b01f?``).
    ``text``: the labels as written, when parsed (printed back as they were); numbers
    made or edited by a pass (:meth:`with_`) print canonically."""
    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str = field(default="", compare=False)

    def __post_init__(self):
        for name in ("input_spatial", "kernel_spatial", "output_spatial"):
            v = getattr(self, name)
            if not isinstance(v, tuple):
                object.__setattr__(self, name, tuple(v))

    @staticmethod
    def parse(text: str) -> "ConvolutionDimensionNumbers":
        m = re.fullmatch(r"([0-9bf?]+)_([0-9io?]+)->([0-9bf?]+)", text.strip())
        if not m:
            raise AttrSyntaxError(f"bad dim_labels '{text}'")
        lhs, rhs, out = m.groups()

        def spatial(s):
            pos = {int(c): i for i, c in enumerate(s) if c.isdigit()}
            return tuple(pos[k] for k in sorted(pos))

        try:
            return ConvolutionDimensionNumbers(
                lhs.index("b"), lhs.index("f"), spatial(lhs), rhs.index("i"), rhs.index("o"),
                spatial(rhs), out.index("b"), out.index("f"), spatial(out), text.strip())
        except ValueError:
            raise AttrSyntaxError(f"bad dim_labels '{text}'") from None

    @staticmethod
    def of(inst) -> "ConvolutionDimensionNumbers":
        """The numbers of a convolution (or cuDNN call), to edit: printed canonically."""
        return inst.attr("dim_labels").with_()

    def with_(self, **changes) -> "ConvolutionDimensionNumbers":
        """These numbers with ``changes``; printed canonically."""
        return replace(self, text="", **changes)

    def canonical_text(self) -> str:
        return (_labels_text(self.input_batch, "b", self.input_feature, "f",
                             self.input_spatial)
                + "_" + _labels_text(self.kernel_input_feature, "i",
                                     self.kernel_output_feature, "o", self.kernel_spatial)
                + "->" + _labels_text(self.output_batch, "b", self.output_feature, "f",
                                      self.output_spatial))

    def to_text(self) -> str:
        return self.text or self.canonical_text()

    def vectorized_dims(self, input_rank: int, kernel_rank: int, output_rank: int):
        """FindVectorizedFeatureDims: the unnamed dimension of each side, or None."""
        return (_missing_dim(input_rank, [self.input_batch, self.input_feature,
                                          *self.input_spatial]),
                _missing_dim(kernel_rank, [self.kernel_input_feature,
                                           self.kernel_output_feature, *self.kernel_spatial]),
                _missing_dim(output_rank, [self.output_batch, self.output_feature,
                                           *self.output_spatial]))


def parse_computation_ref_text(text: str) -> list[str]:
    """``%add`` or ``{%a, %b}`` -> names."""
    body = text.strip()
    if body.startswith("{"):
        body = body[1:-1]
    return [n.strip().lstrip("%") for n in body.split(",") if n.strip()]


_INT_LIST_ATTRS = (
    "dimensions lhs_contracting_dims rhs_contracting_dims lhs_batch_dims rhs_batch_dims "
    "offset_dims collapsed_slice_dims start_index_map slice_sizes operand_batching_dims "
    "start_indices_batching_dims update_window_dims inserted_window_dims "
    "scatter_dims_to_operand_dims input_batching_dims scatter_indices_batching_dims "
    "dynamic_slice_sizes fft_length lhs_ragged_dims rhs_group_dims").split()
_INT_ATTRS = ("index iota_dimension index_vector_dim feature_group_count batch_group_count "
              "feature_index exponent_bits mantissa_bits k channel_id num_carries "
              "cross_program_prefetch_index inferred_dimension").split()
_BOOL_ATTRS = ("is_stable indices_are_sorted unique_indices largest constrain_layout "
               "use_global_device_ids custom_call_has_side_effect is_host_transfer "
               "is_reverse is_associative is_composite").split()
_STRING_ATTRS = ("custom_call_target",)

ATTR_PARSERS = {name: parse_int_list for name in _INT_LIST_ATTRS}
ATTR_PARSERS.update({name: parse_int for name in _INT_ATTRS})
ATTR_PARSERS.update({name: parse_bool for name in _BOOL_ATTRS})
ATTR_PARSERS.update({name: parse_string for name in _STRING_ATTRS})
ATTR_PARSERS.update({
    "epsilon": parse_float, "window": Window.parse, "padding": PaddingConfig.parse,
    "slice": SliceSpec.parse, "dim_labels": ConvolutionDimensionNumbers.parse,
})

# Attributes whose verbatim text has no meaningful spaces: printed with spaces removed so
# that hand-written `dimensions={0, 1}` comes out in XLA's `dimensions={0,1}`.
COMPACT_ATTRS = frozenset(_INT_LIST_ATTRS + _INT_ATTRS + _BOOL_ATTRS + ["padding"])


def value_to_text(name: str, value) -> str:
    """Canonical text of a typed attribute value."""
    if isinstance(value, str):
        return value
    if hasattr(value, "to_text"):
        return value.to_text()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return int_list_text(value)
    if name in _STRING_ATTRS:
        return quote_string(str(value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def typed_to_text(name: str, value) -> str:
    if name in _STRING_ATTRS and isinstance(value, str):
        return quote_string(value)
    return value_to_text(name, value)
