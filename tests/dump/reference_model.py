"""The page model (comps[] and insts[], fields listed at the top of hlo_graph.js) as
:class:`hlo_opt.dump.graph_model.GraphModel` decides it: what hlo_model.js must build
from the text a page ships."""
from __future__ import annotations

from hlo_opt.dump.graph_model import GraphModel
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.module import HloModule


def computation_header(comp: Computation) -> str:
    params = ", ".join(f"{p.name}: {p.shape.to_text(layout=False)}"
                       for p in comp.parameters if p is not None)
    root = comp.root.shape.to_text(layout=False) if comp.root is not None else "()"
    head = ("ENTRY " if comp.is_entry else "") + f"%{comp.name} ({params}) -> {root}"
    if comp.execution_thread is not None:
        head += f", execution_thread=\"{comp.execution_thread}\""
    return head + " {"


def reference_model(module: HloModule, top_level: bool = False) -> dict:
    model = GraphModel(module, include_fused=not top_level)
    node_of = model.node_of
    callers: dict[int, list[int]] = {}
    insts = []
    for node in model.nodes:
        inst = node.inst
        rec = {"n": inst.name, "op": inst.opcode, "l": node.label, "s": node.scheme,
               "txt": inst.to_text(large_constants=False), "c": node.comp,
               "o": [node_of[o].idx for o in inst.operands if o in node_of]}
        if node.node_shape != "rect":
            rec["sh"] = node.node_shape
        if node.tooltip:
            rec["t"] = node.tooltip
        if node.merged:
            rec["m"] = 1
        if node.hidden:
            rec["h"] = 1
        if not node.edge_source:
            rec["ne"] = 1
        if not node.small:
            rec["b"] = 1
        if node.fused >= 0:
            rec["cl"] = node.cluster_label
            rec["f"] = node.fused
        if inst.opcode == "parameter":
            rec["p"] = inst.parameter_number
        shape_text = model.edge_shape_text(inst)
        if shape_text:
            rec["es"] = shape_text
        if node.dot_id != inst.name:
            rec["d"] = node.dot_id
        if inst.control_predecessors:
            rec["k"] = [node_of[p].idx for p in inst.control_predecessors if p in node_of]
        if node.callees:
            rec["cs"] = node.callees
            for c in node.callees:
                callers.setdefault(c, []).append(node.idx)
        insts.append(rec)
    comps = []
    for gc in model.comps:
        rec = {"n": gc.comp.name, "k": gc.kind, "r": gc.root, "i": gc.nodes,
               "h": computation_header(gc.comp)}
        if gc.fusion >= 0:
            rec["f"] = gc.fusion
        if gc.idx in callers:
            rec["ca"] = callers[gc.idx]
        if gc.trivial:
            rec["tr"] = gc.trivial
        comps.append(rec)
    return {"comps": comps, "insts": insts}
