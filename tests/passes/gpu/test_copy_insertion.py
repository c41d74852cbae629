"""copy-insertion: XLA's copy_insertion_test.cc cases, ported to HLO text (entry results,
donated parameters, in-place ops, real modules; loops and conditionals are in
``test_copy_insertion_loops.py``).

Every case runs through the differential harness (interpreter before == after, verifier,
canonical text) and through the buffer simulator (``_buffer_sim``): the module executed
with XLA's buffer sharing (loops in place in their init buffers, in-place ops in their
operand's, body results written into the loop buffers) in adversarial instruction
orders must compute what the value semantics compute.  The simulator fails a module
whose copies are not enough (see ``test_simulator_catches_a_missing_copy``).
"""
from __future__ import annotations

import pytest

from hlo_opt.api import parse_hlo
from tests.conftest import corpus_files, sample_files

from ._buffer_sim import assert_buffer_safe
from .util import check

def insert(text, execute=True, simulate=True):
    """Run copy-insertion through the harness (``execute``: compare interpreter runs;
    off for the loops of XLA's tests that never end) and the buffer simulator."""
    module = parse_hlo(text)
    result = check(module, "copy-insertion", seeds=(0,) if execute else ())
    if simulate:
        assert assert_buffer_safe(result.module), "the buffer simulator did not run"
    return result.module


def copies(m, comp=None) -> int:
    comps = [m.computation(comp)] if comp else m.computations
    return sum(1 for c in comps for i in c.instructions if i.opcode == "copy")


def control_edges(m, comp=None) -> int:
    comps = [m.computation(comp)] if comp else m.computations
    return sum(len(i.control_predecessors) for c in comps for i in c.instructions)


def op(inst) -> str:
    """opcode(operand opcodes...) of an instruction, recursively: a matcher in text."""
    if inst.opcode in ("parameter", "constant") or not inst.operands:
        return inst.opcode
    return f"{inst.opcode}({', '.join(op(o) for o in inst.operands)})"


def find(m, name):
    for i in m.instructions():
        if i.name == name:
            return i
    raise KeyError(name)

# ---- entry results ------------------------------------------------------------------------

def test_single_parameter():
    m = insert("""HloModule m
ENTRY e {
  x = f32[] parameter(0)
  ROOT t = (f32[]) tuple(x)
}""")
    assert op(m.entry.root) == "tuple(copy(parameter))"


def test_single_constant():
    m = insert("""HloModule m
ENTRY e {
  c = f32[] constant(1)
  ROOT t = (f32[]) tuple(c)
}""")
    assert copies(m) == 1 and op(m.entry.root) == "tuple(copy(constant))"


def test_existing_copies_not_removed():
    # layout-changing copies stay; the root copy that changes nothing goes
    m = insert("""HloModule m
ENTRY e {
  c = f32[2,2]{1,0} constant({{0,2},{2,4}})
  copy_1 = f32[2,2]{0,1} copy(c)
  copy_2 = f32[2,2]{0,1} copy(c)
  add = f32[2,2]{1,0} add(copy_1, copy_2)
  ROOT copy_3 = f32[2,2]{1,0} copy(add)
}""")
    assert copies(m) == 2
    assert m.entry.root.name == "add"
    assert op(m.entry.root) == "add(copy(constant), copy(constant))"


def test_multiple_constants_and_parameters():
    m = insert("""HloModule m
ENTRY e {
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  add = f32[] add(c1, y)
  ROOT t = (f32[], f32[], f32[]) tuple(c2, x, add)
}""")
    assert copies(m) == 2
    assert op(m.entry.root) == "tuple(copy(constant), copy(parameter), add(constant, parameter))"


@pytest.mark.parametrize("source", ["x = f32[4] parameter(0)",
                                    "x = f32[4] constant({1,42,3,4})"])
def test_bitcast_of_read_only_root_is_copied(source):
    m = insert(f"""HloModule m
ENTRY e {{
  {source}
  ROOT b = f32[2,2] bitcast(x)
}}""")
    assert copies(m) == 1 and op(m.entry.root).startswith("copy(bitcast(")


def test_bitcast_tuple_element_parameter():
    m = insert("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  b = f32[2,2] bitcast(x)
  ROOT t = (f32[2,2]) tuple(b)
}""")
    assert copies(m) == 1 and op(m.entry.root) == "tuple(copy(bitcast(parameter)))"


def test_nested_tuple_parameter():
    m = insert("""HloModule m
ENTRY e {
  ROOT p = ((f32[], s32[1,2,3]), f32[42]) parameter(0)
}""")
    assert copies(m) == 3
    g = "get-tuple-element"
    assert op(m.entry.root) == (f"tuple(tuple(copy({g}({g}(parameter))), "
                                f"copy({g}({g}(parameter)))), copy({g}(parameter)))")


def test_element_of_nested_tuple_parameter():
    m = insert("""HloModule m
ENTRY e {
  p = ((f32[], s32[1,2,3]), f32[42]) parameter(0)
  ROOT g = (f32[], s32[1,2,3]) get-tuple-element(p), index=0
}""")
    g = "get-tuple-element"
    assert copies(m) == 2
    assert op(m.entry.root) == (f"tuple(copy({g}({g}(parameter))), "
                                f"copy({g}({g}(parameter))))")


def test_token_results_are_not_copied():
    m = insert("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  tok = token[] after-all()
  ROOT t = (f32[4], token[]) tuple(x, tok)
}""", execute=False)
    assert op(m.entry.root) == "tuple(copy(parameter), after-all)"

# ---- donated parameters (input_output_alias) -------------------------------------------------

def _alias_module(alias, root_body):
    header = "HloModule m" + (f", input_output_alias={{ {alias} }}" if alias else "")
    return header + """
ENTRY %main (p: (f32[], f32[])) -> (f32[], f32[]) {
  %p = (f32[], f32[]) parameter(0)
  %g0 = f32[] get-tuple-element(%p), index=0
  %g1 = f32[] get-tuple-element(%p), index=1
""" + root_body + "\n}"


def test_crossing_parameters():
    m = insert(_alias_module("{0}: (0, {0}), {1}: (0, {1})",
                             "  ROOT %t = (f32[], f32[]) tuple(%g1, %g0)"))
    assert copies(m) == 4


def test_parameters_aliasing():
    m = insert(_alias_module("{0}: (0, {0}), {1}: (0, {1})",
                             "  ROOT %t = (f32[], f32[]) tuple(%g0, %g1)"))
    assert copies(m) == 0


def test_parameter_with_no_aliasing():
    m = insert(_alias_module("", "  ROOT %t = (f32[], f32[]) tuple(%g0, %g1)"))
    assert op(m.entry.root) == "tuple(copy(get-tuple-element(parameter)), " \
        "copy(get-tuple-element(parameter)))"
    assert copies(m) == 2


def test_parameter_with_partial_aliasing():
    m = insert(_alias_module("{0}: (0, {0})", "  ROOT %t = (f32[], f32[]) tuple(%g0, %g1)"))
    assert op(m.entry.root) == "tuple(get-tuple-element(parameter), " \
        "copy(get-tuple-element(parameter)))"
    assert copies(m) == 1


def test_parameter_and_parallel_ops_with_partial_aliasing():
    m = insert(_alias_module("{0}: (0, {0})", """  %n0 = f32[] negate(%g0)
  %n1 = f32[] negate(%g1)
  ROOT %t = (f32[], f32[]) tuple(%n0, %n1)"""))
    assert copies(m) == 0


def test_parameter_and_ops_with_partial_aliasing():
    m = insert(_alias_module("{0}: (0, {0})", """  %n0 = f32[] negate(%g0)
  %n1 = f32[] negate(%g1)
  %add = f32[] add(%n0, %n1)
  ROOT %t = (f32[], f32[]) tuple(%add, %n1)"""))
    assert copies(m) == 0


def test_fixpoint_computation_required():
    m = insert("""HloModule m, input_output_alias={ {1}: (0, {}), {3}: (1, {}) }
%fused_computation (param0: f32[3,3,96,1], param1: f32[]) -> f32[3,3,96,1] {
  %param0 = f32[3,3,96,1] parameter(0)
  %param1 = f32[] parameter(1)
  %broadcast = f32[3,3,96,1] broadcast(%param1), dimensions={}
  ROOT %add.0 = f32[3,3,96,1] add(%param0, %broadcast)
}
ENTRY %entry_computation (arg0: f32[3,3,96,1], arg1: f32[]) -> (f32[3,3,96,1], f32[3,3,96,1], f32[], f32[]) {
  %arg0 = f32[3,3,96,1] parameter(0)
  %arg1 = f32[] parameter(1)
  %fusion = f32[3,3,96,1] fusion(%arg0, %arg1), kind=kLoop, calls=%fused_computation
  %negate = f32[] negate(%arg1)
  ROOT %tuple = (f32[3,3,96,1], f32[3,3,96,1], f32[], f32[]) tuple(%fusion, %arg0, %negate, %arg1)
}""")
    assert copies(m) == 0


def test_no_alias_check_violation():
    m = insert("""HloModule m, input_output_alias={ {1}: (0, {}) }
ENTRY %main (arg: f32[8,28,28,1]) -> (f32[8,1,28,28], f32[8,28,28,1]) {
  %arg = f32[8,28,28,1] parameter(0)
  %bitcast.2 = f32[8,1,28,28] bitcast(%arg)
  ROOT %tuple.1 = (f32[8,1,28,28], f32[8,28,28,1]) tuple(%bitcast.2, %arg)
}""")
    assert copies(m) == 1
    assert op(m.entry.root) == "tuple(copy(bitcast(parameter)), parameter)"


# ---- in-place operations -------------------------------------------------------------------

DUS_FUSED = """%fused_computation (param0: f32[1280,1,128]) -> f32[1280,1,128] {
  %param0 = f32[1280,1,128] parameter(0)
  %c1 = f32[] constant(0)
  %b6 = f32[128,1,128] broadcast(%c1), dimensions={}
  %c3 = s32[] constant(0)
  ROOT %dus = f32[1280,1,128] dynamic-update-slice(%param0, %b6, %c3, %c3, %c3)
}
"""
DUS_PRELUDE = """  %c1 = f32[] constant(0)
  %broadcast.6 = f32[128,1,128] broadcast(%c1), dimensions={}
  %c3 = s32[] constant(0)
"""


@pytest.mark.parametrize("name,body,n", [
    ("DynamicUpdateSliceNoCopy", """  %negate = f32[1280,1,128] negate(%param)
""" + DUS_PRELUDE + """  ROOT %dus = f32[1280,1,128] dynamic-update-slice(%negate, %broadcast.6, %c3, %c3, %c3)""",
     0),
    ("DynamicUpdateSliceCopy", """  %negate = f32[1280,1,128] negate(%param)
""" + DUS_PRELUDE + """  %add = f32[1280,1,128] add(%negate, %negate)
  %dus = f32[1280,1,128] dynamic-update-slice(%negate, %broadcast.6, %c3, %c3, %c3)
  ROOT %t = (f32[1280,1,128], f32[1280,1,128]) tuple(%add, %dus)""", 1),
    ("DynamicUpdateSliceParameterShareCopy", DUS_PRELUDE + """  ROOT %dus = f32[1280,1,128] dynamic-update-slice(%param, %broadcast.6, %c3, %c3, %c3)""",
     1),
    ("FusedDynamicUpdateSliceNoCopy", """  %negate = f32[1280,1,128] negate(%param)
  ROOT %fusion = f32[1280,1,128] fusion(%negate), kind=kLoop, calls=%fused_computation""", 0),
    ("FusedDynamicUpdateSliceCopy", """  %negate = f32[1280,1,128] negate(%param)
  %fusion = f32[1280,1,128] fusion(%negate), kind=kLoop, calls=%fused_computation
  ROOT %t = (f32[1280,1,128], f32[1280,1,128]) tuple(%negate, %fusion)""", 1),
])
def test_dynamic_update_slice(name, body, n):
    m = insert("HloModule m\n" + DUS_FUSED + """
ENTRY %main (param: f32[1280,1,128]) -> f32[1280,1,128] {
  %param = f32[1280,1,128] parameter(0)
""" + body + "\n}", execute=False)
    assert copies(m) == n, name


def test_chain_dynamic_update_slice_copy():
    m = insert("""HloModule m
ENTRY %main (state: (s32[], f32[1280,1,128])) -> (s32[], f32[1280,1,128]) {
  %state = (s32[], f32[1280,1,128]) parameter(0)
  %c1 = f32[] constant(0)
  %broadcast.6 = f32[128,1,128] broadcast(%c1), dimensions={}
  %gte.4 = f32[1280,1,128] get-tuple-element(%state), index=1
  %gte.3 = s32[] get-tuple-element(%state), index=0
  %c2 = s32[] constant(128)
  %add.5 = s32[] add(%gte.3, %c2)
  %c3 = s32[] constant(0)
  %dus.5 = f32[1280,1,128] dynamic-update-slice(%gte.4, %broadcast.6, %c3, %c3, %c3)
  %dus.9 = f32[1280,1,128] dynamic-update-slice(%dus.5, %broadcast.6, %c3, %c3, %c3)
  ROOT %tuple.85 = (s32[], f32[1280,1,128]) tuple(%add.5, %dus.9)
}""", execute=False)
    assert copies(m) == 1


def test_fused_dynamic_update_slice_copy_2():
    m = insert("""HloModule m
""" + DUS_FUSED + """%fused_computation.2 (p0: f32[1280,1,128], p1: f32[1280,1,128]) -> f32[1280,1,128] {
  %p0 = f32[1280,1,128] parameter(0)
  %p1 = f32[1280,1,128] parameter(1)
  %slice = f32[128,1,128] slice(%p1), slice={[0:128], [0:1], [0:128]}
  %c3 = s32[] constant(0)
  ROOT %dus = f32[1280,1,128] dynamic-update-slice(%p0, %slice, %c3, %c3, %c3)
}
ENTRY %main (param: f32[1280,1,128]) -> f32[1280,1,128] {
  %param = f32[1280,1,128] parameter(0)
  %negate = f32[1280,1,128] negate(%param)
  %fusion1 = f32[1280,1,128] fusion(%negate), kind=kLoop, calls=%fused_computation
  ROOT %fusion2 = f32[1280,1,128] fusion(%fusion1, %negate), kind=kLoop, calls=%fused_computation.2
}""", execute=False)
    assert copies(m) == 1


MOF_DUS = """HloModule m
%fused_computation (param0: f32[1280,1,128], param1: f32[1280,1,128], param2: f32[1280,1,128]) -> (f32[1280,1,128], f32[1280,1,128], f32[1280,1,128]) {
  %param0 = f32[1280,1,128] parameter(0)
  %param1 = f32[1280,1,128] parameter(1)
  %param2 = f32[1280,1,128] parameter(2)
  %c1 = f32[] constant(0)
  %b6 = f32[128,1,128] broadcast(%c1), dimensions={}
  %c3 = s32[] constant(0)
  %add.1 = f32[1280,1,128] add(%param0, %param0)
  %dus.5 = f32[1280,1,128] dynamic-update-slice(%param1, %b6, %c3, %c3, %c3)
  %dus.6 = f32[1280,1,128] dynamic-update-slice(%param2, %b6, %c3, %c3, %c3)
  ROOT %tuple.1 = (f32[1280,1,128], f32[1280,1,128], f32[1280,1,128]) tuple(%add.1, %dus.5, %dus.6)
}
ENTRY %main (param: f32[1280,1,128]) -> (f32[1280,1,128], f32[1280,1,128], f32[1280,1,128]) {
  %param = f32[1280,1,128] parameter(0)
  %negate0 = f32[1280,1,128] negate(%param)
  %negate1 = f32[1280,1,128] negate(%param)
  %negate2 = f32[1280,1,128] negate(%param)
  %fusion = (f32[1280,1,128], f32[1280,1,128], f32[1280,1,128]) fusion(%negate0, %negate1, %negate2), kind=kLoop, calls=%fused_computation
  %gte0 = f32[1280,1,128] get-tuple-element(%fusion), index=0
  %gte1 = f32[1280,1,128] get-tuple-element(%fusion), index=1
  %gte2 = f32[1280,1,128] get-tuple-element(%fusion), index=2
  %add0 = f32[1280,1,128] add(%negate0, %gte0)
  %add1 = f32[1280,1,128] add({add1}, %gte1)
  %add2 = f32[1280,1,128] add(%negate2, %gte2)
  ROOT %tuple = (f32[1280,1,128], f32[1280,1,128], f32[1280,1,128]) tuple(%add0, %add1, %add2)
}"""


def test_multi_output_fused_dynamic_update_slice():
    assert copies(insert(MOF_DUS.replace("{add1}", "%negate1"), execute=False)) == 2
    # negate1 is not read after the fusion: only negate2 needs its copy
    assert copies(insert(MOF_DUS.replace("{add1}", "%gte1"), execute=False)) == 1


def test_scatter_shared_operand():
    m = insert("""HloModule m
%update_s32 (lhs: s32[], rhs: s32[]) -> s32[] {
  %lhs = s32[] parameter(0)
  ROOT %rhs = s32[] parameter(1)
}
%fused_computation () -> s32[73729] {
  %iota.1 = s32[73729] iota(), iota_dimension=0
  ROOT %indices.1 = s32[73729] reverse(%iota.1), dimensions={0}
}
ENTRY %main () -> s32[73729] {
  %iota.2 = s32[73729] iota(), iota_dimension=0
  %fusion = s32[73729] fusion(), kind=kLoop, calls=%fused_computation
  ROOT %scatter = s32[73729] scatter(%iota.2, %fusion, %iota.2), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%update_s32
}""", execute=False)
    assert copies(m) == 1
    assert op(m.entry.root) == "scatter(copy(iota), fusion, iota)"


def test_keep_copy_of_broadcast():
    m = insert("""HloModule m
ENTRY %main (param: f32[128,1,128]) -> (f32[128,1,128], f32[128,1,128]) {
  %param = f32[128,1,128] parameter(0)
  %c1 = f32[] constant(0)
  %broadcast.6 = f32[128,1,128] broadcast(%c1), dimensions={}
  %broadcast.7 = f32[128,1,128] broadcast(%c1), dimensions={}
  %c3 = s32[] constant(0)
  %dus.5 = f32[128,1,128] dynamic-update-slice(%broadcast.6, %broadcast.7, %c3, %c3, %c3)
  %add1 = f32[128,1,128] add(%dus.5, %dus.5)
  %dus.4 = f32[128,1,128] dynamic-update-slice(%broadcast.6, %broadcast.7, %c3, %c3, %c3)
  %add2 = f32[128,1,128] add(%dus.4, %dus.4)
  ROOT %tuple = (f32[128,1,128], f32[128,1,128]) tuple(%add1, %add2)
}""", execute=False)
    assert copies(m) == 2


CUSTOM_CALL_ALIAS = """HloModule m
ENTRY %main (parameter.1: f32[2,3,4,5], parameter.2: f32[2,3,4,5]) -> f32[2,3,4,5] {{
  %parameter.1 = f32[2,3,4,5] parameter(0)
  %parameter.2 = f32[2,3,4,5] parameter(1)
{body}
}}"""
_CC = ('custom-call({a}, %parameter.2), custom_call_target="dm_softmax", '
       'operand_layout_constraints={{f32[2,3,4,5], f32[2,3,4,5]}}, '
       'output_to_operand_aliasing={{{{}}: (0, {{}})}}')


def test_custom_call_aliasing_copies_an_aliased_parameter():
    m = insert(CUSTOM_CALL_ALIAS.format(
        body="  ROOT %cc = f32[2,3,4,5] " + _CC.format(a="%parameter.1")),
        execute=False, simulate=False)  # an unknown custom-call: not simulated
    assert op(m.entry.root.operands[0]) == "copy(parameter)"


def test_custom_call_aliasing_copies_a_reused_operand():
    m = insert(CUSTOM_CALL_ALIAS.format(body="""  %add.1 = f32[2,3,4,5] add(%parameter.1, %parameter.2)
  %cc = f32[2,3,4,5] """ + _CC.format(a="%add.1") + """
  ROOT %add.2 = f32[2,3,4,5] add(%cc, %add.1)"""),
        execute=False, simulate=False)  # an unknown custom-call: not simulated
    assert find(m, "cc").operands[0].opcode == "copy"
    assert op(find(m, "cc").operands[0]) == "copy(add(parameter, parameter))"


def test_custom_call_aliasing_copy_removed():
    m = insert(CUSTOM_CALL_ALIAS.format(body="""  %add = f32[2,3,4,5] add(%parameter.1, %parameter.2)
  ROOT %cc = f32[2,3,4,5] """ + _CC.format(a="%add")),
        execute=False, simulate=False)  # an unknown custom-call: not simulated
    assert m.entry.root.operands[0].opcode == "add"

# ---- modules of this repository ------------------------------------------------------------

def _control_flow_and_in_place_modules():
    out = []
    for path in sample_files() + corpus_files():
        text = path.read_text()
        if any(k in text for k in ("while(", "conditional(", "dynamic-update-slice(",
                                   "scatter(")):
            out.append(path)
    return out


@pytest.mark.parametrize("path", _control_flow_and_in_place_modules(),
                         ids=lambda p: p.stem[:60])
def test_real_modules_after_the_gpu_pipeline(path):
    """Through the whole ``gpu`` pipeline, every module with loops, conditionals or
    in-place updates runs with shared buffers as with fresh ones."""
    from hlo_opt.api import parse_hlo_modules
    from hlo_opt.errors import HloError
    from hlo_opt.verifier import module_errors
    from .util import run
    try:
        modules = parse_hlo_modules(path.read_text(), str(path))
    except HloError as e:
        pytest.skip(f"does not parse: {e}")
    simulated = 0
    for module in modules:
        if module_errors(module):
            continue
        m = run(module, _gpu_pipeline())
        simulated += assert_buffer_safe(m)
    if not simulated:
        pytest.skip("the interpreter cannot run these modules")


def _gpu_pipeline():
    from passes.pipelines import build_pipeline
    return build_pipeline("gpu")

def test_no_change_reports_no_change():
    text = """HloModule m
ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4] parameter(0)
  ROOT %e = f32[4] exponential(%a)
}"""
    r = check(parse_hlo(text), "copy-insertion")
    assert not r.changed and r.after_text == r.before_text


def test_a_second_run_changes_nothing():
    from passes.registry import create_pass
    for path in _control_flow_and_in_place_modules():
        from hlo_opt.api import parse_hlo_modules
        for module in parse_hlo_modules(path.read_text(), str(path)):
            once = module.clone()
            create_pass("copy-insertion").run(once)
            text = once.to_text()
            assert not create_pass("copy-insertion").run(once), path.name
            assert once.to_text() == text
