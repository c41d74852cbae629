"""Low-level scanning shared by the HLO text parser: comments, brackets, strings, values.

Everything works on offsets into one string and raises :class:`ScanError` (an offset and
a message) that the parser turns into an ``HloParseError`` with line, column and caret.
"""
from __future__ import annotations

import re


class ScanError(Exception):
    """An error at ``pos`` (an offset into the text being parsed).  ``semantic`` marks
    errors the grammar cannot see (unknown operand, duplicate name, ...)."""

    def __init__(self, pos: int, what: str, semantic: bool = False):
        super().__init__(what)
        self.pos = pos
        self.what = what
        self.semantic = semantic


def rx(pattern: str, flags: int = 0) -> re.Pattern:
    """Compile with re.ASCII: HLO lexemes are ASCII, and unicode-aware \\w, \\s and \\d
    cost a table lookup per character."""
    return re.compile(pattern, flags | re.ASCII)


NAME = r"[A-Za-z_$][\w.\-$]*"
_COMMENT_START_RE = rx(r"/[/*]")
_STRING_RE = rx(r'"(?:[^"\\\n]|\\.)*"')
_SPLIT_RE = rx(r"^[ \t]*//[ \t]*-----[ \t]*\r?$", re.M)
# Characters of the word-like lexemes of the grammar (NAME, INT, FLOAT, ATOM, PNAME, SYM).
_RUN_RE = rx(r"[\w.$@+\-%<>=:*#!~^|&?]+")
_BRACKETS_RE = rx(r'[(){}\[\]"]')
_HWS_RE = rx(r"[ \t]*")
# What ends a multi-token attribute value: the next instruction (`[ROOT] [%]name =`).
_INST_HEAD_RE = rx(r"(?:ROOT\s+)?%?" + NAME + r"[ \t]*=")
_CLOSER = {"(": ")", "[": "]", "{": "}"}


def _blank(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def _in_string(text: str, start: int, pos: int) -> bool:
    """Is ``pos`` inside a string literal that starts on the line at ``start``?"""
    i = start
    while True:
        q = text.find('"', i, pos)
        if q < 0:
            return False
        m = _STRING_RE.match(text, q)
        if m is None or m.end() > pos:
            return True
        i = m.end()


def strip_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside string literals, keeping every
    offset and newline; ``\\r`` becomes a space (CRLF files keep their columns)."""
    if "\r" in text:
        text = text.replace("\r", " ")
    if "/" not in text:
        return text
    pieces = []
    last = 0
    for m in _COMMENT_START_RE.finditer(text):
        pos = m.start()
        if pos < last:
            continue  # inside a comment blanked already
        line_start = text.rfind("\n", 0, pos) + 1
        if _in_string(text, max(line_start, last), pos):
            continue
        if m.group(0) == "//":
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
        else:
            end = text.find("*/", pos + 2)
            if end < 0:
                raise ScanError(pos, "unterminated '/*' comment")
            end += 2
        pieces.append(text[last:pos])
        pieces.append(_blank(text[pos:end]))
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def skip_string(text: str, pos: int) -> int:
    """``text[pos]`` is '"'; return the offset just past the closing quote."""
    m = _STRING_RE.match(text, pos)
    if m is None:
        raise ScanError(pos, "unterminated string")
    return m.end()


def find_closing(text: str, pos: int) -> int:
    """``text[pos]`` opens a bracket; return the offset just past its partner.  Bracket
    kinds must match; strings are skipped."""
    stack = [_CLOSER[text[pos]]]
    i = pos + 1
    search = _BRACKETS_RE.search
    while True:
        m = search(text, i)
        if m is None:
            raise ScanError(pos, f"'{text[pos]}' is never closed")
        c = m.group(0)
        i = m.end()
        if c == '"':
            i = skip_string(text, m.start())
        elif c in "({[":
            stack.append(_CLOSER[c])
        else:
            want = stack.pop()
            if c != want:
                raise ScanError(m.start(), f"expected '{want}' before '{c}'")
            if not stack:
                return i


def read_chunk(text: str, pos: int) -> int:
    """End of one value chunk at ``pos``: a string, a bracket group, or a run of word and
    symbol characters; ``pos`` itself when none starts there."""
    if pos >= len(text):
        return pos
    c = text[pos]
    if c == '"':
        return skip_string(text, pos)
    if c in "({[":
        return find_closing(text, pos)
    m = _RUN_RE.match(text, pos)
    return m.end() if m else pos


def read_value(text: str, pos: int, multi: bool = True) -> int:
    """End offset of an attribute value starting at ``pos``.

    A value is one or more chunks (``[1,8]<=[8]``, ``s32[2]{0} {1, 2}``); with ``multi``
    it goes on across spaces until a ',', a closing bracket, the next instruction
    (``name =``) or the end of the line, as the grammar's ``attr_item+`` (which cannot see
    line ends, so it also reads a value on into the next line: the scanner does not, and
    reports the stray text there).  Without ``multi`` (module header, computation
    attributes) a value is a single chunk.
    """
    end = read_chunk(text, pos)
    if end == pos:
        if pos >= len(text):
            raise ScanError(pos, "expected an attribute value")
        raise ScanError(pos, f"expected an attribute value, found '{text[pos]}'")
    if not multi:
        return end
    n = len(text)
    while True:
        nxt = read_chunk(text, end)
        if nxt > end:
            end = nxt
            continue
        ws = _HWS_RE.match(text, end).end()
        if ws == end or ws >= n or text[ws] in ",)]}\n" or _INST_HEAD_RE.match(text, ws):
            return end
        nxt = read_chunk(text, ws)
        if nxt == ws:
            return end  # not a value character: the caller reports it
        end = nxt


def split_modules(text: str) -> list[tuple[str, int]]:
    """Split on ``// -----`` lines; return (chunk, line offset of the chunk) pairs."""
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
