"""HLO modules as Graphviz DOT, drawn like XLA's ``--xla_dump_hlo_as_dot``.

:func:`module_to_dot` serializes the entry computation as XLA's HloDotDumper does:
fusions as clusters holding their fused computation (``top_level=True`` collapses them),
non-trivial called computations as "Subcomputation for ..." clusters with a dashed edge
to their caller, a ROOT tag, operand-index head labels, dotted gray ``ctrl`` edges, and
(our addition) the operand shape on every edge.  How each instruction looks is decided by
:class:`~hlo_opt.dump.graph_model.GraphModel`.

Node ids are the instruction names, quoted (``computation/name`` when two computations
use one name), so a DOT file diffs cleanly between passes.
"""
from __future__ import annotations

from ..ir.computation import Computation
from ..ir.instruction import Instruction
from ..ir.module import HloModule
from .graph_model import (SCHEMES, GraphModel, dot_quote, html_escape,  # noqa: F401
                          parse_metadata)

FUSION_CLUSTER_STYLE = 'style="rounded,filled,bold"; fillcolor="#f5f5f5"; color="#c2c2c2"'
SUBCOMPUTATION_CLUSTER_STYLE = 'style="rounded"; color="black"'


def node_attrs(label: str, node_shape: str, tooltip: str, scheme: str) -> str:
    style, fill, stroke, font = SCHEMES[scheme]
    return (f'label=<{label}>, shape={node_shape}, tooltip={dot_quote(tooltip or " ")}, '
            f'style="{style}", fontcolor="{font}", color="{stroke}", fillcolor="{fill}"')


def edge_attrs(small: bool, src: str, dst: str, operand_index: int | None, shape_text: str,
               control: bool = False) -> str:
    """``arrowhead`` by size, tooltip, operand head label, the shape as the edge label."""
    if control:
        return (f'arrowhead={"empty" if small else "normal"} '
                f'tooltip={dot_quote(src + " -> " + dst)} style="dotted" color="gray" '
                f'label="ctrl"')
    text = (f'arrowhead={"empty" if small else "normal"} '
            f'tooltip={dot_quote(src + " -> " + dst + ": " + shape_text)}')
    if shape_text:
        text += f' xlabel={dot_quote(shape_text)}'
    if operand_index is not None:
        text += f' headlabel="{operand_index}" labeldistance=2'
    return text


GRAPH_DEFAULTS = ('fontname = "Helvetica";\n'
                  'node [fontname="Helvetica", fontsize=11];\n'
                  'edge [fontname="Helvetica", fontsize=9, fontcolor="#546e7a"];\n')


class DotWriter:
    """XLA's HloDotDumper over a :class:`GraphModel`, for one root computation."""

    def __init__(self, model: GraphModel, comp: Computation, show_fusions: bool = True,
                 show_subcomputations: bool = True):
        self.model = model
        self.root_comp = comp
        self.show_fusions = show_fusions
        self.show_subcomputations = show_subcomputations
        self.edges: list[str] = []
        self.dumped_clusters: set[Computation] = set()

    def _show_fusion_body(self, inst: Instruction) -> bool:
        return (self.show_fusions and inst.opcode == "fusion" and bool(inst.called)
                and inst.called[0] in self.model.comp_of)

    def _show_subcomputation(self, comp: Computation) -> bool:
        gc = self.model.comp_of.get(comp)
        if gc is None or gc.kind == "fusion":
            return False
        return self.show_subcomputations and gc.trivial is None

    def _id(self, inst: Instruction) -> str:
        return dot_quote(self.model.node_of[inst].dot_id)

    def _drawn(self, inst: Instruction) -> bool:
        node = self.model.node_of.get(inst)
        return (node is not None and not node.hidden and not node.merged
                and not self._show_fusion_body(inst))

    def node_for_edge(self, inst: Instruction) -> Instruction:
        if inst.opcode == "get-tuple-element" and inst.operands:
            inst = inst.operands[0]
        while self._show_fusion_body(inst):
            inst = inst.called[0].root
        return inst

    def dump(self, label: str) -> str:
        body = self.dump_computation(self.root_comp)
        body += self.dump_root_tag()
        comp = self.root_comp
        graph_label = f"{html_escape(label)}<br/>Computation {html_escape(comp.name)}"
        fusion = self.model.fusion_instruction(comp)
        if fusion is not None:
            graph_label += f" (in fusion instruction {html_escape(fusion.name)})"
        elif comp is self.model.module.entry:
            graph_label += "<br/>ENTRY computation"
        header = (f"digraph G {{\nrankdir = TB;\ncompound = true;\n"
                  f"label = <<b>{graph_label}</b>>;\nlabelloc = t;\ntooltip = \" \";\n"
                  + GRAPH_DEFAULTS + "\n")
        return header + body + "\n".join(self.edges) + "\n}\n"

    def dump_computation(self, comp: Computation) -> str:
        out = []
        for inst in comp.post_order():
            for callee in inst.called:
                if inst.opcode == "fusion" and self._show_fusion_body(inst):
                    out.append(self.dump_fusion_cluster(inst))
                elif inst.opcode != "fusion" and self._show_subcomputation(callee):
                    out.append(self.dump_subcomputation(callee, inst))
            out.append(self.dump_instruction(inst))
        return "".join(out)

    def dump_fusion_cluster(self, fusion: Instruction) -> str:
        comp = fusion.called[0]
        if comp in self.dumped_clusters:
            return ""
        self.dumped_clusters.add(comp)
        return self._cluster(comp, FUSION_CLUSTER_STYLE, self.model.node_of[fusion].cluster_label)

    def _cluster(self, comp: Computation, style: str, label: str) -> str:
        name = "cluster_" + comp.name
        return (f"subgraph {dot_quote(name)} {{\n{style};\nlabel = <{label}>;\nlabelloc = t;\n"
                f"tooltip = \" \";\n{self.dump_computation(comp)}}}  // {_comment(name)}\n\n")

    def dump_subcomputation(self, comp: Computation, caller: Instruction) -> str:
        src = self.node_for_edge(comp.root)
        if self._drawn(src) and self._drawn(caller):
            self.edges.append(
                f"{self._id(src)} -> {self._id(caller)} "
                f"[ltail={dot_quote('cluster_' + comp.name)}, style=\"dashed\" "
                f"tooltip={dot_quote(comp.name + ' -> ' + caller.name)}];")
        if comp in self.dumped_clusters:
            return ""
        self.dumped_clusters.add(comp)
        return self._cluster(comp, SUBCOMPUTATION_CLUSTER_STYLE,
                             self.model.subcomputation_cluster_label(caller, comp))

    def dump_instruction(self, inst: Instruction) -> str:
        node = self.model.node_of[inst]
        if node.hidden or node.merged or self._show_fusion_body(inst):
            return ""
        self.add_incoming_edges(inst)
        attrs = node_attrs(node.label, node.node_shape, node.tooltip, node.scheme)
        return f"{self._id(inst)} [{attrs}];\n"

    def add_incoming_edges(self, inst: Instruction) -> None:
        model = self.model

        def add_edge(src: Instruction, index: int | None, shape_of: Instruction,
                     control: bool = False) -> None:
            src = self.node_for_edge(src)
            node = model.node_of.get(src)
            if node is None or not node.edge_source or not self._drawn(src):
                return
            self.edges.append(f"{self._id(src)} -> {self._id(inst)} ["
                              + edge_attrs(node.small, src.name, inst.name, index,
                                           model.edge_shape_text(shape_of), control) + "];")

        fusion = model.fusion_instruction(inst.parent) if inst.opcode == "parameter" else None
        if fusion is not None:
            if inst.parent is not self.root_comp \
                    and inst.parameter_number < len(fusion.operands):
                operand = fusion.operands[inst.parameter_number]
                add_edge(operand, None, operand)
            return
        many = len(inst.operands) > 1
        for i, operand in enumerate(inst.operands):
            add_edge(operand, i if many else None, operand)
        for pred in inst.control_predecessors:
            add_edge(pred, None, pred, control=True)

    def dump_root_tag(self) -> str:
        root = self.root_comp.root
        if root is None:
            return ""
        src = self.node_for_edge(root)
        if src.opcode == "constant" or not self._drawn(src) \
                or self.model.is_fused_broadcast_of_scalar_constant(src):
            return ""
        tag = dot_quote("ROOT:" + self.root_comp.name)
        self.edges.append(f"{self._id(src)} -> {tag} [tooltip=\" \"];")
        return f"{tag} [{node_attrs('ROOT', 'circle', ' ', 'brown')}];\n"


def _comment(text: str) -> str:
    return text.replace("\n", " ")


def computation_to_dot(model: GraphModel, comp: Computation, label: str,
                       top_level: bool = False) -> str:
    return DotWriter(model, comp, show_fusions=not top_level).dump(label)


def module_to_dot(module: HloModule, top_level: bool = False) -> str:
    """The entry computation as DOT, drawn like XLA's ``--xla_dump_hlo_as_dot``.

    ``top_level=True`` draws fusions as single nodes (XLA's ``.top_level`` variant).
    """
    if module.entry is None:
        raise ValueError(f"module {module.name} has no entry computation")
    model = GraphModel(module, include_fused=not top_level)
    return computation_to_dot(model, module.entry, module.name, top_level)
