"""Sort and top-k as CUDA kernels (``hlo_opt/backends/cuda/sort.py``): every module's sort
/ topk step is a launch (no host thunk), runs under cuda-sim bitwise equal to the
interpreter (sort is exact), and every kernel compiles with NVRTC for sm_80 and sm_90
and passes ptxas.  Rows longer than a block's shared memory (5000 elements on the H100)
take the merge sort (tiles sorted in shared memory, then merge passes); every case runs
again on a device of 768 bytes of shared memory per block, where rows of more than 96
f32 keys sort in tiles of 64, with 3 to 7 merge passes."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.backends.cuda.support import assert_compiled_entries, assert_no_spills, require_gxx, require_nvrtc

LT = "ROOT c = pred[] compare(p0, p1), direction=LT"
GT = "ROOT c = pred[] compare(p0, p1), direction=GT"
# what JAX writes for jnp.sort of floats: NaNs canonicalised, -0 -> +0, a total order
JAX_NAN = """ne0 = pred[] compare(p0, p0), direction=NE
  nan = {t}[] constant(nan)
  zero = {t}[] constant(0)
  eq0 = pred[] compare(p0, zero), direction=EQ
  s0 = {t}[] select(eq0, zero, p0)
  c0 = {t}[] select(ne0, nan, s0)
  ne1 = pred[] compare(p1, p1), direction=NE
  eq1 = pred[] compare(p1, zero), direction=EQ
  s1 = {t}[] select(eq1, zero, p1)
  c1 = {t}[] select(ne1, nan, s1)
  ROOT c = pred[] compare(c0, c1), direction=LT, type=TOTALORDER"""


def _sort(name, t, dims, layout, d, root=LT, values=False, stable=True):
    shp = f"[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}}}"
    params = f"  p0 = {t}[] parameter(0)\n  p1 = {t}[] parameter(1)\n"
    ops, out, extra = "x", f"{t}{shp}", ""
    if values:
        params += "  p2 = s32[] parameter(2)\n  p3 = s32[] parameter(3)\n"
        extra = f"  v = s32{shp} iota(), iota_dimension={d}\n"
        ops, out = "x, v", f"({t}{shp}, s32{shp})"
    return (f"HloModule {name}\n\ncmp {{\n{params}  {root.format(t=t)}\n}}\n\n"
            f"ENTRY e {{\n  x = {t}{shp} parameter(0)\n{extra}"
            f"  ROOT s = {out} sort({ops}), dimensions={{{d}}}, "
            f"is_stable={'true' if stable else 'false'}, to_apply=cmp\n}}\n")


def _sort3(name, dims):
    """Three operands, keys (s32 descending, then f32 ascending) and an iota."""
    shp = ",".join(map(str, dims))
    d = len(dims) - 1
    return (f"HloModule {name}\n\ncmp {{\n  p0 = s32[] parameter(0)\n  p1 = s32[] parameter(1)\n"
            "  p2 = f32[] parameter(2)\n  p3 = f32[] parameter(3)\n"
            "  p4 = s32[] parameter(4)\n  p5 = s32[] parameter(5)\n"
            "  gt = pred[] compare(p0, p1), direction=GT\n"
            "  eq = pred[] compare(p0, p1), direction=EQ\n"
            "  lt = pred[] compare(p2, p3), direction=LT\n  tie = pred[] and(eq, lt)\n"
            "  ROOT c = pred[] or(gt, tie)\n}\n\nENTRY e {\n"
            f"  x = s32[{shp}] parameter(0)\n  y = f32[{shp}] parameter(1)\n"
            f"  v = s32[{shp}] iota(), iota_dimension={d}\n"
            f"  ROOT s = (s32[{shp}], f32[{shp}], s32[{shp}]) sort(x, y, v), "
            f"dimensions={{{d}}}, is_stable=true, to_apply=cmp\n}}\n")


def _topk(name, dims, k, largest=True, t="f32"):
    shp = ",".join(map(str, dims))
    ks = ",".join(map(str, list(dims[:-1]) + [k]))
    return (f"HloModule {name}\n\nENTRY e {{\n  x = {t}[{shp}] parameter(0)\n"
            f"  ROOT t = ({t}[{ks}], s32[{ks}]) topk(x), k={k}, "
            f"largest={'true' if largest else 'false'}\n}}\n")


def _topk_custom_call(name, dims, k):
    shp = ",".join(map(str, dims))
    ks = ",".join(map(str, list(dims[:-1]) + [k]))
    return (f"HloModule {name}\n\ncmp {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            f"  ROOT c = pred[] compare(a, b), direction=GT\n}}\n\nENTRY e {{\n"
            f"  x = f32[{shp}] parameter(0)\n  ROOT t = (f32[{ks}], s32[{ks}]) custom-call(x), "
            f"custom_call_target=\"TopK\", to_apply=cmp\n}}\n")


def cases():
    """(id, HLO text, data: random | ties | nan, long row)."""
    out = []
    for n in (1, 7, 64, 1000, 5000):
        out.append((f"f32_1d_{n}", _sort(f"s{n}", "f32", [n], [0], 0), "random", n > 4096))
    out += [
        ("f32_2d_minor", _sort("m", "f32", [16, 1000], [1, 0], 1), "random", False),
        ("f32_2d_major", _sort("j", "f32", [300, 7], [1, 0], 0), "random", False),
        ("f32_2d_layout01_dim0", _sort("l0", "f32", [300, 7], [0, 1], 0), "random", False),
        ("f32_2d_layout01_dim1", _sort("l1", "f32", [7, 300], [0, 1], 1, GT), "ties", False),
        ("f32_desc", _sort("dsc", "f32", [4, 64], [1, 0], 1, GT), "random", False),
        ("f32_values", _sort("kv", "f32", [8, 1000], [1, 0], 1, values=True), "ties", False),
        ("s32_stable_ties", _sort("st", "s32", [4, 1000], [1, 0], 1, values=True), "random",
         False),
        ("s32_unstable_ties", _sort("ust", "s32", [4, 333], [1, 0], 1, GT, values=True,
                                    stable=False), "random", False),
        ("s32_long_ties", _sort("lt", "s32", [2, 5000], [1, 0], 1, values=True), "random",
         True),
        ("f32_long_major", _sort("lm", "f32", [5000, 3], [1, 0], 0, GT, values=True), "ties",
         True),
        ("f16_ties", _sort("h", "f16", [6, 500], [1, 0], 1, values=True), "ties", False),
        ("bf16_ties", _sort("b", "bf16", [6, 500], [1, 0], 1, GT, values=True), "ties", False),
        ("u32", _sort("u", "u32", [3, 100], [1, 0], 1), "random", False),
        ("s64", _sort("l", "s64", [3, 100], [1, 0], 1, GT), "random", False),
        ("f64_nan", _sort("d", "f64", [2, 200], [1, 0], 1, JAX_NAN), "nan", False),
        ("f32_nan_total_order", _sort("nan", "f32", [5, 257], [1, 0], 1, JAX_NAN,
                                      values=True), "nan", False),
        ("f32_nan_total_order_long", _sort("nanl", "f32", [4100], [0], 0, JAX_NAN), "nan",
         True),
        ("topk_k1", _topk("t1", [4, 64], 1), "ties", False),
        ("topk_k5", _topk("t5", [4, 64], 5), "nan", False),
        ("topk_kn", _topk("tn", [4, 64], 64), "ties", False),
        ("topk_1d_smallest", _topk("ts", [1000], 5, largest=False), "nan", False),
        ("topk_s32", _topk("ti", [3, 100], 5, t="s32"), "random", False),
        ("topk_long", _topk("tl", [3, 5000], 5), "ties", True),
        ("topk_custom_call", _topk_custom_call("tc", [2, 300], 4), "nan", False),
        ("three_operands_custom_cmp", _sort3("c3", [3, 3000]), "ties", True),
        ("topk_long_many_rows", _topk("tm", [5, 4500], 70, largest=False), "nan", True),
        ("topk_k_past_runs", _topk("tk", [2, 2000], 300), "ties", False),
    ]
    return out


IDS = [c[0] for c in cases()]


def _arguments(module, data):
    from hlo_opt.backends.interpreter.literals import random_arguments
    args = random_arguments(module, seed=5)
    if data == "random":
        return args
    rng = np.random.default_rng(7)
    for i, x in enumerate(args):
        v = rng.integers(-4, 4, size=x.shape).astype(np.float64) * 0.5  # many ties
        if data == "nan":
            special = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0])
            pick = rng.random(x.shape) < 0.4
            v = np.where(pick, special[rng.integers(0, len(special), size=x.shape)], v)
        args[i] = v.astype(x.dtype)
    return args


# a device whose blocks have 768 bytes of shared memory: tiles of 64 keys (f32 keys with
# s32 values, bf16 keys ...), so rows of 100 and more take the merge sort
SMALL_SHARED = 768


@functools.cache
def _programs(shared: int | None = None):
    import dataclasses

    from hlo_opt import parse_hlo
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    names: set = set()
    dev = H100 if shared is None else dataclasses.replace(H100, shared_memory_per_block=shared)
    return {cid: (parse_hlo(text), build_program(parse_hlo(text), dev, names=names))
            for cid, text, _, _ in cases()}


def _host_thunks(thunks) -> list:
    out = []
    for t in thunks:
        if t.kind == "host":
            out.append(t.name)
        for c in t.callees:
            out += _host_thunks(c.thunks)
    return out


def _sort_launches(prog) -> list:
    return [t.kernel for t in prog.entry.thunks
            if t.kind == "launch" and t.kernel.kind.startswith(("sort", "topk"))]


@pytest.mark.parametrize("cid", IDS)
def test_sort_is_a_kernel_not_a_host_call(cid):
    long_row = next(c[3] for c in cases() if c[0] == cid)
    _, prog = _programs()[cid]
    assert not _host_thunks(prog.entry.thunks) and not prog.host_fallbacks
    ks = _sort_launches(prog)
    assert all(k.block[0] <= 1024 for k in ks)
    if not long_row:
        [k] = ks
        assert k.extra["shared"] and not k.extra["merge"] and k.fibered, k.extra
        return
    # the merge sort, launched in order: tiles, one pass per doubling, the outputs
    x = ks[0].extra
    assert not x["shared"] and x["merge"] and x["tile"] in (2048, 4096), x
    kinds = [k.kind.split("_")[1] for k in ks]
    assert kinds == ["tiles"] + ["merge"] * x["passes"] + ["out"], kinds
    assert x["passes"] == (x["tiles"] - 1).bit_length() >= 1
    assert ks[0].fibered and not any(k.fibered for k in ks[1:])


def test_every_merge_sort_kernel_is_defined_in_its_own_code():
    """What the autotuner's merged translation unit relies on (it renames each kernel in
    its own code): the helpers and scratch come first, in the first kernel's."""
    import re
    _, prog = _programs()["s32_long_ties"]
    ks = _sort_launches(prog)
    assert len(ks) == 3
    for k in ks:
        assert re.search(rf"void __launch_bounds__\(\d+\) {k.name}\(", k.code), k.name
        assert all(not re.search(rf"\b{o.name}\b", k.code) for o in ks if o is not k)


@pytest.mark.parametrize("cid", IDS)
def test_small_shared_memory_takes_the_merge_sort(cid):
    """The threshold is the device's shared memory per block: 64-key tiles here."""
    module, prog = _programs(SMALL_SHARED)[cid]
    assert not _host_thunks(prog.entry.thunks) and not prog.host_fallbacks
    ks = _sort_launches(prog)
    x = ks[0].extra
    assert x["merge"] is (x["row"] > 96), x
    if x["merge"]:
        assert x["tile"] in (32, 64) and len(ks) == x["passes"] + 2, x


@functools.cache
def _sim(shared: int | None = None):
    from hlo_opt.backends.cuda_sim import compile_batch
    progs = _programs(shared)
    return dict(zip(progs, compile_batch([p for _, p in progs.values()], parts=2)))


def _leaves(x) -> list:
    if isinstance(x, (tuple, list)):
        return [y for e in x for y in _leaves(e)]
    return [np.asarray(x)]


def _assert_bitwise(module, exe, data):
    from hlo_opt.backends import compile as compile_module
    args = _arguments(module, data)
    want = _leaves(compile_module(module, "interpreter").run(args))
    got = _leaves(exe.run(args))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes(), f"output {i}: {np.argwhere(g != w)[:5].tolist()}"


@pytest.mark.parametrize("cid", IDS)
def test_cuda_sim_matches_interpreter_bitwise(cid):
    require_gxx()
    data = next(c[2] for c in cases() if c[0] == cid)
    module, _ = _programs()[cid]
    _assert_bitwise(module, _sim()[cid], data)


@pytest.mark.parametrize("cid", IDS)
def test_cuda_sim_merge_sort_matches_interpreter_bitwise(cid):
    """The same cases in 64-key tiles: rows of 100 to 5000 merged in up to 7 passes."""
    require_gxx()
    data = next(c[2] for c in cases() if c[0] == cid)
    module, _ = _programs(SMALL_SHARED)[cid]
    _assert_bitwise(module, _sim(SMALL_SHARED)[cid], data)


@pytest.mark.parametrize("cid, row, element", [
    ("f32_values", 1000, 16), ("topk_long_many_rows", 4500, 12), ("f32_long_major", 5000, 16)])
def test_rows_beyond_the_merge_scratch_merge_chunk_after_chunk(monkeypatch, cid, row,
                                                               element):
    """A scratch of 2 rows (``element``: scratch bytes per element): the rows run in
    chunks of 2 (the last one shorter where the count is odd), each chunk its tiles,
    merge passes and outputs."""
    require_gxx()
    import dataclasses

    from hlo_opt import parse_hlo
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda import sort
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda_sim import compile_batch
    _, text, data, _ = next(c for c in cases() if c[0] == cid)
    module = parse_hlo(text)
    monkeypatch.setattr(sort, "MERGE_SCRATCH_BYTES", 2 * row * element + 5)
    dev = dataclasses.replace(H100, shared_memory_per_block=SMALL_SHARED)
    prog = build_program(module, dev)
    ks = _sort_launches(prog)
    x = ks[0].extra
    assert x["merge"] and x["chunks"] == -(-x["rows"] // 2) > 1, x
    assert len(ks) == x["chunks"] * (x["passes"] + 2)
    [exe] = compile_batch([prog], parts=1)
    _assert_bitwise(module, exe, data)


def test_rows_beyond_the_merge_scratch_sort_one_block_per_row(monkeypatch):
    """Where the merge sort's scratch would pass MERGE_SCRATCH_BYTES, a row per block
    with its staging in global memory (correct for any length)."""
    require_gxx()
    from hlo_opt import parse_hlo
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda import sort
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.backends.cuda_sim import compile_batch
    monkeypatch.setattr(sort, "MERGE_SCRATCH_BYTES", 1000)
    cid, text, data, _ = next(c for c in cases() if c[0] == "s32_long_ties")
    module = parse_hlo(text)
    prog = build_program(module, H100)
    [k] = _sort_launches(prog)
    assert not k.extra["shared"] and not k.extra["merge"] and k.kind == "sort_global"
    [exe] = compile_batch([prog], parts=1)
    _assert_bitwise(module, exe, data)


PIPELINE_MODULES = ["sample_modules/sort.hlo", "benchmarks/xla_gpu_modules/sort_topk.hlo"]


@pytest.mark.parametrize("path", PIPELINE_MODULES)
def test_gpu_pipeline_sorts_run_on_the_device(path):
    from pathlib import Path

    from hlo_opt import passes_api, parse_hlo
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.flags import DebugOptions
    root = Path(__file__).resolve().parents[3]
    raw = parse_hlo((root / path).read_text())
    opt = passes_api.optimize(raw.clone(), DebugOptions.from_sources([]), pipeline="gpu")
    prog = build_program(opt, H100)
    assert not _host_thunks(prog.entry.thunks) and not prog.host_fallbacks
    assert any(k.kind.startswith(("sort", "topk")) for k in prog.kernels)
    require_gxx()
    from hlo_opt.backends.cuda_sim import compile_batch
    [exe] = compile_batch([prog], parts=1)
    r = check_executable(raw, exe, abs_bound=0.0, rel_bound=0.0)
    assert r.status == "pass", r.detail


@pytest.fixture(scope="module", params=[None, SMALL_SHARED], ids=["h100", "small_shared"])
def compiled(request):
    require_nvrtc()
    from hlo_opt.backends.cuda.compiler import compile_cuda
    from hlo_opt.backends.cuda.program import combined_source
    progs = _programs(request.param)
    src = combined_source([p for _, p in progs.values()])
    kernels = {k.name for _, p in progs.values() for k in p.kernels
               if k.kind.startswith(("sort", "topk"))}
    return kernels, {arch: compile_cuda(src, arch, name="sort.cu")
                     for arch in ("sm_80", "sm_90")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_every_sort_kernel(compiled, arch):
    kernels, by_arch = compiled
    assert_compiled_entries(by_arch[arch], kernels)


def test_ptxas_accepts_the_sort_kernels_without_spills(compiled):
    kernels, by_arch = compiled
    assert_no_spills(by_arch["sm_90"].ptx, kernels)


def test_gpu_pipeline_fused_sort_of_long_rows_is_a_merge_sort():
    """After the gpu pipeline the iota is fused into the sort (its operands computed
    elementally in the tile kernel): rows of 5000 still merge-sort, bit for bit."""
    from hlo_opt import passes_api, parse_hlo
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.check import check_executable
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.flags import DebugOptions
    raw = parse_hlo(_sort("fl", "f32", [4, 5000], [1, 0], 1, GT, values=True))
    opt = passes_api.optimize(raw.clone(), DebugOptions.from_sources([]), pipeline="gpu")
    prog = build_program(opt, H100)
    assert not _host_thunks(prog.entry.thunks) and not prog.host_fallbacks
    ks = _sort_launches(prog)
    assert ks[0].extra["merge"] and len(ks) == 3, [k.kind for k in ks]
    require_gxx()
    from hlo_opt.backends.cuda_sim import compile_batch
    [exe] = compile_batch([prog], parts=1)
    r = check_executable(raw, exe, abs_bound=0.0, rel_bound=0.0)
    assert r.status == "pass", r.detail
