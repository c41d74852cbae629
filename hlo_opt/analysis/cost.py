"""The cost model: flops, transcendentals and bytes read / written per instruction, per
fusion and per module (in the spirit of XLA's HloCostAnalysis / GpuHloCostAnalysis).

* An unfused instruction reads its operands and writes its result, with XLA's exceptions:
  slices, dynamic slices and gathers read only what they produce; a dynamic-update-slice
  updates in place (reads and writes the update); bitcasts, tuples, get-tuple-element,
  parameters and constants move nothing.
* A fusion reads each operand once through its fused parameter (slices of it: only the
  sliced part, XLA's FusionParameterReadBytes) and writes its outputs; its flops are the
  sum over the fused instructions.
* ``operand_utilization(inst, i)``: how many times each element of operand ``i`` is read
  to produce the result (1 for elementwise uses, out/in for broadcasts, < 1 for slices,
  the window for reduce-window), propagated through fused computations.

``module_cost(module)`` adds up the kernel-level instructions of every computation that
runs as kernels (not fused computations, not the scalar computations of reduce/sort/...):
this is "bytes moved" in the kernel table.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.opcodes import FREE as FREE_OPCODES, TRANSCENDENTAL, ELEMENTWISE
from hlo_opt.ir.shape import Shape

__all__ = ["Cost", "CostCache", "FREE_OPCODES", "TRANSCENDENTAL", "fusion_param_read_bytes",
           "instruction_cost", "kernel_computations", "module_cost", "operand_utilization",
           "shape_bytes", "value_shape"]


@dataclass
class Cost:
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_written

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.flops + other.flops, self.transcendentals + other.transcendentals,
                    self.bytes_read + other.bytes_read,
                    self.bytes_written + other.bytes_written)

    def to_json(self) -> dict:
        return {"flops": self.flops, "transcendentals": self.transcendentals,
                "bytes_read": self.bytes_read, "bytes_written": self.bytes_written}


# Shapes are immutable and shared (the parser interns them by text), and the fusion
# passes ask the same few shapes for their size again and again: (bytes, elements) per
# shape object, keyed by id() with the shape itself in the entry (so the id cannot be
# reused while the entry lives).
_SHAPE_SIZES: dict = {}


def _shape_sizes(shape: Shape) -> tuple:
    entry = _SHAPE_SIZES.get(id(shape))
    if entry is None or entry[0] is not shape:
        if shape.element_type != "tuple":
            elements = shape.num_elements() if shape.is_array() else 0
        else:
            elements = sum(s.num_elements() for s in shape.leaves() if s.is_array())
        if len(_SHAPE_SIZES) >= 65536:
            _SHAPE_SIZES.clear()
        entry = _SHAPE_SIZES[id(shape)] = (shape, shape.byte_size(), elements)
    return entry


def shape_bytes(shape: Shape) -> int:
    if shape is None:
        return 0
    entry = _SHAPE_SIZES.get(id(shape))
    if entry is None or entry[0] is not shape:
        entry = _shape_sizes(shape)
    return entry[1]


def _elements(shape: Shape) -> int:
    entry = _SHAPE_SIZES.get(id(shape))
    if entry is None or entry[0] is not shape:
        entry = _shape_sizes(shape)
    return entry[2]


def value_shape(inst: Instruction) -> Shape:
    """The shape a library call produces, without the scratch / workspace buffers XLA
    appends as trailing tuple elements of cuBLAS and cuDNN custom-calls."""
    if inst.opcode == "custom-call" and inst.shape.is_tuple() and \
            inst.custom_call_target.startswith(("__cublas", "__cudnn")):
        return inst.shape.tuple_shapes[0]
    return inst.shape


def _scalar_computation_flops(comp) -> float:
    """Flops of one application of a scalar computation (reduce's to_apply ...)."""
    total = 0.0
    for i in comp.instructions:
        if i.opcode in ELEMENTWISE and i.opcode not in TRANSCENDENTAL:
            total += 1
    return max(total, 1.0)


def _dot_flops(out: Shape, lhs: Shape, contracting) -> float:
    k = 1
    for d in contracting:
        k *= lhs.dims[d]
    return 2.0 * _elements(out) * k


def _conv_flops(inst: Instruction, out: Shape) -> float:
    """2 x forward-output elements x (kernel window x input features per group); the
    labels of a cuDNN backward convolution describe its forward convolution."""
    labels = inst.attr("dim_labels")
    if labels is None:
        return 0.0
    target = inst.custom_call_target if inst.opcode == "custom-call" else ""
    if target == "__cudnn$convBackwardInput":
        kernel, fwd_out = inst.operands[1].shape, inst.operands[0].shape
    elif target == "__cudnn$convBackwardFilter":
        kernel, fwd_out = out, inst.operands[1].shape
    else:
        kernel, fwd_out = inst.operands[1].shape, out
    if not kernel.is_array():
        return 0.0
    per_output = kernel.dims[labels.kernel_input_feature]
    for d in labels.kernel_spatial:
        per_output *= kernel.dims[d]
    return 2.0 * _elements(fwd_out) * per_output


def _gemm_flops(inst: Instruction, out: Shape) -> float:
    raw = inst.attrs.get("backend_config", "")
    try:
        from hlo_opt.ir.attributes import parse_string
        cfg = json.loads(parse_string(raw.strip()) if raw.strip().startswith('"') else raw)
        dnums = cfg["gemm_backend_config"]["dot_dimension_numbers"]
        contracting = [int(x) for x in dnums.get("lhs_contracting_dimensions", [])]
    except (ValueError, KeyError, TypeError):
        return 0.0
    return _dot_flops(out, inst.operands[0].shape, contracting)


def _instruction_flops(inst: Instruction) -> tuple[float, float]:
    """(flops, transcendentals) of one unfused instruction."""
    op = inst.opcode
    out = inst.shape
    if op in ELEMENTWISE:
        n = _elements(out)
        return (0.0, float(n)) if op in TRANSCENDENTAL else (float(n), 0.0)
    if op == "dot":
        contracting = inst.dot_dimension_numbers.lhs_contracting_dims
        return _dot_flops(out, inst.operands[0].shape, contracting), 0.0
    if op == "convolution":
        return _conv_flops(inst, out), 0.0
    if op == "custom-call":
        target = inst.custom_call_target
        vs = value_shape(inst)
        if target.startswith("__cublas"):
            return _gemm_flops(inst, vs), 0.0
        if target.startswith("__cudnn$conv"):
            return _conv_flops(inst, vs), 0.0
        return 0.0, 0.0
    if op == "reduce":
        n_in = sum(_elements(o.shape) for o in inst.operands[:len(inst.operands) // 2])
        n_out = _elements(out)
        per = _scalar_computation_flops(inst.called[0]) if inst.called else 1.0
        return max(n_in - n_out, 0) * per, 0.0
    if op in ("reduce-window", "select-and-scatter"):
        window = inst.attr("window")
        size = 1
        if window is not None:
            for d in window.dims:
                size *= d.size
        per = _scalar_computation_flops(inst.called[0]) if inst.called else 1.0
        return _elements(out) * size * per, 0.0
    if op == "map":
        per = _scalar_computation_flops(inst.called[0]) if inst.called else 1.0
        return _elements(out) * per, 0.0
    if op == "concatenate":
        # GpuHloCostAnalysis::HandleConcatenate: a compare and branch per element, and
        # 400 when warps may cross an operand boundary (a non-major concat dimension
        # whose first operand is not a multiple of 32 long): tuned so that a concat is
        # not fused into a compute-heavy consumer (PriorityFusionTest.DontFuseConcat).
        dims = inst.dimensions
        dim = dims[0] if dims else 0
        per = 400.0 if dim > 0 and inst.operands[0].shape.dims[dim] % 32 else 6.0
        return per * _elements(out), 0.0
    return 0.0, 0.0


def _operand_read_bytes(inst: Instruction, i: int) -> float:
    op = inst.opcode
    operand = inst.operands[i]
    if op in ("slice", "dynamic-slice", "gather") and i == 0:
        return shape_bytes(inst.shape)
    if op == "dynamic-update-slice" and i == 0:
        return 0.0  # updated in place: only the update is written
    return shape_bytes(operand.shape)


def instruction_cost(inst: Instruction) -> Cost:
    """Cost of ``inst`` as one kernel (a fusion: the whole fused kernel)."""
    if inst.opcode == "fusion":
        return fusion_cost(inst)
    if inst.opcode in FREE_OPCODES:
        if inst.opcode == "constant":
            return Cost()
        return Cost()
    flops, trans = _instruction_flops(inst)
    read = 0  # sum(_operand_read_bytes(inst, i) ...), inlined: the same additions
    op = inst.opcode
    first = True
    for operand in inst.operands:
        if first:
            first = False
            if op in ("slice", "dynamic-slice", "gather"):
                read += shape_bytes(inst.shape)
                continue
            if op == "dynamic-update-slice":
                read += 0.0  # updated in place: only the update is written
                continue
        read += shape_bytes(operand.shape)
    if inst.opcode == "dynamic-update-slice":
        written = shape_bytes(inst.operands[1].shape)
    elif inst.opcode in ("while", "conditional", "call"):
        read, written = 0.0, 0.0  # their bodies are counted where they run
    else:
        written = shape_bytes(value_shape(inst))
    return Cost(flops, trans, float(read), float(written))


# ---- fusions ----------------------------------------------------------------------------

def fusion_param_read_bytes(param: Instruction) -> float:
    """XLA's FusionParameterReadBytes: bytes a fused parameter reads from memory."""
    size = 0.0
    seen_trivial = False
    full = shape_bytes(param.shape)
    for user in param.iter_users():
        op = user.opcode
        if op == "slice":
            size += shape_bytes(user.shape)
        elif op == "dynamic-slice":
            size += shape_bytes(user.shape) if user.operands[0] is param else full
        elif op == "dynamic-update-slice":
            size += shape_bytes(user.operands[1].shape) if user.operands[0] is param else full
        elif op in ("broadcast", "reshape"):
            size += full
        elif op == "gather" and user.operands[0] is param:
            size += shape_bytes(user.shape)
        elif not seen_trivial:
            seen_trivial = True
            size += full
    return size




def fusion_cost(fusion: Instruction) -> Cost:
    comp = fusion.fused_computation
    flops = trans = 0.0
    elementwise = ELEMENTWISE
    transcendental = TRANSCENDENTAL
    for inst in comp.iter_instructions():
        op = inst.opcode
        if op == "parameter":
            continue
        if op in elementwise:  # _instruction_flops, inlined for the common case
            entry = _SHAPE_SIZES.get(id(inst.shape))
            if entry is None or entry[0] is not inst.shape:
                entry = _shape_sizes(inst.shape)
            if op in transcendental:
                trans += float(entry[2])
            else:
                flops += float(entry[2])
            continue
        if op == "fusion":
            inner = fusion_cost(inst)
            f, t = inner.flops, inner.transcendentals
        else:
            f, t = _instruction_flops(inst)
        flops += f
        trans += t
    read = 0
    for p in comp.parameters:
        if p is not None:
            read += fusion_param_read_bytes(p)
    written = 0.0
    for out in fusion.fusion_outputs():
        if out.opcode == "dynamic-update-slice":
            written += shape_bytes(out.operands[1].shape)
        else:
            written += shape_bytes(out.shape)
    return Cost(flops, trans, read, written)


# ---- utilization --------------------------------------------------------------------------

# Opcodes whose operands are not simply read once per output element.
_UTILIZATION_OPCODES = frozenset({"broadcast", "slice", "dynamic-slice", "gather",
                                  "reduce-window", "pad", "fusion"})


def _own_operand_utilization(inst: Instruction, i: int) -> float:
    op = inst.opcode
    operand = inst.operands[i]
    if op not in _UTILIZATION_OPCODES:
        return 1.0
    n_in = max(_elements(operand.shape), 1)
    n_out = _elements(inst.shape)
    if op == "broadcast":
        return n_out / n_in
    if op in ("slice", "dynamic-slice", "gather") and i == 0:
        return min(n_out / n_in, 1.0)
    if op == "reduce-window" and i == 0:
        window = inst.attr("window")
        size = 1
        if window is not None:
            for d in window.dims:
                size *= d.size
        return max(n_out * size / n_in, 0.0)
    if op == "pad" and i == 1:
        return float(n_out)
    if op == "fusion":
        return fused_parameter_utilization(inst)[i]
    return 1.0


def fused_parameter_utilization(fusion: Instruction) -> list[float]:
    """Utilization of each fused parameter (:func:`fused_utilizations`)."""
    comp = fusion.fused_computation
    util = fused_utilizations(comp)
    return [util.get(p, 0.0) for p in comp.parameters]


def _passes_roots_through(inst: Instruction) -> bool:
    """Whether ``inst`` reads its operands element for element: an operand computed for
    it is computed once for every root it reaches that way (XLA: IsElementwise, a bitcast
    that keeps the shape, tuple, get-tuple-element)."""
    op = inst.opcode
    if op in ("tuple", "get-tuple-element") or inst.is_elementwise():
        return True
    if op == "bitcast":
        a, b = inst.operands[0].shape, inst.shape
        return a.dims == b.dims and a.effective_layout() == b.effective_layout()
    return False


def fused_utilizations(comp) -> dict:
    """XLA's GpuHloCostAnalysis::FusionCalculateUtilizations: how many times each
    instruction of a fused computation is computed (or, for a parameter, read) per run.

    Each instruction keeps its *elementwise use roots*: the instructions whose values it
    feeds through elementwise uses only (the root, and every operand of a non-elementwise
    use).  A value reached several times through elementwise uses from one root is
    computed once for it (the loop emitter reuses it), so an instruction's utilization is
    the sum of its roots' utilizations, each counted once; a non-elementwise user adds its
    own utilization times XLA's operand utilization, rounded up to whole elements.  The
    roots are kept in insertion order, so the float sums are the same on every run."""
    order = comp.post_order()
    root = comp.root
    roots: dict = {inst: {} for inst in order}
    root_util: dict = dict.fromkeys(order, 0.0)
    root_util[root] = 1.0
    roots[root][root] = None
    util: dict = {}
    for inst in reversed(order):
        u = 0.0
        for r in roots[inst]:
            u += root_util[r]
        util[inst] = u
        through = _passes_roots_through(inst)
        for k, operand in enumerate(inst.operands):
            if through:
                roots[operand].update(roots[inst])
                continue
            roots[operand][operand] = None
            n = _elements(operand.shape) if not operand.shape.is_tuple() else sum(
                _elements(s) for s in operand.shape.leaves())
            cu = u * _own_operand_utilization(inst, k)
            root_util[operand] += 0.0 if n == 0 else math.ceil(cu * n) / n
    return util


def _param_utilization(comp, param: Instruction, memo: dict) -> float:
    """``fused_utilizations(comp)[param]``, the whole computation's values kept in
    ``memo`` between calls."""
    if not memo:
        memo.update(fused_utilizations(comp))
    return memo.get(param, 0.0)


def operand_utilization(inst: Instruction, i: int) -> float:
    return _own_operand_utilization(inst, i)


# ---- module totals --------------------------------------------------------------------------

# Opcodes whose called computations are scalar helpers run inside the caller's kernel.
_SCALAR_CALLERS = frozenset({"reduce", "reduce-window", "select-and-scatter", "sort",
                             "scatter", "map", "all-reduce", "reduce-scatter",
                             "all-reduce-start", "scan", "collective-reduce", "fusion"})


def kernel_computations(module) -> list:
    """Computations whose instructions run as kernels: every computation except fused
    computations and the scalar computations reduce / sort / scatter / map call."""
    skip = set()
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode in _SCALAR_CALLERS or (inst.opcode == "custom-call"
                                                  and inst.called):
                skip.update(inst.called)
    # computations reachable only from skipped ones are skipped too
    changed = True
    while changed:
        changed = False
        for comp in list(skip):
            for inst in comp.instructions:
                for c in inst.called:
                    if c not in skip:
                        skip.add(c)
                        changed = True
    return [c for c in module.computations if c not in skip]


def module_cost(module) -> Cost:
    total = Cost()
    for comp in kernel_computations(module):
        for inst in comp.instructions:
            total = total + instruction_cost(inst)
    return total


class _CostEntry:
    """What a :class:`CostCache` knows of one instruction (None: not asked yet)."""

    __slots__ = ("cost", "util", "param_bytes", "run_time", "threads", "bad_transpose")

    def __init__(self):
        self.cost = None
        self.util = None  # fused instruction -> utilization (of a fusion's parameters)
        self.param_bytes = None  # parameter number -> read bytes (of a fusion)
        self.run_time = None  # filled by the performance model
        self.threads = None  # likewise
        self.bad_transpose = None  # likewise (perf_model._bad_transpose)


class CostCache:
    """Memoized :func:`instruction_cost`, fused-parameter utilization and read bytes (and
    the performance model's run times); a pass calls :meth:`invalidate` on every
    instruction it changes (fusions it grows).  One entry per instruction, so
    invalidating is one dictionary removal."""

    def __init__(self):
        self.entries: dict = {}

    def entry(self, inst: Instruction) -> _CostEntry:
        e = self.entries.get(inst)
        if e is None:
            e = self.entries[inst] = _CostEntry()
        return e

    def cost(self, inst: Instruction) -> Cost:
        e = self.entries.get(inst)
        if e is None:
            e = self.entries[inst] = _CostEntry()
        c = e.cost
        if c is None:
            c = e.cost = instruction_cost(inst)
        return c

    def utilization(self, inst: Instruction, i: int) -> float:
        if inst.opcode != "fusion":
            return _own_operand_utilization(inst, i)
        e = self.entries.get(inst)
        if e is None:
            e = self.entries[inst] = _CostEntry()
        memo = e.util
        if memo is None:
            memo = e.util = {}
        comp = inst.called[0]
        return _param_utilization(comp, comp.parameters[i], memo)

    def param_read_bytes(self, fusion: Instruction, i: int) -> float:
        """:func:`fusion_param_read_bytes` of the fusion's parameter ``i``."""
        e = self.entries.get(fusion)
        if e is None:
            e = self.entries[fusion] = _CostEntry()
        per_param = e.param_bytes
        if per_param is None:
            per_param = e.param_bytes = {}
        b = per_param.get(i)
        if b is None:
            b = per_param[i] = fusion_param_read_bytes(fusion.called[0].parameters[i])
        return b

    def invalidate(self, inst: Instruction) -> None:
        self.entries.pop(inst, None)


_CONTROL = frozenset({"while", "conditional", "call"})


def kernel_breakdown(module) -> dict[str, int]:
    """What would launch as GPU kernels: fusions, library calls (cuBLAS / cuDNN
    custom-calls) and every other unfused instruction that moves data (parameters,
    constants, tuples, get-tuple-element, bitcasts and control flow do not)."""
    out = {"fusions": 0, "library_calls": 0, "unfused": 0}
    for comp in kernel_computations(module):
        for inst in comp.instructions:
            op = inst.opcode
            if op in FREE_OPCODES or op in _CONTROL:
                continue
            if op == "fusion":
                out["fusions"] += 1
            elif op == "custom-call" and inst.custom_call_target.startswith(("__cublas",
                                                                            "__cudnn")):
                out["library_calls"] += 1
            else:
                out["unfused"] += 1
    out["kernels"] = out["fusions"] + out["library_calls"] + out["unfused"]
    return out
