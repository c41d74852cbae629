"""transpose-folding: differential tests (dot and, when enabled, convolution folding)."""
from hlo_opt.api import parse_hlo
from passes.transpose_folding import TransposeFolding
from tests.support.harness import check_pass
from tests.support.pass_suite import lit_modules_test, real_modules_test

test_lit_modules = lit_modules_test("transpose_folding*.hlo", TransposeFolding)
test_real_modules = real_modules_test(TransposeFolding, exact=False)


def test_convolution_folding_when_enabled():
    text = """HloModule m
ENTRY %main (x: f32[1,4,8,3], k: f32[3,3,3,2]) -> f32[1,8,6,2] {
  %x = f32[1,4,8,3] parameter(0)
  %k = f32[3,3,3,2] parameter(1)
  %tx = f32[1,8,4,3] transpose(%x), dimensions={0,2,1,3}
  ROOT %c = f32[1,8,6,2] convolution(%tx, %k), window={size=3x3 pad=1_1x2_2}, dim_labels=b01f_01io->b01f
}
"""
    m = parse_hlo(text)
    assert not TransposeFolding().run(m.clone())
    r = check_pass(m, [TransposeFolding(fold_convolutions=True)], rtol=1e-4, atol=1e-5)
    assert r.changed and "transpose" not in r.after_text.split("ENTRY")[1]
