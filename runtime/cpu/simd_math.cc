#include "runtime/cpu/simd_math.h"

namespace tpuoff::runtime::simd {
namespace {

template <VF (*F)(VF)>
void Apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(y + i, F(Load(x + i)));
  if (i < n) StorePartial(y + i, F(LoadPartial(x + i, n - i, 1.0f)), n - i);
}

}  // namespace

const char* VectorIsaName() {
  if constexpr (kLanes == 16) return "avx512";
  if constexpr (kLanes == 8) return "avx2";
  return "sse";
}

void Exp(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) StoreExpV2(Load(x + i), Load(x + i + kLanes), y + i);
  Apply<ExpV>(x + i, y + i, n - i);
}
void Log(const float* x, float* y, int64_t n) { Apply<LogV>(x, y, n); }
void Tanh(const float* x, float* y, int64_t n) { Apply<TanhV>(x, y, n); }

void ExpShifted(const float* x, float shift, float* y, int64_t n) {
  const VF s = Splat(shift);
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    StoreExpV2(Load(x + i) - s, Load(x + i + kLanes) - s, y + i);
  }
  for (; i + kLanes <= n; i += kLanes) Store(y + i, ExpV(Load(x + i) - s));
  if (i < n) StorePartial(y + i, ExpV(LoadPartial(x + i, n - i, shift) - s), n - i);
}

}  // namespace tpuoff::runtime::simd
