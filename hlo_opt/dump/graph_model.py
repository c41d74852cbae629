"""How each HLO instruction is drawn, after XLA's ``xla/service/hlo_graph_dumper.cc``.

:class:`GraphModel` decides, once per module and in time linear in its size, every
instruction's HTML-like label (constants, get-tuple-elements and constant-bound fusion
parameters inlined into their users, trivial called computations summarised), XLA's
Material colour scheme, node shape, metadata tooltip, arrowhead weight and the shape
printed on its out-edges.  ``dot.py`` serializes it as DOT.  HTML pages make the same
decisions in the browser (``assets/hlo_model.js``, from the module's text and the tables
here; tests/dump/test_html_model.py keeps the two equal), which builds the DOT of
whatever view the user asks for.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..ir.computation import Computation
from ..ir.instruction import Instruction
from ..ir.module import HloModule
from ..ir.opcodes import CALLED_COMPUTATION_ATTRS, is_elementwise
from ..ir.shape import Shape

SMALL_ELEMENTS = 4096          # XLA's IsSmall boundary: hollow arrowheads below it
MAX_LITERAL_ELEMENTS = 8       # constants with at most this many elements print inline
MAX_LITERAL_CHARS = 64
MAX_SHAPE_CHARS = 64
MAX_ATTR_CHARS = 128
MAX_OPERANDS_SHOWN = 32

# XLA's ColorScheme -> (style, fill colour, stroke colour, font colour); Material palette.
SCHEMES: dict[str, tuple[str, str, str, str]] = {
    "blue": ("filled", "#bbdefb", "#8aacc8", "black"),
    "brown": ("filled", "#bcaaa4", "#8c7b75", "black"),
    "dark_blue": ("filled", "#1565c0", "#003c8f", "white"),
    "dark_green": ("filled", "#2e7d32", "#005005", "white"),
    "dark_orange": ("filled", "#ffb74d", "#c88719", "black"),
    "dark_red": ("filled", "#b71c1c", "#7f0000", "white"),
    "gray": ("filled", "#cfd8dc", "#9ea7aa", "black"),
    "green": ("filled", "#c8e6c9", "#97b498", "black"),
    "orange": ("filled", "#ffe0b2", "#cbae82", "black"),
    "purple": ("filled", "#e1bee7", "#af8eb5", "black"),
    "red": ("filled", "#ffcdd2", "#cb9ca1", "black"),
    "white": ("filled", "white", "black", "black"),
    "yellow": ("filled", "#fff9c4", "#cbc693", "black"),
    "dashed": ("filled,dashed", "white", "#757575", "#757575"),
}

# Opcode -> scheme, as in the newest GetInstructionColor (before the special cases).
_WHITE = """abs asin asinh acos acosh add and atan2 atanh bitcast-convert ceil clamp
count-leading-zeros compare complex convert cosine cosh divide erf exponential
exponential-minus-one floor imag iota is-finite log log-plus-one maximum minimum multiply
negate not popcnt or xor power real reduce-precision remainder rng rng-get-and-update-state
rng-bit-generator round-nearest-afz round-nearest-even rsqrt select shift-left
shift-right-arithmetic shift-right-logical stochastic-convert logistic sign sine sinh slice
sort topk sqrt cbrt subtract tan tanh add-dependency after-all get-tuple-element opt-barrier
pad tuple constant""".split()
OPCODE_SCHEME: dict[str, str] = {op: "white" for op in _WHITE}
OPCODE_SCHEME.update({op: "yellow" for op in ("broadcast", "dynamic-update-slice")})
OPCODE_SCHEME.update({op: "green" for op in (
    "concatenate", "dynamic-slice", "reshape", "dynamic-reshape", "reverse", "transpose",
    "copy", "copy-start", "copy-done")})
OPCODE_SCHEME.update({op: "dark_blue" for op in (
    "convolution", "dot", "ragged-dot", "scaled-dot", "fft", "triangular-solve", "cholesky")})
OPCODE_SCHEME.update({op: "purple" for op in (
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "reduce",
    "reduce-window", "scan", "scatter", "select-and-scatter", "gather")})
OPCODE_SCHEME.update({op: "gray" for op in (
    "domain", "fusion", "map", "get-dimension-size", "set-dimension-size")})
OPCODE_SCHEME.update({op: "brown" for op in (
    "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "reduce-scatter",
    "all-reduce-start", "all-reduce-done", "all-to-all", "collective-broadcast",
    "collective-permute", "collective-permute-start", "collective-permute-done", "infeed",
    "outfeed", "partition-id", "ragged-all-to-all", "recv", "recv-done", "send",
    "send-done", "replica-id")})
OPCODE_SCHEME.update({op: "dark_green" for op in ("call", "conditional", "custom-call", "while")})

_TRIVIAL_BINARY = {"add": "add", "multiply": "multiply", "minimum": "min", "maximum": "max",
                   "xor": "xor", "and": "and", "or": "or"}
_COMPARE_NAMES = {"LE": "less-or-equal", "GE": "greater-or-equal", "GT": "greater-than",
                  "LT": "less-than", "EQ": "equal-to", "NE": "not-equal-to"}
_FUSION_CATEGORY = {"kInput": "input fusion", "kOutput": "output fusion",
                    "kCustom": "custom fusion"}
_TRUNCATED_ATTRS = ("replica_groups=", "source_target_pairs=", "control-predecessors=")
_METADATA_FIELD_RE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')


# ---- escaping -------------------------------------------------------------------------
def dot_quote(text: str) -> str:
    """A DOT double-quoted string (ids and escString attributes such as tooltips)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def html_escape(text: str) -> str:
    """Text safe inside a Graphviz HTML-like label (XML character data)."""
    if "&" not in text and "<" not in text and ">" not in text:
        return text  # the common case, and the hot one
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---- shape helpers (XLA's ShapeUtil spellings) ---------------------------------------
def is_effective_scalar(shape: Shape) -> bool:
    return shape.is_array() and all(d == 1 for d in shape.dims)


def is_small(shape: Shape) -> bool:
    return _shape_facts(shape)[0]


def human_string(shape: Shape, layout: bool = False) -> str:
    return _shape_facts(shape)[2 if layout else 1]


def is_multidimensional(shape: Shape) -> bool:
    return _shape_facts(shape)[3]


_SHAPE_FACTS: dict[tuple, tuple[bool, str, str, bool]] = {}


_FACTS_BY_ID: dict[int, tuple] = {}  # id(shape) -> (shape, facts): shapes are immutable


def _shape_facts(shape: Shape) -> tuple[bool, str, str, bool]:
    """(small, text, text with layout, has a rank>1 array leaf), cached: shapes repeat."""
    hit = _FACTS_BY_ID.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    key = (shape, shape.to_text()) if shape.is_tuple() else \
        (shape, shape.layout.to_text() if shape.layout is not None else None)
    facts = _SHAPE_FACTS.get(key)
    if facts is None:
        leaves = shape.leaves()
        if any(leaf.element_type in ("token", "opaque") for leaf in leaves):
            small = True
        else:
            small = sum(leaf.num_elements() for leaf in leaves if leaf.is_array()) \
                < SMALL_ELEMENTS
        facts = (small, shape.to_text(layout=False), shape.to_text(layout=True),
                 any(leaf.is_array() and leaf.rank > 1 for leaf in leaves))
        if len(_SHAPE_FACTS) < 100_000:
            _SHAPE_FACTS[key] = facts
    if len(_FACTS_BY_ID) >= 200_000:
        _FACTS_BY_ID.clear()
    _FACTS_BY_ID[id(shape)] = (shape, facts)  # the entry keeps the shape (and its id) alive
    return facts


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


@lru_cache(maxsize=65536)
def parse_metadata(text: str | None) -> dict[str, str]:
    """``{op_type="Add" op_name="a/b" source_file="x.py" source_line=3}`` -> fields.

    Cached (metadata strings repeat); callers must not mutate the result."""
    if not text:
        return {}
    out = {}
    for key, value in _METADATA_FIELD_RE.findall(text):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out[key] = value
    return out


def match_trivial_computation(comp: Computation) -> str | None:
    """XLA's MatchTrivialComputation: "add", "max", "less-than", ... or None."""
    if comp.instruction_count() != 3 or comp.root is None:
        return None
    root = comp.root
    if len(root.operands) != 2 or not is_effective_scalar(root.shape):
        return None
    a, b = root.operands
    params = {a, b}
    if any(p.opcode != "parameter" or not is_effective_scalar(p.shape) for p in params):
        return None
    if {p.parameter_number for p in params} != {0, 1} or len(params) != 2:
        return None
    direction = root.attrs.get("direction", "")
    if a.parameter_number == 1 and root.opcode == "compare" and direction in (
            "LE", "GE", "GT", "LT"):
        return None
    if root.opcode in _TRIVIAL_BINARY:
        return _TRIVIAL_BINARY[root.opcode]
    if root.opcode == "compare":
        return _COMPARE_NAMES.get(direction)
    return None


# ---- the model ------------------------------------------------------------------------
@dataclass
class GraphNode:
    """How one instruction is drawn."""
    idx: int
    inst: Instruction
    comp: int                       # index into GraphModel.comps
    label: str = ""                 # HTML-like label body (without the enclosing <>)
    scheme: str = "white"
    node_shape: str = "rect"
    tooltip: str = ""               # plain text; dot_quote() it
    merged: bool = False            # XLA's ShouldMergeIntoUsers
    hidden: bool = False            # constants / fused broadcasts of scalar constants
    edge_source: bool = True        # may an edge start here?
    small: bool = True              # hollow arrowhead on out-edges
    fused: int = -1                 # fused computation index, for fusion instructions
    cluster_label: str = ""         # label of the fusion cluster
    callees: list[int] = field(default_factory=list)  # non-fusion called computations
    dot_id: str = ""                # unique node id: the name, or comp/name on a clash


@dataclass
class GraphComputation:
    comp: Computation
    idx: int
    kind: str                       # "entry", "fusion", "called", "trivial", "unused"
    fusion: int = -1                # the fusion instruction (node idx) calling it
    nodes: list[int] = field(default_factory=list)   # post order
    root: int = -1
    trivial: str | None = None


class GraphModel:
    """Per-instruction drawing decisions for a whole module (linear in its size)."""

    def __init__(self, module: HloModule, include_fused: bool = True):
        self.module = module
        self.include_fused = include_fused
        self.comps: list[GraphComputation] = []
        self.nodes: list[GraphNode] = []
        self.node_of: dict[Instruction, GraphNode] = {}
        self._ids: set[str] = set()
        self.comp_of: dict[Computation, GraphComputation] = {}
        self._callers = module.callers()
        fusion_callers: dict[Computation, Instruction] = {}
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode == "fusion" and inst.called:
                    fusion_callers.setdefault(inst.called[0], inst)
        self._fusion_callers = fusion_callers
        order = module.computation_post_order()
        order = [c for c in order if c is not module.entry] + \
            ([module.entry] if module.entry is not None else [])
        order.reverse()  # entry first: the page's selector lists it first
        for comp in order:
            if comp in fusion_callers and not include_fused:
                continue
            self._add_computation(comp)
        for gc in self.comps:
            if gc.comp in fusion_callers:
                gc.fusion = self.node_of[fusion_callers[gc.comp]].idx \
                    if fusion_callers[gc.comp] in self.node_of else -1
        for node in self.nodes:
            self._decide_merging(node)
        for node in self.nodes:
            self._style(node)

    # ---- construction -----------------------------------------------------------------
    def _add_computation(self, comp: Computation) -> None:
        gc = GraphComputation(comp, len(self.comps), self._kind(comp))
        if gc.kind != "fusion":
            gc.trivial = match_trivial_computation(comp)
            if gc.trivial and gc.kind == "called":
                gc.kind = "trivial"
        self.comps.append(gc)
        self.comp_of[comp] = gc
        for inst in comp.post_order():
            node = GraphNode(len(self.nodes), inst, gc.idx, dot_id=self._unique_id(inst, comp))
            self.nodes.append(node)
            self.node_of[inst] = node
            gc.nodes.append(node.idx)
        gc.root = self.node_of[comp.root].idx if comp.root is not None else -1

    def _unique_id(self, inst: Instruction, comp: Computation) -> str:
        """Names need only be unique within a computation; DOT ids must be unique."""
        candidate = inst.name
        if candidate in self._ids:
            candidate = f"{comp.name}/{inst.name}"
            k = 1
            while candidate in self._ids:
                k += 1
                candidate = f"{comp.name}/{inst.name}#{k}"
        self._ids.add(candidate)
        return candidate

    def _kind(self, comp: Computation) -> str:
        if comp is self.module.entry:
            return "entry"
        if comp in self._fusion_callers:
            return "fusion"
        return "called" if self._callers.get(comp) else "unused"

    def fusion_instruction(self, comp: Computation) -> Instruction | None:
        return self._fusion_callers.get(comp)

    def fused_parameter_constant(self, inst: Instruction) -> Instruction | None:
        """XLA's TryGetFusionParameterConstant."""
        if inst.opcode != "parameter" or inst.parent is None:
            return None
        fusion = self._fusion_callers.get(inst.parent)
        if fusion is None or inst.parameter_number >= len(fusion.operands):
            return None
        operand = fusion.operands[inst.parameter_number]
        return operand if operand.opcode == "constant" else None

    def is_fused_broadcast_of_scalar_constant(self, inst: Instruction) -> bool:
        return (inst.opcode == "broadcast" and inst.parent in self._fusion_callers
                and len(inst.operands) == 1 and inst.operands[0].opcode == "constant"
                and is_effective_scalar(inst.operands[0].shape))

    def _decide_merging(self, node: GraphNode) -> None:
        inst = node.inst
        is_root = inst.is_root
        node.merged = self._should_merge(inst)
        node.hidden = (inst.opcode == "constant"
                       or self.is_fused_broadcast_of_scalar_constant(inst)) and not is_root
        node.edge_source = not (node.merged or inst.opcode == "constant"
                                or self.is_fused_broadcast_of_scalar_constant(inst))

    def _should_merge(self, inst: Instruction) -> bool:
        """XLA's ShouldMergeIntoUsers (with every instruction shown)."""
        if inst.opcode == "get-tuple-element" and not inst.is_root:
            return True
        if self.fused_parameter_constant(inst) is not None:
            return True
        if inst.opcode == "parameter" and inst.shape.is_tuple() \
                and inst.parent not in self._fusion_callers:
            users = inst.users
            return len(users) > 3 and all(u.opcode == "get-tuple-element" for u in users)
        return False

    # ---- appearance -------------------------------------------------------------------
    def _style(self, node: GraphNode) -> None:
        inst = node.inst
        node.small = is_small(inst.shape)
        node.scheme = self.color(inst)
        node.node_shape = "ellipse" if inst.opcode == "while" else "rect"
        node.tooltip = self.metadata_tooltip(inst)
        node.fused = self.fused_index(inst)
        node.callees = self.callees(inst)
        parts = [self.node_title(inst)]
        for extra in (self.trivial_subcomputation_text(inst), self.extra_info(inst, True),
                      self.inlined_operands(inst)):
            if extra:
                parts.append(extra)
        node.label = "<br/>".join(parts)
        if inst.opcode == "fusion":
            node.cluster_label = self.fusion_cluster_label(inst)

    def fused_index(self, inst: Instruction) -> int:
        """The index of the computation a fusion instruction calls, when drawn; else -1."""
        if inst.opcode == "fusion" and inst.called and inst.called[0] in self.comp_of:
            return self.comp_of[inst.called[0]].idx
        return -1

    def callees(self, inst: Instruction) -> list[int]:
        """Indices of the non-fusion, non-trivial computations ``inst`` calls (a while's
        body first: double-click opens it)."""
        if not inst.called or inst.opcode == "fusion":
            return []
        out = [self.comp_of[c].idx for c in inst.called
               if c in self.comp_of and self.comp_of[c].kind != "trivial"]
        if inst.opcode == "while":
            out.reverse()
        return out

    def color(self, inst: Instruction, _depth: int = 0) -> str:
        """XLA's GetInstructionColor (default, not sharding, colouring)."""
        parameter_scheme = "orange" if is_small(inst.shape) else "dark_orange"
        for op in inst.operands:
            if op.opcode == "parameter" and self._should_merge(op) \
                    and self.fused_parameter_constant(op) is None:
                return parameter_scheme
        opcode = inst.opcode
        if opcode == "parameter":
            return parameter_scheme
        if opcode == "bitcast":
            return "green" if inst.parent in self._fusion_callers else "white"
        if opcode in ("async-start", "async-update", "async-done") and _depth < 8:
            wrapped = _async_wrapped(inst)
            return self.color(wrapped, _depth + 1) if wrapped is not None else "white"
        return OPCODE_SCHEME.get(opcode, "white")

    def node_title(self, inst: Instruction) -> str:
        """XLA's GetInstructionNodeLabel (newest: name first, then the opcode)."""
        if inst.opcode == "parameter":
            return f"<b>Parameter {inst.parameter_number}</b>"
        if inst.name.startswith(inst.opcode):
            return f"<b>{html_escape(inst.name)}</b>"
        extended = inst.opcode + (f":{inst.fusion_kind}" if inst.opcode == "fusion" else "")
        return f"<b>{html_escape(inst.name)}</b><br/>{html_escape(extended)}"

    def metadata_tooltip(self, inst: Instruction) -> str:
        md = parse_metadata(inst.attrs.get("metadata"))
        lines = []
        if md.get("op_name"):
            lines.append(md["op_name"])
        if md.get("op_type"):
            lines.append(f"op_type: {md['op_type']}")
        if md.get("source_file") and md.get("source_line", "0") != "0":
            lines.append(f"source: {md['source_file']}:{md['source_line']}")
        return "\n".join(lines)

    def _attribute_lines(self, inst: Instruction) -> list[str]:
        """XLA's ExtraAttributesToString without called computations or metadata."""
        skip = set(CALLED_COMPUTATION_ATTRS) | {"metadata", "backend_config"}
        if isinstance(inst.called_attr, tuple):
            skip.update(inst.called_attr)
        elif inst.called_attr:
            skip.add(inst.called_attr)
        lines = []
        for name, raw in inst.attrs.items():
            if name in skip:
                continue
            if name == "control-predecessors":
                if not inst.control_predecessors:
                    continue
                raw = "{" + ", ".join("%" + p.name for p in inst.control_predecessors) + "}"
            line = f"{name}={raw}"
            if line.startswith(_TRUNCATED_ATTRS) or len(line) > MAX_ATTR_CHARS:
                line = _truncate(line, MAX_ATTR_CHARS)
            if name == "feature_group_count":
                lines.append(f"<b>{html_escape(line)}</b>")
            else:
                lines.append(html_escape(line))
        return lines

    def extra_info(self, inst: Instruction, with_shape: bool) -> str:
        """XLA's GetInstructionNodeExtraInfo."""
        lines = []
        if inst.opcode == "parameter" and inst.parent is not None:
            callers = self._callers.get(inst.parent, [])
            if len(callers) == 1 and callers[0].opcode == "call" \
                    and inst.parameter_number < len(callers[0].operands):
                producer = _interesting_producer(callers[0].operands[inst.parameter_number])
                where = ("the ENTRY computation" if producer.parent is self.module.entry
                         else html_escape(producer.parent.name if producer.parent else "?"))
                lines.append(f"<i>from {html_escape(producer.name)} in {where}</i>")
        lines.extend(self._attribute_lines(inst))
        if with_shape:
            multidim = is_multidimensional(inst.shape)
            text = human_string(inst.shape, layout=inst.opcode != "tuple" and multidim)
            lines.append(html_escape(_truncate(text, MAX_SHAPE_CHARS)))
        return "<br/>".join(lines)

    def _constant_text(self, constant: Instruction, shape: Shape) -> str:
        """XLA's stringify_constant (``shape`` differs for broadcasts of scalars)."""
        if shape.is_array() and shape.num_elements() == 0:
            return f"{{}} ({human_string(constant.shape)})"
        if shape.is_array() and constant.shape.is_array() \
                and constant.shape.num_elements() <= MAX_LITERAL_ELEMENTS:
            try:
                literal = constant.literal
                text = None if literal.elided else literal.to_text()
            except Exception:  # an unparsable payload: fall back to the name
                text = None
            if text is not None and len(text) <= MAX_LITERAL_CHARS:
                return f"{human_string(shape)} {text}"
        name = constant.name if constant.name.startswith("constant") \
            else f"constant {constant.name}"
        return f"{name} {human_string(shape)}"

    def inlined_operands(self, inst: Instruction) -> str:
        """XLA's GetInstructionNodeInlinedOperands."""
        lines = []
        count = len(inst.operands)
        for i, operand in enumerate(inst.operands):
            text = None
            if operand.opcode == "constant":
                text = self._constant_text(operand, operand.shape)
            elif self.is_fused_broadcast_of_scalar_constant(operand):
                text = self._constant_text(operand.operands[0], operand.shape)
            elif self._should_merge(operand):
                if operand.opcode == "parameter":
                    constant = self.fused_parameter_constant(operand)
                    text = (self._constant_text(constant, constant.shape) if constant
                            else f"Parameter {operand.parameter_number}")
                elif operand.opcode == "get-tuple-element":
                    text = (f"tuple-element {operand.attr('index', 0)} of "
                            f"{operand.operands[0].name} {human_string(operand.shape, True)}")
                else:
                    text = operand.name
            if text is not None:
                head = f"operand {i}" if count > 1 else "operand"
                lines.append(f"<b>{head}</b> = {html_escape(text)}")
            if len(lines) == MAX_OPERANDS_SHOWN and i < count - 1:
                lines.append("...")
                break
        if inst.opcode == "parameter" and inst.parent in self._fusion_callers:
            fusion = self._fusion_callers[inst.parent]
            if inst.parameter_number < len(fusion.operands):
                src = fusion.operands[inst.parameter_number]
                if src.opcode == "get-tuple-element":
                    lines.append(html_escape(
                        f"tuple-element {src.attr('index', 0)} of {src.operands[0].name} "
                        f"{human_string(src.shape, True)}"))
        return "<br/>".join(lines)

    def trivial_subcomputation_text(self, inst: Instruction) -> str:
        if inst.opcode == "fusion":
            return ""
        lines = []
        for i, comp in enumerate(inst.called):
            gc = self.comp_of.get(comp)
            kind = gc.trivial if gc is not None else match_trivial_computation(comp)
            if not kind:
                continue
            head = "Subcomputation" if len(inst.called) == 1 else f"Subcomputation {i}"
            lines.append(f"{head}: <b>{html_escape(kind)}</b>")
        return "<br/>".join(lines)

    def fusion_category(self, inst: Instruction) -> str:
        kind = inst.fusion_kind
        if kind in _FUSION_CATEGORY:
            return _FUSION_CATEGORY[kind]
        body = inst.called[0] if inst.called else None
        elementwise = body is not None and all(
            i.opcode in ("parameter", "constant") or is_elementwise(i.opcode)
            or self.is_fused_broadcast_of_scalar_constant(i) for i in body.instructions)
        return "elementwise fusion" if elementwise else "non-elementwise fusion"

    def fusion_cluster_label(self, inst: Instruction) -> str:
        label = (f"Fused expression for <b>{html_escape(inst.name)}</b><br/>"
                 f"{html_escape(self.fusion_category(inst))}")
        extra = self.extra_info(inst, with_shape=False)
        return label + ("<br/>" + extra if extra else "")

    def subcomputation_cluster_label(self, caller: Instruction, comp: Computation) -> str:
        return (f"Subcomputation for <b>{html_escape(caller.name)}</b><br/>"
                f"{html_escape(comp.name)}")

    def edge_shape_text(self, inst: Instruction) -> str:
        """The shape printed on an edge leaving ``inst`` (no layout, at most 64 chars)."""
        return _truncate(human_string(inst.shape), MAX_SHAPE_CHARS)


def _interesting_producer(inst: Instruction) -> Instruction:
    """XLA's GetInterestingProducer: look through bitcast/copy/GTE/tuple/call."""
    tuple_index: list[int] = []
    for _ in range(10_000):
        op = inst.opcode
        if op in ("bitcast", "copy") and inst.operands:
            inst = inst.operands[0]
        elif op == "get-tuple-element" and inst.operands:
            tuple_index.append(inst.attr("index", 0))
            inst = inst.operands[0]
        elif op == "tuple" and tuple_index:
            i = tuple_index.pop()
            if i >= len(inst.operands):
                return inst
            inst = inst.operands[i]
        elif op == "call" and inst.called and inst.called[0].root is not None:
            inst = inst.called[0].root
        else:
            return inst
    return inst


def _async_wrapped(inst: Instruction) -> Instruction | None:
    """The instruction an async-start/update/done wraps (root of its computation)."""
    seen = 0
    while inst.opcode in ("async-update", "async-done") and inst.operands and seen < 64:
        if inst.called and inst.called[0].root is not None:
            return inst.called[0].root
        inst = inst.operands[0]
        seen += 1
    if inst.called and inst.called[0].root is not None:
        return inst.called[0].root
    return None
