"""``--html``: one self-contained side-by-side page (inline CSS and JS, no remote resource).

Both modules' full text, one row per line; changed / removed / added / moved rows are
highlighted; clicking an instruction (or a computation header) scrolls the other side to
its match; ``n`` / ``p`` (or the buttons) walk the differences in the text diff's order;
"hide unchanged" folds the rest away.  ``body[data-ready]`` is set once the script ran.
"""
from __future__ import annotations

import json
from html import escape

from .align import DIFF_TAGS, MOVED_IN, align, sections
from .render_text import describe_change, summary_lines
from .result import ADDED, CHANGED, REMOVED, UNCHANGED, ModuleDiff

_CSS = """
*{box-sizing:border-box}
body{margin:0;font:13px/1.35 system-ui,sans-serif;color:#1b1f24;background:#fff}
header{padding:8px 12px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
h1{font-size:16px;margin:0 0 4px}
pre.summary{margin:4px 0;max-height:30vh;overflow:auto;font:12px/1.3 ui-monospace,monospace}
.controls{display:flex;gap:12px;align-items:center;flex-wrap:wrap}
.controls button{font:inherit;padding:2px 8px}
.legend span{padding:0 6px;border-radius:3px;margin-right:4px}
main{display:flex;height:calc(100vh - var(--head,170px))}
.pane{flex:1 1 50%;min-width:0;display:flex;flex-direction:column;border-right:1px solid #d0d7de}
.pane h2{font-size:13px;margin:0;padding:4px 8px;background:#eaeef2}
.code{flex:1;overflow:auto;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}
.row{white-space:pre;padding:0 8px;cursor:default;border-left:3px solid transparent}
.row[data-m]{cursor:pointer}
.row.hdr{color:#57606a;font-weight:600}
.c-changed,.legend .c-changed{background:#fff8c5;border-left-color:#bf8700}
.c-removed,.legend .c-removed{background:#ffebe9;border-left-color:#cf222e}
.c-added,.legend .c-added{background:#dafbe1;border-left-color:#1a7f37}
.c-moved,.legend .c-moved{background:#fbefff;border-left-color:#8250df}
.row.sel{outline:2px solid #0969da;outline-offset:-2px}
.row.flash{animation:flash 1.2s}
@keyframes flash{from{background:#9ecbff}}
.hide-same .c-same:not(.hdr){display:none}
.note{color:#57606a}
.b{font-weight:600}
"""

_JS = """
(function () {
  "use strict";
  var changes = JSON.parse(document.getElementById("changes").textContent);
  var cur = -1;
  var counter = document.getElementById("counter");
  function byId(id) { return id ? document.getElementById(id) : null; }
  function flash(el) {
    if (!el) { return; }
    el.classList.remove("flash");
    void el.offsetWidth;
    el.classList.add("flash");
  }
  function reveal(el) {
    if (!el) { return; }
    el.scrollIntoView({block: "center", inline: "nearest"});
    flash(el);
  }
  function select(els) {
    var old = document.querySelectorAll(".row.sel");
    for (var i = 0; i < old.length; i++) { old[i].classList.remove("sel"); }
    for (var j = 0; j < els.length; j++) { if (els[j]) { els[j].classList.add("sel"); } }
  }
  document.querySelector("main").addEventListener("click", function (ev) {
    var row = ev.target.closest ? ev.target.closest(".row[id]") : null;
    if (!row) { return; }
    var match = byId(row.getAttribute("data-m"));
    select([row, match]);
    reveal(match);
  });
  function go(delta) {
    if (!changes.length) { return; }
    cur = (cur + delta + changes.length) % changes.length;
    var left = byId(changes[cur][0]), right = byId(changes[cur][1]);
    select([left, right]);
    reveal(left);
    reveal(right);
    counter.textContent = (cur + 1) + " / " + changes.length;
  }
  document.getElementById("next").addEventListener("click", function () { go(1); });
  document.getElementById("prev").addEventListener("click", function () { go(-1); });
  document.addEventListener("keydown", function (ev) {
    if (ev.target && ev.target.tagName === "INPUT") { return; }
    if (ev.key === "n" || ev.key === "j") { go(1); }
    if (ev.key === "p" || ev.key === "k") { go(-1); }
  });
  document.getElementById("hide-same").addEventListener("change", function (ev) {
    document.body.classList.toggle("hide-same", ev.target.checked);
  });
  var head = document.querySelector("header");
  document.documentElement.style.setProperty("--head", head.offsetHeight + "px");
  counter.textContent = changes.length + " differences";
  document.body.setAttribute("data-ready", "1");
})();
"""

_CLASS = {UNCHANGED: "c-same", CHANGED: "c-changed", REMOVED: "c-removed",
          ADDED: "c-added"}


def _comp_head(comp) -> str:
    params = ", ".join(f"{p.name}: {p.shape.to_text(layout=False)}"
                       for p in comp.parameters if p is not None)
    head = ("ENTRY " if comp.is_entry else "") + \
        f"%{comp.name} ({params}) -> {comp.root.shape.to_text(layout=False)}"
    if comp.execution_thread is not None:
        head += f", execution_thread=\"{comp.execution_thread}\""
    return head + " {"


def _pane(diff: ModuleDiff, side_name: str) -> list[str]:
    from ..text.printer import module_header
    left = side_name == "L"
    side, other = (diff.left, diff.right) if left else (diff.right, diff.left)
    status = diff.status_l if left else diff.status_r
    m = diff.mapping
    imap = m.l2r if left else m.r2l
    cmap = m.comp_l2r if left else m.comp_r2l
    o = "R" if left else "L"
    out = [f'<div class="row hdr c-same">{escape(module_header(side.module))}</div>']
    if side.module.stack_frames:
        for line in side.module.stack_frames.rstrip("\n").split("\n"):
            out.append(f'<div class="row hdr c-same">{escape(line)}</div>')
    for ci, comp in enumerate(side.comps):
        partner = cmap[ci]
        cls = "c-same" if partner >= 0 else ("c-removed" if left else "c-added")
        attr = f' data-m="{o}C{partner}"' if partner >= 0 else ""
        out.append(f'<div class="row hdr {cls}"> </div>')
        out.append(f'<div class="row hdr {cls}" id="{side_name}C{ci}"{attr}>'
                   f'{escape(_comp_head(comp))}</div>')
        start, end = side.comp_range[ci]
        for i in range(start, end):
            st = status[i]
            cls = _CLASS[st]
            j = imap[i]
            title = ""
            if st == CHANGED:
                ch = diff.changes[i if left else j]
                if "moved" in ch.kinds:
                    cls = "c-moved"
                title = f' title="{escape(describe_change(diff, ch))}"'
            attr = f' data-m="{o}{j}"' if j >= 0 else ""
            text = "  " + side.insts[i].to_text()
            out.append(f'<div class="row {cls}" id="{side_name}{i}"{attr}{title}>'
                       f'{escape(text)}</div>')
        out.append('<div class="row hdr c-same">}</div>')
    return out


def _changes(diff: ModuleDiff) -> list[list]:
    """[left row id or null, right row id or null] per difference, text-diff order."""
    out = []
    for cl, cr, _ in sections(diff):
        for tag, l, r in align(diff, cl, cr):
            # a move is listed once, where it left (its moved-in row is the same pair)
            if tag in DIFF_TAGS and tag != MOVED_IN:
                out.append([f"L{l}" if l >= 0 else None, f"R{r}" if r >= 0 else None])
    return out


def render_html(diff: ModuleDiff) -> str:
    left, right = diff.left, diff.right
    summary = "".join(
        "".join(f'<span class="{_span_class(style)}">{escape(t)}</span>' if style else
                escape(t) for t, style in line) + "\n"
        for line in summary_lines(diff))
    changes = json.dumps(_changes(diff)).replace("</", "<\\/")
    title = f"hlo-opt diff: {left.label} vs {right.label}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        "<header>", f"<h1>{escape(title)}</h1>",
        f'<pre class="summary">{summary}</pre>',
        '<div class="controls"><button id="prev" type="button">&#9664; previous</button>'
        '<button id="next" type="button">next &#9654;</button>'
        '<span id="counter"></span>'
        '<label><input type="checkbox" id="hide-same"> hide unchanged</label>'
        '<span class="legend"><span class="c-changed">changed</span>'
        '<span class="c-removed">removed</span><span class="c-added">added</span>'
        '<span class="c-moved">moved</span></span>'
        '<span class="note">click an instruction to jump to its match; n / p walk the '
        'differences</span></div>',
        "</header>", "<main>",
        f'<section class="pane" id="pane-left"><h2>{escape(left.label)}</h2>'
        '<div class="code">', *_pane(diff, "L"), "</div></section>",
        f'<section class="pane" id="pane-right"><h2>{escape(right.label)}</h2>'
        '<div class="code">', *_pane(diff, "R"), "</div></section>",
        "</main>",
        f'<script type="application/json" id="changes">{changes}</script>',
        f"<script>{_JS}</script>", "</body>", "</html>",
    ]
    return "\n".join(parts) + "\n"


def _span_class(style: str) -> str:
    return {"removed": "c-removed", "added": "c-added", "changed": "c-changed",
            "moved": "c-moved", "dim": "note"}.get(style, "b")
