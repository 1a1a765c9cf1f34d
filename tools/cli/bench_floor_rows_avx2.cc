// The floor's row kernels for AVX2 + FMA (8 lanes); this file alone is
// compiled with -mavx2 -mfma (tools/CMakeLists.txt) and runs only where
// FloorRowKernelsForCpu finds those features.
#include "tools/cli/bench_floor_rows.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace tpuoff::tools {

#define TPUOFF_FLOOR_LANES 8
#include "tools/cli/bench_floor_rows.inc"

const FloorRowKernels* FloorRowKernelsAvx2() {
  static const FloorRowKernels k = {"avx2", W, &ForwardF32, &ForwardBf16, &BackwardF32,
                                    &BackwardBf16};
  return &k;
}

}  // namespace tpuoff::tools

#else

namespace tpuoff::tools {
const FloorRowKernels* FloorRowKernelsAvx2() { return nullptr; }
}  // namespace tpuoff::tools

#endif
