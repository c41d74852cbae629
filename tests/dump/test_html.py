"""HTML pages: self-contained or with shared assets, no remote loads, bounded size."""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.cli import main as cli_main
from hlo_opt.dump import html as html_mod
from hlo_opt.dump.html import (ASSETS, SHARED_ASSETS_DIR, SHARED_FILES, asset_bytes, module_to_html,
                               write_shared_assets)
from tests.conftest import SAMPLES, corpus_files, require_corpus, sample_files
from tests.dump.reference_model import reference_model

# A resource load from a remote URL in any of the forms an HTML page can make one.
REMOTE_LOAD = re.compile(
    r"""(?:\b(?:src|href|srcset|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)"""
    r"""|(?:@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//)"""
    r"""|(?:url\(\s*["']?\s*(?:https?:)?//)"""
    r"""|(?:\bimport\s*\(?\s*["'](?:https?:)?//)"""
    r"""|(?:\b(?:fetch|importScripts|Worker|EventSource|WebSocket|sendBeacon)\s*\(\s*["'](?:https?:|wss?:)?//)"""
    r"""|(?:XMLHttpRequest[^;]{0,200}open\s*\([^)]*["']https?://)""", re.I)


def find_remote_load(text: str) -> str | None:
    """REMOTE_LOAD over the text near each '//' (every pattern needs one): the whole-text
    regex costs seconds on the 1.3 MB Graphviz script."""
    for m in re.finditer("//", text):
        window = text[max(0, m.start() - 250):m.end() + 80]
        if REMOTE_LOAD.search(window):
            return window
    return None


def _load(path: Path):
    return parse_hlo_modules(path.read_text(), str(path))[0]


def page_data(page: str) -> dict:
    """Decode the page's embedded model, whichever encoding it uses."""
    m = re.search(r'<script type="application/json" id="hlo-graph-data" '
                  r'data-encoding="([^"]+)">(.*?)</script>', page, re.S)
    assert m, "no data element"
    encoding, payload = m.groups()
    if encoding == "gzip+base64":
        return json.loads(gzip.decompress(base64.b64decode(payload)))
    assert encoding == "json"
    return json.loads(payload)


@pytest.fixture(scope="module")
def mobilenet():
    return _load(SAMPLES / "mobilenet_cluster.hlo")


def test_the_remote_load_scanner_catches_remote_loads():
    for bad in ('<script src="https://cdn.jsdelivr.net/npm/viz.js"></script>',
                "<link rel=stylesheet href='//fonts.googleapis.com/css'>",
                "<style>@import url(https://fonts.googleapis.com/css?family=Roboto);</style>",
                "<div style=\"background: url('http://x.test/a.png')\"></div>",
                "fetch('https://x.test/data.json')",
                "import('https://x.test/mod.js')",
                "<img src=http://x.test/a.png>"):
        assert REMOTE_LOAD.search(bad) and find_remote_load("x" * 300 + "\n" + bad), bad
    for fine in ('<svg xmlns="http://www.w3.org/2000/svg">', "see https://graphviz.org",
                 '<a href="hlo_opt_assets/THIRD_PARTY_NOTICES.txt">'):
        assert not REMOTE_LOAD.search(fine) and not find_remote_load(fine), fine


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.stem)
def test_pages_load_nothing_remote(path, tmp_path):
    module = _load(path)
    href = write_shared_assets(str(tmp_path))
    for page in (module_to_html(module, path.stem),
                 module_to_html(module, path.stem, href),
                 module_to_html(module, path.stem, href, top_level=True)):
        assert find_remote_load(page) is None, find_remote_load(page)
    for name in SHARED_FILES:
        text = (tmp_path / href / name).read_text(encoding="utf-8")
        assert find_remote_load(text) is None, name


def test_self_contained_page_inlines_every_script(mobilenet):
    page = module_to_html(mobilenet, "mobilenet")
    assert not re.search(r"<(?:script|link|img|iframe)[^>]*\b(?:src|href)=", page)
    assert html_mod.asset_text(html_mod.VIZ_JS) in page  # Graphviz, unmodified
    assert html_mod.asset_text(html_mod.APP_JS) in page
    assert html_mod.asset_text(html_mod.MODEL_JS) in page
    assert "Content-Security-Policy" in page and "'wasm-unsafe-eval'" in page
    assert "connect-src 'none'" in page
    assert "Eclipse Public License - v 1.0" in page  # the licence travels with the page
    assert page.count("</script>") == page.count("<script")


def test_shared_asset_page_links_relative_assets_and_stays_small(mobilenet, tmp_path):
    href = write_shared_assets(str(tmp_path))
    assert href == SHARED_ASSETS_DIR
    page = module_to_html(mobilenet, "mobilenet", asset_dir_href=href)
    srcs = re.findall(r'<script src="([^"]+)"', page)
    assert srcs == [f"{href}/viz-global.js", f"{href}/hlo_model.js", f"{href}/hlo_graph.js"]
    assert re.search(rf'<link rel="stylesheet" href="{href}/hlo_graph.css">', page)
    for src in srcs:
        assert (tmp_path / src).is_file()
    assert len(page) < 100_000  # only the module's data and text
    assert html_mod.asset_text(html_mod.VIZ_JS)[:2000] not in page


def test_write_shared_assets_is_complete_idempotent_and_readable(tmp_path):
    href = write_shared_assets(str(tmp_path))
    target = tmp_path / href
    assert sorted(p.name for p in target.iterdir()) == sorted(SHARED_FILES)
    for name in SHARED_FILES:
        assert (target / name).read_bytes() == asset_bytes(name)
        assert (target / name).stat().st_mode & 0o444 == 0o444
    stamp = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    (target / "hlo_graph.css").write_text("stale")
    write_shared_assets(str(tmp_path))
    assert (target / "hlo_graph.css").read_bytes() == (ASSETS / "hlo_graph.css").read_bytes()
    assert all(p.stat().st_mtime_ns == stamp[p.name] for p in target.iterdir()
               if p.name != "hlo_graph.css")
    assert not [p for p in target.iterdir() if p.name.startswith(".tmp")]


def test_licence_notices_ship_with_the_vendored_graphviz():
    notices = (ASSETS / "THIRD_PARTY_NOTICES.txt").read_text()
    assert "@viz-js/viz 3.31.0" in notices and "EPL-1.0" in notices
    assert (ASSETS / "LICENSE-graphviz-EPL-1.0.txt").read_text().startswith(
        "Eclipse Public License - v 1.0")
    assert "Permission is hereby granted" in (ASSETS / "LICENSE-viz-js-MIT.txt").read_text()
    head = (ASSETS / "viz-global.js").read_text()[:300]
    assert "Viz.js 3.31.0" in head and "Graphviz" in head


def test_embedded_data_is_the_module_text_and_the_drawing_rules(mobilenet):
    data = page_data(module_to_html(mobilenet, "mobilenet"))
    assert data["v"] == html_mod.DATA_VERSION and data["cap"] == html_mod.VIEW_NODE_CAP
    assert data["module"] == mobilenet.name and data["topLevel"] is False
    assert data["instructionCount"] == mobilenet.instruction_count()
    lines = data["text"].split("\n")
    for inst in mobilenet.instructions():  # every instruction, as the printer writes it
        assert "  " + inst.to_text(large_constants=False) in lines
    assert data["rules"]["opcodeScheme"]["convolution"] == "dark_blue"
    # what the page builds from it (hlo_model.js; tests/dump/test_html_model.py: equal)
    model = reference_model(mobilenet)
    by_name = {i["n"]: i for i in model["insts"]}
    conv = by_name["convolution.36"]
    assert conv["s"] == "dark_blue" and "Conv2D" in conv["t"]
    assert [model["insts"][o]["n"] for o in conv["o"]] == ["reshape.29", "arg27.28"]
    assert by_name["constant.80"].get("h") == 1  # inlined into its user


def test_top_level_page_leaves_fusion_bodies_out():
    require_corpus()
    path = next(p for p in corpus_files() if p.name.endswith("gpu__tests__kernel_reuse.hlo"))
    module = _load(path)
    full, top = (page_data(module_to_html(module, "k", top_level=t)) for t in (False, True))
    assert top["topLevel"] is True and full["text"] == top["text"]
    full, top = reference_model(module), reference_model(module, top_level=True)
    assert [c for c in full["comps"] if c["k"] == "fusion"]
    assert not [c for c in top["comps"] if c["k"] == "fusion"]
    assert not any("f" in i for i in top["insts"])


def test_large_models_are_compressed_and_round_trip(monkeypatch, mobilenet):
    monkeypatch.setattr(html_mod, "COMPRESS_ABOVE", 1000)
    page = module_to_html(mobilenet, "m")
    assert 'data-encoding="gzip+base64"' in page
    monkeypatch.setattr(html_mod, "COMPRESS_ABOVE", 10**9)
    plain = module_to_html(mobilenet, "m")
    assert 'data-encoding="json"' in plain
    assert page_data(page) == page_data(plain)


def test_hostile_text_cannot_close_the_script_element():
    module = parse_hlo(r'''HloModule m
ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(%p), metadata={op_name="</script><script>alert(1)</script>"}
}''')
    page = module_to_html(module, "</title><b>x")
    assert "<script>alert(1)" not in page
    assert "<title>&lt;/title&gt;&lt;b&gt;x</title>" in page
    data = page_data(page)
    assert 'op_name="</script><script>alert(1)</script>"' in data["text"]
    assert reference_model(module)["insts"][-1]["t"] == "</script><script>alert(1)</script>"


def test_pages_for_a_3000_instruction_module_stay_a_few_mb(tmp_path):
    bench = _benchmark_module()
    module = parse_hlo(bench.make_module_text(3000), "bench")
    assert 2800 <= module.instruction_count() <= 3300
    self_contained = module_to_html(module, "bench")
    shared = module_to_html(module, "bench", write_shared_assets(str(tmp_path)))
    assert len(self_contained.encode()) < 3_000_000
    assert len(shared.encode()) < 1_000_000
    assert page_data(shared)["instructionCount"] == module.instruction_count()


def _benchmark_module():
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "html_bench.py"
    spec = importlib.util.spec_from_file_location("html_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_page_script_is_valid_javascript():
    for name in ("hlo_graph.js", "hlo_model.js"):
        r = subprocess.run(["node", "--check", str(ASSETS / name)], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()


# ---- hlo-opt html -------------------------------------------------------------------------
def test_html_command_writes_a_self_contained_page(tmp_path):
    out = tmp_path / "m.html"
    r = CliRunner().invoke(cli_main, ["html", str(SAMPLES / "while_loop.hlo"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>while_loop.24</title>" in page
    assert not (tmp_path / SHARED_ASSETS_DIR).exists()


def test_html_command_shared_assets_and_top_level(tmp_path):
    out = tmp_path / "sub" / "m.html"
    os.makedirs(out.parent)
    r = CliRunner().invoke(cli_main, ["html", str(SAMPLES / "mobilenet_cluster.hlo"), "-o",
                                      str(out), "--shared-assets", "--top-level",
                                      "--title", "mine"])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert f'src="{SHARED_ASSETS_DIR}/viz-global.js"' in page
    assert (out.parent / SHARED_ASSETS_DIR / "viz-global.js").is_file()
    assert page_data(page)["topLevel"] is True and "<title>mine</title>" in page


def test_html_command_reports_user_errors_in_one_line(tmp_path):
    from hlo_opt.errors import HloError
    r = CliRunner().invoke(cli_main, ["html", str(tmp_path / "missing.hlo"), "-o",
                                      str(tmp_path / "x.html")])
    assert r.exit_code != 0 and isinstance(r.exception, HloError)
    assert "no such file" in str(r.exception)
