#include "hlo/ir/shape_inference.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/shape_inference_extra.h"
#include "hlo/ir/status_macros.h"
#include "hlo/ir/window.h"

namespace tpuoff::hlo {
namespace {

using Span = absl::Span<const Shape* const>;

absl::Status Err(HloOpcode op, absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(HloOpcodeString(op), ": ", msg));
}

std::string Str(const Shape& s) { return s.ToString(); }

absl::Status NeedArrays(HloOpcode op, Span operands) {
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i]->IsArray()) {
      return Err(op, absl::StrCat("operand ", i, " must be an array, got ",
                                  Str(*operands[i])));
    }
  }
  return absl::OkStatus();
}

absl::Status NeedDeclared(HloOpcode op, const Shape* declared) {
  if (declared == nullptr || !declared->IsValid()) {
    return Err(op, "result shape must be given");
  }
  return absl::OkStatus();
}

bool IsScalarInt(const Shape& s) {
  return s.IsArray() && s.rank() == 0 && IsInteger(s.element_type());
}

absl::Status CheckDimsInRange(HloOpcode op, absl::Span<const int64_t> dims,
                              int64_t rank, bool require_unique) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      return Err(op, absl::StrCat("dimension ", d, " out of range for rank ", rank));
    }
    if (require_unique && !seen.insert(d).second) {
      return Err(op, absl::StrCat("dimension ", d, " repeated"));
    }
  }
  return absl::OkStatus();
}

// A computation's parameters must match `params` and its root `result`
// (compatible, layouts ignored).
absl::Status CheckSignature(HloOpcode op, const HloComputation* comp,
                            const std::vector<Shape>& params,
                            const Shape* result) {
  if (comp == nullptr) return Err(op, "missing called computation");
  if (comp->num_parameters() != static_cast<int64_t>(params.size())) {
    return Err(op, absl::StrCat("computation ", comp->name(), " takes ",
                                comp->num_parameters(), " parameters, expected ",
                                params.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const HloInstruction* p = comp->parameter(i);
    if (p == nullptr || !p->shape().Compatible(params[i])) {
      return Err(op, absl::StrCat("computation ", comp->name(), " parameter ", i,
                                  " is ", p ? Str(p->shape()) : "missing",
                                  ", expected ", Str(params[i])));
    }
  }
  if (result != nullptr &&
      (comp->root() == nullptr || !comp->root()->shape().Compatible(*result))) {
    return Err(op, absl::StrCat("computation ", comp->name(), " returns ",
                                comp->root() ? Str(comp->root()->shape()) : "nothing",
                                ", expected ", Str(*result)));
  }
  return absl::OkStatus();
}

// Reducer of N values: (T1..TN, T1..TN) -> T or (T1..TN).
absl::Status CheckReducer(HloOpcode op, const HloComputation* comp,
                          const std::vector<PrimitiveType>& types) {
  std::vector<Shape> params;
  std::vector<Shape> results;
  for (int pass = 0; pass < 2; ++pass) {
    for (PrimitiveType t : types) params.push_back(Shape::Scalar(t));
  }
  for (PrimitiveType t : types) results.push_back(Shape::Scalar(t));
  Shape result = types.size() == 1 ? results[0] : Shape::Tuple(results);
  return CheckSignature(op, comp, params, &result);
}

absl::StatusOr<Shape> Elementwise(HloOpcode op, Span operands) {
  RETURN_IF_ERROR(NeedArrays(op, operands));
  const Shape& a = *operands[0];
  for (const Shape* s : operands) {
    if (!s->Compatible(a)) {
      return Err(op, absl::StrCat("operand shapes differ: ", Str(a), " vs ", Str(*s)));
    }
  }
  PrimitiveType t = a.element_type();
  switch (op) {
    case HloOpcode::kNot:
    case HloOpcode::kAnd:
    case HloOpcode::kOr:
    case HloOpcode::kXor:
      if (t != PrimitiveType::kPred && !IsInteger(t)) {
        return Err(op, "needs pred or integer operands");
      }
      break;
    case HloOpcode::kShiftLeft:
    case HloOpcode::kShiftRightLogical:
    case HloOpcode::kShiftRightArithmetic:
    case HloOpcode::kPopulationCount:
    case HloOpcode::kClz:
    case HloOpcode::kMulhi:
      if (!IsInteger(t)) return Err(op, "needs integer operands");
      break;
    case HloOpcode::kRemainder:
    case HloOpcode::kMaximum:
    case HloOpcode::kMinimum:
      if (IsComplex(t)) return Err(op, "is not defined for complex operands");
      [[fallthrough]];
    case HloOpcode::kNegate:
    case HloOpcode::kAbs:
    case HloOpcode::kSign:
    case HloOpcode::kAdd:
    case HloOpcode::kSubtract:
    case HloOpcode::kMultiply:
    case HloOpcode::kDivide:
    case HloOpcode::kPower:
      if (t == PrimitiveType::kPred && op != HloOpcode::kMaximum &&
          op != HloOpcode::kMinimum) {
        return Err(op, "does not take pred operands");
      }
      break;
    // Real-only transcendental and rounding ops.
    case HloOpcode::kFloor:
    case HloOpcode::kCeil:
    case HloOpcode::kRoundNearestAfz:
    case HloOpcode::kRoundNearestEven:
    case HloOpcode::kErf:
    case HloOpcode::kCbrt:
    case HloOpcode::kAtan2:
      if (!IsFloatingPoint(t)) return Err(op, "needs floating-point operands");
      break;
    default:  // transcendental ops: real or complex
      if (!IsFloatingPoint(t) && !IsComplex(t)) {
        return Err(op, "needs floating-point or complex operands");
      }
  }
  // abs of a complex value is its (real) magnitude.
  if (op == HloOpcode::kAbs) t = ComplexComponentType(t);
  return Shape(t, a.dimensions());
}

absl::StatusOr<Shape> InferGather(Span operands, const HloAttributes& attrs) {
  const HloOpcode op = HloOpcode::kGather;
  RETURN_IF_ERROR(NeedArrays(op, operands));
  const Shape& operand = *operands[0];
  const Shape& indices = *operands[1];
  const GatherDimensionNumbers& g = attrs.gather;
  if (!IsInteger(indices.element_type())) return Err(op, "indices must be integers");
  if (static_cast<int64_t>(attrs.gather_slice_sizes.size()) != operand.rank()) {
    return Err(op, "slice_sizes must have one entry per operand dimension");
  }
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (attrs.gather_slice_sizes[i] < 0 ||
        attrs.gather_slice_sizes[i] > operand.dimensions(i)) {
      return Err(op, absl::StrCat("slice size ", attrs.gather_slice_sizes[i],
                                  " out of bounds in dimension ", i));
    }
  }
  if (g.index_vector_dim < 0 || g.index_vector_dim > indices.rank()) {
    return Err(op, "index_vector_dim out of range");
  }
  int64_t index_vector_size =
      g.index_vector_dim == indices.rank() ? 1 : indices.dimensions(g.index_vector_dim);
  if (static_cast<int64_t>(g.start_index_map.size()) != index_vector_size) {
    return Err(op, "start_index_map size must equal the index vector size");
  }
  RETURN_IF_ERROR(CheckDimsInRange(op, g.start_index_map, operand.rank(), true));
  RETURN_IF_ERROR(CheckDimsInRange(op, g.collapsed_slice_dims, operand.rank(), true));
  RETURN_IF_ERROR(CheckDimsInRange(op, g.operand_batching_dims, operand.rank(), true));
  for (int64_t d : g.collapsed_slice_dims) {
    if (attrs.gather_slice_sizes[d] > 1) {
      return Err(op, absl::StrCat("collapsed dimension ", d, " has slice size > 1"));
    }
  }
  std::vector<int64_t> batch_dims;
  for (int64_t i = 0; i < indices.rank(); ++i) {
    if (i != g.index_vector_dim) batch_dims.push_back(indices.dimensions(i));
  }
  std::vector<int64_t> offset_sizes;
  for (int64_t i = 0; i < operand.rank(); ++i) {
    bool removed =
        std::count(g.collapsed_slice_dims.begin(), g.collapsed_slice_dims.end(), i) ||
        std::count(g.operand_batching_dims.begin(), g.operand_batching_dims.end(), i);
    if (!removed) offset_sizes.push_back(attrs.gather_slice_sizes[i]);
  }
  if (offset_sizes.size() != g.offset_dims.size()) {
    return Err(op, "offset_dims must name every uncollapsed slice dimension");
  }
  const int64_t rank = batch_dims.size() + offset_sizes.size();
  RETURN_IF_ERROR(CheckDimsInRange(op, g.offset_dims, rank, true));
  std::vector<int64_t> dims(rank);
  size_t next_offset = 0, next_batch = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (std::count(g.offset_dims.begin(), g.offset_dims.end(), i)) {
      dims[i] = offset_sizes[next_offset++];
    } else {
      dims[i] = batch_dims[next_batch++];
    }
  }
  return Shape(operand.element_type(), dims);
}

absl::StatusOr<Shape> InferScatter(Span operands, const HloAttributes& attrs,
                                   absl::Span<HloComputation* const> called) {
  const HloOpcode op = HloOpcode::kScatter;
  RETURN_IF_ERROR(NeedArrays(op, operands));
  if (operands.size() < 3 || operands.size() % 2 == 0) {
    return Err(op, "needs N operands, indices and N updates");
  }
  const int64_t n = (operands.size() - 1) / 2;
  const Shape& indices = *operands[n];
  if (!IsInteger(indices.element_type())) return Err(op, "indices must be integers");
  const ScatterDimensionNumbers& s = attrs.scatter;
  std::vector<PrimitiveType> types;
  std::vector<Shape> results;
  for (int64_t i = 0; i < n; ++i) {
    const Shape& operand = *operands[i];
    const Shape& updates = *operands[n + 1 + i];
    if (!operand.Compatible(*operands[0]) &&
        operand.dimensions() != operands[0]->dimensions()) {
      return Err(op, "scatter operands must have equal dimensions");
    }
    if (updates.element_type() != operand.element_type()) {
      return Err(op, "updates must have the operand's element type");
    }
    RETURN_IF_ERROR(CheckDimsInRange(op, s.scatter_dims_to_operand_dims,
                                     operand.rank(), true));
    RETURN_IF_ERROR(CheckDimsInRange(op, s.inserted_window_dims, operand.rank(), true));
    RETURN_IF_ERROR(CheckDimsInRange(op, s.update_window_dims, updates.rank(), true));
    if (static_cast<int64_t>(s.update_window_dims.size() + s.inserted_window_dims.size() +
                             s.input_batching_dims.size()) != operand.rank()) {
      return Err(op, "window dims + inserted dims must equal the operand rank");
    }
    types.push_back(operand.element_type());
    results.push_back(operand);
  }
  if (s.index_vector_dim < 0 || s.index_vector_dim > indices.rank()) {
    return Err(op, "index_vector_dim out of range");
  }
  if (called.size() != 1) return Err(op, "needs one to_apply computation");
  RETURN_IF_ERROR(CheckReducer(op, called[0], types));
  if (n == 1) return Shape(results[0].element_type(), results[0].dimensions());
  for (Shape& r : results) r.SetDefaultLayout();
  return Shape::Tuple(results);
}

// reduce and reduce-window: N inputs, N scalar inits, an N-ary reducer.
absl::StatusOr<Shape> InferReduce(HloOpcode op, Span operands, const HloAttributes& attrs,
                                  absl::Span<HloComputation* const> called) {
  if (operands.empty() || operands.size() % 2 != 0) {
    return Err(op, "needs N inputs followed by N init values");
  }
  RETURN_IF_ERROR(NeedArrays(op, operands));
  const size_t n = operands.size() / 2;
  const Shape& first = *operands[0];
  if (op == HloOpcode::kReduce) {
    RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, first.rank(), true));
  }
  std::vector<PrimitiveType> types;
  for (size_t i = 0; i < n; ++i) {
    if (operands[i]->dimensions() != first.dimensions()) {
      return Err(op, "all inputs must have the same dimensions");
    }
    const Shape& init = *operands[n + i];
    if (init.rank() != 0 || init.element_type() != operands[i]->element_type()) {
      return Err(op, absl::StrCat("init value ", i, " must be a scalar of the input type, got ",
                                  Str(init)));
    }
    types.push_back(operands[i]->element_type());
  }
  if (called.size() != 1) return Err(op, "needs one to_apply computation");
  RETURN_IF_ERROR(CheckReducer(op, called[0], types));
  std::vector<int64_t> dims;
  if (op == HloOpcode::kReduceWindow) {
    auto windowed = WindowOutputDimensions(first.dimensions(), attrs.window);
    if (!windowed.ok()) return Err(op, windowed.status().message());
    dims = *std::move(windowed);
  }
  for (int64_t i = 0; i < first.rank() && op == HloOpcode::kReduce; ++i) {
    if (!std::count(attrs.dimensions.begin(), attrs.dimensions.end(), i)) {
      dims.push_back(first.dimensions(i));
    }
  }
  if (n == 1) return Shape(types[0], dims);
  std::vector<Shape> results;
  for (PrimitiveType t : types) results.push_back(Shape(t, dims));
  return Shape::Tuple(results);
}

absl::StatusOr<Shape> InferDot(Span operands, const HloAttributes& attrs,
                               const Shape* declared) {
  const HloOpcode op = HloOpcode::kDot;
  RETURN_IF_ERROR(NeedArrays(op, operands));
  const Shape& lhs = *operands[0];
  const Shape& rhs = *operands[1];
  const DotDimensionNumbers& d = attrs.dot;
  RETURN_IF_ERROR(CheckDimsInRange(op, d.lhs_contracting_dimensions, lhs.rank(), true));
  RETURN_IF_ERROR(CheckDimsInRange(op, d.rhs_contracting_dimensions, rhs.rank(), true));
  RETURN_IF_ERROR(CheckDimsInRange(op, d.lhs_batch_dimensions, lhs.rank(), true));
  RETURN_IF_ERROR(CheckDimsInRange(op, d.rhs_batch_dimensions, rhs.rank(), true));
  if (d.lhs_contracting_dimensions.size() != d.rhs_contracting_dimensions.size() ||
      d.lhs_batch_dimensions.size() != d.rhs_batch_dimensions.size()) {
    return Err(op, "lhs and rhs must name as many contracting and batch dimensions");
  }
  for (size_t i = 0; i < d.lhs_contracting_dimensions.size(); ++i) {
    if (lhs.dimensions(d.lhs_contracting_dimensions[i]) !=
        rhs.dimensions(d.rhs_contracting_dimensions[i])) {
      return Err(op, absl::StrCat("contracting dimension sizes differ: ", Str(lhs),
                                  " vs ", Str(rhs)));
    }
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < d.lhs_batch_dimensions.size(); ++i) {
    int64_t size = lhs.dimensions(d.lhs_batch_dimensions[i]);
    if (size != rhs.dimensions(d.rhs_batch_dimensions[i])) {
      return Err(op, "batch dimension sizes differ");
    }
    dims.push_back(size);
  }
  auto free_dims = [&](const Shape& s, const std::vector<int64_t>& contract,
                       const std::vector<int64_t>& batch) {
    for (int64_t i = 0; i < s.rank(); ++i) {
      if (!std::count(contract.begin(), contract.end(), i) &&
          !std::count(batch.begin(), batch.end(), i)) {
        dims.push_back(s.dimensions(i));
      }
    }
  };
  free_dims(lhs, d.lhs_contracting_dimensions, d.lhs_batch_dimensions);
  free_dims(rhs, d.rhs_contracting_dimensions, d.rhs_batch_dimensions);
  // The result type may differ (preferred element type, e.g. bf16 x bf16 -> f32).
  PrimitiveType type = declared && declared->IsArray() ? declared->element_type()
                                                       : lhs.element_type();
  return Shape(type, dims);
}

// Shape of a collective's result given the per-operand rule.
absl::StatusOr<Shape> InferCollective(HloOpcode op, Span operands,
                                      const HloAttributes& attrs,
                                      absl::Span<HloComputation* const> called,
                                      const Shape* declared) {
  RETURN_IF_ERROR(NeedArrays(op, operands));
  if (operands.empty()) return Err(op, "needs at least one operand");
  const int64_t group = ReplicaGroupSize(attrs.replica_groups);
  std::vector<Shape> results;
  std::vector<PrimitiveType> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    Shape s(operands[i]->element_type(), operands[i]->dimensions());
    types.push_back(s.element_type());
    const Shape* decl_i = nullptr;
    if (declared != nullptr && declared->IsValid()) {
      decl_i = declared->IsTuple() && i < static_cast<size_t>(declared->tuple_size())
                   ? &declared->tuple_shapes(i)
                   : declared;
    }
    if (op == HloOpcode::kAllGather || op == HloOpcode::kReduceScatter) {
      if (attrs.dimensions.size() != 1) return Err(op, "needs one dimension");
      const int64_t dim = attrs.dimensions[0];
      RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, s.rank(), true));
      if (group > 0) {
        if (op == HloOpcode::kAllGather) {
          s.set_dimension(dim, s.dimensions(dim) * group);
        } else {
          if (s.dimensions(dim) % group != 0) {
            return Err(op, absl::StrCat("dimension ", dim, " of size ", s.dimensions(dim),
                                        " is not divisible by the group size ", group));
          }
          s.set_dimension(dim, s.dimensions(dim) / group);
        }
      } else {
        if (decl_i == nullptr) return Err(op, "result shape must be given");
        s = Shape(decl_i->element_type(), decl_i->dimensions());
      }
    }
    results.push_back(s);
  }
  if (op == HloOpcode::kAllReduce || op == HloOpcode::kReduceScatter) {
    if (called.size() != 1) return Err(op, "needs one to_apply computation");
    for (PrimitiveType t : types) {
      RETURN_IF_ERROR(CheckReducer(op, called[0], {t}));
    }
  }
  if (results.size() == 1) return results[0];
  return Shape::Tuple(results);
}

}  // namespace

int64_t ReplicaGroupSize(const ReplicaGroups& groups) {
  if (groups.groups.empty()) return 0;
  return static_cast<int64_t>(groups.groups[0].size());
}

absl::StatusOr<Shape> InferShape(HloOpcode op, Span operands,
                                 const HloAttributes& attrs,
                                 absl::Span<HloComputation* const> called,
                                 const Shape* declared) {
  const int arity = OpcodeArity(op);
  if (arity != kVariadic && static_cast<int>(operands.size()) != arity) {
    return Err(op, absl::StrCat("expects ", arity, " operands, got ", operands.size()));
  }
  // The table's minimum: every rule below may read that many operands.
  if (static_cast<int64_t>(operands.size()) < OpcodeMinOperands(op)) {
    return Err(op, absl::StrCat("expects at least ", OpcodeMinOperands(op), " operands, got ",
                                operands.size()));
  }
  if (IsElementwiseUnary(op) || IsElementwiseBinary(op)) {
    return Elementwise(op, operands);
  }
  switch (op) {
    case HloOpcode::kParameter:
    case HloOpcode::kCustomCall:
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      return *declared;
    case HloOpcode::kConstant:
    case HloOpcode::kIota: {
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      if (!declared->IsArray()) return Err(op, "result must be an array");
      if (op == HloOpcode::kIota) {
        if (attrs.dimensions.size() != 1) return Err(op, "needs iota_dimension");
        RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, declared->rank(), true));
      }
      return Shape(declared->element_type(), declared->dimensions());
    }
    case HloOpcode::kIsFinite: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      if (!IsFloatingPoint(operands[0]->element_type())) {
        return Err(op, "needs a floating-point operand");
      }
      return Shape(PrimitiveType::kPred, operands[0]->dimensions());
    }
    case HloOpcode::kCompare: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      if (!operands[0]->Compatible(*operands[1])) {
        return Err(op, absl::StrCat("operand shapes differ: ", Str(*operands[0]), " vs ",
                                    Str(*operands[1])));
      }
      return Shape(PrimitiveType::kPred, operands[0]->dimensions());
    }
    case HloOpcode::kSelect: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& pred = *operands[0];
      if (pred.element_type() != PrimitiveType::kPred) {
        return Err(op, "predicate must be pred");
      }
      if (!operands[1]->Compatible(*operands[2])) {
        return Err(op, "on_true and on_false shapes differ");
      }
      if (pred.rank() != 0 && pred.dimensions() != operands[1]->dimensions()) {
        return Err(op, "predicate dimensions differ from the operands'");
      }
      return Shape(operands[1]->element_type(), operands[1]->dimensions());
    }
    case HloOpcode::kClamp: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& x = *operands[1];
      for (int i : {0, 2}) {
        const Shape& b = *operands[i];
        if (b.element_type() != x.element_type() ||
            (b.rank() != 0 && b.dimensions() != x.dimensions())) {
          return Err(op, "bounds must be scalars or match the operand");
        }
      }
      return Shape(x.element_type(), x.dimensions());
    }
    case HloOpcode::kBroadcast: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      const Shape& in = *operands[0];
      if (static_cast<int64_t>(attrs.dimensions.size()) != in.rank()) {
        return Err(op, "dimensions must map every operand dimension");
      }
      RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, declared->rank(), true));
      for (int64_t i = 0; i < in.rank(); ++i) {
        if (declared->dimensions(attrs.dimensions[i]) != in.dimensions(i)) {
          return Err(op, absl::StrCat("operand dimension ", i, " (", in.dimensions(i),
                                      ") does not match result dimension ",
                                      attrs.dimensions[i]));
        }
      }
      return Shape(in.element_type(), declared->dimensions());
    }
    case HloOpcode::kReshape:
    case HloOpcode::kBitcast: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      if (!declared->IsArray() ||
          declared->num_elements() != operands[0]->num_elements() ||
          (op == HloOpcode::kReshape &&
           declared->element_type() != operands[0]->element_type())) {
        return Err(op, absl::StrCat("cannot reshape ", Str(*operands[0]), " to ",
                                    Str(*declared)));
      }
      return Shape(declared->element_type(), declared->dimensions());
    }
    case HloOpcode::kTranspose: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      if (static_cast<int64_t>(attrs.dimensions.size()) != in.rank()) {
        return Err(op, "dimensions must be a permutation of the operand's");
      }
      RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, in.rank(), true));
      std::vector<int64_t> dims;
      for (int64_t d : attrs.dimensions) dims.push_back(in.dimensions(d));
      return Shape(in.element_type(), dims);
    }
    case HloOpcode::kConvert: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      if (IsComplex(operands[0]->element_type()) && declared->IsArray() &&
          !IsComplex(declared->element_type())) {
        return Err(op, absl::StrCat("conversion from complex to real type ",
                                    PrimitiveTypeName(operands[0]->element_type()), " => ",
                                    PrimitiveTypeName(declared->element_type()),
                                    " is not defined (use real/imag)"));
      }
      return Shape(declared->element_type(), operands[0]->dimensions());
    }
    case HloOpcode::kReal:
    case HloOpcode::kImag: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const PrimitiveType t = operands[0]->element_type();
      if (!IsComplex(t) && !IsFloatingPoint(t)) {
        return Err(op, "needs a complex or floating-point operand");
      }
      return Shape(ComplexComponentType(t), operands[0]->dimensions());
    }
    case HloOpcode::kComplex: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& re = *operands[0];
      const Shape& im = *operands[1];
      if (re.element_type() != im.element_type() ||
          (re.element_type() != PrimitiveType::kF32 &&
           re.element_type() != PrimitiveType::kF64)) {
        return Err(op, "needs two f32 or two f64 operands");
      }
      if (re.dimensions() != im.dimensions()) {
        return Err(op, absl::StrCat("operand shapes differ: ", Str(re), " vs ", Str(im)));
      }
      return Shape(re.element_type() == PrimitiveType::kF32 ? PrimitiveType::kC64
                                                            : PrimitiveType::kC128,
                   re.dimensions());
    }
    case HloOpcode::kBitcastConvert: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      RETURN_IF_ERROR(NeedDeclared(op, declared));
      const Shape& in = *operands[0];
      const int64_t from = ByteWidth(in.element_type());
      const int64_t to = ByteWidth(declared->element_type());
      if (!declared->IsArray() || from <= 0 || to <= 0) {
        return Err(op, absl::StrCat("cannot reinterpret ", Str(in), " as ", Str(*declared)));
      }
      std::vector<int64_t> dims = in.dimensions();
      if (to < from) {
        dims.push_back(from / to);
      } else if (to > from) {
        if (dims.empty() || dims.back() != to / from) {
          return Err(op, "minor dimension must equal the width ratio");
        }
        dims.pop_back();
      }
      return Shape(declared->element_type(), dims);
    }
    case HloOpcode::kCopy:
    case HloOpcode::kOptimizationBarrier:
      return *operands[0];
    case HloOpcode::kCollectivePermute: {
      // One operand, or several permuted together (a tuple of them).
      if (operands.size() == 1) return *operands[0];
      // In place (slice_sizes=): (input, output, input offsets, output
      // offsets); the result is the updated output.
      if (!attrs.permute_slice_sizes.empty()) {
        if (operands.size() != 4) return Err(op, "in place takes input, output and two offsets");
        return *operands[1];
      }
      std::vector<Shape> elements;
      for (const Shape* s : operands) elements.push_back(*s);
      return Shape::Tuple(elements);
    }
    case HloOpcode::kReverse: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, operands[0]->rank(), true));
      return *operands[0];
    }
    case HloOpcode::kSlice: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      if (static_cast<int64_t>(attrs.slice.size()) != in.rank()) {
        return Err(op, "needs one [start:limit:stride] per dimension");
      }
      std::vector<int64_t> dims;
      for (int64_t i = 0; i < in.rank(); ++i) {
        const SliceDimension& s = attrs.slice[i];
        if (s.start < 0 || s.start > s.limit || s.limit > in.dimensions(i) ||
            s.stride <= 0) {
          return Err(op, absl::StrCat("bad slice [", s.start, ":", s.limit, ":", s.stride,
                                      "] for dimension ", i, " of size ", in.dimensions(i)));
        }
        const int64_t extent = s.limit - s.start;  // 0 <= extent <= the dimension
        dims.push_back(extent == 0 ? 0 : (extent - 1) / s.stride + 1);
      }
      return Shape(in.element_type(), dims);
    }
    case HloOpcode::kDynamicSlice: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      if (static_cast<int64_t>(operands.size()) != 1 + in.rank()) {
        return Err(op, "needs one scalar start index per operand dimension");
      }
      for (size_t i = 1; i < operands.size(); ++i) {
        if (!IsScalarInt(*operands[i])) return Err(op, "start indices must be integer scalars");
      }
      if (static_cast<int64_t>(attrs.dynamic_slice_sizes.size()) != in.rank()) {
        return Err(op, "dynamic_slice_sizes must have one entry per dimension");
      }
      for (int64_t i = 0; i < in.rank(); ++i) {
        int64_t size = attrs.dynamic_slice_sizes[i];
        if (size < 0 || size > in.dimensions(i)) {
          return Err(op, absl::StrCat("slice size ", size, " out of bounds in dimension ", i));
        }
      }
      return Shape(in.element_type(), attrs.dynamic_slice_sizes);
    }
    case HloOpcode::kDynamicUpdateSlice: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      const Shape& update = *operands[1];
      if (static_cast<int64_t>(operands.size()) != 2 + in.rank()) {
        return Err(op, "needs one scalar start index per operand dimension");
      }
      if (update.rank() != in.rank() || update.element_type() != in.element_type()) {
        return Err(op, "update must have the operand's rank and type");
      }
      for (int64_t i = 0; i < in.rank(); ++i) {
        if (update.dimensions(i) > in.dimensions(i)) {
          return Err(op, "update larger than the operand");
        }
      }
      for (size_t i = 2; i < operands.size(); ++i) {
        if (!IsScalarInt(*operands[i])) return Err(op, "start indices must be integer scalars");
      }
      return Shape(in.element_type(), in.dimensions());
    }
    case HloOpcode::kConcatenate: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& first = *operands[0];
      if (attrs.dimensions.size() != 1) return Err(op, "needs one dimension");
      const int64_t dim = attrs.dimensions[0];
      RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, first.rank(), true));
      std::vector<int64_t> dims = first.dimensions();
      dims[dim] = 0;
      for (const Shape* s : operands) {
        if (s->rank() != first.rank() || s->element_type() != first.element_type()) {
          return Err(op, "operands must share rank and type");
        }
        for (int64_t i = 0; i < first.rank(); ++i) {
          if (i != dim && s->dimensions(i) != first.dimensions(i)) {
            return Err(op, "operands differ outside the concatenated dimension");
          }
        }
        dims[dim] += s->dimensions(dim);
      }
      return Shape(first.element_type(), dims);
    }
    case HloOpcode::kPad: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      const Shape& in = *operands[0];
      if (operands[1]->rank() != 0 || operands[1]->element_type() != in.element_type()) {
        return Err(op, "padding value must be a scalar of the operand type");
      }
      if (static_cast<int64_t>(attrs.padding.size()) != in.rank()) {
        return Err(op, "padding must have one entry per dimension");
      }
      std::vector<int64_t> dims;
      for (int64_t i = 0; i < in.rank(); ++i) {
        const PaddingDimension& p = attrs.padding[i];
        if (p.interior_padding < 0) return Err(op, "negative interior padding");
        const int64_t size = in.dimensions(i);
        int64_t interior = 0, out = 0;
        if (__builtin_mul_overflow(std::max<int64_t>(size - 1, 0), p.interior_padding,
                                   &interior) ||
            __builtin_add_overflow(size, interior, &out) ||
            __builtin_add_overflow(out, p.edge_padding_low, &out) ||
            __builtin_add_overflow(out, p.edge_padding_high, &out)) {
          return Err(op, absl::StrCat("padding of dimension ", i, " overflows"));
        }
        if (out < 0) return Err(op, "padding yields a negative size");
        dims.push_back(out);
      }
      return Shape(in.element_type(), dims);
    }
    case HloOpcode::kReduce:
    case HloOpcode::kReduceWindow:
      return InferReduce(op, operands, attrs, called);
    case HloOpcode::kDot:
      return InferDot(operands, attrs, declared);
    case HloOpcode::kGather:
      return InferGather(operands, attrs);
    case HloOpcode::kScatter:
      return InferScatter(operands, attrs, called);
    case HloOpcode::kTuple: {
      std::vector<Shape> elements;
      for (const Shape* s : operands) elements.push_back(*s);
      return Shape::Tuple(elements);
    }
    case HloOpcode::kGetTupleElement: {
      const Shape& t = *operands[0];
      if (!t.IsTuple()) return Err(op, "operand must be a tuple");
      if (attrs.tuple_index < 0 || attrs.tuple_index >= t.tuple_size()) {
        return Err(op, absl::StrCat("index ", attrs.tuple_index, " out of range for ",
                                    Str(t)));
      }
      return t.tuple_shapes(attrs.tuple_index);
    }
    case HloOpcode::kWhile: {
      if (called.size() != 2) return Err(op, "needs body and condition");
      const Shape& state = *operands[0];
      RETURN_IF_ERROR(CheckSignature(op, called[0], {state}, &state));
      Shape pred = Shape::Scalar(PrimitiveType::kPred);
      RETURN_IF_ERROR(CheckSignature(op, called[1], {state}, &pred));
      return state;
    }
    case HloOpcode::kCall:
    case HloOpcode::kFusion: {
      if (called.size() != 1) return Err(op, "needs one called computation");
      std::vector<Shape> params;
      for (const Shape* s : operands) params.push_back(*s);
      RETURN_IF_ERROR(CheckSignature(op, called[0], params, nullptr));
      if (called[0]->root() == nullptr) return Err(op, "called computation is empty");
      return called[0]->root()->shape();
    }
    case HloOpcode::kConditional: {
      const Shape& sel = *operands[0];
      const bool is_pred = sel.element_type() == PrimitiveType::kPred;
      if (sel.rank() != 0 || (!is_pred && sel.element_type() != PrimitiveType::kS32)) {
        return Err(op, "selector must be pred[] or s32[]");
      }
      if (called.empty() || (is_pred && called.size() != 2)) {
        return Err(op, "needs one computation per branch (two for a pred selector)");
      }
      if (operands.size() != called.size() + 1) {
        return Err(op, "needs one operand per branch");
      }
      const HloInstruction* root0 = called[0]->root();
      if (root0 == nullptr) return Err(op, "branch is empty");
      for (size_t i = 0; i < called.size(); ++i) {
        RETURN_IF_ERROR(CheckSignature(op, called[i], {*operands[i + 1]}, &root0->shape()));
      }
      return root0->shape();
    }
    case HloOpcode::kPartitionId:
    case HloOpcode::kReplicaId:
      return Shape::Scalar(PrimitiveType::kU32);
    case HloOpcode::kAfterAll:
      return Shape::Token();
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllGather:
    case HloOpcode::kReduceScatter:
      return InferCollective(op, operands, attrs, called, declared);
    case HloOpcode::kAllToAll: {
      RETURN_IF_ERROR(NeedArrays(op, operands));
      if (!attrs.dimensions.empty()) {
        if (operands.size() != 1) return Err(op, "array form takes one operand");
        RETURN_IF_ERROR(CheckDimsInRange(op, attrs.dimensions, operands[0]->rank(), true));
        const int64_t group = ReplicaGroupSize(attrs.replica_groups);
        if (group > 0 && operands[0]->dimensions(attrs.dimensions[0]) % group != 0) {
          return Err(op, "split dimension not divisible by the group size");
        }
        return *operands[0];
      }
      std::vector<Shape> elements;
      for (const Shape* s : operands) elements.push_back(*s);
      return Shape::Tuple(elements);
    }
    default:
      return InferShapeExtra(op, operands, attrs, called, declared);
  }
}

}  // namespace tpuoff::hlo
