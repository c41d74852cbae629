"""The diff of MobileNet against itself after `algsimp` lists the rewrites.

Oracle independent of the matcher: algsimp keeps the names of the instructions it leaves
in place and gives new ones fresh names, so an instruction whose name and text are the
same on both sides must be matched to itself and unchanged; a name found on one side
only belongs to a removed / added instruction (or to one side of a changed pair).
"""
from __future__ import annotations

from hlo_opt.api import load
from hlo_opt.diff import diff_modules
from hlo_opt.diff.render_text import inst_text, render_text
from tests.conftest import SAMPLES

from .cases import require_pass


def test_algsimp_on_mobilenet_lists_the_rewrites():
    algsimp = require_pass("algsimp")
    before = load(str(SAMPLES / "mobilenet_cluster.hlo"))
    after = before.clone()
    assert algsimp.run(after), "algsimp changed nothing on MobileNet"
    d = diff_modules(before, after, left_label="mobilenet", right_label="algsimp")
    assert not d.equal
    names_l = {i.name: i for i in before.instructions()}
    names_r = {i.name: i for i in after.instructions()}
    for name, li in names_l.items():
        ri = names_r.get(name)
        status = d.status_of(li)
        if ri is None:
            assert status != "unchanged", f"%{name} disappeared but is reported unchanged"
            continue
        assert d.match_of(li) is ri, f"%{name} not matched to itself"
        same = inst_text(li, True) == inst_text(ri, True) and li.shape == ri.shape
        assert (status == "unchanged") == same, (name, status, inst_text(li),
                                                  inst_text(ri))
    for name, ri in names_r.items():
        if name not in names_l:
            assert d.status_of(ri) != "unchanged", f"new %{name} reported unchanged"
    text = render_text(d, context=0)
    for i in d.removed:
        assert "- " + inst_text(d.left.insts[i]) in text
    for i in d.added:
        assert "+ " + inst_text(d.right.insts[i]) in text
    for li, ri, _ in d.changed_pairs():
        assert "+ " + inst_text(ri) in text
    assert d.patterns and all(p.count >= 1 for p in d.patterns)
    assert "patterns:" in text
