"""while-loop-constant-sinking: differential tests."""
from passes.while_loop_constant_sinking import WhileLoopConstantSinking
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("while_loop_constant_sinking*.hlo",
                                    WhileLoopConstantSinking)
test_real_modules = real_modules_test(WhileLoopConstantSinking)
