"""scatter_expander (ScatterExpander, kEliminateAllScatters by default): every scatter
becomes a while loop over its indices that the interpreter runs to the same result."""
from __future__ import annotations

import numpy as np
import pytest

from passes.scatter_expander import ScatterExpander, scatter_indices_count
from tests.support.expander_real_modules import MODULES, check_module
from tests.conftest import require_corpus
from tests.support.harness import check_pass, execute_or_xfail, load_text
from tests.support.lit_chunks import chunks

ADD = """
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}
"""
ASSIGN = """
%assign (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  ROOT %b = s32[] parameter(1)
}
"""


def module(body: str, comps: str = ADD) -> str:
    return "HloModule m\n" + comps + body


def expand(text: str, **kw):
    r = check_pass(load_text(text), ScatterExpander(**kw), rtol=1e-5, atol=1e-5)
    return r


def opcodes(m) -> list[str]:
    return [i.opcode for i in m.instructions()]


def test_rows_of_a_matrix_become_a_counted_loop():
    r = expand(module("""
ENTRY %e (t: f32[6,4], i: s32[5,1], u: f32[5,4]) -> f32[6,4] {
  %t = f32[6,4] parameter(0)
  %i = s32[5,1] parameter(1)
  %u = f32[5,4] parameter(2)
  ROOT %s = f32[6,4] scatter(%t, %i, %u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
}"""))
    assert r.changed and r.compared_runs == 3
    ops = opcodes(r.module)
    assert "scatter" not in ops and ops.count("while") == 1
    assert "map" in ops and "dynamic-update-slice" in ops
    loop = next(i for i in r.module.instructions() if i.opcode == "while")
    cond = loop.called[0]
    assert cond.root.opcode == "compare" and cond.root.attrs["direction"] == "LT"
    assert cond.root.operands[1].literal.array.item() == 5  # trip count = number of rows


@pytest.mark.parametrize("ivd", [0, 1, 2])
def test_index_vector_dim_anywhere(ivd):
    """Two scatter dims and a 2-element index vector at position ``ivd``."""
    shape = [3, 2]
    shape.insert(ivd, 2)
    ishape = ",".join(map(str, shape))
    r = expand(module(f"""
ENTRY %e (t: f32[5,6,3], i: s32[{ishape}], u: f32[3,2,3]) -> f32[5,6,3] {{
  %t = f32[5,6,3] parameter(0)
  %i = s32[{ishape}] parameter(1)
  %u = f32[3,2,3] parameter(2)
  ROOT %s = f32[5,6,3] scatter(%t, %i, %u), update_window_dims={{2}},
      inserted_window_dims={{0,1}}, scatter_dims_to_operand_dims={{1,0}},
      index_vector_dim={ivd}, to_apply=%add
}}"""))
    assert r.changed and r.compared_runs == 3
    if ivd < 2:
        assert "transpose" in opcodes(r.module)


def test_scalar_indices_and_windows_that_leave_the_operand_are_skipped():
    """index_vector_dim = rank (scalar indices); random indices in [-8, 8] put some
    windows out of bounds, which scatter (and the loop's select) leaves alone."""
    r = expand(module("""
ENTRY %e (t: f32[7,3], i: s32[9], u: f32[9,2,3]) -> f32[7,3] {
  %t = f32[7,3] parameter(0)
  %i = s32[9] parameter(1)
  %u = f32[9,2,3] parameter(2)
  ROOT %s = f32[7,3] scatter(%t, %i, %u), update_window_dims={1,2},
      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      to_apply=%add
}"""))
    assert r.changed and r.compared_runs == 3
    assert "reduce" in opcodes(r.module)  # the window validity check


def test_duplicate_indices_apply_in_order():
    """An assigning update computation: with repeated indices the last update wins."""
    text = module("""
ENTRY %e (t: s32[4], i: s32[6,1], u: s32[6]) -> s32[4] {
  %t = s32[4] parameter(0)
  %i = s32[6,1] parameter(1)
  %u = s32[6] parameter(2)
  ROOT %s = s32[4] scatter(%t, %i, %u), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%assign
}""", ASSIGN)
    r = expand(text)
    assert r.changed
    args = [np.array([10, 20, 30, 40], np.int32), np.array([[1], [2], [1], [9], [2], [1]],
                                                           np.int32),
            np.array([1, 2, 3, 4, 5, 6], np.int32)]
    (out,) = execute_or_xfail(r.module, args)
    np.testing.assert_array_equal(out, [10, 6, 5, 40])


def test_variadic_scatter_maps_each_output():
    comps = """
%both (a0: f32[], a1: s32[], b0: f32[], b1: s32[]) -> (f32[], s32[]) {
  %a0 = f32[] parameter(0)
  %a1 = s32[] parameter(1)
  %b0 = f32[] parameter(2)
  %b1 = s32[] parameter(3)
  %sum = f32[] add(%a0, %b0)
  %max = s32[] maximum(%a1, %b1)
  ROOT %t = (f32[], s32[]) tuple(%sum, %max)
}
"""
    r = expand(module("""
ENTRY %e (t0: f32[5,3], t1: s32[5,3], i: s32[4,1], u0: f32[4,3], u1: s32[4,3]) -> (f32[5,3], s32[5,3]) {
  %t0 = f32[5,3] parameter(0)
  %t1 = s32[5,3] parameter(1)
  %i = s32[4,1] parameter(2)
  %u0 = f32[4,3] parameter(3)
  %u1 = s32[4,3] parameter(4)
  ROOT %s = (f32[5,3], s32[5,3]) scatter(%t0, %t1, %i, %u0, %u1), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      to_apply=%both
}""", comps))
    assert r.changed and r.compared_runs == 3
    names = {c.name for c in r.module.computations}
    assert {"both.dup.0", "both.dup.1"} <= names


def test_explicit_batching_dims():
    r = expand(module("""
ENTRY %e (t: f32[3,5,4], i: s32[3,2,1], u: f32[3,2,4]) -> f32[3,5,4] {
  %t = f32[3,5,4] parameter(0)
  %i = s32[3,2,1] parameter(1)
  %u = f32[3,2,4] parameter(2)
  ROOT %s = f32[3,5,4] scatter(%t, %i, %u), update_window_dims={2},
      inserted_window_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0},
      scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=%add
}"""))
    assert r.changed and r.compared_runs == 3
    assert "remainder" in opcodes(r.module) or "divide" in opcodes(r.module)


def test_scatter_into_a_scalar():
    """Operand rank 0 (index vectors of size 0).  The interpreter cannot run the scatter
    itself here (it fails reshaping the empty index vectors), so the loop is checked
    against the sequential sum scatter defines."""
    text = module("""
ENTRY %e (t: f32[], i: s32[3,0], u: f32[3]) -> f32[] {
  %t = f32[] parameter(0)
  %i = s32[3,0] parameter(1)
  %u = f32[3] parameter(2)
  ROOT %s = f32[] scatter(%t, %i, %u), update_window_dims={}, inserted_window_dims={},
      scatter_dims_to_operand_dims={}, index_vector_dim=1, to_apply=%add
}""")
    r = check_pass(load_text(text), ScatterExpander(), execute=False)
    assert r.changed and "scatter" not in opcodes(r.module)
    t, u = np.float32(1.5), np.array([0.25, -3.0, 7.125], np.float32)
    (out,) = execute_or_xfail(r.module, [t, np.zeros((3, 0), np.int32), u])
    assert out == ((t + u[0]) + u[1]) + u[2]


def test_empty_updates_forward_the_operand():
    r = expand(module("""
ENTRY %e (t: f32[4,3], i: s32[0,1], u: f32[0,3]) -> f32[4,3] {
  %t = f32[4,3] parameter(0)
  %i = s32[0,1] parameter(1)
  %u = f32[0,3] parameter(2)
  ROOT %s = f32[4,3] scatter(%t, %i, %u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
}"""))
    assert r.changed
    assert r.module.entry.root.opcode == "parameter"


SIMPLE = module("""
ENTRY %e (t: f32[6,4], i: s32[1], u: f32[2,4], j: s32[3,1], v: f32[3,4]) -> (f32[6,4], f32[6,4]) {
  %t = f32[6,4] parameter(0)
  %i = s32[1] parameter(1)
  %u = f32[2,4] parameter(2)
  %j = s32[3,1] parameter(3)
  %v = f32[3,4] parameter(4)
  %one = f32[6,4] scatter(%t, %i, %u), update_window_dims={0,1}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=%add
  %many = f32[6,4] scatter(%t, %j, %v), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
  ROOT %both = (f32[6,4], f32[6,4]) tuple(%one, %many)
}""")


def test_simple_mode_expands_only_single_index_scatters():
    m = load_text(SIMPLE)
    counts = {i.name: scatter_indices_count(i) for i in m.instructions()
              if i.opcode == "scatter"}
    assert counts == {"one": 1, "many": 3}
    r = check_pass(m, ScatterExpander(mode="simple"))
    assert r.changed and opcodes(r.module).count("scatter") == 1
    remaining = next(i for i in r.module.instructions() if i.opcode == "scatter")
    assert remaining.name == "many"


def test_indeterministic_mode_keeps_order_independent_scatters():
    # f32 add: the result depends on the update order -> expanded.
    r = check_pass(load_text(SIMPLE), ScatterExpander(mode="indeterministic"))
    assert r.changed and "scatter" not in opcodes(r.module)
    # s32 assign would be order dependent too, but unique_indices=true makes it safe.
    text = module("""
ENTRY %e (t: s32[4], i: s32[2,1], u: s32[2]) -> s32[4] {
  %t = s32[4] parameter(0)
  %i = s32[2,1] parameter(1)
  %u = s32[2] parameter(2)
  ROOT %s = s32[4] scatter(%t, %i, %u), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true,
      to_apply=%assign
}""", ASSIGN)
    assert not check_pass(load_text(text), ScatterExpander(mode="indeterministic")).changed
    assert check_pass(load_text(text), ScatterExpander()).changed


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError):
        ScatterExpander(mode="most")


def test_scatters_in_a_called_computation_are_expanded():
    r = expand(module("""
%inner (t: f32[6,4], i: s32[2,1], u: f32[2,4]) -> f32[6,4] {
  %t = f32[6,4] parameter(0)
  %i = s32[2,1] parameter(1)
  %u = f32[2,4] parameter(2)
  ROOT %s = f32[6,4] scatter(%t, %i, %u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
}

ENTRY %e (t0: f32[6,4], i0: s32[2,1], u0: f32[2,4]) -> f32[6,4] {
  %t0 = f32[6,4] parameter(0)
  %i0 = s32[2,1] parameter(1)
  %u0 = f32[2,4] parameter(2)
  ROOT %c = f32[6,4] call(%t0, %i0, %u0), to_apply=%inner
}"""))
    assert r.changed and r.compared_runs == 3 and "scatter" not in opcodes(r.module)


# ---- the FileCheck inputs, differentially ---------------------------------------------------
LIT = chunks("scatter_expander.hlo")


@pytest.mark.parametrize("chunk", LIT, ids=[c.id for c in LIT])
def test_lit_inputs_keep_values(chunk):
    r = check_pass(load_text(chunk.text), "scatter_expander", rtol=1e-5, atol=1e-5)
    assert r.changed and r.compared_runs == 3


def test_lit_file_present():
    assert LIT


# ---- every sample and corpus module -------------------------------------------------------
@pytest.mark.parametrize("mid,text,fixture", MODULES, ids=[m[0] for m in MODULES])
def test_real_module(mid, text, fixture):
    """Expanded modules match the interpreter bit for bit on random (and XLA:CPU fixture)
    inputs -- the loop applies the same updates in the same order -- and modules without
    a scatter are left unchanged."""
    out = check_module(text, ScatterExpander, fixture, exact=True)
    assert out.changed == (" scatter(" in text)
    if out.changed:
        assert out.compared > 0


def test_real_modules_exercise_the_pass():
    require_corpus()  # the counts are over the XLA corpus
    assert sum(" scatter(" in t for _, t, _ in MODULES) >= 10
