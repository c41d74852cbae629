"""DOT output: XLA's hlo_graph_dumper conventions, checked on parsed structure."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.dump.dot import (SCHEMES, GraphModel, dot_quote, html_escape, module_to_dot,
                              parse_metadata)
from tests.conftest import corpus_files, require_corpus, sample_files
from tests.dump.dot_syntax import (DotSyntaxError, check_html_label, label_text, parse_dot,
                                   unescape_esc_string)

FILL = {name: s[1] for name, s in SCHEMES.items()}

MIXED = r"""
HloModule mixed

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.r = f32[] add(%a, %b)
}

%fused_body (p0: f32[64,64], p1: f32[64,64]) -> f32[64,64] {
  %p0.f = f32[64,64]{1,0} parameter(0)
  %p1.f = f32[64,64]{1,0} parameter(1)
  %c.f = f32[] constant(0)
  %bc.f = f32[64,64]{1,0} broadcast(%c.f), dimensions={}
  %bitcast.f = f32[64,64]{1,0} bitcast(%p1.f)
  %mul.f = f32[64,64]{1,0} multiply(%p0.f, %bitcast.f)
  ROOT %max.f = f32[64,64]{1,0} maximum(%mul.f, %bc.f)
}

ENTRY %main (x: f32[64,64], y: f32[64,64], s: f32[4], t: (f32[4], f32[4])) -> (f32[64,64], f32[], f32[4]) {
  %x = f32[64,64]{1,0} parameter(0), metadata={op_type="Arg" op_name="model/x" source_file="m.py" source_line=7}
  %y = f32[64,64]{1,0} parameter(1)
  %s = f32[4]{0} parameter(2)
  %t = (f32[4]{0}, f32[4]{0}) parameter(3)
  %dot.1 = f32[64,64]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_type="MatMul" op_name="model/dense/MatMul"}
  %transpose.1 = f32[64,64]{0,1} transpose(%dot.1), dimensions={1,0}
  %copy.1 = f32[64,64]{1,0} copy(%transpose.1)
  %fusion.1 = f32[64,64]{1,0} fusion(%copy.1, %y), kind=kLoop, calls=%fused_body
  %bitcast.1 = f32[4096]{0} bitcast(%fusion.1)
  %zero = f32[] constant(0)
  %reduce.1 = f32[] reduce(%bitcast.1, %zero), dimensions={0}, to_apply=%add_f32
  %small = f32[4]{0} constant({1, 2, 3, 4})
  %big = f32[9]{0} constant({1, 2, 3, 4, 5, 6, 7, 8, 9})
  %gte.0 = f32[4]{0} get-tuple-element(%t), index=0
  %add.2 = f32[4]{0} add(%s, %small)
  %sub.2 = f32[4]{0} subtract(%add.2, %gte.0)
  %big9 = f32[9]{0} negate(%big)
  %custom-call.1 = f32[4]{0} custom-call(%sub.2), custom_call_target="foo"
  %all-reduce.1 = f32[4]{0} all-reduce(%custom-call.1), replica_groups={}, to_apply=%add_f32
  %after = f32[4]{0} negate(%all-reduce.1), control-predecessors={%big9}
  ROOT %tuple.1 = (f32[64,64]{1,0}, f32[], f32[4]{0}) tuple(%fusion.1, %reduce.1, %after)
}
"""


@pytest.fixture(scope="module")
def mixed():
    module = parse_hlo(MIXED, "mixed.hlo")
    return module, parse_dot(module_to_dot(module)), parse_dot(module_to_dot(module, True))


def fill(graph, name):
    return graph.nodes[name]["fillcolor"]


def node_label(graph, name):
    return label_text(graph.nodes[name]["label"])


# ---- structure ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
@pytest.mark.parametrize("top_level", [False, True], ids=["full", "top_level"])
def test_sample_modules_give_well_formed_dot(path, top_level):
    module = parse_hlo(path.read_text(), str(path))
    graph = parse_dot(module_to_dot(module, top_level))  # raises on any structural error
    assert graph.nodes, "no nodes drawn"
    for attrs in graph.nodes.values():
        check_html_label(attrs["label"])
        assert attrs["fillcolor"] in FILL.values()
    for cluster in graph.clusters.values():
        check_html_label(cluster.attrs["label"])
        assert cluster.name.startswith("cluster_")
    assert f"ROOT:{module.entry.name}" in graph.nodes or module.entry.root.opcode == "constant"


def test_the_structure_checker_rejects_broken_dot():
    with pytest.raises(DotSyntaxError):
        parse_dot('digraph G {\n"a" [label=<x>];\n"a" -> "b";\n}')
    with pytest.raises(DotSyntaxError):
        parse_dot('digraph G {\n"a" [label="x];\n}')
    with pytest.raises(DotSyntaxError):
        parse_dot('digraph G {\nsubgraph "cluster_x" {\n"a";\n}')
    with pytest.raises(DotSyntaxError):
        check_html_label("a < b")


def test_output_is_deterministic_and_survives_a_print_parse_round_trip(mixed):
    module, _, _ = mixed
    text = module_to_dot(module)
    assert text == module_to_dot(module)
    again = parse_hlo(module.to_text(), "again.hlo")
    assert module_to_dot(again) == text


# ---- fusions ------------------------------------------------------------------------------
def test_fusion_is_a_cluster_holding_its_fused_computation(mixed):
    _, g, _ = mixed
    cluster = g.clusters["cluster_fused_body"]
    assert set(cluster.nodes) == {"p0.f", "p1.f", "bitcast.f", "mul.f", "max.f"}
    assert "fusion.1" not in g.nodes  # drawn as its body, like XLA
    assert "Fused expression for fusion.1" in label_text(cluster.attrs["label"])
    assert cluster.attrs["fillcolor"] == "#f5f5f5"
    # fusion operands feed the fused parameters; the fused root feeds the fusion's users
    assert g.edges_between("copy.1", "p0.f") and g.edges_between("y", "p1.f")
    assert g.edges_between("max.f", "bitcast.1")
    # the fused broadcast of a scalar constant is inlined into its user
    assert "bc.f" not in g.nodes
    assert "operand 1 = f32[64,64] 0" in node_label(g, "max.f")
    # a fused bitcast is a data-movement op (green); an unfused one is free (white)
    assert fill(g, "bitcast.f") == FILL["green"] and fill(g, "bitcast.1") == FILL["white"]


def test_top_level_collapses_fusions_into_gray_nodes(mixed):
    _, _, top = mixed
    assert not top.clusters
    assert fill(top, "fusion.1") == FILL["gray"]
    assert "p0.f" not in top.nodes
    assert top.edges_between("copy.1", "fusion.1") and top.edges_between("fusion.1", "bitcast.1")


# ---- colours, shapes, labels --------------------------------------------------------------
def test_xla_colours_by_opcode_category(mixed):
    _, g, _ = mixed
    assert fill(g, "dot.1") == FILL["dark_blue"]
    assert fill(g, "transpose.1") == FILL["green"] and fill(g, "copy.1") == FILL["green"]
    assert fill(g, "reduce.1") == FILL["purple"]
    assert fill(g, "custom-call.1") == FILL["dark_green"]
    assert fill(g, "all-reduce.1") == FILL["brown"]
    assert fill(g, "tuple.1") == FILL["white"] and fill(g, "mul.f") == FILL["white"]
    assert g.nodes["dot.1"]["fontcolor"] == "white"


def test_parameters_are_orange_light_when_small_and_darker_when_large(mixed):
    _, g, _ = mixed
    assert fill(g, "x") == FILL["dark_orange"]   # 4096 elements: not small
    assert fill(g, "s") == FILL["orange"]        # 4 elements
    assert node_label(g, "x").startswith("Parameter 0")


def test_while_is_an_ellipse_and_its_computations_are_subcomputation_clusters():
    path = next(p for p in sample_files() if p.stem == "while_loop")
    g = parse_dot(module_to_dot(parse_hlo(path.read_text(), str(path))))
    whiles = [n for n, a in g.nodes.items() if n.startswith("while")]
    assert whiles and all(g.nodes[n]["shape"] == "ellipse" for n in whiles)
    assert all(g.nodes[n]["fillcolor"] == FILL["dark_green"] for n in whiles)
    subs = [c for c in g.clusters.values() if "Subcomputation for" in label_text(c.attrs["label"])]
    assert len(subs) == 2
    dashed = [a for s, d, a in g.edges if a.get("style") == "dashed"]
    assert len(dashed) == 2 and all(a["ltail"].startswith("cluster_") for a in dashed)


def test_trivial_called_computations_are_summarised_not_drawn(mixed):
    _, g, _ = mixed
    assert "Subcomputation: add" in node_label(g, "reduce.1")
    assert "cluster_add_f32" not in g.clusters and "add.r" not in g.nodes


def test_non_trivial_comparator_is_drawn_and_compare_direction_is_named():
    sort = next(p for p in sample_files() if p.stem == "sort")
    g = parse_dot(module_to_dot(parse_hlo(sort.read_text(), str(sort))))
    assert any(n.startswith("cluster_compare") for n in g.clusters)  # 4 parameters
    trivial = parse_hlo("""HloModule m
%lt (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(%a, %b), direction=LT
}
%gt_swapped (a: f32[], b: f32[]) -> pred[] {
  %a.1 = f32[] parameter(0)
  %b.1 = f32[] parameter(1)
  ROOT %c.1 = pred[] compare(%b.1, %a.1), direction=GT
}
ENTRY %e (k: f32[8]) -> (f32[8], f32[8]) {
  %k = f32[8]{0} parameter(0)
  %s0 = f32[8]{0} sort(%k), dimensions={0}, to_apply=%lt
  %s1 = f32[8]{0} sort(%k), dimensions={0}, to_apply=%gt_swapped
  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(%s0, %s1)
}""")
    g = parse_dot(module_to_dot(trivial))
    assert "Subcomputation: less-than" in node_label(g, "s0")
    # operands swapped on a non-commutative comparison: not trivial, drawn as a cluster
    assert "cluster_gt_swapped" in g.clusters


def test_small_constants_print_their_value_and_larger_ones_their_name(mixed):
    _, g, _ = mixed
    assert "small" not in g.nodes and "big" not in g.nodes and "zero" not in g.nodes
    assert "operand 1 = f32[4] {1, 2, 3, 4}" in node_label(g, "add.2")
    assert "operand = constant big f32[9]" in node_label(g, "big9")
    assert "operand 1 = f32[] 0" in node_label(g, "reduce.1")
    assert not any(s in ("small", "big", "zero") for s, _, _ in g.edges)


def test_a_root_constant_is_drawn():
    module = parse_hlo("HloModule m\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(3)\n}")
    g = parse_dot(module_to_dot(module))
    assert "c" in g.nodes and "ROOT:e" not in g.nodes  # XLA adds no ROOT tag for constants


def test_get_tuple_elements_are_merged_into_their_users(mixed):
    _, g, _ = mixed
    assert "gte.0" not in g.nodes
    assert "operand 1 = tuple-element 0 of t f32[4]{0}" in node_label(g, "sub.2")
    assert g.edges_between("t", "sub.2"), "the edge comes from the tuple itself"


def test_tuple_parameter_with_only_gte_users_is_merged():
    module = parse_hlo("""HloModule m
ENTRY %e (p: (f32[2], f32[2], f32[2], f32[2])) -> f32[2] {
  %p = (f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}) parameter(0)
  %g0 = f32[2]{0} get-tuple-element(%p), index=0
  %g1 = f32[2]{0} get-tuple-element(%p), index=1
  %g2 = f32[2]{0} get-tuple-element(%p), index=2
  %g3 = f32[2]{0} get-tuple-element(%p), index=3
  %a = f32[2]{0} add(%g0, %g1)
  %b = f32[2]{0} add(%g2, %g3)
  ROOT %c = f32[2]{0} add(%a, %b)
}""")
    g = parse_dot(module_to_dot(module))
    assert "p" not in g.nodes
    assert "operand 0 = tuple-element 0 of p f32[2]{0}" in node_label(g, "a")
    assert not g.in_edges("a"), "merged parameters draw no edges"


# ---- edges --------------------------------------------------------------------------------
def test_arrowheads_hollow_below_4096_elements_filled_from_there(mixed):
    _, g, _ = mixed
    assert g.edges_between("x", "dot.1")[0]["arrowhead"] == "normal"     # 64x64 = 4096
    assert g.edges_between("s", "add.2")[0]["arrowhead"] == "empty"      # 4


def test_operand_index_labels_only_with_several_operands(mixed):
    _, g, _ = mixed
    assert g.edges_between("x", "dot.1")[0]["headlabel"] == "0"
    assert g.edges_between("y", "dot.1")[0]["headlabel"] == "1"
    assert "headlabel" not in g.edges_between("dot.1", "transpose.1")[0]


def test_edges_carry_the_operand_shape(mixed):
    _, g, _ = mixed
    assert g.edges_between("dot.1", "transpose.1")[0]["xlabel"] == "f32[64,64]"
    assert g.edges_between("t", "sub.2")[0]["xlabel"] == "f32[4]"  # the GTE's shape


def test_control_edges_are_dotted_gray_and_labelled_ctrl(mixed):
    _, g, _ = mixed
    (ctrl,) = [a for a in g.edges_between("big9", "after") if a.get("label") == "ctrl"]
    assert ctrl["style"] == "dotted" and ctrl["color"] == "gray"


# ---- metadata and escaping ---------------------------------------------------------------
def test_metadata_goes_into_tooltips(mixed):
    _, g, _ = mixed
    assert unescape_esc_string(g.nodes["x"]["tooltip"]) == \
        "model/x\nop_type: Arg\nsource: m.py:7"
    assert unescape_esc_string(g.nodes["dot.1"]["tooltip"]) == \
        "model/dense/MatMul\nop_type: MatMul"


def test_awkward_characters_are_escaped():
    module = parse_hlo(r'''HloModule m
ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(%p), metadata={op_type="A<B>&C" op_name="x\"y\\z</script>"}, frontend_attributes={k="<v & w>"}
}''')
    g = parse_dot(module_to_dot(module))
    assert unescape_esc_string(g.nodes["n"]["tooltip"]) == 'x"y\\z</script>\nop_type: A<B>&C'
    assert 'frontend_attributes={k="<v & w>"}' in node_label(g, "n")
    assert dot_quote('a"b\\c\nd') == r'"a\"b\\c\nd"'
    assert html_escape("<a & b>") == "&lt;a &amp; b&gt;"
    assert parse_metadata('{op_name="a \\"b\\"" source_line=3}') == {
        "op_name": 'a "b"', "source_line": "3"}


def test_a_4000_deep_chain_is_drawn_completely():
    body = "\n".join(f"  %n{i} = f32[8]{{0}} negate(%n{i - 1})" for i in range(1, 4001))
    module = parse_hlo(f"HloModule big\nENTRY %e (n0: f32[8]) -> f32[8] {{\n"
                       f"  %n0 = f32[8]{{0}} parameter(0)\n{body}\n}}")
    model = GraphModel(module)
    assert len(model.nodes) == 4001
    assert len(parse_dot(module_to_dot(module)).edges) == 4001  # 4000 + ROOT tag


# ---- Graphviz ------------------------------------------------------------------------------
# Graphviz's `dot` layout grows much faster than linearly: transformer_step's 2,790 nodes
# take about two minutes on two cores. Past this many nodes the graph is laid out by
# `osage` (under a second), which parses the same labels, HTML and clusters and reports
# the same errors; what is checked is that Graphviz accepts the text, not the drawing.
DOT_LAYOUT_MAX_NODES = 1000


def _graphviz_ok(text: str) -> tuple[bool, str]:
    engine = "dot" if text.count(" [label=") <= DOT_LAYOUT_MAX_NODES else "osage"
    r = subprocess.run(["dot", f"-K{engine}", "-Tsvg", "-o", "/dev/null"], input=text.encode(),
                       capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    return r.returncode == 0 and "Error" not in err and "Warning" not in err, err


needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz `dot` not installed (apt-get install -y graphviz)")


@needs_dot
@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_graphviz_renders_sample_modules(path):
    module = parse_hlo(path.read_text(), str(path))
    for top_level in (False, True):
        ok, err = _graphviz_ok(module_to_dot(module, top_level))
        assert ok, err


@needs_dot
def test_graphviz_renders_corpus_fusion_modules():
    require_corpus()
    checked = 0
    for path in corpus_files():
        text = path.read_text()
        if " fusion(" not in text:
            continue
        try:
            modules = parse_hlo_modules(text, str(path))
        except Exception:  # the parser's own tests cover parse failures
            continue
        for module in modules:
            ok, err = _graphviz_ok(module_to_dot(module))
            assert ok, f"{path.name}: {err}"
            checked += 1
    assert checked >= 20


def test_every_parsable_corpus_module_gives_well_formed_dot():
    require_corpus()
    checked = 0
    for path in corpus_files():
        try:
            modules = parse_hlo_modules(path.read_text(), str(path))
        except Exception:
            continue
        for module in modules:
            for top_level in (False, True):
                graph = parse_dot(module_to_dot(module, top_level))
                for attrs in graph.nodes.values():
                    check_html_label(attrs["label"])
            checked += 1
    assert checked >= 150
