// Matrix products of dot on oneDNN's matmul primitive: f32 x f32, and
// bf16 x bf16 straight from the bf16 operands where oneDNN has a native
// (non-reference) bf16 kernel on this CPU (avx512_bf16's vdpbf16ps, AMX);
// the destination is always f32 (XLA's accumulation type for both).
//
// C is cut into a fixed grid of row and column blocks that depends on the
// shape only; each block's product runs single-threaded in oneDNN and the
// blocks are spread over the emulator's pool, so results do not depend on the
// thread count. Primitives are cached per thread, keyed by block shape,
// strides and types (a dot in a loop reuses them every iteration).
#ifndef TPUOFF_RUNTIME_EMULATOR_GEMM_H_
#define TPUOFF_RUNTIME_EMULATOR_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tpuoff::runtime {

enum class GemmType { kF32, kBf16 };

// A [batch, rows, cols] stack of matrices: row-major, or column-major (each
// matrix stored transposed) when col_major.
struct GemmOperand {
  const void* data = nullptr;
  GemmType type = GemmType::kF32;
  bool col_major = false;
};

// Whether bf16 x bf16 -> f32 runs natively here (oneDNN picks a kernel that
// is not its reference implementation). Checked once.
bool GemmNativeBf16();

// "oneDNN <isa>; bf16 native" or "...; bf16 via f32": for reports.
const char* GemmDescription();

// Whether a product of this size is worth oneDNN's per-call overhead
// (small ones stay on Eigen).
bool GemmWorthIt(int64_t batch, int64_t m, int64_t k, int64_t n);

// C[b] = A[b] * B[b] for b < batch, A [m, k], B [k, n], C [m, n] row-major
// f32. Both operands of one type (kBf16 only when GemmNativeBf16()).
absl::Status Gemm(int64_t batch, int64_t m, int64_t k, int64_t n, const GemmOperand& a,
                  const GemmOperand& b, float* c, int num_threads);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_GEMM_H_
