// Kernels of the ops that are not fused elementwise loops: data movement
// (concatenate, pad, dynamic slices, gather, scatter, physical bitcast),
// general reductions, dot (Eigen), and a scalar evaluator for reducer and
// combiner computations. Arrays are row-major in storage representation.
#ifndef TPUOFF_RUNTIME_EMULATOR_OPS_H_
#define TPUOFF_RUNTIME_EMULATOR_OPS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"
#include "runtime/cpu/elementwise_kernels.h"

namespace tpuoff::runtime {

// One scalar in compute representation (up to 16 bytes: c128), zeroed.
struct ScalarValue {
  alignas(16) uint8_t bytes[kMaxComputeWidth] = {};
  // A pred result (0/1 in the first byte).
  bool AsPred() const { return bytes[0] != 0; }
};

// Evaluates a computation of scalars (reducers, scatter combiners) on values
// in compute representation. Thread-safe after Create.
class ScalarEvaluator {
 public:
  static absl::StatusOr<std::unique_ptr<ScalarEvaluator>> Create(
      const hlo::HloComputation* computation);
  // args: one value per parameter leaf; results: one per root leaf.
  void Eval(absl::Span<const ScalarValue> args, ScalarValue* results) const;
  int64_t num_results() const {
    return static_cast<int64_t>(root_slots_.size());
  }

  struct Node {
    // kBitcast: store as the operand's type, load as the result's.
    enum class Kind { kArg, kConst, kUnary, kBinary, kTernary, kBitcast };
    Kind kind = Kind::kConst;
    int out = 0;
    int args[3] = {0, 0, 0};
    ScalarValue value;  // kConst
    int64_t arg = 0;    // kArg: argument index
    UnaryKernel unary = nullptr;
    BinaryKernel binary = nullptr;
    TernaryKernel ternary = nullptr;
    StoreKernel store = nullptr;
    LoadKernel load = nullptr;
  };

 private:
  std::vector<Node> nodes_;
  std::vector<int> root_slots_;
  int num_slots_ = 0;
};

// Reads an integer scalar of any integer type.
int64_t ReadIndex(hlo::PrimitiveType type, const void* data);

void ConcatenateKernel(const hlo::HloInstruction& instr,
                       absl::Span<const void* const> inputs, void* out);
void PadKernel(const hlo::HloInstruction& instr, const void* in,
               const void* pad_value, void* out);
// Starts are clamped into [0, dim - size] as XLA specifies.
void DynamicSliceKernel(const hlo::HloInstruction& instr, const void* in,
                        std::vector<int64_t> starts, void* out);
// `out` may equal `operand` (in place); otherwise operand is copied first.
void DynamicUpdateSliceKernel(const hlo::HloInstruction& instr,
                              const void* operand, const void* update,
                              std::vector<int64_t> starts, void* out);
// Gather with start indices clamped so every slice is in bounds.
void GatherKernel(const hlo::HloInstruction& instr, const void* operand,
                  const void* indices, void* out);
// Scatter (variadic): update windows not fully in bounds are skipped.
// `outs` may equal `operands` (in place).
absl::Status ScatterKernel(const hlo::HloInstruction& instr,
                           absl::Span<const void* const> operands,
                           const void* indices,
                           absl::Span<const void* const> updates,
                           absl::Span<void* const> outs);
// Any reduce (variadic, any dims, any reducer) in a fixed sequential order.
absl::Status ReduceKernel(const hlo::HloInstruction& instr,
                          absl::Span<const void* const> inputs,
                          absl::Span<const void* const> inits,
                          absl::Span<void* const> outs);
// dot via Eigen: f32 accumulation for floats (f64 for f64), wrapping integer
// accumulation for integers; row blocks of fixed size are split over threads.
absl::Status DotKernel(const hlo::HloInstruction& instr, const void* lhs,
                       const void* rhs, void* out, int num_threads);
// bitcast whose operand or result has a non-default layout: moves elements
// so the physical (layout) order is preserved.
absl::Status BitcastPhysicalKernel(const hlo::HloInstruction& instr,
                                   const void* in, void* out);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_OPS_H_
