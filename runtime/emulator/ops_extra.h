// Kernels of sort, topk (and XLA:CPU's "TopK" custom-call),
// select-and-scatter, convolution (oneDNN) and reduce-precision, and the one
// dispatch point the executor calls for them. Operand and result data are
// the array leaves, depth-first.
#ifndef TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_
#define TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::runtime {

// Runs `instr` (an opcode or custom-call target the main executor does not
// handle itself). UNIMPLEMENTED naming the opcode (or custom-call target)
// for what the emulator cannot run.
absl::Status ExecuteExtraOp(const hlo::HloInstruction& instr,
                            const std::vector<const void*>& in,
                            const std::vector<void*>& out);

absl::Status SortKernel(const hlo::HloInstruction& instr, absl::Span<const void* const> in,
                        absl::Span<void* const> out);
absl::Status TopKKernel(const hlo::HloInstruction& instr, const void* in, void* values_out,
                        void* indices_out);
absl::Status SelectAndScatterKernel(const hlo::HloInstruction& instr, const void* operand,
                                    const void* source, const void* init, void* out);
absl::Status ConvolutionKernel(const hlo::HloInstruction& instr, const void* lhs,
                               const void* rhs, void* out);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_OPS_EXTRA_H_
