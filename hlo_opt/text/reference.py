"""The reference grammar (``hlo.lark``) as a checker and an error reporter.

The fast scanner in ``parser.py`` parses; lark only runs when the scanner rejects text,
to say where the text stops being HLO and what was expected there, in words a user reads
("expected ',' or ')'"), not terminal names.  ``accepts`` is for tests.

Lark is loaded lazily: importing the parser never pays for building the LALR tables.
"""
from __future__ import annotations

import functools
from pathlib import Path

GRAMMAR_PATH = Path(__file__).with_name("hlo.lark")

# Terminal name -> words.  Anonymous punctuation terminals are described by their text.
_WORDS = {
    "NAME": "a name",
    "PNAME": "a name",
    "INST_HEAD": "an instruction ('name = shape opcode(...)')",
    "INT": "an integer",
    "FLOAT": "a number",
    "NEG_SPECIAL": "a number",
    "STRING": "a string",
    "LAYOUT_OPEN": "a layout '{...}'",
    "ENTRY": "'ENTRY'",
    "DOTS": "'...'",
    "$END": "the end of the input",
}
# Terminals that only ever start an attribute value: when one is expected, say so once.
_VALUE_ONLY = {"ATOM", "SYM"}
_TABLES = {"FILENAMES", "FUNCTIONNAMES", "FILELOCATIONS", "STACKFRAMES"}
_ORDER = ["a computation", "an instruction ('name = shape opcode(...)')", "an attribute value",
          "a shape", "a name", "an integer", "a number", "a string"]


@functools.lru_cache(maxsize=1)
def _parser():
    import lark
    import re
    return lark.Lark(GRAMMAR_PATH.read_text(), parser="lalr", lexer="contextual",
                     propagate_positions=False, maybe_placeholders=False,
                     g_regex_flags=re.ASCII)  # as the scanner: HLO lexemes are ASCII


def accepts(text: str) -> bool:
    """Does the reference grammar accept ``text`` (one module)?"""
    import lark
    try:
        _parser().parse(text)
    except lark.exceptions.UnexpectedInput:
        return False
    return True


def describe_expected(names, previous: str | None = None, inner: str | None = None) -> str:
    """``{'COMMA', 'RPAR'}`` -> ``"',' or ')'"``.

    ``previous`` is the type of the token before the error, ``inner`` the innermost open
    bracket ('(', '[', '{' or None at the top level): a closing bracket of another kind can
    never come next, so it is not offered (LALR merges states, so lark's own sets can)."""
    parser = _parser()
    names = set(names)
    closers = {"RPAR": "(", "RSQB": "[", "RBRACE": "{"}
    for closer, opener in closers.items():
        if closer in names and inner != opener and len(names) > 1:
            names.discard(closer)
    phrases: list[str] = []
    if names & _VALUE_ONLY:
        phrases.append("an attribute value")
        names -= {"ATOM", "SYM", "NAME", "PNAME", "INT", "FLOAT", "NEG_SPECIAL", "STRING",
                  "LBRACE", "LSQB", "LPAR"}
    if {"NAME", "PNAME", "INT", "LBRACE", "LPAR"} <= names:
        phrases.append("an operand")
        names -= {"NAME", "PNAME", "INT", "FLOAT", "NEG_SPECIAL", "STRING", "LBRACE", "LPAR"}
    if {"ENTRY", "NAME", "PNAME"} <= names:
        phrases.append("a computation")
        names -= {"ENTRY", "NAME", "PNAME", "HLOMODULE"} | _TABLES
    names.discard("HLOMODULE")  # only ever first: never the useful suggestion
    if names & _TABLES:
        phrases.append("a stack-frame table (FileNames, FunctionNames, ...)")
        names -= _TABLES
    if previous == "COMMA" and names == {"NAME"}:
        return "an attribute 'name=value'"
    if previous == "COMMA" and names == {"NAME", "PNAME"} and inner == "(":
        return "a parameter 'name: shape'"
    if "LSQB" in names and len(names) > 1 and previous == "NAME":
        # after `x` in `add(x y)`: '[' would make `x` an element type; ',' or ')' is meant
        names.discard("LSQB")
    if "LPAR" in names and len(names) > 1 and previous == "NAME" and inner == "(":
        # likewise '(' would make `x` the opcode of an instruction written in place
        names.discard("LPAR")
    if "INT" in names and "FLOAT" not in names:
        names.discard("NEG_SPECIAL")
    punct = []
    for name in sorted(names):
        if name in _WORDS:
            phrase = _WORDS[name]
        else:
            try:
                term = parser.get_terminal(name)
            except KeyError:
                phrase = name.lower()
            else:
                phrase = f"'{term.pattern.value}'" if term.pattern.type == "str" \
                    else name.lower()
        if phrase.startswith("'"):
            punct.append(phrase)
        elif phrase not in phrases:
            phrases.append(phrase)
    phrases.sort(key=lambda p: _ORDER.index(p) if p in _ORDER else len(_ORDER))
    # punctuation first in a natural order: , ) } ] then the rest
    rank = {"','": 0, "')'": 1, "'}'": 2, "']'": 3, "'='": 4}
    punct.sort(key=lambda p: (rank.get(p, 10), p))
    items = list(dict.fromkeys(punct + phrases))
    if not items:
        return "something else"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]


_OPENERS = {"LPAR": "(", "LSQB": "[", "LBRACE": "{", "LAYOUT_OPEN": "{"}
_CLOSERS = {"RPAR", "RSQB", "RBRACE"}


def diagnose(text: str, start: int = 0, fail_pos: int | None = None,
             lines_after: int = 2, prefix: str = "") -> tuple[int, str] | None:
    """Parse ``prefix + text[start:]`` with the reference grammar and return
    ``(offset into text, message)`` of the first syntax error, or None when the grammar
    accepts the text up to a couple of lines past ``fail_pos`` (then the scanner's error is
    a semantic one, e.g. an unknown operand, and its message stands).

    Lark runs at well under 1 MB/s, so the caller starts it close to the failure: at the
    computation holding it, or at the instruction before it with ``prefix="x {\\n"``
    standing in for the computation's head; and it stops a few lines past ``fail_pos``."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    stop = len(text)
    if fail_pos is not None:
        stop = fail_pos
        for _ in range(lines_after + 1):
            nl = text.find("\n", stop + 1)
            if nl < 0:
                stop = len(text)
                break
            stop = nl
    interactive = _parser().parse_interactive(prefix + text[start:])
    start -= len(prefix)  # token offsets -> offsets into text
    previous = None
    stack: list[str] = []
    pending = None  # iter_parse yields a token before feeding it: count it once it is in

    def take(tok):
        nonlocal previous
        previous = tok.type
        if previous in _OPENERS:
            stack.append(_OPENERS[previous])
        elif previous in _CLOSERS and stack:
            stack.pop()

    try:
        for tok in interactive.iter_parse():
            if start + tok.start_pos > stop:
                return None
            if pending is not None:
                take(pending)
            pending = tok
        interactive.feed_eof(None)
    except UnexpectedInput as e:
        if pending is not None and getattr(e, "token", None) is not pending:
            take(pending)  # the lexer failed after it: it was fed
        try:
            expected = interactive.accepts()
        except Exception:  # noqa: BLE001 - fall back on lark's own set
            expected = getattr(e, "expected", None) or getattr(e, "allowed", None) or ()
        what = describe_expected(expected, previous, stack[-1] if stack else None)
        if isinstance(e, UnexpectedToken):
            if e.token.type == "$END":
                return len(text), "unexpected end of input; expected " + what
            return start + e.token.start_pos, "expected " + what
        pos = start + getattr(e, "pos_in_stream", 0)
        char = text[pos] if pos < len(text) else ""
        if char == '"':
            return pos, "unterminated string"
        if text.startswith("/*", pos):
            return pos, "unterminated '/*' comment"
        if isinstance(e, UnexpectedCharacters) and not _lexable(char):
            shown = char if char.isprintable() else repr(char)[1:-1]
            return pos, f"unexpected character '{shown}'; expected {what}"
        return pos, "expected " + what
    return None


def _lexable(char: str) -> bool:
    """Can ``char`` start some token of the grammar (lexemes are ASCII)?"""
    return (char.isascii() and char.isalnum()) or char in "_.$@+-%<>=:*#!~^|&?,(){}[]\" \t\r\n"
