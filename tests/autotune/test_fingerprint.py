"""Cache keys: canonical instruction text is name-free and sensitive to what matters."""
from __future__ import annotations

from hlo_opt.api import parse_hlo
from hlo_opt.autotune.fingerprint import canonical_text

from .util import GEMM_HLO, gemms, rewritten


def test_gemm_keys_ignore_names_and_metadata_but_not_shapes_or_config():
    a = gemms(rewritten(GEMM_HLO, "cublas-gemm-rewriter"))
    renamed = GEMM_HLO.replace("%a", "%x").replace("%d", "%y").replace("HloModule m",
                                                                          "HloModule other")
    b = gemms(rewritten(renamed, "cublas-gemm-rewriter"))
    assert [canonical_text(i) for i in a] == [canonical_text(i) for i in b]
    assert canonical_text(a[0]) != canonical_text(a[1])          # other shapes
    assert "%" not in canonical_text(a[0]) and "metadata" not in canonical_text(a[0])
    assert '"alpha_real":1' in canonical_text(a[0])               # sorted JSON config
    c = gemms(rewritten(GEMM_HLO.replace("f32", "f16"), "cublas-gemm-rewriter"))
    assert canonical_text(c[0]) != canonical_text(a[0])


FUSION = """HloModule f
%fused (p0: f32[8], p1: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[8]{0} parameter(1)
  %add = f32[8]{0} add(%p0, %p1)
  ROOT %e = f32[8]{0} exponential(%add)
}
ENTRY %main (a: f32[8], b: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  ROOT %f = f32[8]{0} fusion(%a, %b), kind=kLoop, calls=%fused, metadata={op_name="x"}
}
"""


def test_fusion_key_is_the_fused_computation():
    f1 = parse_hlo(FUSION).entry.root
    f2 = parse_hlo(FUSION.replace("%add", "%sum").replace("%fused", "%other")).entry.root
    f3 = parse_hlo(FUSION.replace("exponential", "tanh")).entry.root
    assert canonical_text(f1) == canonical_text(f2)
    assert canonical_text(f1) != canonical_text(f3)
    assert canonical_text(f1).startswith("tmp_0 = f32[8]{0} parameter(0); ")
