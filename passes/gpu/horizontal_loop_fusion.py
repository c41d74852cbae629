"""``horizontal_loop_fusion``: XLA's GpuHorizontalLoopFusion.

Small, independent loop fusions (and elementwise ops) that feed the same consumer are
launched as one kernel: their bodies go into one ``horizontally_fused_computation`` whose
outputs are flattened, concatenated per output position and sliced back apart (XLA's
input-slices fusion); outside, each old result becomes a get-tuple-element (plus a
bitcast back to its shape).  Candidates must have the consumer as their only non-root
user, at most 128x2048 elements, at most 30 fused instructions, row-major layouts, one
output type, and share no parameter with other candidates; they are grouped by output
type, output count and instruction count, at most 32 per kernel and within CUDA's
parameter space.  Runs on the entry computation, as XLA does.
"""
from __future__ import annotations

from hlo_opt.analysis.layout import is_monotonic_dim0_major
from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape

from hlo_opt.analysis.gpu.fusible import (fused_instructions, is_consumer_the_only_non_root_user,
                                          is_elementwise, is_loop_fusion)
from hlo_opt.rewrite.fusion import create_fusion
from hlo_opt.rewrite.graph import (add_computation, add_gte, computation_batch, control_tainted,
                                   drop_computation, remove)

SHAPE_THRESHOLD = 128 * 2048
INSTR_COUNT_THRESHOLD = 30
MAX_FUSION_BATCH_SIZE = 32
MAX_CUDA_PARAM_SIZE = 4000


def _element_types(inst) -> set:
    return {o.shape.element_type for o in inst.fusion_outputs()}


def _is_fusible_candidate(inst: Instruction, tainted: set = frozenset()) -> bool:
    if inst.control_predecessors or inst in tainted:
        return False
    if is_elementwise(inst) and inst.opcode != "fusion" and inst.operands:
        return True
    if not is_loop_fusion(inst):
        return False
    return len(_element_types(inst)) == 1


def _is_profitable(inst: Instruction) -> bool:
    root = inst.called[0].root if inst.opcode == "fusion" else inst
    shape = root.operands[0].shape if root.opcode == "tuple" else root.shape
    if not shape.is_array() or shape.num_elements() > SHAPE_THRESHOLD:
        return False
    if inst.opcode == "fusion" and len(fused_instructions(inst)) + len(
            inst.called[0].parameters) > INSTR_COUNT_THRESHOLD:
        return False
    return True


def _row_major_only(inst: Instruction) -> bool:
    if inst.opcode != "fusion":
        return inst.shape.is_array() and is_monotonic_dim0_major(inst.shape)
    for i in inst.called[0].instructions:
        if i.shape.is_array() and not is_monotonic_dim0_major(i.shape):
            return False
    return True


def _shares_parameter(inst, candidates) -> bool:
    for o in inst.operands:
        if o.opcode == "parameter" and any(u is not inst and u in candidates for u in o.users):
            return True
    return False


def _output_count(inst) -> int:
    return len(inst.fusion_outputs())


def _instr_count(inst) -> int:
    return len(inst.called[0].instructions) if inst.opcode == "fusion" else 1


def _latest_non_gte_ancestor(inst):
    while inst.opcode == "get-tuple-element":
        inst = inst.operands[0]
    return inst


def _candidates(consumer, tainted: set = frozenset()) -> list:
    seen: dict = {}
    for o in consumer.operands:
        p = _latest_non_gte_ancestor(o)
        if _is_fusible_candidate(p, tainted) and p not in seen:
            seen[p] = None
    pool = set(seen)
    out = []
    for inst in seen:
        if not is_consumer_the_only_non_root_user(inst, consumer):
            continue
        if not _is_profitable(inst) or not _row_major_only(inst):
            continue
        if _shares_parameter(inst, pool):
            continue
        out.append(inst)
    out.sort(key=lambda i: (sorted(_element_types(i)), _output_count(i), _instr_count(i)))
    return out


def _spans(cands: list):
    pos = 0
    while pos < len(cands):
        left = pos
        right = pos + 1
        io = 0
        first_type = _element_types(cands[left])
        while right < len(cands):
            c = cands[right]
            if _element_types(c) != first_type or _output_count(c) != _output_count(cands[left]) \
                    or _instr_count(c) != _instr_count(cands[left]):
                break
            if right - left >= MAX_FUSION_BATCH_SIZE:
                break
            io += len(c.operands) + _output_count(c)
            if io * 8 >= MAX_CUDA_PARAM_SIZE:
                break
            right += 1
        pos = right
        yield cands[left:right]


def _fuse(comp: Computation, fusions: list) -> Instruction:
    module = comp.module
    fc = Computation("horizontally_fused_computation")
    fc.execution_thread = comp.execution_thread
    add_computation(module, fc)
    bound = []
    clone_map: dict = {}
    n = 0
    for i, f in enumerate(fusions):
        for j, old in enumerate(f.called[0].parameters):
            p = fc.add("parameter", f.operands[j].shape, name=f"param_{i}_{j}", payload=str(n))
            n += 1
            clone_map[old] = p
            bound.append(f.operands[j])
    metadata = None
    for f in fusions:
        body = f.called[0]
        for old in body.post_order():
            if old.opcode == "parameter" or (old.opcode == "tuple" and old is body.root):
                continue
            attrs = {k: v for k, v in old.attrs.items() if k != "control-predecessors"}
            new = Instruction(old.opcode, old.shape, [clone_map[o] for o in old.operands],
                              attrs, old.name, old.payload, old.called, old.called_attr)
            new.cache_literal(old.cached_literal)
            fc.add_instruction(new)
            clone_map[old] = new
            metadata = old.attrs.get("metadata", metadata)
    n_out = _output_count(fusions[0])
    concatenated = []
    for k in range(n_out):
        parts = []
        for f in fusions:
            v = clone_map[f.fusion_outputs()[k]]
            if v.shape.rank != 1:
                flat = Shape.array(v.shape.element_type, (v.shape.num_elements(),))
                v = fc.add("reshape", flat, [v], name="reshape")
            parts.append(v)
        total = sum(p.shape.dims[0] for p in parts)
        concatenated.append(fc.add("concatenate",
                                   Shape.array(parts[0].shape.element_type, (total,)),
                                   parts, name="concatenate", attrs={"dimensions": "{0}"}))
    slices = [None] * (n_out * len(fusions))
    for k, cat in enumerate(concatenated):
        start = 0
        for j, f in enumerate(fusions):
            size = f.fusion_outputs()[k].shape.num_elements()
            slices[n_out * j + k] = fc.add(
                "slice", Shape.array(cat.shape.element_type, (size,)), [cat], name="slice",
                attrs={"slice": f"{{[{start}:{start + size}]}}"})
            start += size
    attrs = {"metadata": metadata} if metadata else None
    fc.root = fc.add("tuple", Shape.tuple(s.shape for s in slices), slices, name="tuple",
                     attrs=attrs)
    hfusion = Instruction("fusion", fc.root.shape, bound, {"kind": "kInput", "calls": ""},
                          "fusion", called=[fc], called_attr="calls")
    comp.add_instruction(hfusion)
    total = 0
    for f in fusions:
        outs = []
        for k in range(n_out):
            out_shape = f.fusion_outputs()[k].shape
            g = add_gte(comp, hfusion, total)
            total += 1
            if out_shape.rank != 1:
                g = comp.add("bitcast", out_shape, [g], name="bitcast")
            outs.append(g)
        value = outs[0] if len(outs) == 1 else comp.add(
            "tuple", Shape.tuple(o.shape for o in outs), outs, name="tuple")
        called = f.called[0]
        f.replace_all_uses_with(value)
        remove(comp, f)
        drop_computation(module, called)
    _deduplicate_operands(hfusion)
    return hfusion


def _deduplicate_operands(fusion: Instruction) -> None:
    from hlo_opt.rewrite.graph import remove_parameter
    fc = fusion.called[0]
    first: dict = {}
    i = 0
    while i < len(fusion.operands):
        o = fusion.operands[i]
        if o in first:
            keep = fc.parameters[first[o]]
            dup = fc.parameters[i]
            dup.replace_all_uses_with(keep)
            remove_parameter(fc, dup)
            fusion.operands.pop(i)
            continue
        first[o] = i
        i += 1


class GpuHorizontalLoopFusion:
    name = "horizontal_loop_fusion"

    def run(self, module) -> bool:
        with computation_batch(module):
            return self._run(module)

    def _run(self, module) -> bool:
        comp = module.entry
        changed = False
        tainted = control_tainted(comp)
        for consumer in reversed(comp.post_order()):
            if consumer.parent is not comp:
                continue
            for span in _spans(_candidates(consumer, tainted)):
                if len(span) < 2:
                    continue
                fusions = [f if f.opcode == "fusion" else create_fusion(comp, f, "kLoop")
                           for f in span]
                _fuse(comp, fusions)
                changed = True
        return changed
