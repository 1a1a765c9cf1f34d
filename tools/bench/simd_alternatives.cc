#include "tools/bench/simd_alternatives.h"

#include <immintrin.h>
#include <sleef.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

namespace tpuoff::bench {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

#if defined(__AVX512F__)
constexpr int kSleefLanes = 16;
using SleefVec = __m512;
inline SleefVec SleefLoad(const float* p) { return _mm512_loadu_ps(p); }
inline void SleefStore(float* p, SleefVec v) { _mm512_storeu_ps(p, v); }
#define TPUOFF_SLEEF(name) Sleef_##name##f16_u10avx512f
#define TPUOFF_SLEEF35(name) Sleef_##name##f16_u35avx512f
constexpr const char* kSleefIsa = "avx512f";
#elif defined(__AVX2__)
constexpr int kSleefLanes = 8;
using SleefVec = __m256;
inline SleefVec SleefLoad(const float* p) { return _mm256_loadu_ps(p); }
inline void SleefStore(float* p, SleefVec v) { _mm256_storeu_ps(p, v); }
#define TPUOFF_SLEEF(name) Sleef_##name##f8_u10avx2
#define TPUOFF_SLEEF35(name) Sleef_##name##f8_u35avx2
constexpr const char* kSleefIsa = "avx2";
#else
constexpr int kSleefLanes = 4;
using SleefVec = __m128;
inline SleefVec SleefLoad(const float* p) { return _mm_loadu_ps(p); }
inline void SleefStore(float* p, SleefVec v) { _mm_storeu_ps(p, v); }
#define TPUOFF_SLEEF(name) Sleef_##name##f4_u10sse2
#define TPUOFF_SLEEF35(name) Sleef_##name##f4_u35sse2
constexpr const char* kSleefIsa = "sse2";
#endif

// Whole vectors in place, then the tail through a padded buffer (filled with
// 1, valid for both functions), as runtime/cpu/simd_math.cc does.
template <int kLanes, typename VecFn>
inline void ApplyArray(const float* x, float* y, int64_t n, VecFn fn) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) fn(x + i, y + i);
  if (i < n) {
    float in[kLanes], out[kLanes];
    std::fill(in, in + kLanes, 1.0f);
    std::memcpy(in, x + i, (n - i) * sizeof(float));
    fn(in, out);
    std::memcpy(y + i, out, (n - i) * sizeof(float));
  }
}

constexpr hn::ScalableTag<float> kD;
constexpr int kHwyLanes = static_cast<int>(hn::MaxLanes(kD));

}  // namespace

void HwyExp(const float* x, float* y, int64_t n) {
  ApplyArray<kHwyLanes>(x, y, n, [](const float* a, float* b) {
    hn::StoreU(hn::Exp(kD, hn::LoadU(kD, a)), kD, b);
  });
}

void HwyLog(const float* x, float* y, int64_t n) {
  ApplyArray<kHwyLanes>(x, y, n, [](const float* a, float* b) {
    hn::StoreU(hn::Log(kD, hn::LoadU(kD, a)), kD, b);
  });
}

void SleefExpU10(const float* x, float* y, int64_t n) {
  ApplyArray<kSleefLanes>(x, y, n, [](const float* a, float* b) {
    SleefStore(b, TPUOFF_SLEEF(exp)(SleefLoad(a)));
  });
}

void SleefLogU10(const float* x, float* y, int64_t n) {
  ApplyArray<kSleefLanes>(x, y, n, [](const float* a, float* b) {
    SleefStore(b, TPUOFF_SLEEF(log)(SleefLoad(a)));
  });
}

void SleefLogU35(const float* x, float* y, int64_t n) {
  ApplyArray<kSleefLanes>(x, y, n, [](const float* a, float* b) {
    SleefStore(b, TPUOFF_SLEEF35(log)(SleefLoad(a)));
  });
}

const char* AlternativesIsaName() {
  static const std::string name =
      std::string(hwy::TargetName(HWY_STATIC_TARGET)) + " / " + kSleefIsa;
  return name.c_str();
}

}  // namespace tpuoff::bench
