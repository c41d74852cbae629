"""The general scanner: every construct of HLO text, one piece at a time.

The parser's fast path handles the canonical one-line instruction; everything else
(headers, stack-frame tables, signatures, multi-line or unusual instructions) and every
syntax error come through here.  Errors are ScanError(offset, message).
"""
from __future__ import annotations

import re

from ..ir.instruction import Instruction
from ..ir.module import HloModule
from ..ir.opcodes import OPCODES
from ..ir.shape import Shape, ShapeSyntaxError, parse_shape_at
from . import scan
from .patterns import (ATTR_NAME_RE, BARE_OPERAND_RE, CALLED, INST_RE, OPCODE_RE,
                       PARAM_RE, SIGNATURE_RE, SPACED_LAYOUT_RE, TABLE_RE, TABLE_ROW_RE,
                       WS_RE)
from .scan import ScanError, read_value, rx


_ASYNC_SUFFIXES = (("-start", "async-start"), ("-update", "async-update"),
                   ("-done", "async-done"))


def async_sugar(opcode: str):
    """``call-start`` -> ("call", "async-start"): an opcode XLA's parser takes as the
    shorthand of an async op wrapping another one, or None."""
    for suffix, async_op in _ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            inner = opcode[:-len(suffix)]
            if inner in OPCODES and not inner.startswith("async"):
                return inner, async_op
    return None


class GeneralScanner:
    """Mixin for the parser: needs ``self.text`` (comments blanked) and ``self.raw``."""

    text: str
    raw: str
    comp_starts: list[int]

    def skip_ws(self, pos: int) -> int:
        return WS_RE.match(self.text, pos).end()

    def shape_at(self, pos: int) -> tuple[Shape, int]:
        text = self.text
        try:
            shape, end = parse_shape_at(text, pos)
            m = SPACED_LAYOUT_RE.match(text, end)
            if m and shape.is_array() and shape.layout is None and shape.rank:
                # `f32[2] {1,0}`: XLA's lexer skips the space; parse the shape without it
                close = scan.find_closing(text, m.end() - 1)
                start = WS_RE.match(text, pos).end()
                shape = Shape.parse(text[start:end] + text[m.end() - 1:close])
                end = close
            return shape, end
        except ShapeSyntaxError as e:
            raise ScanError(e.offset if e.offset >= pos else pos, e.what) from None
        except (ValueError, IndexError):
            raise ScanError(pos, "bad shape") from None

    def parse_attrs(self, pos: int, into: dict, multi: bool) -> int:
        text = self.text
        while True:
            am = ATTR_NAME_RE.match(text, pos)
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
            tm = TABLE_RE.match(text, p)
            if not tm:
                break
            table = tm.group(1)
            p = self.skip_ws(p + len(table))
            while True:
                rm = TABLE_ROW_RE.match(text, p)
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

    def parse_signature(self, pos: int) -> int:
        """``(p: f32[4], q: s32[]) -> f32[4]`` (checked, not kept: parameters come from the
        instructions); returns the offset after it."""
        text = self.text
        m = SIGNATURE_RE.match(text, pos)
        if m:
            return m.end()
        pos = self.skip_ws(pos + 1)
        if not text.startswith(")", pos):
            while True:
                pm = PARAM_RE.match(text, pos)
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

    def special_attr(self, inst, key, value, vpos, pending, ctrl, npos) -> None:
        if key != "control-predecessors" and value.startswith("{") and "=" in value:
            names = [self.inline_computation(value, vpos, pending)]
        else:
            names = [n.strip().lstrip("%") for n in value.strip("{} ").split(",")
                     if n.strip()]
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

    def inline_computation(self, value: str, vpos: int, pending: list) -> str:
        """A computation written in place of its name (``to_apply={ a = ... }``): parsed
        as a computation of its own, named as XLA names it (``_``, made unique when the
        module is complete); returns its placeholder name."""
        from ..ir.computation import Computation
        brace = self.text.find(value, vpos)
        brace = brace if brace >= 0 else vpos
        placeholder = f" inline {brace}"
        comp = Computation(placeholder)
        comp.module = self.module
        saved = self.nested
        self.nested = []
        try:
            comp, end, needs_inference = self.parse_body(comp, self.module, brace + 1, pending)
        finally:
            self.nested = saved
        if end != scan.find_closing(self.text, brace):
            raise ScanError(end, "expected the end of the computation written in place")
        self.inline_comps.append((comp, needs_inference))
        return placeholder

    def parse_instruction(self, pos: int, pending: list, ctrl: list):
        text = self.text
        m = INST_RE.match(text, pos)
        if not m:
            raise ScanError(pos, "expected an instruction 'name = shape opcode(...)' or '}'")
        npos = m.start(2)
        inst, names, pos = self.parse_rhs(m.end(), m.group(2))
        attrs = inst.attrs
        while True:
            am = ATTR_NAME_RE.match(text, pos)
            if not am:
                break
            key = am.group(1)
            vstart = am.end()
            vend = read_value(text, vstart)
            value = text[vstart:vend]
            if "\n" in value and key != "backend_config" and not value.startswith('"'):
                value = " ".join(value.split())
            if key in CALLED or key == "control-predecessors":
                self.special_attr(inst, key, value, vstart, pending, ctrl, npos)
            elif key in attrs:
                raise ScanError(am.start(1), f"attribute '{key}' is given twice",
                                semantic=True)
            else:
                attrs[key] = value
            pos = vend
        sugared = self.__dict__.get("sugared")
        if sugared and inst in sugared:
            self.desugar_async(inst, *sugared.pop(inst), pending)
        return inst, m.start(1), names, npos, pos

    def desugar_async(self, inst, wrapped: str, opos: int, pending: list) -> None:
        """``call-start(...)``, ``dynamic-slice-start(...)``, ...: XLA's shorthand for an
        async-start whose computation holds just that op (its attributes go with it; the
        async-start keeps ``async_execution_thread``); ``X-update`` / ``X-done`` are
        async-update / async-done."""
        if inst.opcode != "async-start":
            for key in list(inst.attrs):
                if key != "async_execution_thread":
                    raise ScanError(opos, f"{wrapped}-{inst.opcode[6:]} takes no attribute "
                                    f"'{key}'", semantic=True)
            return
        from ..ir.computation import Computation
        shape = inst.shape
        if shape is None or not shape.is_tuple() or len(shape.tuple_shapes) < 2 or \
                not shape.tuple_shapes[0].is_tuple():
            raise ScanError(opos, f"{wrapped}-start needs its shape written out: "
                            "((operand shapes), result shape, ...)", semantic=True)
        comp = Computation(f" async {opos}")
        comp.module = self.module
        params = []
        for i, ps in enumerate(shape.tuple_shapes[0].tuple_shapes):
            p = Instruction("parameter", ps, (), {}, "async_param" if i == 0 else
                            f"async_param.{i}", str(i))
            params.append(p)
        root = Instruction(wrapped, shape.tuple_shapes[1], params, {}, wrapped)
        thread = None
        for key, value in list(inst.attrs.items()):
            if key == "async_execution_thread":
                thread = value
                continue
            root.attrs[key] = value
        if inst.called_attr is not None:  # to_apply= / calls= of the wrapped op
            keys = inst.called_attr if isinstance(inst.called_attr, tuple) else \
                (inst.called_attr,)
            root.called_attr = inst.called_attr
            for k in keys:
                root.attrs[k] = inst.attrs.get(k, "")
            for i in range(len(pending)):
                if pending[i][0] is inst:
                    pending[i] = (root,) + tuple(pending[i][1:])
            inst.called_attr = None
        inst.attrs.clear()
        if thread is not None:
            inst.attrs["async_execution_thread"] = thread
        for p in params:
            p.parent = comp
        root.parent = comp
        comp.set_instructions(params + [root])
        self.module.reserve_names(x.name for x in params + [root])
        comp.parameters = params
        comp.root = root
        if thread is not None:
            comp.execution_thread = thread.strip('"')
        inst.attrs["calls"] = ""
        inst.called_attr = "calls"
        pending.append((inst, "calls", [comp.name], opos))
        self.inline_comps.append((comp, False))

    def parse_rhs(self, pos: int, name: str):
        """``[shape] opcode(operands)`` at ``pos``: (instruction without attributes, its
        operand names, the offset after the closing paren)."""
        text = self.text
        om = OPCODE_RE.match(text, pos)
        if om and om.group(1) in OPCODES:
            shape = None  # omitted: inferred once operands and callees are resolved
        else:
            shape, pos = self.shape_at(pos)
            om = OPCODE_RE.match(text, pos)
        if not om:
            raise ScanError(self.skip_ws(pos), "expected an opcode followed by '('")
        opcode = om.group(1)
        wrapped = None
        if opcode not in OPCODES:
            wrapped = async_sugar(opcode)
            if wrapped is None:
                raise ScanError(om.start(1), f"unknown opcode '{opcode}'", semantic=True)
            wrapped, opcode = wrapped
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
        if wrapped is not None:
            self.__dict__.setdefault("sugared", {})[inst] = (wrapped, om.start(1))
        return inst, names, close

    def parse_operands(self, start: int, end: int) -> list[str]:
        """Operand names between the parens: ``a, b`` or ``f32[2]{0} %a, s32[] %b``; an
        operand may also be an instruction written in place (``f32[] constant(5)``,
        nested at will, without attributes, as XLA's parser takes it): it is queued on
        ``self.nested`` under a placeholder name the parser replaces by a generated one."""
        text = self.text
        if start >= end or text[start:end].isspace():
            return []
        names = []
        pos = start
        while True:
            m = BARE_OPERAND_RE.match(text, pos, end)
            if m and (m.end() == end or text[m.end()] == ","):
                names.append(m.group(1))
                pos = m.end()
            else:
                p = self.skip_ws(pos)
                if p >= end or text[p] == ",":
                    raise ScanError(p, "expected an operand")
                om = OPCODE_RE.match(text, p, end)
                if om and om.group(1) in OPCODES:
                    names.append(self.nested_operand(p, end))
                    pos = self.nested_end
                else:
                    _, q = self.shape_at(p)
                    om = OPCODE_RE.match(text, q, end)
                    if om and om.group(1) in OPCODES:
                        names.append(self.nested_operand(p, end))
                        pos = self.nested_end
                    else:
                        m = BARE_OPERAND_RE.match(text, q, end)
                        if not m or not m.group(1) or (m.end() < end and text[m.end()] != ","):
                            raise ScanError(self.skip_ws(q), "expected an operand name")
                        names.append(m.group(1))
                        pos = m.end()
                pos = self.skip_ws(pos)
                if pos < end and text[pos] != ",":
                    raise ScanError(pos, "expected ',' or ')'")
            if pos >= end:
                return names
            pos += 1  # the comma

    def nested_operand(self, pos: int, end: int) -> str:
        """An instruction written as an operand: parsed (operands first), queued on
        ``self.nested`` as (instruction, operand names, offset); returns its placeholder
        name (one no text can hold); ``self.nested_end`` is the offset after it."""
        nested = self.__dict__.setdefault("nested", [])
        placeholder = f" nested {pos}"
        inst, names, close = self.parse_rhs(pos, placeholder)
        if close > end:
            raise ScanError(end, "expected ')'")
        nested.append((inst, names, self.skip_ws(pos)))
        self.nested_end = close
        return placeholder

    def name_position(self, name: str, start: int) -> int:
        """Offset of the first ``name`` / ``%name`` token at or after ``start``, or -1."""
        m = rx(r"(?<![\w.\-$%])%?" + re.escape(name) + r"(?![\w.\-$])").search(
            self.text, start)
        return m.start() if m else -1

    def operand_position(self, npos: int, name: str) -> int:
        """Where operand ``name`` is written in the instruction named at ``npos``."""
        open_paren = self.text.find("(", npos)
        pos = self.name_position(name, open_paren) if open_paren >= 0 else -1
        return pos if pos >= 0 else npos

    def position_of(self, inst: Instruction) -> int:
        """Offset of ``inst``'s name where it is defined (error paths only)."""
        m = rx(r"(?:^|\s)%?(" + re.escape(inst.name) + r")\s*=").search(
            self.text, self.comp_starts[-1])
        return m.start(1) if m else self.comp_starts[-1]
