"""Host-side providers for the autotuner tests: real numpy candidates plus planted bad
ones (a wrong result, an out-of-bounds writer), timed by a fixed cost per candidate so
that which one is "fastest" is deterministic."""
from __future__ import annotations

import ctypes

import numpy as np

from hlo_opt.api import parse_hlo
from hlo_opt.autotune import AutotuneConfig, AutotuneSession, ResultCache
from hlo_opt.autotune.buffers import array_shapes, from_physical, to_physical
from hlo_opt.autotune.candidates import CandidateError
from hlo_opt.autotune.host_provider import HostProvider
from hlo_opt.autotune.results import CandidateKey
from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import PipelineRunner
from tests.support.pipelines import pipeline

GEMM_HLO = """HloModule m
ENTRY %main (a: f32[64,32], b: f32[32,48], c: f32[48,16]) -> f32[64,16] {
  %a = f32[64,32]{1,0} parameter(0)
  %b = f32[32,48]{1,0} parameter(1)
  %c = f32[48,16]{1,0} parameter(2)
  %d = f32[64,48]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %e = f32[64,16]{1,0} dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

CONV_HLO = """HloModule c
ENTRY %main (x: f32[1,8,8,4], k: f32[3,3,4,8]) -> f32[1,8,8,8] {
  %x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,4,8]{3,2,1,0} parameter(1)
  ROOT %y = f32[1,8,8,8]{3,2,1,0} convolution(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""

SMALL_REDZONE = 256


def rewritten(text: str, passes: str):
    module = parse_hlo(text)
    opts = DebugOptions()
    module.config = module.config.replace(debug_options=opts)
    PipelineRunner(opts).run(pipeline("p", passes), module)
    return module


def gemm_module():
    return rewritten(GEMM_HLO, "cublas-gemm-rewriter")


def conv_module():
    return rewritten(CONV_HLO, "cudnn-conv-rewriter")


class Planted:
    """A candidate that computes like ``base`` and then misbehaves."""

    def __init__(self, base, key, name, mischief):
        self.base, self.key, self.name, self.mischief = base, key, name, mischief
        self.scratch_bytes = 0

    def run(self, inputs, outputs, scratch):
        self.base.run(inputs, outputs, scratch)
        self.mischief(self.base.inst, outputs)


def add_one(inst, outputs):
    """A wrong result: every element of the value output off by one."""
    shape = array_shapes(inst.shape)[0]
    outputs[0].write(to_physical(shape, from_physical(shape, outputs[0].read()) + 1))


def write_past_end(inst, outputs):
    """An out-of-bounds write: 4 bytes just past output 0, through its address."""
    buf = outputs[0]
    ctypes.memset(buf.address + buf.nbytes, 0x5A, 4)


def write_before_start(inst, outputs):
    ctypes.memset(outputs[0].address - 8, 0x00, 8)


OOB_PLANT = ("planted-oob", write_past_end, 0.5)


class FailingCandidate:
    def __init__(self, key, name="broken"):
        self.key, self.name, self.scratch_bytes = key, name, 0

    def run(self, inputs, outputs, scratch):
        raise CandidateError("launch failed")


class PlantedProvider(HostProvider):
    """The host provider's candidates (cost 10, 11, ...), then the planted ones."""

    def __init__(self, planted=(), costs=None, only_planted=False):
        super().__init__(measure=self._measure)
        self.planted = list(planted)  # (name, mischief, cost) or a full candidate
        self.costs = dict(costs or {})
        self.only_planted = only_planted
        self.runs = 0            # candidate executions (warm-up included)
        self.measured = 0        # measure() calls
        self._last = None

    def _wrap(self, cand, cost):
        provider = self

        class Timed:
            key, name, scratch_bytes = cand.key, cand.name, cand.scratch_bytes

            def run(self, inputs, outputs, scratch):
                provider.runs += 1
                provider._last = cost
                cand.run(inputs, outputs, scratch)
        return Timed()

    def candidates(self, inst):
        real = [] if self.only_planted else super().candidates(inst)
        out = [self._wrap(c, self.costs.get(c.name, 10.0 + i)) for i, c in enumerate(real)]
        base = super().candidates(inst)[0]
        for j, p in enumerate(self.planted):
            if isinstance(p, tuple):
                name, mischief, cost = p
                key = (CandidateKey.gemm(100 + j) if base.key.kind == "gemm"
                       else CandidateKey.cudnn(100 + j))
                p = Planted(base, key, name, mischief)
            else:
                cost = self.costs.get(p.name, 1.0)
            out.append(self._wrap(p, cost))
        return out

    def _measure(self, run):
        self.measured += 1
        run()   # warm-up
        run()
        return self._last * 1e-3


def session(provider, level=4, cache=None, redzone=SMALL_REDZONE, **cfg):
    config = AutotuneConfig(level=level, redzone_padding_bytes=redzone, **cfg)
    return AutotuneSession(config, provider, cache=cache if cache is not None else ResultCache())


def gemms(module):
    return [i for c in module.computations for i in c.instructions
            if i.opcode == "custom-call" and "cublas" in i.custom_call_target]


def selected(module) -> list:
    import json
    out = []
    for g in gemms(module):
        cfg = json.loads(g.attrs["backend_config"])["gemm_backend_config"]
        out.append(cfg.get("selected_algorithm"))
    return out


def pick(module, sess, passes="gemm-algorithm-picker", **flags):
    """Run the picker pass(es) with ``sess`` in the module's config; returns whether it
    changed."""
    opts = DebugOptions(xla_gpu_autotune_level=sess.config.level, **flags)
    module.config = module.config.replace(debug_options=opts, autotune=sess)
    runner = PipelineRunner(opts, verify_no_change=True)
    return runner.run(pipeline("p", passes), module)


def interpreter_outputs(module, seed=0):
    from hlo_opt.backends.interpreter import execute
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.dtype)
            for p in module.entry.parameters]
    return execute(module, args)
