"""Diffs of corpus modules before/after dce and cse, checked against what those passes can
do: dce only removes; cse only removes and rewires.  Names are the independent oracle
(these passes keep the names of what they keep), so modules whose instruction names are
not unique are left out."""
from __future__ import annotations

import pytest

from hlo_opt.diff import diff_modules
from hlo_opt.errors import HloError
from hlo_opt.text.parser import parse_hlo_modules
from tests.conftest import corpus_files, require_corpus, sample_files

from .cases import require_pass

ALLOWED = {"dce": {"called computation", "fused computation"},
           "cse": {"operands", "called computation", "fused computation", "root"}}


def _modules():
    for path in corpus_files() + sample_files():
        try:
            modules = parse_hlo_modules(path.read_text(), path.name)
        except HloError:
            continue
        for k, m in enumerate(modules):
            names = [i.name for i in m.instructions()]
            if len(names) == len(set(names)):
                yield f"{path.name}[{k}]", m


@pytest.mark.parametrize("pass_name", ["dce", "cse"])
def test_diff_after_pass_reports_only_what_the_pass_can_do(pass_name):
    require_corpus()
    require_pass(pass_name)
    from passes.registry import create_pass
    checked, failures = 0, []
    for label, module in _modules():
        after = module.clone()
        try:
            create_pass(pass_name).run(after)
        except Exception:  # noqa: BLE001 - the pass's own bugs are its tests' business
            continue
        checked += 1
        d = diff_modules(module, after)
        gone = {i.name for i in module.instructions()} - {i.name for i in after.instructions()}
        problems = []
        if d.added:
            problems.append(f"added {[d.right.name(i) for i in d.added]}")
        removed = {d.left.name(i) for i in d.removed}
        if removed != gone:
            problems.append(f"removed {sorted(removed)} but the pass deleted {sorted(gone)}")
        kinds = {k for ch in d.changes.values() for k in ch.kinds}
        if kinds - ALLOWED[pass_name]:
            problems.append(f"change kinds {sorted(kinds - ALLOWED[pass_name])}")
        if problems:
            failures.append(f"{label}: {'; '.join(problems)}")
    assert checked >= 100
    assert not failures, "\n".join(failures[:20])
