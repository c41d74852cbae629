"""reduction-degenerate-dim-remover: differential tests."""
from passes.reduction_degenerate_dim_remover import ReductionDegenerateDimRemover
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("reduction_degenerate_dim_remover*.hlo",
                                    ReductionDegenerateDimRemover)
test_real_modules = real_modules_test(ReductionDegenerateDimRemover, exact=False)
