"""DotMerger (``dot-merger``), as ``xla/hlo/transforms/simplifiers/dot_merger.cc``.

Two independent dots that share an operand become one dot on the concatenation of the
other operands, sliced back apart::

    x = dot(a, b)   y = dot(a, c)   =>   z = dot(a, concat(b, c))   x = slice(z)   y = slice(z)

XLA's conditions: the dots share their lhs or their rhs (or, for rank-2 dots in
DotDecomposer's normal form, the lhs of one is the transposed rhs of the other), have the
same dimension numbers, operand and result types, operand precisions and result layouts,
the operands that differ have one non-contracting dimension and equal layouts, neither
depends on the other, neither has control edges, ``can_merge(a, b)`` holds (the GPU's
operation-queue test; default: always) and at least one of the two is small enough:
result plus operand bytes <= ``max_size_to_merge`` (default
``xla_gpu_dot_merger_threshold_mb`` = 32 MiB, as XLA:GPU passes).  Candidates are grouped
by the operand they share and tried pairwise in creation order; a merged dot can merge
again.  Sparse dots (extra metadata operands) are not merged.

Independence is XLA's GraphCycles reachability: here a dependency graph whose nodes keep
a topological order, queried by a search bounded by that order, with a merge contracting
the two dots into one node and reordering only the nodes between them (Pearce-Kelly).
"""
from __future__ import annotations

from hlo_opt.flags import DebugOptions
from hlo_opt.ir.dimension_numbers import DotDimensionNumbers
from hlo_opt.ir.shape import Shape

from hlo_opt.rewrite.builder import Builder, dot_dims
from ._expander_util import non_fusion_computations


# ---- the dependency graph ---------------------------------------------------------------
class DependencyGraph:
    """Reachability between instructions of one computation under node contraction."""

    def __init__(self, comp):
        self.node: dict = {}           # instruction -> node id
        self.ord: list[int] = []       # node id -> topological position
        self.succ: list[set] = []
        self.pred: list[set] = []
        for inst in comp.post_order():
            self._id(inst)
        for inst in self.node:
            n = self.node[inst]
            for p in list(inst.operands) + list(inst.control_predecessors):
                q = self.node[p]
                self.succ[q].add(n)
                self.pred[n].add(q)

    def _id(self, inst) -> int:
        n = self.node.get(inst)
        if n is None:
            n = len(self.ord)
            self.node[inst] = n
            self.ord.append(n)
            self.succ.append(set())
            self.pred.append(set())
        return n

    def _forward(self, start: int, limit: int) -> set:
        """Nodes reachable from ``start`` (itself included) with position < ``limit``."""
        seen = {start}
        stack = [start]
        while stack:
            for s in self.succ[stack.pop()]:
                if s not in seen and self.ord[s] < limit:
                    seen.add(s)
                    stack.append(s)
        return seen

    def _backward(self, start: int, limit: int) -> set:
        """Nodes reaching ``start`` (itself included) with position > ``limit``."""
        seen = {start}
        stack = [start]
        while stack:
            for p in self.pred[stack.pop()]:
                if p not in seen and self.ord[p] > limit:
                    seen.add(p)
                    stack.append(p)
        return seen

    def reachable(self, a, b) -> bool:
        """Is there a path from instruction ``a`` to instruction ``b``?"""
        x, y = self.node[a], self.node[b]
        if x == y:
            return True
        if self.ord[x] > self.ord[y]:
            return False
        return y in self._forward(x, self.ord[y] + 1)

    def contract(self, a, b, merged) -> None:
        """Make ``merged`` one node standing for ``a`` and ``b`` (no path between them)."""
        u, v = self.node[a], self.node[b]
        if self.ord[u] > self.ord[v]:
            u, v = v, u
        fwd = self._forward(u, self.ord[v])
        bwd = self._backward(v, self.ord[u])
        slots = sorted(self.ord[n] for n in fwd | bwd)
        g = len(self.ord)
        self.ord.append(0)
        self.succ.append((self.succ[u] | self.succ[v]) - {u, v})
        self.pred.append((self.pred[u] | self.pred[v]) - {u, v})
        below = sorted(bwd - {v}, key=self.ord.__getitem__)
        above = sorted(fwd - {u}, key=self.ord.__getitem__)
        for n, slot in zip(below, slots):
            self.ord[n] = slot
        self.ord[g] = slots[len(below)]
        for n, slot in zip(above, slots[len(slots) - len(above):]):
            self.ord[n] = slot
        for old in (u, v):
            for s in self.succ[old]:
                self.pred[s].discard(old)
                self.pred[s].add(g)
            for p in self.pred[old]:
                self.succ[p].discard(old)
                self.succ[p].add(g)
            self.succ[old] = set()
            self.pred[old] = set()
        self.node[merged] = g
        self.node[a] = self.node[b] = g


# ---- merging ----------------------------------------------------------------------------
def _bytes(shape: Shape) -> int:
    return sum(s.byte_size() for s in shape.leaves() if s.is_array())


def _layout(inst):
    return inst.shape.effective_layout_or_none()


def _metadata(a, b) -> dict:
    """One of the two dots' metadata (a's when it names an op, else b's)."""
    for d in (a, b):
        md = d.attrs.get("metadata", "")
        if "op_name" in md:
            return {"metadata": md}
    return {}


def _precision_attrs(a) -> dict:
    return {k: a.attrs[k] for k in ("operand_precision", "algorithm") if k in a.attrs}


def _new_dot(b: Builder, a, lhs, rhs, dnums, shape: Shape, other):
    attrs = DotDimensionNumbers(*(tuple(v) for v in dnums)).attrs()
    attrs.update(_precision_attrs(a))
    attrs.update(_metadata(a, other))
    return b._add("dot", shape, [lhs, rhs], attrs=attrs)


def _dot_shape(et, lhs: Shape, rhs: Shape, dnums, layout) -> Shape:
    lb, lc, rb, rc = dnums
    dims = [lhs.dims[d] for d in lb]
    dims += [lhs.dims[i] for i in range(lhs.rank) if i not in lb and i not in lc]
    dims += [rhs.dims[i] for i in range(rhs.rank) if i not in rb and i not in rc]
    return Shape.array(et, dims, layout)


def _concat(b: Builder, x, y, dim: int, layout):
    dims = list(x.shape.dims)
    dims[dim] += y.shape.dims[dim]
    return b._add("concatenate", Shape.array(x.shape.element_type, dims, layout), [x, y],
                  attrs={"dimensions": "{" + str(dim) + "}"})


def _slice(b: Builder, x, shape: Shape, starts, limits):
    text = "{" + ", ".join(f"[{s}:{l}]" for s, l in zip(starts, limits)) + "}"
    return b._add("slice", shape, [x], attrs={"slice": text})


def try_merge_same_operand(b: Builder, a, bb):
    """TryMergeSameOperand."""
    if a.operands[0] is not bb.operands[0] and a.operands[1] is not bb.operands[1]:
        return None
    if (a.operands[0].shape.element_type != bb.operands[0].shape.element_type
            or a.operands[1].shape.element_type != bb.operands[1].shape.element_type
            or a.shape.element_type != bb.shape.element_type):
        return None
    dnums = dot_dims(a)
    if dnums != dot_dims(bb):
        return None
    lb, lc, rb, rc = dnums
    lhs_same = a.operands[0] is bb.operands[0]
    side = 0 if lhs_same else 1
    shared = a.operands[side]
    diff_a, diff_b = a.operands[1 - side], bb.operands[1 - side]
    if _layout(diff_a) != _layout(diff_b):
        return None
    shared_non_contracting = shared.shape.rank - len(lb)
    if lhs_same:
        shared_non_contracting -= len(lc)
        used = set(rc) | set(rb)
    else:
        shared_non_contracting -= len(rc)
        used = set(lc) | set(lb)
    if len(used) + 1 != diff_a.shape.rank:
        return None
    outer = 0
    for d in sorted(used):
        if d != outer:
            break
        outer += 1
    if diff_a.shape.dims[:outer] + diff_a.shape.dims[outer + 1:] != \
            diff_b.shape.dims[:outer] + diff_b.shape.dims[outer + 1:]:
        return None  # InferConcatOpShape would fail
    concat = _concat(b, diff_a, diff_b, outer, diff_a.shape.layout)
    lhs, rhs = (shared, concat) if lhs_same else (concat, shared)
    shape = _dot_shape(a.shape.element_type, lhs.shape, rhs.shape, dnums, a.shape.layout)
    new_dot = _new_dot(b, a, lhs, rhs, dnums, shape, bb)
    rank = shape.rank
    slice_dim = rank - (1 if lhs_same else 1 + shared_non_contracting)
    starts = [0] * rank
    limits = list(shape.dims)
    limits[slice_dim] = a.shape.dims[slice_dim]
    new_a = _slice(b, new_dot, a.shape, starts, limits)
    a.replace_all_uses_with(new_a)
    starts[slice_dim] = limits[slice_dim]
    limits[slice_dim] = shape.dims[slice_dim]
    new_b = _slice(b, new_dot, bb.shape, starts, limits)
    bb.replace_all_uses_with(new_b)
    return new_dot


def _equal_transposed(x, y) -> bool:
    for t, other in ((x, y), (y, x)):
        if t.opcode == "transpose" and t.operands[0] is other:
            return tuple(t.dimensions) == (1, 0)
    return False


def _normal_form(d) -> bool:
    lb, lc, rb, rc = dot_dims(d)
    return (d.operands[0].shape.rank == 2 and d.operands[1].shape.rank == 2
            and lc == [1] and rc == [0] and not lb and not rb)


def try_merge_lhs_with_rhs(b: Builder, a, bb):
    """TryMergeLHSWithRHSOperand: lhs of ``a`` is the transposed rhs of ``bb``."""
    if not (_normal_form(a) and _normal_form(bb)):
        return None
    a_lhs, a_rhs = a.operands
    b_lhs, b_rhs = bb.operands
    if a.shape.element_type != bb.shape.element_type or \
            a_rhs.shape.element_type != b_lhs.shape.element_type:
        return None
    if a.shape.dims[0] != bb.shape.dims[1] or not _equal_transposed(a_lhs, b_rhs):
        return None
    if a_rhs.shape.dims[0] != b_lhs.shape.dims[1]:
        return None  # InferConcatOpShape would fail
    t = b._add("transpose", Shape.array(b_lhs.shape.element_type,
                                        (b_lhs.shape.dims[1], b_lhs.shape.dims[0])),
               [b_lhs], attrs={"dimensions": "{1,0}"})
    new_rhs = _concat(b, a_rhs, t, 1, None)
    dnums = dot_dims(a)
    shape = _dot_shape(a.shape.element_type, a_lhs.shape, new_rhs.shape, dnums,
                       a.shape.layout)
    new_dot = _new_dot(b, a, a_lhs, new_rhs, dnums, shape, bb)
    m, na = a.shape.dims
    nb = bb.shape.dims[0]
    new_a = _slice(b, new_dot, a.shape, [0, 0], [m, na])
    b_slice = _slice(b, new_dot, Shape.array(bb.shape.element_type, (m, nb)),
                     [0, na], [bb.shape.dims[1], na + nb])
    new_b = b._add("transpose", bb.shape, [b_slice], attrs={"dimensions": "{1,0}"})
    a.replace_all_uses_with(new_a)
    bb.replace_all_uses_with(new_b)
    return new_dot


def try_merge(b: Builder, a, bb):
    """TryMergeOperand."""
    if _layout(a) != _layout(bb):
        return None
    if a.attrs.get("operand_precision") != bb.attrs.get("operand_precision"):
        return None
    return (try_merge_same_operand(b, a, bb) or try_merge_lhs_with_rhs(b, a, bb)
            or try_merge_lhs_with_rhs(b, bb, a))


def merge_dots(comp, max_size: int, can_merge) -> bool:
    """MergeDots on one computation."""
    def candidate(d) -> bool:
        return _bytes(d.shape) + sum(_bytes(o.shape) for o in d.operands) <= max_size

    uid = {inst: i for i, inst in enumerate(comp.iter_instructions())}
    ctrl_succ = {p for i in comp.iter_instructions() for p in i.control_predecessors}
    classes: dict = {}
    for inst in comp.iter_instructions():
        if inst.opcode != "dot" or len(inst.operands) != 2 \
                or inst.control_predecessors or inst in ctrl_succ:
            continue
        for op in inst.operands:
            classes.setdefault(op, {})[inst] = None
            if op.opcode == "transpose":
                classes.setdefault(op.operands[0], {})[inst] = None
    classes = {k: v for k, v in classes.items()
               if len(v) >= 2 and any(candidate(d) for d in v)}
    if not classes:
        return False
    graph = DependencyGraph(comp)
    b = Builder(comp)
    dead: dict = {}

    def id_of(inst) -> int:
        n = uid.get(inst)
        if n is None:
            n = uid[inst] = len(uid)
        return n

    for key in sorted(classes, key=id_of):
        dots = sorted(classes[key], key=id_of)
        for i in range(len(dots)):
            for j in range(i + 1, len(dots)):
                a, bb = dots[i], dots[j]
                if a is None:
                    break
                if bb is None or a in dead or bb in dead:
                    continue
                if not (candidate(a) or candidate(bb)):
                    continue
                if graph.reachable(a, bb) or graph.reachable(bb, a) or not can_merge(a, bb):
                    continue
                merged = try_merge(b, a, bb)
                if merged is None:
                    continue
                id_of(merged)
                graph.contract(a, bb, merged)
                dead[a] = dead[bb] = None
                dots[i] = merged
                dots[j] = None
    for inst in dead:  # HloComputation::RemoveInstruction (no control edges: checked above)
        comp.remove_instruction(inst)
    return bool(dead)


def _always(_a, _b) -> bool:
    return True


class DotMerger:
    name = "dot-merger"

    def __init__(self, max_size_to_merge: int | None = None, can_merge=None):
        if max_size_to_merge is None:
            max_size_to_merge = DebugOptions().xla_gpu_dot_merger_threshold_mb << 20
        self.max_size_to_merge = max_size_to_merge
        self.can_merge = can_merge or _always

    def run(self, module) -> bool:
        changed = False
        composite = {c for inst in module.instructions() if inst.opcode == "call"
                     and inst.attrs.get("is_composite") == "true" for c in inst.called}
        for comp in non_fusion_computations(module):
            if comp not in composite:  # MakeNonFusionNonCompositeComputations
                changed |= merge_dots(comp, self.max_size_to_merge, self.can_merge)
        return changed
