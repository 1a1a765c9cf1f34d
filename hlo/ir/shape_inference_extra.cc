// Shape rules of convolution, sort, top-k, select-and-scatter,
// reduce-precision, add-dependency, the async wrappers (async-start/-update/
// -done), and of the opcodes whose result is taken as declared (host
// transfer, linear algebra, ...).
#include "hlo/ir/shape_inference_extra.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/status_macros.h"
#include "hlo/ir/window.h"

namespace tpuoff::hlo {
namespace {

using Span = absl::Span<const Shape* const>;

absl::Status Err(HloOpcode op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(HloOpcodeString(op), ": ", msg));
}

absl::Status NeedArrays(HloOpcode op, Span operands) {
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i]->IsArray()) {
      return Err(op, absl::StrCat("operand ", i, " must be an array, got ",
                                  operands[i]->ToString()));
    }
  }
  return absl::OkStatus();
}

// A comparator: 2N scalar parameters (lhs/rhs of each operand) -> pred[].
absl::Status CheckComparator(HloOpcode op, const HloComputation* comp,
                             const std::vector<PrimitiveType>& types) {
  if (comp == nullptr) return Err(op, "needs a comparator computation");
  if (comp->num_parameters() != static_cast<int64_t>(2 * types.size())) {
    return Err(op, absl::StrCat("comparator ", comp->name(), " takes ", comp->num_parameters(),
                                " parameters, expected ", 2 * types.size()));
  }
  for (size_t i = 0; i < 2 * types.size(); ++i) {
    const HloInstruction* p = comp->parameter(static_cast<int64_t>(i));
    if (p == nullptr || !p->shape().Compatible(Shape::Scalar(types[i / 2]))) {
      return Err(op, absl::StrCat("comparator ", comp->name(), " parameter ", i,
                                  " must be ", Shape::Scalar(types[i / 2]).ToString()));
    }
  }
  if (comp->root() == nullptr ||
      !comp->root()->shape().Compatible(Shape::Scalar(PrimitiveType::kPred))) {
    return Err(op, absl::StrCat("comparator ", comp->name(), " must return pred[]"));
  }
  return absl::OkStatus();
}

// True when `batch`, `feature` and `spatial` (rank - 2 of them) name each of
// 0..rank-1 once.
bool IsPermutation(int64_t batch, int64_t feature, const std::vector<int64_t>& spatial,
                   int64_t rank) {
  std::set<int64_t> seen = {batch, feature};
  seen.insert(spatial.begin(), spatial.end());
  return static_cast<int64_t>(seen.size()) == rank && *seen.begin() >= 0 &&
         *seen.rbegin() < rank;
}

absl::StatusOr<Shape> InferConvolution(Span operands, const HloAttributes& a,
                                       const Shape* declared) {
  const HloOpcode op = HloOpcode::kConvolution;
  if (operands.size() != 2) return Err(op, "expects 2 operands");
  RETURN_IF_ERROR(NeedArrays(op, operands));
  const Shape& lhs = *operands[0];
  const Shape& rhs = *operands[1];
  const ConvolutionDimensionNumbers& d = a.conv;
  const int64_t ns = static_cast<int64_t>(d.input_spatial_dimensions.size());
  if (lhs.rank() != ns + 2 || rhs.rank() != ns + 2) {
    return Err(op, absl::StrCat("operands of rank ", lhs.rank(), " and ", rhs.rank(),
                                " do not match dim_labels ",
                                ConvolutionDimensionNumbersToString(d)));
  }
  if (static_cast<int64_t>(a.window.size()) != ns) {
    return Err(op, absl::StrCat("window has ", a.window.size(), " dimensions, expected ", ns));
  }
  // Dimension numbers from a proto are not checked on import: every use
  // below indexes the operands with them.
  if (static_cast<int64_t>(d.kernel_spatial_dimensions.size()) != ns ||
      static_cast<int64_t>(d.output_spatial_dimensions.size()) != ns) {
    return Err(op, absl::StrCat("input, kernel and output name different numbers of spatial "
                                "dimensions: ",
                                ConvolutionDimensionNumbersToString(d)));
  }
  if (!IsPermutation(d.input_batch_dimension, d.input_feature_dimension,
                     d.input_spatial_dimensions, ns + 2)) {
    return Err(op, "input dimension numbers are not a permutation");
  }
  if (!IsPermutation(d.kernel_output_feature_dimension, d.kernel_input_feature_dimension,
                     d.kernel_spatial_dimensions, ns + 2)) {
    return Err(op, "kernel dimension numbers are not a permutation");
  }
  if (!IsPermutation(d.output_batch_dimension, d.output_feature_dimension,
                     d.output_spatial_dimensions, ns + 2)) {
    return Err(op, "output dimension numbers are not a permutation");
  }
  if (a.feature_group_count < 1 || a.batch_group_count < 1) {
    return Err(op, "feature_group_count and batch_group_count must be >= 1");
  }
  const int64_t batch = lhs.dimensions(d.input_batch_dimension);
  const int64_t in_features = lhs.dimensions(d.input_feature_dimension);
  const int64_t k_in = rhs.dimensions(d.kernel_input_feature_dimension);
  const int64_t k_out = rhs.dimensions(d.kernel_output_feature_dimension);
  if (in_features % a.feature_group_count != 0 ||
      in_features / a.feature_group_count != k_in) {
    return Err(op, absl::StrCat("input features ", in_features, " / feature_group_count ",
                                a.feature_group_count, " must equal the kernel's input features ",
                                k_in));
  }
  if (k_out % a.feature_group_count != 0) {
    return Err(op, "kernel output features must be divisible by feature_group_count");
  }
  if (batch % a.batch_group_count != 0 || k_out % a.batch_group_count != 0) {
    return Err(op, "batch and kernel output features must be divisible by batch_group_count");
  }
  std::vector<int64_t> base(ns), window_sizes(ns);
  for (int64_t i = 0; i < ns; ++i) {
    base[i] = lhs.dimensions(d.input_spatial_dimensions[i]);
    if (a.window[i].size != rhs.dimensions(d.kernel_spatial_dimensions[i])) {
      return Err(op, absl::StrCat("window size ", a.window[i].size, " of spatial dimension ", i,
                                  " differs from the kernel's ",
                                  rhs.dimensions(d.kernel_spatial_dimensions[i])));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> spatial, WindowOutputDimensions(base, a.window));
  std::vector<int64_t> dims(ns + 2, 0);
  dims[d.output_batch_dimension] = batch / a.batch_group_count;
  dims[d.output_feature_dimension] = k_out;
  for (int64_t i = 0; i < ns; ++i) dims[d.output_spatial_dimensions[i]] = spatial[i];
  // The result type may differ from the operands' (preferred_element_type).
  const PrimitiveType t = declared != nullptr && declared->IsArray() ? declared->element_type()
                                                                      : lhs.element_type();
  return Shape(t, dims);
}

// async-start: ((operand shapes), wrapped result, context...), the wrapped
// computation taking the operands.
absl::StatusOr<Shape> InferAsyncStart(Span operands, absl::Span<HloComputation* const> called,
                                      const Shape* declared) {
  constexpr HloOpcode op = HloOpcode::kAsyncStart;
  if (called.size() != 1 || called[0]->root() == nullptr) {
    return Err(op, "needs one wrapped computation (calls=)");
  }
  const HloComputation& w = *called[0];
  if (w.num_parameters() != static_cast<int64_t>(operands.size())) {
    return Err(op, absl::StrCat("has ", operands.size(), " operands but ", w.name(), " takes ",
                                w.num_parameters()));
  }
  std::vector<Shape> ins;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (w.parameter(i) == nullptr || !w.parameter(i)->shape().Compatible(*operands[i])) {
      return Err(op, absl::StrCat("operand ", i, " ", operands[i]->ToString(), " does not match ",
                                  w.name(), "'s parameter"));
    }
    ins.push_back(*operands[i]);
  }
  if (declared == nullptr || !declared->IsValid()) {
    return Shape::Tuple({Shape::Tuple(ins), w.root()->shape(), Shape(PrimitiveType::kS32, {})});
  }
  if (!declared->IsTuple() || declared->tuple_size() < 2 ||
      !declared->tuple_shapes(0).Compatible(Shape::Tuple(ins)) ||
      !declared->tuple_shapes(1).Compatible(w.root()->shape())) {
    return Err(op, absl::StrCat("shape ", declared->ToString(), " is not ((operand shapes), ",
                                w.root()->shape().ToString(), ", context...)"));
  }
  return *declared;
}

}  // namespace

bool TakesDeclaredShape(HloOpcode op) {
  switch (op) {
    case HloOpcode::kAllGatherStart:
    case HloOpcode::kAllGatherDone:
    case HloOpcode::kAllReduceStart:
    case HloOpcode::kAllReduceDone:
    case HloOpcode::kCollectivePermuteStart:
    case HloOpcode::kCollectivePermuteDone:
    case HloOpcode::kCopyStart:
    case HloOpcode::kCopyDone:
    case HloOpcode::kSend:
    case HloOpcode::kSendDone:
    case HloOpcode::kRecv:
    case HloOpcode::kRecvDone:
    case HloOpcode::kInfeed:
    case HloOpcode::kOutfeed:
    case HloOpcode::kStochasticConvert:
    case HloOpcode::kSetDimensionSize:
    case HloOpcode::kDynamicReshape:
    case HloOpcode::kRaggedDot:
    case HloOpcode::kScaledDot:
    case HloOpcode::kScan:
    case HloOpcode::kShuffle:
    case HloOpcode::kMap:
    case HloOpcode::kCollectiveBroadcast:
    case HloOpcode::kRaggedAllToAll:
    case HloOpcode::kCollectiveReduce:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Shape> InferShapeExtra(HloOpcode op, Span operands, const HloAttributes& attrs,
                                      absl::Span<HloComputation* const> called,
                                      const Shape* declared) {
  if (HasNumericShapeRule(op)) return InferShapeNumeric(op, operands, attrs, declared);
  if (TakesDeclaredShape(op)) {
    if (declared == nullptr || !declared->IsValid()) return Err(op, "result shape must be given");
    if (op == HloOpcode::kInfeed && (!declared->IsTuple() || declared->tuple_size() == 0)) {
      return Err(op, "infeed must have a non-empty tuple shape (data, token)");
    }
    if (op == HloOpcode::kDynamicReshape && operands.empty()) {
      return Err(op, "needs at least one operand");
    }
    return *declared;
  }
  switch (op) {
    case HloOpcode::kAsyncStart:
      return InferAsyncStart(operands, called, declared);
    case HloOpcode::kAsyncUpdate:
    case HloOpcode::kAsyncDone: {
      // The async-start's ((operands), result, context...) tuple passes
      // through updates; done yields the result.
      if (operands.size() != 1 || !operands[0]->IsTuple() || operands[0]->tuple_size() < 2) {
        return Err(op, "needs the ((operands), result, context) tuple of an async-start");
      }
      return op == HloOpcode::kAsyncUpdate ? *operands[0] : operands[0]->tuple_shapes(1);
    }
    case HloOpcode::kConvolution:
      return InferConvolution(operands, attrs, declared);
    case HloOpcode::kSort: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      if (attrs.dimensions.size() != 1 || attrs.dimensions[0] < 0 ||
          attrs.dimensions[0] >= operands[0]->rank()) {
        return Err(op, "needs one sort dimension within the operand's rank");
      }
      std::vector<PrimitiveType> types;
      std::vector<Shape> results;
      for (const Shape* s : operands) {
        if (s->dimensions() != operands[0]->dimensions()) {
          return Err(op, "all operands must have the same dimensions");
        }
        types.push_back(s->element_type());
        results.push_back(Shape(s->element_type(), s->dimensions()));
      }
      if (called.size() != 1) return Err(op, "needs one to_apply comparator");
      RETURN_IF_ERROR(CheckComparator(op, called[0], types));
      return results.size() == 1 ? results[0] : Shape::Tuple(results);
    }
    case HloOpcode::kTopK: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      if (in.rank() < 1) return Err(op, "needs an operand of rank >= 1");
      if (attrs.k < 0 || attrs.k > in.dimensions(in.rank() - 1)) {
        return Err(op, absl::StrCat("k=", attrs.k, " out of range for ", in.ToString()));
      }
      std::vector<int64_t> dims = in.dimensions();
      dims.back() = attrs.k;
      return Shape::Tuple({Shape(in.element_type(), dims), Shape(PrimitiveType::kS32, dims)});
    }
    case HloOpcode::kSelectAndScatter: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& operand = *operands[0];
      const Shape& source = *operands[1];
      const Shape& init = *operands[2];
      if (init.rank() != 0 || init.element_type() != source.element_type()) {
        return Err(op, "init value must be a scalar of the source type");
      }
      ASSIGN_OR_RETURN(std::vector<int64_t> windowed,
                       WindowOutputDimensions(operand.dimensions(), attrs.window));
      if (windowed != source.dimensions()) {
        return Err(op, absl::StrCat("source ", source.ToString(),
                                    " does not match the windowed operand"));
      }
      if (called.size() != 2) return Err(op, "needs select and scatter computations");
      RETURN_IF_ERROR(CheckComparator(op, called[0], {operand.element_type()}));
      return Shape(source.element_type(), operand.dimensions());
    }
    case HloOpcode::kReducePrecision:
      RETURN_IF_ERROR(NeedArrays(op, operands));
      if (!IsFloatingPoint(operands[0]->element_type())) {
        return Err(op, "needs a floating-point operand");
      }
      if (attrs.exponent_bits < 1 || attrs.mantissa_bits < 0) {
        return Err(op, "needs exponent_bits >= 1 and mantissa_bits >= 0");
      }
      return *operands[0];
    case HloOpcode::kAddDependency:
      return *operands[0];
    default:
      return absl::UnimplementedError(absl::StrCat("no shape rule for ", HloOpcodeString(op)));
  }
}

}  // namespace tpuoff::hlo
