// Dispatch of the ops in ops_extra.h, reduce-precision and get-dimension-size.
#include "runtime/emulator/ops_extra.h"

#include <climits>
#include <cmath>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/emulator/ops.h"
#include "runtime/emulator/ops_lapack.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::PrimitiveType;

// Rounds the mantissa to `mbits` bits (to nearest even) and clamps the
// exponent to `ebits` bits (overflow -> inf, underflow -> 0), as XLA's
// reduce-precision; NaN stays NaN. Bits, Mant, Exp describe the type.
template <typename Bits, int kMant, int kExp>
Bits ReduceBits(Bits x, int64_t ebits, int64_t mbits) {
  const Bits exp_mask = ((Bits{1} << kExp) - 1) << kMant;
  const Bits mant_mask = (Bits{1} << kMant) - 1;
  const bool is_nan = (x & exp_mask) == exp_mask && (x & mant_mask) != 0;
  if (is_nan) return mbits > 0 ? x : (x | (Bits{1} << (kMant - 1)));
  if (mbits < kMant) {
    const int shift = kMant - static_cast<int>(mbits);
    const Bits last = Bits{1} << shift;
    const Bits bias = (last >> 1) - 1 + ((x >> shift) & 1);
    x = (x + bias) & ~(last - 1);
  }
  if (ebits < kExp) {
    const Bits sign = x & (Bits{1} << (kMant + kExp));
    const int64_t exp_bias = (int64_t{1} << (kExp - 1)) - 1;
    const int64_t reduced_bias = (int64_t{1} << (ebits - 1)) - 1;
    const int64_t exponent = static_cast<int64_t>((x & exp_mask) >> kMant);
    if (exponent > exp_bias + reduced_bias) {
      x = sign | exp_mask;  // infinity
    } else if (exponent <= exp_bias - reduced_bias) {
      x = sign;  // zero
    }
  }
  return x;
}

absl::Status ReducePrecisionKernel(const HloInstruction& instr, const void* in, void* out) {
  const PrimitiveType t = instr.shape().element_type();
  const int64_t n = instr.shape().num_elements();
  const int64_t e = instr.attrs().exponent_bits, m = instr.attrs().mantissa_bits;
  if (t == PrimitiveType::kF64) {
    const auto* src = static_cast<const uint64_t*>(in);
    auto* dst = static_cast<uint64_t*>(out);
    for (int64_t i = 0; i < n; ++i) dst[i] = ReduceBits<uint64_t, 52, 11>(src[i], e, m);
    return absl::OkStatus();
  }
  if (t == PrimitiveType::kF32) {
    const auto* src = static_cast<const uint32_t*>(in);
    auto* dst = static_cast<uint32_t*>(out);
    for (int64_t i = 0; i < n; ++i) dst[i] = ReduceBits<uint32_t, 23, 8>(src[i], e, m);
    return absl::OkStatus();
  }
  // 16-bit floats: reduce the exactly widened f32 value, then narrow (exact
  // when the reduced format fits in the type, as it does in practice).
  const auto* src = static_cast<const uint16_t*>(in);
  auto* dst = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const float f = t == PrimitiveType::kBF16 ? hlo::Bf16ToF32(src[i]) : hlo::F16ToF32(src[i]);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = ReduceBits<uint32_t, 23, 8>(bits, e, m);
    float r;
    std::memcpy(&r, &bits, 4);
    dst[i] = t == PrimitiveType::kBF16 ? hlo::F32ToBf16(r) : hlo::F32ToF16(r);
  }
  return absl::OkStatus();
}

// map: out[i] = to_apply(in_0[i], ..., in_k-1[i]) for every element, the
// computation run by the scalar evaluator (XLA:CPU's optimised modules use
// it, e.g. in a bf16 cumulative sum's scan).
absl::Status MapKernel(const HloInstruction& instr, const std::vector<const void*>& in,
                       void* out) {
  if (!instr.shape().IsArray() || instr.called_computations().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("map %", instr.name(),
                                                   ": needs an array result and one computation"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ScalarEvaluator> ev,
                   ScalarEvaluator::Create(instr.called_computations()[0]));
  if (ev->num_results() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("map %", instr.name(),
                                                   ": its computation must return one scalar"));
  }
  const int64_t k = instr.operand_count();
  std::vector<LoadKernel> loads(k);
  std::vector<int> widths(k);
  for (int64_t j = 0; j < k; ++j) {
    loads[j] = GetLoadKernel(instr.operand(j)->shape().element_type());
    widths[j] = hlo::ByteWidth(instr.operand(j)->shape().element_type());
  }
  const PrimitiveType rt = instr.shape().element_type();
  const StoreKernel store = GetStoreKernel(rt);
  const int out_width = hlo::ByteWidth(rt);
  std::vector<ScalarValue> args(k);
  ScalarValue result;
  for (int64_t i = 0, n = instr.shape().num_elements(); i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      loads[j](static_cast<const uint8_t*>(in[j]) + i * widths[j], 1, args[j].bytes, 1);
    }
    ev->Eval(args, &result);
    store(result.bytes, static_cast<uint8_t*>(out) + i * out_width, 1);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExecuteExtraOp(const HloInstruction& instr, const std::vector<const void*>& in,
                            const std::vector<void*>& out, int num_threads) {
  switch (instr.opcode()) {
    case HloOpcode::kSort:
      return SortKernel(instr, in, out);
    case HloOpcode::kTopK:
      return TopKKernel(instr, in[0], out[0], out[1]);
    case HloOpcode::kSelectAndScatter:
      return SelectAndScatterKernel(instr, in[0], in[1], in[2], out[0], num_threads);
    case HloOpcode::kConvolution:
      return ConvolutionKernel(instr, in[0], in[1], out[0]);
    case HloOpcode::kReducePrecision:
      return ReducePrecisionKernel(instr, in[0], out[0]);
    case HloOpcode::kFft:
      return FftKernel(instr, in[0], out[0]);
    case HloOpcode::kCholesky:
      return CholeskyKernel(instr, in[0], out[0]);
    case HloOpcode::kTriangularSolve:
      return TriangularSolveKernel(instr, in[0], in[1], out[0]);
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      return BatchNormKernel(instr, in, out);
    case HloOpcode::kRngBitGenerator:
      return RngBitGeneratorKernel(instr, in[0], out[0], out[1]);
    case HloOpcode::kMap:
      return MapKernel(instr, in, out[0]);
    case HloOpcode::kGetDimensionSize: {
      // Static shapes only: the size is the dimension's.
      const int64_t d = instr.operand(0)->shape().dimensions(instr.attrs().dimensions[0]);
      if (d > INT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat("get-dimension-size %", instr.name(),
                                                       ": size ", d, " does not fit s32"));
      }
      const int32_t v = static_cast<int32_t>(d);
      std::memcpy(out[0], &v, sizeof(v));
      return absl::OkStatus();
    }
    case HloOpcode::kCustomCall:
      if (instr.attrs().custom_call_target == "TopK" && instr.operand_count() == 1 &&
          instr.shape().IsTuple() && instr.shape().tuple_size() == 2 && out.size() == 2) {
        return TopKKernel(instr, in[0], out[0], out[1]);
      }
      if (IsLapackTarget(instr.attrs().custom_call_target)) {
        return LapackCustomCall(instr, in, out);
      }
      return absl::UnimplementedError(absl::StrCat(
          "custom-call target \"", instr.attrs().custom_call_target, "\" (%", instr.name(),
          ") is not supported by the emulator",
          absl::StrContains(instr.attrs().custom_call_target, "callback")
              ? " (a host callback into the Python process that traced the program)"
              : ""));
    default:
      return absl::UnimplementedError(absl::StrCat("opcode ", hlo::HloOpcodeString(instr.opcode()),
                                                   " (", instr.name(),
                                                   ") is not supported by the emulator"));
  }
}

}  // namespace tpuoff::runtime
