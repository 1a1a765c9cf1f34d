#include "hlo/ir/instruction.h"

#include <algorithm>

namespace tpuoff::hlo {

HloInstruction::HloInstruction(HloOpcode opcode, Shape shape)
    : opcode_(opcode), shape_(std::move(shape)) {}

HloInstruction::~HloInstruction() = default;

std::unique_ptr<HloInstruction> HloInstruction::Create(
    HloOpcode opcode, Shape shape, std::vector<HloInstruction*> operands,
    HloAttributes attrs, std::vector<HloComputation*> called) {
  std::unique_ptr<HloInstruction> instr(
      new HloInstruction(opcode, std::move(shape)));
  instr->operands_ = std::move(operands);
  // A repeated operand lists the new instruction once among its users. The
  // only user any list gains here is `instr`, so it can only be at the back
  // (constant time even for operands with very many users).
  for (HloInstruction* op : instr->operands_) {
    if (op->users_.empty() || op->users_.back() != instr.get()) {
      op->users_.push_back(instr.get());
    }
  }
  instr->attrs_ = std::move(attrs);
  instr->called_ = std::move(called);
  return instr;
}

std::unique_ptr<HloInstruction> HloInstruction::CreateParameter(
    int64_t number, Shape shape, std::string name) {
  HloAttributes attrs;
  attrs.parameter_number = number;
  auto instr = Create(HloOpcode::kParameter, std::move(shape), {}, attrs);
  instr->set_name(std::move(name));
  return instr;
}

std::unique_ptr<HloInstruction> HloInstruction::CreateConstant(Literal literal) {
  auto instr = Create(HloOpcode::kConstant, literal.shape(), {});
  instr->set_literal(std::move(literal));
  return instr;
}

void HloInstruction::set_literal(Literal literal) {
  literal_ = std::make_unique<Literal>(std::move(literal));
}

void HloInstruction::ReplaceOperand(int64_t i, HloInstruction* new_operand) {
  HloInstruction* old = operands_[i];
  operands_[i] = new_operand;
  if (std::find(operands_.begin(), operands_.end(), old) == operands_.end()) {
    old->users_.erase(std::remove(old->users_.begin(), old->users_.end(), this),
                      old->users_.end());
  }
  if (std::find(new_operand->users_.begin(), new_operand->users_.end(),
                this) == new_operand->users_.end()) {
    new_operand->users_.push_back(this);
  }
}

bool IsPassThrough(const HloInstruction& instr) {
  if (instr.opcode() == HloOpcode::kAddDependency || instr.opcode() == HloOpcode::kDomain) {
    return true;
  }
  if (instr.opcode() != HloOpcode::kCustomCall || instr.operand_count() != 1 ||
      !instr.shape().Compatible(instr.operand(0)->shape())) {
    return false;
  }
  static constexpr absl::string_view kTargets[] = {
      "Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint",
      "xla.sdy.PropagationBarrier", "LayoutConstraint", "annotate_device_placement",
      "MoveToHost", "MoveToDevice", "ShardBarrierFrom", "ShardBarrierTo"};
  for (absl::string_view t : kTargets) {
    if (instr.attrs().custom_call_target == t) return true;
  }
  return false;
}

}  // namespace tpuoff::hlo
