"""The fusion passes keep state between decisions (memoized facts, costs and indexing
evaluations, evaluations grown incrementally, bodies moved instead of copied, CSE keys
computed late).  Each test here runs the fast path against a reference that recomputes
from scratch and asks for the same result, byte for byte: a stale cache shows up as a
different fusion or a different name."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import Fixpoint, Pipeline, PipelineRunner
from tests.support.pipelines import pipeline

SAMPLES = Path(__file__).resolve().parents[3] / "sample_modules"

# Two transformer blocks (layer norm, matmul, bias, tanh-GELU, residual): CSE'd broadcasts
# feed several fusions, and every fusion changes the priorities of its neighbours.
_BLOCK = """
  %x{i}.red = f32[64]{{0}} reduce(f32[64,128]{{1,0}} %x{i}, f32[] %zero), dimensions={{1}}, to_apply=%add
  %x{i}.mean = f32[64]{{0}} divide(f32[64]{{0}} %x{i}.red, f32[64]{{0}} %n_b)
  %x{i}.meanb = f32[64,128]{{1,0}} broadcast(f32[64]{{0}} %x{i}.mean), dimensions={{0}}
  %x{i}.cent = f32[64,128]{{1,0}} subtract(f32[64,128]{{1,0}} %x{i}, f32[64,128]{{1,0}} %x{i}.meanb)
  %x{i}.sq = f32[64,128]{{1,0}} multiply(f32[64,128]{{1,0}} %x{i}.cent, f32[64,128]{{1,0}} %x{i}.cent)
  %x{i}.var = f32[64]{{0}} reduce(f32[64,128]{{1,0}} %x{i}.sq, f32[] %zero), dimensions={{1}}, to_apply=%add
  %x{i}.varn = f32[64]{{0}} divide(f32[64]{{0}} %x{i}.var, f32[64]{{0}} %n_b)
  %x{i}.rs = f32[64]{{0}} rsqrt(f32[64]{{0}} %x{i}.varn)
  %x{i}.rsb = f32[64,128]{{1,0}} broadcast(f32[64]{{0}} %x{i}.rs), dimensions={{0}}
  %x{i}.norm = f32[64,128]{{1,0}} multiply(f32[64,128]{{1,0}} %x{i}.cent, f32[64,128]{{1,0}} %x{i}.rsb)
  %x{i}.mm = f32[64,128]{{1,0}} dot(f32[64,128]{{1,0}} %x{i}.norm, f32[128,128]{{1,0}} %w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %x{i}.bb = f32[64,128]{{1,0}} broadcast(f32[128]{{0}} %b{i}), dimensions={{1}}
  %x{i}.h = f32[64,128]{{1,0}} add(f32[64,128]{{1,0}} %x{i}.mm, f32[64,128]{{1,0}} %x{i}.bb)
  %x{i}.h3 = f32[64,128]{{1,0}} multiply(f32[64,128]{{1,0}} %x{i}.h, f32[64,128]{{1,0}} %x{i}.h)
  %x{i}.k1 = f32[64,128]{{1,0}} broadcast(f32[] %c044), dimensions={{}}
  %x{i}.t1 = f32[64,128]{{1,0}} multiply(f32[64,128]{{1,0}} %x{i}.h3, f32[64,128]{{1,0}} %x{i}.k1)
  %x{i}.t4 = f32[64,128]{{1,0}} tanh(f32[64,128]{{1,0}} %x{i}.t1)
  %x{i}.k3 = f32[64,128]{{1,0}} broadcast(f32[] %one), dimensions={{}}
  %x{i}.t5 = f32[64,128]{{1,0}} add(f32[64,128]{{1,0}} %x{i}.t4, f32[64,128]{{1,0}} %x{i}.k3)
  %x{i}.g = f32[64,128]{{1,0}} multiply(f32[64,128]{{1,0}} %x{i}.h, f32[64,128]{{1,0}} %x{i}.t5)
  %x{j} = f32[64,128]{{1,0}} add(f32[64,128]{{1,0}} %x{i}, f32[64,128]{{1,0}} %x{i}.g)"""


def _blocks(n: int) -> str:
    params = ["x0: f32[64,128]"]
    body = ["  %x0 = f32[64,128]{1,0} parameter(0)", "  %zero = f32[] constant(0)",
            "  %n = f32[] constant(128)",
            "  %n_b = f32[64]{0} broadcast(f32[] %n), dimensions={}",
            "  %c044 = f32[] constant(0.044715)", "  %one = f32[] constant(1)"]
    for i in range(n):
        params += [f"w{i}: f32[128,128]", f"b{i}: f32[128]"]
        body += [f"  %w{i} = f32[128,128]{{1,0}} parameter({1 + 2 * i})",
                 f"  %b{i} = f32[128]{{0}} parameter({2 + 2 * i})",
                 _BLOCK.format(i=i, j=i + 1).strip("\n")]
    body.append(f"  ROOT %out = f32[64,128]{{1,0}} copy(f32[64,128]{{1,0}} %x{n})")
    return ("HloModule blocks\n\n%add (a: f32[], b: f32[]) -> f32[] {\n"
            "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
            f"ENTRY %main ({', '.join(params)}) -> f32[64,128] {{\n" + "\n".join(body)
            + "\n}\n")


def _run(module, passes, **flags):
    options = DebugOptions(**flags)
    PipelineRunner(options, verifier=None).run(pipeline("p", list(passes)), module)
    return module


@lru_cache(maxsize=None)
def _fusion_inputs() -> tuple[tuple[str, str], ...]:
    """(name, text) of modules as the GPU ``fusion`` stage sees them: the samples and two
    transformer blocks after the gpu pipeline's earlier stages."""
    from passes.pipelines import build_pipeline
    out = []
    sources = [(p.stem, p.read_text()) for p in sorted(SAMPLES.glob("*.hlo"))]
    sources.append(("blocks", _blocks(2)))
    for name, text in sources:
        module = parse_hlo(text, name)
        options = DebugOptions()
        stages = build_pipeline("gpu").items[:8]  # spmd-simplify ... nvptx part 2
        PipelineRunner(options, verifier=None).run(Pipeline("pre", stages), module)
        out.append((name, module.to_text()))
    return tuple(out)


def _fusion_stage(classic: bool = False):
    from passes.registry import create_pass
    if classic:
        names = ["variadic-op-splitter", ("fusion", {"may_duplicate": False}),
                 ("fusion", {"may_duplicate": True}), "fusion_merger", "multi_output_fusion",
                 "cse", "dce"]
    else:
        names = ["variadic-op-splitter", "priority-fusion", "cse", "multi_output_fusion",
                 "cse", "dce"]
    items = [create_pass(n[0], **n[1]) if isinstance(n, tuple) else create_pass(n)
             for n in names]
    return [Fixpoint(Pipeline("fusion", items))]


def _ids():
    return [name for name, _ in _fusion_inputs()]


# ---- priority-fusion against recomputing everything -----------------------------------------

def _fresh_priority_fusion():
    """priority-fusion that forgets every memo (facts, costs, indexing evaluations,
    can-fuse answers) before each priority and kind it asks."""
    from passes.gpu.priority_fusion import GpuPriorityFusion

    class Fresh(GpuPriorityFusion):
        def priority(self, producer, queue):
            queue.can_fuse_cache.clear()
            self.facts.clear()
            self.costs.entries.clear()
            self.evaluations.clear()
            return super().priority(producer, queue)

        def _kind(self, producer, consumer):
            self.facts.clear()
            return super()._kind(producer, consumer)
    return Fresh()


@pytest.mark.parametrize("index", range(len(_ids())), ids=_ids())
def test_priority_fusion_equals_recomputing_every_priority(index):
    name, text = _fusion_inputs()[index]
    fast = _run(parse_hlo(text, name), ["priority-fusion"])
    fresh = _run(parse_hlo(text, name), [_fresh_priority_fusion()])
    assert fast.to_text() == fresh.to_text()


def test_a_later_fusion_reprices_an_earlier_candidate():
    """%e's priority depends on its user %m; fusing %n into %m first (the better
    candidate) turns %m into a fusion, and %e is priced again against that fusion."""
    text = """HloModule reprice
ENTRY %main (p: f32[1024,1024], q: f32[1024,1024]) -> f32[1024,1024] {
  %p = f32[1024,1024]{1,0} parameter(0)
  %q = f32[1024,1024]{1,0} parameter(1)
  %e = f32[1024,1024]{1,0} exponential(f32[1024,1024]{1,0} %p)
  %n = f32[1024,1024]{1,0} negate(f32[1024,1024]{1,0} %q)
  %m = f32[1024,1024]{1,0} multiply(f32[1024,1024]{1,0} %e, f32[1024,1024]{1,0} %n)
  %u = f32[1024,1024]{1,0} add(f32[1024,1024]{1,0} %e, f32[1024,1024]{1,0} %p)
  ROOT %r = f32[1024,1024]{1,0} subtract(f32[1024,1024]{1,0} %m, f32[1024,1024]{1,0} %u)
}
"""
    fast = _run(parse_hlo(text), ["priority-fusion"])
    fresh = _run(parse_hlo(text), [_fresh_priority_fusion()])
    assert fast.to_text() == fresh.to_text()
    assert fast.entry.root.opcode == "fusion"


# ---- incremental indexing evaluation ----------------------------------------------------------

def _normalized(ev):
    live = set(ev.fusion.called[0].iter_instructions()) | {ev.fusion}
    users = {k: frozenset(v) for k, v in ev.users.items()
             if v and (k in live or k in ev.fusion.operands)}
    count = {k: c for k, c in ev.count.items() if k in live}
    return users, count


def test_grown_indexing_evaluations_equal_rebuilt_ones(monkeypatch):
    from hlo_opt.analysis.gpu import indexing as _indexing
    checked = []
    absorbed = _indexing.IndexingEvaluation.absorbed

    def check(self, producer, value, clones):
        absorbed(self, producer, value, clones)
        assert _normalized(self) == _normalized(_indexing.IndexingEvaluation(self.fusion))
        checked.append(self.fusion.name)
    monkeypatch.setattr(_indexing.IndexingEvaluation, "absorbed", check)
    for name, text in _fusion_inputs():
        _run(parse_hlo(text, name), _fusion_stage())
    assert len(checked) > 20


# ---- moving a dying producer's body instead of copying it ----------------------------------

@pytest.mark.parametrize("classic", [False, True], ids=["priority", "classic"])
def test_moving_bodies_gives_what_copying_gives(monkeypatch, classic):
    from hlo_opt.rewrite import fusion as _fusion_util
    moved = []
    movable = _fusion_util._movable

    def spy(*args):
        ok = movable(*args)
        moved.append(ok)
        return ok
    wrapped = []
    wrappable = _fusion_util._wrappable

    def spy_wrap(*args):
        ok = wrappable(*args)
        wrapped.append(ok)
        return ok
    monkeypatch.setattr(_fusion_util, "_movable", spy)
    monkeypatch.setattr(_fusion_util, "_wrappable", spy_wrap)
    fast = [_run(parse_hlo(t, n), _fusion_stage(classic)).to_text()
            for n, t in _fusion_inputs()]
    assert any(moved) and (classic or any(wrapped))
    monkeypatch.setattr(_fusion_util, "_movable", lambda *args: False)
    monkeypatch.setattr(_fusion_util, "_wrappable", lambda *args: False)
    copied = [_run(parse_hlo(t, n), _fusion_stage(classic)).to_text()
              for n, t in _fusion_inputs()]
    assert fast == copied


# ---- the facts a fusion's record holds ---------------------------------------------------------

def test_fusion_facts_equal_asking_one_by_one():
    from hlo_opt.analysis.gpu import fusion_facts as ff
    from hlo_opt.analysis.gpu.fusible import (is_input_fusible_scatter, shared_memory,
                                              unnested_reductions)
    n = 0
    for name, text in _fusion_inputs():
        module = _run(parse_hlo(text, name), _fusion_stage())
        for inst in module.entry.instructions:
            if inst.opcode != "fusion":
                continue
            f = ff.fusion_facts(inst)
            assert (f.fusible, f.sigred, f.shared, f.reductions, f.splits, f.irsize,
                    f.inscatter) == (
                ff.gpu_fusible(inst), ff.significant_reduce(inst), shared_memory(inst),
                unnested_reductions(inst), ff.basic_block_splits(inst), ff.ir_size(inst),
                is_input_fusible_scatter(inst))
            n += 1
    assert n > 10


# ---- the performance model's inlined arithmetic ----------------------------------------------

def _reference_fused_exec_time(producer, consumer, device, cache):
    """GpuPerformanceModel's fused time from the model's separate helpers."""
    from hlo_opt.analysis.cost import shape_bytes
    from hlo_opt.analysis.perf_model import (_combine, _compute_time, _read_time, _threads,
                                             _waste_factor)
    consumer_cost = cache.cost(consumer)
    utilization = 0.0
    producer_bytes = 0.0
    for i, o in enumerate(consumer.operands):
        if o is producer:
            utilization += cache.utilization(consumer, i)
            producer_bytes += cache.param_read_bytes(consumer, i) \
                if consumer.opcode == "fusion" else shape_bytes(producer.shape)
    producer_cost = cache.cost(producer)
    flops = consumer_cost.flops + 4 * consumer_cost.transcendentals + utilization * (
        producer_cost.flops + 4 * producer_cost.transcendentals)
    compute = _compute_time(device, flops, _threads(consumer))
    other_reads = max(consumer_cost.bytes_read - producer_bytes, 0.0)
    waste = _waste_factor(producer, consumer, cache)
    read = _read_time(device, other_reads, other_reads, waste) + _read_time(
        device, producer_cost.bytes_read, producer_cost.bytes_read * max(utilization, 1e-9),
        waste)
    write = consumer_cost.bytes_written / device.memory_bandwidth
    return _combine(compute, read + write)


def test_fused_exec_time_is_bit_identical_to_the_helpers():
    from hlo_opt.analysis.cost import CostCache
    from hlo_opt.analysis.device import DEFAULT_DEVICE
    from hlo_opt.analysis.perf_model import fused_exec_time, run_time
    pairs = 0
    for name, text in _fusion_inputs():
        for stage in ([], ["priority-fusion"]):
            module = _run(parse_hlo(text, name), stage)
            cache = CostCache()
            for consumer in module.entry.instructions:
                for producer in dict.fromkeys(consumer.operands):
                    got = fused_exec_time(producer, run_time(producer, cache=cache), consumer,
                                          DEFAULT_DEVICE, cache)
                    want = _reference_fused_exec_time(producer, consumer, DEFAULT_DEVICE,
                                                      CostCache())
                    assert got == want, (producer.name, consumer.name)
                    pairs += 1
    assert pairs > 100


def test_estimate_run_times_is_bit_identical_to_the_helpers():
    from hlo_opt.analysis.cost import CostCache
    from hlo_opt.analysis.device import DEFAULT_DEVICE
    from hlo_opt.analysis.perf_model import KERNEL_LAUNCH_OVERHEAD, estimate_run_times, run_time
    producers = 0
    for name, text in _fusion_inputs():
        for stage in ([], ["priority-fusion"]):
            module = _run(parse_hlo(text, name), stage)
            cache = CostCache()
            for producer in module.entry.instructions:
                users = producer.users
                if not users:
                    continue
                for multi_output in (False, True):
                    got = estimate_run_times(producer, users, multi_output, DEFAULT_DEVICE,
                                             cache)
                    ref = CostCache()
                    prt = run_time(producer, DEFAULT_DEVICE, ref)
                    unfused = KERNEL_LAUNCH_OVERHEAD * (len(users) + 1) + prt.exec_time
                    fused = KERNEL_LAUNCH_OVERHEAD * len(users)
                    for consumer in users:
                        unfused += run_time(consumer, DEFAULT_DEVICE, ref).exec_time
                        fused += _reference_fused_exec_time(producer, consumer,
                                                            DEFAULT_DEVICE, CostCache())
                    if multi_output:
                        fused += prt.write_time
                    assert got == (unfused, fused), producer.name
                producers += 1
    assert producers > 100


# ---- CSE: late computation keys, and computations with nothing to merge ------------------------

IDENTICAL_FUSIONS = """HloModule twins
%f1 (p0: f32[8]) -> f32[8] {
  %p0 = f32[8] parameter(0)
  ROOT %e = f32[8] exponential(%p0)
}
%f2 (q0: f32[8]) -> f32[8] {
  %q0 = f32[8] parameter(0)
  ROOT %e2 = f32[8] exponential(%q0)
}
%f3 (r0: f32[8]) -> f32[8] {
  %r0 = f32[8] parameter(0)
  ROOT %l = f32[8] log(%r0)
}
%f4 (s0: f32[8]) -> f32[8] {
  %s0 = f32[8] parameter(0)
  %s1 = f32[8] exponential(%s0)
  %s2 = f32[8] exponential(%s0)
  ROOT %s3 = f32[8] add(%s1, %s2)
}
ENTRY %main (a: f32[8], b: f32[8]) -> (f32[8], f32[8], f32[8], f32[8], f32[8]) {
  %a = f32[8] parameter(0)
  %b = f32[8] parameter(1)
  %x = f32[8] fusion(%a), kind=kLoop, calls=%f1
  %y = f32[8] fusion(%a), kind=kLoop, calls=%f2
  %z = f32[8] fusion(%a), kind=kLoop, calls=%f3
  %w = f32[8] fusion(%b), kind=kLoop, calls=%f2
  %v = f32[8] fusion(%a), kind=kLoop, calls=%f4
  ROOT %t = (f32[8], f32[8], f32[8], f32[8], f32[8]) tuple(%x, %y, %z, %w, %v)
}
"""


def _eager_cse(monkeypatch):
    """CSE computing every key at once and walking every computation (the plain
    algorithm the fast paths stand in for)."""
    from passes import cse
    monkeypatch.setattr(cse._Deferral, "__call__", lambda self, comp: False)
    monkeypatch.setattr(cse, "_distinct_keys", lambda *args: False)


def test_cse_late_keys_merge_what_eager_keys_merge(monkeypatch):
    fast = _run(parse_hlo(IDENTICAL_FUSIONS), ["cse"])
    # %x and %y call structurally equal computations on the same operand; %z does not
    # (another op), %w reads another operand; in %f4 the two exponentials are one
    tuple_ops = [o.name for o in fast.entry.root.operands]
    assert tuple_ops[0] == tuple_ops[1] == "x" and len(set(tuple_ops)) == 4
    _eager_cse(monkeypatch)
    eager = _run(parse_hlo(IDENTICAL_FUSIONS), ["cse"])
    assert fast.to_text() == eager.to_text()


@pytest.mark.parametrize("index", range(len(_ids())), ids=_ids())
def test_cse_fast_paths_equal_the_plain_walk(monkeypatch, index):
    name, text = _fusion_inputs()[index]
    stage = _fusion_stage()
    fast = [_run(parse_hlo(text, name), stage).to_text(),
            _run(parse_hlo(text, name), ["cse"]).to_text()]
    _eager_cse(monkeypatch)
    plain = [_run(parse_hlo(text, name), _fusion_stage()).to_text(),
             _run(parse_hlo(text, name), ["cse"]).to_text()]
    assert fast == plain


def test_memoized_facts_and_costs_are_current_whenever_asked():
    """Whenever priority-fusion prices an instruction, every fact and cost it holds for
    an instruction still in the computation is what asking afresh gives (nothing kept
    from before a change)."""
    from hlo_opt.analysis.cost import instruction_cost
    from passes.gpu import priority_fusion as pf
    from hlo_opt.analysis.gpu import fusion_facts as ff
    from hlo_opt.analysis.gpu.fusible import (is_input_fusible, is_input_fusible_reduction,
                                              shared_memory, unnested_reductions)
    fresh = {"fusible": ff.gpu_fusible, "sigred": ff.significant_reduce,
             "inred": is_input_fusible_reduction, "infus": is_input_fusible,
             "allint": ff.all_intermediate, "shared": shared_memory,
             "reductions": unnested_reductions, "splits": ff.basic_block_splits,
             "irsize": ff.ir_size}
    checked = {"facts": 0, "costs": 0}

    class Checked(pf.GpuPriorityFusion):
        def priority(self, producer, queue):
            for inst, record in self.facts.records.items():
                if inst.parent is not queue.comp or inst.opcode == "rng":
                    continue
                for field, ask in fresh.items():
                    value = getattr(record, field)
                    if value is not None:
                        assert value == ask(inst), (inst.name, field)
                        checked["facts"] += 1
            for inst, entry in self.costs.entries.items():
                if inst.parent is queue.comp and entry.cost is not None:
                    assert entry.cost == instruction_cost(inst), inst.name
                    checked["costs"] += 1
            return super().priority(producer, queue)

    for name, text in _fusion_inputs():
        if name != "blocks":  # (quadratic here; the samples are small)
            _run(parse_hlo(text, name), [Checked()])
    assert checked["facts"] > 1000 and checked["costs"] > 1000


# ---- fusible computations: one walk, the module's own post order ---------------------------

def test_fusible_computations_keep_the_module_post_order():
    from hlo_opt.rewrite.graph import fusible_computations
    n = 0
    for name, text in _fusion_inputs():
        module = _run(parse_hlo(text, name), _fusion_stage())
        callees = {c: dict.fromkeys(c.called_computations()) for c in module.computations}
        assert module.computation_post_order(module.computations, callees) == \
            module.computation_post_order()
        fused = {c for comp in module.computations for i in comp.instructions
                 if i.opcode != "while" and i.opcode != "conditional" for c in i.called}
        assert [c for c in fusible_computations(module) if c in fused] == []
        n += 1
    assert n == len(_fusion_inputs())
