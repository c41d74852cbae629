// cuda-sim: just enough of CUDA C++ for the kernels hlo-opt generates to compile with a
// host C++ compiler (g++ -std=c++20) and run on the CPU with CUDA's semantics.
//
//  * threads of a block are fibers (ucontext) run by one OS thread: __syncthreads is a real
//    barrier, __shfl_*_sync / votes are warp-synchronous (a warp barrier around the exchange);
//    kernels the renderer declares barrier-free run their threads as plain calls (fast path);
//  * __shared__ is `static thread_local`: one copy per worker, i.e. per block in flight;
//  * atomics are std::atomic_ref operations;
//  * HLO_CHK(i, n) (the renderer wraps every buffer index in it) fails the launch with the
//    kernel, block, thread and index when EMU_DEBUG is set; an error inside a kernel stops
//    the launch and is returned to the caller (emu_last_error()), never silent garbage.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __constant__ static const
#define __ldg(p) (*(p))
#define HLO_SIM 1

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3() = default;
  dim3(unsigned a, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };

namespace emu {

enum State { READY, WAIT_BLOCK, WAIT_WARP, DONE };

#if defined(__x86_64__)
// A 6-register context switch (the SysV callee-saved set): ~20x cheaper than swapcontext,
// which also saves the signal mask with a system call.
extern "C" void emu_switch(void** save_sp, void* new_sp);
asm(R"(
.text
.globl emu_switch
.hidden emu_switch
.type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size emu_switch, .-emu_switch
)");
#define EMU_ASM_SWITCH 1
#endif

struct Fiber {
  ucontext_t ctx;
  void* sp = nullptr;
  char* stack = nullptr;  // malloc'd once: pages are touched only as the fiber uses them
  size_t stack_size = 0;
  uint3 tid;
  unsigned linear = 0;
  State state = READY;
};

struct Block {
  dim3 grid, block;
  uint3 bid;
  std::vector<Fiber> fibers;
  std::vector<uint64_t> slots;  // one exchange slot per thread (shuffles, votes)
  unsigned nthreads = 0;
  bool fibered = false;
  ucontext_t sched;
  void* sched_sp = nullptr;
};

inline thread_local Block* cur_block = nullptr;
inline thread_local Fiber* cur_fiber = nullptr;
inline thread_local Fiber direct_fiber;  // the thread being run as a plain call
inline thread_local const char* cur_kernel = "";
inline char error_text[1024] = {0};
inline std::atomic<int> error_flag{0};
inline thread_local std::function<void()>* cur_body = nullptr;

[[noreturn]] void fail_now();

inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char* fmt, ...) {
  if (!error_flag.exchange(1)) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    Block* b = cur_block;
    Fiber* f = cur_fiber;
    if (b && f)
      snprintf(error_text, sizeof error_text, "%s: %s at block (%u,%u,%u) thread (%u,%u,%u)",
               cur_kernel, msg, b->bid.x, b->bid.y, b->bid.z, f->tid.x, f->tid.y, f->tid.z);
    else
      snprintf(error_text, sizeof error_text, "%s: %s", cur_kernel, msg);
  }
  fail_now();
}

struct Abort {};

[[noreturn]] inline void fail_now() {
  Block* b = cur_block;
  if (b && b->fibered) {
    cur_fiber->state = DONE;
#ifdef EMU_ASM_SWITCH
    emu_switch(&cur_fiber->sp, b->sched_sp);  // never resumed
#else
    setcontext(&b->sched);  // never returns; the fiber's stack is dropped with the block
#endif
  }
  throw Abort{};
}

inline void yield(State s) {
  Block* b = cur_block;
  if (!b->fibered)
    fail("a barrier or warp collective in a kernel launched as barrier-free");
  Fiber* f = cur_fiber;
  f->state = s;
#ifdef EMU_ASM_SWITCH
  emu_switch(&f->sp, b->sched_sp);
#else
  swapcontext(&f->ctx, &b->sched);
#endif
}

inline void fiber_entry() {
  (*cur_body)();
  cur_fiber->state = DONE;
#ifdef EMU_ASM_SWITCH
  emu_switch(&cur_fiber->sp, cur_block->sched_sp);  // never resumed
#endif
  // (ucontext) returning switches to uc_link (the scheduler)
}

// Run every thread of the block; returns false when the launch failed.
inline bool run_block(Block& b, std::function<void()>& body) {
  cur_block = &b;
  cur_body = &body;
  if (!b.fibered) {
    cur_fiber = &direct_fiber;
    for (unsigned z = 0; z < b.block.z; ++z)
      for (unsigned y = 0; y < b.block.y; ++y)
        for (unsigned x = 0; x < b.block.x; ++x) {
          direct_fiber.tid = {x, y, z};
          try {
            body();
          } catch (Abort&) {
            return false;
          }
        }
    return true;
  }
  unsigned n = b.nthreads;
  if (b.fibers.size() != n) {
    for (auto& f : b.fibers) std::free(f.stack);
    b.fibers = std::vector<Fiber>(n);
    for (auto& f : b.fibers) {
      f.stack_size = 256 * 1024;
      f.stack = (char*)std::malloc(f.stack_size);
    }
  }
  b.slots.assign(n, 0);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = b.fibers[i];
    f.linear = i;
    f.tid = {i % b.block.x, (i / b.block.x) % b.block.y, i / (b.block.x * b.block.y)};
    f.state = READY;
#ifdef EMU_ASM_SWITCH
    {
      uintptr_t top = ((uintptr_t)f.stack + f.stack_size) & ~(uintptr_t)15;
      void** sp = (void**)(top - 64);
      for (int r = 0; r < 6; ++r) sp[r] = nullptr;  // r15 r14 r13 r12 rbx rbp
      sp[6] = (void*)&fiber_entry;                    // "return" address
      f.sp = sp;
    }
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = f.stack_size;
    f.ctx.uc_link = &b.sched;
    makecontext(&f.ctx, (void (*)())fiber_entry, 0);
#endif
  }
  for (;;) {
    bool ran = false;
    for (auto& f : b.fibers) {
      if (f.state != READY) continue;
      ran = true;
      cur_fiber = &f;
#ifdef EMU_ASM_SWITCH
      emu_switch(&b.sched_sp, f.sp);
#else
      swapcontext(&b.sched, &f.ctx);
#endif
      if (error_flag.load()) return false;
    }
    // release warps whose live lanes all wait at a warp collective
    bool released = false;
    unsigned live = 0, at_block = 0;
    for (unsigned w = 0; w * 32 < n; ++w) {
      unsigned wl = 0, ww = 0;
      for (unsigned i = w * 32; i < std::min(n, w * 32 + 32); ++i) {
        State s = b.fibers[i].state;
        if (s != DONE) ++wl;
        if (s == WAIT_WARP) ++ww;
      }
      if (wl && ww == wl) {
        for (unsigned i = w * 32; i < std::min(n, w * 32 + 32); ++i)
          if (b.fibers[i].state == WAIT_WARP) b.fibers[i].state = READY;
        released = true;
      }
    }
    for (auto& f : b.fibers) {
      if (f.state != DONE) ++live;
      if (f.state == WAIT_BLOCK) ++at_block;
    }
    if (live == 0) return true;
    if (!released && live == at_block) {
      for (auto& f : b.fibers) if (f.state == WAIT_BLOCK) f.state = READY;
      released = true;
    }
    if (!ran && !released) {
      cur_fiber = nullptr;
      snprintf(error_text, sizeof error_text,
               "%s: deadlock at block (%u,%u,%u): threads wait at different barriers "
               "(__syncthreads in divergent code, or a warp collective some lanes skip)",
               cur_kernel, b.bid.x, b.bid.y, b.bid.z);
      error_flag = 1;
      return false;
    }
  }
}

// Launch `body` (the kernel call with its arguments bound) on grid x block.
inline int launch(const char* name, dim3 grid, dim3 block, bool fibered,
                  std::function<void()> body) {
  error_flag = 0;
  error_text[0] = 0;
  cur_kernel = name;
  unsigned nthreads = block.x * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024) {
    snprintf(error_text, sizeof error_text, "%s: bad block size %u", name, nthreads);
    return 1;
  }
  thread_local Block b;
  b.grid = grid;
  b.block = block;
  b.nthreads = nthreads;
  b.fibered = fibered;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.bid = {x, y, z};
        if (!run_block(b, body)) {
          cur_block = nullptr;
          return 1;
        }
      }
  cur_block = nullptr;
  return 0;
}

inline unsigned lane() { return cur_fiber->linear % 32; }

template <class T>
inline T exchange(T v, int src_lane, bool valid) {
  Block* b = cur_block;
  Fiber* f = cur_fiber;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  b->slots[f->linear] = bits;
  yield(WAIT_WARP);
  T r = v;
  unsigned src = (f->linear / 32) * 32 + (unsigned)src_lane;
  if (valid && src < b->nthreads && b->fibers[src].state != DONE) {
    uint64_t got = b->slots[src];
    std::memcpy(&r, &got, sizeof(T));
  }
  yield(WAIT_WARP);
  return r;
}

inline unsigned vote(bool p) {
  Block* b = cur_block;
  Fiber* f = cur_fiber;
  b->slots[f->linear] = p ? 1 : 0;
  yield(WAIT_WARP);
  unsigned base = (f->linear / 32) * 32, m = 0;
  for (unsigned i = 0; i < 32 && base + i < b->nthreads; ++i)
    if (b->fibers[base + i].state != DONE && b->slots[base + i]) m |= 1u << i;
  yield(WAIT_WARP);
  return m;
}

}  // namespace emu

#define threadIdx (emu::cur_fiber->tid)
#define blockIdx (emu::cur_block->bid)
#define blockDim (emu::cur_block->block)
#define gridDim (emu::cur_block->grid)
static constexpr int warpSize = 32;

inline void __syncthreads() { emu::yield(emu::WAIT_BLOCK); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::yield(emu::WAIT_WARP); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() {}

template <class T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
  unsigned l = emu::lane();
  return emu::exchange(v, (int)((l / width) * width + (src % width)), true);
}
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
  unsigned l = emu::lane();
  bool ok = (l % width) + d < (unsigned)width;
  return emu::exchange(v, (int)(l + d), ok);
}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
  unsigned l = emu::lane();
  bool ok = (l % width) >= d;
  return emu::exchange(v, (int)(l - d), ok);
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
  unsigned l = emu::lane();
  unsigned s = l ^ (unsigned)m;
  bool ok = (s / width) == (l / width);
  return emu::exchange(v, (int)s, ok);
}
inline unsigned __ballot_sync(unsigned, int p) { return emu::vote(p != 0); }
inline int __any_sync(unsigned, int p) { return emu::vote(p != 0) != 0; }
inline int __all_sync(unsigned m, int p) {
  unsigned live = emu::vote(true);
  return (emu::vote(p != 0) & live) == live;
}

template <class T> inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> inline T atomicSub(T* p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T> inline T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> inline T atomicCAS(T* p, T cmp, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(cmp, v);
  return cmp;
}
template <class T> inline T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <class T> inline T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <class T> inline T atomicOr(T* p, T v) { return std::atomic_ref<T>(*p).fetch_or(v); }
template <class T> inline T atomicAnd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_and(v); }

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
inline long long __double_as_longlong(double f) { long long i; std::memcpy(&i, &f, 8); return i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
using std::max;
using std::min;
using std::isfinite;
using std::isinf;
using std::isnan;

#define HLO_CHK(i, n) (emu_check_index((long long)(i), (long long)(n), #i))
inline long long emu_check_index(long long i, long long n, const char* what) {
#ifdef EMU_DEBUG
  if (i < 0 || i >= n) emu::fail("out-of-bounds access: index %s = %lld, buffer has %lld elements", what, i, n);
#else
  (void)n; (void)what;
#endif
  return i;
}

extern "C" const char* emu_last_error() { return emu::error_text; }

// CUDA's vector types (the loop emitter's 4-element loads and stores)
#define EMU_VEC(T, N, A) struct alignas(A) N##2 { T x, y; }; struct alignas(A * 2) N##4 { T x, y, z, w; };
EMU_VEC(unsigned char, uchar, 2)
EMU_VEC(unsigned short, ushort, 4)
EMU_VEC(unsigned int, uint, 8)
EMU_VEC(float, float, 8)
EMU_VEC(int, int, 8)
#undef EMU_VEC
inline float2 make_float2(float a, float b) { return float2{a, b}; }
