"""Dump file names (XLA's FilenameFor) parsed, sorted and paired."""
from __future__ import annotations

from pathlib import Path

from hlo_opt.diff.dumpdir import (AFTER_STEP, BEFORE_STEP, between, consecutive_pairs,
                                  parse_dump_name, pass_pairs, scan)


def test_per_pass_names():
    f = parse_dump_name("module_0000.m.0001.transforms_pipeline.after_algsimp"
                        ".before_pipeline-end.txt")
    assert (f.module_id, f.module_name, f.step, f.pipeline, f.after, f.before) == (
        0, "m", 1, "transforms_pipeline", "algsimp", "pipeline-end")
    # module names keep their dots (and trailing numbers); a timestamp may lead
    f = parse_dump_name("1700000000123.module_0012.cluster_19__.123.0042.opt.after_dce"
                        ".before_cse.txt")
    assert (f.module_id, f.module_name, f.step, f.after, f.before) == (
        12, "cluster_19__.123", 42, "dce", "cse")
    f = parse_dump_name("module_0001.a.0002.b.0003.pipe.after_x.before_y.txt")
    assert (f.module_name, f.step, f.pipeline) == ("a.0002.b", 3, "pipe")


def test_whole_module_names_and_others():
    assert parse_dump_name("module_0003.m.before_optimizations.txt").step == BEFORE_STEP
    assert parse_dump_name("module_0003.m.after_optimizations.txt").step == AFTER_STEP
    assert parse_dump_name("module_0003.m.after_optimization.txt").step == AFTER_STEP
    for other in ("module_0003.m.after_optimizations-buffer-assignment.txt",
                  "module_0003.m.debug_options", "module_0003.m.ir-no-opt.ll",
                  "module_0003.m.after_optimizations.html", "notes.txt"):
        assert parse_dump_name(other) is None, other


def _touch(d: Path, names):
    for n in names:
        (d / n).write_text("")


def test_scan_orders_by_module_then_step(tmp_path):
    _touch(tmp_path, [
        "module_0010.b.0001.p.after_a.before_b.txt", "module_0002.a.after_optimizations.txt",
        "module_0002.a.0010.p.after_z.before_y.txt", "module_0002.a.0002.p.after_c.before_d.txt",
        "module_0002.a.before_optimizations.txt", "module_0010.b.0000.p.after_s.before_a.txt"])
    files = scan(tmp_path)
    assert list(files) == [2, 10]
    assert [f.label for f in files[2]] == [
        "before_optimizations", "0002 p.after_c", "0010 p.after_z", "after_optimizations"]
    assert [(a.step, b.step) for a, b in consecutive_pairs(files[2])] == [(2, 10)]


def test_pass_pairs_use_the_previous_dump(tmp_path):
    _touch(tmp_path, [
        "module_0000.m.before_optimizations.txt",
        "module_0000.m.0000.p.after_pipeline-start.before_a.txt",
        "module_0000.m.0003.p.after_algsimp.before_dce.txt",
        "module_0000.m.0007.p.after_algsimp.before_cse.txt"])
    files = scan(tmp_path)[0]
    pairs = pass_pairs(files, "algsimp")
    assert [(a.step, b.step) for a, b in pairs] == [(0, 3), (3, 7)]
    assert [(a.step, b.step) for a, b in pass_pairs(files, "p.algsimp")] == [(0, 3), (3, 7)]
    assert pass_pairs(files, "dce") == []
    assert between(pairs[0][0], pairs[0][1]) == "a .. algsimp"
    assert between(pairs[1][0], pairs[1][1]) == "dce .. algsimp"
    first = pass_pairs(files, "pipeline-start")
    assert [(a.step, b.step) for a, b in first] == [(BEFORE_STEP, 0)]
