"""simplify-conditional: differential tests."""
from passes.conditional_simplifier import ConditionalSimplifier
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("conditional_simplifier*.hlo", ConditionalSimplifier)
test_real_modules = real_modules_test(ConditionalSimplifier)
