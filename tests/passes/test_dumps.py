"""Dumps: XLA's file names and rules, formats, stats JSON, reading a directory back."""
from __future__ import annotations

import io
import json
import os
import types

import pytest

import hlo_opt.dump as dump_pkg
from hlo_opt import passes_api
from hlo_opt.dump.inspect import count_instructions, read_dump_dir
from hlo_opt.dump.naming import filename_for, parse_dump_name, sanitize_file_name
from hlo_opt.dump.writer import DumpConfig, DumpDirectory, ModuleDumper
from hlo_opt.flags import DebugOptions

from tests.support.harness import load_text

HLO = """
HloModule m

ENTRY %test (p0: s32[12]) -> s32[12] {
  %p0 = s32[12] parameter(0)
  %c1 = s32[12] constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
  %c2 = s32[12] constant({10, 6, 3, 2, 5, 3, 7, 4, 2, 3, 1, 0})
  %x = s32[12] multiply(%p0, %c1), metadata={op_name="mul"}
  %y = s32[12] multiply(%p0, %c1)
  %s = s32[12] add(%x, %y)
  ROOT %z = s32[12] add(%s, %c2)
}
"""


def opts(tmp_path, **kw):
    return DebugOptions(xla_dump_to=str(tmp_path), **kw)


def run(tmp_path, passes="dce,cse", pipeline=None, text=HLO, module_id=0, directory=None,
        **kw):
    o = opts(tmp_path, **kw)
    m = load_text(text)
    passes_api.optimize(m, o, passes=None if pipeline else passes, pipeline=pipeline,
                        module_id=module_id, dump_directory=directory)
    return m


def listing(path):
    return sorted(os.listdir(path))


# ---- names -------------------------------------------------------------------------------

def test_xla_example_names(tmp_path):
    run(tmp_path, xla_dump_hlo_pass_re=".*")
    assert listing(tmp_path) == [
        "module_0000.m.0000.transforms_pipeline.after_pipeline-start.before_dce.txt",
        "module_0000.m.0001.transforms_pipeline.after_cse.before_pipeline-end.txt",
        "module_0000.m.after_optimization.txt",
        "module_0000.m.before_optimization.txt",
        "module_0000.m.debug_options",
        "module_0000.m.pass_stats.json",
    ]


def test_without_pass_regex_only_module_dumps(tmp_path):
    run(tmp_path)
    assert listing(tmp_path) == [
        "module_0000.m.after_optimization.txt", "module_0000.m.before_optimization.txt",
        "module_0000.m.debug_options", "module_0000.m.pass_stats.json"]


def test_named_pipeline_uses_plural_names(tmp_path):
    run(tmp_path, pipeline="cleanup")
    assert "module_0000.m.before_optimizations.txt" in listing(tmp_path)
    assert "module_0000.m.after_optimizations.txt" in listing(tmp_path)


def test_other_regex_dumps_unchanged_matching_passes(tmp_path):
    run(tmp_path, xla_dump_hlo_pass_re="dce")
    # pipeline-start (before dce) and after dce (unchanged) both match; cse does not, but
    # the step after dce is named "before_cse" and the regex matches "dce" on the after side
    assert [f for f in listing(tmp_path) if ".transforms_pipeline." in f] == [
        "module_0000.m.0000.transforms_pipeline.after_pipeline-start.before_dce.txt",
        "module_0000.m.0001.transforms_pipeline.after_dce.before_cse.txt"]


def test_step_counter_is_per_module_and_continues_across_pipelines(tmp_path):
    o = opts(tmp_path, xla_dump_hlo_pass_re=".*")
    directory = DumpDirectory(DumpConfig.from_options(o))
    for module_id in (0, 1):
        m = load_text(HLO)
        passes_api.optimize(m, o, pipeline="optimization", module_id=module_id,
                            dump_directory=directory)
    steps = {}
    for f in listing(tmp_path):
        d = parse_dump_name(f, {"m"})
        if d.kind == "pass":
            steps.setdefault(d.module_id, []).append(d.step)
    assert steps[0] == list(range(len(steps[0]))) == steps[1]
    assert len(steps[0]) >= 3


def test_pipeline_regex(tmp_path):
    run(tmp_path, pipeline="optimization", xla_dump_hlo_pass_re=".*",
        xla_dump_hlo_pipeline_re="^optimization$")
    pipes = {parse_dump_name(f, {"m"}).pipeline for f in listing(tmp_path)} - {None}
    assert pipes == {"optimization"}


def test_module_regex(tmp_path):
    run(tmp_path, xla_dump_hlo_module_re="^other$")
    assert not os.path.exists(tmp_path) or listing(tmp_path) == []
    run(tmp_path, xla_dump_hlo_module_re="^m$")
    assert "module_0000.m.after_optimization.txt" in listing(tmp_path)


def test_timestamp_prefix(tmp_path):
    run(tmp_path, xla_dump_include_timestamp=True, xla_dump_hlo_pass_re=".*")
    files = listing(tmp_path)
    stamped = [f for f in files if not f.startswith("module_")]
    prefixes = {f.split(".", 1)[0] for f in stamped}
    assert len(prefixes) == 1 and prefixes.pop().isdigit()
    assert {f for f in files if f.startswith("module_")} == {
        "module_0000.m.debug_options", "module_0000.m.pass_stats.json"}
    assert len(stamped) == 4


def test_max_modules(tmp_path):
    o = opts(tmp_path, xla_dump_max_hlo_modules=1)
    directory = DumpDirectory(DumpConfig.from_options(o))
    for module_id in (0, 1, 0):
        passes_api.optimize(load_text(HLO), o, passes="dce", module_id=module_id,
                            dump_directory=directory)
    assert {f.split(".")[0] for f in listing(tmp_path)} == {"module_0000"}


def test_large_constants_and_metadata(tmp_path):
    run(tmp_path / "a")
    text = (tmp_path / "a" / "module_0000.m.before_optimization.txt").read_text()
    assert "%c2 = s32[12]{0} constant({...})" in text
    assert 'metadata={op_name="mul"}' in text
    run(tmp_path / "b", xla_dump_large_constants=True, xla_dump_disable_metadata=True)
    text = (tmp_path / "b" / "module_0000.m.before_optimization.txt").read_text()
    assert "constant({10, 6, 3, 2, 5, 3, 7, 4, 2, 3, 1, 0})" in text
    assert "metadata" not in text


def test_short_text(tmp_path):
    run(tmp_path, xla_dump_hlo_as_long_text=False)
    text = (tmp_path / "module_0000.m.after_optimization.txt").read_text()
    assert "multiply(%p0, %c1)" in text


def test_debug_options_file_content(tmp_path):
    o = opts(tmp_path, xla_gpu_dot_merger_threshold_mb=3253)
    passes_api.optimize(load_text(HLO), o, passes="dce")
    text = (tmp_path / "module_0000.m.debug_options").read_text()
    assert text == o.to_debug_options_text()
    assert "xla_gpu_dot_merger_threshold_mb: 3253\n" in text


def test_stdout_framing():
    o = DebugOptions(xla_dump_to="-")
    out = io.StringIO()
    directory = DumpDirectory(DumpConfig.from_options(o), stdout=out)
    passes_api.optimize(load_text(HLO), o, passes="dce", dump_directory=directory)
    text = out.getvalue()
    assert text.startswith("*** Begin module_0000.m.before_optimization.txt ***\nHloModule m")
    assert "\n*** End module_0000.m.after_optimization.txt ***\n" in text
    assert "debug_options" not in text


def test_format_flag_alone_dumps_to_stdout():
    cfg = DumpConfig.from_options(DebugOptions(xla_dump_hlo_as_text=True))
    assert cfg.to_stdout and cfg.as_text
    cfg = DumpConfig.from_options(DebugOptions())
    assert not cfg.active
    cfg = DumpConfig.from_options(DebugOptions(xla_dump_to="/x", xla_enable_dumping=False))
    assert not cfg.active


def test_unsupported_formats_warn(tmp_path, caplog):
    run(tmp_path, xla_dump_hlo_as_proto=True, xla_dump_hlo_as_text=True)
    assert "does not write these dump formats: --xla_dump_hlo_as_proto" in caplog.text
    assert "module_0000.m.after_optimization.txt" in listing(tmp_path)


def test_sanitized_names_and_pipeline_with_space(tmp_path):
    assert sanitize_file_name("a/b\\c[d] e") == "a_b_c_d__e"
    o = opts(tmp_path, xla_dump_hlo_pass_re=".*")
    m = load_text(HLO)
    m.name = "my/mod[1]"
    d = ModuleDumper(DumpDirectory(DumpConfig.from_options(o)), 3, o)
    step, files = d.between_passes(m, "layout assignment", "pipeline-start", "dce", None)
    assert step == 0
    assert [os.path.basename(f) for f in files] == [
        "module_0003.my_mod_1_.0000.layout_assignment.after_pipeline-start.before_dce.txt"]


def test_long_module_name_dropped():
    name = "x" * 300
    assert filename_for(7, name, "", "after_optimizations") == "module_0007.after_optimizations"
    assert filename_for(7, "m", "123", "txt") == "123.module_0007.m.txt"


def test_writes_are_atomic_no_temp_files_left(tmp_path):
    run(tmp_path, pipeline="optimization", xla_dump_hlo_pass_re=".*")
    assert not [f for f in listing(tmp_path) if f.startswith(".tmp")]


def test_stats_json_next_to_dumps(tmp_path):
    run(tmp_path, xla_dump_hlo_pass_re=".*")
    doc = json.loads((tmp_path / "module_0000.m.pass_stats.json").read_text())
    assert doc["module"] == "m" and doc["pipeline"] == "transforms_pipeline"
    dce, cse = doc["passes"]
    assert (dce["pass"], dce["changed"], dce["dump_step"]) == ("dce", False, None)
    assert (cse["pass"], cse["changed"], cse["dump_step"]) == ("cse", True, 1)
    assert cse["instructions_before"] == 7 and cse["instructions_after"] == 6
    assert cse["opcode_delta"] == {"multiply": -1}
    assert cse["dump_files"][0].endswith("after_cse.before_pipeline-end.txt")
    assert doc["totals"]["cse"]["invocations"] == 1
    assert [d["after"] for d in doc["dumps"]] == ["pipeline-start", "cse"]


# ---- html / dot wiring -------------------------------------------------------------------

@pytest.fixture
def fake_renderers(monkeypatch):
    calls = {"html": [], "assets": [], "dot": []}
    html = types.ModuleType("hlo_opt.dump.html")

    def module_body(module):
        return module.name, "{}"

    def module_to_html(module, title, asset_dir_href=None, top_level=False, prepared=None):
        assert prepared == module_body(module)  # made once, shared by both pages
        calls["html"].append((module.name, title, asset_dir_href, top_level))
        return f"<html>{title}{' top' if top_level else ''}</html>"

    def write_shared_assets(dump_dir):
        calls["assets"].append(dump_dir)
        return "hlo_opt_assets"

    html.module_body = module_body
    html.module_to_html = module_to_html
    html.write_shared_assets = write_shared_assets
    dot = types.ModuleType("hlo_opt.dump.dot")

    def module_to_dot(module):
        calls["dot"].append(module.name)
        return "digraph {}"

    dot.module_to_dot = module_to_dot
    monkeypatch.setitem(__import__("sys").modules, "hlo_opt.dump.html", html)
    monkeypatch.setitem(__import__("sys").modules, "hlo_opt.dump.dot", dot)
    monkeypatch.setattr(dump_pkg, "html", html, raising=False)
    monkeypatch.setattr(dump_pkg, "dot", dot, raising=False)
    return calls


def test_html_and_dot_formats(tmp_path, fake_renderers):
    run(tmp_path, xla_dump_hlo_as_html=True, xla_dump_hlo_as_dot=True,
        xla_dump_hlo_pass_re=".*")
    files = listing(tmp_path)
    assert "module_0000.m.before_optimization.html" in files
    assert "module_0000.m.0001.transforms_pipeline.after_cse.before_pipeline-end.dot" in files
    # an explicit format turns the default text dump off, as in XLA
    assert not [f for f in files if f.endswith(".txt")]
    assert fake_renderers["assets"] == [str(tmp_path)]  # shared assets written once
    assert fake_renderers["html"][0] == ("m", "module_0000.m.before_optimization",
                                         "hlo_opt_assets", False)
    # .top_level.html only for after_optimizations (plural), as XLA names it
    assert not [f for f in files if "top_level" in f]
    assert len(fake_renderers["html"]) == len(fake_renderers["dot"]) == 4
    assert (tmp_path / "module_0000.m.after_optimization.html").read_text() == \
        "<html>module_0000.m.after_optimization</html>"


def test_top_level_html_after_optimizations(tmp_path, fake_renderers):
    run(tmp_path, pipeline="cleanup", xla_dump_hlo_as_html=True)
    assert sorted(f for f in listing(tmp_path) if f.endswith("html")) == [
        "module_0000.m.after_optimizations.html",
        "module_0000.m.after_optimizations.top_level.html",
        "module_0000.m.before_optimizations.html"]
    assert (tmp_path / "module_0000.m.after_optimizations.top_level.html").read_text() == \
        "<html>module_0000.m.after_optimizations top</html>"


def test_real_renderers(tmp_path):
    run(tmp_path, pipeline="cleanup", xla_dump_hlo_as_html=True, xla_dump_hlo_as_dot=True,
        xla_dump_hlo_as_text=True)
    files = listing(tmp_path)
    assert "hlo_opt_assets" in files
    page = (tmp_path / "module_0000.m.after_optimizations.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'src="hlo_opt_assets/' in page
    assert "module_0000.m.after_optimizations.top_level.html" in files
    assert (tmp_path / "module_0000.m.before_optimizations.dot").read_text().lstrip().startswith(
        ("digraph", "//", "/*"))
    assert "module_0000.m.after_optimizations.txt" in files


def test_html_refused_on_stdout(fake_renderers, caplog):
    o = DebugOptions(xla_dump_to="-", xla_dump_hlo_as_html=True, xla_dump_hlo_as_text=True)
    out = io.StringIO()
    directory = DumpDirectory(DumpConfig.from_options(o), stdout=out)
    passes_api.optimize(load_text(HLO), o, passes="dce", dump_directory=directory)
    assert fake_renderers["html"] == []
    assert "*** Begin module_0000.m.before_optimization.txt ***" in out.getvalue()
    assert "Refusing to write module_0000.m.before_optimization.html to stdout" in caplog.text


# ---- reading back ------------------------------------------------------------------------

def test_parse_dump_names():
    d = parse_dump_name("module_0000.cluster_reduce.12.0003.simplification.after_algsimp"
                        ".before_cse.txt")
    assert (d.kind, d.module_name, d.step, d.pipeline, d.after, d.before, d.extension) == (
        "pass", "cluster_reduce.12", 3, "simplification", "algsimp", "cse", "txt")
    d = parse_dump_name("1700000000.module_0012.jit_f.before_optimizations.txt")
    assert (d.timestamp, d.module_id, d.module_name, d.kind) == (
        "1700000000", 12, "jit_f", "module")
    # XLA GPU names; the module name is known from the directory's other files
    d = parse_dump_name("module_0001.jit_f.sm_8.0_gpu_after_optimizations.txt", {"jit_f"})
    assert (d.kind, d.module_name, d.suffix) == ("module", "jit_f",
                                                 "sm_8.0_gpu_after_optimizations")
    d = parse_dump_name("module_0001.a.0007.b.0001.p.after_x.before_y.txt", {"a.0007.b"})
    assert (d.module_name, d.step, d.pipeline) == ("a.0007.b", 1, "p")
    assert parse_dump_name("module_0000.m.after_optimizations.top_level.html").extension == \
        "top_level.html"
    assert parse_dump_name("README.txt") is None


def test_count_instructions():
    assert count_instructions(load_text(HLO).to_text()) == (7, 0)
    text = "ENTRY %e {\n  %f = (f32[2], s32[]) fusion(%a, %b), kind=kLoop, calls=%c\n}\n"
    assert count_instructions(text) == (1, 1)


def test_read_back_from_stats_and_from_files(tmp_path):
    run(tmp_path, pipeline="optimization", xla_dump_hlo_pass_re=".*")
    (timeline,) = read_dump_dir(str(tmp_path))
    assert timeline.source == "pass_stats.json" and timeline.module_name == "m"
    assert [e.pass_name for e in timeline.entries][:3] == [
        "flatten-call-graph", "zero_sized_hlo_elimination", "dynamic-index-splitter"]
    # algsimp (first in the seed's simplification to change it) folds %x + %y
    first = [e for e in timeline.entries if e.changed][0]
    assert first.pass_name == "algsimp"
    assert (first.instructions_before, first.instructions_after) == (7, 6)
    assert first.wall_ms is not None and first.step is not None
    os.unlink(tmp_path / "module_0000.m.pass_stats.json")
    (timeline,) = read_dump_dir(str(tmp_path))
    assert timeline.source == "files"
    steps = [(e.step, e.pipeline, e.pass_name, e.changed, e.instructions_before,
              e.instructions_after) for e in timeline.entries]
    assert steps == [
        (0, "optimization", "pipeline-start", None, 7, 7),
        (1, "simplification", "pipeline-start", None, 7, 7),
        (2, "simplification", "algsimp", True, 7, 6),
        (3, "simplification", "pipeline-start", None, 6, 6),  # the fixpoint's 2nd round
        (4, "optimization", "simplification", False, 6, 6),
        (5, "simplification", "pipeline-start", None, 6, 6),  # simplification runs 3 times
        (6, "simplification", "pipeline-start", None, 6, 6)]
    assert all(e.wall_ms is None for e in timeline.entries)


def test_read_missing_dir(tmp_path):
    from hlo_opt.errors import HloError
    with pytest.raises(HloError, match="no such directory"):
        read_dump_dir(str(tmp_path / "nope"))
