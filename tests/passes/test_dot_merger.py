"""dot-merger (DotMerger): independent dots sharing an operand become one dot on the
concatenated other operands, sliced apart."""
from __future__ import annotations

import random

import pytest

from hlo_opt.ir.computation import Computation
from hlo_opt.ir.instruction import Instruction
from hlo_opt.ir.shape import Shape
from hlo_opt.ir.types import is_float
from passes.dot_merger import DependencyGraph, DotMerger
from hlo_opt.api import parse_hlo, verify
from hlo_opt.errors import HloError
from tests.support.expander_real_modules import MODULES, check_module, check_variant
from tests.support.harness import check_pass, load_text
from tests.support.lit_chunks import chunks

# A merged dot is a bigger matmul: its sums may round differently.
RTOL, ATOL = 1e-5, 1e-5


def merge(text: str, p=None):
    return check_pass(load_text(text), p or "dot-merger", rtol=RTOL, atol=ATOL)


def dots(m):
    return [i for i in m.instructions() if i.opcode == "dot"]


def test_shared_lhs():
    r = merge("""
HloModule m
ENTRY %e (lhs: f32[20,10], r0: f32[10,3], r1: f32[10,5]) -> (f32[20,3], f32[20,5]) {
  %lhs = f32[20,10] parameter(0)
  %r0 = f32[10,3] parameter(1)
  %r1 = f32[10,5] parameter(2)
  %d0 = f32[20,3] dot(%lhs, %r0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="first"}
  %d1 = f32[20,5] dot(%lhs, %r1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[20,3], f32[20,5]) tuple(%d0, %d1)
}""")
    assert r.changed and r.compared_runs == 3
    (d,) = dots(r.module)
    assert d.shape.dims == (20, 8) and d.operands[1].opcode == "concatenate"
    assert 'op_name="first"' in d.attrs["metadata"]
    assert [o.attrs["slice"] for o in r.module.entry.root.operands] == \
        ["{[0:20], [0:3]}", "{[0:20], [3:8]}"]


def test_shared_rhs_with_batch_dims():
    r = merge("""
HloModule m
ENTRY %e (a: f32[4,3,6], b: f32[4,5,6], w: f32[4,6,7]) -> (f32[4,3,7], f32[4,5,7]) {
  %a = f32[4,3,6] parameter(0)
  %b = f32[4,5,6] parameter(1)
  %w = f32[4,6,7] parameter(2)
  %d0 = f32[4,3,7] dot(%a, %w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %d1 = f32[4,5,7] dot(%b, %w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT %t = (f32[4,3,7], f32[4,5,7]) tuple(%d0, %d1)
}""")
    assert r.changed and r.compared_runs == 3
    (d,) = dots(r.module)
    assert d.shape.dims == (4, 8, 7)
    assert d.operands[0].opcode == "concatenate" and d.operands[0].attr("dimensions") == (1,)


def test_lhs_of_one_is_the_transposed_rhs_of_the_other():
    r = merge("""
HloModule m
ENTRY %e (c: f32[6,4], ra: f32[4,3], lb: f32[5,4]) -> (f32[6,3], f32[5,6]) {
  %c = f32[6,4] parameter(0)
  %ra = f32[4,3] parameter(1)
  %lb = f32[5,4] parameter(2)
  %a = f32[6,3] dot(%c, %ra), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %ct = f32[4,6] transpose(%c), dimensions={1,0}
  %b = f32[5,6] dot(%lb, %ct), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[6,3], f32[5,6]) tuple(%a, %b)
}""")
    assert r.changed and r.compared_runs == 3
    (d,) = dots(r.module)
    assert d.shape.dims == (6, 8)
    assert r.module.entry.root.operands[1].opcode == "transpose"


def test_three_dots_merge_into_one():
    r = merge("""
HloModule m
ENTRY %e (x: f32[8,4], w0: f32[4,2], w1: f32[4,3], w2: f32[4,5]) -> (f32[8,2], f32[8,3], f32[8,5]) {
  %x = f32[8,4] parameter(0)
  %w0 = f32[4,2] parameter(1)
  %w1 = f32[4,3] parameter(2)
  %w2 = f32[4,5] parameter(3)
  %d0 = f32[8,2] dot(%x, %w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %d1 = f32[8,3] dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %d2 = f32[8,5] dot(%x, %w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[8,2], f32[8,3], f32[8,5]) tuple(%d0, %d1, %d2)
}""")
    assert r.changed and r.compared_runs == 3
    (d,) = dots(r.module)
    assert d.shape.dims == (8, 10)


def test_dependent_dots_are_not_merged():
    """d1's rhs is computed from d0: merging would make a cycle."""
    r = merge("""
HloModule m
ENTRY %e (x: f32[4,4], w: f32[4,4]) -> f32[4,4] {
  %x = f32[4,4] parameter(0)
  %w = f32[4,4] parameter(1)
  %d0 = f32[4,4] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %n = f32[4,4] negate(%d0)
  ROOT %d1 = f32[4,4] dot(%x, %n), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    assert not r.changed


@pytest.mark.parametrize("what,d1", [
    ("contracting dims", "dot(%x, %w1), lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("precision", "dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                  "operand_precision={highest,highest}"),
])
def test_mismatches_are_not_merged(what, d1):
    shape = "f32[6,5]"
    text = f"""
HloModule m
ENTRY %e (x: f32[6,6], w0: f32[6,3], w1: f32[6,5]) -> (f32[6,3], {shape}) {{
  %x = f32[6,6] parameter(0)
  %w0 = f32[6,3] parameter(1)
  %w1 = f32[6,5] parameter(2)
  %d0 = f32[6,3] dot(%x, %w0), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %d1 = {shape} {d1}
  ROOT %t = (f32[6,3], {shape}) tuple(%d0, %d1)
}}"""
    assert not merge(text).changed


def test_control_edges_block_a_merge():
    r = merge("""
HloModule m
ENTRY %e (x: f32[6,6], w0: f32[6,3], w1: f32[6,5]) -> (f32[6,3], f32[6,5]) {
  %x = f32[6,6] parameter(0)
  %w0 = f32[6,3] parameter(1)
  %w1 = f32[6,5] parameter(2)
  %d0 = f32[6,3] dot(%x, %w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %d1 = f32[6,5] dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, control-predecessors={%d0}
  ROOT %t = (f32[6,3], f32[6,5]) tuple(%d0, %d1)
}""")
    assert not r.changed


SIZES = """
HloModule m
ENTRY %e (x: f32[16,16], w0: f32[16,16], w1: f32[16,1024]) -> (f32[16,16], f32[16,1024]) {
  %x = f32[16,16] parameter(0)
  %w0 = f32[16,16] parameter(1)
  %w1 = f32[16,1024] parameter(2)
  %d0 = f32[16,16] dot(%x, %w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %d1 = f32[16,1024] dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[16,16], f32[16,1024]) tuple(%d0, %d1)
}"""


def test_max_size_to_merge():
    """d0 weighs 3 KiB (result + operands), d1 130 KiB: one small dot is enough."""
    assert merge(SIZES, DotMerger(max_size_to_merge=4 << 10)).changed
    assert not merge(SIZES, DotMerger(max_size_to_merge=2 << 10)).changed
    assert DotMerger().max_size_to_merge == 32 << 20  # xla_gpu_dot_merger_threshold_mb


def test_can_merge_callback():
    assert not merge(SIZES, DotMerger(can_merge=lambda a, b: False)).changed


# ---- reachability under contraction --------------------------------------------------------
def _random_dag(rng: random.Random, n: int) -> Computation:
    comp = Computation("g")
    s = Shape.array("f32", ())
    nodes = [comp.add_parameter(s, "p0")]
    for i in range(1, n):
        k = rng.randint(0, min(2, i))
        ops = rng.sample(nodes, k) if k else [nodes[0]]
        inst = Instruction("add" if len(ops) == 2 else "negate", s, ops[:2], {}, f"n{i}")
        comp.add_instruction(inst)
        nodes.append(inst)
    comp.root = nodes[-1]
    return comp


def _closure(edges: dict, n_nodes) -> dict:
    reach = {}
    for v in n_nodes:
        seen, stack = set(), [v]
        while stack:
            for w in edges.get(stack.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        reach[v] = seen
    return reach


@pytest.mark.parametrize("seed", range(20))
def test_dependency_graph_contraction_matches_brute_force(seed):
    """Contract random independent pairs; reachability must equal the transitive
    closure of the contracted graph, and the kept order must stay topological."""
    rng = random.Random(seed)
    comp = _random_dag(rng, 40)
    graph = DependencyGraph(comp)
    group = {i: i for i in comp.instructions}       # instruction -> representative
    edges = {i: set(i.users) for i in comp.instructions}
    for step in range(8):
        reps = list(dict.fromkeys(group.values()))
        a, b = rng.sample(reps, 2)
        if graph.reachable(a, b) or graph.reachable(b, a):
            continue
        merged = Instruction("tuple", Shape.tuple([]), [], {}, f"m{step}")
        graph.contract(a, b, merged)
        edges[merged] = (edges.pop(a) | edges.pop(b)) - {a, b}
        for v in edges:
            if a in edges[v] or b in edges[v]:
                edges[v] = (edges[v] - {a, b}) | {merged}
        for k, v in group.items():
            if v in (a, b):
                group[k] = merged
        group[merged] = merged
        reps = list(dict.fromkeys(group.values()))
        truth = _closure(edges, reps)
        for x in reps:
            for y in reps:
                if x is not y:
                    assert graph.reachable(x, y) == (y in truth[x]), (seed, step)
        for x in reps:
            for y in edges[x]:
                assert graph.ord[graph.node[x]] < graph.ord[graph.node[y]]


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("dot_merger.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = merge(chunk.text)
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    check_module(text, DotMerger, fixture)


def add_twin_dots(module) -> bool:
    """Give every float dot of the entry a twin on the negated rhs, and use
    ``(d - twin) * 0.5`` (= d exactly) in its place: each pair shares its lhs."""
    comp = module.entry
    changed = False
    for d in [i for i in comp.post_order() if i.opcode == "dot" and len(i.operands) == 2]:
        et = d.shape.element_type
        if not is_float(et) or d.control_predecessors:
            continue
        lhs, rhs = d.operands
        neg = Instruction("negate", rhs.shape, [rhs], {}, "neg_rhs")
        comp.add_instruction(neg)
        twin = d.clone_with([lhs, neg], name="twin")
        twin.attrs.pop("control-predecessors", None)
        comp.add_instruction(twin)
        users = d.users
        was_root = d.is_root
        diff = Instruction("subtract", d.shape, [d, twin], {}, "diff")
        comp.add_instruction(diff)
        half = Instruction("constant", Shape.array(et, ()), [], {}, "half", payload="0.5")
        comp.add_instruction(half)
        bhalf = Instruction("broadcast", d.shape, [half], {"dimensions": "{}"}, "bhalf")
        comp.add_instruction(bhalf)
        same = Instruction("multiply", d.shape, [diff, bhalf], {}, "same")
        comp.add_instruction(same)
        for u in users:
            u.replace_operand_with(d, same)
        if was_root:
            comp.root = same
        changed = True
    return changed


@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module_with_twin_dots(mid, text, fixture):
    """Every real float dot gets a twin sharing its lhs: the merger joins them (where the
    other operand has one non-contracting dim) without changing the results."""
    check_variant(text, add_twin_dots, DotMerger, fixture, exact=False, rtol=1e-4,
                  atol=1e-5)


def test_real_modules_exercise_the_twin_variant():
    merged = 0
    for _, text, _ in MODULES:
        if " dot(" not in text:
            continue
        try:
            m = parse_hlo(text, "<module>")
            verify(m)
        except HloError:
            continue
        if add_twin_dots(m):
            merged += DotMerger().run(m)
    assert merged >= 3
