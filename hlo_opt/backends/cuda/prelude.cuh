// hlo-opt's kernel prelude: compiled by NVRTC for the device and by g++ (after
// cuda_sim/emu.h) for cuda-sim, so it uses no CUDA header.  16-bit and 8-bit floats are
// stored as their bits and computed in float, rounded after every operation (as XLA's
// elemental emitter does); the conversions are exact bit manipulations.
#ifndef HLO_PRELUDE
#define HLO_PRELUDE
#ifndef HLO_SIM
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define HLO_CHK(i, n) (i)
#define HLO_NAN_F __int_as_float(0x7fffffff)
#else
#define HLO_NAN_F __int_as_float(0x7fffffff)
#endif
#define HD __device__ __forceinline__

// ---- bf16 / f16 / f8 as bits ------------------------------------------------------------
HD float hlo_bf16_to_f32(uint16_t b) { return __uint_as_float(((uint32_t)b) << 16); }
HD uint16_t hlo_f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (uint16_t)(u >> 16);
}
HD float hlo_round_bf16(float f) { return hlo_bf16_to_f32(hlo_f32_to_bf16(f)); }

HD float hlo_f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return __uint_as_float(s | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f;  // 2^-24
    return (s ? -v : v);
  }
  return __uint_as_float(s | ((e + 112) << 23) | (m << 13));
}
HD uint16_t hlo_f32_to_f16(float f) {
  uint32_t u = __float_as_uint(f), s = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // subnormal half (or zero): value / 2^-24, rounded to even
    float v = __uint_as_float(a) * 16777216.0f;
    float r = rintf(v);
    return (uint16_t)(s | (uint32_t)r);
  }
  uint32_t e = (a >> 23) - 112, m = a & 0x7fffffu;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(s | h);
}
HD float hlo_round_f16(float f) { return hlo_f16_to_f32(hlo_f32_to_f16(f)); }

// f8e4m3fn (no inf, NaN = S.1111.111, max 448) and f8e5m2 (IEEE-like)
HD float hlo_f8e4m3fn_to_f32(uint8_t b) {
  uint32_t s = (b & 0x80u) << 24, e = (b >> 3) & 0xf, m = b & 7;
  if (e == 0xf && m == 7) return HLO_NAN_F;
  if (e == 0) { float v = (float)m * 0.001953125f; return s ? -v : v; }  // m * 2^-9
  return __uint_as_float(s | ((e + 120) << 23) | (m << 20));
}
HD uint8_t hlo_f32_to_f8e4m3fn(float f) {
  uint32_t u = __float_as_uint(f), s = (u >> 24) & 0x80u;
  float a = fabsf(f);
  if (a != a) return (uint8_t)(s | 0x7f);
  if (a >= 464.0f) return (uint8_t)(s | 0x7f);  // beyond max after rounding: NaN (no inf)
  if (a < 0.015625f) {  // subnormal: units of 2^-9
    return (uint8_t)(s | (uint32_t)rintf(a * 512.0f));
  }
  uint32_t au = __float_as_uint(a), e = (au >> 23) - 120, m = au & 0x7fffffu;
  uint32_t r = (e << 3) | (m >> 20), rest = m & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (r & 1u))) ++r;
  return (uint8_t)(s | r);
}
HD float hlo_f8e5m2_to_f32(uint8_t b) { return hlo_f16_to_f32((uint16_t)(b << 8)); }
HD uint8_t hlo_f32_to_f8e5m2(float f) {
  uint16_t h = hlo_f32_to_f16(f);
  if ((h & 0x7fffu) > 0x7c00u) return (uint8_t)((h >> 8) | 0x2);
  uint32_t r = h >> 8, rest = h & 0xffu;
  if (rest > 0x80u || (rest == 0x80u && (r & 1u))) ++r;
  return (uint8_t)r;
}

template <class T> struct hlo_uns;
template <> struct hlo_uns<signed char> { typedef unsigned char u; typedef signed char s; };
template <> struct hlo_uns<unsigned char> { typedef unsigned char u; typedef signed char s; };
template <> struct hlo_uns<short> { typedef unsigned short u; typedef short s; };
template <> struct hlo_uns<unsigned short> { typedef unsigned short u; typedef short s; };
template <> struct hlo_uns<int> { typedef unsigned u; typedef int s; };
template <> struct hlo_uns<unsigned> { typedef unsigned u; typedef int s; };
template <> struct hlo_uns<long long> { typedef unsigned long long u; typedef long long s; };
template <> struct hlo_uns<unsigned long long> { typedef unsigned long long u; typedef long long s; };
template <> struct hlo_uns<long> { typedef unsigned long u; typedef long s; };
template <> struct hlo_uns<unsigned long> { typedef unsigned long u; typedef long s; };

// ---- HLO semantics the C operators lack -------------------------------------------------
template <class T> HD T hlo_fmax(T a, T b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <class T> HD T hlo_fmin(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
template <class T> HD T hlo_imax(T a, T b) { return a > b ? a : b; }
template <class T> HD T hlo_imin(T a, T b) { return a < b ? a : b; }
template <class T> HD T hlo_sdiv(T a, T b) {
  if (b == 0) return (T)-1;
  if (b == (T)-1) return (T)(0 - (typename hlo_uns<T>::u)a);  // MIN / -1 = MIN
  return a / b;
}
template <class T> HD T hlo_srem(T a, T b) {
  if (b == 0) return a;
  if (b == (T)-1) return 0;
  return a % b;
}
template <class T> HD T hlo_udiv(T a, T b) { return b == 0 ? (T)~(T)0 : a / b; }
template <class T> HD T hlo_urem(T a, T b) { return b == 0 ? a : a % b; }
template <class T> HD T hlo_shl(T a, T b, int bits) {
  typedef typename hlo_uns<T>::u U;
  return (U)b >= (U)bits ? (T)0 : (T)((U)a << (U)b);
}
template <class T> HD T hlo_shr_logical(T a, T b, int bits) {
  typedef typename hlo_uns<T>::u U;
  return (U)b >= (U)bits ? (T)0 : (T)((U)a >> (U)b);
}
template <class T> HD T hlo_shr_arith(T a, T b, int bits) {
  typedef typename hlo_uns<T>::u U;
  typedef typename hlo_uns<T>::s S;
  return (T)((S)a >> ((U)b >= (U)bits ? (U)(bits - 1) : (U)b));
}
template <class T> HD T hlo_sign(T x) { return x != x ? x : (x > 0 ? (T)1 : (x < 0 ? (T)-1 : x)); }
template <class T> HD T hlo_isign(T x) { return (T)((x > 0) - (x < 0)); }
template <class To, class From> HD To hlo_f2i(From x, To lo, To hi) {
  // XLA: NaN -> 0, saturate at the integer range
  if (x != x) return (To)0;
  if (x <= (From)lo) return lo;
  if (x >= (From)hi) return hi;
  return (To)x;
}
HD float hlo_round_afz(float x) { return roundf(x); }
HD double hlo_round_afz(double x) { return round(x); }
HD float hlo_logistic(float x) { return 1.0f / (1.0f + expf(-x)); }
HD double hlo_logistic(double x) { return 1.0 / (1.0 + exp(-x)); }
HD int32_t hlo_total_key(float x) {  // TOTALORDER compares these as ints
  int32_t i = __float_as_int(x);
  return i < 0 ? (int32_t)(i ^ 0x7fffffff) : i;
}
HD int64_t hlo_total_key(double x) {
  int64_t i = __double_as_longlong(x);
  return i < 0 ? (int64_t)(i ^ 0x7fffffffffffffffLL) : i;
}
template <class T> HD T hlo_ipow(T b, T e) {  // XLA: integer power, negative exponent -> 0 (1 for b == 1, +-1 for -1)
  if (e < 0) return b == 1 ? (T)1 : (b == (T)-1 ? ((e & 1) ? (T)-1 : (T)1) : (T)0);
  T r = 1;
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
template <class T> HD T hlo_popcnt(T x) {
  return (T)(sizeof(T) == 8 ? __popcll((unsigned long long)x) : __popc((unsigned)(x) & (unsigned)(sizeof(T) == 4 ? 0xffffffffu : ((1u << (8 * sizeof(T))) - 1))));
}
template <class T> HD T hlo_clz(T x) {
  if (sizeof(T) == 8) return (T)__clzll((long long)x);
  return (T)(__clz((int)((unsigned)(x) & (unsigned)(sizeof(T) == 4 ? 0xffffffffu : ((1u << (8 * sizeof(T))) - 1)))) - (32 - 8 * (int)sizeof(T)));
}
template <class T, class U> HD T hlo_bitcast(U x) {
  static_assert(sizeof(T) == sizeof(U), "bitcast width");
  T r;
  memcpy(&r, &x, sizeof(T));
  return r;
}
HD float hlo_reduce_precision_f32(float x, int ebits, int mbits) {  // XLA's algorithm
  uint32_t b = __float_as_uint(x);
  if (mbits < 23) {
    uint32_t last = 1u << (23 - mbits), bias = (last >> 1) - 1;
    b = (b + ((b & last) >> (23 - mbits)) + bias) & ~(last - 1);
  }
  if (ebits < 8) {
    uint32_t emask = 0x7f800000u, e = b & emask;
    int rb = (1 << (ebits - 1)) - 1;
    uint32_t sz = b & 0x80000000u;
    if (e > ((uint32_t)(127 + rb) << 23)) b = sz | emask;
    else if (e <= ((uint32_t)(127 - rb) << 23)) b = sz;
  }
  float r = __uint_as_float(b);
  if (x != x) return mbits > 0 ? x : __uint_as_float((__float_as_uint(x) & 0x80000000u) | 0x7f800000u);
  return r;
}
HD double hlo_reduce_precision_f64(double x, int ebits, int mbits) {
  uint64_t b = (uint64_t)__double_as_longlong(x);
  if (mbits < 52) {
    uint64_t last = 1ull << (52 - mbits), bias = (last >> 1) - 1;
    b = (b + ((b & last) >> (52 - mbits)) + bias) & ~(last - 1);
  }
  if (ebits < 11) {
    uint64_t emask = 0x7ff0000000000000ull, e = b & emask;
    long long rb = (1ll << (ebits - 1)) - 1;
    uint64_t sz = b & 0x8000000000000000ull;
    if (e > ((uint64_t)(1023 + rb) << 52)) b = sz | emask;
    else if (e <= ((uint64_t)(1023 - rb) << 52)) b = sz;
  }
  if (x != x) return mbits > 0 ? x : __longlong_as_double((long long)((((uint64_t)__double_as_longlong(x)) & 0x8000000000000000ull) | 0x7ff0000000000000ull));
  return __longlong_as_double((long long)b);
}

// warp shuffles of any register type (narrow ints and bool travel as int)
template <class T> HD T hlo_shfl_xor(T v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
HD bool hlo_shfl_xor(bool v, int o) { return __shfl_xor_sync(0xffffffffu, (int)v, o) != 0; }
HD int8_t hlo_shfl_xor(int8_t v, int o) { return (int8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
HD uint8_t hlo_shfl_xor(uint8_t v, int o) { return (uint8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
HD int16_t hlo_shfl_xor(int16_t v, int o) { return (int16_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
HD uint16_t hlo_shfl_xor(uint16_t v, int o) { return (uint16_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
// float max/min as compare-and-swap loops (scatter combiners; NaN propagates as in HLO)
HD void hlo_atomic_fmax(float* p, float v) {
  unsigned* a = (unsigned*)p;
  unsigned old = *a, assumed;
  do {
    assumed = old;
    unsigned nv = __float_as_uint(hlo_fmax<float>(__uint_as_float(assumed), v));
    if (nv == assumed) break;
    old = atomicCAS(a, assumed, nv);
  } while (old != assumed);
}
HD void hlo_atomic_fmin(float* p, float v) {
  unsigned* a = (unsigned*)p;
  unsigned old = *a, assumed;
  do {
    assumed = old;
    unsigned nv = __float_as_uint(hlo_fmin<float>(__uint_as_float(assumed), v));
    if (nv == assumed) break;
    old = atomicCAS(a, assumed, nv);
  } while (old != assumed);
}
HD void hlo_atomic_fmax(double* p, double v) {
  unsigned long long* a = (unsigned long long*)p;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    unsigned long long nv = (unsigned long long)__double_as_longlong(
        hlo_fmax<double>(__longlong_as_double((long long)assumed), v));
    if (nv == assumed) break;
    old = atomicCAS(a, assumed, nv);
  } while (old != assumed);
}
HD void hlo_atomic_fmin(double* p, double v) {
  unsigned long long* a = (unsigned long long*)p;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    unsigned long long nv = (unsigned long long)__double_as_longlong(
        hlo_fmin<double>(__longlong_as_double((long long)assumed), v));
    if (nv == assumed) break;
    old = atomicCAS(a, assumed, nv);
  } while (old != assumed);
}
#endif  // HLO_PRELUDE
