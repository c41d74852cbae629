"""triton-softmax-rewriter: differential tests (interpreter before/after, verifier)."""
from passes.gpu.softmax_rewriter_triton import SoftmaxRewriterTriton
from tests.support.pass_suite import lit_modules_test

test_lit_modules = lit_modules_test("triton_softmax_rewriter*.hlo", SoftmaxRewriterTriton)
