"""A strict parser for the DOT subset hlo-opt writes, used to check its structure.

It tokenizes quoted strings (with DOT's ``\\"`` escape), HTML-like strings (balanced
``<...>``), identifiers and punctuation, then reads statements: graph attributes
(``a = b;``), default attribute lists (``node [...]``), node statements, edge statements
and nested ``subgraph`` blocks.  Anything else raises ``DotSyntaxError``; so do unbalanced
braces, an edge to an undefined node and a node defined twice.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


class DotSyntaxError(ValueError):
    pass


@dataclass
class Cluster:
    name: str
    parent: str | None
    attrs: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)


@dataclass
class DotGraph:
    graph_attrs: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)        # id -> attrs
    node_cluster: dict = field(default_factory=dict)  # id -> cluster name or None
    edges: list = field(default_factory=list)        # (src, dst, attrs)
    clusters: dict = field(default_factory=dict)     # name -> Cluster

    def edges_between(self, src: str, dst: str) -> list[dict]:
        return [a for s, d, a in self.edges if s == src and d == dst]

    def in_edges(self, dst: str) -> list[tuple[str, dict]]:
        return [(s, a) for s, d, a in self.edges if d == dst]


_TOKEN = re.compile(r'\s+|//[^\n]*|->|[{}\[\]=;,]|"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+|<', re.S)


def _tokens(text: str):
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if not m:
            raise DotSyntaxError(f"unexpected character {text[pos]!r} at {pos}")
        tok = m.group(0)
        if tok == "<":  # HTML-like string: balanced angle brackets
            depth, i = 0, pos
            while i < n:
                if text[i] == "<":
                    depth += 1
                elif text[i] == ">":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            if depth:
                raise DotSyntaxError(f"unterminated HTML string at {pos}")
            yield ("html", text[pos + 1:i])
            pos = i + 1
            continue
        pos = m.end()
        if tok.isspace() or tok.startswith("//"):
            continue
        if tok.startswith('"'):
            yield ("str", re.sub(r'\\"', '"', tok[1:-1]))
        elif tok in ("{", "}", "[", "]", "=", ";", ",", "->"):
            yield ("punct", tok)
        else:
            yield ("id", tok)


def unescape_esc_string(value: str) -> str:
    """Graphviz escString: ``\\n`` is a newline, ``\\\\`` a backslash."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_dot(text: str) -> DotGraph:
    toks = list(_tokens(text))
    g = DotGraph()
    pos = 0

    def peek(k=0):
        return toks[pos + k] if pos + k < len(toks) else ("eof", "")

    def take(kind=None, value=None):
        nonlocal pos
        tok = peek()
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise DotSyntaxError(f"expected {value or kind}, got {tok} at token {pos}")
        pos += 1
        return tok

    def attr_list():
        attrs = {}
        take("punct", "[")
        while peek() != ("punct", "]"):
            key = take()[1]
            take("punct", "=")
            attrs[key] = take()[1]
            if peek() in (("punct", ","), ("punct", ";")):
                take()
        take("punct", "]")
        return attrs

    def block(cluster: str | None):
        while True:
            tok = peek()
            if tok == ("punct", "}"):
                take()
                return
            if tok[0] == "eof":
                raise DotSyntaxError("unbalanced braces: missing '}'")
            if tok == ("id", "subgraph"):
                take()
                name = take()[1]
                if name in g.clusters:
                    raise DotSyntaxError(f"subgraph {name} defined twice")
                g.clusters[name] = Cluster(name, cluster)
                take("punct", "{")
                block(name)
                continue
            if tok[1] in ("node", "edge", "graph") and peek(1) == ("punct", "["):
                take()
                attr_list()
                take("punct", ";")
                continue
            first = take()[1]
            if peek() == ("punct", "="):  # attribute of the graph / cluster
                take()
                value = take()[1]
                (g.clusters[cluster].attrs if cluster else g.graph_attrs)[first] = value
                take("punct", ";")
                continue
            if peek() == ("punct", "->"):
                take()
                dst = take()[1]
                attrs = attr_list() if peek() == ("punct", "[") else {}
                g.edges.append((first, dst, attrs))
                take("punct", ";")
                continue
            attrs = attr_list() if peek() == ("punct", "[") else {}
            if first in g.nodes:
                raise DotSyntaxError(f"node {first!r} defined twice")
            g.nodes[first] = attrs
            g.node_cluster[first] = cluster
            if cluster:
                g.clusters[cluster].nodes.append(first)
            take("punct", ";")

    take("id", "digraph")
    take()
    take("punct", "{")
    block(None)
    if peek()[0] != "eof":
        raise DotSyntaxError(f"text after the closing brace: {peek()}")
    for src, dst, _ in g.edges:
        for end in (src, dst):
            if end not in g.nodes:
                raise DotSyntaxError(f"edge {src} -> {dst}: {end!r} is not a defined node")
    return g


def check_html_label(label: str) -> ET.Element:
    """An HTML-like label must be well-formed XML (escaped &, <, >)."""
    try:
        return ET.fromstring(f"<label>{label}</label>")
    except ET.ParseError as e:
        raise DotSyntaxError(f"bad HTML-like label {label!r}: {e}") from None


def label_text(label: str) -> str:
    """The visible text of an HTML-like label, lines joined by newlines."""
    root = check_html_label(label.replace("<br/>", "\n"))
    return "".join(root.itertext())
