"""sort-iota-fusion: differential tests over the FileCheck modules and the gpu pipeline."""
from pathlib import Path

from hlo_opt import passes_api
from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions
from passes.gpu.sort_iota_fusion import SortIotaFusion
from tests.support.pass_suite import lit_modules_test

test_lit_modules = lit_modules_test("sort_iota_fusion*.hlo", SortIotaFusion)

TOPK = Path(__file__).resolve().parents[3] / "benchmarks" / "xla_gpu_modules" / "sort_topk.hlo"


def test_gpu_pipeline_fuses_the_argsort_iota():
    m = passes_api.optimize(parse_hlo(TOPK.read_text()), DebugOptions(), pipeline="gpu")
    ops = [i.opcode for i in m.entry.instructions]
    assert "iota" not in ops and "sort" not in ops
    kinds = [i.attrs.get("kind") for i in m.entry.instructions if i.opcode == "fusion"]
    assert kinds.count("kCustom") == 2
