// The floor's row kernels for the ISA the whole build targets (what
// -march gives; SSE2 at least on x86-64): the fallback of
// FloorRowKernelsForCpu, and the dispatch itself.
#include "tools/cli/bench_floor_rows.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace tpuoff::tools {

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define TPUOFF_FLOOR_LANES 16
#elif defined(__AVX2__)
#define TPUOFF_FLOOR_LANES 8
#else
#define TPUOFF_FLOOR_LANES 4
#endif
#include "tools/cli/bench_floor_rows.inc"

const FloorRowKernels* FloorRowKernelsBaseline() {
  static const FloorRowKernels k = {"baseline", W, &ForwardF32, &ForwardBf16, &BackwardF32,
                                    &BackwardBf16};
  return &k;
}

const FloorRowKernels& FloorRowKernelsForCpu() {
  static const FloorRowKernels* const chosen = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (FloorRowKernelsAvx512() != nullptr && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")) {
      return FloorRowKernelsAvx512();
    }
    if (FloorRowKernelsAvx2() != nullptr && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
      return FloorRowKernelsAvx2();
    }
#endif
    return FloorRowKernelsBaseline();
  }();
  return *chosen;
}

}  // namespace tpuoff::tools
