// Library candidates for the emulator's vectorised exp/log, measured against
// runtime/cpu/simd_math.h by simd_bench (speed) and simd_accuracy (error
// against double-precision libm). Bench-only: the runtime does not link them.
//
//   hwy_*      Highway 1.0.3 hwy/contrib/math Exp/Log (static target of the
//              compile flags), no special-value fix-ups: what the library
//              gives.
//   sleef_*    SLEEF 3.5.1 Sleef_{exp,log}f<lanes>_u10 (1.0-ulp bound) and
//              Sleef_logf<lanes>_u35 (3.5-ulp bound), the variant for the
//              ISA the build targets (avx512f / avx2 / sse2), called per
//              vector (SLEEF in Debian ships no inline headers).
#ifndef TPUOFF_TOOLS_BENCH_SIMD_ALTERNATIVES_H_
#define TPUOFF_TOOLS_BENCH_SIMD_ALTERNATIVES_H_

#include <cstdint>

namespace tpuoff::bench {

using ArrayFn = void (*)(const float* x, float* y, int64_t n);

void HwyExp(const float* x, float* y, int64_t n);
void HwyLog(const float* x, float* y, int64_t n);
void SleefExpU10(const float* x, float* y, int64_t n);
void SleefLogU10(const float* x, float* y, int64_t n);
void SleefLogU35(const float* x, float* y, int64_t n);

// The Highway target and SLEEF variant compiled in, e.g. "AVX3 / avx512f".
const char* AlternativesIsaName();

}  // namespace tpuoff::bench

#endif  // TPUOFF_TOOLS_BENCH_SIMD_ALTERNATIVES_H_
