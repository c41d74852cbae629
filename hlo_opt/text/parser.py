"""The fast HLO text parser.

Lark cannot sit on the hot path of big dumps (well under 1 MB/s), so text is read by a
scanner built on compiled regexes.  Each instruction is first tried against one regex
that covers the canonical one-line form (``[ROOT] %name = shape opcode(operands),
attr=value, ...``); anything else (multi-line instructions, deep nesting, omitted shapes,
spaced values) goes through the general scanner (general.py), which also reports errors.
Attributes stay verbatim text (typed on first use).

The grammar in ``hlo.lark`` is the reference: when the scanner rejects text, lark is asked
where and why (``reference.diagnose``), so syntax errors read ``file:line:col: error:
expected ',' or ')'`` with the offending line and a caret; semantic errors (unknown
operand, duplicate name, unknown opcode, parameter numbering) keep the scanner's message.
"""
from __future__ import annotations

import gc
from operator import attrgetter

from ..errors import HloParseError
from ..ir.attributes import parse_string
from ..ir.computation import Computation
from ..ir.instruction import Instruction
from ..ir.module import HloModule
from ..ir.opcodes import OPCODES
from ..ir.shape import Shape
from ..shape_inference import infer_shape
from .general import GeneralScanner
from .patterns import (ATTR_ITEM_RE, BALANCED_BRACES_RE, BARE_NAME_RE, BARE_OPERANDS_RE,
                       CALLED, COMP_RE, COUNTING, FAST_INST_RE, HEADER_RE, LITERAL_OPS,
                       OPERAND_NAME_RE, OPERAND_SHAPE_RE, OPERAND_SIGNATURE_RE, PCT_SPLIT_RE,
                       SIGNATURE_RE, SPECIAL_ATTRS, STACK_TABLES, WS_RE)
from .scan import ScanError, split_modules, strip_comments
from .source_map import SourceMap

__all__ = ["parse_hlo", "parse_hlo_modules", "split_modules", "strip_comments"]

_shapes: dict[str, Shape] = {}  # shape text -> Shape, for the fast path
_SHAPE_CACHE_LIMIT = 100_000
_NOT_COMPUTATIONS = frozenset(STACK_TABLES) | {"HloModule", "ROOT"}
_signatures: set[str] = set()  # operand-list signatures already checked
_SIGNATURE_CACHE_LIMIT = 100_000
_payload = attrgetter("payload")


class _Parser(GeneralScanner):
    def __init__(self, text: str, filename: str, base_line: int = 0):
        self.raw = text
        self.filename = filename
        self.base_line = base_line
        self.comp_starts = [0]  # where computations start: lark re-reads from there
        self.anchor = -1  # start of the last instruction read before the general scanner
        self.omitted: dict[Instruction, int] = {}  # instructions written without a shape
        self.nested: list = []  # instructions written as operands, not yet placed
        self.inline_comps: list = []  # (computation, needs inference) written in place
        self.generated: list[Instruction] = []  # those, named once every name is known
        self.positions: dict[Instruction, int] = {}  # where each instruction's name is
        self.text = strip_comments(text)

    def error(self, pos: int, what: str) -> HloParseError:
        raw = self.raw
        pos = max(0, min(pos, len(raw)))
        line = raw.count("\n", 0, pos) + 1
        start = raw.rfind("\n", 0, pos) + 1
        end = raw.find("\n", pos)
        src = raw[start:end if end >= 0 else len(raw)]
        return HloParseError(what, self.filename, line + self.base_line, pos - start + 1, src)

    def parse_module(self) -> HloModule:
        text = self.text
        module = HloModule("")
        module.filename = self.filename
        self.module = module
        module.source = SourceMap(self.raw, self.filename, self.base_line, self.positions)
        pos = self.skip_ws(0)
        m = HEADER_RE.match(text, pos)
        if m:
            if m.group(1) is None and m.group(2) is None:
                raise ScanError(m.end(), "expected the module name after 'HloModule'")
            module.name = m.group(1) or parse_string(m.group(2))
            pos = self.skip_ws(m.end())
            if text.startswith(":", pos):
                pos += 1
            pos = self.parse_attrs(pos, module.header_attrs, multi=False)
            pos = self.parse_stack_frames(module, pos)
        pending: list = []
        inline: list[Computation] = []
        comps: dict[str, Computation] = {}
        entry = None
        infer: list[Computation] = []
        ws = WS_RE.match
        end = len(text)
        comp_starts = self.comp_starts
        parse_computation = self.parse_computation
        while True:
            pos = ws(text, pos).end()
            if pos >= end:
                break
            comp_starts.append(pos)
            comp, pos, needs_inference = parse_computation(module, pos, pending)
            if self.inline_comps:  # computations written in place: before their caller
                for icomp, inl_infer in self.inline_comps:
                    comps[icomp.name] = icomp
                    if inl_infer:
                        infer.append(icomp)
                    inline.append(icomp)
                self.inline_comps.clear()
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
        _uniquify_instruction_names(module)
        for inst in self.generated:  # XLA names them after their opcode
            module.release_name(inst.name)
            inst.name = module.unique_name(inst.opcode)
        if not module.name:
            module.name = entry.name
        for icomp in inline:  # XLA names a computation written in place "_"
            taken = {c.name for c in module.computations}
            base = "async_wrapped" if icomp.name.startswith(" async") else "_"
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}.{k}"
            comps[name] = comps.pop(icomp.name)
            pending = [(i, a, [name if n == icomp.name else n for n in ns], p)
                       for i, a, ns, p in pending]
            icomp.name = name
        for inst, attr, names, apos in pending:
            try:
                inst.called = [comps[n] for n in names]
            except KeyError as e:
                kpos = text.find(attr, apos)
                pos = self.name_position(e.args[0], kpos if kpos >= 0 else apos)
                raise ScanError(pos if pos >= 0 else apos,
                                f"unknown computation '%{e.args[0]}' in {attr}=",
                                semantic=True) from None
        if infer:
            self.infer_shapes(module, set(infer))
        return module

    def parse_computation(self, module: HloModule, pos: int, pending: list):
        text = self.text
        m = COMP_RE.match(text, pos)
        if m is None:
            raise ScanError(pos, "expected a computation ('name {' or 'ENTRY name {')")
        entry, percent, name = m.groups()
        if entry is None and not percent and name == "ENTRY" and \
                text[m.end():m.end() + 1] in ("(", "{"):
            # `ENTRY () -> f32[] {`: an entry computation without a name; it takes the
            # module's (or "main")
            entry, name = "ENTRY", module.name or "main"
        if name in _NOT_COMPUTATIONS and (not percent or name in ("HloModule", "ROOT")):
            raise ScanError(pos, "expected a computation ('name {' or 'ENTRY name {')")
        comp = Computation(name)
        comp.module = module
        comp.is_entry = entry is not None
        pos = m.end()
        # (one-character slices are cached strings: cheaper than startswith)
        if text[pos:pos + 1] == "(":
            sm = SIGNATURE_RE.match(text, pos)
            pos = sm.end() if sm is not None else self.parse_signature(pos)
        if text[pos:pos + 1] == ",":
            pos = self.computation_attrs(comp, pos)
        if text[pos:pos + 1] != "{":
            raise ScanError(pos, "expected '{' to open the computation")
        comp, pos, needs_inference = self.parse_body(comp, module, pos + 1, pending)
        after = WS_RE.match(text, pos).end()
        if text[after:after + 1] == ",":
            pos = self.computation_attrs(comp, after)
        return comp, pos, needs_inference

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

    def parse_body(self, comp: Computation, module: HloModule, pos: int, pending: list):
        text = self.text
        fast = FAST_INST_RE.match
        ws = WS_RE.match
        attr_items = ATTR_ITEM_RE.findall
        pct_split = PCT_SPLIT_RE.split
        signatures = _signatures
        special = SPECIAL_ATTRS
        literal_ops = LITERAL_OPS
        shapes = _shapes
        opcodes = OPCODES
        by_name: dict[str, Instruction] = {}
        positions = self.positions
        get_inst = by_name.__getitem__
        later: list = []  # (inst, operand names, position): operands defined further down
        ctrl: list = []
        params: list = []
        root = None
        needs_inference = False
        anchor = -1  # start of the last instruction read
        while True:
            m = fast(text, pos)
            if m is not None:
                is_root, name, shape_text, opcode, oplist, attr_text = m.groups()
                shape = shapes.get(shape_text) or _cached_shape(shape_text)
                names = None
                if shape is not None and opcode in opcodes and name not in by_name:
                    if opcode in literal_ops:
                        payload = oplist.strip()
                        if "{" not in payload or BALANCED_BRACES_RE.fullmatch(payload):
                            names = ()
                    elif "%" in oplist:
                        payload = ""
                        parts = pct_split(oplist)
                        signature = "%".join(parts[0::2])
                        if signature in signatures or _valid_signature(signature):
                            names = parts[1::2]
                    else:
                        payload = ""
                        names = _bare_operands(oplist)
                attrs = {}
                if attr_text and names is not None:
                    found = attr_items(attr_text)
                    if found:
                        wholes, keys, values = zip(*found)
                        attrs = dict(zip(keys, values))
                        if len(attrs) != len(keys) or sum(map(len, wholes)) != len(attr_text):
                            names = None  # a duplicate or stray text: the general scanner
                    elif not attr_text.isspace():
                        names = None
                if names is not None:
                    try:
                        ops = list(map(get_inst, names)) if names else ()
                    except KeyError:
                        ops = None
                    inst = Instruction(opcode, shape, ops or (), attrs, name, payload)
                    if opcode == "constant":
                        _check_constant(inst, m.start(5))
                    if ops is None:
                        later.append((inst, names, m.start(2)))
                    if attrs and not special.isdisjoint(attrs):
                        self.called_attrs(inst, zip(keys, values), m.start(6), pending, ctrl,
                                          m.start(2))
                    if opcode == "parameter":
                        params.append(inst)
                    by_name[name] = inst
                    positions[inst] = m.start(2)
                    inst.parent = comp
                    if is_root:
                        if root is not None:
                            raise ScanError(m.start(1), "more than one ROOT in a computation",
                                            semantic=True)
                        root = inst
                    anchor = pos
                    pos = m.end()
                    continue
            # the general scanner: anything the one-line form does not cover, and errors
            pos = ws(text, pos).end()
            if text[pos:pos + 1] == "}":
                pos += 1
                break
            if pos >= len(text):
                raise ScanError(pos, "expected '}' to close the computation")
            self.anchor = anchor
            anchor = pos
            inst, root_pos, names, npos, pos = self.parse_instruction(pos, pending, ctrl)
            if inst.opcode == "constant" and inst.shape is not None:
                _check_constant(inst, text.find("constant(", npos) + 9)
            if self.nested:  # instructions written as operands, operands first
                for ninst, nnames, nnpos in self.nested:
                    if ninst.opcode == "constant" and ninst.shape is not None:
                        _check_constant(ninst, text.find("constant(", nnpos) + 9)
                    if nnames:
                        later.append((ninst, nnames, nnpos))
                    if ninst.shape is None:
                        needs_inference = True
                        self.omitted[ninst] = nnpos
                    if ninst.opcode == "parameter":
                        params.append(ninst)
                    by_name[ninst.name] = ninst
                    positions[ninst] = nnpos
                    ninst.parent = comp
                    self.generated.append(ninst)
                self.nested.clear()
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
            positions[inst] = npos
            inst.parent = comp
            if root_pos >= 0:
                if root is not None:
                    raise ScanError(root_pos, "more than one ROOT in a computation",
                                    semantic=True)
                root = inst
        self.anchor = -1
        if not by_name:
            raise ScanError(pos - 1, "a computation needs at least one instruction")
        for inst, names, npos in later:
            try:
                inst.set_operands([by_name[n] for n in names])
            except KeyError as e:
                who = f"the {inst.opcode} written in place" if inst.name.startswith(" ") \
                    else f"instruction '{inst.name}'"
                raise ScanError(self.operand_position(npos, e.args[0]),
                                f"{who} uses unknown operand "
                                f"'%{e.args[0]}'", semantic=True) from None
        for inst, names, npos in ctrl:
            try:
                inst.control_predecessors = [by_name[n] for n in names]
            except KeyError as e:
                raise ScanError(npos, f"unknown control predecessor '%{e.args[0]}'",
                                semantic=True) from None
        comp.set_instructions(by_name.values())
        module.reserve_names(by_name)
        comp.root = root if root is not None else next(reversed(by_name.values()))
        if params:
            comp.parameters = self.number_parameters(comp, params)
        return comp, pos, needs_inference

    def number_parameters(self, comp: Computation, params: list) -> list[Instruction]:
        """``params`` in the order written; return them by number, checking 0..n-1."""
        n = len(params)
        if n == 1 and params[0].payload == "0" or \
                n <= len(COUNTING) and list(map(_payload, params)) == COUNTING[:n]:
            return params  # written in order: the common case
        numbers: dict[int, Instruction] = {}
        for p in params:
            payload = p.payload
            if not (payload.isascii() and payload.isdigit() and len(payload) <= 18):
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

    def called_attrs(self, inst, pairs, attr_pos, pending, ctrl, npos) -> None:
        """Called computations and control predecessors of a one-line instruction: kept
        as references (resolved later), with a placeholder where they were written."""
        attrs = inst.attrs
        for key, value in pairs:
            if key in SPECIAL_ATTRS:
                if inst.called_attr is not None and key in CALLED:
                    del attrs[key]  # the second of condition=/body=: printed with the first
                self.special_attr(inst, key, value, attr_pos, pending, ctrl, npos)

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


_FITTING_SCALARS: dict[str, set[str]] = {}  # element type -> scalar texts known to fit


def _check_constant(inst: Instruction, pos: int) -> None:
    """A constant's literal must fit its shape (XLA's parser rejects it otherwise): the
    value is built now (and kept), the error located at the literal."""
    payload = inst.payload
    shape = inst.shape
    scalar = not shape.dims and shape.element_type != "tuple"
    if scalar:
        ok = _FITTING_SCALARS.get(shape.element_type)
        if ok is not None and payload in ok:
            return  # seen before: fits (the value itself is built on first use)
    if payload == "{...}":
        return
    from ..ir.literal import LiteralSyntaxError, parse_literal, scalar_text_fits
    try:
        if scalar and shape.is_array() and scalar_text_fits(payload, shape.element_type):
            ok = _FITTING_SCALARS.setdefault(shape.element_type, set())
            if len(ok) < 4096:
                ok.add(payload)
            return
        inst.cache_literal(parse_literal(payload, shape))
    except LiteralSyntaxError as e:
        raise ScanError(pos, f"constant literal does not fit {inst.shape.to_text(False)}: {e}",
                        semantic=True) from None
    except (ValueError, TypeError, OverflowError) as e:
        raise ScanError(pos, f"constant literal does not fit {inst.shape.to_text(False)}: {e}",
                        semantic=True) from None


def _cached_shape(text: str) -> Shape | None:
    try:
        shape = Shape.parse(text)
    except (ValueError, IndexError, RecursionError):
        return None  # the general scanner reports it
    if len(_shapes) < _SHAPE_CACHE_LIMIT:
        _shapes[text] = shape
    return shape


def _valid_signature(signature: str) -> bool:
    """``f32[4]{0} %, s32[] %``: well formed with valid shapes? (cached when it is)"""
    if not OPERAND_SIGNATURE_RE.fullmatch(signature):
        return False
    for shape_text in OPERAND_SHAPE_RE.findall("," + signature):
        if shape_text not in _shapes and _cached_shape(shape_text) is None:
            return False
    if len(_signatures) < _SIGNATURE_CACHE_LIMIT:
        _signatures.add(signature)
    return True


def _bare_operands(oplist: str):
    """Names in an operand list written without '%' (``a, b`` or ``f32[] a``), or None
    when it is not well formed (the general scanner then reports it)."""
    if not BARE_OPERANDS_RE.fullmatch(oplist):
        return None
    if "[" not in oplist and "(" not in oplist:
        return BARE_NAME_RE.findall(oplist)
    for shape_text in OPERAND_SHAPE_RE.findall("," + oplist):
        if shape_text not in _shapes and _cached_shape(shape_text) is None:
            return None
    return OPERAND_NAME_RE.findall("," + oplist)


def _uniquify_instruction_names(module: HloModule) -> None:
    """Instruction names are unique per module, as XLA's parser makes them: where two
    computations reuse a name, the first one (callees before the entry) keeps it and later
    ones get a fresh ``name.N`` that clashes with no name in the text."""
    total = sum(c.instruction_count() for c in module.computations)
    if total == module.name_count():
        return  # the common case: nothing repeats
    seen: set[str] = set()
    order = [c for c in module.computations if not c.is_entry] + [module.entry]
    for comp in order:
        for inst in comp.iter_instructions():
            if inst.name in seen:
                inst.name = module.unique_name(inst.name)
            seen.add(inst.name)


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
        parser.anchor = -1
    raise _report(parser, *failure) from None


def _report(parser: _Parser, pos: int, what: str, semantic: bool) -> HloParseError:
    """Ask the reference grammar where the text stops being HLO; keep the scanner's
    message when the grammar accepts the text there (a semantic error)."""
    if semantic:  # the grammar accepts these by construction
        return parser.error(pos, what)
    from .reference import diagnose
    try:
        if 0 <= parser.anchor < pos:
            # inside a computation: from the instruction before the failure, as if it
            # opened a computation (keeps reports cheap in huge computations)
            found = diagnose(parser.raw, parser.anchor, pos, prefix="x {\n")
        else:
            # from the start of the computation holding the failure, or of the one before
            # it when the failure is at a computation's first token (the cause may be
            # earlier)
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
