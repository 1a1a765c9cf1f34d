// Shape rules of fft, cholesky, triangular-solve, the batch-norm ops, rng,
// rng-bit-generator, rng-get-and-update-state, get-dimension-size and
// domain (XLA's ShapeInference, checked the same way).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/shape_inference_extra.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

using Span = absl::Span<const Shape* const>;

absl::Status Err(HloOpcode op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(HloOpcodeString(op), ": ", msg));
}

absl::Status NeedOperands(HloOpcode op, Span operands, size_t n) {
  if (operands.size() != n) {
    return Err(op, absl::StrCat("expects ", n, " operands, got ", operands.size()));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!operands[i]->IsArray()) {
      return Err(op, absl::StrCat("operand ", i, " must be an array, got ",
                                  operands[i]->ToString()));
    }
  }
  return absl::OkStatus();
}

bool IsRealFloat(PrimitiveType t) { return t == PrimitiveType::kF32 || t == PrimitiveType::kF64; }

absl::StatusOr<Shape> InferFft(const Shape& in, const HloAttributes& a) {
  constexpr HloOpcode op = HloOpcode::kFft;
  const int64_t n = static_cast<int64_t>(a.fft_length.size());
  if (n < 1 || n > 3) return Err(op, "fft_length must have 1 to 3 entries");
  if (in.rank() < n) {
    return Err(op, absl::StrCat("operand ", in.ToString(), " has fewer than ", n, " dimensions"));
  }
  for (int64_t l : a.fft_length) {
    if (l < 0) return Err(op, "fft_length must be non-negative");
  }
  const PrimitiveType t = in.element_type();
  std::vector<int64_t> dims = in.dimensions();
  const int64_t first = in.rank() - n;
  auto lengths_match = [&](bool half_last) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t want = a.fft_length[i];
      if (half_last && i == n - 1) want = want / 2 + 1;
      if (dims[first + i] != want) return false;
    }
    return true;
  };
  const std::string lengths = absl::StrCat("{", absl::StrJoin(a.fft_length, ","), "}");
  switch (a.fft_type) {
    case FftType::kFft:
    case FftType::kIfft:
      if (!IsComplex(t)) return Err(op, "FFT and IFFT need a complex operand");
      if (!lengths_match(false)) {
        return Err(op, absl::StrCat("operand ", in.ToString(), " does not end in fft_length ",
                                    lengths));
      }
      return Shape(t, dims);
    case FftType::kRfft:
      if (!IsRealFloat(t)) return Err(op, "RFFT needs an f32 or f64 operand");
      if (!lengths_match(false)) {
        return Err(op, absl::StrCat("operand ", in.ToString(), " does not end in fft_length ",
                                    lengths));
      }
      if (a.fft_length.back() != 0) dims.back() = a.fft_length.back() / 2 + 1;
      return Shape(t == PrimitiveType::kF32 ? PrimitiveType::kC64 : PrimitiveType::kC128, dims);
    case FftType::kIrfft:
      if (!IsComplex(t)) return Err(op, "IRFFT needs a complex operand");
      if (!lengths_match(true)) {
        return Err(op, absl::StrCat("operand ", in.ToString(), " does not match fft_length ",
                                    lengths, " (last dimension fft_length/2+1)"));
      }
      dims.back() = a.fft_length.back();
      return Shape(ComplexComponentType(t), dims);
  }
  return Err(op, "unknown fft_type");
}

// [..., m, m] for cholesky; `what` names the operand in messages.
absl::Status NeedSquareBatch(HloOpcode op, const Shape& s, absl::string_view what) {
  if (s.rank() < 2 || s.dimensions(s.rank() - 1) != s.dimensions(s.rank() - 2)) {
    return Err(op, absl::StrCat(what, " must be a batch of square matrices, got ", s.ToString()));
  }
  if (!IsFloatingPoint(s.element_type()) && !IsComplex(s.element_type())) {
    return Err(op, absl::StrCat(what, " must be floating point or complex, got ", s.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> InferTriangularSolve(const Shape& a, const Shape& b,
                                           const HloAttributes& attrs) {
  constexpr HloOpcode op = HloOpcode::kTriangularSolve;
  RETURN_IF_ERROR(NeedSquareBatch(op, a, "a"));
  if (a.element_type() != b.element_type() || a.rank() != b.rank()) {
    return Err(op, absl::StrCat("a ", a.ToString(), " and b ", b.ToString(),
                                " must have the same type and rank"));
  }
  for (int64_t i = 0; i + 2 < a.rank(); ++i) {
    if (a.dimensions(i) != b.dimensions(i)) {
      return Err(op, absl::StrCat("batch dimensions of a ", a.ToString(), " and b ",
                                  b.ToString(), " differ"));
    }
  }
  const int64_t m = a.dimensions(a.rank() - 1);
  const int64_t solved = attrs.left_side ? b.dimensions(b.rank() - 2) : b.dimensions(b.rank() - 1);
  if (solved != m) {
    return Err(op, absl::StrCat("a ", a.ToString(), " does not match the ",
                                attrs.left_side ? "rows" : "columns", " of b ", b.ToString()));
  }
  return Shape(b.element_type(), b.dimensions());
}

// Batch norm: operand [..., F at feature_index, ...], feature vectors [F].
absl::Status CheckBatchNorm(HloOpcode op, Span operands, const HloAttributes& a,
                            std::initializer_list<int> feature_operands) {
  const Shape& x = *operands[0];
  if (!IsFloatingPoint(x.element_type())) {
    return Err(op, absl::StrCat("operand must be floating point, got ", x.ToString()));
  }
  if (a.feature_index < 0 || a.feature_index >= x.rank()) {
    return Err(op, absl::StrCat("feature_index ", a.feature_index, " out of range for ",
                                x.ToString()));
  }
  const Shape feature(x.element_type(), {x.dimensions(a.feature_index)});
  for (int i : feature_operands) {
    if (!operands[i]->Compatible(feature)) {
      return Err(op, absl::StrCat("operand ", i, " must be ", feature.ToString(), ", got ",
                                  operands[i]->ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> InferRngBitGenerator(const Shape& state, const Shape* declared) {
  constexpr HloOpcode op = HloOpcode::kRngBitGenerator;
  if (state.rank() != 1 || !IsInteger(state.element_type())) {
    return Err(op, absl::StrCat("state must be an integer vector, got ", state.ToString()));
  }
  if (declared == nullptr || !declared->IsTuple() || declared->tuple_size() != 2 ||
      !declared->tuple_shapes(0).Compatible(state) || !declared->tuple_shapes(1).IsArray()) {
    return Err(op, absl::StrCat("shape must be (", state.ToString(), ", output array)"));
  }
  const PrimitiveType t = declared->tuple_shapes(1).element_type();
  const int64_t w = ByteWidth(t);
  if (t == PrimitiveType::kPred || IsComplex(t) || (w != 1 && w != 2 && w != 4 && w != 8)) {
    return Err(op, absl::StrCat("output type ", PrimitiveTypeName(t),
                                " is not a 8/16/32/64-bit integer or float type"));
  }
  return *declared;
}

}  // namespace

bool HasNumericShapeRule(HloOpcode op) {
  switch (op) {
    case HloOpcode::kFft:
    case HloOpcode::kCholesky:
    case HloOpcode::kTriangularSolve:
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
    case HloOpcode::kRng:
    case HloOpcode::kRngBitGenerator:
    case HloOpcode::kRngGetAndUpdateState:
    case HloOpcode::kGetDimensionSize:
    case HloOpcode::kDomain:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Shape> InferShapeNumeric(HloOpcode op, Span operands, const HloAttributes& a,
                                        const Shape* declared) {
  switch (op) {
    case HloOpcode::kFft:
      RETURN_IF_ERROR(NeedOperands(op, operands, 1));
      return InferFft(*operands[0], a);
    case HloOpcode::kCholesky:
      RETURN_IF_ERROR(NeedOperands(op, operands, 1));
      RETURN_IF_ERROR(NeedSquareBatch(op, *operands[0], "operand"));
      return *operands[0];
    case HloOpcode::kTriangularSolve:
      RETURN_IF_ERROR(NeedOperands(op, operands, 2));
      return InferTriangularSolve(*operands[0], *operands[1], a);
    case HloOpcode::kBatchNormTraining: {
      RETURN_IF_ERROR(NeedOperands(op, operands, 3));
      RETURN_IF_ERROR(CheckBatchNorm(op, operands, a, {1, 2}));
      const Shape& x = *operands[0];
      const Shape f(x.element_type(), {x.dimensions(a.feature_index)});
      return Shape::Tuple({Shape(x.element_type(), x.dimensions()), f, f});
    }
    case HloOpcode::kBatchNormInference: {
      RETURN_IF_ERROR(NeedOperands(op, operands, 5));
      RETURN_IF_ERROR(CheckBatchNorm(op, operands, a, {1, 2, 3, 4}));
      return Shape(operands[0]->element_type(), operands[0]->dimensions());
    }
    case HloOpcode::kBatchNormGrad: {
      RETURN_IF_ERROR(NeedOperands(op, operands, 5));
      RETURN_IF_ERROR(CheckBatchNorm(op, operands, a, {1, 2, 3}));
      const Shape& x = *operands[0];
      if (!operands[4]->Compatible(x)) {
        return Err(op, absl::StrCat("grad_output ", operands[4]->ToString(),
                                    " must match the operand ", x.ToString()));
      }
      const Shape f(x.element_type(), {x.dimensions(a.feature_index)});
      return Shape::Tuple({Shape(x.element_type(), x.dimensions()), f, f});
    }
    case HloOpcode::kRng: {
      RETURN_IF_ERROR(NeedOperands(op, operands, 2));
      if (a.distribution == RngDistribution::kInvalid) {
        return Err(op, "needs distribution=rng_uniform or rng_normal");
      }
      const PrimitiveType t = operands[0]->element_type();
      if (operands[0]->rank() != 0 || operands[1]->rank() != 0 ||
          operands[1]->element_type() != t) {
        return Err(op, "operands must be two scalars of one type");
      }
      if (a.distribution == RngDistribution::kNormal ? !IsFloatingPoint(t)
                                                      : !IsFloatingPoint(t) && !IsInteger(t)) {
        return Err(op, absl::StrCat(RngDistributionString(a.distribution),
                                    " does not support ", PrimitiveTypeName(t)));
      }
      if (declared == nullptr || !declared->IsArray() || declared->element_type() != t) {
        return Err(op, absl::StrCat("result must be a ", PrimitiveTypeName(t), " array"));
      }
      return *declared;
    }
    case HloOpcode::kRngBitGenerator:
      RETURN_IF_ERROR(NeedOperands(op, operands, 1));
      return InferRngBitGenerator(*operands[0], declared);
    case HloOpcode::kRngGetAndUpdateState:
      if (!operands.empty()) return Err(op, "takes no operands");
      return Shape(PrimitiveType::kU64, {2});
    case HloOpcode::kGetDimensionSize:
      RETURN_IF_ERROR(NeedOperands(op, operands, 1));
      if (a.dimensions.size() != 1 || a.dimensions[0] < 0 ||
          a.dimensions[0] >= operands[0]->rank()) {
        return Err(op, absl::StrCat("needs dimensions={d} within the rank of ",
                                    operands[0]->ToString()));
      }
      return Shape::Scalar(PrimitiveType::kS32);
    case HloOpcode::kDomain:
      if (operands.size() != 1) return Err(op, "expects 1 operand");
      return *operands[0];
    default:
      return absl::UnimplementedError(absl::StrCat("no shape rule for ", HloOpcodeString(op)));
  }
}

}  // namespace tpuoff::hlo
