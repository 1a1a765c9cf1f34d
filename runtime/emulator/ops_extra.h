// Kernels of sort, topk (and XLA:CPU's "TopK" custom-call),
// select-and-scatter, convolution (oneDNN), reduce-precision, fft (FFTW),
// cholesky and triangular-solve (Eigen), the batch-norm ops,
// rng-bit-generator and rng, get-dimension-size and jaxlib's LAPACK
// custom-calls (ops_lapack.h), and the one dispatch point the executor
// calls for them. Operand and result data are
// the array leaves, depth-first.
#ifndef TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_
#define TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::runtime {

// Runs `instr` (an opcode or custom-call target the main executor does not
// handle itself). UNIMPLEMENTED naming the opcode (or custom-call target)
// for what the emulator cannot run. `num_threads`: host threads the op may
// use (select-and-scatter's f32 path).
absl::Status ExecuteExtraOp(const hlo::HloInstruction& instr,
                            const std::vector<const void*>& in,
                            const std::vector<void*>& out, int num_threads = 1);

absl::Status SortKernel(const hlo::HloInstruction& instr, absl::Span<const void* const> in,
                        absl::Span<void* const> out);
absl::Status TopKKernel(const hlo::HloInstruction& instr, const void* in, void* values_out,
                        void* indices_out);
absl::Status SelectAndScatterKernel(const hlo::HloInstruction& instr, const void* operand,
                                    const void* source, const void* init, void* out,
                                    int num_threads = 1);
absl::Status ConvolutionKernel(const hlo::HloInstruction& instr, const void* lhs,
                               const void* rhs, void* out);
// The element types oneDNN does not take (integers, f64, complex): a direct
// loop, results in the result type (ops_conv_generic.cc).
absl::Status GenericConvolutionKernel(const hlo::HloInstruction& instr, const void* lhs,
                                      const void* rhs, void* out);
absl::Status FftKernel(const hlo::HloInstruction& instr, const void* in, void* out);
absl::Status CholeskyKernel(const hlo::HloInstruction& instr, const void* in, void* out);
absl::Status TriangularSolveKernel(const hlo::HloInstruction& instr, const void* a,
                                   const void* b, void* out);
// batch-norm-training / -inference / -grad.
absl::Status BatchNormKernel(const hlo::HloInstruction& instr, const std::vector<const void*>& in,
                             const std::vector<void*>& out);
absl::Status RngBitGeneratorKernel(const hlo::HloInstruction& instr, const void* state_in,
                                   void* state_out, void* data_out);
// rng: `state` is the 128-bit counter (low, high) its rng-get-and-update-
// state would return; RngStateDelta is how far one execution advances it.
absl::Status RngKernel(const hlo::HloInstruction& instr, const void* a, const void* b,
                       const uint64_t state[2], void* out);
int64_t RngStateDelta(const hlo::HloInstruction& rng);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_
