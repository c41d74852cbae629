"""dot_decomposer: differential tests (the canonical dot may sum in another order: compared
with differential.RTOL), and every dot ends canonical."""
from hlo_opt.api import parse_hlo
from hlo_opt.rewrite.builder import dot_dims
from passes.dot_decomposer import DotDecomposer, is_canonical
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("dot_decomposer*.hlo", DotDecomposer)
test_real_modules = real_modules_test(DotDecomposer, exact=False)


def test_result_is_canonical():
    from tests.support.lit_chunks import chunks
    for c in chunks("dot_decomposer*.hlo"):
        m = parse_hlo(c.text)
        DotDecomposer().run(m)
        for d in (i for comp in m.computations for i in comp.instructions if i.opcode == "dot"):
            lb, lc, rb, rc = dot_dims(d)
            assert is_canonical(d.operands[0].shape.rank, lc, lb)
            assert is_canonical(d.operands[1].shape.rank, rc, rb)
