"""The implicit-gemm convolution algorithms (``conv.ALGORITHMS`` entries with a tile,
``hlo_opt/backends/cuda/conv_igemm.py``): every convolution module of
``test_conv_kernels`` run with each of them under cuda-sim against the interpreter
(f16/bf16 through the mma.sync path's emulation), compiled by NVRTC for sm_80 and sm_90
without spills; the default stays the direct kernel; the autotuner offers them."""
from __future__ import annotations

import functools
from unittest import mock

import pytest

from hlo_opt.analysis.device import H100
from hlo_opt.backends.cuda import conv
from hlo_opt.backends.cuda.conv import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, with_algorithm
from tests.backends.cuda import test_conv_kernels as K
from tests.backends.cuda.support import assert_compiled_entries, assert_no_spills, require_gxx, require_nvrtc

IGEMM = [a for a in ALGORITHMS if a.tile is not None]


def _call(name, target, dt, a, b, out, extra=""):
    """A cuDNN convolution call written directly (operands ``a``, ``b``; NHWC, HWIO)."""
    def arr(shape):
        return f"{dt}[{','.join(map(str, shape))}]"
    return f"""HloModule {name}
ENTRY e {{
  a = {arr(a)} parameter(0)
  b = {arr(b)} parameter(1)
  c = ({arr(out)}, u8[0]) custom-call(a, b), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f{extra}, custom_call_target="{target}"
  ROOT r = {arr(out)} get-tuple-element(c), index=0
}}
"""


# half-precision cases whose gathers take 16-byte loads (features a multiple of 8,
# contiguous) on the mma path, and the backward kinds in f16
EXTRA = {
    "f32_to_f16": K._conv("f32_to_f16", "f32", [1, 5, 5, 4], [3, 3, 4, 4], "size=3x3",
                          "b01f_01io->b01f", out_dt="f16"),
    "f16_grouped_nhwc": K._conv("f16_grouped_nhwc", "f16", [2, 6, 6, 16], [3, 3, 8, 16],
                                "size=3x3 stride=2x2 pad=1_1x1_1", "b01f_01io->b01f",
                                ", feature_group_count=2"),
    "call_f16_backward_input": _call("call_f16_backward_input", "__cudnn$convBackwardInput",
                                     "f16", [2, 4, 4, 16], [3, 3, 4, 16], [2, 8, 8, 4]),
    "call_bf16_grouped_backward_input": _call(
        "call_bf16_grouped_backward_input", "__cudnn$convBackwardInput", "bf16",
        [2, 4, 4, 16], [3, 3, 4, 16], [2, 8, 8, 8], ", feature_group_count=2"),
    "call_f16_backward_filter": _call("call_f16_backward_filter", "__cudnn$convBackwardFilter",
                                      "f16", [2, 8, 8, 8], [2, 4, 4, 16], [3, 3, 8, 16]),
}
MODULES = sorted({**K.PLAIN, **K.GPU, **K.CALLS, **K.SAMPLES, **EXTRA})
# a plain convolution that rounds its operands to its (narrower) result type: the direct
# kernel runs it
DECLINED = {"f32_to_f16"}


def _selected(alg):
    """Every convolution runs ``alg`` (a plain convolution has no backend config)."""
    return mock.patch.object(conv, "algorithm_of", lambda inst: alg)


@functools.cache
def _programs():
    from hlo_opt.backends.cuda.program import build_program
    names: set = set()
    out = {}
    raw = {**K._raw(), **_extra()}
    for alg in IGEMM:
        with _selected(alg):
            for n in MODULES:
                m = raw[n] if n in K.PLAIN or n in K.CALLS or n in EXTRA \
                    else K._gpu(raw[n])
                out[alg.algo_id, n] = build_program(m, H100, names=names)
    return out


@functools.cache
def _extra():
    from hlo_opt.api import parse_hlo
    return {n: parse_hlo(t) for n, t in EXTRA.items()}


def _convs(prog):
    return [t.kernel for t in K._conv_steps(prog)]


def test_there_are_implicit_gemm_algorithms_and_the_default_is_direct():
    assert len(IGEMM) == 2 and DEFAULT_ALGORITHM.tile is None
    assert len({a.algo_id for a in ALGORITHMS}) == len(ALGORITHMS)
    assert all("implicit_gemm" in a.name and a.threads == a.tile.threads for a in IGEMM)


@pytest.mark.parametrize("name", MODULES)
def test_every_convolution_but_the_declined_is_an_implicit_gemm(name):
    for alg in IGEMM:
        prog = _programs()[alg.algo_id, name]
        kernels = _convs(prog)
        assert kernels and not [t for t in K._thunks(prog.entry) if t.kind == "host"]
        for k in kernels:
            if name in DECLINED:   # the direct kernel of algorithm 0
                assert not k.extra.get("implicit_gemm") and k.extra["algorithm"] == 0
                continue
            assert k.extra["implicit_gemm"] and k.extra["algorithm"] == alg.algo_id
            assert k.block == (alg.threads, 1, 1)
            half = name.startswith(("f16", "bf16")) or name in HALF
            assert k.extra["tensor_cores"] == half, name
            assert any(k.extra["vector_loads"]) == (name in VECTOR), name


HALF = {"cudnn_bias_relu_f16", "cudnn_forward_bf16_nchw", "cudnn_forward_f16",
        "call_f16_backward_input", "call_bf16_grouped_backward_input",
        "call_f16_backward_filter"}
# where the mma path's gathers load 16 bytes at a time (NCHW and the backward filter's
# position-fastest reduction gather element by element)
VECTOR = {"cudnn_bias_relu_f16", "cudnn_forward_bf16_nchw", "cudnn_forward_f16", "f16_nhwc",
          "f16_grouped_nhwc", "call_f16_backward_input", "call_bf16_grouped_backward_input"}


@functools.cache
def _sim():
    from hlo_opt.backends.cuda_sim import compile_batch
    progs = _programs()
    return dict(zip(progs, compile_batch(list(progs.values()), parts=4)))


@pytest.mark.parametrize("algo", [a.algo_id for a in IGEMM])
@pytest.mark.parametrize("name", MODULES)
def test_cuda_sim_matches_interpreter(name, algo):
    require_gxx()
    from hlo_opt.backends.cuda.check import check_executable
    r = check_executable({**K._raw(), **_extra()}[name], _sim()[algo, name], seed=3)
    assert r.status == "pass", r.detail


def test_without_tensor_cores_half_precision_takes_the_simt_tile():
    import dataclasses

    from hlo_opt.backends.cuda.program import build_program
    old = dataclasses.replace(H100, compute_capability=(7, 5))
    with _selected(IGEMM[0]):
        prog = build_program(K._raw()["f16_nhwc"], old)
    (k,) = _convs(prog)
    assert k.extra["implicit_gemm"] and not k.extra["tensor_cores"]
    assert "mma.sync" not in k.code


def test_backend_config_selects_it_and_the_default_stays():
    from hlo_opt.backends.cuda.conv_plan import kernel_selected
    from hlo_opt.backends.cuda.program import build_program
    m = K._gpu(K._raw()["cudnn_forward"])
    (call,) = [i for i in m.entry.instructions if conv.is_convolution(i)]
    assert algorithm_of(call) == DEFAULT_ALGORITHM
    (k,) = _convs(build_program(m, H100))
    assert not k.extra.get("implicit_gemm")
    for alg in IGEMM:
        with_algorithm(call, alg.algo_id)
        assert algorithm_of(call) == alg and kernel_selected(call)
        (k,) = _convs(build_program(m, H100))
        assert k.extra["implicit_gemm"] and k.extra["tile"] == alg.tile


@pytest.fixture(scope="module")
def compiled():
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import combined_source
    src = combined_source(list(_programs().values()))
    return {arch: compile_cuda(src, arch, name="conv_igemm.cu") for arch in ("sm_80", "sm_90")}


def _igemm_kernels():
    return {k.name for p in _programs().values() for k in _convs(p)
            if k.extra.get("implicit_gemm")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_kernel(compiled, arch):
    assert "mma.sync.aligned.m16n8k16" in compiled[arch].ptx
    assert_compiled_entries(compiled[arch], _igemm_kernels())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_ptx_without_spills(compiled, arch):
    assert_no_spills(compiled[arch].ptx, _igemm_kernels(), arch=arch)


def test_level_4_tuning_offers_and_picks_the_implicit_gemm():
    """A half-precision NHWC convolution through the gpu pipeline at autotune level 4
    under cuda-sim: both tiles are candidates next to the direct kernel's variants; with
    the last one cheapest the picker writes it and the tuned module runs its mma.sync
    kernel, still matching the interpreter."""
    require_gxx()
    from hlo_opt.api import parse_hlo
    from hlo_opt.autotune.results import CandidateKey
    from hlo_opt.backends import cuda_sim
    from hlo_opt.backends.cuda.check import check_executable
    from tests.autotune.test_conv_candidates import Costed, conv_kernels, optimized
    text = K.GPU["cudnn_forward_f16"]
    m, s = optimized(text, 4, Costed())
    (rec,) = s.records
    keys = [r.key for r in rec.results]
    assert [CandidateKey.cudnn(a.algo_id) for a in IGEMM] == keys[-len(IGEMM):]
    assert all(r.failure is None for r in rec.results)
    assert rec.best.key == CandidateKey.cudnn(IGEMM[-1].algo_id)
    (k,) = conv_kernels(m).values()
    assert k.extra["implicit_gemm"] and k.extra["tensor_cores"] and k.extra["tile"] == \
        IGEMM[-1].tile
    r = check_executable(parse_hlo(text), cuda_sim.compile(m), seed=3)
    assert r.status == "pass", r.detail
