"""Buffer assignment: every value of a plan gets a slice of one arena.

    asg = mplan.assignment            # made by plan.make_plan
    print(asg.to_text())              # XLA's buffer-assignment dump, in spirit
    asg.arena_size                    # bytes of the one arena a run needs

Slices (:class:`BufferSlice`) are of three kinds: ``param`` (a pointer the caller passes
in: entry arguments, or a called computation's parameters), ``const`` (module constants,
passed in a table) and ``arena`` (offset/size in the arena).

Per computation, values are allocated in step order with liveness-based reuse: a value
lives from the step that defines it to its last use (the root's values to the end of the
computation), and a freed block is reused best-fit.  In-place outputs take over their
input's block when that input dies at the step (dynamic-update-slice, scatter, while
state, ``input_output_alias``); otherwise the renderer copies input -> output first.
Each computation gets its own region of the arena (computations call each other, so their
live values overlap in time); regions are laid out one after another.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


def _round(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def value_bytes(shape) -> int:
    """Bytes of one array leaf as the backends store it (one numpy element each: sub-byte
    types take a byte, as in numpy and ml_dtypes)."""
    if not shape.is_array():
        return 0
    return shape.num_elements() * shape.dtype.itemsize


@dataclass(frozen=True)
class BufferSlice:
    kind: str        # "arena" | "param" | "const"
    index: int       # allocation number / parameter number / constant number
    offset: int      # byte offset (arena: from the arena start; param: leaf number)
    size: int        # bytes

    def __str__(self):
        if self.kind == "arena":
            return f"arena[{self.offset}:{self.offset + self.size}]"
        if self.kind == "param":
            return f"param{self.index}{{{self.offset}}}"
        return f"const{self.index}"


@dataclass
class Allocation:
    index: int
    offset: int
    size: int
    computation: str
    values: list       # [(Value, first_step, last_step)]


class ComputationAssignment:
    def __init__(self, plan):
        self.plan = plan
        self.slices: dict = {}       # Value -> BufferSlice
        self.region = (0, 0)         # (offset, size) of this computation's arena region


class BufferAssignment:
    def __init__(self, mplan):
        self.mplan = mplan
        self.computations: dict = {}   # Computation -> ComputationAssignment
        self.allocations: list[Allocation] = []
        self.constants: list = []      # constant instructions, by constant number
        self.arena_size = 0

    def slice_of(self, plan, value) -> BufferSlice:
        return self.computations[plan.computation].slices[plan.value_of(value.inst,
                                                                        value.leaf)]

    def to_text(self) -> str:
        out = [f"BufferAssignment: arena of {self.arena_size} bytes, "
               f"{len(self.allocations)} allocations, {len(self.constants)} constants"]
        for a in self.allocations:
            out.append(f"allocation {a.index}: size {a.size}, offset {a.offset}, "
                       f"computation %{a.computation}:")
            for v, first, last in a.values:
                out.append(f" value: {v} ({v.shape.to_text()}) live [step {first}, "
                           f"step {last}]")
        for i, c in enumerate(self.constants):
            out.append(f"constant {i}: %{c.name} {c.shape.to_text()}")
        total = sum(value_bytes(v.shape) for a in self.allocations for v, _, _ in a.values)
        out.append(f"Total bytes used: {self.arena_size} (values: {total}; "
                   f"reuse saves {max(total - self.arena_size, 0)})")
        return "\n".join(out)


def assign(mplan) -> BufferAssignment:
    asg = BufferAssignment(mplan)
    const_ids: dict = {}
    offset = 0
    for comp, plan in mplan.plans.items():
        ca = ComputationAssignment(plan)
        asg.computations[comp] = ca
        for n, leaves in enumerate(plan.params):
            for j, v in enumerate(leaves):
                ca.slices[v] = BufferSlice("param", n, j, value_bytes(v.shape))
        consts = list(plan.constants)
        for st in plan.steps:
            consts += [v for v in st.inputs if v.inst.opcode == "constant"]
        for v in consts:
            if v.inst not in const_ids:
                const_ids[v.inst] = len(asg.constants)
                asg.constants.append(v.inst)
            ca.slices[v] = BufferSlice("const", const_ids[v.inst], 0, value_bytes(v.shape))
        size = _assign_computation(plan, ca, asg, offset)
        ca.region = (offset, size)
        offset += size
        plan.assignment = ca
        for st in plan.steps:
            st.input_slices = [ca.slices[plan.value_of(v.inst, v.leaf)]
                               if plan.value_of(v.inst, v.leaf) in ca.slices
                               else ca.slices[v] for v in st.inputs]
            st.output_slices = [ca.slices[v] for v in st.outputs]
    asg.arena_size = _round(offset)
    return asg


def _assign_computation(plan, ca, asg, base: int) -> int:
    steps = plan.steps
    end = len(steps)
    last_use: dict = {}
    for i, st in enumerate(steps):
        for v in st.inputs:
            last_use[plan.value_of(v.inst, v.leaf)] = i
    for v in plan.root_values:
        last_use[v] = end
    dies_at: dict = {}
    for v, i in last_use.items():
        dies_at.setdefault(i, []).append(v)
    free: list[tuple[int, int]] = []        # (offset, size) blocks free for reuse
    top = 0
    live: dict = {}                         # Value -> (alloc index, first step)
    for i, st in enumerate(steps):
        taken = {}
        for out_n, in_n in st.in_place.items():
            v_in = plan.value_of(st.inputs[in_n].inst, st.inputs[in_n].leaf) \
                if in_n < len(st.inputs) else None
            # a value given twice (a while's init tuple with one value at two indices)
            # is reused by its first output only; the others get buffers of their own
            if v_in is not None and v_in in live and last_use.get(v_in) == i \
                    and value_bytes(v_in.shape) == value_bytes(st.outputs[out_n].shape) \
                    and v_in not in taken.values():
                taken[out_n] = v_in
        for n, v in enumerate(st.outputs):
            size = value_bytes(v.shape)
            if n in taken:
                a_idx, _ = live.pop(taken[n])
                alloc = asg.allocations[a_idx]
                alloc.values.append((v, i, last_use.get(v, i)))
                live[v] = (a_idx, i)
                ca.slices[v] = BufferSlice("arena", a_idx, alloc.offset, size)
                continue
            rs = _round(max(size, 1))
            best = None
            for k, (o, s) in enumerate(free):
                if s >= rs and (best is None or s < free[best][1]):
                    best = k
            if best is not None:
                o, s = free.pop(best)
                if s > rs:
                    free.append((o + rs, s - rs))
                off = o
            else:
                off = top
                top += rs
            a_idx = len(asg.allocations)
            asg.allocations.append(Allocation(a_idx, base + off, rs,
                                              plan.computation.name,
                                              [(v, i, last_use.get(v, i))]))
            live[v] = (a_idx, i)
            ca.slices[v] = BufferSlice("arena", a_idx, base + off, size)
        # values whose last use is this step die after it (outputs never die here)
        for v in dies_at.get(i, ()):
            if v in live and v not in st.outputs:
                a_idx, _ = live.pop(v)
                a = asg.allocations[a_idx]
                free.append((a.offset - base, a.size))
        # outputs nobody uses die at once
        for v in st.outputs:
            if v in live and v not in last_use:
                a_idx, _ = live.pop(v)
                a = asg.allocations[a_idx]
                free.append((a.offset - base, a.size))
    return _round(top)
