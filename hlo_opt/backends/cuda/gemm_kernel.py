"""A hand-tuned tensor-core GEMM, compiled by NVRTC: the device check's bf16 TFLOP/s
benchmark (the gemm thunks' own kernel, for any plan, is ``gemm_emitter.py``).

``C[M, N] = A[M, K] . B[N, K]^T`` (both operands K-contiguous, "TN"), f16 or bf16 in,
f32 accumulate, C in f32 or the input type.  A 128x128x32 block tile, 8 warps of 64x32,
3-stage ``cp.async`` pipeline into XOR-swizzled shared memory, ``ldmatrix`` fragments and
``mma.sync.m16n8k16``.  M and N must be multiples of 128 and K of 32 (the caller pads or
falls back).  Needs sm_80 or newer; cuda-sim cannot run its inline PTX.
"""
from __future__ import annotations

BM, BN, BK, STAGES, THREADS = 128, 128, 32, 3, 256

_TEMPLATE = r"""
extern "C" __global__ void __launch_bounds__(256) NAME(const uint16_t* __restrict__ A,
    const uint16_t* __restrict__ B, OUT_T* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(128) uint16_t sA[3][128 * 32];
  __shared__ __align__(128) uint16_t sB[3][128 * 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;            // 2 x 4 warps, 64 x 32 each
  const int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
  const int ktiles = K / 32;
  // each thread copies 2 16-byte chunks of A and 2 of B per stage
  auto load_stage = [&](int stage, int kt) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int idx = tid + c * 256, row = idx >> 2, ch = idx & 3;
      int sw = ch ^ ((row >> 1) & 3);
      const uint16_t* ga = A + (size_t)(bm + row) * K + kt * 32 + ch * 8;
      const uint16_t* gb = B + (size_t)(bn + row) * K + kt * 32 + ch * 8;
      unsigned sa = (unsigned)__cvta_generic_to_shared(&sA[stage][row * 32 + sw * 8]);
      unsigned sb = (unsigned)__cvta_generic_to_shared(&sB[stage][row * 32 + sw * 8]);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa), "l"(ga));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb), "l"(gb));
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    if (s < ktiles) load_stage(s, s); else asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    asm volatile("cp.async.wait_group 1;\n" ::);
    __syncthreads();
    if (kt + 2 < ktiles) load_stage((kt + 2) % 3, kt + 2);
    else asm volatile("cp.async.commit_group;\n" ::);
    const int st = kt % 3;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {       // two k16 steps per 32-wide tile
      unsigned a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int row = wm * 64 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        int ch = kk * 2 + (lane >> 4);
        int sw = ch ^ ((row >> 1) & 3);
        unsigned addr = (unsigned)__cvta_generic_to_shared(&sA[st][row * 32 + sw * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3]) : "r"(addr));
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        int row = wn * 32 + j * 16 + (lane & 7) + (lane >> 4) * 8;
        int ch = kk * 2 + ((lane >> 3) & 1);
        int sw = ch ^ ((row >> 1) & 3);
        unsigned addr = (unsigned)__cvta_generic_to_shared(&sB[st][row * 32 + sw * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b[2 * j][0]), "=r"(b[2 * j][1]), "=r"(b[2 * j + 1][0]),
                       "=r"(b[2 * j + 1][1]) : "r"(addr));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.DT.DT.f32 {%0,%1,%2,%3}, "
              "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]),
                "r"(b[j][0]), "r"(b[j][1]));
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r0 = bm + wm * 64 + i * 16 + (lane >> 2);
      int c0 = bn + wn * 32 + j * 8 + (lane & 3) * 2;
      STORE(r0, c0, acc[i][j][0], acc[i][j][1]);
      STORE(r0 + 8, c0, acc[i][j][2], acc[i][j][3]);
    }
}
"""

_STORE_F32 = ("#define STORE(r, c, x, y) do { *(float2*)&C[(size_t)(r) * N + (c)] = "
              "make_float2((x), (y)); } while (0)\n")
_STORE_16 = ("#define STORE(r, c, x, y) do { C[(size_t)(r) * N + (c)] = CVT(x); "
             "C[(size_t)(r) * N + (c) + 1] = CVT(y); } while (0)\n")


def gemm_source(name: str = "hlo_gemm_bf16", dtype: str = "bf16", out: str = "f32") -> str:
    """CUDA C++ of one gemm kernel (needs the prelude before it)."""
    dt = {"bf16": "bf16", "f16": "f16"}[dtype]
    if out == "f32":
        head, out_t = _STORE_F32, "float"
    else:
        head = _STORE_16.replace("CVT", f"hlo_f32_to_{out}")
        out_t = "uint16_t"
    body = (_TEMPLATE.replace("NAME", name).replace("OUT_T", out_t).replace("DT", dt))
    return head + body + "#undef STORE\n"


def gemm_launch(m: int, n: int, k: int):
    """(grid, block) for the kernel; raises ValueError when the sizes do not tile."""
    if m % BM or n % BN or k % BK:
        raise ValueError(f"gemm {m}x{n}x{k} does not tile by {BM}x{BN}x{BK}")
    return (n // BN, m // BM, 1), (THREADS, 1, 1)
