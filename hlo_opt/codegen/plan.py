"""Module -> kernels + library calls + host control flow (the plan both backends render).

    mplan = make_plan(module)              # ModulePlan: one ComputationPlan per computation
    print(mplan.to_text())                 # kinds, reasons, index spaces, buffer slices
    for step in mplan.entry_plan.steps:    # Kernel | LibraryCall | Control | Copy
        ...

Every non-trivial instruction of a (non-fused) computation becomes one step:

* :class:`Kernel` -- a fusion, or an unfused instruction wrapped as XLA's fusion wrapper
  does.  ``kind`` is chosen from the hero (``kinds.choose_kind``) with ``reason``;
  ``index_spaces`` are the output leaf shapes (the loop nest iterates them in physical
  order, minor-most innermost); ``roots`` says which instruction (and tuple leaf) gives
  each output's value; ``input_map`` maps ``(instruction, leaf)`` inside the kernel to
  kernel input numbers, ready for ``ElementalEmitter(kernel.input_map)``.
  ``in_place`` maps output number -> input number where the output must start as a copy
  of the input (dynamic-update-slice, scatter): the renderer copies when the two slices
  differ and then writes only the update.
* :class:`LibraryCall` -- dot, convolution, fft, sort ..., anything with no elemental
  rule; ``target`` names what the backend must call.
* :class:`Control` -- while / conditional / call: host control flow over the called
  computations' plans (``computations``), rendered as native control flow.
* :class:`Copy` -- a plain buffer copy (a while's initial state into its own buffers).

Trivial instructions (parameter, constant, tuple, get-tuple-element, bitcast, reshapes
that are bitcasts, opt-barrier) make no step: their leaves *alias* other values
(``ComputationPlan.value_of``).  A :class:`Value` is one array leaf ``(inst, leaf)``.
After planning, ``buffers.assign`` gives every value a :class:`~.buffers.BufferSlice`;
steps then expose ``input_slices`` / ``output_slices``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UnsupportedError
from .elemental import has_rule
from .kinds import choose_kind

NO_CODE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                     "opt-barrier", "after-all", "add-dependency"})


_LEAVES: dict = {}


def _leaves(shape) -> list:
    hit = _LEAVES.get(id(shape))
    if hit is None or hit[0] is not shape:
        hit = _LEAVES[id(shape)] = (shape, shape.leaves())
    return hit[1]


@dataclass(frozen=True)
class Value:
    """One array leaf of an instruction's result."""
    inst: object
    leaf: int = 0

    @property
    def shape(self):
        s = self.inst.shape
        return _leaves(s)[self.leaf] if s.is_tuple() else s

    def __str__(self):
        return f"%{self.inst.name}" + (f"{{{self.leaf}}}" if self.inst.shape.is_tuple()
                                      else "")


@dataclass(eq=False)
class Step:
    name: str
    instruction: object
    inputs: list = field(default_factory=list)    # [Value]
    outputs: list = field(default_factory=list)   # [Value]
    input_slices: list = field(default_factory=list)
    output_slices: list = field(default_factory=list)
    in_place: dict = field(default_factory=dict)  # output number -> input number

    kind = "step"

    def describe(self) -> str:
        return ""


@dataclass(eq=False)
class Kernel(Step):
    kind: str = "loop"
    reason: str = ""
    heroes: list = field(default_factory=list)
    index_spaces: list = field(default_factory=list)   # output leaf shapes
    roots: list = field(default_factory=list)          # [(inst, leaf)] per output
    input_map: dict = field(default_factory=dict)      # (inst, leaf) -> input number

    def describe(self):
        spaces = ", ".join(s.to_text() for s in self.index_spaces)
        return f"kernel {self.kind} over {spaces}: {self.reason}"


@dataclass(eq=False)
class LibraryCall(Step):
    target: str = ""
    reason: str = ""
    kind = "library_call"

    def describe(self):
        return f"library call {self.target}: {self.reason}"


@dataclass(eq=False)
class Control(Step):
    kind: str = "while"
    computations: list = field(default_factory=list)   # ComputationPlan per callee

    def describe(self):
        return f"{self.kind} over " + ", ".join(f"%{c.computation.name}"
                                               for c in self.computations)


@dataclass(eq=False)
class Copy(Step):
    kind = "copy"

    def describe(self):
        return "copy"


class ComputationPlan:
    def __init__(self, computation):
        self.computation = computation
        self.steps: list[Step] = []
        self.alias: dict = {}          # Value -> Value it is the same buffer as
        self.params: list = []         # [[Value per leaf] per parameter]
        self.constants: list = []      # Values of (array) constants used by steps
        self.root_values: list = []    # canonical Values of the root's leaves
        self.assignment = None         # buffers.ComputationAssignment

    def value_of(self, inst, leaf: int = 0) -> Value:
        v = Value(inst, leaf)
        while v in self.alias:
            v = self.alias[v]
        return v

    def leaves_of(self, inst) -> list:
        n = len(inst.shape.leaves()) if inst.shape.is_tuple() else 1
        if inst.shape.is_tuple() and not inst.shape.tuple_shapes:
            return []
        return [self.value_of(inst, i) for i in range(n)]


class ModulePlan:
    def __init__(self, module):
        self.module = module
        self.plans: dict = {}          # Computation -> ComputationPlan
        self.entry_plan: ComputationPlan | None = None
        self.assignment = None         # buffers.BufferAssignment

    def steps(self):
        for p in self.plans.values():
            yield from ((p, s) for s in p.steps)

    def to_text(self) -> str:
        out = [f"plan for module {self.module.name}"]
        for comp, p in self.plans.items():
            out.append(f"computation %{comp.name}:")
            for s in p.steps:
                ins = ", ".join(str(v) for v in s.inputs)
                out.append(f"  {s.name}: {s.describe()}")
                if s.heroes if isinstance(s, Kernel) else False:
                    out.append("    heroes: " + ", ".join(f"%{h.name} ({h.opcode})"
                                                        for h in s.heroes))
                out.append(f"    inputs: {ins}")
                if s.input_slices:
                    out.append("    input slices: " + ", ".join(map(str, s.input_slices)))
                if s.output_slices:
                    out.append("    output slices: " + ", ".join(map(str, s.output_slices)))
                if s.in_place:
                    out.append(f"    in place: {s.in_place}")
        return "\n".join(out)


def _leaf_count(shape) -> int:
    return len(shape.leaves()) if shape.is_tuple() else 1


def _tuple_leaf_offsets(shape) -> list[int]:
    """Leaf offset of each tuple element (nested tuples flatten in order)."""
    offs, o = [], 0
    for s in shape.tuple_shapes:
        offs.append(o)
        o += _leaf_count(s) if s.is_tuple() else 1
    return offs


def _is_bitcast_reshape(inst) -> bool:
    if inst.opcode not in ("reshape", "bitcast"):
        return False
    a, b = inst.operands[0].shape, inst.shape
    if inst.opcode == "bitcast":
        return a.element_type == b.element_type
    def default(s):
        m2m = [d for d in s.effective_layout().minor_to_major if s.dims[d] != 1]
        return m2m == sorted(m2m, reverse=True)
    return default(a) and default(b)


def make_plan(module) -> ModulePlan:
    """Plan every computation reachable from the entry (fused computations and reducers
    are part of their kernels, not planned separately)."""
    if module.entry is None:
        raise UnsupportedError(f"module {module.name} has no entry computation")
    mplan = ModulePlan(module)
    mplan.entry_plan = _plan_computation(module.entry, mplan)
    from .buffers import assign
    mplan.assignment = assign(mplan)
    return mplan


def _plan_computation(comp, mplan) -> ComputationPlan:
    hit = mplan.plans.get(comp)
    if hit is not None:
        return hit
    p = ComputationPlan(comp)
    order = _live_post_order(comp)
    counter = 0
    for inst in order:
        op = inst.opcode
        if op == "parameter":
            continue
        if op == "tuple":
            k = 0
            for o in inst.operands:
                for v in p.leaves_of(o):
                    p.alias[Value(inst, k)] = v
                    k += 1
            continue
        if op == "get-tuple-element":
            src = inst.operands[0]
            base = _tuple_leaf_offsets(src.shape)[inst.attr("index")]
            for j in range(_leaf_count(inst.shape)):
                p.alias[Value(inst, j)] = p.value_of(src, base + j)
            continue
        if op in ("opt-barrier",):
            for j in range(_leaf_count(inst.shape)):
                p.alias[Value(inst, j)] = p.value_of(inst.operands[0], j)
            continue
        if op == "constant":
            if inst.shape.is_array():
                p.constants.append(Value(inst, 0))
            continue
        if op in ("after-all", "add-dependency"):
            if op == "add-dependency":
                p.alias[Value(inst, 0)] = p.value_of(inst.operands[0], 0)
            continue
        if _is_bitcast_reshape(inst):
            p.alias[Value(inst, 0)] = p.value_of(inst.operands[0], 0)
            continue
        counter += 1
        ins = [v for o in inst.operands for v in p.leaves_of(o)]
        outs = [Value(inst, j) for j in range(_leaf_count(inst.shape))] \
            if not (inst.shape.is_tuple() and not inst.shape.tuple_shapes) else []
        name = inst.name
        if op in ("while", "conditional", "call"):
            callees = [_plan_computation(c, mplan) for c in inst.called]
            st = Control(name, inst, ins, outs, kind=op, computations=callees)
            if op == "while":
                st.in_place = {j: j for j in range(len(outs))}
            p.steps.append(st)
            continue
        p.steps.append(_make_kernel_or_call(inst, ins, outs, p))
    # the root's leaves, canonical
    p.root_values = p.leaves_of(comp.root)
    for param in comp.parameters:
        p.params.append([Value(param, j) for j in range(_leaf_count(param.shape))])
    mplan.plans[comp] = p
    return p


def _make_kernel_or_call(inst, ins, outs, p):
    kind, reason, heroes = choose_kind(inst)
    members = (inst.fused_computation.instructions if inst.opcode == "fusion"
               else [inst])
    if kind != "library_call":
        bad = [m for m in members if not has_rule(m) and m.opcode not in ("parameter",)
               and not (m.opcode == "tuple" and m is members[-1])
               and m.opcode != "tuple"]
        if inst.opcode == "fusion":
            bad = [m for m in bad if m.opcode != "constant"]
        if bad and kind not in ("sort", "scatter", "triton_gemm"):
            b = bad[0]
            return LibraryCall(inst.name, inst, ins, outs, target=b.opcode,
                               reason=f"%{b.name} ({b.opcode}) has no elemental rule")
    if kind in ("library_call", "sort", "scatter"):
        target = heroes[0].opcode if heroes else inst.opcode
        st = LibraryCall(inst.name, inst, ins, outs, target=target, reason=reason)
        if kind == "scatter" and inst.opcode == "scatter":
            st.in_place = {0: 0}
        return st
    k = Kernel(inst.name, inst, list(ins), outs, kind=kind, reason=reason, heroes=heroes)
    k.index_spaces = [v.shape for v in outs]
    # inputs: the operands' leaves, in order
    if inst.opcode == "fusion":
        comp = inst.fused_computation
        params = sorted(comp.parameters, key=lambda q: q.parameter_number)
        n = 0
        for q, o in zip(params, inst.operands):
            for j in range(_leaf_count(o.shape)):
                k.input_map[(q, j)] = n
                n += 1
        for m in comp.instructions:  # non-scalar constants are inputs too
            if m.opcode == "constant" and m.shape.is_array() and m.shape.dims:
                k.input_map[(m, 0)] = n
                k.inputs.append(Value(m, 0))
                n += 1
        k.roots = _root_leaves(comp.root)
    else:
        n = 0
        for o in inst.operands:
            for j in range(_leaf_count(o.shape)):
                k.input_map[(o, j)] = n
                n += 1
        k.roots = [(inst, j) for j in range(len(outs))]
    if kind == "in_place_dynamic_update_slice":
        root = k.roots[0][0]
        base = root.operands[0]
        num = k.input_map.get((base, 0))
        if num is not None and base.shape == root.shape:
            k.in_place = {0: num}
        else:
            k.kind, k.reason = "loop", "dynamic-update-slice whose operand is computed " \
                                       "in the fusion: one loop over the output"
    return k


def _root_leaves(inst) -> list:
    """(instruction, leaf) per output leaf of a fused root: through tuples, and into
    tuple-shaped operands leaf by leaf (a variadic reduce in a multi-output fusion is
    one tuple-shaped output, XLA's nested form)."""
    if inst.opcode == "tuple":
        return [rl for x in inst.operands for rl in _root_leaves(x)]
    return [(inst, j) for j in range(_leaf_count(inst.shape))]


def _live_post_order(comp):
    order = comp.post_order()
    live = {comp.root}
    stack = [comp.root]
    while stack:
        i = stack.pop()
        for o in list(i.operands) + list(i.control_predecessors):
            if o not in live:
                live.add(o)
                stack.append(o)
    return [i for i in order if i in live]
