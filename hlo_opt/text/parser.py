"""The fast HLO text parser.

Lark cannot sit on the hot path of big dumps (well under 1 MB/s), so text is read by a
scanner built on compiled regexes.  Each instruction is first tried against one regex
that covers the canonical one-line form (``[ROOT] %name = shape opcode(operands),
attr=value, ...``); anything else (multi-line instructions, deep nesting, omitted shapes,
spaced values) goes through the general scanner below, which also produces the errors.
Attributes stay verbatim text (typed on first use).

The grammar in ``hlo.lark`` is the reference: when the scanner rejects text, lark is asked
where and why (``reference.diagnose``), so syntax errors read ``file:line:col: error:
expected ',' or ')'`` with the offending line and a caret; semantic errors (unknown
operand, duplicate name, unknown opcode, parameter numbering) keep the scanner's message.
"""
from __future__ import annotations

import gc
import re

from ..errors import HloParseError
from ..ir.computation import Computation
from ..ir.instruction import Instruction
from ..ir.module import HloModule
from ..ir.opcodes import CALLED_COMPUTATION_ATTRS, OPCODES
from ..ir.shape import Shape, ShapeSyntaxError, parse_shape_at
from ..ir.types import ELEMENT_TYPES
from ..shape_inference import infer_shape
from . import scan
from .scan import NAME, ScanError, read_value, rx, split_modules, strip_comments

__all__ = ["parse_hlo", "parse_hlo_modules", "split_modules", "strip_comments"]

_CALLED = frozenset(CALLED_COMPUTATION_ATTRS)
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")

# ---- the one-line fast path ------------------------------------------------------------
_STR = r'"(?:[^"\\\n]++|\\.)*+"'
# Shapes are only delimited here: their text is parsed (and cached) by Shape.parse.
_PARENS = r"\((?:[^()\"\n]++|\((?:[^()\"\n]++|\([^()\"\n]*+\))*+\))*+\)"  # 3 deep
_SHAPE = r"(?:[a-z][a-z0-9]*\[[0-9,<=?]*+\](?:\{[^{}\n]*+\})?|" + _PARENS + ")"
_PLAIN = r"[^{}()\[\]\"\n]"
_CONTENT = _PLAIN + "*+"
for _ in range(4):  # brackets of any kind nested 4 deep, strings anywhere
    _CONTENT = r"(?:" + _PLAIN + "++|" + _STR + r"|\{" + _CONTENT + r"\}|\[" + _CONTENT + \
        r"\]|\(" + _CONTENT + r"\))*+"
_GROUP = r"\{" + _CONTENT + r"\}|\[" + _CONTENT + r"\]|\(" + _CONTENT + r"\)"
# a value: chunks (word runs, strings, bracket groups) with no space between them, e.g.
# `%add`, `{0,1}`, `"text"`, `[2,4]<=[4,2]T(1,0)`, `b01f_01io->b01f`
_VALUE = r"(?:[\w.$@+\-%<>=:*#!~^|&?]++|" + _STR + "|" + _GROUP + ")++"
# (findall patterns start with a literal or a character class: sre then skips ahead fast)
_ATTR_ITEM = r",[ \t]*(" + NAME + r")[ \t]*=[ \t]*(" + _VALUE + ")"
_ATTR_ITEM_NC = r"[ \t]*,[ \t]*" + NAME + r"[ \t]*=[ \t]*" + _VALUE
_PCT_OPERAND = r"[ \t]*(?:" + _SHAPE + r"[ \t]+)?%" + NAME + r"[ \t]*"
_BARE_OPERAND = r"[ \t]*(?:" + _SHAPE + r"[ \t]+)?" + NAME + r"[ \t]*"
# groups: ROOT, name, shape, opcode, operands (every one written %name) | operands (none
# with '%') | any other payload (literals, mixed lists: the general scanner), attributes
_FAST_INST_RE = rx(
    r"[ \t\n]*(ROOT[ \t]+)?%?(" + NAME + r")[ \t]*=[ \t]*(" + _SHAPE + r")[ \t]+"
    r"([a-z][a-z0-9\-]*)\("
    r"(?:((?>" + _PCT_OPERAND + r"(?:," + _PCT_OPERAND + r")*))(?=\))"
    r"|((?>" + _BARE_OPERAND + r"(?:," + _BARE_OPERAND + r")*|[ \t]*))(?=\))"
    r"|((?:[^()\"\n]++|" + _PARENS + r")*+))\)"
    r"((?:" + _ATTR_ITEM_NC + r")*+)[ \t]*(?=\n|\Z)")
_ATTR_ITEM_RE = rx(_ATTR_ITEM)
_PCT_NAME_RE = rx(r"%(" + NAME + ")")
# Over "," + a well-formed operand list: the shapes written before the operands / the
# operand names.  (A leading literal lets sre skip ahead; `(?:^|,)` would be tried at
# every character.)
_OPERAND_SHAPE_RE = rx(r",[ \t]*(" + _SHAPE + r")[ \t]+")
_OPERAND_NAME_RE = rx(r",[ \t]*(?:" + _SHAPE + r"[ \t]+)?%?(" + NAME + ")")
_BARE_NAME_RE = rx(NAME)  # in a well-formed list without shapes: the names
# A computation signature in the canonical form (no layouts, tuples nested up to 3 deep);
# anything else goes through parse_signature.
_DIM = r"(?:\d+|<=\d+|\?)"


def _trie(words) -> str:
    """A regex matching exactly ``words``, factored by prefix (sre tries alternatives one
    by one: 35 element types as a flat list cost a lot per shape)."""
    words = sorted(set(words))
    if words == [""]:
        return ""
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault(w[:1], []).append(w[1:])
    alts = [re.escape(c) + _trie(rest) if c else "" for c, rest in groups.items()]
    optional = "" in alts
    alts = [a for a in alts if a]
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return "(?:" + body + ")?" if optional else body


_SIG_ARRAY = _trie(ELEMENT_TYPES) + r"\[(?:" + _DIM + r"(?:," + _DIM + r")*)?\]"


def _tuple_of(elem: str) -> str:
    return r"\((?:\s*" + elem + r"(?:\s*,\s*" + elem + r")*)?\s*\)"


_SIG_SHAPE = _SIG_ARRAY
for _ in range(3):
    _SIG_SHAPE = r"(?:" + _SIG_ARRAY + "|" + _tuple_of(_SIG_SHAPE) + ")"
_SIG_PARAM = r"%?" + NAME + r"\s*:\s*" + _SIG_SHAPE
_SIGNATURE_RE = rx(r"\((?:\s*" + _SIG_PARAM + r"(?:\s*,\s*" + _SIG_PARAM + r")*)?\s*\)"
                           r"\s*->\s*" + _SIG_SHAPE + r"\s*")
_COUNTING = [str(i) for i in range(4096)]
_BALANCED = r"[^{}]*+"
for _ in range(8):  # literals nest one brace per dimension
    _BALANCED = r"(?:[^{}]++|\{" + _BALANCED + r"\})*+"
_BALANCED_BRACES_RE = rx(_BALANCED)
_LITERAL_OPS = frozenset({"constant", "parameter"})
_SPECIAL_ATTRS = frozenset(CALLED_COMPUTATION_ATTRS) | {"control-predecessors"}

# ---- the general scanner -----------------------------------------------------------------
_WS_RE = rx(r"\s*")
_HEADER_RE = rx(r"HloModule(?![\w.\-$])\s*(?:(" + NAME + r")|(\"(?:[^\"\\\n]|\\.)*\"))?")
_COMP_RE = rx(r"(ENTRY\s+)?(%?)(" + NAME + r")\s*")
_INST_RE = rx(r"(ROOT\s+)?%?(" + NAME + r")\s*=\s*")
_OPCODE_RE = rx(r"\s*([a-z][a-z0-9\-]*)\s*\(")
_ATTR_NAME_RE = rx(r"\s*,\s*(" + NAME + r")\s*=\s*")
_PARAM_RE = rx(r"\s*%?(" + NAME + r")\s*:\s*")
_BARE_OPERAND_RE = rx(r"\s*%?(" + NAME + r")\s*")
_SPACED_LAYOUT_RE = rx(r"[ \t]+\{(?=\s*[\d:}])")
_TABLE_RE = rx(r"(FileNames|FunctionNames|FileLocations|StackFrames)(?![\w.\-$])")
_TABLE_ROW_RE = rx(r"\s*[-+]?\d+[ \t]+")
_SHAPE_CACHE_LIMIT = 100_000
_shapes: dict[str, Shape] = {}


class _Parser:
    def __init__(self, text: str, filename: str, base_line: int = 0):
        self.raw = text
        self.filename = filename
        self.base_line = base_line
        self.comp_starts = [0]  # where computations start: lark re-reads from there
        self.omitted: dict[Instruction, int] = {}  # instructions written without a shape
        self.text = strip_comments(text)

    # ---- errors -------------------------------------------------------------------------
    def error(self, pos: int, what: str) -> HloParseError:
        raw = self.raw
        pos = max(0, min(pos, len(raw)))
        line = raw.count("\n", 0, pos) + 1
        start = raw.rfind("\n", 0, pos) + 1
        end = raw.find("\n", pos)
        src = raw[start:end if end >= 0 else len(raw)]
        return HloParseError(what, self.filename, line + self.base_line, pos - start + 1, src)

    def skip_ws(self, pos: int) -> int:
        return _WS_RE.match(self.text, pos).end()

    def shape_at(self, pos: int) -> tuple[Shape, int]:
        text = self.text
        try:
            shape, end = parse_shape_at(text, pos)
            m = _SPACED_LAYOUT_RE.match(text, end)
            if m and shape.is_array() and shape.layout is None and shape.rank:
                # `f32[2] {1,0}`: XLA's lexer skips the space; parse the shape without it
                close = scan.find_closing(text, m.end() - 1)
                start = _WS_RE.match(text, pos).end()
                shape = Shape.parse(text[start:end] + text[m.end() - 1:close])
                end = close
            return shape, end
        except ShapeSyntaxError as e:
            raise ScanError(e.offset if e.offset >= pos else pos, e.what) from None
        except (ValueError, IndexError):
            raise ScanError(pos, "bad shape") from None

    # ---- module -------------------------------------------------------------------------
    def parse_module(self) -> HloModule:
        text = self.text
        module = HloModule("")
        module.filename = self.filename
        pos = self.skip_ws(0)
        m = _HEADER_RE.match(text, pos)
        if m:
            if m.group(1) is None and m.group(2) is None:
                raise ScanError(m.end(), "expected the module name after 'HloModule'")
            module.name = m.group(1) or m.group(2)[1:-1]
            pos = self.skip_ws(m.end())
            if text.startswith(":", pos):
                pos += 1
            pos = self.parse_attrs(pos, module.header_attrs, multi=False)
            pos = self.parse_stack_frames(module, pos)
        pending: list = []
        comps: dict[str, Computation] = {}
        entry = None
        infer: list[Computation] = []
        while True:
            pos = self.skip_ws(pos)
            if pos >= len(text):
                break
            self.comp_starts.append(pos)
            comp, pos, needs_inference = self.parse_computation(module, pos, pending)
            if comp.name in comps:
                raise ScanError(self.comp_starts[-1], f"computation '{comp.name}' is defined twice",
                                semantic=True)
            comps[comp.name] = comp
            if needs_inference:
                infer.append(comp)
            if comp.is_entry:
                if entry is not None:
                    raise ScanError(self.comp_starts[-1], "more than one ENTRY computation",
                                    semantic=True)
                entry = comp
        if not comps:
            raise ScanError(pos, "expected a computation")
        if entry is None:
            entry = list(comps.values())[-1]
            entry.is_entry = True
        module.entry = entry
        module.computations = list(comps.values())
        if not module.name:
            module.name = entry.name
        for inst, attr, names, apos in pending:
            try:
                inst.called = [comps[n] for n in names]
            except KeyError as e:
                kpos = text.find(attr, apos)
                m = rx(r"(?<![\w.\-$%])%?" + re.escape(e.args[0]) + r"(?![\w.\-$])").search(
                    text, kpos if kpos >= 0 else apos)
                raise ScanError(m.start() if m else apos,
                                f"unknown computation '%{e.args[0]}' in {attr}=",
                                semantic=True) from None
        if infer:
            self.infer_shapes(module, set(infer))
        return module

    def parse_attrs(self, pos: int, into: dict, multi: bool) -> int:
        text = self.text
        while True:
            am = _ATTR_NAME_RE.match(text, pos)
            if not am:
                return pos
            vend = read_value(text, am.end(), multi)
            into[am.group(1)] = text[am.end():vend]
            pos = vend

    def parse_stack_frames(self, module: HloModule, pos: int) -> int:
        """FileNames / FunctionNames / FileLocations / StackFrames tables, kept verbatim."""
        text = self.text
        start = p = self.skip_ws(pos)
        while True:
            tm = _TABLE_RE.match(text, p)
            if not tm:
                break
            table = tm.group(1)
            p = self.skip_ws(p + len(table))
            while True:
                rm = _TABLE_ROW_RE.match(text, p)
                if not rm:
                    break
                q = rm.end()
                if table in ("FileNames", "FunctionNames"):
                    if not text.startswith('"', q):
                        raise ScanError(q, f"expected a quoted string in the {table} table")
                    q = scan.skip_string(text, q)
                else:
                    if not text.startswith("{", q):
                        raise ScanError(q, f"expected '{{' in the {table} table")
                    q = scan.find_closing(text, q)
                p = self.skip_ws(q)
        if p == start:
            return pos
        module.stack_frames = "\n".join(
            line.strip() for line in self.raw[start:p].splitlines() if line.strip())
        return p

    # ---- computation --------------------------------------------------------------------
    def parse_computation(self, module: HloModule, pos: int, pending: list):
        text = self.text
        m = _COMP_RE.match(text, pos)
        if not m or m.group(3) in ("HloModule", "ROOT") or (
                not m.group(2) and m.group(3) in _STACK_TABLES):
            raise ScanError(pos, "expected a computation ('name {' or 'ENTRY name {')")
        comp = Computation(m.group(3))
        comp.module = module
        comp.is_entry = bool(m.group(1))
        pos = m.end()
        if text.startswith("(", pos):
            pos = self.parse_signature(pos)
        pos = self.computation_attrs(comp, pos)
        if not text.startswith("{", pos):
            raise ScanError(pos, "expected '{' to open the computation")
        comp, pos, needs_inference = self.parse_body(comp, module, pos + 1, pending)
        return comp, self.computation_attrs(comp, pos), needs_inference

    def computation_attrs(self, comp: Computation, pos: int) -> int:
        """``, execution_thread="..."`` (after the closing brace, as XLA prints it, or
        before the opening one)."""
        text = self.text
        attrs: dict[str, str] = {}
        end = self.parse_attrs(pos, attrs, multi=False)
        for key, value in attrs.items():
            if key != "execution_thread":
                raise ScanError(text.find(key, pos), f"unknown computation attribute '{key}'")
            if not value.startswith('"'):
                raise ScanError(text.find(value, pos), "expected a string")
            comp.execution_thread = value[1:-1]
        return self.skip_ws(end) if attrs else pos

    def parse_signature(self, pos: int) -> int:
        text = self.text
        m = _SIGNATURE_RE.match(text, pos)
        if m:
            return m.end()
        pos = self.skip_ws(pos + 1)
        if not text.startswith(")", pos):
            while True:
                pm = _PARAM_RE.match(text, pos)
                if not pm:
                    raise ScanError(self.skip_ws(pos), "expected a parameter 'name: shape'")
                _, pos = self.shape_at(pm.end())
                pos = self.skip_ws(pos)
                if text.startswith(",", pos):
                    pos += 1
                    continue
                if not text.startswith(")", pos):
                    raise ScanError(pos, "expected ',' or ')'")
                break
        pos = self.skip_ws(pos + 1)
        if not text.startswith("->", pos):
            raise ScanError(pos, "expected '->' after the computation's parameters")
        _, pos = self.shape_at(pos + 2)
        return self.skip_ws(pos)

    def parse_body(self, comp: Computation, module: HloModule, pos: int, pending: list):
        text = self.text
        fast = _FAST_INST_RE.match
        attr_items = _ATTR_ITEM_RE.findall
        operand_names = _OPERAND_NAME_RE.findall
        pct_names = _PCT_NAME_RE.findall
        bare_names = _BARE_NAME_RE.findall
        operand_shapes = _OPERAND_SHAPE_RE.findall
        special = _SPECIAL_ATTRS
        literal_ops = _LITERAL_OPS
        shapes = _shapes
        opcodes = OPCODES
        by_name: dict[str, Instruction] = {}
        get_inst = by_name.__getitem__
        later: list = []  # (inst, operand names, position): operands defined further down
        ctrl: list = []
        params: list = []
        root = None
        needs_inference = False
        while True:
            m = fast(text, pos)
            if m is not None:
                is_root, name, shape_text, opcode, pct, bare, other, attr_text = m.groups()
                shape = shapes.get(shape_text) or _cached_shape(shape_text)
                names = None
                if shape is not None and opcode in opcodes and name not in by_name:
                    oplist = pct if pct is not None else bare
                    if opcode in literal_ops:
                        payload = (other if oplist is None else oplist).strip()
                        if "{" not in payload or _BALANCED_BRACES_RE.fullmatch(payload):
                            names = ()
                    elif pct is not None:
                        payload = ""
                        names = pct_names(pct)
                        if "[" in pct or "(" in pct:  # typed operands: check their shapes
                            for st in operand_shapes("," + pct):
                                if st not in shapes and _cached_shape(st) is None:
                                    names = None
                    elif bare is not None:
                        payload = ""
                        if "[" in bare or "(" in bare:
                            names = operand_names("," + bare)
                            for st in operand_shapes("," + bare):
                                if st not in shapes and _cached_shape(st) is None:
                                    names = None
                        else:
                            names = bare_names(bare)
                if attr_text and names is not None:
                    pairs = attr_items(attr_text)
                    attrs = dict(pairs)
                    if len(attrs) != len(pairs):
                        names = None  # a duplicate: the general scanner reports it
                else:
                    pairs = attrs = {}
                if names is not None:
                    try:
                        ops = list(map(get_inst, names)) if names else ()
                    except KeyError:
                        ops = None
                    inst = Instruction(opcode, shape, ops or (), attrs, name, payload)
                    if ops is None:
                        later.append((inst, names, m.start(2)))
                    if attrs and not special.isdisjoint(attrs):
                        self.called_attrs(inst, pairs, m.start(8), pending, ctrl, m.start(2))
                    if opcode == "parameter":
                        params.append(inst)
                    by_name[name] = inst
                    inst.parent = comp
                    if is_root:
                        if root is not None:
                            raise ScanError(m.start(1), "more than one ROOT in a computation",
                                            semantic=True)
                        root = inst
                    pos = m.end()
                    continue
            # the general scanner: anything the one-line form does not cover, and errors
            pos = self.skip_ws(pos)
            if text.startswith("}", pos):
                pos += 1
                break
            if pos >= len(text):
                raise ScanError(pos, "expected '}' to close the computation")
            inst, root_pos, names, npos, pos = self.parse_instruction(pos, pending, ctrl)
            if inst.name in by_name:
                raise ScanError(npos, f"instruction '{inst.name}' is defined twice",
                                semantic=True)
            if names:
                later.append((inst, names, npos))
            if inst.shape is None:
                needs_inference = True
                self.omitted[inst] = npos
            if inst.opcode == "parameter":
                params.append(inst)
            by_name[inst.name] = inst
            inst.parent = comp
            if root_pos >= 0:
                if root is not None:
                    raise ScanError(root_pos, "more than one ROOT in a computation",
                                    semantic=True)
                root = inst
        if not by_name:
            raise ScanError(pos - 1, "a computation needs at least one instruction")
        for inst, names, npos in later:
            try:
                inst.set_operands([by_name[n] for n in names])
            except KeyError as e:
                raise ScanError(self.operand_position(npos, e.args[0]),
                                f"instruction '{inst.name}' uses unknown operand "
                                f"'%{e.args[0]}'", semantic=True) from None
        for inst, names, npos in ctrl:
            try:
                inst.control_predecessors = [by_name[n] for n in names]
            except KeyError as e:
                raise ScanError(npos, f"unknown control predecessor '%{e.args[0]}'",
                                semantic=True) from None
        comp._instructions = dict.fromkeys(by_name.values())
        module._names.update(by_name)
        comp.root = root if root is not None else next(reversed(by_name.values()))
        if params:
            comp.parameters = self.number_parameters(comp, params)
        return comp, pos, needs_inference

    def number_parameters(self, comp: Computation, params: list) -> list[Instruction]:
        """``params`` in the order written; return them by number, checking 0..n-1."""
        n = len(params)
        if n <= len(_COUNTING) and [p.payload for p in params] == _COUNTING[:n]:
            return params  # written in order: the common case
        numbers: dict[int, Instruction] = {}
        for p in params:
            payload = p.payload
            if not (payload.isascii() and payload.isdigit()):
                raise ScanError(self.position_of(p), f"parameter '{p.name}' needs a number, "
                                "e.g. parameter(0)", semantic=True)
            k = int(payload)
            if k in numbers:
                raise ScanError(self.position_of(p), f"parameter number {k} is used twice in "
                                f"'{comp.name}'", semantic=True)
            numbers[k] = p
        if n - 1 != max(numbers):
            missing = min(set(range(n)) - set(numbers))
            last = max(numbers.values(), key=lambda p: int(p.payload))
            raise ScanError(self.position_of(last), f"parameter numbers of '{comp.name}' must "
                            f"be 0...{n - 1}; parameter({missing}) is missing", semantic=True)
        return [numbers[i] for i in range(n)]

    def operand_position(self, npos: int, name: str) -> int:
        """Where operand ``name`` is written in the instruction named at ``npos``."""
        open_paren = self.text.find("(", npos)
        m = rx(r"(?<![\w.\-$%])%?(" + re.escape(name) + r")(?![\w.\-$])").search(
            self.text, open_paren)
        return m.start() if m and open_paren >= 0 else npos

    def position_of(self, inst: Instruction) -> int:
        """Offset of ``inst``'s name where it is defined (error paths only)."""
        m = rx(r"(?:^|\s)%?(" + re.escape(inst.name) + r")\s*=").search(
            self.text, self.comp_starts[-1])
        return m.start(1) if m else self.comp_starts[-1]

    # ---- instructions -------------------------------------------------------------------
    def called_attrs(self, inst, pairs, attr_pos, pending, ctrl, npos) -> None:
        """Called computations and control predecessors of a one-line instruction: kept
        as references (resolved later), with a placeholder where they were written."""
        attrs = inst.attrs
        for key, value in pairs:
            if key in _SPECIAL_ATTRS:
                if inst.called_attr is not None and key in _CALLED:
                    del attrs[key]  # the second of condition=/body=: printed with the first
                self.special_attr(inst, key, value, attr_pos, pending, ctrl, npos)

    def special_attr(self, inst, key, value, vpos, pending, ctrl, npos) -> None:
        names = [n.strip().lstrip("%") for n in value.strip("{} ").split(",") if n.strip()]
        if key == "control-predecessors":
            ctrl.append((inst, names, npos))
            inst.attrs[key] = ""
            return
        if inst.called_attr is None:
            inst.called_attr = key
            inst.attrs[key] = ""
            pending.append((inst, key, names, vpos))
        else:  # while (condition, body), select-and-scatter, pred conditional
            prev = inst.called_attr
            prev = prev if isinstance(prev, tuple) else (prev,)
            inst.called_attr = prev + (key,)
            for i in range(len(pending) - 1, -1, -1):
                if pending[i][0] is inst:
                    p = pending[i]
                    pending[i] = (p[0], p[1], p[2] + names, p[3])
                    break

    def parse_instruction(self, pos: int, pending: list, ctrl: list):
        text = self.text
        m = _INST_RE.match(text, pos)
        if not m:
            raise ScanError(pos, "expected an instruction 'name = shape opcode(...)' or '}'")
        npos = m.start(2)
        name = m.group(2)
        om = _OPCODE_RE.match(text, m.end())
        if om and om.group(1) in OPCODES:
            shape = None  # omitted: inferred once operands and callees are resolved
        else:
            shape, pos = self.shape_at(m.end())
            om = _OPCODE_RE.match(text, pos)
        if not om:
            raise ScanError(self.skip_ws(pos), "expected an opcode followed by '('")
        opcode = om.group(1)
        if opcode not in OPCODES:
            raise ScanError(om.start(1), f"unknown opcode '{opcode}'", semantic=True)
        open_pos = om.end() - 1
        close = scan.find_closing(text, open_pos)
        names: list[str] = []
        payload = ""
        if opcode in ("constant", "parameter"):
            inner = text[open_pos + 1:close - 1]
            payload = " ".join(inner.split()) if "\n" in inner else inner.strip()
        else:
            names = self.parse_operands(open_pos + 1, close - 1)
        inst = Instruction(opcode, shape, (), {}, name, payload)
        pos = close
        attrs = inst.attrs
        while True:
            am = _ATTR_NAME_RE.match(text, pos)
            if not am:
                break
            key = am.group(1)
            vstart = am.end()
            vend = read_value(text, vstart)
            value = text[vstart:vend]
            if "\n" in value and key != "backend_config" and not value.startswith('"'):
                value = " ".join(value.split())
            if key in _CALLED or key == "control-predecessors":
                self.special_attr(inst, key, value, vstart, pending, ctrl, npos)
            elif key in attrs:
                raise ScanError(am.start(1), f"attribute '{key}' is given twice",
                                semantic=True)
            else:
                attrs[key] = value
            pos = vend
        return inst, m.start(1), names, npos, pos

    def parse_operands(self, start: int, end: int) -> list[str]:
        """Operand names between the parens: ``a, b`` or ``f32[2]{0} %a, s32[] %b``."""
        text = self.text
        if start >= end or text[start:end].isspace():
            return []
        names = []
        pos = start
        while True:
            m = _BARE_OPERAND_RE.match(text, pos, end)
            if m and (m.end() == end or text[m.end()] == ","):
                names.append(m.group(1))
                pos = m.end()
            else:
                p = self.skip_ws(pos)
                if p >= end or text[p] == ",":
                    raise ScanError(p, "expected an operand")
                shape, p = self.shape_at(p)
                m = _BARE_OPERAND_RE.match(text, p, end)
                if not m or not m.group(1) or (m.end() < end and text[m.end()] != ","):
                    raise ScanError(self.skip_ws(p), "expected an operand name")
                names.append(m.group(1))
                pos = m.end()
            if pos >= end:
                return names
            pos += 1  # the comma

    # ---- omitted shapes -----------------------------------------------------------------
    def infer_shapes(self, module: HloModule, comps: set) -> None:
        for comp in module.computation_post_order():
            if comp not in comps:
                continue
            for inst in comp.post_order():
                if inst.shape is not None:
                    continue
                try:
                    inst.shape = infer_shape(inst)
                except Exception as e:  # noqa: BLE001 - any failure means "write it out"
                    why = str(e) if type(e).__name__ in ("CannotInfer", "ShapeError") \
                        else f"{type(e).__name__}: {e}"
                    raise ScanError(self.omitted.get(inst, 0),
                                    f"cannot infer the shape of '{inst.name}' ({why}); "
                                    "write the shape out", semantic=True) from None


def _cached_shape(text: str) -> Shape | None:
    try:
        shape = Shape.parse(text)
    except (ValueError, IndexError, RecursionError):
        return None  # the general scanner reports it
    if len(_shapes) < _SHAPE_CACHE_LIMIT:
        _shapes[text] = shape
    return shape


def parse_hlo(text: str, filename: str = "<string>", base_line: int = 0) -> HloModule:
    """Parse one module.  Raises HloParseError with file:line:col, the line and a caret."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the parse allocates millions of objects and frees none of them
    parser = None
    try:
        parser = _Parser(text, filename, base_line)
        return parser.parse_module()
    except ScanError as f:
        failure = (f.pos, f.what, f.semantic)
    except RecursionError:
        failure = (0, "input nests too deeply", False)
    finally:
        if gc_was_enabled:
            gc.enable()
    if parser is None:  # strip_comments failed before the parser existed
        parser = _Parser.__new__(_Parser)
        parser.raw, parser.filename, parser.base_line, parser.comp_starts = \
            text, filename, base_line, [0]
    raise _report(parser, *failure) from None


def _report(parser: _Parser, pos: int, what: str, semantic: bool) -> HloParseError:
    """Ask the reference grammar where the text stops being HLO; keep the scanner's
    message when the grammar accepts the text there (a semantic error)."""
    if semantic:  # the grammar accepts these by construction
        return parser.error(pos, what)
    from .reference import diagnose
    try:
        # from the start of the computation holding the failure, or of the one before it
        # when the failure is at a computation's first token (the cause may be earlier)
        start = max(s for s in parser.comp_starts if s < pos) if pos > 0 else 0
        found = diagnose(parser.raw, start, pos)
    except Exception:  # noqa: BLE001 - the reporter must never hide the real error
        found = None
    if found is not None:
        pos, what = found
    return parser.error(pos, what)


def parse_hlo_modules(text: str, filename: str = "<string>") -> list[HloModule]:
    """Parse a file that may hold several modules split by ``// -----`` lines."""
    return [parse_hlo(chunk, filename, line) for chunk, line in split_modules(text)]
