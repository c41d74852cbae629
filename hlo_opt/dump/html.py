"""Offline HTML pages for HLO modules: graph (Graphviz compiled to WASM) beside the text.

The page needs no network: the vendored ``@viz-js/viz`` build (assets/viz-global.js)
lays out DOT in the browser, lazily, one view at a time.  Python ships the module's
text as the printer writes it and the drawing rules of
:mod:`hlo_opt.dump.graph_model` as JSON (gzip+base64 when large), so that a page costs
about what a text dump costs; assets/hlo_model.js builds the drawing model from them as
:class:`~hlo_opt.dump.graph_model.GraphModel` does, and assets/hlo_graph.js turns the
selected view into DOT: a
computation with its fusions collapsed or expanded, parameters cloned per use (long
edges make layered layouts explode), at most ``VIEW_NODE_CAP`` nodes.

Two modes: ``asset_dir_href=None`` inlines the scripts (one self-contained file, about
1.4 MB plus the module); otherwise the page loads them from that relative directory,
which :func:`write_shared_assets` fills once per dump directory.  Whole computations are
drawn up to ``VIEW_NODE_CAP`` nodes; bigger ones open on a neighbourhood of about
``NEIGHBOURHOOD_NODES`` nodes (grown by radius, "wider"/"narrower" up to the cap).
"""
from __future__ import annotations

import base64
import gzip
import json
import os
from functools import lru_cache
from pathlib import Path

from ..fileutil import write_atomic
from ..ir.module import HloModule
from .dot import FUSION_CLUSTER_STYLE, GRAPH_DEFAULTS
from .graph_model import MAX_LITERAL_ELEMENTS, SCHEMES

ASSETS = Path(__file__).resolve().parent / "assets"
SHARED_ASSETS_DIR = "hlo_opt_assets"
VIZ_JS = "viz-global.js"
APP_JS = "hlo_graph.js"
MODEL_JS = "hlo_model.js"
APP_CSS = "hlo_graph.css"
NOTICES = "THIRD_PARTY_NOTICES.txt"
LICENSE_FILES = ("LICENSE-graphviz-EPL-1.0.txt", "LICENSE-viz-js-MIT.txt",
                 "LICENSE-expat-MIT.txt")
SHARED_FILES = (VIZ_JS, MODEL_JS, APP_JS, APP_CSS, NOTICES) + LICENSE_FILES

VIEW_NODE_CAP = 500            # nodes per laid-out view; beyond: neighbourhood views
NEIGHBOURHOOD_NODES = 200      # a neighbourhood view grows by radius up to this many nodes
COMPRESS_ABOVE = 256 * 1024    # JSON payloads larger than this are gzip+base64 encoded
DATA_VERSION = 2

# Only local resources ('self' and file: for the shared assets of a page opened from disk;
# some browsers do not count file: URLs as 'self'); WebAssembly compilation needs
# 'wasm-unsafe-eval'.  Any remote load is refused by the browser and reported by the page
# (data-blocked-requests).
CSP = ("default-src 'none'; script-src 'self' file: 'unsafe-inline' 'wasm-unsafe-eval'; "
       "style-src 'self' file: 'unsafe-inline'; img-src 'self' file: data: blob:; "
       "font-src 'self' data:; connect-src 'none'; worker-src blob:; base-uri 'none'; "
       "form-action 'none'")

# Runs first (inline, in <head>) so that it sees every blocked or failed load.
_SENTINEL_JS = """(function () {
  var failures = [];
  function flush() {
    var b = document.body;
    if (!b || !failures.length) return;
    b.setAttribute('data-blocked-requests', String(failures.length));
    b.setAttribute('data-blocked-list', failures.slice(0, 20).join(' | '));
  }
  function record(what) { failures.push(what); flush(); }
  window.hloBlocked = failures;
  document.addEventListener('securitypolicyviolation', function (e) {
    record('csp:' + e.violatedDirective + ':' + e.blockedURI);
  });
  window.addEventListener('error', function (e) {
    var t = e.target;
    if (t && t !== window && (t.src || t.href)) record('load:' + (t.src || t.href));
  }, true);
  document.addEventListener('DOMContentLoaded', flush);
})();"""


# After the shared scripts: a page copied away from its hlo_opt_assets/ says so.
_MISSING_ASSETS_JS = """(function () {
  if (window.hloPage && window.hloBuildModel && typeof Viz !== 'undefined') return;
  var missing = [];
  if (typeof Viz === 'undefined') missing.push('viz-global.js');
  if (!window.hloBuildModel) missing.push('hlo_model.js');
  if (!window.hloPage) missing.push('hlo_graph.js');
  var el = document.getElementById('graph-message');
  var text = 'This page could not load ' + missing.join(' and ') + ' from ' + {dir} +
    '/ next to it: keep the page in its dump directory (beside ' + {dir} + '/), or make a ' +
    'self-contained page with: hlo-opt html INPUT -o PAGE.html';
  document.body.setAttribute('data-render-error', text);
  if (el) { el.textContent = text; el.style.display = 'block'; }
})();"""


def _js_string(text: str) -> str:
    return _script_safe_json(json.dumps(text))


@lru_cache(maxsize=None)
def asset_text(name: str) -> str:
    text = (ASSETS / name).read_text(encoding="utf-8")
    if name == VIZ_JS:
        # wrapped so that the page can hand the same text to its layout Web Worker
        # (hloVizSource.toString()): no second copy, no extra request from file:// pages
        text = f"function hloVizSource() {{\n{text}\n}}\nhloVizSource();\n"
    if name.endswith(".js") and "</script" in text.lower():
        raise ValueError(f"{name} contains '</script' and cannot be inlined")
    return text


def asset_bytes(name: str) -> bytes:
    return asset_text(name).encode("utf-8") if name.endswith(".js") else \
        (ASSETS / name).read_bytes()


# ---- data ---------------------------------------------------------------------------------
def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=None)
def _rules_json() -> str:
    """The drawing rules of graph_model.py that hlo_model.js applies (one definition)."""
    from ..ir.opcodes import CALLED_COMPUTATION_ATTRS, ELEMENTWISE
    from . import graph_model as g
    return _dumps({
        "opcodeScheme": g.OPCODE_SCHEME, "elementwise": sorted(ELEMENTWISE),
        "calledAttrs": list(CALLED_COMPUTATION_ATTRS), "trivialBinary": g._TRIVIAL_BINARY,
        "compareNames": g._COMPARE_NAMES, "fusionCategory": g._FUSION_CATEGORY,
        "truncatedAttrs": list(g._TRUNCATED_ATTRS),
        "limits": {"smallElements": g.SMALL_ELEMENTS,
                   "maxLiteralElements": g.MAX_LITERAL_ELEMENTS,
                   "maxLiteralChars": g.MAX_LITERAL_CHARS, "maxShapeChars": g.MAX_SHAPE_CHARS,
                   "maxAttrChars": g.MAX_ATTR_CHARS,
                   "maxOperandsShown": g.MAX_OPERANDS_SHOWN}})


@lru_cache(maxsize=None)
def _static_head_json() -> str:
    return _dumps({"v": DATA_VERSION, "cap": VIEW_NODE_CAP, "neighbourhood": NEIGHBOURHOOD_NODES,
                   "schemes": SCHEMES, "graphDefaults": GRAPH_DEFAULTS,
                   "clusterStyle": FUSION_CLUSTER_STYLE})[1:-1]


def module_body(module: HloModule) -> tuple[str, str]:
    """What every page of ``module`` ships (shared by its full and top-level pages): the
    computations as the printer writes them (large constants elided), and as JSON the
    literal text of small constants whose payload spells it otherwise (None: not
    printable), per computation and instruction name."""
    texts = []
    lits: dict[str, dict[str, str | None]] = {}
    for comp in module.computation_post_order():
        texts.append(comp.to_text(operand_shapes=True, print_metadata=True,
                                  large_constants=False))
        for inst in comp.instructions:
            if inst.opcode == "constant":
                text = _small_literal_text(inst)
                if text != inst.payload:
                    lits.setdefault(comp.name, {})[inst.name] = text
    return "\n".join(texts), _dumps(lits)


def _small_literal_text(inst) -> str | None:
    """graph_model's inline text of a constant, where it may be inlined (else the payload)."""
    shape = inst.shape
    if not shape.is_array() or shape.num_elements() > MAX_LITERAL_ELEMENTS:
        return inst.payload
    try:
        literal = inst.literal
        return None if literal.elided else literal.to_text()
    except Exception:  # an unparsable payload: the page falls back to the name
        return None


def graph_json(module: HloModule, title: str, top_level: bool = False,
               body: tuple[str, str] | None = None) -> str:
    """The page's data as compact JSON text: the module's text (:func:`module_body`), the
    drawing rules and the view settings; hlo_model.js builds the model from them."""
    text, lits = body if body is not None else module_body(module)
    return ("{" + _static_head_json() + ',"module":' + _dumps(module.name) + ',"title":'
            + _dumps(title) + ',"topLevel":' + ("true" if top_level else "false")
            + ',"instructionCount":' + str(module.instruction_count())
            + ',"rules":' + _rules_json() + ',"lits":' + lits + ',"text":' + _dumps(text)
            + "}")


def encode_json(raw: str) -> tuple[str, str]:
    """(encoding, text) for the <script type="application/json"> element holding ``raw``."""
    if len(raw) > COMPRESS_ABOVE:
        # level 1: a third of level 6's time for pages a few percent larger
        packed = gzip.compress(raw.encode("utf-8"), compresslevel=1, mtime=0)
        return "gzip+base64", base64.b64encode(packed).decode("ascii")
    return "json", _script_safe_json(raw)


def _script_safe_json(raw: str) -> str:
    return (raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _escape_html(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _license_block(asset_dir_href: str | None) -> str:
    if asset_dir_href is not None:
        href = _escape_html(f"{asset_dir_href.rstrip('/')}/{NOTICES}")
        return (f'<a id="licenses" href="{href}" target="_blank">third-party notices '
                f'(Graphviz EPL-1.0, viz.js MIT, Expat MIT)</a>')
    texts = [asset_text(NOTICES)] + [f"==== {n} ====\n\n{asset_text(n)}" for n in LICENSE_FILES]
    return ('<details id="licenses"><summary>third-party notices (Graphviz EPL-1.0, '
            'viz.js MIT, Expat MIT)</summary><pre>'
            + _escape_html("\n\n".join(texts)) + "</pre></details>")


_BODY = """<header id="toolbar">
<span id="title"></span>
<label>computation <select id="comp-select"></select></label>
<button id="btn-expand" type="button" title="expand every fusion in this view">expand fusions</button>
<button id="btn-collapse" type="button" title="collapse every fusion in this view">collapse fusions</button>
<button id="btn-narrower" type="button" title="a smaller neighbourhood" disabled>narrower</button>
<button id="btn-wider" type="button" title="a larger neighbourhood (at most the view cap)" disabled>wider</button>
<button id="btn-fit" type="button" title="fit the graph (f)">fit</button>
<button id="btn-zoom-in" type="button" title="zoom in (+)">+</button>
<button id="btn-zoom-out" type="button" title="zoom out (-)">&minus;</button>
<input id="search" type="search" placeholder="instruction name (/)" spellcheck="false">
<span id="status" aria-live="polite"></span>
</header>
<main id="panes">
<section id="graph-pane"><div id="graph"></div><div id="graph-message"></div><div id="graph-note"></div></section>
<div id="splitter" title="drag to resize"></div>
<section id="side-pane"><div id="details"></div><div id="hlo-text" tabindex="0"></div></section>
</main>
<footer id="footer">click: select and highlight operands (red) and users (blue) &middot;
double-click a fusion: expand/collapse &middot; double-click while/call/conditional: open its
computation &middot; wheel: zoom &middot; drag: pan &middot; {licenses}</footer>
"""


def module_to_html(module: HloModule, title: str, asset_dir_href: str | None = None,
                   top_level: bool = False, prepared: tuple[str, str] | None = None) -> str:
    """One HTML page for ``module``; self-contained when ``asset_dir_href`` is None.
    ``prepared``: :func:`module_body` of ``module`` when the caller made it already (a
    dump's full and top-level pages share it)."""
    encoding, payload = encode_json(graph_json(module, title, top_level, prepared))
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="hlo-opt">',
        f"<title>{_escape_html(title)}</title>",
        f"<script>{_SENTINEL_JS}</script>",
    ]
    if asset_dir_href is None:
        head.append(f"<style>{asset_text(APP_CSS)}</style>")
    else:
        base = _escape_html(asset_dir_href.rstrip("/"))
        head.append(f'<link rel="stylesheet" href="{base}/{APP_CSS}">')
    head.append("</head>")
    body = ['<body data-hlo-graph="1">',
            _BODY.replace("{licenses}", _license_block(asset_dir_href)),
            f'<script type="application/json" id="hlo-graph-data" '
            f'data-encoding="{encoding}">{payload}</script>']
    if asset_dir_href is None:
        body.append(f"<script>{asset_text(VIZ_JS)}</script>")
        body.append(f"<script>{asset_text(MODEL_JS)}</script>")
        body.append(f"<script>{asset_text(APP_JS)}</script>")
    else:
        base = _escape_html(asset_dir_href.rstrip("/"))
        body.append(f'<script src="{base}/{VIZ_JS}"></script>')
        body.append(f'<script src="{base}/{MODEL_JS}"></script>')
        body.append(f'<script src="{base}/{APP_JS}"></script>')
        body.append("<script>" + _MISSING_ASSETS_JS.replace("{dir}", _js_string(
            asset_dir_href.rstrip("/"))) + "</script>")
    body.append("</body>\n</html>\n")
    return "\n".join(head + body)


def write_shared_assets(dump_dir: str) -> str:
    """Write the page scripts, stylesheet and licence notices into
    ``<dump_dir>/hlo_opt_assets/`` (atomically; unchanged files are left alone) and
    return the relative href pages pass as ``asset_dir_href``."""
    target = os.path.join(dump_dir, SHARED_ASSETS_DIR)
    os.makedirs(target, exist_ok=True)
    if os.path.islink(target):  # never write through a link planted in the dump directory
        raise OSError(f"{target} is a symbolic link; not followed")
    for name in SHARED_FILES:
        data = asset_bytes(name)
        path = os.path.join(target, name)
        try:
            if not os.path.islink(path):
                with open(path, "rb") as f:
                    if f.read() == data:
                        continue
        except OSError:
            pass
        write_atomic(path, data)  # a rename: replaces a link at ``path``, never follows it
        os.chmod(path, 0o644)  # mkstemp made it 0600; pages are read by browsers/servers
    return SHARED_ASSETS_DIR

