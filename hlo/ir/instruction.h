// One HLO instruction. Owned by its computation; operand and user links are
// raw pointers into the same computation.
#ifndef TPUOFF_HLO_IR_INSTRUCTION_H_
#define TPUOFF_HLO_IR_INSTRUCTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hlo/ir/attributes.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/shape.h"

namespace tpuoff::hlo {

class HloComputation;

class HloInstruction {
 public:
  // Called computations by opcode: reduce/all-reduce/reduce-scatter/scatter/
  // call: {to_apply}; while: {body, condition}; conditional: branches (for a
  // pred selector {true, false}); fusion/custom-call: {callee...}.
  static std::unique_ptr<HloInstruction> Create(
      HloOpcode opcode, Shape shape, std::vector<HloInstruction*> operands,
      HloAttributes attrs = {}, std::vector<HloComputation*> called = {});
  static std::unique_ptr<HloInstruction> CreateParameter(int64_t number,
                                                         Shape shape,
                                                         std::string name);
  static std::unique_ptr<HloInstruction> CreateConstant(Literal literal);

  HloInstruction(const HloInstruction&) = delete;
  HloInstruction& operator=(const HloInstruction&) = delete;
  ~HloInstruction();

  HloOpcode opcode() const { return opcode_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  const Shape& shape() const { return shape_; }
  Shape* mutable_shape() { return &shape_; }

  int64_t operand_count() const { return static_cast<int64_t>(operands_.size()); }
  HloInstruction* operand(int64_t i) const { return operands_[i]; }
  const std::vector<HloInstruction*>& operands() const { return operands_; }
  const std::vector<HloInstruction*>& users() const { return users_; }
  // Replaces operand i, keeping user lists consistent.
  void ReplaceOperand(int64_t i, HloInstruction* new_operand);

  const std::vector<HloComputation*>& called_computations() const {
    return called_;
  }
  void set_called_computations(std::vector<HloComputation*> called) {
    called_ = std::move(called);
  }
  HloComputation* to_apply() const { return called_.at(0); }
  HloComputation* while_body() const { return called_.at(0); }
  HloComputation* while_condition() const { return called_.at(1); }

  const HloAttributes& attrs() const { return attrs_; }
  HloAttributes* mutable_attrs() { return &attrs_; }
  // Shorthands for the most used attributes.
  int64_t parameter_number() const { return attrs_.parameter_number; }
  int64_t tuple_index() const { return attrs_.tuple_index; }
  const std::vector<int64_t>& dimensions() const { return attrs_.dimensions; }

  bool has_literal() const { return literal_ != nullptr; }
  const Literal& literal() const { return *literal_; }
  void set_literal(Literal literal);

  const OpMetadata& metadata() const { return metadata_; }
  OpMetadata* mutable_metadata() { return &metadata_; }
  const FrontendAttributes& frontend_attributes() const { return frontend_; }
  FrontendAttributes* mutable_frontend_attributes() { return &frontend_; }
  const std::optional<HloSharding>& sharding() const { return sharding_; }
  void set_sharding(std::optional<HloSharding> s) { sharding_ = std::move(s); }

  const std::vector<HloInstruction*>& control_predecessors() const {
    return control_predecessors_;
  }
  void AddControlPredecessor(HloInstruction* pred) {
    control_predecessors_.push_back(pred);
  }

  HloComputation* parent() const { return parent_; }
  int64_t unique_id() const { return unique_id_; }

 private:
  friend class HloComputation;
  friend class HloModule;
  HloInstruction(HloOpcode opcode, Shape shape);

  HloOpcode opcode_;
  std::string name_;
  Shape shape_;
  std::vector<HloInstruction*> operands_;
  std::vector<HloInstruction*> users_;
  std::vector<HloComputation*> called_;
  std::vector<HloInstruction*> control_predecessors_;
  HloAttributes attrs_;
  std::unique_ptr<Literal> literal_;
  OpMetadata metadata_;
  FrontendAttributes frontend_;
  std::optional<HloSharding> sharding_;
  HloComputation* parent_ = nullptr;
  int64_t unique_id_ = -1;
};

// Instructions whose result is their first operand unchanged: add-dependency,
// domain and the annotation custom-calls JAX and XLA put in modules (sharding
// markers "Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.Sharding...",
// layout/placement hints). The planner aliases them; the executor skips them.
bool IsPassThrough(const HloInstruction& instr);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_INSTRUCTION_H_
