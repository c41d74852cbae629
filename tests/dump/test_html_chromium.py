"""The HTML pages in a real headless Chromium: nodes render, nothing leaves the machine.

Skips (with the reason printed) when Debian's /usr/bin/chromium is absent; install it with
``apt-get install -y chromium``.  Pages are loaded from file:// with every host name
unresolvable, a Content-Security-Policy that refuses remote loads, and the DevTools
network log recording every request the page makes.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.dump.html import VIEW_NODE_CAP, module_to_html, write_shared_assets
from tests.conftest import SAMPLES, corpus_files, require_corpus
from tests.dump.chromium_driver import Chromium, chromium_path

if chromium_path() is None:
    print("\ntest_html_chromium: skipped: /usr/bin/chromium not found "
          "(install it with: apt-get install -y chromium)")
    pytestmark = pytest.mark.skip(reason="/usr/bin/chromium not found "
                                         "(apt-get install -y chromium)")


@pytest.fixture(scope="module")
def browser():
    with Chromium() as b:
        yield b


def _write_pages(module, tmp: Path, stem: str, top_level: bool = False) -> dict[str, Path]:
    href = write_shared_assets(str(tmp))
    pages = {"self_contained": tmp / f"{stem}.self.html", "shared_assets": tmp / f"{stem}.html"}
    pages["self_contained"].write_text(module_to_html(module, stem, top_level=top_level),
                                       encoding="utf-8")
    pages["shared_assets"].write_text(module_to_html(module, stem, href, top_level=top_level),
                                      encoding="utf-8")
    return pages


def _assert_rendered_offline(result):
    assert result.errors == [], result.errors
    assert result.rendered_nodes is not None, f"no data-rendered-nodes: {result.body_attrs}"
    assert result.rendered_nodes > 0
    assert result.remote_requests == [], result.remote_requests
    assert "data-blocked-requests" not in result.body_attrs, result.body_attrs
    assert "data-render-error" not in result.body_attrs
    assert all(u.startswith(("file:", "data:", "blob:", "about:")) for u in result.requests)
    assert result.requests, "the DevTools network log saw no request at all"


def _kernel_reuse_module():
    require_corpus()
    path = next(p for p in corpus_files() if p.name.endswith("gpu__tests__kernel_reuse.hlo"))
    return parse_hlo_modules(path.read_text(), str(path))[0]


@pytest.mark.parametrize("mode", ["self_contained", "shared_assets"])
def test_mobilenet_renders_offline(browser, tmp_path, mode):
    module = parse_hlo((SAMPLES / "mobilenet_cluster.hlo").read_text(), "mobilenet")
    pages = _write_pages(module, tmp_path, "mobilenet")
    r = browser.load(pages[mode].as_uri())
    _assert_rendered_offline(r)
    assert r.body_attrs["data-view"] == module.entry.name
    assert r.rendered_nodes >= 90  # 98 drawn nodes incl. parameter clones and ROOT
    assert r.body_attrs["data-view-mode"] == "full"
    if mode == "shared_assets":
        assert any(u.endswith("/hlo_opt_assets/viz-global.js") for u in r.requests)


@pytest.mark.parametrize("mode", ["self_contained", "shared_assets"])
def test_corpus_fusion_module_renders_with_fusion_clusters(browser, tmp_path, mode):
    module = _kernel_reuse_module()
    pages = _write_pages(module, tmp_path, "kernel_reuse")
    r = browser.load(pages[mode].as_uri(), evaluate="""(() => {
        const svg = document.querySelector('#graph svg');
        return {clusters: svg.querySelectorAll('g.cluster').length,
                fusionNodes: svg.querySelectorAll('g.node.i' +
                    hloPage.lookupName('fusion')).length};
    })()""")
    _assert_rendered_offline(r)
    assert r.body_attrs["data-view-mode"] == "expanded"
    assert r.evaluated == {"clusters": 3, "fusionNodes": 0}


@pytest.mark.parametrize("top_level", [False, True])
def test_the_page_builds_the_model_graph_model_decides(browser, tmp_path, top_level):
    """hlo_model.js in the browser, from the text the page ships (node checks the same on
    every sample and corpus module: test_html_model.py)."""
    from tests.dump.reference_model import reference_model
    module = parse_hlo_modules(_kernel_reuse_module().to_text(), "round-trip")[0]
    pages = _write_pages(module, tmp_path, "model", top_level=top_level)
    r = browser.load(pages["shared_assets"].as_uri(), evaluate="""(() => {
        const d = hloPage.data();
        for (let i = 0; i < d.insts.length; i++) d.style(i);  // labels are made on demand
        return JSON.stringify({comps: d.comps, insts: d.insts});
    })()""")
    _assert_rendered_offline(r)
    import json
    assert json.loads(r.evaluated) == reference_model(module, top_level)


def test_top_level_page_draws_fusions_as_nodes(browser, tmp_path):
    module = _kernel_reuse_module()
    pages = _write_pages(module, tmp_path, "kernel_reuse_top", top_level=True)
    r = browser.load(pages["shared_assets"].as_uri(), evaluate="""(() => {
        const svg = document.querySelector('#graph svg');
        return svg.querySelectorAll('g.cluster').length;
    })()""")
    _assert_rendered_offline(r)
    assert r.evaluated == 0 and r.body_attrs["data-view-mode"] == "collapsed"


def test_selecting_highlights_operands_and_users_in_graph_and_text(browser, tmp_path):
    module = parse_hlo((SAMPLES / "mobilenet_cluster.hlo").read_text(), "mobilenet")
    pages = _write_pages(module, tmp_path, "mobilenet")
    r = browser.load(pages["shared_assets"].as_uri(), evaluate="""(async () => {
        hloPage.select(hloPage.lookupName('add.38'));
        await new Promise(res => setTimeout(res, 300));   // the text pane fills in chunks
        const svg = document.querySelector('#graph svg');
        const names = sel => [...document.querySelectorAll(sel)].map(e => e.textContent);
        return {
          selNodes: svg.querySelectorAll('g.node.sel').length,
          opndNodes: svg.querySelectorAll('g.node.opnd').length,
          userNodes: svg.querySelectorAll('g.node.user').length,
          inEdges: svg.querySelectorAll('g.edge.in').length,
          outEdges: svg.querySelectorAll('g.edge.out').length,
          selLine: names('#hlo-text .ln.sel'),
          opndLines: names('#hlo-text .ln.opnd').length,
          userLines: names('#hlo-text .ln.user').length,
          details: document.getElementById('details').textContent,
        };
    })()""")
    _assert_rendered_offline(r)
    e = r.evaluated
    assert e["selNodes"] == 1 and e["opndNodes"] == 2 and e["userNodes"] == 1
    assert e["inEdges"] == 2 and e["outEdges"] == 1
    assert len(e["selLine"]) == 1 and "%add.38 = " in e["selLine"][0]
    assert e["opndLines"] == 2 and e["userLines"] == 1
    assert "convolution.36" in e["details"] and "BiasAdd" in e["details"]


def test_clicking_the_text_and_double_clicking_a_while_navigate(browser, tmp_path):
    module = parse_hlo((SAMPLES / "while_loop.hlo").read_text(), "while_loop")
    pages = _write_pages(module, tmp_path, "while_loop")
    r = browser.load(pages["self_contained"].as_uri(), evaluate="""(async () => {
        await new Promise(res => setTimeout(res, 200));          // text pane filled
        const ref = [...document.querySelectorAll('#hlo-text .ref')]
            .find(e => e.dataset.r === 'tuple.3');
        ref.click();
        const selected = document.querySelector('#hlo-text .ln.sel').textContent;
        const node = document.querySelector('#graph svg g.node.i' + hloPage.lookupName('while.4'));
        node.querySelector('polygon, ellipse, path')
            .dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));
        await hloPage.idle();                                     // layout runs in a worker
        return {selected, view: document.body.dataset.view,
                nodes: Number(document.body.dataset.renderedNodes)};
    })()""")
    _assert_rendered_offline(r)
    assert "%tuple.3 = " in r.evaluated["selected"]
    body = module.computation("body.5")
    assert r.evaluated["view"] == body.name and r.evaluated["nodes"] > 0


def test_fusions_expand_and_collapse(browser, tmp_path):
    module = _kernel_reuse_module()
    pages = _write_pages(module, tmp_path, "kernel_reuse")
    r = browser.load(pages["shared_assets"].as_uri(), evaluate="""(async () => {
        const count = () => document.querySelectorAll('#graph svg g.cluster').length;
        const before = count();
        const home = JSON.stringify(hloPage.state.home);
        document.getElementById('btn-zoom-in').click();
        const zoomed = document.querySelector('#graph svg').getAttribute('viewBox');
        hloPage.toggleFusion(hloPage.lookupName('fusion.1'));
        await hloPage.idle();
        const after = count();
        hloPage.toggleFusion(hloPage.lookupName('fusion.1'));   // back: the cached layout
        await hloPage.idle();
        const homeAgain = JSON.stringify(hloPage.state.home);
        document.getElementById('btn-collapse').click();
        await hloPage.idle();
        return {before, after, collapsed: count(), sameHome: home === homeAgain,
                zoomedHome: zoomed === home, nodes: Number(document.body.dataset.renderedNodes)};
    })()""")
    _assert_rendered_offline(r)
    assert r.evaluated["before"] == 3 and r.evaluated["after"] == 2
    assert r.evaluated["collapsed"] == 0 and r.evaluated["nodes"] == 11
    assert r.evaluated["sameHome"], "revisiting a cached view must not inherit its zoom"


def _bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "html_bench.py"
    spec = importlib.util.spec_from_file_location("html_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_big_module_shows_a_capped_neighbourhood_and_recentres(browser, tmp_path):
    module = parse_hlo(_bench().make_module_text(3000), "bench")
    pages = _write_pages(module, tmp_path, "bench")
    r = browser.load(pages["shared_assets"].as_uri(), timeout=120, evaluate="""(async () => {
        const first = {mode: document.body.dataset.viewMode,
                       nodes: Number(document.body.dataset.renderedNodes)};
        hloPage.select(hloPage.lookupName('dot.3.0'));
        await hloPage.idle();
        const svg = document.querySelector('#graph svg');
        return {first, centred: svg.querySelectorAll('g.node.sel').length,
                nodes: Number(document.body.dataset.renderedNodes),
                mode: document.body.dataset.viewMode};
    })()""")
    _assert_rendered_offline(r)
    first = r.evaluated["first"]
    assert first["mode"] == "neighbourhood" and 0 < first["nodes"] <= VIEW_NODE_CAP + 50
    assert r.evaluated["centred"] == 1 and r.evaluated["mode"] == "neighbourhood"


def test_a_remote_load_would_be_caught(browser, tmp_path):
    """The checks above can fail: a page that tries a remote image is reported."""
    module = parse_hlo((SAMPLES / "while_loop.hlo").read_text(), "while")
    page = module_to_html(module, "w").replace(
        '<body data-hlo-graph="1">',
        '<body data-hlo-graph="1"><img src="https://example.invalid/leak.png">')
    path = tmp_path / "leak.html"
    path.write_text(page, encoding="utf-8")
    r = browser.load(path.as_uri())
    assert r.remote_requests == ["https://example.invalid/leak.png"]
    assert int(r.body_attrs.get("data-blocked-requests", "0")) >= 1  # CSP, then the error
    assert "example.invalid/leak.png" in r.body_attrs["data-blocked-list"]
    assert r.rendered_nodes and r.rendered_nodes > 0  # the graph itself still renders


# ---- pages of real size: a 10k-instruction module after the gpu pipeline -----------------
def _gpu_pipeline_10k_module():
    """benchmarks/gpu_pipeline_bench.py's 10k-instruction module returning, as a training
    step does, a wide ROOT tuple (one output per block), after the ``gpu`` pipeline."""
    import re
    import sys
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from benchmarks.gpu_pipeline_bench import make_module
    text = make_module(10_000)
    outs = sorted(set(re.findall(r"%(x\d+\.t5) = (f32\[[^\]]*\]\{1,0\})", text)))
    shape = "(" + ", ".join(s for _, s in outs) + ")"
    text = re.sub(r"  ROOT %out = .*", f"  ROOT %out = {shape} tuple("
                  + ", ".join(f"{s} %{n}" for n, s in outs) + ")", text)
    module = parse_hlo(text, "big.hlo")
    assert module.instruction_count() > 9000 and len(outs) > 300
    passes_api.optimize(module, DebugOptions(), pipeline="gpu")
    return module


@pytest.fixture(scope="module")
def big_pages(tmp_path_factory):
    module = _gpu_pipeline_10k_module()
    tmp = tmp_path_factory.mktemp("big")
    pages = _write_pages(module, tmp, "module_0000.big.after_optimizations")
    top = _write_pages(module, tmp, "module_0000.big.after_optimizations.top_level", True)
    pages["top_level"] = top["shared_assets"]
    return pages


@pytest.mark.parametrize("mode", ["shared_assets", "self_contained", "top_level"])
def test_a_10k_instruction_module_after_the_gpu_pipeline_shows_a_graph(browser, big_pages,
                                                                        mode):
    r = browser.load(big_pages[mode].as_uri(), timeout=90)
    _assert_rendered_offline(r)
    print(f"\n{mode}: first graph after {r.seconds_to_render:.2f} s "
          f"({r.rendered_nodes} nodes, layout {r.body_attrs.get('data-layout')})")
    assert 20 <= r.rendered_nodes <= VIEW_NODE_CAP + 50
    left_out = r.body_attrs["data-left-out"]
    # what the view leaves out is said: the budget and the collapsed wide ROOT tuple
    assert "neighbourhood of out" in left_out and "more operands" in left_out
    assert r.body_attrs["data-layout"] in ("graphviz", "fallback")


def test_a_layout_past_its_time_limit_falls_back_to_the_layered_drawing(browser, big_pages):
    r = browser.load(big_pages["shared_assets"].as_uri() + "?fallback_ms=0&layout_limit_ms=1",
                     timeout=90, evaluate="""(async () => {
        await new Promise(res => setTimeout(res, 300));
        hloPage.select(hloPage.lookupName('out'));
        const svg = document.querySelector('#graph svg');
        return {sel: svg.querySelectorAll('g.node.sel').length,
                opnd: svg.querySelectorAll('g.node.opnd').length,
                note: document.getElementById('graph-note').textContent};
    })()""")
    _assert_rendered_offline(r)
    assert r.body_attrs["data-layout"] == "fallback" and r.rendered_nodes >= 20
    assert "simple layered drawing" in r.body_attrs["data-left-out"]
    e = r.evaluated
    assert e["sel"] == 1 and e["opnd"] >= 1 and e["note"].startswith("Left out:")


def test_a_page_moved_away_from_its_assets_says_what_is_missing(browser, tmp_path):
    module = parse_hlo((SAMPLES / "softmax.hlo").read_text(), "softmax")
    page = tmp_path / "moved.html"
    page.write_text(module_to_html(module, "moved", "hlo_opt_assets"), encoding="utf-8")
    r = browser.load(page.as_uri(), timeout=30, evaluate="""(() =>
        document.getElementById('graph-message').textContent)()""")
    assert r.rendered_nodes is None
    message = r.body_attrs["data-render-error"]
    assert "viz-global.js" in message and "hlo_graph.js" in message
    assert "hlo_opt_assets/" in message and "hlo-opt html" in message
    assert r.evaluated == message  # shown on the page, not only in an attribute
