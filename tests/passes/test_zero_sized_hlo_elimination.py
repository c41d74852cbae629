"""zero_sized_hlo_elimination: differential tests."""
from passes.zero_sized_hlo_elimination import ZeroSizedHloElimination
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("zero_sized_hlo_elimination*.hlo", ZeroSizedHloElimination)
test_real_modules = real_modules_test(ZeroSizedHloElimination)
