#include "hlo/ir/builder.h"

#include "absl/strings/str_cat.h"
#include "hlo/ir/shape_inference.h"
#include "hlo/ir/status_macros.h"
#include "hlo/ir/verifier.h"

namespace tpuoff::hlo {
namespace {

const Shape& InvalidShape() {
  static const Shape* shape = new Shape();
  return *shape;
}

}  // namespace

const Shape& XlaOp::shape() const { return instr_ ? instr_->shape() : InvalidShape(); }

XlaBuilder::XlaBuilder(std::string module_name)
    : name_(module_name),
      owned_module_(std::make_unique<HloModule>(module_name)),
      module_(owned_module_.get()),
      computation_(std::make_unique<HloComputation>(module_name)) {}

XlaBuilder::XlaBuilder(std::string name, XlaBuilder* parent)
    : name_(name),
      parent_(parent),
      module_(parent->module_),
      computation_(std::make_unique<HloComputation>(name)) {}

XlaBuilder::~XlaBuilder() = default;

std::unique_ptr<XlaBuilder> XlaBuilder::CreateSubBuilder(const std::string& name) {
  return std::unique_ptr<XlaBuilder>(new XlaBuilder(root_builder()->UniqueName(name), this));
}

void XlaBuilder::ReportError(absl::Status status) {
  if (first_error_.ok()) first_error_ = std::move(status);
  if (parent_ != nullptr) parent_->ReportError(first_error_);
}

const absl::Status& XlaBuilder::first_error() const { return first_error_; }

std::string XlaBuilder::UniqueName(const std::string& base) {
  XlaBuilder* root = root_builder();
  int64_t& count = root->name_counts_[base];
  std::string name = count == 0 ? base : absl::StrCat(base, ".", count);
  ++count;
  // A generated name may collide with an explicit one ("add.1"): retry.
  while (root->name_counts_.count(name) && name != base) {
    name = absl::StrCat(base, ".", count++);
  }
  if (name != base) root->name_counts_[name] = 1;
  return name;
}

XlaOp XlaBuilder::Add(std::unique_ptr<HloInstruction> instr) {
  if (instr->name().empty()) {
    instr->set_name(UniqueName(std::string(HloOpcodeString(instr->opcode()))));
  }
  return XlaOp(computation_->AddInstruction(std::move(instr)), this);
}

bool XlaBuilder::CheckOps(absl::Span<const XlaOp> ops) {
  if (!first_error_.ok()) return false;
  for (const XlaOp& op : ops) {
    if (!op.valid()) {
      ReportError(absl::InvalidArgumentError(absl::StrCat(name_, ": invalid operand")));
      return false;
    }
    if (op.builder() != this) {
      ReportError(absl::InvalidArgumentError(
          absl::StrCat(name_, ": operand ", op.instruction()->name(),
                       " belongs to another computation")));
      return false;
    }
  }
  return true;
}

XlaOp XlaBuilder::AddOp(HloOpcode op, absl::Span<const XlaOp> operands,
                        HloAttributes attrs, std::vector<HloComputation*> called,
                        const Shape* declared) {
  if (!CheckOps(operands)) return XlaOp();
  std::vector<const Shape*> shapes;
  std::vector<HloInstruction*> instrs;
  for (const XlaOp& o : operands) {
    shapes.push_back(&o.shape());
    instrs.push_back(o.instruction());
  }
  absl::StatusOr<Shape> shape = InferShape(op, shapes, attrs, called, declared);
  if (!shape.ok()) {
    ReportError(absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", shape.status().message())));
    return XlaOp();
  }
  return Add(HloInstruction::Create(op, *std::move(shape), std::move(instrs),
                                    std::move(attrs), std::move(called)));
}

XlaOp XlaBuilder::Parameter(int64_t number, const Shape& shape, const std::string& name) {
  if (!first_error_.ok()) return XlaOp();
  if (number < 0 || (number < computation_->num_parameters() &&
                     computation_->parameter(number) != nullptr)) {
    ReportError(absl::InvalidArgumentError(
        absl::StrCat(name_, ": parameter number ", number, " invalid or used twice")));
    return XlaOp();
  }
  return Add(HloInstruction::CreateParameter(number, shape, UniqueName(name)));
}

XlaOp XlaBuilder::Constant(Literal literal) {
  if (!first_error_.ok()) return XlaOp();
  return Add(HloInstruction::CreateConstant(std::move(literal)));
}

XlaOp XlaBuilder::ScalarConstant(PrimitiveType type, double v) {
  Literal lit(Shape::Scalar(type));
  lit.SetFromDouble(0, v);
  return Constant(std::move(lit));
}

XlaOp XlaBuilder::Iota(const Shape& shape, int64_t dimension) {
  HloAttributes attrs;
  attrs.dimensions = {dimension};
  return AddOp(HloOpcode::kIota, {}, attrs, {}, &shape);
}

XlaOp XlaBuilder::PartitionId() { return AddOp(HloOpcode::kPartitionId, {}); }
XlaOp XlaBuilder::ReplicaId() { return AddOp(HloOpcode::kReplicaId, {}); }

XlaOp XlaBuilder::Unary(HloOpcode op, XlaOp x) { return AddOp(op, {x}); }

XlaOp XlaBuilder::BroadcastScalarTo(XlaOp scalar, const Shape& like) {
  return BroadcastInDim(scalar, like.dimensions(), {});
}

XlaOp XlaBuilder::Binary(HloOpcode op, XlaOp a, XlaOp b) {
  if (!CheckOps({a, b})) return XlaOp();
  if (a.shape().rank() == 0 && b.shape().rank() > 0) a = BroadcastScalarTo(a, b.shape());
  if (b.shape().rank() == 0 && a.shape().rank() > 0) b = BroadcastScalarTo(b, a.shape());
  return AddOp(op, {a, b});
}

XlaOp XlaBuilder::Compare(XlaOp a, XlaOp b, ComparisonDirection dir) {
  if (!CheckOps({a, b})) return XlaOp();
  if (a.shape().rank() == 0 && b.shape().rank() > 0) a = BroadcastScalarTo(a, b.shape());
  if (b.shape().rank() == 0 && a.shape().rank() > 0) b = BroadcastScalarTo(b, a.shape());
  HloAttributes attrs;
  attrs.comparison_direction = dir;
  return AddOp(HloOpcode::kCompare, {a, b}, attrs);
}

XlaOp XlaBuilder::Select(XlaOp pred, XlaOp on_true, XlaOp on_false) {
  if (!CheckOps({pred, on_true, on_false})) return XlaOp();
  const Shape& like = pred.shape().rank() > 0 ? pred.shape()
                      : on_true.shape().rank() > 0 ? on_true.shape()
                                                   : on_false.shape();
  if (on_true.shape().rank() == 0 && like.rank() > 0) on_true = BroadcastScalarTo(on_true, like);
  if (on_false.shape().rank() == 0 && like.rank() > 0) on_false = BroadcastScalarTo(on_false, like);
  if (pred.shape().rank() == 0 && like.rank() > 0) pred = BroadcastScalarTo(pred, like);
  return AddOp(HloOpcode::kSelect, {pred, on_true, on_false});
}

XlaOp XlaBuilder::Clamp(XlaOp lo, XlaOp x, XlaOp hi) {
  return AddOp(HloOpcode::kClamp, {lo, x, hi});
}

XlaOp XlaBuilder::BroadcastInDim(XlaOp x, absl::Span<const int64_t> out_dims,
                                 absl::Span<const int64_t> broadcast_dimensions) {
  if (!CheckOps({x})) return XlaOp();
  HloAttributes attrs;
  attrs.dimensions.assign(broadcast_dimensions.begin(), broadcast_dimensions.end());
  Shape declared(x.shape().element_type(), {out_dims.begin(), out_dims.end()});
  return AddOp(HloOpcode::kBroadcast, {x}, attrs, {}, &declared);
}

XlaOp XlaBuilder::Reshape(XlaOp x, absl::Span<const int64_t> dims) {
  if (!CheckOps({x})) return XlaOp();
  Shape declared(x.shape().element_type(), {dims.begin(), dims.end()});
  return AddOp(HloOpcode::kReshape, {x}, {}, {}, &declared);
}

XlaOp XlaBuilder::Transpose(XlaOp x, absl::Span<const int64_t> permutation) {
  HloAttributes attrs;
  attrs.dimensions.assign(permutation.begin(), permutation.end());
  return AddOp(HloOpcode::kTranspose, {x}, attrs);
}

XlaOp XlaBuilder::Convert(XlaOp x, PrimitiveType type) {
  if (!CheckOps({x})) return XlaOp();
  Shape declared(type, x.shape().dimensions());
  return AddOp(HloOpcode::kConvert, {x}, {}, {}, &declared);
}

XlaOp XlaBuilder::BitcastConvert(XlaOp x, PrimitiveType type) {
  if (!CheckOps({x})) return XlaOp();
  Shape declared(type, {});
  return AddOp(HloOpcode::kBitcastConvert, {x}, {}, {}, &declared);
}

XlaOp XlaBuilder::Slice(XlaOp x, absl::Span<const int64_t> starts,
                        absl::Span<const int64_t> limits,
                        absl::Span<const int64_t> strides) {
  HloAttributes attrs;
  for (size_t i = 0; i < starts.size(); ++i) {
    attrs.slice.push_back({starts[i], i < limits.size() ? limits[i] : 0,
                           i < strides.size() ? strides[i] : 1});
  }
  return AddOp(HloOpcode::kSlice, {x}, attrs);
}

XlaOp XlaBuilder::DynamicSlice(XlaOp x, absl::Span<const XlaOp> starts,
                               absl::Span<const int64_t> sizes) {
  std::vector<XlaOp> operands = {x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  HloAttributes attrs;
  attrs.dynamic_slice_sizes.assign(sizes.begin(), sizes.end());
  return AddOp(HloOpcode::kDynamicSlice, operands, attrs);
}

XlaOp XlaBuilder::DynamicUpdateSlice(XlaOp x, XlaOp update,
                                     absl::Span<const XlaOp> starts) {
  std::vector<XlaOp> operands = {x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return AddOp(HloOpcode::kDynamicUpdateSlice, operands);
}

XlaOp XlaBuilder::Concatenate(absl::Span<const XlaOp> xs, int64_t dimension) {
  HloAttributes attrs;
  attrs.dimensions = {dimension};
  return AddOp(HloOpcode::kConcatenate, xs, attrs);
}

XlaOp XlaBuilder::Pad(XlaOp x, XlaOp value, std::vector<PaddingDimension> padding) {
  HloAttributes attrs;
  attrs.padding = std::move(padding);
  return AddOp(HloOpcode::kPad, {x, value}, attrs);
}

XlaOp XlaBuilder::Reverse(XlaOp x, absl::Span<const int64_t> dims) {
  HloAttributes attrs;
  attrs.dimensions.assign(dims.begin(), dims.end());
  return AddOp(HloOpcode::kReverse, {x}, attrs);
}

XlaOp XlaBuilder::Reduce(absl::Span<const XlaOp> inputs, absl::Span<const XlaOp> inits,
                         HloComputation* reducer, absl::Span<const int64_t> dims) {
  std::vector<XlaOp> operands(inputs.begin(), inputs.end());
  operands.insert(operands.end(), inits.begin(), inits.end());
  HloAttributes attrs;
  attrs.dimensions.assign(dims.begin(), dims.end());
  return AddOp(HloOpcode::kReduce, operands, attrs, {reducer});
}

XlaOp XlaBuilder::Reduce(XlaOp input, XlaOp init, HloOpcode reducer_op,
                         absl::Span<const int64_t> dims) {
  if (!CheckOps({input, init})) return XlaOp();
  return Reduce({input}, {init}, ScalarReducer(reducer_op, input.shape().element_type()),
                dims);
}

HloComputation* XlaBuilder::ScalarReducer(HloOpcode op, PrimitiveType type) {
  XlaBuilder* root = root_builder();
  auto key = std::make_pair(static_cast<int>(op), static_cast<int>(type));
  auto it = root->reducers_.find(key);
  if (it != root->reducers_.end()) return it->second;
  auto sub = root->CreateSubBuilder(absl::StrCat(HloOpcodeString(op), "_",
                                                 PrimitiveTypeName(type)));
  XlaOp a = sub->Parameter(0, Shape::Scalar(type), "lhs");
  XlaOp b = sub->Parameter(1, Shape::Scalar(type), "rhs");
  absl::StatusOr<HloComputation*> comp = sub->BuildComputation(sub->Binary(op, a, b));
  if (!comp.ok()) {
    ReportError(comp.status());
    return nullptr;
  }
  root->reducers_[key] = *comp;
  return *comp;
}

XlaOp XlaBuilder::Dot(XlaOp lhs, XlaOp rhs, const DotDimensionNumbers& dnums,
                      PrimitiveType result_type, std::vector<std::string> operand_precision) {
  HloAttributes attrs;
  attrs.dot = dnums;
  attrs.operand_precision = std::move(operand_precision);
  Shape declared(result_type, {});
  return AddOp(HloOpcode::kDot, {lhs, rhs}, attrs, {},
               result_type == PrimitiveType::kInvalid ? nullptr : &declared);
}

XlaOp XlaBuilder::Gather(XlaOp operand, XlaOp indices, const GatherDimensionNumbers& dnums,
                         absl::Span<const int64_t> slice_sizes) {
  HloAttributes attrs;
  attrs.gather = dnums;
  attrs.gather_slice_sizes.assign(slice_sizes.begin(), slice_sizes.end());
  return AddOp(HloOpcode::kGather, {operand, indices}, attrs);
}

XlaOp XlaBuilder::Scatter(XlaOp operand, XlaOp indices, XlaOp updates,
                          HloComputation* combiner, const ScatterDimensionNumbers& dnums) {
  HloAttributes attrs;
  attrs.scatter = dnums;
  return AddOp(HloOpcode::kScatter, {operand, indices, updates}, attrs, {combiner});
}

XlaOp XlaBuilder::Tuple(absl::Span<const XlaOp> elements) {
  return AddOp(HloOpcode::kTuple, elements);
}

XlaOp XlaBuilder::GetTupleElement(XlaOp tuple, int64_t index) {
  HloAttributes attrs;
  attrs.tuple_index = index;
  return AddOp(HloOpcode::kGetTupleElement, {tuple}, attrs);
}

XlaOp XlaBuilder::While(HloComputation* condition, HloComputation* body, XlaOp init) {
  return AddOp(HloOpcode::kWhile, {init}, {}, {body, condition});
}

XlaOp XlaBuilder::Call(HloComputation* callee, absl::Span<const XlaOp> args) {
  return AddOp(HloOpcode::kCall, args, {}, {callee});
}

XlaOp XlaBuilder::Conditional(XlaOp selector, absl::Span<HloComputation* const> branches,
                              absl::Span<const XlaOp> args) {
  std::vector<XlaOp> operands = {selector};
  operands.insert(operands.end(), args.begin(), args.end());
  return AddOp(HloOpcode::kConditional, operands, {}, {branches.begin(), branches.end()});
}

XlaOp XlaBuilder::AllReduce(XlaOp x, HloComputation* reducer, const ReplicaGroups& groups) {
  HloAttributes attrs;
  attrs.replica_groups = groups;
  attrs.channel_id = root_builder()->next_channel_id_++;
  attrs.use_global_device_ids = true;
  return AddOp(HloOpcode::kAllReduce, {x}, attrs, {reducer});
}

int64_t XlaBuilder::NextChannelId() { return root_builder()->next_channel_id_++; }

XlaOp XlaBuilder::AllGather(XlaOp x, int64_t dimension, const ReplicaGroups& groups) {
  HloAttributes attrs;
  attrs.replica_groups = groups;
  attrs.dimensions = {dimension};
  attrs.channel_id = root_builder()->next_channel_id_++;
  attrs.use_global_device_ids = true;
  return AddOp(HloOpcode::kAllGather, {x}, attrs);
}

XlaOp XlaBuilder::ReduceScatter(XlaOp x, HloComputation* reducer, int64_t dimension,
                                const ReplicaGroups& groups) {
  HloAttributes attrs;
  attrs.replica_groups = groups;
  attrs.dimensions = {dimension};
  attrs.channel_id = root_builder()->next_channel_id_++;
  attrs.use_global_device_ids = true;
  return AddOp(HloOpcode::kReduceScatter, {x}, attrs, {reducer});
}

XlaOp XlaBuilder::CollectivePermute(
    XlaOp x, std::vector<std::pair<int64_t, int64_t>> source_target_pairs) {
  HloAttributes attrs;
  attrs.source_target_pairs = std::move(source_target_pairs);
  attrs.channel_id = root_builder()->next_channel_id_++;
  return AddOp(HloOpcode::kCollectivePermute, {x}, attrs);
}

XlaOp XlaBuilder::AllToAll(XlaOp x, int64_t split_dimension, const ReplicaGroups& groups) {
  HloAttributes attrs;
  attrs.replica_groups = groups;
  attrs.dimensions = {split_dimension};
  attrs.channel_id = root_builder()->next_channel_id_++;
  return AddOp(HloOpcode::kAllToAll, {x}, attrs);
}

XlaOp XlaBuilder::CustomCall(const std::string& target, absl::Span<const XlaOp> operands,
                             const Shape& shape, const std::string& backend_config) {
  HloAttributes attrs;
  attrs.custom_call_target = target;
  attrs.backend_config = backend_config;
  return AddOp(HloOpcode::kCustomCall, operands, attrs, {}, &shape);
}

void XlaBuilder::SetSharding(XlaOp op, HloSharding sharding) {
  if (op.valid()) op.instruction()->set_sharding(std::move(sharding));
}

void XlaBuilder::SetName(XlaOp op, const std::string& name) {
  if (op.valid()) op.instruction()->set_name(UniqueName(name));
}

void XlaBuilder::SetOpName(XlaOp op, const std::string& op_name) {
  if (op.valid()) op.instruction()->mutable_metadata()->op_name = op_name;
}

absl::StatusOr<HloComputation*> XlaBuilder::BuildComputation(XlaOp root) {
  if (parent_ == nullptr) {
    return absl::FailedPreconditionError("BuildComputation is for sub-builders; use Build");
  }
  if (!first_error_.ok()) return first_error_;
  if (!CheckOps({root})) return first_error_;
  if (computation_ == nullptr) return absl::FailedPreconditionError("already built");
  computation_->set_root(root.instruction());
  return module_->AddComputation(std::move(computation_));
}

absl::StatusOr<std::unique_ptr<HloModule>> XlaBuilder::Build(XlaOp root) {
  if (parent_ != nullptr) {
    return absl::FailedPreconditionError("Build is for the entry builder");
  }
  if (!first_error_.ok()) return first_error_;
  if (!CheckOps({root})) return first_error_;
  if (owned_module_ == nullptr) return absl::FailedPreconditionError("already built");
  computation_->set_root(root.instruction());
  computation_->set_name(UniqueName(absl::StrCat("main")));
  module_->AddComputation(std::move(computation_), /*is_entry=*/true);
  RETURN_IF_ERROR(VerifyModule(*module_));
  return std::move(owned_module_);
}

namespace {
XlaBuilder* BuilderOf(XlaOp a, XlaOp b = XlaOp()) {
  return a.builder() ? a.builder() : b.builder();
}
XlaOp BinaryOp(HloOpcode op, XlaOp a, XlaOp b) {
  XlaBuilder* builder = BuilderOf(a, b);
  return builder ? builder->Binary(op, a, b) : XlaOp();
}
XlaOp UnaryOp(HloOpcode op, XlaOp x) {
  return x.builder() ? x.builder()->Unary(op, x) : XlaOp();
}
}  // namespace

XlaOp Add(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kAdd, a, b); }
XlaOp Sub(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kSubtract, a, b); }
XlaOp Mul(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kMultiply, a, b); }
XlaOp Div(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kDivide, a, b); }
XlaOp Max(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kMaximum, a, b); }
XlaOp Min(XlaOp a, XlaOp b) { return BinaryOp(HloOpcode::kMinimum, a, b); }
XlaOp Exp(XlaOp x) { return UnaryOp(HloOpcode::kExp, x); }
XlaOp Log(XlaOp x) { return UnaryOp(HloOpcode::kLog, x); }
XlaOp Neg(XlaOp x) { return UnaryOp(HloOpcode::kNegate, x); }

}  // namespace tpuoff::hlo
