"""HTML pages reuse the node records of unchanged computations across pages (a dump of
every pass): a page drawn with the cache warm is byte-identical to one drawn cold."""
from __future__ import annotations

import pytest

from hlo_opt import passes_api
from hlo_opt.api import parse_hlo
from hlo_opt.dump import html as html_mod
from hlo_opt.dump.graph_model import GraphModel
from hlo_opt.flags import DebugOptions


GRAPH_JSON = html_mod.graph_json


def _cold(module, title, top_level=False) -> str:
    saved = (html_mod._FRAGMENTS.copy(), html_mod._NODES.copy(), html_mod._fragment_nodes)
    html_mod.clear_fragment_cache()
    try:
        return GRAPH_JSON(module, title, top_level)
    finally:
        html_mod._FRAGMENTS.update(saved[0])
        html_mod._NODES.update(saved[1])
        html_mod._fragment_nodes = saved[2]


@pytest.fixture
def counting(monkeypatch):
    """Counts nodes styled (cache misses) and drawn."""
    seen = {"styled": 0, "drawn": 0}
    styled = GraphModel.style_node
    keys = GraphModel.computation_keys

    def style(self, node):
        seen["styled"] += 1
        return styled(self, node)

    def computation_keys(self, text_of):
        seen["drawn"] += len(self.nodes)
        return keys(self, text_of)
    monkeypatch.setattr(GraphModel, "style_node", style)
    monkeypatch.setattr(GraphModel, "computation_keys", computation_keys)
    html_mod.clear_fragment_cache()
    return seen


MLP = """HloModule mlp

%relu (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16] parameter(0)
  %z = f32[] constant(0)
  %zb = f32[8,16] broadcast(%z), dimensions={}
  ROOT %m = f32[8,16] maximum(%x, %zb)
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p: f32[8,16], w: f32[16,16], w2: f32[16,16]) -> (f32[8], f32[8,16]) {
  %p = f32[8,16] parameter(0)
  %w = f32[16,16] parameter(1)
  %w2 = f32[16,16] parameter(2)
  %d = f32[8,16] dot(%p, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_type="Dense" op_name="mlp/dense"}
  %c = f32[] constant(0.5)
  %cb = f32[8,16] broadcast(%c), dimensions={}
  %h = f32[8,16] multiply(%d, %cb)
  %r = f32[8,16] call(%h), to_apply=%relu
  %e = f32[8,16] exponential(%r)
  %n = f32[8,16] negate(%e)
  %d2 = f32[8,16] dot(%n, %w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %t = f32[8,16] tanh(%d2)
  %zero = f32[] constant(0)
  %red = f32[8] reduce(%t, %zero), dimensions={1}, to_apply=%sum
  ROOT %out = (f32[8], f32[8,16]) tuple(%red, %t)
}
"""


@pytest.mark.parametrize("pipeline", ["gpu", "optimization"])
def test_every_pass_page_is_the_same_warm_or_cold(counting, monkeypatch, tmp_path, pipeline):
    pages = []
    warm_json = html_mod.graph_json

    def checked(module, title, top_level=False):
        warm = warm_json(module, title, top_level)
        assert warm == _cold(module, title, top_level), title
        pages.append(title)
        return warm
    monkeypatch.setattr(html_mod, "graph_json", checked)
    opts = DebugOptions(xla_dump_to=str(tmp_path), xla_dump_hlo_pass_re=".*",
                        xla_dump_hlo_as_html=True)
    passes_api.optimize(parse_hlo(MLP, "mlp.hlo"), opts, pipeline=pipeline)
    assert len(pages) > 3
    # the cache did work: fewer nodes styled than drawn
    assert 0 < counting["styled"] < counting["drawn"]


FUSED = """HloModule f

%fused (p0: f32[4], p1: f32[]) -> f32[4] {
  %p0 = f32[4] parameter(0)
  %p1 = f32[] parameter(1)
  %b = f32[4] broadcast(%p1), dimensions={}
  ROOT %a = f32[4] add(%p0, %b)
}

%callee (q: f32[4]) -> f32[4] {
  %q = f32[4] parameter(0)
  ROOT %n = f32[4] negate(%q)
}

ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  %k = f32[] constant(VALUE)
  %f = f32[4] fusion(%x, %k), kind=kLoop, calls=%fused
  %src = f32[4] PRODUCER
  ROOT %c = f32[4] call(%src), to_apply=%callee
}
"""


@pytest.mark.parametrize("change", [("VALUE", "2", "3"),
                                    ("PRODUCER", "copy(%x)", "copy(%y)"),
                                    ("PRODUCER", "copy(%f)", "copy(%x)")])
def test_context_outside_a_computation_invalidates_its_records(counting, change):
    """A fused computation's labels inline its fusion's constant operands; a called
    computation's parameters name the producer in the caller: same computation text,
    different drawing."""
    what, before, after = change
    other = "copy(%x)" if what == "VALUE" else "2"
    fill = "VALUE" if what == "PRODUCER" else "PRODUCER"
    for value in (before, after):
        text = FUSED.replace(what, value).replace(fill, other)
        module = parse_hlo(text, "f.hlo")
        for top_level in (False, True):
            warm = html_mod.graph_json(module, "t", top_level)
            assert warm == _cold(module, "t", top_level)
    assert counting["styled"] < counting["drawn"]


def test_attribute_spelling_the_printer_normalises_still_counts(counting):
    """Labels show attributes as written (``dimensions={0, 1}``); the printed text, which
    drops the spaces, is the same for both spellings."""
    text = """HloModule t

ENTRY %main (x: f32[2,3]) -> f32[3,2] {
  %x = f32[2,3] parameter(0)
  ROOT %t = f32[3,2] transpose(%x), dimensions=DIMS
}
"""
    for dims in ("{1,0}", "{1, 0}"):
        module = parse_hlo(text.replace("DIMS", dims), "t.hlo")
        assert html_mod.graph_json(module, "t") == _cold(module, "t")


def test_a_tuple_parameter_merges_by_its_users(counting):
    """XLA merges a tuple parameter into its users when it has more than three, all
    get-tuple-elements: the parameter's own text is the same either way."""
    gtes = [f"  %g{i} = f32[2] get-tuple-element(%p), index={i}" for i in range(4)]
    for n in (4, 3):
        text = ("HloModule t\n\nENTRY %main (p: (f32[2], f32[2], f32[2], f32[2])) -> f32[2] {\n"
                "  %p = (f32[2], f32[2], f32[2], f32[2]) parameter(0)\n"
                + "\n".join(gtes[:n]) + "\n"
                + f"  ROOT %r = f32[2] add(%g0, %g{n - 1})\n}}\n")
        module = parse_hlo(text, "t.hlo")
        assert html_mod.graph_json(module, "t") == _cold(module, "t")
