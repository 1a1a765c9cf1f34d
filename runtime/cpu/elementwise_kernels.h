// Elementwise kernels over blocks of values in their "compute
// representation": pred -> uint8 0/1, integers -> themselves, f16/bf16/f32 ->
// float (16-bit types rounded to their precision after every op, so a fused
// chain equals the op-by-op result bit for bit), f64 -> double. Every kernel
// is a template over the op and the element type; GetXxxKernel is the one
// dispatch point per kernel family.
#ifndef TPUOFF_RUNTIME_CPU_ELEMENTWISE_KERNELS_H_
#define TPUOFF_RUNTIME_CPU_ELEMENTWISE_KERNELS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "hlo/ir/attributes.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::runtime {

// Bytes of one element in compute representation (1, 2, 4 or 8; 16 for
// c128). Complex values are std::complex<float/double>.
int ComputeWidth(hlo::PrimitiveType type);
inline constexpr int kMaxComputeWidth = 16;

using UnaryKernel = void (*)(const void* a, void* out, int64_t n);
using BinaryKernel = void (*)(const void* a, const void* b, void* out,
                              int64_t n);
using TernaryKernel = void (*)(const void* a, const void* b, const void* c,
                               void* out, int64_t n);
// Loads n storage elements (element i at src + i*stride elements) into
// compute representation; stride 0 splats one element.
using LoadKernel = void (*)(const void* src, int64_t stride, void* out,
                            int64_t n);
// Stores n compute elements contiguously in storage representation.
using StoreKernel = void (*)(const void* in, void* dst, int64_t n);

LoadKernel GetLoadKernel(hlo::PrimitiveType type);

// Kernel variants where one operand is a single element used for every i
// (a value constant over the block, e.g. a broadcast row statistic): saves
// splatting it into a block. For select, kFirst/kSecond name on_true /
// on_false (the predicate is always a block).
enum class ScalarOperand { kNone, kFirst, kSecond };
StoreKernel GetStoreKernel(hlo::PrimitiveType type);
// The same with non-temporal stores of whole 64-byte lines where the ISA
// has them: for outputs much larger than the caches, written once.
StoreKernel GetStreamingStoreKernel(hlo::PrimitiveType type);

// Writes `bytes` (a multiple of `width`, dst aligned to it) at dst, every
// element the `width`-byte value at `value` (width 1, 2, 4, 8 or 16); with
// streaming (non-temporal) stores when `streaming`.
void FillElements(void* dst, int64_t bytes, const void* value, int width, bool streaming);

// Unary elementwise ops (negate ... not), same type in and out.
absl::StatusOr<UnaryKernel> GetUnaryKernel(hlo::HloOpcode op,
                                           hlo::PrimitiveType type);
// Binary elementwise ops (add ... shift-right-arithmetic).
absl::StatusOr<BinaryKernel> GetBinaryKernel(
    hlo::HloOpcode op, hlo::PrimitiveType type,
    ScalarOperand scalar = ScalarOperand::kNone);
// compare: out is pred (uint8). `total_order` for comparison_type=TOTALORDER.
absl::StatusOr<BinaryKernel> GetCompareKernel(
    hlo::ComparisonDirection dir, hlo::PrimitiveType type, bool total_order,
    ScalarOperand scalar = ScalarOperand::kNone);
// convert between any two array types (XLA semantics: float -> int
// saturates, NaN -> 0; -> pred is x != 0).
absl::StatusOr<UnaryKernel> GetConvertKernel(hlo::PrimitiveType from,
                                             hlo::PrimitiveType to);
// is-finite: float in, pred out.
absl::StatusOr<UnaryKernel> GetIsFiniteKernel(hlo::PrimitiveType type);
// select(pred, on_true, on_false) and clamp(lo, x, hi).
absl::StatusOr<TernaryKernel> GetSelectKernel(
    hlo::PrimitiveType type, ScalarOperand scalar = ScalarOperand::kNone);
absl::StatusOr<TernaryKernel> GetClampKernel(hlo::PrimitiveType type);

// Writes value(i) = start + i as `type` in compute representation.
void FillIota(hlo::PrimitiveType type, int64_t start, void* out, int64_t n);

// real / imag / abs of `from` (complex; real and imag also of real floats),
// the component type out.
absl::StatusOr<UnaryKernel> GetComplexPartKernel(hlo::HloOpcode op, hlo::PrimitiveType from);
// complex(re, im) from two `part` (f32 or f64) values.
absl::StatusOr<BinaryKernel> GetMakeComplexKernel(
    hlo::PrimitiveType part, ScalarOperand scalar = ScalarOperand::kNone);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_CPU_ELEMENTWISE_KERNELS_H_
