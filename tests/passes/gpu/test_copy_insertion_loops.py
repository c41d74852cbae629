"""copy-insertion on while loops and conditionals: XLA's WhileCopyInsertionTest and the
loop / conditional cases of copy_insertion_test.cc, ported to HLO text (helpers and the
buffer simulator as in ``test_copy_insertion.py``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ._buffer_sim import BufferError, assert_buffer_safe
from .test_copy_insertion import copies, control_edges, find, insert, op

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

# ---- while loops (WhileCopyInsertionTest) ---------------------------------------------------

COND = """%cond (ls: (s32[], f32[8])) -> pred[] {
  %ls = (s32[], f32[8]) parameter(0)
  %iv = s32[] get-tuple-element(%ls), index=0
  %limit = s32[] constant(10)
  ROOT %lt = pred[] compare(%iv, %limit), direction=LT
}
"""

INDEPENDENT_BODY = """%body (ls: (s32[], f32[8])) -> (s32[], f32[8]) {
  %ls = (s32[], f32[8]) parameter(0)
  %iv = s32[] get-tuple-element(%ls), index=0
  %inc = s32[] constant(1)
  %add0 = s32[] add(%iv, %inc)
  %data = f32[8] get-tuple-element(%ls), index=1
  %update = f32[8] constant({1, 1, 1, 1, 1, 1, 1, 1})
  %add1 = f32[8] add(%data, %update)
  ROOT %out = (s32[], f32[8]) tuple(%add0, %add1)
}
"""

DEPENDENT_BODY = """%body (ls: (s32[], f32[8])) -> (s32[], f32[8]) {
  %ls = (s32[], f32[8]) parameter(0)
  %iv = s32[] get-tuple-element(%ls), index=0
  %inc = s32[] constant(1)
  %add0 = s32[] add(%iv, %inc)
  %data = f32[8] get-tuple-element(%ls), index=1
  %convert = f32[] convert(%iv)
  %update = f32[8] broadcast(%convert), dimensions={}
  %add1 = f32[8] add(%data, %update)
  ROOT %out = (s32[], f32[8]) tuple(%add0, %add1)
}
"""

ONE_READ_ONLY_BODY = """%body{n} (ls: (s32[], f32[8])) -> (s32[], f32[8]) {{
  %ls = (s32[], f32[8]) parameter(0)
  %iv = s32[] get-tuple-element(%ls), index=0
  %data = f32[8] get-tuple-element(%ls), index=1
  %convert = f32[] convert(%iv)
  %update = f32[8] broadcast(%convert), dimensions={{}}
  %add1 = f32[8] add(%data, %update)
  ROOT %out = (s32[], f32[8]) tuple(%iv, %add1)
}}
"""

CONSTANT_INIT_ENTRY = """ENTRY %main () -> (s32[], f32[8]) {
  %iv_init = s32[] constant(0)
  %data_init = f32[8] constant({0, 0, 0, 0, 0, 0, 0, 0})
  %init = (s32[], f32[8]) tuple(%iv_init, %data_init)
  ROOT %while = (s32[], f32[8]) while(%init), condition=%cond, body=%body
}
"""


def _init(m):
    return find(m, "while").operands[0]


def test_while_independent_tuple_elements():
    m = insert("HloModule m\n" + COND + INDEPENDENT_BODY + CONSTANT_INIT_ENTRY)
    assert copies(m, "body") == 0 and control_edges(m) == 0
    assert op(_init(m)) == "tuple(copy(constant), copy(constant))"


def test_while_dependent_tuple_elements():
    m = insert("HloModule m\n" + COND + DEPENDENT_BODY + CONSTANT_INIT_ENTRY)
    # the induction variable is still read (convert) after its new value exists: the
    # parameter side is copied; the data element updates in place
    assert copies(m, "body") == 1 and control_edges(m, "body") == 0
    g = "get-tuple-element(parameter)"
    assert op(m.computation("body").root) == (
        f"tuple(add(copy({g}), constant), add({g}, broadcast(convert(copy({g})))))")
    assert op(_init(m)) == "tuple(copy(constant), copy(constant))"


def test_while_dependent_tuple_elements_one_read_only():
    m = insert("HloModule m\n" + COND + ONE_READ_ONLY_BODY.format(n="") + CONSTANT_INIT_ENTRY,
               execute=False)
    assert copies(m, "body") == 0 and control_edges(m, "body") == 0
    # element 0 goes around the loop unchanged: its constant init needs no copy
    assert op(_init(m)) == "tuple(constant, copy(constant))"


TWO_LOOPS = """HloModule m
{cond}{cond2}{body1}{body2}
ENTRY %main (iter: s32[], data: f32[8]) -> s32[] {{
  %iter = s32[] parameter(0)
  %data = f32[8] parameter(1)
{prelude}
  %init = (s32[], f32[8]) tuple({a}, {b})
  %while.1 = (s32[], f32[8]) while(%init), condition=%cond, body=%body1
  %while.2 = (s32[], f32[8]) while(%init), condition=%cond2, body=%body2
  %g1 = s32[] get-tuple-element(%while.1), index=0
  %g2 = s32[] get-tuple-element(%while.2), index=0
  ROOT %add = s32[] add(%g1, %g2)
}}
"""


def _two_loops(prelude, a, b):
    return TWO_LOOPS.format(cond=COND, cond2=COND.replace("%cond ", "%cond2 ").replace(
        "%ls", "%ls2").replace("%iv", "%iv2").replace("%limit", "%limit2").replace(
        "%lt", "%lt2"), body1=ONE_READ_ONLY_BODY.format(n="1"),
        body2=ONE_READ_ONLY_BODY.format(n="2").replace("%ls", "%ls_2").replace(
            "%iv", "%iv_2").replace("%data", "%data_2").replace("%convert", "%convert_2")
        .replace("%update", "%update_2").replace("%add1", "%add1_2").replace("%out", "%out_2"),
        prelude=prelude, a=a, b=b)


def test_two_loops_sharing_entry_parameters():
    m = insert(_two_loops("", "%iter", "%data"), execute=False)
    assert copies(m, "body1") == 0 and copies(m, "body2") == 0
    assert control_edges(m) == 0
    w1, w2 = find(m, "while.1"), find(m, "while.2")
    # each loop gets its own copy of the element it writes
    assert copies(m, "main") == 2
    assert w1.operands[0].operands[1].opcode == "copy"
    assert w2.operands[0].operands[1].opcode == "copy"
    assert w1.operands[0].operands[1] is not w2.operands[0].operands[1]


def test_two_loops_sharing_non_parameters():
    prelude = """  %convert = f32[] convert(%iter)
  %iter_value = f32[] exponential(%convert)
  %convert2 = s32[] convert(%iter_value)
  %data_value = f32[8] exponential(%data)"""
    m = insert(_two_loops(prelude, "%convert2", "%data_value"), execute=False)
    assert copies(m, "main") == 2
    assert op(find(m, "while.1").operands[0]) == \
        "tuple(convert(exponential(convert(parameter))), copy(exponential(parameter)))"
    assert op(find(m, "while.2").operands[0]) == \
        "tuple(convert(exponential(convert(parameter))), copy(exponential(parameter)))"


NESTED_COND = COND.replace("(s32[], f32[8])", "(s32[], (f32[8], f32[8]))")

NESTED_BODY = """%body (ls: (s32[], (f32[8], f32[8]))) -> (s32[], (f32[8], f32[8])) {
  %ls = (s32[], (f32[8], f32[8])) parameter(0)
  %gte0 = s32[] get-tuple-element(%ls), index=0
  %inc = s32[] constant(1)
  %add0 = s32[] add(%gte0, %inc)
  %gte1 = (f32[8], f32[8]) get-tuple-element(%ls), index=1
  %gte10 = f32[8] get-tuple-element(%gte1), index=0
  %update10 = f32[8] constant({1, 1, 1, 1, 1, 1, 1, 1})
  %add10 = f32[8] add(%gte10, %update10)
  %gte11 = f32[8] get-tuple-element(%gte1), index=1
  %rev11 = f32[8] reverse(%gte11), dimensions={0}
  %inner = (f32[8], f32[8]) tuple(%add10, %rev11)
  ROOT %out = (s32[], (f32[8], f32[8])) tuple(%add0, %inner)
}
"""


def test_while_nested_tuple_elements():
    m = insert("HloModule m\n" + NESTED_COND + NESTED_BODY + """
ENTRY %main () -> (s32[], (f32[8], f32[8])) {
  %iv_init = s32[] constant(0)
  %data_init = f32[8] constant({0, 0, 0, 0, 0, 0, 0, 0})
  %inner_init = (f32[8], f32[8]) tuple(%data_init, %data_init)
  %init = (s32[], (f32[8], f32[8])) tuple(%iv_init, %inner_init)
  ROOT %while = (s32[], (f32[8], f32[8])) while(%init), condition=%cond, body=%body
}
""")
    # only the reverse cannot be done in place; every init element is a constant
    assert copies(m, "body") == 1 and copies(m) == 4
    assert op(m.computation("body").root) in (
        "tuple(add(get-tuple-element(parameter), constant), tuple(add(get-tuple-element("
        "get-tuple-element(parameter)), constant), copy(reverse(get-tuple-element("
        "get-tuple-element(parameter))))))",
        "tuple(add(get-tuple-element(parameter), constant), tuple(add(get-tuple-element("
        "get-tuple-element(parameter)), constant), reverse(copy(get-tuple-element("
        "get-tuple-element(parameter))))))")


def test_while_init_points_to_constant_and_parameter():
    m = insert("HloModule m\n" + COND + INDEPENDENT_BODY + """
ENTRY %main (data_init: f32[8]) -> (s32[], f32[8]) {
  %data_init = f32[8] parameter(0)
  %iv_init = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%iv_init, %data_init)
  ROOT %while = (s32[], f32[8]) while(%init), condition=%cond, body=%body
}
""")
    assert copies(m, "body") == 0 and copies(m) == 2
    assert op(_init(m)) == "tuple(copy(constant), copy(parameter))"


def test_while_init_points_to_non_distinct():
    body = NESTED_BODY.replace("%rev11 = f32[8] reverse(%gte11), dimensions={0}", "").replace(
        "tuple(%add10, %rev11)", "tuple(%add10, %add10)")
    m = insert("HloModule m\n" + NESTED_COND + body + """
ENTRY %main () -> (s32[], (f32[8], f32[8])) {
  %one = f32[] constant(1)
  %one_vec = f32[8] broadcast(%one), dimensions={}
  %iv_init = s32[] constant(0)
  %data_init = (f32[8], f32[8]) tuple(%one_vec, %one_vec)
  %init = (s32[], (f32[8], f32[8])) tuple(%iv_init, %data_init)
  ROOT %while = (s32[], (f32[8], f32[8])) while(%init), condition=%cond, body=%body
}
""")
    # one broadcast feeds two loop elements: one of them is copied (and the constant)
    assert copies(m, "main") == 2
    assert op(_init(m)) in ("tuple(copy(constant), tuple(copy(broadcast(constant)), "
                            "broadcast(constant)))",
                            "tuple(copy(constant), tuple(broadcast(constant), "
                            "copy(broadcast(constant))))")
    # one add is returned at two places of the loop state: one of them is copied
    assert copies(m, "body") == 1
    assert op(m.computation("body").root).count("copy(add(") == 1


def test_while_init_points_to_interfering():
    m = insert("HloModule m\n" + COND + INDEPENDENT_BODY + """
ENTRY %main () -> (s32[], f32[8]) {
  %one = f32[] constant(1)
  %data_init = f32[8] broadcast(%one), dimensions={}
  %one_vec = f32[8] constant({1, 1, 1, 1, 1, 1, 1, 1})
  %add = f32[8] add(%data_init, %one_vec)
  %iv_init = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%iv_init, %data_init)
  %while = (s32[], f32[8]) while(%init), condition=%cond, body=%body
  %gte = f32[8] get-tuple-element(%while), index=1
  %sub = f32[8] subtract(%add, %gte)
  %gte0 = s32[] get-tuple-element(%while), index=0
  ROOT %t = (s32[], f32[8]) tuple(%gte0, %sub)
}
""")
    assert copies(m) == 2 and copies(m, "body") == 0
    assert op(_init(m)) == "tuple(copy(constant), copy(broadcast(constant)))"


def test_while_init_non_distinct_used_by_two_loops():
    state = "(s32[], f32[8], f32[8])"
    body = """%body{n} (ls: {s}) -> {s} {{
  %ls = {s} parameter(0)
  %iv = s32[] get-tuple-element(%ls), index=0
  %inc = s32[] constant(1)
  %add0 = s32[] add(%iv, %inc)
  %data1 = f32[8] get-tuple-element(%ls), index=1
  %data2 = f32[8] get-tuple-element(%ls), index=2
  ROOT %out = {s} tuple(%add0, %data1, %data2)
}}
"""
    cond = COND.replace("(s32[], f32[8])", state)
    text = "HloModule m\n" + cond + body.format(n="1", s=state) + body.format(
        n="2", s=state).replace("%ls", "%ls2").replace("%iv", "%iv2").replace(
        "%inc", "%inc2").replace("%add0", "%add02").replace("%data", "%datb").replace(
        "%out", "%out2") + f"""
ENTRY %main (iter: s32[], data: f32[8]) -> s32[] {{
  %iter = s32[] parameter(0)
  %data = f32[8] parameter(1)
  %init = {state} tuple(%iter, %data, %data)
  %while.1 = {state} while(%init), condition=%cond, body=%body1
  %while.2 = {state} while(%init), condition=%cond, body=%body2
  %g1 = s32[] get-tuple-element(%while.1), index=0
  %g2 = s32[] get-tuple-element(%while.2), index=0
  ROOT %add = s32[] add(%g1, %g2)
}}
"""
    m = insert(text)
    assert copies(m, "body1") == 0 and copies(m, "body2") == 0
    assert copies(m, "main") == 2
    assert op(find(m, "while.1").operands[0]) == "tuple(copy(parameter), parameter, parameter)"
    assert op(find(m, "while.2").operands[0]) == "tuple(copy(parameter), parameter, parameter)"


SWIZZLE = """HloModule m
%body (param: (f32[], f32[])) -> (f32[], f32[]) {{
  %param = (f32[], f32[]) parameter(0)
  %e0 = f32[] get-tuple-element(%param), index=0
  %e1 = f32[] get-tuple-element(%param), index=1
{extra}
  ROOT %out = (f32[], f32[]) tuple({first}, %e0)
}}
%condition (cparam: (f32[], f32[])) -> pred[] {{
  %cparam = (f32[], f32[]) parameter(0)
  %f = pred[] constant(false)
  ROOT %not = pred[] not(%f)
}}
ENTRY %main () -> (f32[], f32[]) {{
  {inits}
  ROOT %while = (f32[], f32[]) while(%tuple), condition=%condition, body=%body
}}
"""
TWO_CONSTANTS = """%c1 = f32[] constant(1)
  %c2 = f32[] constant(2)
  %tuple = (f32[], f32[]) tuple(%c1, %c2)"""


def _swizzle_text(extra, first, inits):
    # the condition never stops: these modules are checked structurally only
    return SWIZZLE.format(extra=extra, first=first, inits=inits)


def test_swizzling_while():
    m = insert(_swizzle_text("", "%e1", TWO_CONSTANTS), execute=False)
    assert copies(m) == 6
    # both elements copied at the parameter and at the root, ordered by control edges
    assert copies(m, "body") == 4 and control_edges(m, "body") == 2
    assert op(m.computation("body").root) == "tuple(copy(copy(get-tuple-element(parameter))), "\
        "copy(copy(get-tuple-element(parameter))))"
    assert copies(m, "main") == 2 and op(find(m, "while").operands[0]) == \
        "tuple(copy(constant), copy(constant))"


def test_swizzling_while_with_one_op():
    m = insert(_swizzle_text("  %negate = f32[] negate(%e1)", "%negate", TWO_CONSTANTS),
               execute=False)
    assert copies(m) == 6 and copies(m, "body") == 4 and control_edges(m, "body") == 2
    assert op(m.computation("body").root) == \
        "tuple(copy(negate(copy(get-tuple-element(parameter)))), " \
        "copy(copy(get-tuple-element(parameter))))"
    assert op(find(m, "while").operands[0]) == "tuple(copy(constant), copy(constant))"


def test_swizzling_while_shared_input():
    # both elements start as the same constant: swapping them is a no-op
    m = insert(_swizzle_text("", "%e1", """%c = f32[] constant(1)
  %tuple = (f32[], f32[]) tuple(%c, %c)"""), execute=False)
    assert copies(m) == 2 and copies(m, "body") == 0
    assert op(m.entry.root) == "tuple(copy(get-tuple-element(while(tuple(constant, "\
        "constant)))), copy(get-tuple-element(while(tuple(constant, constant)))))"


def test_sequential_whiles():
    shape = "f32[42]"
    state = f"({shape}, {shape}, {shape}, {shape})"
    parts = ["HloModule m"]
    entry = [f"ENTRY %main (param_0: {shape}, param_1: {shape}, param_2: {shape}, "
             f"param_3: {shape}) -> {state} {{"]
    entry += [f"  %param_{k} = {shape} parameter({k})" for k in range(4)]
    prev = ["%param_1", "%param_2", "%param_3"]
    for w in range(3):
        parts.append(f"""%body{w} (param: {state}) -> {state} {{
  %param = {state} parameter(0)
  %e0 = {shape} get-tuple-element(%param), index=0
  %e1 = {shape} get-tuple-element(%param), index=1
  %e2 = {shape} get-tuple-element(%param), index=2
  %e3 = {shape} get-tuple-element(%param), index=3
  %negate = {shape} negate(%e2)
  %reverse = {shape} reverse(%e3), dimensions={{0}}
  ROOT %out = {state} tuple(%e0, %e1, %negate, %reverse)
}}
%cond{w} (cparam: {state}) -> pred[] {{
  %cparam = {state} parameter(0)
  %f = pred[] constant(false)
  ROOT %not = pred[] not(%f)
}}""".replace("%param", f"%p{w}").replace("%e", f"%e{w}_").replace("%negate", f"%n{w}")
                     .replace("%reverse", f"%r{w}").replace("%out", f"%o{w}")
                     .replace("%cparam", f"%cp{w}").replace("%f ", f"%f{w} ")
                     .replace("(%f)", f"(%f{w})").replace("%not", f"%not{w}"))
        entry.append(f"  %init{w} = {state} tuple(%param_0, {', '.join(prev)})")
        entry.append(f"  %while{w} = {state} while(%init{w}), condition=%cond{w}, "
                     f"body=%body{w}")
        if w < 2:
            for k in (1, 2, 3):
                entry.append(f"  %w{w}_{k} = {shape} get-tuple-element(%while{w}), index={k}")
            prev = [f"%w{w}_{k}" for k in (1, 2, 3)]
    entry[-1] = entry[-1].replace("  %while2", "  ROOT %while2")
    entry.append("}")
    m = insert("\n".join(parts + entry), execute=False)
    # one copy per body (the reverse), each written element copied once in the entry
    assert copies(m) == 4 + 3
    for w in range(3):
        assert copies(m, f"body{w}") == 1
    assert op(find(m, "while0").operands[0]) == \
        "tuple(parameter, parameter, copy(parameter), copy(parameter))"
    assert [o.opcode for o in m.entry.root.operands] == \
        ["copy", "copy", "get-tuple-element", "get-tuple-element"]


def test_while_body_with_constant_root():
    m = insert("""HloModule m
%body (param: f32[]) -> f32[] {
  %param = f32[] parameter(0)
  ROOT %c = f32[] constant(123)
}
%condition (cparam: f32[]) -> pred[] {
  %cparam = f32[] parameter(0)
  ROOT %f = pred[] constant(false)
}
ENTRY %main (param_0: f32[]) -> f32[] {
  %param_0 = f32[] parameter(0)
  ROOT %while = f32[] while(%param_0), condition=%condition, body=%body
}""")
    assert copies(m) == 2
    assert op(find(m, "while").operands[0]) == "copy(parameter)"
    assert op(m.computation("body").root) == "copy(constant)"
    assert op(m.computation("condition").root) == "constant"


def test_tokens_should_not_be_copied():
    m = insert("""HloModule m
%Body (param.1: (s32[], token[])) -> (s32[], token[]) {
  %param.1 = (s32[], token[]) parameter(0)
  %gte.1 = s32[] get-tuple-element(%param.1), index=0
  %constant.1 = s32[] constant(1)
  %add = s32[] add(%gte.1, %constant.1)
  %gte.2 = token[] get-tuple-element(%param.1), index=1
  %after-all = token[] after-all(%gte.2)
  ROOT %tuple = (s32[], token[]) tuple(%add, %after-all)
}
%Cond (param: (s32[], token[])) -> pred[] {
  %param = (s32[], token[]) parameter(0)
  %gte = s32[] get-tuple-element(%param), index=0
  %constant = s32[] constant(42)
  ROOT %lt = pred[] compare(%gte, %constant), direction=LT
}
ENTRY %main () -> s32[] {
  %one = s32[] constant(1)
  %negative_one = s32[] negate(%one)
  %init_token = token[] after-all()
  %init_tuple = (s32[], token[]) tuple(%negative_one, %init_token)
  %while = (s32[], token[]) while(%init_tuple), condition=%Cond, body=%Body
  ROOT %root = s32[] get-tuple-element(%while), index=0
}""", execute=False)
    assert copies(m) == 0


NESTED_WHILES = """HloModule m
%cond.inner (param.cond.inner: pred[]) -> pred[] {
  ROOT %param.cond.inner = pred[] parameter(0)
}
%body.inner (param.body.inner: pred[]) -> pred[] {
  %param.body.inner = pred[] parameter(0)
  ROOT %not = pred[] not(%param.body.inner)
}
%cond.outer (param.cond.outer: pred[]) -> pred[] {
  ROOT %param.cond.outer = pred[] parameter(0)
}
"""


def test_nested_whiles():
    m = insert(NESTED_WHILES + """%body.outer (param.body.outer: pred[]) -> pred[] {
  %param.body.outer = pred[] parameter(0)
  ROOT %while.inner = pred[] while(%param.body.outer), condition=%cond.inner, body=%body.inner
}
ENTRY %main (entry_param: pred[]) -> pred[] {
  %entry_param = pred[] parameter(0)
  ROOT %while = pred[] while(%entry_param), condition=%cond.outer, body=%body.outer
}""", execute=False)
    assert copies(m) == 1
    assert op(m.entry.root) == "while(copy(parameter))"


def test_nested_whiles_with_param_root():
    m = insert(NESTED_WHILES + """%body.outer (param.body.outer: pred[]) -> pred[] {
  ROOT %param.body.outer = pred[] parameter(0)
  %while.inner = pred[] while(%param.body.outer), condition=%cond.inner, body=%body.inner
  %after-all = token[] after-all()
  %outfeed = token[] outfeed(%while.inner, %after-all)
}
ENTRY %main (entry_param: pred[]) -> pred[] {
  %entry_param = pred[] parameter(0)
  %while = pred[] while(%entry_param), condition=%cond.outer, body=%body.outer
  ROOT %not = pred[] not(%while)
}""", execute=False, simulate=False)  # an outfeed: not simulated
    assert copies(m) == 1
    assert op(m.entry.root) == "not(while(parameter))"
    assert op(find(m, "outfeed")) == "outfeed(while(copy(parameter)), after-all)"


def test_nested_whiles_with_param_root_2():
    m = insert("""HloModule m
%cond.inner (param.cond.inner: (pred[], pred[])) -> pred[] {
  %param.cond.inner = (pred[], pred[]) parameter(0)
  ROOT %gte = pred[] get-tuple-element(%param.cond.inner), index=0
}
%body.inner (param.body.inner: (pred[], pred[])) -> (pred[], pred[]) {
  %param.body.inner = (pred[], pred[]) parameter(0)
  %gte.0 = pred[] get-tuple-element(%param.body.inner), index=0
  %gte.1 = pred[] get-tuple-element(%param.body.inner), index=1
  %and = pred[] and(%gte.0, %gte.1)
  %not = pred[] not(%gte.1)
  ROOT %root = (pred[], pred[]) tuple(%and, %not)
}
%cond.outer (param.cond.outer: (pred[], pred[])) -> pred[] {
  %param.cond.outer = (pred[], pred[]) parameter(0)
  ROOT %gte.c = pred[] get-tuple-element(%param.cond.outer), index=0
}
%body.outer (param.body.outer: (pred[], pred[])) -> (pred[], pred[]) {
  %param.body.outer = (pred[], pred[]) parameter(0)
  %gte.o0 = pred[] get-tuple-element(%param.body.outer), index=0
  %gte.o1 = pred[] get-tuple-element(%param.body.outer), index=1
  %while.inner = (pred[], pred[]) while(%param.body.outer), condition=%cond.inner, body=%body.inner
  %gte.2 = pred[] get-tuple-element(%while.inner), index=0
  %after-all = token[] after-all()
  %outfeed = token[] outfeed(%gte.2, %after-all)
  ROOT %root.o = (pred[], pred[]) tuple(%gte.o0, %gte.o1)
}
ENTRY %main (entry_param.1: pred[], entry_param.2: pred[]) -> pred[] {
  %entry_param.1 = pred[] parameter(0)
  %entry_param.2 = pred[] parameter(1)
  %tuple = (pred[], pred[]) tuple(%entry_param.1, %entry_param.2)
  %while.outer = (pred[], pred[]) while(%tuple), condition=%cond.outer, body=%body.outer
  %gte.e = pred[] get-tuple-element(%while.outer), index=0
  ROOT %not.e = pred[] not(%gte.e)
}""", execute=False, simulate=False)  # an outfeed: not simulated
    g = "get-tuple-element(parameter)"
    assert op(find(m, "while.inner")) == f"while(tuple(copy({g}), copy({g})))"


CONDITIONAL_LOOP = """HloModule m
{branches}
%cond.outer (param.1: {state}) -> pred[] {{
  %param.1 = {state} parameter(0)
  ROOT %param.cond.outer = pred[] get-tuple-element(%param.1), index=0
}}
%body.outer (param.2: {state}) -> {state} {{
  %param.2 = {state} parameter(0)
  %pred.1 = pred[] get-tuple-element(%param.2), index=0
  %arg = f32[2] get-tuple-element(%param.2), index=1
  %if = {cshape} conditional(%pred.1, %arg, %arg), true_computation=%on_true, false_computation=%on_false
  {body}
}}
ENTRY %main (entry_param.1: pred[], float_param: f32[2]) -> {state} {{
  %entry_param.1 = pred[] parameter(0)
  %float_param = f32[2] parameter(1)
  %entry_param = {state} tuple(%entry_param.1, {floats})
  ROOT %while = {state} while(%entry_param), condition=%cond.outer, body=%body.outer
}}
"""


def test_nested_while_and_conditional():
    m = insert(CONDITIONAL_LOOP.format(state="(pred[], f32[2])", cshape="f32[2]",
                                       floats="%float_param", branches="""
%on_true (v1: f32[2]) -> f32[2] {
  %v1 = f32[2] parameter(0)
  ROOT %v2 = f32[2] add(%v1, %v1)
}
%on_false (w1: f32[2]) -> f32[2] {
  %w1 = f32[2] parameter(0)
  ROOT %w2 = f32[2] multiply(%w1, %w1)
}""", body="ROOT %res = (pred[], f32[2]) tuple(%pred.1, %if)"), execute=False)
    # the init copy of the parameter and the copy of the result passed through
    assert copies(m) == 2
    assert copies(m, "body.outer") == 0


def test_nested_while_and_conditional_2():
    state = "(pred[], f32[2], f32[2])"
    m = insert(CONDITIONAL_LOOP.format(
        state=state, cshape="(f32[2], f32[2])", floats="%float_param, %float_param",
        branches="""
%on_true (v1: f32[2]) -> (f32[2], f32[2]) {
  %v1 = f32[2] parameter(0)
  %v2 = f32[2] add(%v1, %v1)
  ROOT %t1 = (f32[2], f32[2]) tuple(%v1, %v2)
}
%on_false (w1: f32[2]) -> (f32[2], f32[2]) {
  %w1 = f32[2] parameter(0)
  %w2 = f32[2] multiply(%w1, %w1)
  ROOT %t2 = (f32[2], f32[2]) tuple(%w1, %w2)
}""", body=f"""%e1 = f32[2] get-tuple-element(%if), index=0
  %e2 = f32[2] get-tuple-element(%if), index=1
  ROOT %res = {state} tuple(%pred.1, %e1, %e2)"""), execute=False)
    assert copies(m) == 3


# ---- conditionals ------------------------------------------------------------------------------

BRANCHES = """%branch_0 (parameter.0: (s32[2])) -> (s32[2]) {
  %parameter.0 = (s32[2]) parameter(0)
  %gte = s32[2] get-tuple-element(%parameter.0), index=0
  %negate = s32[2] negate(%gte)
  %copy = s32[2] copy(%negate)
  ROOT %tuple.5 = (s32[2]) tuple(%copy)
}
%branch_1 (parameter.4: (s32[2])) -> (s32[2]) {
  %parameter.4 = (s32[2]) parameter(0)
  %gte.5 = s32[2] get-tuple-element(%parameter.4), index=0
  %copy.1 = s32[2] copy(%gte.5)
{branch_1}
}
"""
COND_ENTRY = """ENTRY %main (parameter.1: s32[], parameter.2: s32[2], parameter.3: s32[2]) -> {result} {{
  %parameter.1 = s32[] parameter(0)
  %parameter.2 = s32[2] parameter(1)
  %parameter.3 = s32[2] parameter(2)
  %tuple.1 = (s32[2]) tuple(%parameter.3)
  %tuple.3 = (s32[2]) tuple(%parameter.2)
  {root}%conditional.18 = (s32[2]) conditional(%parameter.1, %tuple.1, %tuple.3), branch_computations={{%branch_0, %branch_1}}
{rest}
}}"""


def test_conditional_branch_must_copy_1():
    m = insert("HloModule m\n" + BRANCHES.replace("{branch_1}", "  ROOT %tuple.6 = (s32[2]) "
                                                                 "tuple(%copy.1)")
               + COND_ENTRY.format(result="(s32[2], s32[2])", root="", rest="""  %gte.1 = s32[2] get-tuple-element(%conditional.18), index=0
  ROOT %tuple.4 = (s32[2], s32[2]) tuple(%parameter.2, %gte.1)"""))
    # branch 1 returns its parameter's value: the copy of it stays
    assert op(m.computation("branch_1").root) == "tuple(copy(get-tuple-element(parameter)))"


def test_conditional_branch_must_copy_2():
    m = insert("HloModule m\n" + BRANCHES.replace("{branch_1}", """  %c.1 = s32[] constant(0)
  %broadcast.6 = s32[2] broadcast(%c.1), dimensions={}
  %dus.5 = s32[2] dynamic-update-slice(%copy.1, %broadcast.6, %c.1)
  %add.1 = s32[2] add(%dus.5, %copy.1)
  ROOT %tuple.6 = (s32[2]) tuple(%add.1)""")
               + COND_ENTRY.format(result="(s32[2], s32[2])", root="", rest="""  %gte.1 = s32[2] get-tuple-element(%conditional.18), index=0
  ROOT %tuple.4 = (s32[2], s32[2]) tuple(%parameter.2, %gte.1)"""))
    add = m.computation("branch_1").root.operands[0]
    assert add.opcode == "add"
    dus = add.operands[0]
    # the update must not clobber the value add reads afterwards
    assert dus.opcode == "dynamic-update-slice" and dus.operands[0].opcode == "copy"


def test_conditional_branch_must_copy_3():
    m = insert("HloModule m\n" + BRANCHES.replace("{branch_1}", "  ROOT %tuple.6 = (s32[2]) "
                                                                 "tuple(%copy.1)")
               + COND_ENTRY.format(result="(s32[2])", root="ROOT ", rest=""))
    assert op(m.computation("branch_1").root) == "tuple(copy(get-tuple-element(parameter)))"


def test_while_loop_sample_keeps_only_the_read_only_init_copies():
    m = insert((SAMPLES / "while_loop.hlo").read_text())
    w = find(m, "while.4")
    assert op(w.operands[0]) == "tuple(copy(constant), copy(parameter))"
    assert copies(m) == 2


def test_pass_through_element_shared_with_later_readers_is_not_copied():
    # element 1 is read-only loop state: the loop never writes it, so the value read
    # after the loop needs no copy (the old pass copied it)
    m = insert("""HloModule m
%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %x = f32[8] get-tuple-element(%p), index=1
  ROOT %t = (s32[], f32[8]) tuple(%next, %x)
}
%cond (q: (s32[], f32[8])) -> pred[] {
  %q = (s32[], f32[8]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %n = s32[] constant(4)
  ROOT %lt = pred[] compare(%j, %n), direction=LT
}
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %e = f32[8] exponential(%a)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%zero, %e)
  %w = (s32[], f32[8]) while(%init), condition=%cond, body=%body
  %r = f32[8] get-tuple-element(%w), index=1
  ROOT %s = f32[8] add(%r, %e)
}""")
    assert op(find(m, "w").operands[0]) == "tuple(copy(constant), exponential(parameter))"
    assert copies(m) == 1


# ---- the simulator can fail ------------------------------------------------------------------

def _drop_copy(m, comp_name, pick):
    comp = m.computation(comp_name)
    c = [i for i in comp.instructions if i.opcode == "copy"][pick]
    c.control_predecessors = []
    for s in c.control_successors:
        s.control_predecessors = [p for p in s.control_predecessors if p is not c]
    c.replace_all_uses_with(c.operands[0])
    comp.remove_instruction(c)
    return m


@pytest.mark.parametrize("what", ["body parameter copy", "init copy", "in-place copy"])
def test_simulator_catches_a_missing_copy(what):
    if what == "body parameter copy":
        m = insert("HloModule m\n" + COND + DEPENDENT_BODY + CONSTANT_INIT_ENTRY)
        _drop_copy(m, "body", 0)
    elif what == "init copy":
        m = insert((SAMPLES / "while_loop.hlo").read_text())
        _drop_copy(m, "while_loop.24", 1)
    else:
        m = insert("""HloModule m
ENTRY %main (param: f32[16]) -> (f32[16], f32[16]) {
  %param = f32[16] parameter(0)
  %negate = f32[16] negate(%param)
  %u = f32[2] constant({7, 8})
  %i = s32[] constant(3)
  %dus = f32[16] dynamic-update-slice(%negate, %u, %i)
  %add = f32[16] add(%negate, %negate)
  ROOT %t = (f32[16], f32[16]) tuple(%add, %dus)
}""")
        _drop_copy(m, "main", 0)
    with pytest.raises(BufferError):
        assert_buffer_safe(m)
