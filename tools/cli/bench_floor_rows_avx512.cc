// The floor's row kernels for AVX-512 (16 lanes); this file alone is
// compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma
// (tools/CMakeLists.txt, when the compiler takes them) and runs only where
// FloorRowKernelsForCpu finds those features.
#include "tools/cli/bench_floor_rows.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__) && defined(__FMA__)
#include <immintrin.h>

namespace tpuoff::tools {

#define TPUOFF_FLOOR_LANES 16
#include "tools/cli/bench_floor_rows.inc"

const FloorRowKernels* FloorRowKernelsAvx512() {
  static const FloorRowKernels k = {"avx512", W, &ForwardF32, &ForwardBf16, &BackwardF32,
                                    &BackwardBf16};
  return &k;
}

}  // namespace tpuoff::tools

#else

namespace tpuoff::tools {
const FloorRowKernels* FloorRowKernelsAvx512() { return nullptr; }
}  // namespace tpuoff::tools

#endif
