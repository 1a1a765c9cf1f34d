// Vectorised f32 transcendentals for the emulator's hot loops (and the
// benchmark's hand-fused floor). The one dispatch point is the vector width
// chosen at compile time below: AVX-512 (16 lanes), AVX2 (8) or SSE (4),
// written with GCC/Clang vector extensions so one source serves every ISA.
// The same polynomial runs in every lane, so results do not depend on n,
// alignment, or how an array is split across threads.
//
// Accuracy (f32, measured by tools/bench/simd_accuracy on every 3rd float
// against double libm; tests/simd_math_test.cc asserts it): exp within 1.02
// ulp (max 1.01 ulp, relative error <= 8.4e-8), log within 0.83 ulp
// (relative error <= 8.2e-8) (Cephes polynomials). Special values follow
// IEEE: exp(NaN) = NaN, exp(-inf) = 0, exp(x > 88.73) = inf, gradual
// underflow to subnormals; log(x < 0) = NaN, log(0) = -inf, log(inf) = inf,
// log(NaN) = NaN, subnormal inputs handled exactly.
//
// Hand-written, not a library: measured against SLEEF 3.5.1 and Highway
// 1.0.3 hwy/contrib/math on the same arrays (tools/bench/simd_bench and
// simd_accuracy; table in docs/ARCHITECTURE.md), no candidate is at least
// as fast and as accurate. SLEEF u10 is slightly more accurate (exp 0.98,
// log 0.62 ulp) but 8-10% slower on AVX-512, ~50% on AVX2, and an
// out-of-line call per vector; SLEEF u35 log is faster but 2.8 ulp;
// Highway's Log is faster on AVX-512 but 0.89 ulp and undefined for 0,
// negatives, inf and NaN, and its Exp returns 0 for NaN.
#ifndef TPUOFF_RUNTIME_CPU_SIMD_MATH_H_
#define TPUOFF_RUNTIME_CPU_SIMD_MATH_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tpuoff::runtime::simd {

#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX2__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif

typedef float VF __attribute__((vector_size(kLanes * 4)));
typedef int32_t VI __attribute__((vector_size(kLanes * 4)));

// "avx512", "avx2" or "sse": the width compiled in.
const char* VectorIsaName();

inline VF Splat(float v) { return VF{} + v; }
inline VI SplatI(int32_t v) { return VI{} + v; }
// Same-size vector casts reinterpret the bits.
inline VF AsF(VI v) { return (VF)v; }
inline VI AsI(VF v) { return (VI)v; }
// mask lanes are all ones or all zeros (a vector comparison result).
inline VF Select(VI mask, VF a, VF b) { return mask ? a : b; }
inline VF Min(VF a, VF b) { return a < b ? a : b; }
inline VF Max(VF a, VF b) { return a > b ? a : b; }

inline VF Load(const float* p) {
  VF v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, VF v) { std::memcpy(p, &v, sizeof(v)); }
// The first n (< kLanes) lanes; the rest are `fill`.
inline VF LoadPartial(const float* p, int64_t n, float fill) {
  float tmp[kLanes];
  for (int i = 0; i < kLanes; ++i) tmp[i] = i < n ? p[i] : fill;
  return Load(tmp);
}
inline void StorePartial(float* p, VF v, int64_t n) {
  float tmp[kLanes];
  Store(tmp, v);
  for (int64_t i = 0; i < n; ++i) p[i] = tmp[i];
}

inline float ReduceAdd(VF v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}
inline float ReduceMax(VF v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// a * b + c, rounded once where the ISA has fused multiply-add (the build's
// -march), else rounded twice. Written out wherever ExpV / LogV multiply
// and add, so their results do not depend on a compiler's contraction
// choices and the loop JIT (runtime/emulator/loop_jit.h) can reproduce them
// bit for bit.
#if defined(__FMA__)
inline constexpr bool kFusedMultiplyAdd = true;
inline VF MulAdd(VF a, VF b, VF c) {
#if defined(__AVX512F__)
  return (VF)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__AVX2__)
  return (VF)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  return (VF)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c);
#endif
}
#else
inline constexpr bool kFusedMultiplyAdd = false;
inline VF MulAdd(VF a, VF b, VF c) { return a * b + c; }
#endif

// Square root of every lane, correctly rounded (the ISA's instruction).
inline VF SqrtV(VF x) {
#if defined(__AVX512F__)
  // (the maskz form: GCC 12's _mm512_sqrt_ps trips -Wmaybe-uninitialized)
  return (VF)_mm512_maskz_sqrt_ps(static_cast<__mmask16>(0xffff), (__m512)x);
#elif defined(__AVX2__)
  return (VF)_mm256_sqrt_ps((__m256)x);
#else
  return (VF)_mm_sqrt_ps((__m128)x);
#endif
}

// Whether every lane of a comparison result is true.
inline bool AllTrue(VI mask) {
#if defined(__AVX512F__)
  return _mm512_cmpneq_epi32_mask((__m512i)mask, _mm512_setzero_si512()) == 0xffff;
#elif defined(__AVX2__)
  return _mm256_movemask_ps((__m256)mask) == 0xff;
#else
  return _mm_movemask_ps((__m128)mask) == 0xf;
#endif
}

// exp's shared part: y = 2^r's polynomial on the reduced argument, n the
// power of two, and whether every lane takes the fast path (below).
struct ExpParts {
  VF y;
  VI ni;
  bool fast;
};

inline ExpParts ExpReduce(VF x) {
  // n = round(x / ln2) with the 1.5 * 2^23 trick; its low bits hold n.
  const VF shifted = MulAdd(x, Splat(1.44269504088896341f), Splat(12582912.0f));
  const VF n = shifted - Splat(12582912.0f);
  const VI ni = AsI(shifted) - SplatI(0x4B400000);
  VF r = MulAdd(-n, Splat(0.693359375f), x);
  r = MulAdd(-n, Splat(-2.12194440e-4f), r);
  VF p = Splat(1.9875691500e-4f);
  p = MulAdd(p, r, Splat(1.3981999507e-3f));
  p = MulAdd(p, r, Splat(8.3334519073e-3f));
  p = MulAdd(p, r, Splat(4.1665795894e-2f));
  p = MulAdd(p, r, Splat(1.6666665459e-1f));
  p = MulAdd(p, r, Splat(5.0000001201e-1f));
  const VF y = MulAdd(p, r * r, r) + Splat(1.0f);
  // y is in [0.7, 1.42]. With n in [-125, 127] in every lane, y * 2^n is a
  // normal float (x in about [-87, 88]), which adding n to y's exponent
  // gives exactly: the same value as the general path below. NaN, the
  // infinities and larger |x| all fall outside (their n is far off).
  const VI biased = ni + 125;
  return {y, ni, AllTrue((biased >= 0) & (biased <= 252))};
}

inline VF ExpFast(const ExpParts& e) { return AsF(AsI(e.y) + (e.ni << 23)); }

inline VF ExpGeneral(VF x, const ExpParts& e) {
  // 2^n as two factors so subnormal results and overflow round once.
  const VI n1 = e.ni >> 1;
  const VI n2 = e.ni - n1;
  VF y = e.y * AsF((n1 + 127) << 23);
  y = y * AsF((n2 + 127) << 23);
  // Outside [-104, 89] n is out of range and y meaningless: exp(-104)
  // already rounds to 0 and exp(89) overflows. A NaN x is the result
  // itself (not whichever NaN the arithmetic above propagated).
  y = Select(x < Splat(-104.0f), Splat(0.0f), y);
  y = Select(x > Splat(89.0f), Splat(__builtin_inff()), y);
  return Select(x != x, x, y);
}

inline VF ExpFinish(VF x, const ExpParts& e) { return e.fast ? ExpFast(e) : ExpGeneral(x, e); }

inline VF ExpV(VF x) { return ExpFinish(x, ExpReduce(x)); }

// ExpV of two vectors stored at y and y + kLanes, the same values, with one
// range test for both: the two polynomial chains stay in one basic block,
// so the CPU overlaps them (a branch per vector keeps compilers from
// interleaving them).
inline void StoreExpV2(VF a, VF b, float* y) {
  const ExpParts pa = ExpReduce(a), pb = ExpReduce(b);
  if (pa.fast && pb.fast) {
    Store(y, ExpFast(pa));
    Store(y + kLanes, ExpFast(pb));
  } else {
    Store(y, ExpFinish(a, pa));
    Store(y + kLanes, ExpFinish(b, pb));
  }
}

inline VF LogV(VF x) {
  const VI nan_in = x != x;
  const VI negative = x < Splat(0.0f);
  const VI zero = x == Splat(0.0f);
  const VI inf = x == Splat(__builtin_inff());
  // Subnormals: scale into the normal range first.
  const VI tiny = x < Splat(1.17549435e-38f);
  VF xs = Select(tiny, x * Splat(8388608.0f), x);
  VI bits = AsI(xs);
  VI e = ((bits >> 23) & 0xff) - 126;
  e = e - (tiny & 23);
  VF m = AsF((bits & 0x807fffff) | 0x3f000000);  // [0.5, 1)
  const VI small = m < Splat(0.707106781186547524f);
  e = e + small;  // small lanes are -1: e - 1
  m = Select(small, m + m, m) - Splat(1.0f);
  VF ef = __builtin_convertvector(e, VF);
  const VF z = m * m;
  VF y = Splat(7.0376836292e-2f);
  y = MulAdd(y, m, Splat(-1.1514610310e-1f));
  y = MulAdd(y, m, Splat(1.1676998740e-1f));
  y = MulAdd(y, m, Splat(-1.2420140846e-1f));
  y = MulAdd(y, m, Splat(1.4249322787e-1f));
  y = MulAdd(y, m, Splat(-1.6668057665e-1f));
  y = MulAdd(y, m, Splat(2.0000714765e-1f));
  y = MulAdd(y, m, Splat(-2.4999993993e-1f));
  y = MulAdd(y, m, Splat(3.3333331174e-1f));
  y = MulAdd(y * m, z, ef * Splat(-2.12194440e-4f));
  y = MulAdd(z, Splat(-0.5f), y);
  VF r = m + y;
  r = MulAdd(ef, Splat(0.693359375f), r);
  r = Select(inf, x, r);
  r = Select(zero, Splat(-__builtin_inff()), r);
  r = Select(negative, Splat(__builtin_nanf("")), r);
  return Select(nan_in, x, r);
}

// tanh: for |x| < 0.625 an odd polynomial x + x^3 P(x^2) (the Cephes
// tanhf coefficients), else 1 - 2 / (exp(2|x|) + 1) with x's sign; within
// 2 ulp (tests/simd_math_test.cc). tanh(+-0) = +-0, tanh(+-inf) = +-1,
// tanh(NaN) = NaN, subnormal x returns x.
inline VF TanhV(VF x) {
  const VI sign = AsI(x) & SplatI(static_cast<int32_t>(0x80000000u));
  const VF ax = AsF(AsI(x) & SplatI(0x7fffffff));
  const VF z = x * x;
  VF p = Splat(-5.70498872745e-3f);
  p = p * z + Splat(2.06390887954e-2f);
  p = p * z + Splat(-5.37397155531e-2f);
  p = p * z + Splat(1.33314422036e-1f);
  p = p * z + Splat(-3.33332819422e-1f);
  const VF small = p * z * x + x;
  // exp overflows to inf for |x| > 44: 2 / inf = 0, the result 1. NaN
  // propagates through exp and the division.
  const VF e = ExpV(ax + ax);
  const VF big = Splat(1.0f) - Splat(2.0f) / (e + Splat(1.0f));
  // x's sign on both (the polynomial loses it for -0).
  return AsF(AsI(Select(ax < Splat(0.625f), small, big)) | sign);
}

// Whole arrays (any n; x and y may alias exactly).
void Exp(const float* x, float* y, int64_t n);
void Tanh(const float* x, float* y, int64_t n);
void Log(const float* x, float* y, int64_t n);
// y[i] = exp(x[i] - shift), the difference rounded to f32 first (as
// Exp of a stored difference would be).
void ExpShifted(const float* x, float shift, float* y, int64_t n);

}  // namespace tpuoff::runtime::simd

#endif  // TPUOFF_RUNTIME_CPU_SIMD_MATH_H_
