"""The regular expressions of HLO text, shared by the fast path and the general scanner.

The fast path's patterns only *delimit* shapes (Shape.parse, cached, validates them) and
validate everything else: an instruction they match is well formed.  Possessive
quantifiers and leading literals keep sre from backtracking or retrying at every offset.
"""
from __future__ import annotations

import re

from ..ir.opcodes import CALLED_COMPUTATION_ATTRS
from ..ir.types import ELEMENT_TYPES
from .scan import NAME, rx

CALLED = frozenset(CALLED_COMPUTATION_ATTRS)
STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")

# ---- the one-line fast path ------------------------------------------------------------
# (Spaces only: a literal repeat is a tight loop in sre where a class is a call per
# character; a tab sends the line to the general scanner.)
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
# one attribute with the spaces around it: (all of it, name, value); the parser checks
# that the items found cover the attribute text (so each is scanned once, by findall)
_ATTR_ITEM = r"( *, *(" + NAME + r") *= *(" + _VALUE + ") *)"
_OPERAND = r" *(?:" + _SHAPE + r" +)?%?" + NAME + r" *"
# groups: ROOT, name, shape, opcode, the text in the parens (checked by the parser: operand
# lists through their signature, literals for balanced braces), the rest of the line (the
# attributes, checked by the parser)
FAST_INST_RE = rx(
    r"[ \t\n]*(ROOT +)?%?(" + NAME + r") *= *(" + _SHAPE + r") +"
    r"([a-z][a-z0-9\-]*)\(((?:[^()\"\n]++|" + _PARENS + r")*+)\)"
    r"([^\n]*)")
# An operand list with every name written %name is split on the names: what is left, the
# "signature" (`f32[4]{0} %, s32[] %`), repeats across instructions and is checked once.
PCT_SPLIT_RE = rx(r"%(" + NAME + ")")
_SIG_OPERAND = r" *(?:" + _SHAPE + r" +)?% *"
OPERAND_SIGNATURE_RE = rx(_SIG_OPERAND + r"(?:," + _SIG_OPERAND + r")*")
# An operand list without '%': well formed, or the general scanner
BARE_OPERANDS_RE = rx(_OPERAND + r"(?:," + _OPERAND + r")*| *")
ATTR_ITEM_RE = rx(_ATTR_ITEM)
# Over "," + a well-formed operand list: the shapes written before the operands / the
# operand names.  (A leading literal lets sre skip ahead; `(?:^|,)` would be tried at
# every character.)
OPERAND_SHAPE_RE = rx(r", *(" + _SHAPE + r") +")
OPERAND_NAME_RE = rx(r", *(?:" + _SHAPE + r" +)?%?(" + NAME + ")")
BARE_NAME_RE = rx(NAME)  # in a well-formed list without shapes: the names
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
# A signature with its parameter names cut out (`(: f32[8], : s32[]) -> f32[8]`) repeats
# across computations: checked once, then looked up.
PARAM_SPLIT_RE = rx(r"%?(" + NAME + r")\s*:")
_SKELETON_PARAM = r":\s*" + _SIG_SHAPE
SIGNATURE_SKELETON_RE = rx(r"\((?:\s*" + _SKELETON_PARAM + r"(?:\s*,\s*" + _SKELETON_PARAM +
                           r")*)?\s*\)\s*->\s*" + _SIG_SHAPE + r"\s*")
SIGNATURE_RE = rx(r"\((?:\s*" + _SIG_PARAM + r"(?:\s*,\s*" + _SIG_PARAM + r")*)?\s*\)"
                           r"\s*->\s*" + _SIG_SHAPE + r"\s*")
COUNTING = [str(i) for i in range(4096)]
_BALANCED = r"[^{}]*+"
for _ in range(8):  # literals nest one brace per dimension
    _BALANCED = r"(?:[^{}]++|\{" + _BALANCED + r"\})*+"
BALANCED_BRACES_RE = rx(_BALANCED)
LITERAL_OPS = frozenset({"constant", "parameter"})
SPECIAL_ATTRS = frozenset(CALLED_COMPUTATION_ATTRS) | {"control-predecessors"}

# ---- the general scanner -----------------------------------------------------------------
WS_RE = rx(r"\s*")
HEADER_RE = rx(r"HloModule(?![\w.\-$])\s*(?:(" + NAME + r")|(\"(?:[^\"\\\n]|\\.)*\"))?")
COMP_RE = rx(r"(ENTRY\s+)?(%?)(" + NAME + r")\s*")
INST_RE = rx(r"(ROOT\s+)?%?(" + NAME + r")\s*=\s*")
OPCODE_RE = rx(r"\s*([a-z][a-z0-9\-]*)\s*\(")
ATTR_NAME_RE = rx(r"\s*,\s*(" + NAME + r")\s*=\s*")
PARAM_RE = rx(r"\s*%?(" + NAME + r")(?:\s*:\s*|\s+(?=[a-z(]))")  # `p: f32[]` or `p f32[]`
BARE_OPERAND_RE = rx(r"\s*%?(" + NAME + r")\s*")
SPACED_LAYOUT_RE = rx(r"[ \t]+\{(?=\s*[\d:}])")
TABLE_RE = rx(r"(FileNames|FunctionNames|FileLocations|StackFrames)(?![\w.\-$])")
TABLE_ROW_RE = rx(r"\s*[-+]?\d+[ \t]+")
