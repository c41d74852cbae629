"""The gemm thunks' own kernel: any :class:`~.gemm_plan.GemmPlan` (what cuBLASLt would be
asked) as one NVRTC kernel, where cuBLASLt is not installed (always under cuda-sim) and
as the autotuner's alternative to cuBLASLt's algorithms.

The kernel computes cuBLASLt's ``D = act(alpha * op(A) . op(B) + beta * C + bias)`` (and,
for a plan with ``aux``, the pre-activation as output 1, in D's type and layout) on the
plan's column-major matrices (leading dimensions, transposes, strided batches; the plan's
``outer`` offsets become a table the batch index reads), with the interpreter's
epilogues (``ops_gemm.cublas_gemm``: RELU ``max(x, 0)``, GELU XLA's tanh approximation,
the bias along D's rows) applied in the accumulator type (f32; f64 for f64) before the
one rounding to the output type.

Each block computes a ``block_m x block_n`` tile of D (``block_m`` along D's rows) of one
batch, stepping ``block_k`` at a time through shared memory; every load and store is
predicated, so any M, N, K are taken.  One source, two inner products:

* tensor cores (f16 / bf16 operands, f32 accumulation): warps in a grid over the tile,
  each a ``(block_m / wm) x (block_n / wn)`` sub-tile of ``mma.sync.m16n8k16`` steps whose
  fragments are read from k-contiguous shared tiles (16-byte global loads where the
  operand is k-contiguous and aligned, checked at run time too).  Under cuda-sim
  (``HLO_SIM``) the same fragments go through a warp-shared scratch and each lane computes
  its accumulator elements as PTX defines the m16n8k16 fragment layouts, so cuda-sim runs
  the same kernel structure (not the same summation order);
* SIMT (f32, f64, and tiles the warps cannot split into 16x8 sub-tiles): every thread
  accumulates a ``thread_m x thread_n`` sub-tile (rows interleaved across threads, so the
  stores of a warp are contiguous along D's rows) with FMAs.

Tile configurations are :class:`~hlo_opt.codegen.gemm_fusion.TileConfig` (XLA's
``TritonGemmKey`` fields, as the gemm fusion kernel uses); :data:`CONFIGS` are the
autotuner's candidates, :func:`default_config` picks one by the problem's size.  The
autotuner's choice lives in the call's ``backend_config`` as ``triton_gemm_config``
(:func:`config_of` / :func:`with_config`), its candidate key ``other(name=triton:...)``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from ...codegen.gemm_fusion import TileConfig
from ...errors import UnsupportedError
from ...ir.types import numpy_dtype
from .emitters import KernelSource, c_name
from .renderer import CTYPE, STORAGE, _fn, from_storage, literal, to_storage

TENSOR_CORE_TYPES = ("f16", "bf16")
SMEM_LIMIT = 48 << 10            # static shared memory per block
MAX_OUTER = 256                  # batch offsets a kernel keeps in a table
CONFIG_FIELD = "triton_gemm_config"

# the autotuner's candidates (the first that fits is the default for large problems)
CONFIGS = (TileConfig(32, 32, 32, 4), TileConfig(64, 64, 32, 4), TileConfig(128, 64, 32, 4),
           TileConfig(64, 128, 32, 4), TileConfig(128, 128, 32, 8),
           TileConfig(64, 64, 64, 4), TileConfig(32, 64, 32, 2))


def config_of(inst) -> TileConfig | None:
    """The tile configuration the autotuner chose for a gemm call (``triton_gemm_config``
    in its backend config), None when it chose cuBLASLt or nothing."""
    if inst is None or inst.opcode != "custom-call":
        return None
    if CONFIG_FIELD not in inst.attrs.get("backend_config", ""):
        return None
    from ..interpreter.ops_custom_call import backend_config
    try:
        cfg = backend_config(inst).get(CONFIG_FIELD)
        return TileConfig(int(cfg["block_m"]), int(cfg["block_n"]), int(cfg["block_k"]),
                          int(cfg["num_warps"]))
    except Exception:  # noqa: BLE001 - an unreadable config: no choice made
        return None


def with_config(inst, tile: TileConfig | None) -> bool:
    """Write (or, for None: remove) the chosen tile configuration; whether it changed."""
    from ..interpreter.ops_custom_call import backend_config
    config = backend_config(inst)
    old = config.get(CONFIG_FIELD)
    if tile is None:
        config.pop(CONFIG_FIELD, None)
    else:
        config[CONFIG_FIELD] = tile.to_json()
    if config.get(CONFIG_FIELD) == old:
        return False
    inst.attrs["backend_config"] = json.dumps(config, separators=(",", ":"))
    return True


def default_config(plan, device=None) -> TileConfig:
    """A tile by the problem's size: 128x128 for large outputs, 64x64 for medium ones,
    32x32 else (small gemms waste less of their tile)."""
    rows, cols = plan.d.rows, plan.d.cols
    for tile in (TileConfig(128, 128, 32, 8), TileConfig(64, 64, 32, 4)):
        if rows >= tile.block_m and cols >= tile.block_n and usable(plan, tile, device):
            return tile
    return CONFIGS[0]


def usable(plan, tile: TileConfig, device=None) -> bool:
    """Whether ``tile`` can run ``plan`` (on ``device``: None is the sm_80+ default)."""
    try:
        _layout(plan, tile, device)
    except UnsupportedError:
        return False
    return True


def tensor_cores(device) -> bool:
    """mma.sync.m16n8k16 on bf16, cp.async and ldmatrix need sm_80 or newer."""
    return device is None or tuple(getattr(device, "compute_capability", (9, 0))) >= (8, 0)


def _warp_grid(tile: TileConfig):
    """(warps along rows, warps along cols) giving each warp a sub-tile of whole 16x8
    mma steps, the squarest such; None when there is none."""
    best = None
    for wm in range(1, tile.num_warps + 1):
        if tile.num_warps % wm:
            continue
        wn = tile.num_warps // wm
        if tile.block_m % (16 * wm) or tile.block_n % (8 * wn):
            continue
        sub_m, sub_n = tile.block_m // wm, tile.block_n // wn
        score = abs(sub_m - sub_n)
        if best is None or score < best[0]:
            best = (score, wm, wn)
    return None if best is None else best[1:]


def _stages(tile: TileConfig) -> int:
    """k-tiles in flight on the tensor-core path: as many as fit (up to 3)."""
    per = (tile.block_m + tile.block_n) * (tile.block_k + 8) * 2
    return min(3, SMEM_LIMIT // per)


def _layout(plan, tile: TileConfig, device=None):
    """:func:`tile_path` of the plan's operand type."""
    return tile_path(plan.dtype, tile, device)


def tile_path(dtype: str, tile: TileConfig, device=None):
    """('mma', (wm, wn)) or ('simt', (thread_m, thread_n)) for ``tile`` on ``dtype``
    operands; UnsupportedError when the tile cannot run them (threads, shared memory)."""
    if tile.num_warps < 1 or tile.block_k < 1:
        raise UnsupportedError(f"cuda gemm: tile {tile}")
    if dtype in TENSOR_CORE_TYPES and tile.block_k % 16 == 0 and tensor_cores(device):
        grid = _warp_grid(tile)
        if grid is not None and _stages(tile) >= 2:
            return "mma", grid
    tt = tile.thread_tile()
    if tt is None:
        raise UnsupportedError(f"cuda gemm: tile {tile} does not divide among its threads")
    acc = 8 if dtype == "f64" else 4
    if tile.block_k * (tile.block_m + tile.block_n + 2) * acc > SMEM_LIMIT:
        raise UnsupportedError(f"cuda gemm: tile {tile} needs over {SMEM_LIMIT} bytes "
                               f"of shared memory for {dtype}")
    return "simt", tt


def emit_gemm(step, plan, names: set, device=None,
              tile: TileConfig | None = None) -> KernelSource:
    """The kernel of a gemm library step whose plan is ``plan`` for ``device`` (its
    compute capability picks the path); UnsupportedError when it cannot be generated
    (the step then runs through cuBLASLt or on the host)."""
    if tile is None:      # the autotuner's choice where this plan can run it
        tile = config_of(step.instruction)
        tile = tile if tile is not None and usable(plan, tile, device) else \
            default_config(plan, device)
    path, shape = _layout(plan, tile, device)
    types = [v.shape.element_type for v in step.inputs]
    et = plan.out_dtype
    if plan.dtype not in CTYPE or CTYPE.get(plan.dtype) not in ("float", "double"):
        raise UnsupportedError(f"cuda gemm: {plan.dtype} operands")
    acc = "f64" if plan.dtype == "f64" else "f32"
    nouter = len(plan.outer) or 1
    zs = plan.batch * nouter
    if zs > 65535 or nouter > MAX_OUTER:
        raise UnsupportedError(f"cuda gemm: {plan.batch} x {nouter} batches")
    sizes = [v.shape.num_elements() for v in step.inputs + step.outputs[:1]]
    it = "int" if max(sizes) < (1 << 31) - 1 else "long long"
    ia, ib = plan.operands
    dm, dn, k = plan.d.rows, plan.d.cols, plan.k
    lda, ldb, ldd = plan.a.ld, plan.b.ld, plan.d.ld
    bm, bn, bk, threads = tile.block_m, tile.block_n, tile.block_k, tile.threads
    nA, nB, nD = sizes[ia], sizes[ib], sizes[-1]
    a_k_minor, b_k_minor = plan.trans_a, not plan.trans_b

    def a_at(i, kk):
        return f"({kk} + ({it}){i} * {lda})" if plan.trans_a else f"({i} + ({it}){kk} * {lda})"

    def b_at(kk, j):
        return f"({j} + ({it}){kk} * {ldb})" if plan.trans_b else f"({kk} + ({it}){j} * {ldb})"

    L = []
    emit = L.append
    # batch offsets: the inner strided batch, then the plan's outer table
    emit(f"  const {it} zb = blockIdx.z % {plan.batch}, zo = blockIdx.z / {plan.batch};")
    emit("  (void)zo;")
    if plan.outer:
        for t, nm in enumerate(("OA", "OB", "OD")):
            emit(f"  const {it} {nm}[{nouter}] = {{" + ", ".join(str(o[t]) for o in plan.outer)
                 + "};")
        oa, ob, od = "OA[zo]", "OB[zo]", "OD[zo]"
    else:
        oa = ob = od = "0"
    emit(f"  const {it} oa = zb * {plan.a.batch_stride} + {oa};")
    emit(f"  const {it} ob = zb * {plan.b.batch_stride} + {ob};")
    emit(f"  const {it} od = zb * {plan.d.batch_stride} + {od};")
    A, B = f"in{ia}", f"in{ib}"
    vec = path == "mma"
    vec_a = vec and a_k_minor and _vec_ok(plan, plan.a, 0, k, bk)
    vec_b = vec and b_k_minor and _vec_ok(plan, plan.b, 1, k, bk)
    opa = TileOperand(A, a_k_minor, nA, lambda i, kk: "oa + " + a_at(i, kk), rows=dm,
                      vec="va" if vec_a else None, vec_base="oa")
    opb = TileOperand(B, b_k_minor, nB, lambda j, kk: "ob + " + b_at(kk, j), rows=dn,
                      vec="vb" if vec_b else None, vec_base="ob")
    epi_indent, closer = emit_tile_product(emit, path, shape, tile, plan.dtype, it, dm, dn,
                                           k, opa, opb)
    ct = CTYPE[acc]
    # the epilogue, in the accumulator type; one rounding at the store
    e = []
    e.append(f"if (gi < {dm} && gj < {dn}) {{")
    e.append(f"  const {it} at = od + gi + ({it})gj * {ldd};")
    e.append(f"  {ct} x = r;")
    if plan.alpha != 1:
        e.append(f"  x = x * {literal(plan.alpha, acc)};")
    if plan.c_operand is not None:
        c = from_storage(types[plan.c_operand], f"in{plan.c_operand}[HLO_CHK(at, {nD})]")
        e.append(f"  x = x + {literal(plan.beta, acc)} * ({ct}){c};")
    if plan.bias_operand is not None:
        nb = sizes[plan.bias_operand]
        bias = from_storage(types[plan.bias_operand],
                            f"in{plan.bias_operand}[HLO_CHK(gi, {nb})]")
        e.append(f"  x = x + ({ct}){bias};")
    aux = getattr(plan, "aux", False)   # *_AUX: the pre-activation, D's type and layout
    if aux:
        pre = f"(({CTYPE[et]})x)" if CTYPE[et] != ct else "x"
        e.append(f"  out1[HLO_CHK(at, {nD})] = {to_storage(et, pre)};")
    if "RELU" in plan.epilogue:
        e.append(f"  x = x < {literal(0, acc)} ? {literal(0, acc)} : x;")
    if "GELU" in plan.epilogue:
        h, one = literal(0.5, acc), literal(1, acc)
        c0, c1 = literal(0.7978845608028654, acc), literal(0.044715, acc)
        e.append(f"  x = {h} * x * ({one} + {_fn(acc, 'tanh')}({c0} * (x + {c1} * x * x * x)));")
    val = f"(({CTYPE[et]})x)" if CTYPE[et] != ct else "x"
    e.append(f"  out0[HLO_CHK(at, {nD})] = {to_storage(et, val)};")
    e.append("}")
    L.extend(epi_indent + x for x in e)
    L.append(closer)

    params = [(f"const {STORAGE[t]}*", "in", i) for i, t in enumerate(types)]
    params.append((f"{STORAGE[et]}*", "out", 0))
    if aux:
        params.append((f"{STORAGE[et]}*", "out", 1))
    decl = [f"{t} __restrict__ {'in' if role == 'in' else 'out'}{slot}"
            for t, role, slot in params]
    name = c_name(step.name, names)
    code = ((_LD2 if path == "mma" else "")
            + f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
            + ", ".join(decl) + ") {\n" + "\n".join(L) + "\n}\n")
    grid = (max(1, (dn + bn - 1) // bn), max(1, (dm + bm - 1) // bm), max(1, zs))
    if grid[1] > 65535:
        raise UnsupportedError(f"cuda gemm: {dm} rows need {grid[1]} blocks along y")
    isz = numpy_dtype(plan.dtype).itemsize
    moved = (plan.m * plan.k * 2 * isz + plan.m * plan.n * numpy_dtype(et).itemsize) * zs
    return KernelSource(name, step.name, "gemm", code, params, grid, (threads, 1, 1), True,
                        bytes_moved=moved,
                        extra={"tile": tile, "tensor_cores": path == "mma",
                               "flops": 2 * plan.m * plan.n * plan.k * zs})


@dataclass(frozen=True)
class TileOperand:
    """How the tile loops read one operand (A: rows x k, B: k x cols) from ``ptr``:
    ``index(row, k)`` is the element index (codes of C expressions); with ``rows`` it is
    read where ``row < rows`` and ``k`` is in range, zero else; ``guarded`` operands
    (``rows`` None) compute -1 outside themselves (a gather: the implicit-gemm
    convolution's im2col).  ``k_minor``: the threads of a tile load step along k first
    (the operand is k-contiguous); ``vec``: the run-time flag of 16-byte loads (8
    elements from a multiple of 8 along k are contiguous and in or out together; the flag
    tests the alignment of ``ptr + vec_base``)."""
    ptr: str
    k_minor: bool
    n: int
    index: Callable[[str, str], str]
    rows: int | None = None
    vec: str | None = None
    vec_base: str = "0"


def _fetch(op: TileOperand, r: str, gk: str, k: int, it: str):
    """(statements, predicate, index) of one element of ``op``."""
    if op.rows is None:
        return [f"const {it} o{r} = {op.index(r, gk)};"], f"o{r} >= 0", f"o{r}"
    return [], f"{r} < {op.rows} && {gk} < {k}", op.index(r, gk)


def emit_tile_product(emit, path, shape, tile: TileConfig, dtype: str, it: str, dm, dn,
                      k, a: TileOperand, b: TileOperand):
    """The tile loops of ``D[dm x dn] = A . B`` (over ``k``) for a block at
    (blockIdx.y, blockIdx.x): shared tiles, the SIMT or mma.sync inner product, then the
    opening of a loop over the thread's accumulators defining ``gi``, ``gj`` (D's row and
    column) and ``r`` (the sum, in the accumulator type).  Returns (the indent of that
    loop's body, the line closing it)."""
    acc = "f64" if dtype == "f64" else "f32"
    ct = CTYPE[acc]
    bm, bn, bk, threads = tile.block_m, tile.block_n, tile.block_k, tile.threads
    a_k_minor, b_k_minor = a.k_minor, b.k_minor
    emit(f"  const {it} m0 = ({it})blockIdx.y * {bm}, n0 = ({it})blockIdx.x * {bn};")
    emit("  const int tid = threadIdx.x;")

    if path == "simt":
        tm, tn = shape
        rt, ct_ = bm // tm, bn // tn          # threads along rows / cols
        emit(f"  __shared__ {ct} sA[{bk}][{bm + 1}];")
        emit(f"  __shared__ {ct} sB[{bk}][{bn + 1}];")
        emit(f"  const int tx = tid % {rt}, ty = tid / {rt};")
        emit(f"  {ct} acc[{tm}][{tn}];")
        emit("#pragma unroll")
        emit(f"  for (int i = 0; i < {tm}; ++i)")
        emit("#pragma unroll")
        emit(f"    for (int j = 0; j < {tn}; ++j) acc[i][j] = {literal(0, acc)};")
        emit(f"  for ({it} k0 = 0; k0 < {k}; k0 += {bk}) {{")
        for op, side, base, rows, k_minor, tile in ((a, "i", "m0", bm, a_k_minor, "sA"),
                                                    (b, "j", "n0", bn, b_k_minor, "sB")):
            # the operand's [bk][rows] tile, walked along its contiguous dimension
            x, kk = (f"t / {bk}", f"t % {bk}") if k_minor else (f"t % {rows}", f"t / {rows}")
            emit(f"    for (int t = tid; t < {rows * bk}; t += {threads}) {{")
            emit(f"      const int {side}{side} = {x}, kk = {kk};")
            emit(f"      const {it} g{side} = {base} + {side}{side}, gk = k0 + kk;")
            _simt_fetch(emit, op, f"g{side}", k, it, ct, dtype)
            emit(f"      {tile}[kk][{side}{side}] = v;")
            emit("    }")
        emit("    __syncthreads();")
        emit(f"    for (int kk = 0; kk < {bk}; ++kk) {{")
        emit(f"      {ct} ra[{tm}], rb[{tn}];")
        emit("#pragma unroll")
        emit(f"      for (int i = 0; i < {tm}; ++i) ra[i] = sA[kk][tx + i * {rt}];")
        emit("#pragma unroll")
        emit(f"      for (int j = 0; j < {tn}; ++j) rb[j] = sB[kk][ty + j * {ct_}];")
        emit("#pragma unroll")
        emit(f"      for (int i = 0; i < {tm}; ++i)")
        emit("#pragma unroll")
        emit(f"        for (int j = 0; j < {tn}; ++j) acc[i][j] += ra[i] * rb[j];")
        emit("    }")
        emit("    __syncthreads();")
        emit("  }")
        emit("#pragma unroll")
        emit(f"  for (int i = 0; i < {tm}; ++i)")
        emit("#pragma unroll")
        emit(f"    for (int j = 0; j < {tn}; ++j) {{")
        emit(f"      const {it} gi = m0 + tx + i * {rt}, gj = n0 + ty + j * {ct_};")
        emit("      const " + ct + " r = acc[i][j];")
        epi_indent = "      "
    else:
        wm, wn = shape
        sm, sn = bm // wm, bn // wn
        mi, ni = sm // 16, sn // 8
        pitch = bk + 8
        stages = _stages(tile)
        emit(f"  __shared__ __align__(16) uint16_t sA[{stages}][{bm}][{pitch}];")
        emit(f"  __shared__ __align__(16) uint16_t sB[{stages}][{bn}][{pitch}];")
        emit("  const int lane = tid & 31, warp = tid >> 5;")
        emit(f"  const int wy = warp / {wn}, wx = warp % {wn};")
        emit("  const int g = lane >> 2, t4 = lane & 3;")
        emit(f"  float acc[{mi}][{ni}][4];")
        emit("#pragma unroll")
        emit(f"  for (int i = 0; i < {mi}; ++i)")
        emit("#pragma unroll")
        emit(f"    for (int j = 0; j < {ni}; ++j)")
        emit("#pragma unroll")
        emit("      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;")
        for op in (a, b):
            if op.vec:
                emit(f"  const bool {op.vec} = (((unsigned long long)({op.ptr} + "
                     f"{op.vec_base})) & 15) == 0;")
        # a ring of ``stages`` k-tiles: 16-byte operands stream in by cp.async while the
        # warps multiply the tile loaded stages - 1 steps before; others are stored
        # straight into their stage
        emit(f"  const int ktiles = (int)(({k} + {bk - 1}) / {bk});")
        emit("  auto load_tile = [&](int st, int kt) {")
        emit(f"    const {it} k0 = ({it})kt * {bk};")
        _mma_tile_load(emit, "A", a, bm, bk, threads, it, k, "sA[st]", "m0")
        _mma_tile_load(emit, "B", b, bn, bk, threads, it, k, "sB[st]", "n0")
        emit("    HLO_CP_COMMIT();")
        emit("  };")
        emit(f"  for (int s = 0; s < {stages - 1}; ++s) {{")
        emit("    if (s < ktiles) load_tile(s, s); else HLO_CP_COMMIT();")
        emit("  }")
        emit("  for (int kt = 0; kt < ktiles; ++kt) {")
        emit(f"    HLO_CP_WAIT({stages - 2});")
        emit("    __syncthreads();")
        emit(f"    if (kt + {stages - 1} < ktiles) load_tile((kt + {stages - 1}) % {stages}, "
             f"kt + {stages - 1}); else HLO_CP_COMMIT();")
        emit(f"    const int st = kt % {stages};")
        emit(f"    for (int ks = 0; ks < {bk}; ks += 16) {{")
        emit(f"      unsigned a[{mi}][4], b[{ni}][2];")
        # ldmatrix row addresses: A's x4 gives (rows 0-7 | 8-15) x (k 0-7 | 8-15) of a
        # 16x16 step, B's x4 two 8-column steps (x2 for an odd last one)
        nbp = (ni + 1) // 2
        emit(f"      const uint16_t* pa[{mi}];")
        emit(f"      const uint16_t* pb[{nbp}];")
        emit("#pragma unroll")
        emit(f"      for (int i = 0; i < {mi}; ++i)")
        emit(f"        pa[i] = &sA[st][wy * {sm} + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8]"
             "[ks + (lane >> 4) * 8];")
        emit("#pragma unroll")
        emit(f"      for (int j = 0; j < {nbp}; ++j)")
        emit(f"        pb[j] = &sB[st][wx * {sn} + j * 16 + (lane & 7) + (lane >> 4) * 8]"
             "[ks + ((lane >> 3) & 1) * 8];")
        emit("#ifdef HLO_SIM")
        emit(_sim_ldmatrix(tile.num_warps, mi, ni))
        emit("#else")
        emit("#pragma unroll")
        emit(f"      for (int i = 0; i < {mi}; ++i)")
        emit("        asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, "
             "[%4];\\n\"")
        emit("            : \"=r\"(a[i][0]), \"=r\"(a[i][1]), \"=r\"(a[i][2]), "
             "\"=r\"(a[i][3])")
        emit("            : \"r\"((unsigned)__cvta_generic_to_shared(pa[i])));")
        emit("#pragma unroll")
        emit(f"      for (int j = 0; j < {ni // 2}; ++j)")
        emit("        asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, "
             "[%4];\\n\"")
        emit("            : \"=r\"(b[2 * j][0]), \"=r\"(b[2 * j][1]), \"=r\"(b[2 * j + 1][0]), "
             "\"=r\"(b[2 * j + 1][1])")
        emit("            : \"r\"((unsigned)__cvta_generic_to_shared(pb[j])));")
        if ni % 2:
            emit("      asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, "
                 "[%2];\\n\"")
            emit(f"          : \"=r\"(b[{ni - 1}][0]), \"=r\"(b[{ni - 1}][1])")
            emit(f"          : \"r\"((unsigned)__cvta_generic_to_shared(pb[{nbp - 1}])));")
        emit("#endif")
        emit("#ifdef HLO_SIM")
        emit(_sim_mma(dtype, tile.num_warps, mi, ni))
        emit("#else")
        emit("#pragma unroll")
        emit(f"      for (int i = 0; i < {mi}; ++i)")
        emit("#pragma unroll")
        emit(f"        for (int j = 0; j < {ni}; ++j)")
        emit("          asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + dtype
             + "." + dtype + ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
             "{%0,%1,%2,%3};\\n\"")
        emit("              : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), \"+f\"(acc[i][j][2]), "
             "\"+f\"(acc[i][j][3])")
        emit("              : \"r\"(a[i][0]), \"r\"(a[i][1]), \"r\"(a[i][2]), \"r\"(a[i][3]), "
             "\"r\"(b[j][0]), \"r\"(b[j][1]));")
        emit("#endif")
        emit("    }")
        emit("  }")
        emit("  HLO_CP_WAIT(0);")
        emit("#pragma unroll")
        emit(f"  for (int i = 0; i < {mi}; ++i)")
        emit("#pragma unroll")
        emit(f"    for (int j = 0; j < {ni}; ++j)")
        emit("#pragma unroll")
        emit("      for (int e = 0; e < 4; ++e) {")
        emit(f"        const {it} gi = m0 + wy * {sm} + i * 16 + g + (e >> 1) * 8;")
        emit(f"        const {it} gj = n0 + wx * {sn} + j * 8 + 2 * t4 + (e & 1);")
        emit("        const float r = acc[i][j][e];")
        epi_indent = "        "
    return epi_indent, ("    }" if path == "simt" else "      }")


def _simt_fetch(emit, op: TileOperand, r: str, k, it: str, ct: str, dtype: str):
    """``v``: one element of ``op`` as the accumulator type (zero outside)."""
    pre, cond, idx = _fetch(op, r, "gk", k, it)
    for line in pre:
        emit("      " + line)
    emit(f"      {ct} v = {literal(0, 'f64' if ct == 'double' else 'f32')};")
    emit(f"      if ({cond}) v = ({ct}){from_storage(dtype, f'{op.ptr}[HLO_CHK({idx}, {op.n})]')};")


# fragment words from shared memory; 16-byte global -> shared copies (cp.async, zero-filled
# when ``ok`` is false) and their groups; cuda-sim copies at once
_LD2 = """#ifndef HLO_LD2
#ifdef HLO_SIM
#define HLO_LD2(p) ((unsigned)(p)[0] | ((unsigned)(p)[1] << 16))
#define HLO_CP16(dst, src, ok) do { *reinterpret_cast<uint4*>(dst) = (ok) ? \\
    *reinterpret_cast<const uint4*>(src) : uint4{0u, 0u, 0u, 0u}; } while (0)
#define HLO_CP_COMMIT() do {} while (0)
#define HLO_CP_WAIT(n) do {} while (0)
#else
#define HLO_LD2(p) (*(const unsigned*)(p))
#define HLO_CP16(dst, src, ok) asm volatile( \\
    "cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: \\
    "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"((ok) ? 16 : 0))
#define HLO_CP_COMMIT() asm volatile("cp.async.commit_group;\\n" ::)
#define HLO_CP_WAIT(n) asm volatile("cp.async.wait_group %0;\\n" :: "n"(n))
#endif
#endif
"""


def _vec_ok(plan, mat, which, k, bk) -> bool:
    """16-byte loads of a k-contiguous 16-bit operand: every row start a multiple of 8
    elements (the base pointer's alignment is checked at run time)."""
    offs = [o[which] for o in plan.outer]
    return (k % 8 == 0 and mat.ld % 8 == 0 and mat.batch_stride % 8 == 0 and bk % 8 == 0
            and all(o % 8 == 0 for o in offs))


def _mma_tile_load(emit, what, op: TileOperand, rows, bk, threads, it, k, smem, origin):
    """One operand's ``rows x block_k`` tile into ``smem[row][k]`` (16-bit bits), zero
    outside the matrix: 16-byte loads when ``op.vec`` (a run-time flag) holds."""
    r = "gi" if what == "A" else "gj"
    ptr, n = op.ptr, op.n
    pre, cond, idx = _fetch(op, r, "gk", k, it)
    body = []
    if op.vec:
        per = bk // 8
        body.append(f"    if ({op.vec}) {{")
        body.append(f"      for (int t = tid; t < {rows * per}; t += {threads}) {{")
        body.append(f"        const int rr = t / {per}, kk = (t % {per}) * 8;")
        body.append(f"        const {it} {r} = {origin} + rr, gk = k0 + kk;")
        body.extend("        " + line for line in pre)
        body.append(f"        const bool ok = {cond};")
        body.append(f"        HLO_CP16(&{smem}[rr][kk], ok ? {ptr} + HLO_CHK("
                    f"{idx}, {n - 7}) : {ptr}, ok);")
        body.append("      }")
        body.append("    } else")
    rr, kk = (f"t / {bk}", f"t % {bk}") if op.k_minor else (f"t % {rows}", f"t / {rows}")
    body.append(f"    for (int t = tid; t < {rows * bk}; t += {threads}) {{")
    body.append(f"      const int rr = {rr}, kk = {kk};")
    body.append(f"      const {it} {r} = {origin} + rr, gk = k0 + kk;")
    body.extend("      " + line for line in pre)
    body.append(f"      {smem}[rr][kk] = ({cond}) ? "
                f"{ptr}[HLO_CHK({idx}, {n})] : (uint16_t)0;")
    body.append("    }")
    for line in body:
        emit(line)


def _sim_ldmatrix(warps: int, mi: int, ni: int) -> str:
    """cuda-sim's ldmatrix: the warp's row addresses through a scratch; matrix q of an
    x4 (x2) is the 8 rows lanes 8q..8q+7 point at, and lane l gets word l % 4 of row
    l / 4 of each."""
    nbp = (ni + 1) // 2
    return f"""      {{
        __shared__ const uint16_t* xp[{warps}][32][{mi + nbp}];
        for (int i = 0; i < {mi}; ++i) xp[warp][lane][i] = pa[i];
        for (int j = 0; j < {nbp}; ++j) xp[warp][lane][{mi} + j] = pb[j];
        __syncwarp();
        const int src = lane >> 2, w = 2 * (lane & 3);
        for (int i = 0; i < {mi}; ++i)
          for (int q = 0; q < 4; ++q) a[i][q] = HLO_LD2(xp[warp][q * 8 + src][i] + w);
        for (int j = 0; j < {ni}; ++j)
          for (int q = 0; q < 2; ++q)
            b[j][q] = HLO_LD2(xp[warp][((j & 1) * 2 + q) * 8 + src][{mi} + j / 2] + w);
        __syncwarp();
      }}"""


def _sim_mma(dtype: str, warps: int, mi: int, ni: int) -> str:
    """cuda-sim's m16n8k16: the warp's fragments through a scratch, each lane summing its
    four accumulator elements as PTX lays them out (A row-major 16x16: register q of lane
    l holds rows l/4 (+8 when q is odd) and columns 2*(l%4) (+8 when q >= 2), two per
    register, low half first; B column-major 16x8: register q of lane l holds column l/4,
    rows 2*(l%4) + 8q; C: element e of lane l at row l/4 + 8*(e/2), column 2*(l%4) + e%2)."""
    cvt = f"hlo_{dtype}_to_f32"
    return f"""      {{
        __shared__ unsigned xa[{warps}][32][{mi}][4];
        __shared__ unsigned xb[{warps}][32][{ni}][2];
        for (int i = 0; i < {mi}; ++i) for (int q = 0; q < 4; ++q) xa[warp][lane][i][q] = a[i][q];
        for (int j = 0; j < {ni}; ++j) for (int q = 0; q < 2; ++q) xb[warp][lane][j][q] = b[j][q];
        __syncwarp();
        for (int i = 0; i < {mi}; ++i)
          for (int j = 0; j < {ni}; ++j)
            for (int e = 0; e < 4; ++e) {{
              const int row = g + (e >> 1) * 8, col = 2 * t4 + (e & 1);
              float s = 0.f;
              for (int kk = 0; kk < 16; ++kk) {{
                const int half = kk & 1, kq = (kk & 7) >> 1, hi = kk >> 3;
                const unsigned wa = xa[warp][(row & 7) * 4 + kq][i][(row >> 3) + 2 * hi];
                const unsigned wb = xb[warp][col * 4 + kq][j][hi];
                s += {cvt}((uint16_t)(wa >> (16 * half))) * {cvt}((uint16_t)(wb >> (16 * half)));
              }}
              acc[i][j][e] += s;
            }}
        __syncwarp();
      }}"""
