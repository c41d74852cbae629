"""The fast HLO text parser.

Lark cannot sit on the per-token hot path of big dumps (0.7 MB/s measured), so the common
syntax is read by a hand-written scanner built on a few compiled regexes: one match for
``[ROOT] name = shape opcode(``, a balanced-bracket jump to the closing paren, and
attributes kept as verbatim text (typed on first use).  The grammar in ``hlo.lark`` is the
reference; when this scanner rejects input, ``errors.report`` asks lark where and why, so
users get lark's ``line:col: expected ...`` with the offending line and a caret.
"""
from __future__ import annotations

import re

from ..errors import HloParseError
from ..ir.computation import Computation
from ..ir.instruction import Instruction
from ..ir.module import HloModule
from ..ir.opcodes import CALLED_COMPUTATION_ATTRS, OPCODES
from ..ir.shape import Shape, ShapeSyntaxError, parse_shape_at
from ..shape_inference import infer_shape

_NAME = r"[A-Za-z_$][\w.\-$]*"
_WS_RE = re.compile(r"\s*")
_HEADER_RE = re.compile(r"\s*HloModule\s+(" + _NAME + r"|\"[^\"]*\")\s*:?")
_COMP_RE = re.compile(r"\s*(ENTRY\s+)?%?(" + _NAME + r")\s*")
_INST_RE = re.compile(r"\s*(ROOT\s+)?%?(" + _NAME + r")\s*=\s*")
_SIMPLE_SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](\{[0-9,]*\})?(?=\s)")
_OPCODE_RE = re.compile(r"\s*([a-z][a-z0-9\-]*)\s*\(")
_ATTR_NAME_RE = re.compile(r"\s*,\s*([A-Za-z_][\w\-]*)\s*=\s*")
_SIMPLE_VALUE_RE = re.compile(r"[^\s,{}()\[\]\"<]+(?=[\s,}]|$)")
_SPECIAL_RE = re.compile(r"[(){}\[\]\"]")
_OPERAND_NAME_RE = re.compile(r"(?<![^\s,(])%?(" + _NAME + r")\s*(?=,|$)")
_COMMENT_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|/\*.*?\*/|//[^\n]*', re.S)
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_SPLIT_RE = re.compile(r"^[ \t]*//[ \t]*-----[ \t]*$", re.M)


class _Fail(Exception):
    def __init__(self, pos: int, what: str):
        super().__init__(what)
        self.pos = pos
        self.what = what


def strip_comments(text: str) -> str:
    """Blank out comments (keeping offsets and newlines) outside string literals."""
    if "\r" in text:
        text = text.replace("\r", " ")
    if "//" not in text and "/*" not in text:
        return text

    def blank(m):
        s = m.group(0)
        if s[0] == '"':
            return s
        return re.sub(r"[^\n]", " ", s)

    return _COMMENT_RE.sub(blank, text)


def find_closing(text: str, pos: int) -> int:
    """``text[pos]`` is an opening bracket; return the offset just past its partner."""
    depth = 0
    it = _SPECIAL_RE.finditer(text, pos)
    for m in it:
        c = m.group(0)
        if c == '"':
            end = _skip_string(text, m.start())
            # restart the scan after the string
            return _continue_closing(text, end, depth)
        if c in "({[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
    raise _Fail(pos, "unbalanced bracket")


def _continue_closing(text: str, pos: int, depth: int) -> int:
    while True:
        m = _SPECIAL_RE.search(text, pos)
        if m is None:
            raise _Fail(pos, "unbalanced bracket")
        c = m.group(0)
        if c == '"':
            pos = _skip_string(text, m.start())
            continue
        if c in "({[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
        pos = m.end()


def _skip_string(text: str, pos: int) -> int:
    i = pos + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "\n":
            break
        i += 1
    raise _Fail(pos, "unterminated string")


def _read_value(text: str, pos: int) -> int:
    """End offset of an attribute value starting at ``pos``."""
    m = _SIMPLE_VALUE_RE.match(text, pos)
    if m:
        end = m.end()
        if end >= len(text) or text[end] not in "{[(<\"":
            return end
    n = len(text)
    i = pos
    while i < n:
        c = text[i]
        if c in "({[":
            i = find_closing(text, i)
        elif c == '"':
            i = _skip_string(text, i)
        elif c in " \t\n,}":
            break
        elif c in ")]":
            raise _Fail(i, f"unexpected '{c}'")
        else:
            i += 1
    if i == pos:
        raise _Fail(pos, "expected an attribute value")
    return i


class _Parser:
    def __init__(self, text: str, filename: str, base_line: int = 0):
        self.raw = text
        self.text = strip_comments(text)
        self.filename = filename
        self.base_line = base_line

    # ---- errors -----------------------------------------------------------------------
    def error(self, pos: int, what: str) -> HloParseError:
        line = self.raw.count("\n", 0, pos) + 1
        start = self.raw.rfind("\n", 0, pos) + 1
        end = self.raw.find("\n", pos)
        src = self.raw[start:end if end >= 0 else len(self.raw)]
        return HloParseError(what, self.filename, line + self.base_line, pos - start + 1, src)

    def skip_ws(self, pos: int) -> int:
        return _WS_RE.match(self.text, pos).end()

    def shape_at(self, pos: int) -> tuple[Shape, int]:
        m = _SIMPLE_SHAPE_RE.match(self.text, pos)
        if m:
            key = m.group(0)
            shape = _SIMPLE_SHAPES.get(key)
            if shape is None:
                shape = Shape.parse(key)
                _SIMPLE_SHAPES[key] = shape
            return shape, m.end()
        try:
            return parse_shape_at(self.text, pos)
        except ShapeSyntaxError as e:
            raise _Fail(e.offset, e.what) from None

    # ---- module -----------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        text = self.text
        pos = self.skip_ws(0)
        m = _HEADER_RE.match(text, pos)
        module = HloModule("")
        module.filename = self.filename
        if m:
            module.name = m.group(1).strip('"')
            pos = m.end()
            while True:
                am = _ATTR_NAME_RE.match(text, pos)
                if not am:
                    break
                vstart = am.end()
                vend = _read_value(text, vstart)
                module.header_attrs[am.group(1)] = text[vstart:vend]
                pos = vend
            pos = self.parse_stack_frames(module, pos)
        pending: list[tuple[Instruction, str, list[str], int]] = []
        comps: dict[str, Computation] = {}
        entry = None
        while True:
            pos = self.skip_ws(pos)
            if pos >= len(text):
                break
            comp, pos, refs = self.parse_computation(module, pos)
            if comp.name in comps:
                raise _Fail(pos, f"computation '{comp.name}' is defined twice")
            comps[comp.name] = comp
            pending.extend(refs)
            if comp.is_entry:
                if entry is not None:
                    raise _Fail(pos, "more than one ENTRY computation")
                entry = comp
        if not comps:
            raise _Fail(pos, "expected a computation")
        if entry is None:
            entry = list(comps.values())[-1]
            entry.is_entry = True
        module.entry = entry
        if not module.name:
            module.name = entry.name
        for inst, attr, names, apos in pending:
            try:
                inst.called = [comps[n] for n in names]
            except KeyError as e:
                raise _Fail(apos, f"unknown computation '{e.args[0]}' in {attr}=") from None
        module.computations = list(comps.values())
        return module

    def parse_stack_frames(self, module: HloModule, pos: int) -> int:
        text = self.text
        start = self.skip_ws(pos)
        if not text.startswith(_STACK_TABLES, start):
            return pos
        p = start
        while True:
            q = self.skip_ws(p)
            if text.startswith(_STACK_TABLES, q):
                p = text.find("\n", q)
                p = len(text) if p < 0 else p
                continue
            m = re.match(r"[ \t]*\d+[ \t]+", text[q:q + 32]) if q < len(text) else None
            if m and text[q].isdigit():
                p = text.find("\n", q)
                p = len(text) if p < 0 else p
                continue
            break
        module.stack_frames = "\n".join(
            line.strip() for line in self.raw[start:p].splitlines() if line.strip())
        return p

    # ---- computation ------------------------------------------------------------------
    def parse_computation(self, module: HloModule, pos: int):
        text = self.text
        m = _COMP_RE.match(text, pos)
        if not m or m.group(2) in ("HloModule", "ROOT"):
            raise _Fail(pos, "expected a computation (name {...})")
        comp = Computation(m.group(2))
        comp.module = module
        comp.is_entry = bool(m.group(1))
        pos = m.end()
        if text.startswith("(", pos):
            pos = find_closing(text, pos)
            pos = self.skip_ws(pos)
            if not text.startswith("->", pos):
                raise _Fail(pos, "expected '->' after the computation's parameters")
            _, pos = self.shape_at(pos + 2)
            pos = self.skip_ws(pos)
        if text.startswith(",", pos):
            am = _ATTR_NAME_RE.match(text, pos)
            if not am or am.group(1) != "execution_thread":
                raise _Fail(pos, "expected execution_thread=")
            vend = _read_value(text, am.end())
            comp.execution_thread = text[am.end():vend].strip('"')
            pos = self.skip_ws(vend)
        if not text.startswith("{", pos):
            raise _Fail(pos, "expected '{' to open the computation")
        pos += 1
        by_name: dict[str, Instruction] = {}
        operand_names: list[tuple[Instruction, list[str], int]] = []
        ctrl: list[tuple[Instruction, list[str], int]] = []
        refs = []
        root = None
        last = None
        while True:
            pos = self.skip_ws(pos)
            if text.startswith("}", pos):
                pos += 1
                break
            if pos >= len(text):
                raise _Fail(pos, "expected '}' to close the computation")
            inst, is_root, names, npos, cref, cnames, pos = self.parse_instruction(pos)
            if inst.name in by_name:
                raise _Fail(npos, f"instruction '{inst.name}' is defined twice")
            by_name[inst.name] = inst
            if names:
                operand_names.append((inst, names, npos))
            if cref:
                refs.append(cref)
            if cnames:
                ctrl.append((inst, cnames, npos))
            if is_root:
                if root is not None:
                    raise _Fail(npos, "more than one ROOT in a computation")
                root = inst
            inst.parent = comp
            comp._instructions[inst] = None
            module._names.add(inst.name)
            last = inst
        if last is None:
            raise _Fail(pos - 1, "computation has no instructions")
        for inst, names, npos in operand_names:
            try:
                ops = [by_name[n] for n in names]
            except KeyError as e:
                raise _Fail(npos, f"instruction '{inst.name}' uses unknown operand "
                            f"'%{e.args[0]}'") from None
            inst.operands = ops
            for op in ops:
                op._users[inst] = None
        for inst, names, npos in operand_names + [(i, [], 0) for i in comp._instructions]:
            if inst.shape is None:
                try:
                    inst.shape = infer_shape(inst)
                except Exception as e:  # noqa: BLE001 - any failure means "cannot infer"
                    raise _Fail(npos, f"cannot infer the shape of '{inst.name}'; write it "
                                f"out ({e})") from None
        for inst, names, npos in ctrl:
            try:
                inst.control_predecessors = [by_name[n] for n in names]
            except KeyError as e:
                raise _Fail(npos, f"unknown control predecessor '%{e.args[0]}'") from None
        comp.root = root if root is not None else last
        params = [i for i in comp._instructions if i.opcode == "parameter"]
        if params:
            numbers = {}
            for p in params:
                try:
                    n = int(p.payload)
                except ValueError:
                    raise _Fail(pos, f"parameter '{p.name}' needs a number") from None
                if n in numbers:
                    raise _Fail(pos, f"parameter number {n} is used twice in '{comp.name}'")
                numbers[n] = p
            if sorted(numbers) != list(range(len(numbers))):
                raise _Fail(pos, f"parameter numbers of '{comp.name}' are not 0..{len(numbers) - 1}")
            comp.parameters = [numbers[i] for i in range(len(numbers))]
        return comp, pos, refs

    # ---- instruction ------------------------------------------------------------------
    def parse_instruction(self, pos: int):
        text = self.text
        m = _INST_RE.match(text, pos)
        if not m:
            raise _Fail(self.skip_ws(pos), "expected an instruction 'name = shape opcode(...)'")
        npos = m.start(2)
        name = m.group(2)
        om = _OPCODE_RE.match(text, m.end())
        if om and om.group(1) in OPCODES:
            shape = None  # omitted: inferred from the operands once they are resolved
        else:
            shape, pos = self.shape_at(m.end())
            om = _OPCODE_RE.match(text, pos)
        if not om:
            raise _Fail(self.skip_ws(pos), "expected an opcode followed by '('")
        opcode = om.group(1)
        if opcode not in OPCODES:
            raise _Fail(om.start(1), f"unknown opcode '{opcode}'")
        open_pos = om.end() - 1
        close = find_closing(text, open_pos)
        inner = text[open_pos + 1:close - 1]
        payload = ""
        names: list[str] = []
        if opcode in ("constant", "parameter"):
            payload = " ".join(inner.split()) if "\n" in inner else inner.strip()
        elif inner.strip():
            if "[" not in inner and "(" not in inner:
                names = [s.strip().lstrip("%") for s in inner.split(",")]
                if any(not s for s in names):
                    raise _Fail(open_pos + 1, "empty operand")
            else:
                names = _OPERAND_NAME_RE.findall(inner.strip())
                if not names:
                    raise _Fail(open_pos + 1, "bad operand list")
        inst = Instruction(opcode, shape, (), {}, name, payload)
        pos = close
        attrs = inst.attrs
        cref = None
        cnames = None
        while True:
            am = _ATTR_NAME_RE.match(text, pos)
            if not am:
                break
            key = am.group(1)
            vstart = am.end()
            vend = _read_value(text, vstart)
            value = text[vstart:vend]
            if "\n" in value and key not in ("backend_config",):
                value = " ".join(value.split()) if not value.startswith('"') else value
            if key in CALLED_COMPUTATION_ATTRS:
                refnames = [n.strip().lstrip("%") for n in value.strip("{} ").split(",")
                            if n.strip()]
                if cref is None:
                    inst.called_attr = key
                    cref = (inst, key, refnames, vstart)
                    attrs[key] = ""
                else:  # while (condition, body), select-and-scatter, pred conditional
                    prev = inst.called_attr
                    prev = prev if isinstance(prev, tuple) else (prev,)
                    inst.called_attr = prev + (key,)
                    cref = (inst, cref[1], cref[2] + refnames, cref[3])
            elif key == "control-predecessors":
                cnames = [n.strip().lstrip("%") for n in value.strip("{} ").split(",")
                          if n.strip()]
                attrs[key] = ""
            else:
                if key in attrs:
                    raise _Fail(am.start(1), f"attribute '{key}' given twice")
                attrs[key] = value
            pos = vend
        return inst, bool(m.group(1)), names, npos, cref, cnames, pos


_SIMPLE_SHAPES: dict[str, Shape] = {}


def split_modules(text: str) -> list[tuple[str, int]]:
    """Split on ``// -----`` lines; return (chunk, line offset) pairs."""
    if "-----" not in text:
        return [(text, 0)]
    chunks = []
    last = 0
    line = 0
    for m in _SPLIT_RE.finditer(text):
        chunks.append((text[last:m.start()], line))
        line += text.count("\n", last, m.end())
        last = m.end()
    chunks.append((text[last:], line))
    return [(c, ln) for c, ln in chunks if c.strip()]


def parse_hlo(text: str, filename: str = "<string>", base_line: int = 0) -> HloModule:
    """Parse one module.  Raises HloParseError with file:line:col, the line and a caret."""
    parser = _Parser(text, filename, base_line)
    try:
        return parser.parse_module()
    except _Fail as f:
        raise parser.error(f.pos, f.what) from None
    except RecursionError:
        raise parser.error(0, "input nests too deeply") from None


def parse_hlo_modules(text: str, filename: str = "<string>") -> list[HloModule]:
    """Parse a file that may hold several modules split by ``// -----`` lines."""
    return [parse_hlo(chunk, filename, line) for chunk, line in split_modules(text)]
