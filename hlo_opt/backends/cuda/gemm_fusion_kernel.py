"""A gemm fusion (``__triton_gemm``, see ``hlo_opt/codegen/gemm_fusion.py``) as one CUDA
kernel: XLA's Triton gemm in CUDA C++.

Each block computes a ``block_m x block_n`` tile of one batch of the dot.  Per
``block_k`` step the block stages the operand tiles through shared memory, computing each
element of them with the fused *prologue* (the dot operands' value-at-index through the
elemental rules: converts, transposes, broadcasts, scales ... read straight from the
fusion's inputs), then every thread accumulates its ``thread_m x thread_n`` outputs in f32
registers; the fused *epilogue* (the users between the dot and the root) is applied to
each accumulator at the store.  Tile parameters come from the fusion's
``triton_gemm_config`` (XLA's ``TritonGemmConfig``: block_m / block_n / block_k /
num_warps) or XLA's default; they are the autotuner's candidates.

The inner product is SIMT FMA in f32 (no inline PTX), so the same source runs under
``cuda-sim`` and compiles with NVRTC for any ``sm_XX``.
"""
from __future__ import annotations

from ...codegen import index as ix
from ...codegen.elemental import ElementalEmitter
from ...codegen.expr import var
from ...codegen.gemm_fusion import DEFAULT_TILE, analyze, grid_of, tile_config_of
from ...errors import UnsupportedError
from .emitters import KIND_EMITTERS, KernelBlock, KernelSource, c_name
from .renderer import CTYPE, rounded


def _operand_index(shape, roles, names):
    return tuple(names[roles[d]] for d in range(shape.rank))


def emit_gemm_fusion(ke) -> KernelSource:
    """One KernelSource for the gemm fusion of ``ke`` (the KernelEmitter of a plan step of
    kind ``triton_gemm``), tiled by the fusion's ``triton_gemm_config`` or XLA's default;
    UnsupportedError when the fusion is not one it can generate."""
    kernel = ke.k
    tile = tile_config_of(kernel.instruction) or DEFAULT_TILE
    tt = tile.thread_tile()
    if tt is None:
        raise UnsupportedError(f"cuda: tile {tile} does not divide among its threads")
    spec = analyze(kernel.instruction)
    if spec is None or len(kernel.outputs) != 1:
        raise UnsupportedError("cuda: gemm fusion this emitter does not take")
    narrow = ke._narrow()
    dot = spec.dot
    for o in dot.operands:
        if CTYPE.get(o.shape.element_type) != "float":
            raise UnsupportedError(f"cuda: gemm fusion operand type {o.shape.element_type}")
    v = {"b": ix.loop_var("GB", max(spec.batch, 2)), "m": ix.loop_var("GM", max(spec.m, 2)),
         "n": ix.loop_var("GN", max(spec.n, 2)), "k": ix.loop_var("GK", max(spec.k, 2))}
    if spec.batch == 1:
        v["b"] = ix.c(0)
    em = ElementalEmitter(kernel.input_map)

    def block(indent):
        blk = KernelBlock(ke._load, narrow, indent=indent)
        blk.bindings.update({"GB": "GB", "GM": "GM", "GN": "GN", "GK": "GK", "ACC": "ACC"})
        return blk

    lhs, rhs = dot.operands[0], dot.operands[1]
    a_blk, b_blk, e_blk = block(4), block(4), block(3)
    a_code = a_blk.value(em.value(lhs, _operand_index(lhs.shape, spec.lhs_roles, v)))
    b_code = b_blk.value(em.value(rhs, _operand_index(rhs.shape, spec.rhs_roles, v)))
    out_idx = tuple(v[r] for r in spec.out_roles)
    em.bind(dot, out_idx, var("ACC", dot.shape.element_type))
    root = spec.epilogue[-1] if spec.epilogue else dot
    out_code = e_blk.value(em.value(root, out_idx))
    out_shape = kernel.outputs[0].shape
    # trailing bitcasts of the epilogue: the same bytes, stored by the dot's index space
    lin = e_blk.value(ix.linear_index(root.shape, out_idx))
    ke._store(e_blk, 0, lin, out_code)

    name = c_name(kernel.name, ke.names)
    params, decl = ke._signature(name, [0])
    bm, bn, bk, threads = tile.block_m, tile.block_n, tile.block_k, tile.threads
    tm, tn = tt
    acc_t = CTYPE[dot.shape.element_type]
    acc_value = rounded(dot.shape.element_type, "acc[i][j]")
    a_lines = "\n".join(a_blk.lines)
    b_lines = "\n".join(b_blk.lines)
    e_lines = "\n".join(e_blk.lines)
    m, n, k = spec.m, spec.n, spec.k
    code = f"""extern "C" __global__ void __launch_bounds__({threads}) {name}({", ".join(decl)}) {{
  __shared__ float sA[{bk}][{bm + 1}];
  __shared__ float sB[{bk}][{bn + 1}];
  const int tid = threadIdx.x;
  const int tx = tid % {bn // tn}, ty = tid / {bn // tn};
  const int GB = blockIdx.z;
  const int m0 = blockIdx.y * {bm}, n0 = blockIdx.x * {bn};
  (void)GB;
  float acc[{tm}][{tn}];
#pragma unroll
  for (int i = 0; i < {tm}; ++i)
#pragma unroll
    for (int j = 0; j < {tn}; ++j) acc[i][j] = 0.f;
  for (int k0 = 0; k0 < {k}; k0 += {bk}) {{
    for (int t = tid; t < {bm * bk}; t += {threads}) {{
      const int GM = m0 + t / {bk}, GK = k0 + t % {bk};
      float a = 0.f;
      if (GM < {m} && GK < {k}) {{
{a_lines}
        a = {a_code};
      }}
      sA[t % {bk}][t / {bk}] = a;
    }}
    for (int t = tid; t < {bn * bk}; t += {threads}) {{
      const int GN = n0 + t % {bn}, GK = k0 + t / {bn};
      float b = 0.f;
      if (GN < {n} && GK < {k}) {{
{b_lines}
        b = {b_code};
      }}
      sB[t / {bn}][t % {bn}] = b;
    }}
    __syncthreads();
    for (int kk = 0; kk < {bk}; ++kk) {{
      float ra[{tm}], rb[{tn}];
#pragma unroll
      for (int i = 0; i < {tm}; ++i) ra[i] = sA[kk][ty * {tm} + i];
#pragma unroll
      for (int j = 0; j < {tn}; ++j) rb[j] = sB[kk][tx * {tn} + j];
#pragma unroll
      for (int i = 0; i < {tm}; ++i)
#pragma unroll
        for (int j = 0; j < {tn}; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }}
    __syncthreads();
  }}
  for (int i = 0; i < {tm}; ++i) {{
    for (int j = 0; j < {tn}; ++j) {{
      const int GM = m0 + ty * {tm} + i, GN = n0 + tx * {tn} + j;
      if (GM < {m} && GN < {n}) {{
        const {acc_t} ACC = {acc_value};
{e_lines}
      }}
    }}
  }}
}}
"""
    grid = grid_of(spec, tile)
    moved = sum(x.shape.byte_size() for x in kernel.inputs) + out_shape.byte_size()
    ks = KernelSource(name, kernel.name, "triton_gemm", code, params, grid, (threads, 1, 1),
                      True, moved)
    ks.extra["tile"] = tile
    return ks


KIND_EMITTERS["triton_gemm"] = emit_gemm_fusion
