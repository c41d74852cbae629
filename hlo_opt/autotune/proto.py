"""XLA's ``AutotuneResults`` as protobuf text format and binary wire format.

One schema (field names and numbers of ``xla/autotune_results.proto``,
``xla/autotuning.proto`` and ``stream_executor.dnn.AlgorithmProto``) drives both codecs,
so a file we write parses with XLA's protos and the other way round.  Messages are
plain dicts here: ``{field: value}``, repeated fields as lists, enums by name.
"""
from __future__ import annotations

import re

from .config import AutotuneError

# message -> field -> (number, type); types: int32 int64 uint64 bool string, "enum:E",
# "msg:M"; a trailing "*" marks a repeated field
SCHEMA: dict[str, dict[str, tuple[int, str]]] = {
    "AutotuneResults": {"version": (1, "int32"), "dots": (2, "msg:Entry*"),
                        "convs": (3, "msg:Entry*"), "results": (4, "msg:Entry*")},
    "Entry": {"device": (1, "string"), "hlo": (2, "string"),
              "result": (3, "msg:AutotuneResult"), "version": (4, "int32")},
    "AutotuneResult": {"conv": (5, "msg:ConvKey"), "gemm": (6, "msg:GemmKey"),
                       "failure": (7, "msg:FailureResult"), "scratch_bytes": (8, "int64"),
                       "run_time": (9, "msg:Duration"), "cuda_conv_plan": (15, "msg:CudaConvPlanKey"),
                       "algorithm": (16, "msg:AlgorithmProto"), "triton": (17, "msg:TritonGemmKey"),
                       "custom_kernel_fusion": (18, "msg:CustomKernelFusionKey"),
                       "other": (19, "msg:BackendConfigKey")},
    "FailureResult": {"kind": (1, "enum:FailureKind"), "msg": (2, "string"),
                      "reference_conv": (11, "msg:ConvKey"), "reference_gemm": (12, "msg:GemmKey"),
                      "buffer_address": (13, "int64"),
                      "reference_cuda_conv_plan": (14, "msg:CudaConvPlanKey"),
                      "reference_algorithm": (15, "msg:AlgorithmProto")},
    "ConvKey": {"algorithm": (1, "int64"), "tensor_ops_enabled": (2, "bool")},
    "GemmKey": {"algorithm": (1, "int64"), "autotune_workspace_size": (2, "int64")},
    "CudaConvPlanKey": {"exec_plan_id": (1, "string")},
    "TritonGemmKey": {"block_m": (1, "int64"), "block_n": (2, "int64"), "block_k": (3, "int64"),
                      "split_k": (4, "int64"), "num_stages": (5, "int64"),
                      "num_warps": (6, "int64"), "num_ctas": (7, "int64"),
                      "is_tma_allowed": (8, "bool"),
                      "is_warp_specialization_allowed": (9, "bool"),
                      "waves_per_eu": (10, "int64")},
    "CustomKernelFusionKey": {"kernel_index": (1, "int64")},
    "BackendConfigKey": {"name": (1, "string")},
    "AlgorithmProto": {"algo_id": (1, "int64"), "math_type": (2, "enum:MathType"),
                       "tuning_knobs": (4, "msg:TuningKnobsEntry*"),
                       "is_cudnn_frontend": (5, "bool"),
                       "workspace_size": (6, "msg:UInt64Value")},
    "UInt64Value": {"value": (1, "uint64")},
    "TuningKnobsEntry": {"key": (1, "int64"), "value": (2, "int64")},   # map<int64, int64>
    "AutotuningLogs": {"logs": (1, "msg:AutotuningLog*")},
    "AutotuningLog": {"results": (2, "msg:AutotuneResult*"), "fusion_name": (7, "string"),
                      "selected_backend": (9, "string")},
    "Duration": {"seconds": (1, "int64"), "nanos": (2, "int32")},
}
ENUMS = {"FailureKind": ["UNKNOWN", "REDZONE_MODIFIED", "WRONG_RESULT", "DISQUALIFIED"],
         "MathType": ["DEFAULT_MATH", "TENSOR_OP_MATH"]}
_INTS = ("int32", "int64", "uint64")


def _field(msg: str, name: str):
    number, typ = SCHEMA[msg][name]
    return number, typ.rstrip("*"), typ.endswith("*")


def _is_default(typ: str, v) -> bool:
    if typ.startswith("msg:"):
        return False
    if typ.startswith("enum:"):
        return v in (0, ENUMS[typ[5:]][0])
    return v in (0, "", False)


# ---- text format ---------------------------------------------------------------------

def _escape(s: str) -> str:
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c in "\"'\\":
            out.append("\\" + c)
        elif 0x20 <= b < 0x7f:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def to_text(msg: str, value: dict, indent: int = 0) -> str:
    """Protobuf text format, fields in field-number order, proto3 defaults omitted."""
    lines: list[str] = []
    pad = "  " * indent
    for name in sorted(value, key=lambda n: SCHEMA[msg][n][0]):
        _, typ, repeated = _field(msg, name)
        items = value[name] if repeated else [value[name]]
        for v in items:
            if typ.startswith("msg:"):
                lines.append(f"{pad}{name} {{")
                body = to_text(typ[4:], v, indent + 1)
                if body:
                    lines.append(body.rstrip("\n"))
                lines.append(f"{pad}}}")
            elif not repeated and _is_default(typ, v):
                continue
            elif typ == "string":
                lines.append(f'{pad}{name}: "{_escape(v)}"')
            elif typ == "bool":
                lines.append(f"{pad}{name}: {'true' if v else 'false'}")
            else:
                lines.append(f"{pad}{name}: {v}")
    return "".join(line + "\n" for line in lines)


_TOKEN = re.compile(r"""\s+|\#[^\n]*|(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
                    r"""|(?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))"""
                    r"""|(?P<id>[A-Za-z_][A-Za-z0-9_.]*)|(?P<p>[{}<>:;,\[\]])""")
_ESC = {"n": 10, "r": 13, "t": 9, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11,
        "?": 63}


def _unescape(body: str) -> str:
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        n = body[i + 1]
        if n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif n == "x":
            j = i + 2
            while j < len(body) and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(body[i + 2:j], 16))
            i = j
        else:
            out.append(_ESC.get(n, ord(n)))
            i += 2
    return out.decode("utf-8", errors="replace")


class _TextParser:
    def __init__(self, text: str, filename: str):
        self.text, self.filename = text, filename
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                self._fail(pos, f"unexpected character {text[pos]!r}")
            if m.lastgroup:
                self.toks.append((m.lastgroup, m.group(m.lastgroup), pos))
            pos = m.end()
        self.i = 0

    def _fail(self, pos: int, what: str):
        line = self.text.count("\n", 0, pos) + 1
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        src = self.text[start:end if end >= 0 else len(self.text)]
        raise AutotuneError(f"{self.filename}:{line}:{pos - start + 1}: error: {what}\n"
                            f"{src}\n{' ' * (pos - start)}^")

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "", len(self.text))

    def _next(self):
        t = self._peek()
        self.i += 1
        return t

    def message(self, msg: str, close: str | None) -> dict:
        out: dict = {}
        while True:
            kind, val, pos = self._peek()
            if kind == "eof" or (kind == "p" and val in "}>"):
                if (kind == "eof") != (close is None) or (close and val != close):
                    self._fail(pos, f"expected '{close}'" if close else f"unexpected '{val}'")
                self.i += 1
                return out
            if kind != "id":
                self._fail(pos, f"expected a field name of {msg}, got {val!r}")
            self.i += 1
            if val not in SCHEMA[msg]:
                self._fail(pos, f"message {msg} has no field named \"{val}\"")
            _, typ, repeated = _field(msg, val)
            k2, v2, p2 = self._peek()
            if typ.startswith("msg:"):
                if k2 == "p" and v2 == ":":
                    self.i += 1
                    k2, v2, p2 = self._peek()
                if not (k2 == "p" and v2 in "{<"):
                    self._fail(p2, f"expected '{{' after {val}")
                self.i += 1
                item = self.message(typ[4:], "}" if v2 == "{" else ">")
            else:
                if not (k2 == "p" and v2 == ":"):
                    self._fail(p2, f"expected ':' after {val}")
                self.i += 1
                item = self.scalar(typ, val)
            if repeated:
                out.setdefault(val, []).append(item)
            elif val in out:
                self._fail(pos, f"non-repeated field \"{val}\" is specified multiple times")
            else:
                out[val] = item
            k3, v3, _ = self._peek()
            if k3 == "p" and v3 in ";,":
                self.i += 1

    def scalar(self, typ: str, name: str):
        kind, val, pos = self._next()
        if typ == "string":
            if kind != "str":
                self._fail(pos, f"expected a string for {name}")
            parts = [_unescape(val[1:-1])]
            while self._peek()[0] == "str":  # adjacent literals concatenate
                parts.append(_unescape(self._next()[1][1:-1]))
            return "".join(parts)
        if typ == "bool":
            if kind == "id" and val in ("true", "True", "t", "false", "False", "f"):
                return val[0] in "tT"
            if kind == "num" and val in ("0", "1"):
                return val == "1"
            self._fail(pos, f"expected true or false for {name}")
        if typ.startswith("enum:"):
            names = ENUMS[typ[5:]]
            if kind == "id" and val in names:
                return val
            if kind == "num" and re.fullmatch(r"[0-9]+", val) and int(val) < len(names):
                return names[int(val)]
            self._fail(pos, f"unknown value {val!r} for enum {typ[5:]} ({', '.join(names)})")
        if kind != "num" or not re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|[0-9]+)", val):
            self._fail(pos, f"expected an integer for {name}")
        return int(val, 0) if val.lower().lstrip("+-").startswith("0x") else int(val)


def from_text(msg: str, text: str, filename: str = "<string>") -> dict:
    return _TextParser(text, filename).message(msg, None)


# ---- binary wire format --------------------------------------------------------------

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def to_binary(msg: str, value: dict) -> bytes:
    out = bytearray()
    for name in sorted(value, key=lambda n: SCHEMA[msg][n][0]):
        number, typ, repeated = _field(msg, name)
        for v in (value[name] if repeated else [value[name]]):
            if typ.startswith("msg:"):
                body = to_binary(typ[4:], v)
                out += _varint(number << 3 | 2) + _varint(len(body)) + body
            elif not repeated and _is_default(typ, v):
                continue
            elif typ == "string":
                body = v.encode("utf-8")
                out += _varint(number << 3 | 2) + _varint(len(body)) + body
            else:
                if typ.startswith("enum:"):
                    v = ENUMS[typ[5:]].index(v)
                out += _varint(number << 3) + _varint(int(v))
    return bytes(out)


def from_binary(msg: str, data: bytes, filename: str = "<bytes>") -> dict:
    by_number = {num: name for name, (num, _) in SCHEMA[msg].items()}
    out: dict = {}
    pos, end = 0, len(data)

    def fail(what: str):
        raise AutotuneError(f"{filename}: error: not a binary AutotuneResults proto "
                            f"({what} at byte {pos})")

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= end:
                fail("truncated varint")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                fail("varint too long")

    while pos < end:
        tag = varint()
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            raw = varint()
        elif wire == 1:
            raw, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            n = varint()
            if pos + n > end:
                fail("truncated field")
            raw, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            raw, pos = data[pos:pos + 4], pos + 4
        else:
            fail(f"wire type {wire}")
        name = by_number.get(number)
        if name is None:
            continue  # unknown field: skipped, as protobuf does
        _, typ, repeated = _field(msg, name)
        if typ.startswith("msg:"):
            if wire != 2:
                fail(f"field {name} has wire type {wire}")
            v = from_binary(typ[4:], raw, filename)
        elif typ == "string":
            if wire != 2:
                fail(f"field {name} has wire type {wire}")
            v = bytes(raw).decode("utf-8", errors="replace")
        else:
            if wire != 0:
                fail(f"field {name} has wire type {wire}")
            if typ in ("int32", "int64") and raw >= 1 << 63:
                raw -= 1 << 64
            if typ == "bool":
                v = bool(raw)
            elif typ.startswith("enum:"):
                names = ENUMS[typ[5:]]
                v = names[raw] if raw < len(names) else names[0]
            else:
                v = raw
        if repeated:
            out.setdefault(name, []).append(v)
        else:
            out[name] = v
    return out


__all__ = ["SCHEMA", "ENUMS", "to_text", "from_text", "to_binary", "from_binary"]
