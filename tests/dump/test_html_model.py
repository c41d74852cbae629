"""The page builds its drawing model (hlo_model.js) from the module's text as
:class:`hlo_opt.dump.graph_model.GraphModel` decides it (tests/dump/reference_model.py).

Runs hlo_model.js under node (skipped, with the reason printed, when node is absent);
test_html_chromium.py checks the same in the browser.  Modules are compared after a
print/parse round trip: labels show attributes as the printer writes them (without the
spaces a hand-written ``dimensions={0, 1}`` may carry), GraphModel as they were parsed.
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from hlo_opt.api import parse_hlo, parse_hlo_modules
from hlo_opt.dump.html import ASSETS, MODEL_JS, graph_json
from tests.conftest import corpus_files, sample_files
from tests.dump.reference_model import reference_model

if shutil.which("node") is None:
    print("\ntest_html_model: skipped: node not found (apt-get install -y nodejs)")
    pytestmark = pytest.mark.skip(reason="node not found (apt-get install -y nodejs)")

_RUN = """const build = require(%s);
let data = '';
process.stdin.on('data', d => { data += d; });
process.stdin.on('end', () => {
  const out = JSON.parse(data).map(p => {
    try { const m = build(p, true); return {comps: m.comps, insts: m.insts}; }
    catch (e) { return {error: String(e && e.stack)}; }
  });
  process.stdout.write(JSON.stringify(out));
});"""


def _built_in_js(payloads: list[str]) -> list[dict]:
    script = _RUN % json.dumps(str(ASSETS / MODEL_JS))
    r = subprocess.run(["node", "-e", script], input="[" + ",".join(payloads) + "]",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _first_difference(ref: dict, got: dict) -> str:
    if "error" in got:
        return got["error"][:2000]
    for key in ("comps", "insts"):
        if len(ref[key]) != len(got[key]):
            return f"{key}: {len(ref[key])} in Python, {len(got[key])} in the page"
        for i, (a, b) in enumerate(zip(ref[key], got[key])):
            for field in sorted(set(a) | set(b)):
                if a.get(field) != b.get(field):
                    return (f"{key}[{i}] ({a.get('n')}).{field}: Python {a.get(field)!r}, "
                            f"page {b.get(field)!r}")
    return "?"


def _check(modules: list, label: str) -> int:
    cases = []
    for m in modules:
        m = parse_hlo_modules(m.to_text(), "round-trip")[0]
        for top in (False, True):
            cases.append((f"{label}:{m.name}:top_level={top}", m, top))
    got = _built_in_js([graph_json(m, "t", top) for _, m, top in cases])
    bad = [f"{name}: {_first_difference(reference_model(m, top), g)}"
           for (name, m, top), g in zip(cases, got) if g != reference_model(m, top)]
    assert not bad, "\n".join(bad[:10])
    return len(cases)


def _parsed(paths, lenient: bool = False) -> list:
    """The modules of ``paths``; ``lenient``: skip files that do not parse (the corpus
    holds modules this project rejects on purpose; a sample must parse)."""
    out = []
    for path in paths:
        try:
            out += parse_hlo_modules(path.read_text(), str(path))
        except Exception:
            if not lenient:
                raise
    return out


def test_sample_modules_draw_alike():
    assert _check(_parsed(sample_files()), "sample") >= 20


def test_sample_modules_after_the_pipelines_draw_alike():
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    for pipeline in ("gpu", "optimization"):
        modules = _parsed(sample_files())
        for m in modules:
            passes_api.optimize(m, DebugOptions(), pipeline=pipeline)
        assert _check(modules, pipeline) >= 20


def test_corpus_modules_draw_alike():
    paths = corpus_files()
    if not paths:
        pytest.skip("../shared/corpus not present")
    assert _check(_parsed(paths, lenient=True), "corpus") >= 300


def test_awkward_text_draws_alike():
    """Strings with commas, brackets, quotes and newlines; a backend_config written over
    several lines; names shared by two computations; control predecessors; a while
    loop; a call whose parameters name their producers; constants spelled unusually."""
    module = parse_hlo(r'''HloModule awkward
%body (p: (s32[], f32[2])) -> (s32[], f32[2]) {
  %p = (s32[], f32[2]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %v = f32[2]{0} get-tuple-element(%p), index=1
  ROOT %t = (s32[], f32[2]{0}) tuple(%i2, %v)
}
%cond (p: (s32[], f32[2])) -> pred[] {
  %p = (s32[], f32[2]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%callee (a: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  ROOT %neg = f32[2]{0} negate(%a)
}
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  %c = f32[2]{0} constant({1.50, -0})
  %y = f32[2]{0} add(%x, %c), metadata={op_type="Add" op_name="a, (b) [c] {d} \"e\"" source_file="x.py" source_line=7}
  %zero = s32[] constant(0)
  %init = (s32[], f32[2]{0}) tuple(%zero, %y)
  %w = (s32[], f32[2]{0}) while(%init), condition=%cond, body=%body, control-predecessors={%y}
  %r = f32[2]{0} get-tuple-element(%w), index=1
  %cc = f32[2]{0} custom-call(%r), custom_call_target="odd(target, \"x\")", backend_config={"k": ["a, b", {"c": "}"}]}
  ROOT %out = f32[2]{0} call(%cc), to_apply=%callee
}
''', "awkward.hlo")
    assert _check([module], "awkward") == 2
    # a backend_config written over several lines, and a string holding a newline
    payload = json.loads(graph_json(module, "t"))
    payload["text"] = payload["text"].replace(
        'backend_config={"k"', 'backend_config={\n    "k"').replace(
        'source_file="x.py"', 'source_file="x\ny.py"')
    got = _built_in_js([json.dumps(payload)])[0]
    assert "error" not in got, got
    names = [i["n"] for i in got["insts"]]
    assert sorted(names) == sorted(i.name for i in module.instructions())
    cc = got["insts"][names.index("cc")]
    assert cc["txt"].count("\n") == 1 and cc["o"] == [names.index("r")]
    y = got["insts"][names.index("y")]
    assert y["t"].endswith("source: x\ny.py:7")
