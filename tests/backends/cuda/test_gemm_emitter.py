"""The gemm thunks' own kernel (``gemm_emitter.py``) under cuda-sim against the
interpreter: every element type, operand layout (op N/T, row- and column-major outputs),
strided and tabled batches, alpha, beta * C, the bias / RELU / GELU epilogues, sizes no
tile divides, on the tensor-core path (its cuda-sim emulation of mma.sync's fragments)
and the SIMT one, for every tile configuration the autotuner tries.  Many calls share one
module (one host-compiler run)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from hlo_opt.api import parse_hlo
from hlo_opt.backends.cuda.gemm_emitter import CONFIGS, config_of, usable, with_config
from hlo_opt.backends.cuda.gemm_plan import gemm_plan
from tests.backends.cuda.support import require_gxx
from tests.backends.cuda.test_gemm_plan import dnums, expected

# XLA's bounds for a gemm's result type (the device check uses the same)
TOL = {"f64": 1e-9, "f32": 1e-4, "f16": 2e-2, "bf16": 2e-2}


def _call(i, lhs, rhs, out, dn, beta=0, epilogue="DEFAULT", extra=(), alpha=1, tile=None):
    names = [f"a{i}", f"b{i}"] + [f"{n}{i}" for n, _ in extra]
    shapes = [lhs, rhs] + [s for _, s in extra]
    cfg = {"gemm_backend_config": {"alpha_real": alpha, "alpha_imag": 0, "beta": beta,
                                   "dot_dimension_numbers": json.loads(dn),
                                   "epilogue": epilogue}}
    if tile is not None:
        cfg["triton_gemm_config"] = tile.to_json()
    return names, shapes, (f"  %g{i} = ({out}, s8[16]{{0}}) custom-call("
                           + ", ".join(f"{s} %{n}" for n, s in zip(names, shapes))
                           + '), custom_call_target="__cublas$lt$matmul", backend_config='
                           + json.dumps(cfg, separators=(",", ":")))


def _module(cases):
    params, calls, outs = [], [], []
    for i, case in enumerate(cases):
        names, shapes, line = _call(i, **case)
        for n, s in zip(names, shapes):
            params.append(f"  %{n} = {s} parameter({len(params)})")
        calls.append(line)
        out = case["out"]
        calls.append(f"  %v{i} = {out} get-tuple-element(%g{i}), index=0")
        outs.append((f"%v{i}", out))
    root = "  ROOT %r = (" + ", ".join(s for _, s in outs) + ") tuple(" + \
        ", ".join(n for n, _ in outs) + ")"
    return parse_hlo("HloModule gemms\nENTRY e {\n" + "\n".join(params + calls + [root])
                     + "\n}\n")


def _run_and_check(cases, seed=0):
    require_gxx()
    from hlo_opt.backends.cuda_sim import SimExecutable
    m = _module(cases)
    exe = SimExecutable(m)
    assert not exe.program.host_fallbacks, exe.program.host_fallbacks
    libs = [t for t in exe.program.entry.thunks if t.kind == "library"]
    assert len(libs) == len(cases) and all(t.kernel is not None for t in libs)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.dtype)
            for p in m.entry.parameters]
    got = exe.run(args)
    got = got[0] if len(got) == 1 and isinstance(got[0], (list, tuple)) else got
    pos = 0
    calls = [i for i in m.entry.instructions if i.opcode == "custom-call"]
    for call, g in zip(calls, got):
        n = len(call.operands)
        want = np.asarray(expected(call, args[pos:pos + n]), np.float64)
        pos += n
        et = call.shape.tuple_shapes[0].element_type
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=TOL[et],
                                   atol=TOL[et] * scale, err_msg=call.to_text())
    return exe


@pytest.mark.parametrize("dt", ["f32", "bf16", "f16", "f64"])
def test_layouts_epilogues_and_ragged_sizes(dt):
    """Operand layouts (op N / T either side), row- and column-major outputs, alpha,
    beta * C, every epilogue, M / N / K no tile divides, on one tile each."""
    t = CONFIGS[1]  # 64x64x32, 4 warps
    cases = []
    for lhs_l in ("{1,0}", "{0,1}"):
        for rhs_l in ("{1,0}", "{0,1}"):
            cases.append(dict(lhs=f"{dt}[37,45]{lhs_l}", rhs=f"{dt}[45,70]{rhs_l}",
                              out=f"{dt}[37,70]{{1,0}}", dn=dnums([1], [0]), tile=t))
    cases.append(dict(lhs=f"{dt}[1,9]{{1,0}}", rhs=f"{dt}[9]{{0}}", out=f"{dt}[1]{{0}}",
                      dn=dnums([1], [0])))                  # a matrix-vector product
    cases.append(dict(lhs=f"{dt}[19,33]{{1,0}}", rhs=f"{dt}[33,21]{{1,0}}",
                      out=f"{dt}[19,21]{{0,1}}", dn=dnums([1], [0]), alpha=0.5))
    cases.append(dict(lhs=f"{dt}[24,17]{{1,0}}", rhs=f"{dt}[9,17]{{1,0}}",
                      out=f"{dt}[24,9]{{1,0}}", dn=dnums([1], [1]), beta=1,
                      extra=[("c", f"{dt}[24,9]{{1,0}}")]))
    for epi in ("BIAS", "BIAS_RELU", "BIAS_GELU", "RELU", "GELU"):
        extra = [("bias", f"{dt}[40]{{0}}")] if epi.startswith("BIAS") else []
        cases.append(dict(lhs=f"{dt}[13,48]{{1,0}}", rhs=f"{dt}[40,48]{{1,0}}",
                          out=f"{dt}[13,40]{{1,0}}", dn=dnums([1], [1]), epilogue=epi,
                          extra=extra))
    exe = _run_and_check(cases)
    mma = {k.extra["tensor_cores"] for k in exe.program.kernels}
    assert mma == {dt in ("f16", "bf16")}


def test_batches_strided_tabled_and_one_sided():
    """A collapsible batch (one stride), batch dims that do not collapse (the offset
    table), a batch on one side only (stride 0)."""
    cases = [dict(lhs="f32[3,4,6,5]{3,2,1,0}", rhs="f32[3,4,5,2]{3,2,1,0}",
                  out="f32[3,4,6,2]{3,2,1,0}", dn=dnums([3], [2], [0, 1], [0, 1])),
             dict(lhs="f32[3,4,6,5]{2,1,3,0}", rhs="f32[3,4,5,2]{3,2,1,0}",
                  out="f32[3,4,6,2]{3,2,1,0}", dn=dnums([3], [2], [0, 1], [0, 1])),
             dict(lhs="bf16[4,6,40]{2,1,0}", rhs="bf16[40,24]{1,0}",
                  out="bf16[4,6,24]{2,1,0}", dn=dnums([2], [0], [0], [])),
             dict(lhs="bf16[2,3,33,16]{3,2,1,0}", rhs="bf16[2,3,16,8]{2,3,1,0}",
                  out="f32[2,3,33,8]{3,2,1,0}", dn=dnums([3], [2], [0, 1], [0, 1]))]
    m = _module(cases)
    plans = [gemm_plan(i) for i in m.entry.instructions if i.opcode == "custom-call"]
    assert any(p.outer for p in plans) and any(0 in (p.a.batch_stride, p.b.batch_stride)
                                               for p in plans)
    _run_and_check(cases)


@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_every_tile_configuration(dt):
    """Each tile the autotuner tries, on sizes it does not divide (the 16-byte loads of
    k-contiguous operands where K allows, the scalar ones where it does not)."""
    cases = []
    for i, tile in enumerate(CONFIGS):
        k = 64 if i % 2 else 41
        cases.append(dict(lhs=f"{dt}[70,{k}]{{1,0}}", rhs=f"{dt}[{k},36]{{0,1}}",
                          out=f"{dt}[70,36]{{1,0}}", dn=dnums([1], [0]), tile=tile))
    m = _module(cases)
    calls = [i for i in m.entry.instructions if i.opcode == "custom-call"]
    assert [config_of(c) for c in calls] == list(CONFIGS)
    assert all(usable(gemm_plan(c), t) for c, t in zip(calls, CONFIGS))
    exe = _run_and_check(cases)
    assert [k.extra["tile"] for k in exe.program.kernels] == list(CONFIGS)
    assert {k.extra["tensor_cores"] for k in exe.program.kernels} == {dt == "bf16"}


def test_odd_warp_column_steps():
    """A warp sub-tile of three 8-column mma steps (ldmatrix x4 then x2 for B), one warp."""
    from hlo_opt.codegen.gemm_fusion import TileConfig
    tile = TileConfig(16, 24, 16, 1)
    cases = [dict(lhs="bf16[40,48]{1,0}", rhs="bf16[30,48]{1,0}", out="f32[40,30]{1,0}",
                  dn=dnums([1], [1]), tile=tile),
             dict(lhs="f16[21,19]{0,1}", rhs="f16[19,50]{1,0}", out="f16[21,50]{1,0}",
                  dn=dnums([1], [0]), tile=tile)]
    exe = _run_and_check(cases)
    assert all(k.extra["tile"] == tile and k.extra["tensor_cores"] for k in exe.program.kernels)


def test_a_tile_that_does_not_fit_falls_back_to_the_default():
    """f64 128x128x32 needs 66 KB of shared memory: the call runs the default tile."""
    cases = [dict(lhs="f64[70,20]{1,0}", rhs="f64[20,36]{1,0}", out="f64[70,36]{1,0}",
                  dn=dnums([1], [0]), tile=CONFIGS[4])]
    call = next(i for i in _module(cases).entry.instructions if i.opcode == "custom-call")
    assert not usable(gemm_plan(call), CONFIGS[4])
    exe = _run_and_check(cases)
    assert exe.program.kernels[0].extra["tile"] == CONFIGS[0]


def test_config_round_trip():
    m = _module([dict(lhs="f32[4,4]{1,0}", rhs="f32[4,4]{1,0}", out="f32[4,4]{1,0}",
                      dn=dnums([1], [0]))])
    call = next(i for i in m.entry.instructions if i.opcode == "custom-call")
    assert config_of(call) is None
    assert with_config(call, CONFIGS[2]) and config_of(call) == CONFIGS[2]
    assert not with_config(call, CONFIGS[2])
    assert with_config(call, None) and config_of(call) is None
    assert gemm_plan(call) is not None


def _all_configs_module():
    cases = []
    for dt in ("bf16", "f16", "f32", "f64"):
        for tile in CONFIGS:
            cases.append(dict(lhs=f"{dt}[300,256]{{1,0}}", rhs=f"{dt}[256,200]{{0,1}}",
                              out=f"{'f32' if dt == 'bf16' else dt}[300,200]{{1,0}}",
                              dn=dnums([1], [0]), tile=tile))
    cases.append(dict(lhs="bf16[4,70,41]{2,1,0}", rhs="bf16[4,41,20]{2,1,0}",
                      out="bf16[4,70,20]{2,1,0}", dn=dnums([2], [1], [0], [0]), beta=1,
                      epilogue="BIAS_GELU", alpha=2,
                      extra=[("c", "bf16[4,70,20]{2,1,0}"), ("bias", "bf16[20]{0}")]))
    from hlo_opt.codegen.gemm_fusion import TileConfig
    cases.append(dict(lhs="f16[40,48]{1,0}", rhs="f16[30,48]{1,0}", out="f16[40,30]{1,0}",
                      dn=dnums([1], [1]), tile=TileConfig(16, 24, 16, 1)))   # ldmatrix x2
    return _module(cases)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_configuration_compiles_with_nvrtc(arch, capsys):
    """Every tile configuration of every element type (and a batched call with every
    epilogue operand) compiles with NVRTC and passes ptxas without spills or stack
    frames; the report prints each kernel's registers."""
    from tests.backends.cuda.support import require_nvrtc, require_ptxas
    require_nvrtc()
    require_ptxas()
    from hlo_opt.backends.cuda.compiler import compile_cuda, kernel_resources, ptxas_check
    from hlo_opt.backends.cuda.program import build_program, full_source
    from hlo_opt.backends.cuda.target import target_device
    m = _all_configs_module()
    prog = build_program(m, target_device(m, None))
    assert not prog.host_fallbacks and len(prog.kernels) == 4 * len(CONFIGS) + 2
    mod = compile_cuda(full_source(prog), arch, name="gemm_configs.cu")
    report = ptxas_check(mod.ptx, arch)
    res = kernel_resources(report)
    # no register array indexed at run time (a stack frame: local memory)
    frames = dict(re.findall(r"entry function '(\w+)'.*?(\d+) bytes stack frame", report,
                             re.S))
    assert {k.name: int(frames[k.name]) for k in prog.kernels} == \
        {k.name: 0 for k in prog.kernels}
    names = {k.name for k in prog.kernels}
    assert names <= set(res)
    with capsys.disabled():
        for k in prog.kernels:
            r = res[k.name]
            print(f"\n  {arch} {k.name} {k.extra['tile']} tensor_cores="
                  f"{k.extra['tensor_cores']}: {r.get('registers')} registers, "
                  f"{r.get('spill_stores', 0)} bytes spilled", end="")
    spills = {k: r for k, r in res.items() if k in names and r.get("spill_stores", 0)}
    assert not spills, spills


def _probe_script():
    import importlib.util

    from tests.conftest import ROOT
    spec = importlib.util.spec_from_file_location("device_libs_gemmfb",
                                                  ROOT / "scripts" / "device_libs_gemmfb.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_device_probe_case_loop_under_cuda_sim():
    """scripts/device_libs_gemmfb.py's case loop (tiles, timing, the interpreter check)
    on cuda-sim; on the CUDA backend without a GPU it says why and returns."""
    require_gxx()
    probe = _probe_script()
    lines: list = []
    best = probe.run(lines.append, "cuda-sim", quick=True, big=False)
    assert list(best) == ["matmul_bias_gelu#0"], lines
    assert any("vs interpreter: ok" in x for x in lines), lines
    from hlo_opt.backends.cuda.driver import CudaDriverError, probe as cuda_probe
    try:
        cuda_probe()
    except CudaDriverError:
        lines.clear()
        assert probe.run(lines.append) == {} and "no CUDA device" in lines[0]


def test_runtime_routes_gemms_between_cublaslt_and_the_kernel():
    """On a device with cuBLASLt (a stand-in on cuda-sim memory): an untuned gemm goes to
    cuBLASLt, one whose call names a tile configuration launches our kernel; a cuBLASLt
    refusal runs the kernel instead, is noted once in host_fallbacks and not retried."""
    require_gxx()
    from hlo_opt.backends.cuda.libraries import run_library_call
    from hlo_opt.backends.cuda.runtime import Runner
    from hlo_opt.backends.cuda_sim import SimExecutable
    from hlo_opt.backends.cuda_sim.device import SimDevice
    from hlo_opt.backends.interpreter import execute

    class Lt:
        def __init__(self, fail):
            self.fail, self.calls = fail, 0

        def run(self, plan, a, b, c, d, bias=None, aux=None):
            self.calls += 1
            if self.fail:
                raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")

    class Device(SimDevice):
        lt = None

        def cublaslt(self):
            return self.lt

        def library_call(self, runner, thunk, frame):
            run_library_call(self, runner, thunk, frame)

    case = dict(lhs="f32[20,12]{1,0}", rhs="f32[12,9]{1,0}", out="f32[20,9]{1,0}",
                dn=dnums([1], [0]))
    rng = np.random.default_rng(1)
    for tile, fail, lt_calls, kernel in ((None, False, 2, False), (CONFIGS[1], False, 0, True),
                                         (None, True, 1, True)):
        m = _module([dict(case, tile=tile)])
        exe = SimExecutable(m)
        dev = Device(exe.library)
        dev.lt = Lt(fail)
        runner = Runner(exe.program, dev)
        args = [rng.standard_normal(p.shape.dims).astype(np.float32)
                for p in m.entry.parameters]
        for _ in range(2):
            got = runner.run(args)
        assert dev.lt.calls == lt_calls
        if kernel:
            np.testing.assert_allclose(got[0], execute(m, args)[0], rtol=1e-5, atol=1e-5)
        notes = [why for _, why in exe.program.host_fallbacks]
        assert notes == (["cuBLASLt: RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED"] if fail else [])


def test_cuda_provider_offers_cublaslt_algorithms_then_the_tiles():
    """The CUDA provider's gemm candidates (built without a device): cuBLASLt's heuristic
    algorithms where it loads, then every tile configuration that runs the call, keyed
    by the tile's name; without cuBLASLt the tiles alone, and the call is still tuned."""
    from types import SimpleNamespace

    from hlo_opt.autotune.results import CandidateKey
    from hlo_opt.backends.cuda.autotune import CudaProvider
    from hlo_opt.backends.cuda.launch_config import config_name
    from hlo_opt.backends.cuda.target import target_device

    class Lt:
        def algorithm_count(self, plan):
            return 3

    m = _module([dict(lhs="bf16[64,32]{1,0}", rhs="bf16[32,48]{1,0}", out="f32[64,48]{1,0}",
                      dn=dnums([1], [0]))])
    call = next(i for i in m.entry.instructions if i.opcode == "custom-call")
    for lt, n_lt in ((Lt(), 3), (False, 0)):
        p = CudaProvider.__new__(CudaProvider)
        p.device_info, p._variants, p._lt = target_device(), {}, lt
        p.dev, p._constants = SimpleNamespace(copy=None), None
        assert p.kind_of(call) == "gemm"
        cands = p.candidates(call)
        assert [c.key for c in cands[:n_lt]] == [CandidateKey.gemm(i) for i in range(n_lt)]
        assert [c.key for c in cands[n_lt:]] == [CandidateKey.other(config_name(t))
                                                 for t in CONFIGS]


def test_before_ampere_bf16_gemms_take_the_simt_path():
    """mma.sync on bf16, cp.async and ldmatrix need sm_80: a Turing target gets the SIMT
    kernel (and cuda-sim runs it)."""
    import dataclasses

    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    turing = dataclasses.replace(H100, compute_capability=(7, 5))
    m = _module([dict(lhs="bf16[40,48]{1,0}", rhs="bf16[48,30]{1,0}", out="bf16[40,30]{1,0}",
                      dn=dnums([1], [0]), tile=CONFIGS[1])])
    (k,) = build_program(m, turing).kernels
    assert not k.extra["tensor_cores"] and "mma.sync" not in k.code and "cp.async" not in k.code
    (k,) = build_program(m, H100).kernels
    assert k.extra["tensor_cores"] and "mma.sync" in k.code


def test_aux_epilogue_writes_the_pre_activation():
    """A plan with ``aux`` (cuBLASLt's GELU_AUX: output 1 is the value before the GELU)
    gets it written by the kernel, as the interpreter computes it."""
    from hlo_opt.backends.cuda_sim import SimExecutable
    from hlo_opt.backends.interpreter import execute

    require_gxx()
    cfg = {"gemm_backend_config": {"alpha_real": 1, "alpha_imag": 0, "beta": 0,
                                   "dot_dimension_numbers": json.loads(dnums([1], [0])),
                                   "epilogue": "BIAS_GELU_AUX"}}
    m = parse_hlo(f"""HloModule aux
ENTRY e {{
  %a = bf16[20,24]{{1,0}} parameter(0)
  %b = bf16[24,16]{{1,0}} parameter(1)
  %bias = bf16[16]{{0}} parameter(2)
  %g = (bf16[20,16]{{1,0}}, bf16[20,16]{{1,0}}, s8[32]{{0}}) custom-call(%a, %b, %bias), custom_call_target="__cublas$lt$matmul", backend_config={json.dumps(cfg, separators=(",", ":"))}
  %v = bf16[20,16]{{1,0}} get-tuple-element(%g), index=0
  %x = bf16[20,16]{{1,0}} get-tuple-element(%g), index=1
  ROOT %r = (bf16[20,16]{{1,0}}, bf16[20,16]{{1,0}}) tuple(%v, %x)
}}
""")
    exe = SimExecutable(m)
    (k,) = exe.program.kernels
    assert [p[1:] for p in k.params][-2:] == [("out", 0), ("out", 1)]
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.dtype) for p in m.entry.parameters]
    got, want = exe.run(args), execute(m, args)
    want = want[0] if len(want) == 1 else want
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=2e-2, atol=2e-2)
    assert not np.allclose(np.asarray(got[0], np.float64), np.asarray(got[1], np.float64))


def test_with_cublaslt_only_tuned_gemms_get_a_kernel():
    """``gemm_kernels=False`` (a device where cuBLASLt loads): no NVRTC kernel for the
    untuned gemm, one for the call the autotuner gave a tile; both stay library thunks."""
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    case = dict(lhs="f32[20,12]{1,0}", rhs="f32[12,9]{1,0}", out="f32[20,9]{1,0}",
                dn=dnums([1], [0]))
    m = _module([dict(case, tile=None), dict(case, tile=CONFIGS[1])])
    prog = build_program(m, H100, gemm_kernels=False)
    libs = [t for t in prog.entry.thunks if t.kind == "library"]
    assert [t.kernel is not None for t in libs] == [False, True]
    assert len(prog.kernels) == 1
    everywhere = build_program(m, H100)
    assert all(t.kernel is not None for t in everywhere.entry.thunks if t.kind == "library")
