"""The --html page: self-contained, well formed, both modules' text, working links."""
from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hlo_opt.diff import diff_modules
from hlo_opt.diff.render_html import render_html
from hlo_opt.text.parser import parse_hlo

from .cases import LEFT, RIGHT

VOID = {"meta", "input", "br", "hr", "img", "link"}


class _Checker(HTMLParser):
    """Balanced tags, ids, data-m targets, remote references and per-pane text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()
        self.targets: list[str] = []
        self.remote: list[str] = []
        self.rows: dict[str, list[tuple[str, str]]] = {"L": [], "R": []}
        self.classes: dict[str, set[str]] = {"L": set(), "R": set()}
        self._row = None
        self.doctype = False

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in VOID:
            self.stack.append(tag)
        if "id" in a:
            if a["id"] in self.ids:
                self.errors.append(f"duplicate id {a['id']}")
            self.ids.add(a["id"])
        if "data-m" in a:
            self.targets.append(a["data-m"])
        for key in ("src", "href", "action", "srcset", "poster", "data"):
            if key in a:
                self.remote.append(f"{tag} {key}={a[key]}")
        if tag in ("link", "iframe", "object", "embed", "img", "base"):
            self.remote.append(tag)
        if tag == "div" and "row" in a.get("class", "").split() and "id" in a:
            side = a["id"][0]
            if a["id"][1:].isdigit():
                self._row = (side, a.get("class", ""), [])
        elif tag == "div" and "row" in a.get("class", "").split():
            self._row = None

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()
        if tag == "div" and self._row is not None:
            side, cls, text = self._row
            self.rows[side].append(("".join(text), cls))
            self.classes[side].update(cls.split())
            self._row = None

    def handle_data(self, data):
        if self._row is not None:
            self._row[2].append(data)


def _check(page: str) -> _Checker:
    c = _Checker()
    c.feed(page)
    c.close()
    return c


@pytest.fixture(scope="module")
def edits():
    left, right = parse_hlo(LEFT, "left.hlo"), parse_hlo(RIGHT, "right.hlo")
    d = diff_modules(left, right, left_label="left.hlo", right_label="right.hlo")
    return left, right, d, render_html(d)


def test_page_is_well_formed(edits):
    *_, page = edits
    c = _check(page)
    assert c.doctype
    assert not c.errors, c.errors[:5]
    assert not c.stack, f"unclosed: {c.stack}"
    assert page.rstrip().endswith("</html>")


def test_page_needs_nothing_remote(edits):
    *_, page = edits
    c = _check(page)
    assert not c.remote, c.remote
    lowered = page.lower()
    for needle in ("http://", "https://", "@import", "url(", "<link", "src="):
        assert needle not in lowered, needle


def test_both_modules_text_is_there_with_links_to_matches(edits):
    left, right, d, page = edits
    c = _check(page)
    for side, module in (("L", left), ("R", right)):
        texts = [t.strip() for t, _ in c.rows[side]]
        expected = [inst.to_text() for comp in module.computation_post_order()
                    for inst in comp.post_order()]
        assert texts == expected
    missing = [t for t in c.targets if t not in c.ids]
    assert not missing, missing
    # every matched instruction links to its partner, unmatched ones link nowhere
    assert len([t for t in c.targets if t[1:].isdigit()]) == 2 * d.mapping.count


def test_changed_added_removed_rows_are_highlighted(edits):
    left, right, d, page = edits
    c = _check(page)
    by_text = {side: dict(rows) for side, rows in
               (("L", [(t.strip(), cls) for t, cls in c.rows["L"]]),
                ("R", [(t.strip(), cls) for t, cls in c.rows["R"]]))}

    def cls(side, module, name):
        inst = next(i for i in module.instructions() if i.name == name)
        return by_text[side][inst.to_text()].split()

    assert "c-removed" in cls("L", left, "copy")
    assert "c-added" in cls("R", right, "sq")
    assert "c-changed" in cls("L", left, "cmp") and "c-changed" in cls("R", right, "cmp")
    assert "c-moved" in cls("L", left, "relu")
    assert "c-same" in cls("L", left, "tanh")
    assert "c-same" in cls("R", right, "p0")


def test_changes_list_is_valid_json(edits):
    import json
    *_, d, page = edits
    m = re.search(r'<script type="application/json" id="changes">(.*?)</script>', page, re.S)
    changes = json.loads(m.group(1))
    # one entry per difference in the text diff: 6 changed + 1 removed + 4 added
    assert len(changes) == 11
    ids = _check(page).ids
    assert all(x is None or x in ids for pair in changes for x in pair)


def test_script_parses_in_node(edits, tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed: JavaScript syntax not checked")
    *_, page = edits
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert scripts
    js = tmp_path / "page.js"
    js.write_text(scripts[-1])
    r = subprocess.run([node, "--check", str(js)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome",
                 "google-chrome-stable"):
        path = shutil.which(name) or (name if Path(name).exists() else None)
        if path:
            return path
    return None


def test_page_loads_in_headless_chromium(edits, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on this machine (/usr/bin/chromium): headless load check "
                    "not run")
    *_, page = edits
    html = tmp_path / "diff.html"
    html.write_text(page)
    r = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox",
                        "--virtual-time-budget=2000", "--dump-dom", html.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'data-ready="1"' in r.stdout, "the page script did not run to the end"
    assert "11 differences" in r.stdout
