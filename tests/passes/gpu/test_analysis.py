"""The cost model, the performance model, reachability and the layout helpers."""
from __future__ import annotations

from pathlib import Path

import pytest

from hlo_opt.analysis.cost import (CostCache, fusion_param_read_bytes, instruction_cost,
                                   kernel_breakdown, module_cost, operand_utilization)
from hlo_opt.analysis.layout import (common_factors, dimensions_consecutive,
                                     reshape_bitcast_layout, reshape_is_bitcast,
                                     transpose_bitcast_layout, transpose_is_bitcast)
from hlo_opt.analysis.perf_model import KERNEL_LAUNCH_OVERHEAD, estimate_run_times, run_time
from hlo_opt.analysis.reachability import Reachability
from hlo_opt.api import parse_hlo
from hlo_opt.ir.shape import Shape

from .util import run

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"


def _inst(m, name):
    return next(i for c in m.computations for i in c.instructions if i.name == name)


def test_elementwise_and_dot_costs():
    m = parse_hlo("""HloModule c
ENTRY %main (a: f32[64,32], b: f32[32,16]) -> f32[64,16] {
  %a = f32[64,32] parameter(0)
  %b = f32[32,16] parameter(1)
  %e = f32[64,32] exponential(%a)
  %n = f32[64,32] negate(%e)
  ROOT %d = f32[64,16] dot(%n, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")
    e = instruction_cost(_inst(m, "e"))
    assert (e.flops, e.transcendentals) == (0, 64 * 32)
    assert e.bytes_read == e.bytes_written == 64 * 32 * 4
    n = instruction_cost(_inst(m, "n"))
    assert n.flops == 64 * 32
    d = instruction_cost(_inst(m, "d"))
    assert d.flops == 2 * 64 * 16 * 32
    assert d.bytes_read == (64 * 32 + 32 * 16) * 4 and d.bytes_written == 64 * 16 * 4
    assert instruction_cost(_inst(m, "a")).bytes_accessed == 0


def test_slice_reads_only_what_it_keeps():
    m = parse_hlo("""HloModule s
ENTRY %main (a: f32[100]) -> f32[10] {
  %a = f32[100] parameter(0)
  ROOT %s = f32[10] slice(%a), slice={[0:10]}
}
""")
    assert instruction_cost(m.entry.root).bytes_read == 40


def test_fusion_cost_reads_each_operand_once():
    m = run((SAMPLES / "reduce_sum_xyz.hlo").read_text(), "fusion")
    fusion = m.entry.root
    c = instruction_cost(fusion)
    assert c.bytes_read == 3 * 1024 * 1024 * 4
    assert c.bytes_written == 4
    # multiply + add + the reduction's adds
    assert c.flops == 1024 * 1024 * 2 + (1024 * 1024 - 1)
    params = fusion.called[0].parameters
    assert all(fusion_param_read_bytes(p) == 1024 * 1024 * 4 for p in params)


def test_utilization_of_a_broadcast_operand():
    m = run("""HloModule u
ENTRY %main (a: f32[8], b: f32[4,8]) -> f32[4,8] {
  %a = f32[8] parameter(0)
  %b = f32[4,8] parameter(1)
  %bc = f32[4,8] broadcast(%a), dimensions={1}
  ROOT %m = f32[4,8] multiply(%bc, %b)
}
""", "fusion")
    f = m.entry.root
    util = {o.name: operand_utilization(f, i) for i, o in enumerate(f.operands)}
    assert util == {"a": 4.0, "b": 1.0}
    cache = CostCache()
    assert cache.utilization(f, 0) == util[f.operands[0].name]


def test_module_cost_and_kernels_before_and_after_fusion():
    text = (SAMPLES / "layer_norm.hlo").read_text()
    before = parse_hlo(text)
    after = run(text, "fusion,fusion_merger,fusion,multi_output_fusion")
    assert module_cost(after).bytes_accessed < module_cost(before).bytes_accessed / 2
    kb, ka = kernel_breakdown(before), kernel_breakdown(after)
    assert kb["fusions"] == 0 and kb["kernels"] > 20
    assert ka["kernels"] <= 4 and ka["fusions"] >= 2


def test_performance_model_prefers_fusing_cheap_producers():
    m = parse_hlo("""HloModule p
ENTRY %main (a: f32[1024,1024]) -> f32[1024,1024] {
  %a = f32[1024,1024] parameter(0)
  %n = f32[1024,1024] negate(%a)
  ROOT %e = f32[1024,1024] exponential(%n)
}
""")
    n, e = _inst(m, "n"), _inst(m, "e")
    unfused, fused = estimate_run_times(n, [e])
    assert fused < unfused
    # one launch saved, and the 4 MiB intermediate never goes through memory
    assert unfused - fused > KERNEL_LAUNCH_OVERHEAD
    assert run_time(n).exec_time > 0


def test_reachability_follows_updates():
    m = parse_hlo("""HloModule r
ENTRY %main (a: f32[4]) -> (f32[4], f32[4]) {
  %a = f32[4] parameter(0)
  %x = f32[4] negate(%a)
  %y = f32[4] exponential(%x)
  %z = f32[4] abs(%a)
  ROOT %t = (f32[4], f32[4]) tuple(%y, %z)
}
""")
    a, x, y, z = (_inst(m, n) for n in "axyz")
    reach = Reachability(m.entry)
    assert reach.reaches(a, y) and reach.reaches(x, y) and not reach.reaches(y, x)
    assert not reach.connected(y, z)
    # make z read y: now y reaches z
    z.replace_operand(0, y)
    reach.update(z)
    assert reach.reaches(y, z) and reach.reaches(x, z)


@pytest.mark.parametrize("a,b,expected", [
    ([1024, 1024], [1048576], [(0, 0), (2, 1)]),
    ([2, 3, 4], [6, 4], [(0, 0), (2, 1), (3, 2)]),
])
def test_common_factors(a, b, expected):
    assert common_factors(a, b) == expected


def test_layout_helpers():
    s = Shape.parse
    assert reshape_is_bitcast(s("f32[2,3]{1,0}"), s("f32[6]{0}"))
    assert not reshape_is_bitcast(s("f32[2,3]{0,1}"), s("f32[6]{0}"))
    assert transpose_is_bitcast(s("f32[2,3]{1,0}"), s("f32[3,2]{0,1}"), [1, 0])
    assert not transpose_is_bitcast(s("f32[2,3]{1,0}"), s("f32[3,2]{1,0}"), [1, 0])
    assert dimensions_consecutive(s("f32[2,3,4]{2,1,0}"), [1, 2])
    assert not dimensions_consecutive(s("f32[2,3,4]{2,1,0}"), [0, 2])


def _moves_nothing(src, dst, perm=None) -> bool:
    """Every element keeps its physical offset (numpy, the definition)."""
    import numpy as np
    def physical(a, shape):
        m2m = shape.effective_layout().minor_to_major
        return np.transpose(a, tuple(reversed(m2m))).ravel()
    x = np.arange(src.num_elements()).reshape(src.dims)
    y = x.reshape(dst.dims) if perm is None else np.transpose(x, perm)
    return np.array_equal(physical(x, src), physical(y, dst))


def test_bitcast_layouts_of_transposes_and_reshapes():
    import itertools
    import random
    rng = random.Random(0)
    s = Shape.parse
    t = transpose_bitcast_layout(s("f32[4,64,128]{2,1,0}"), [2, 0, 1])
    assert t.minor_to_major == (0, 2, 1)
    r = reshape_bitcast_layout(s("f32[128,4,64]{0,2,1}"), s("f32[128,256]"))
    assert r.minor_to_major == (0, 1)
    # a split that no layout makes a bitcast
    assert reshape_bitcast_layout(s("f32[6,4]{0,1}"), s("f32[2,12]")) is None
    for _ in range(60):
        dims = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
        m2m = list(range(len(dims)))
        rng.shuffle(m2m)
        src = s(f"f32[{','.join(map(str, dims))}]{{{','.join(map(str, m2m))}}}")
        perm = list(range(len(dims)))
        rng.shuffle(perm)
        out = src.with_dims([dims[p] for p in perm])
        layout = transpose_bitcast_layout(src, perm)
        assert _moves_nothing(src, out.with_layout(layout), perm)
        n = src.num_elements()
        splits = [d for d in itertools.product([1, 2, 3, 4, 6, 8, 12], repeat=2)
                  if d[0] * d[1] == n] or [(n,)]
        dst = s(f"f32[{','.join(map(str, rng.choice(splits)))}]")
        layout = reshape_bitcast_layout(src, dst)
        if layout is not None:
            assert _moves_nothing(src, dst.with_layout(layout))


def test_a_reshape_that_moves_bytes_is_a_transpose():
    from hlo_opt.analysis.gpu.fusible import (is_physically_transposing, reshape_copy_layout,
                                              tiled_transpose)
    from hlo_opt.analysis.perf_model import transposes_minor_dimension
    m = parse_hlo("""HloModule r
ENTRY %main (x: f32[64,32,32], y: f32[64,32,32]) -> (f32[64,1024], f32[64,1024]) {
  %x = f32[64,32,32]{1,2,0} parameter(0)
  %moving = f32[64,1024]{1,0} reshape(%x)
  %y = f32[64,32,32] parameter(1)
  %free = f32[64,1024]{1,0} reshape(%y)
  ROOT %t = (f32[64,1024], f32[64,1024]) tuple(%moving, %free)
}
""")
    ins = {i.name: i for i in m.entry.instructions}
    moving, free = ins["moving"], ins["free"]
    assert reshape_copy_layout(moving).minor_to_major == (2, 1, 0)
    assert tiled_transpose(moving) == (64, 32, 32)
    assert is_physically_transposing(moving) and transposes_minor_dimension(moving)
    assert reshape_copy_layout(free) is None and tiled_transpose(free) is None
    assert not is_physically_transposing(free) and not transposes_minor_dimension(free)
