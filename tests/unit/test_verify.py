"""hlo_opt.verifier: every corpus and sample module is accepted (except the table below);
hand-broken modules are rejected with a message naming the place, one test per check."""
from __future__ import annotations

import pytest

import hlo_opt
from hlo_opt.errors import HloError, HloVerifyError
from hlo_opt.ir.shape import Shape
from hlo_opt.text.parser import parse_hlo, parse_hlo_modules
from hlo_opt.verifier import module_errors, verify_module
from tests.conftest import corpus_files, require_corpus, sample_files

# Corpus modules the verifier rejects, keyed by (file, module index in the file), with
# an error substring.  Only modules that are invalid HLO in isolation belong here.
REJECTED = {
    # print_indexing test input: `transpose(a), dimensions={0,1}` is the identity
    # permutation of f32[256,512], yet the result is declared f32[512,256].  The
    # print_indexing tool never runs the verifier; XLA's HloVerifier rejects it too
    # ("Expected instruction to have shape equal to f32[256,512]").
    ("xla__tools__print_indexing_test.hlo", 0):
        "declared shape f32[512,256] does not match the inferred shape f32[256,512]",
}

_DUPLICATE_NAME = "instruction name is not unique in the module"


def _corpus_modules():
    cases = []
    for path in corpus_files():
        try:
            count = len(parse_hlo_modules(path.read_text(), path.name))
        except HloError:  # the test itself then reports the parse error
            count = 1
        cases += [pytest.param(path, k, id=f"{path.name}#{k}") for k in range(count)]
    return cases


@pytest.mark.parametrize("path,index", _corpus_modules())
def test_corpus_module(path, index):
    module = parse_hlo_modules(path.read_text(), path.name)[index]
    errors = module_errors(module)
    expected = REJECTED.get((path.name, index))
    if expected is None:
        assert errors == []
    else:
        assert errors and all(expected in e for e in errors), errors


def test_rejected_table_names_real_modules():
    require_corpus()
    names = {p.name for p in corpus_files()}
    for name, _ in REJECTED:
        assert name in names


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_sample_module(path):
    for module in parse_hlo_modules(path.read_text(), path.name):
        verify_module(module)


def test_parser_makes_names_unique_across_computations():
    """XLA's parser renames instructions whose names another computation already uses."""
    m = parse_hlo(MODULE)
    assert module_errors(m) == []
    dup = parse_hlo("HloModule d\nf {\n p = f32[] parameter(0)\n ROOT n = f32[] negate(p)\n}\n"
                    "ENTRY e {\n p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply=f\n}\n")
    assert not any(_DUPLICATE_NAME in e for e in module_errors(dup))
    names = [i.name for c in dup.computations for i in c.instructions]
    assert len(names) == len(set(names)) and "p" in names  # the callee keeps its name


# ---- hand-made invalid modules: one per check -------------------------------------------
MODULE = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  m = f32[4] multiply(a, b)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(m, z), dimensions={0}, to_apply=add
}
"""


def module(text: str = MODULE):
    return parse_hlo(text)


def inst(m, name: str):
    for comp in m.computations:
        for i in comp.instructions:
            if i.name == name:
                return i
    raise KeyError(name)


def rejects(m, *substrings: str) -> str:
    with pytest.raises(HloVerifyError) as err:
        verify_module(m)
    text = str(err.value)
    for s in substrings:
        assert s in text, text
    return text


def test_valid_module_passes():
    verify_module(module())
    assert hlo_opt.verify(module()) is None


def test_error_names_computation_instruction_and_text():
    m = module(MODULE.replace("m = f32[4] multiply", "m = f32[5] multiply"))
    text = rejects(m, "computation %main, instruction %m:",
                   "declared shape f32[5] does not match the inferred shape f32[4]",
                   "%m = f32[5]{0} multiply(f32[4]{0} %a, f32[4]{0} %b)")
    assert text.startswith("m: ")
    assert isinstance(pytest.raises(HloError, verify_module, m).value, HloVerifyError)


def test_operand_count():
    m = module(MODULE.replace("multiply(a, b)", "multiply(a)"))
    rejects(m, "instruction %m:", "multiply takes 2 operand(s), has 1")


def test_operand_types():
    m = module(MODULE.replace("m = f32[4] multiply(a, b)",
                              "i = s32[4] parameter(2)\n  m = f32[4] multiply(a, i)"))
    rejects(m, "instruction %m:", "different element types")


def test_mixed_precision_operands():
    m = module(MODULE.replace("b = f32[4] parameter(1)", "b = bf16[4] parameter(1)"))
    rejects(m, "instruction %m:", "mix floating-point types f32 and bf16")


def test_reducer_signature():
    m = module(MODULE.replace("ROOT s = f32[] add(x, y)",
                              "ROOT s = (f32[], f32[]) tuple(x, y)"))
    rejects(m, "instruction %r:", "reduce computation %add must return a tuple of 1")


def test_reducer_parameter_type_matches_operand():
    m = module(MODULE.replace("a = f32[4]", "a = bf16[4]").replace("b = f32[4]", "b = bf16[4]")
               .replace("m = f32[4]", "m = bf16[4]").replace("z = f32[]", "z = bf16[]"))
    rejects(m, "instruction %r:", "operand 0 is bf16 but %add parameter 0 is f32")


WHILE = """HloModule w
cond {
  p = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  bp = (s32[], f32[2]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  v = f32[2] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  j = s32[] add(bi, one)
  ROOT t = (s32[], f32[2]) tuple(j, v)
}
ENTRY main {
  i0 = s32[] constant(0)
  v0 = f32[2] parameter(0)
  t0 = (s32[], f32[2]) tuple(i0, v0)
  ROOT w = (s32[], f32[2]) while(t0), condition=cond, body=body
}
"""


def test_while_signatures():
    verify_module(module(WHILE))
    rejects(module(WHILE.replace("ROOT c = pred[] compare(i, n), direction=LT",
                                 "ROOT c = s32[] add(i, n)")),
            "instruction %w:", "condition %cond must return pred[]")
    rejects(module(WHILE.replace("ROOT t = (s32[], f32[2]) tuple(j, v)",
                                 "ROOT t = (s32[], f32[2], s32[]) tuple(j, v, j)")),
            "instruction %w:", "body %body result (s32[], f32[2], s32[]) differs from the "
            "loop state")


COND = """HloModule c
neg {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
}
dbl {
  q = f32[2] parameter(0)
  ROOT d = f32[2] add(q, q)
}
ENTRY main {
  i = s32[] parameter(0)
  a = f32[2] parameter(1)
  ROOT r = f32[2] conditional(i, a, a), branch_computations={neg, dbl}
}
"""


def test_conditional_branches():
    verify_module(module(COND))
    rejects(module(COND.replace("ROOT d = f32[2] add(q, q)",
                                "c = f32[] constant(1)\n  ROOT d = f32[] add(c, c)")),
            "instruction %r:", "branches return different shapes")
    rejects(module(COND.replace("neg {\n  p = f32[2] parameter(0)",
                                "neg {\n  p = f32[3] parameter(0)")
                   .replace("ROOT n = f32[2] negate(p)", "ROOT n = f32[3] negate(p)")),
            "instruction %r:", "branch 0 %neg parameter 0 is f32[3]")


FUSION = """HloModule f
fused {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  ROOT s = f32[4] subtract(p0, p1)
}
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT f = f32[4] fusion(a, b), kind=kLoop, calls=fused
}
"""


def test_fusion_and_call_parameters():
    verify_module(module(FUSION))
    rejects(module(FUSION.replace("fusion(a, b)", "fusion(a)")),
            "instruction %f:", "fused computation %fused takes 2 parameter(s) but fusion "
            "passes 1")
    rejects(module(FUSION.replace("fusion(a, b), kind=kLoop, calls=fused",
                                  "call(a, b), to_apply=fused")
                   .replace("b = f32[4] parameter(1)", "b = f32[5] parameter(1)")),
            "instruction %f:", "parameter 1 is f32[4] but operand 1 (%b) is f32[5]")
    rejects(module(FUSION.replace("ROOT f = f32[4] fusion", "ROOT f = f32[8] fusion")),
            "declared shape f32[8] does not match the inferred shape f32[4]")


def test_fused_computation_ownership_and_dead_code():
    shared = FUSION.replace("ROOT f = f32[4] fusion(a, b), kind=kLoop, calls=fused",
                            "f = f32[4] fusion(a, b), kind=kLoop, calls=fused\n"
                            "  g = f32[4] fusion(b, a), kind=kLoop, calls=fused\n"
                            "  ROOT h = f32[4] add(f, g)")
    rejects(module(shared), "computation %fused: fused computation is called by 2 fusion "
            "instructions")
    dead = FUSION.replace("ROOT s = f32[4] subtract(p0, p1)",
                          "d = f32[4] negate(p0)\n  ROOT s = f32[4] subtract(p0, p1)")
    rejects(module(dead), "computation %fused, instruction %d: non-root instruction of a "
            "fused computation has no users")


def test_sort_comparator_signature():
    text = """HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY main {
  k = s32[8] parameter(0)
  ROOT s = s32[8] sort(k), dimensions={0}, to_apply=cmp
}
"""
    rejects(module(text), "instruction %s:", "sort comparator %cmp parameter 0 is f32[], "
            "expected s32[]")


def test_parameter_numbering():
    m = module()
    main = m.entry
    main.parameters[1].payload = "3"
    rejects(m, "instruction %b:", "parameter says number 3")
    m = module()
    m.entry.parameters.append(None)
    rejects(m, "computation %main: parameter number 2 is missing")


def test_entry_computation_layout_matches_the_entry():
    header = "HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[]}\n"
    verify_module(module(MODULE.replace("HloModule m\n", header)))
    stale = header.replace("->f32[]", "->f32[4]{0}")
    rejects(module(MODULE.replace("HloModule m\n", stale)),
            "computation %main: entry root is f32[] but entry_computation_layout says f32[4]")


def test_gte_index():
    m = module(WHILE.replace("v = f32[2] get-tuple-element(bp), index=1",
                             "v = f32[2] get-tuple-element(bp), index=2"))
    rejects(m, "computation %body, instruction %v:", "index 2 is out of range")


def test_root_exists():
    m = module()
    m.entry.root = None
    rejects(m, "computation %main: computation has no root instruction")
    m = module()
    m.entry.root = inst(m, "s")
    rejects(m, "computation %main: root %s is not an instruction of the computation")


def test_entry_has_no_callers():
    m = module("""HloModule e
other {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=main
}
ENTRY main {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}
""")
    rejects(m, "computation %other, instruction %c:", "calls the entry computation %main")


def test_operand_in_same_computation():
    m = module()
    s = inst(m, "s")
    s.replace_operand(0, inst(m, "z"))
    rejects(m, "computation %add, instruction %s:", "operand 0 (%z) belongs to main")


def test_instruction_names_unique_in_module():
    m = module()
    inst(m, "y").name = "a"
    rejects(m, "instruction %a:", "instruction name is not unique in the module")


def test_users_and_operands_agree():
    m = module()
    a, mul = inst(m, "a"), inst(m, "m")
    a.remove_user(mul)  # corrupt the IR on purpose
    rejects(m, "instruction %m:", "operand 0 (%a) does not list this instruction among its "
            "users")
    m = module()
    b, z = inst(m, "b"), inst(m, "z")
    b.add_user(z)  # corrupt the IR on purpose
    rejects(m, "instruction %b:", "user %z does not have this instruction as an operand")


def test_operand_cycle():
    m = module()
    a, mul = inst(m, "a"), inst(m, "m")
    neg = m.entry.add("negate", Shape.parse("f32[4]"), [mul], name="neg")
    mul.replace_operand(0, neg)
    del a
    rejects(m, "operand cycle")


def test_called_computation_only_on_callers():
    m = module()
    mul = inst(m, "m")
    mul.called = [m.computation("add")]
    rejects(m, "instruction %m:", "multiply cannot call computations")


def test_called_computation_in_module():
    m = module()
    m.remove_computation(m.computation("add"))
    rejects(m, "instruction %r:", "called computation %add is not in the module")


def test_call_graph_cycle():
    m = module("""HloModule r
f {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
ENTRY main {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=f
}
""".replace("ROOT c = f32[] call(p), to_apply=f\n}\nENTRY",
            "ROOT c2 = f32[] call(p), to_apply=f\n}\nENTRY"))
    rejects(m, "computation %f: computation calls itself")


def test_unknown_opcode_and_missing_shape():
    m = module()
    inst(m, "m").opcode = "frobnicate"
    rejects(m, "instruction %m:", "unknown opcode 'frobnicate'")
    m = module()
    inst(m, "z").shape = None
    rejects(m, "instruction %z:", "instruction has no shape")


def test_control_predecessor_in_same_computation():
    m = module()
    inst(m, "m").control_predecessors = [inst(m, "x")]
    rejects(m, "instruction %m:", "control predecessor %x is not in this computation")


def test_all_errors_are_collected_up_to_a_cap():
    body = "\n".join(f"  n{i} = f32[3] negate(a)" for i in range(80))
    m = module(f"HloModule many\nENTRY main {{\n  a = f32[2] parameter(0)\n{body}\n"
               "  ROOT r = f32[2] negate(a)\n}\n")
    text = rejects(m, "80 verification error(s)", "... and 30 more")
    assert text.count("declared shape f32[3]") == 50
    assert len(module_errors(m, max_errors=5)) == 5


def test_constant_whose_literal_does_not_fit_is_rejected():
    """A constant built (or rewritten) with a literal that does not fit its shape: the
    verifier names it (the parser rejects such text before, at the literal)."""
    m = parse_hlo("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2})\n}\n")
    c = m.entry.root
    c.payload = "{1, 2, 3}"
    c.cache_literal(None)
    errors = module_errors(m)
    assert any("constant literal does not fit f32[2]" in e and "%c" in e for e in errors), errors
    c.payload = "{1, 2}"
    c.cache_literal(None)
    assert module_errors(m) == []
