// An XlaBuilder-style builder: ops are cheap handles, shapes are inferred at
// each call, and the first error is reported by Build().
#ifndef TPUOFF_HLO_IR_BUILDER_H_
#define TPUOFF_HLO_IR_BUILDER_H_

#include <map>
#include <memory>
#include <unordered_map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

class XlaBuilder;

// A handle to an instruction under construction. Default-constructed or
// produced after an error, it is invalid, and ops taking it stay invalid.
class XlaOp {
 public:
  XlaOp() = default;
  bool valid() const { return instr_ != nullptr; }
  const Shape& shape() const;  // invalid op: an invalid shape
  HloInstruction* instruction() const { return instr_; }
  XlaBuilder* builder() const { return builder_; }

 private:
  friend class XlaBuilder;
  XlaOp(HloInstruction* instr, XlaBuilder* builder) : instr_(instr), builder_(builder) {}
  HloInstruction* instr_ = nullptr;
  XlaBuilder* builder_ = nullptr;
};

class XlaBuilder {
 public:
  // A builder of the entry computation of a new module.
  explicit XlaBuilder(std::string module_name);
  ~XlaBuilder();
  XlaBuilder(const XlaBuilder&) = delete;
  XlaBuilder& operator=(const XlaBuilder&) = delete;

  // A builder of another computation in the same module (a reducer, a loop
  // body...). Errors in it are also reported by the parent's Build().
  std::unique_ptr<XlaBuilder> CreateSubBuilder(const std::string& name);
  // Finishes a sub-builder's computation and adds it to the module.
  absl::StatusOr<HloComputation*> BuildComputation(XlaOp root);
  // Finishes the entry computation; returns the verified module.
  absl::StatusOr<std::unique_ptr<HloModule>> Build(XlaOp root);

  // Scalar (a, b) -> op(a, b) computation, cached per (op, type).
  HloComputation* ScalarReducer(HloOpcode op, PrimitiveType type);

  void ReportError(absl::Status status);
  const absl::Status& first_error() const;

  // Leaves.
  XlaOp Parameter(int64_t number, const Shape& shape, const std::string& name);
  XlaOp Constant(Literal literal);
  XlaOp ConstantF32(float v) { return Constant(Literal::ScalarF32(v)); }
  XlaOp ConstantS32(int32_t v) { return Constant(Literal::ScalarS32(v)); }
  // A scalar constant of any type, from a double.
  XlaOp ScalarConstant(PrimitiveType type, double v);
  XlaOp Iota(const Shape& shape, int64_t dimension);
  XlaOp PartitionId();
  XlaOp ReplicaId();

  // Elementwise. A scalar operand of a binary op is broadcast to the other's
  // dimensions (the implicit scalar broadcast of XLA's client API).
  XlaOp Unary(HloOpcode op, XlaOp x);
  XlaOp Binary(HloOpcode op, XlaOp a, XlaOp b);
  XlaOp Compare(XlaOp a, XlaOp b, ComparisonDirection dir);
  XlaOp Select(XlaOp pred, XlaOp on_true, XlaOp on_false);
  XlaOp Clamp(XlaOp lo, XlaOp x, XlaOp hi);

  // Shape ops.
  XlaOp BroadcastInDim(XlaOp x, absl::Span<const int64_t> out_dims,
                       absl::Span<const int64_t> broadcast_dimensions);
  XlaOp Reshape(XlaOp x, absl::Span<const int64_t> dims);
  XlaOp Transpose(XlaOp x, absl::Span<const int64_t> permutation);
  XlaOp Convert(XlaOp x, PrimitiveType type);
  XlaOp BitcastConvert(XlaOp x, PrimitiveType type);
  XlaOp Slice(XlaOp x, absl::Span<const int64_t> starts,
              absl::Span<const int64_t> limits, absl::Span<const int64_t> strides);
  XlaOp DynamicSlice(XlaOp x, absl::Span<const XlaOp> starts,
                     absl::Span<const int64_t> sizes);
  XlaOp DynamicUpdateSlice(XlaOp x, XlaOp update, absl::Span<const XlaOp> starts);
  XlaOp Concatenate(absl::Span<const XlaOp> xs, int64_t dimension);
  XlaOp Pad(XlaOp x, XlaOp value, std::vector<PaddingDimension> padding);
  XlaOp Reverse(XlaOp x, absl::Span<const int64_t> dims);

  // Reductions and contractions.
  XlaOp Reduce(absl::Span<const XlaOp> inputs, absl::Span<const XlaOp> inits,
               HloComputation* reducer, absl::Span<const int64_t> dims);
  // Single-input reduce with a cached scalar reducer (add, max, min, ...).
  XlaOp Reduce(XlaOp input, XlaOp init, HloOpcode reducer_op,
               absl::Span<const int64_t> dims);
  // `operand_precision`: one of "DEFAULT", "HIGH", "HIGHEST" per operand
  // (empty: default); XLA:TPU multiplies f32 operands in bf16 at DEFAULT.
  XlaOp Dot(XlaOp lhs, XlaOp rhs, const DotDimensionNumbers& dnums,
            PrimitiveType result_type = PrimitiveType::kInvalid,
            std::vector<std::string> operand_precision = {});
  XlaOp Gather(XlaOp operand, XlaOp indices, const GatherDimensionNumbers& dnums,
               absl::Span<const int64_t> slice_sizes);
  XlaOp Scatter(XlaOp operand, XlaOp indices, XlaOp updates,
                HloComputation* combiner, const ScatterDimensionNumbers& dnums);

  // Tuples and control flow.
  XlaOp Tuple(absl::Span<const XlaOp> elements);
  XlaOp GetTupleElement(XlaOp tuple, int64_t index);
  XlaOp While(HloComputation* condition, HloComputation* body, XlaOp init);
  XlaOp Call(HloComputation* callee, absl::Span<const XlaOp> args);
  XlaOp Conditional(XlaOp selector, absl::Span<HloComputation* const> branches,
                    absl::Span<const XlaOp> args);

  // Collectives (channel ids are assigned module-wide when not given).
  XlaOp AllReduce(XlaOp x, HloComputation* reducer, const ReplicaGroups& groups);
  XlaOp AllGather(XlaOp x, int64_t dimension, const ReplicaGroups& groups);
  XlaOp ReduceScatter(XlaOp x, HloComputation* reducer, int64_t dimension,
                      const ReplicaGroups& groups);
  XlaOp CollectivePermute(XlaOp x,
                          std::vector<std::pair<int64_t, int64_t>> source_target_pairs);
  XlaOp AllToAll(XlaOp x, int64_t split_dimension, const ReplicaGroups& groups);
  // A fresh module-wide channel id, for collectives built with AddOp.
  int64_t NextChannelId();
  XlaOp CustomCall(const std::string& target, absl::Span<const XlaOp> operands,
                   const Shape& shape, const std::string& backend_config = "");

  // Generic: any opcode with explicit attributes (shape inferred, `declared`
  // filling what cannot be inferred).
  XlaOp AddOp(HloOpcode op, absl::Span<const XlaOp> operands, HloAttributes attrs = {},
              std::vector<HloComputation*> called = {}, const Shape* declared = nullptr);

  // Annotations on an op already built.
  void SetSharding(XlaOp op, HloSharding sharding);
  void SetName(XlaOp op, const std::string& name);  // made unique if taken
  void SetOpName(XlaOp op, const std::string& op_name);  // metadata op_name

  HloModule* module() { return module_; }
  const std::string& name() const { return name_; }

 private:
  XlaBuilder(std::string name, XlaBuilder* parent);
  XlaOp Add(std::unique_ptr<HloInstruction> instr);
  std::string UniqueName(const std::string& base);
  XlaBuilder* root_builder() { return parent_ ? parent_->root_builder() : this; }
  bool CheckOps(absl::Span<const XlaOp> ops);
  XlaOp BroadcastScalarTo(XlaOp scalar, const Shape& like);

  std::string name_;
  XlaBuilder* parent_ = nullptr;
  std::unique_ptr<HloModule> owned_module_;  // root builder only
  HloModule* module_ = nullptr;
  std::unique_ptr<HloComputation> computation_;
  absl::Status first_error_;
  // Root builder only:
  std::unordered_map<std::string, int64_t> name_counts_;
  std::map<std::pair<int, int>, HloComputation*> reducers_;
  int64_t next_channel_id_ = 1;
};

// Convenience free functions in the XLA client style (invalid in, invalid out).
XlaOp Add(XlaOp a, XlaOp b);
XlaOp Sub(XlaOp a, XlaOp b);
XlaOp Mul(XlaOp a, XlaOp b);
XlaOp Div(XlaOp a, XlaOp b);
XlaOp Max(XlaOp a, XlaOp b);
XlaOp Min(XlaOp a, XlaOp b);
XlaOp Exp(XlaOp x);
XlaOp Log(XlaOp x);
XlaOp Neg(XlaOp x);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_BUILDER_H_
