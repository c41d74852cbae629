"""while-loop-trip-count-annotator: the trip-count analysis on a table of loops (checked
against the interpreter's own count of iterations) and the JSON it writes."""
import json

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from passes._while_util import trip_count
from passes.while_loop_trip_count_annotator import WhileLoopTripCountAnnotator
from tests.support.harness import execute_or_xfail
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("while_loop_trip_count_annotator*.hlo",
                                    WhileLoopTripCountAnnotator)
test_real_modules = real_modules_test(WhileLoopTripCountAnnotator)


def _loop(init, step_op, step, direction, bound, swap=False, ty="s32"):
    cmp = "%b, %i" if swap else "%i, %b"
    return f"""HloModule loop
%cond (s: ({ty}[], s32[])) -> pred[] {{
  %s = ({ty}[], s32[]) parameter(0)
  %i = {ty}[] get-tuple-element(%s), index=0
  %b = {ty}[] constant({bound})
  ROOT %c = pred[] compare({cmp}), direction={direction}
}}
%body (t: ({ty}[], s32[])) -> ({ty}[], s32[]) {{
  %t = ({ty}[], s32[]) parameter(0)
  %j = {ty}[] get-tuple-element(%t), index=0
  %k = s32[] get-tuple-element(%t), index=1
  %st = {ty}[] constant({step})
  %n = {ty}[] {step_op}(%j, %st)
  %one = s32[] constant(1)
  %kk = s32[] add(%k, %one)
  ROOT %r = ({ty}[], s32[]) tuple(%n, %kk)
}}
ENTRY %main () -> s32[] {{
  %i0 = {ty}[] constant({init})
  %z = s32[] constant(0)
  %init = ({ty}[], s32[]) tuple(%i0, %z)
  %w = ({ty}[], s32[]) while(%init), condition=%cond, body=%body
  ROOT %count = s32[] get-tuple-element(%w), index=1
}}
"""


CASES = [
    (0, "add", 1, "LT", 10, False), (0, "add", 3, "LT", 10, False),
    (0, "add", 1, "LE", 10, False), (5, "add", 1, "LT", 5, False),
    (20, "subtract", 4, "LT", 3, True), (20, "subtract", 4, "GE", 3, False),
    (0, "add", 2, "NE", 10, False), (10, "add", 1, "GT", 3, True),
    (-7, "add", 5, "LE", 8, False), (100, "subtract", 7, "GT", -3, False),
]


@pytest.mark.parametrize("init,op,step,direction,bound,swap", CASES)
def test_trip_count_matches_the_interpreter(init, op, step, direction, bound, swap):
    m = parse_hlo(_loop(init, op, step, direction, bound, swap))
    w = next(i for i in m.entry.instructions if i.opcode == "while")
    n = trip_count(w)
    assert n is not None
    counted = execute_or_xfail(m, [])[0]
    assert int(np.asarray(counted)) == n


@pytest.mark.parametrize("init,op,step,direction,bound", [
    (0, "add", 1, "GT", -1),       # runs forever: not a trip count
    (0, "add", 3, "NE", 10),       # skips the bound: unknown
    (2147483640, "add", 4, "LT", 2147483647),   # would overflow s32
])
def test_unprovable_loops_have_no_trip_count(init, op, step, direction, bound):
    m = parse_hlo(_loop(init, op, step, direction, bound))
    w = next(i for i in m.entry.instructions if i.opcode == "while")
    assert trip_count(w) is None


def test_existing_backend_config_keys_are_kept():
    m = parse_hlo(_loop(0, "add", 1, "LT", 4))
    w = next(i for i in m.entry.instructions if i.opcode == "while")
    w.attrs["backend_config"] = '{"other":{"x":"1"}}'
    assert WhileLoopTripCountAnnotator().run(m)
    assert json.loads(w.attrs["backend_config"]) == {
        "known_trip_count": {"n": "4"}, "known_init_step": {"init": "0", "step": "1"},
        "known_induction_variable": {"tuple_index": "0"}, "other": {"x": "1"}}
    assert not WhileLoopTripCountAnnotator().run(m)  # idempotent: no change reported


def test_induction_variable_is_recorded_when_the_count_overflows_int64():
    """s64 from -2^63 + 1 up to 2^63 - 1 in steps of 1: 2^64 - 2 trips (no int64); XLA
    still records the induction variable."""
    m = parse_hlo(_loop(-(1 << 63) + 1, "add", 1, "LT", (1 << 63) - 1, ty="s64"))
    w = next(i for i in m.entry.instructions if i.opcode == "while")
    assert trip_count(w) == (1 << 64) - 2
    assert WhileLoopTripCountAnnotator().run(m)
    assert json.loads(w.attrs["backend_config"]) == {
        "known_induction_variable": {"tuple_index": "0"}}


def test_counting_down_records_the_count_without_init_step():
    m = parse_hlo(_loop(20, "subtract", 4, "GE", 3))
    w = next(i for i in m.entry.instructions if i.opcode == "while")
    assert WhileLoopTripCountAnnotator().run(m)
    assert json.loads(w.attrs["backend_config"]) == {
        "known_trip_count": {"n": "5"}, "known_induction_variable": {"tuple_index": "0"}}
