"""cuda-sim's emulation header: real barriers, warp-synchronous shuffles and votes,
shared memory per block, atomics, bounds-checked accesses, deadlocks reported."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.backends.cuda.support import require_gxx

KERNELS = r'''
extern "C" __global__ void block_sum(const float* __restrict__ x, float* out, long long n) {
  __shared__ float part[32];
  float acc = 0.f;
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += x[HLO_CHK(i, n)];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  int w = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0) part[w] = acc;
  __syncthreads();
  if (w == 0) {
    acc = l < (blockDim.x + 31) / 32 ? part[l] : 0.f;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (l == 0) atomicAdd(out, acc);
  }
}
// every thread reads what its neighbour wrote before the barrier: wrong without one
extern "C" __global__ void rotate(const int* in, int* out) {
  __shared__ int tile[256];
  tile[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}
extern "C" __global__ void votes(int* out) {
  unsigned b = __ballot_sync(0xffffffffu, threadIdx.x % 3 == 0);
  int any = __any_sync(0xffffffffu, threadIdx.x == 5);
  int all = __all_sync(0xffffffffu, threadIdx.x < 64);
  if (threadIdx.x == 0) { out[0] = (int)b; out[1] = any; out[2] = all; }
}
extern "C" __global__ void oob(float* x, long long n) { long long i = threadIdx.x; x[HLO_CHK(i + 1, n)] = 1.f; }
extern "C" __global__ void divergent_barrier(float* x) {
  if (threadIdx.x < 5) __syncthreads(); else x[0] += __shfl_down_sync(0xffffffffu, 1.f, 1);
}
'''
SIGS = [("block_sum", ["const float*", "float*", "long long"]), ("rotate", ["const int*", "int*"]),
        ("votes", ["int*"]), ("oob", ["float*", "long long"]), ("divergent_barrier", ["float*"])]


@pytest.fixture(scope="module")
def lib():
    require_gxx()
    from hlo_opt.backends.cuda.program import prelude
    from hlo_opt.backends.cuda_sim.compiler import compile_sim
    return compile_sim(prelude() + KERNELS, SIGS)


def ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def test_block_reduction_with_shuffles_and_atomics(lib):
    x = np.random.default_rng(0).random(100_000, dtype=np.float32)
    out = np.zeros(1, np.float32)
    lib.launch("block_sum", (13,), (256,), True, [ptr(x), ptr(out), ctypes.c_longlong(x.size)])
    assert abs(out[0] - x.astype(np.float64).sum()) < 1e-3 * x.size ** 0.5


def test_syncthreads_is_a_barrier(lib):
    x = np.arange(512, dtype=np.int32)
    out = np.zeros_like(x)
    lib.launch("rotate", (2,), (256,), True, [ptr(x), ptr(out)])
    assert (out.reshape(2, 256) == np.roll(x.reshape(2, 256), -1, axis=1)).all()


def test_votes(lib):
    out = np.zeros(3, np.int32)
    lib.launch("votes", (1,), (64,), True, [ptr(out)])
    assert int(np.uint32(out[0])) == sum(1 << i for i in range(32) if i % 3 == 0)
    assert out[1] == 1 and out[2] == 1


def test_out_of_bounds_is_an_error(lib):
    from hlo_opt.backends.cuda_sim.compiler import SimKernelError
    x = np.zeros(32, np.float32)
    with pytest.raises(SimKernelError, match=r"out-of-bounds.*= 32, buffer has 32.*thread \(31"):
        lib.launch("oob", (1,), (32,), False, [ptr(x), ctypes.c_longlong(32)])


def test_divergent_barrier_is_a_deadlock(lib):
    from hlo_opt.backends.cuda_sim.compiler import SimKernelError
    x = np.zeros(1, np.float32)
    with pytest.raises(SimKernelError, match="deadlock"):
        lib.launch("divergent_barrier", (1,), (64,), True, [ptr(x)])
    # the library is usable after a failed launch
    out = np.zeros(3, np.int32)
    lib.launch("votes", (1,), (64,), True, [ptr(out)])
    assert out[2] == 1


def test_barrier_in_a_kernel_declared_barrier_free(lib):
    from hlo_opt.backends.cuda_sim.compiler import SimKernelError
    x = np.arange(256, dtype=np.int32)
    with pytest.raises(SimKernelError, match="barrier-free"):
        lib.launch("rotate", (1,), (256,), False, [ptr(x), ptr(np.zeros_like(x))])
