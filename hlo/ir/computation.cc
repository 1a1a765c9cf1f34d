#include "hlo/ir/computation.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "hlo/ir/module.h"

namespace tpuoff::hlo {

HloInstruction* HloComputation::AddInstruction(
    std::unique_ptr<HloInstruction> instr) {
  HloInstruction* raw = instr.get();
  raw->parent_ = this;
  if (parent_ != nullptr) raw->unique_id_ = parent_->NextUniqueId();
  if (raw->opcode() == HloOpcode::kParameter) {
    int64_t n = raw->parameter_number();
    if (n >= 0) {
      if (static_cast<int64_t>(params_.size()) <= n) params_.resize(n + 1, nullptr);
      params_[n] = raw;
    }
  }
  instructions_.push_back(std::move(instr));
  root_ = raw;  // the last instruction is the root unless set otherwise
  return raw;
}

std::vector<HloInstruction*> HloComputation::InstructionOrder() const {
  std::vector<HloInstruction*> order;
  order.reserve(instructions_.size());
  for (const auto& i : instructions_) order.push_back(i.get());
  return order;
}

std::vector<HloInstruction*> HloComputation::ReachablePostOrder() const {
  std::vector<HloInstruction*> order;
  if (root_ == nullptr) return order;
  std::unordered_set<const HloInstruction*> visited;
  // Iterative DFS: (instruction, next operand to visit).
  std::vector<std::pair<HloInstruction*, size_t>> stack = {{root_, 0}};
  visited.insert(root_);
  while (!stack.empty()) {
    auto& [instr, next] = stack.back();
    const size_t n_ops = instr->operands().size();
    const size_t n_total = n_ops + instr->control_predecessors().size();
    if (next < n_total) {
      HloInstruction* child = next < n_ops
                                  ? instr->operand(next)
                                  : instr->control_predecessors()[next - n_ops];
      ++next;
      if (visited.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(instr);
      stack.pop_back();
    }
  }
  return order;
}

HloInstruction* HloComputation::FindInstruction(const std::string& name) const {
  for (const auto& i : instructions_) {
    if (i->name() == name) return i.get();
  }
  return nullptr;
}

void HloComputation::RemoveDeadInstructions() {
  std::vector<HloInstruction*> live = ReachablePostOrder();
  std::unordered_set<HloInstruction*> keep(live.begin(), live.end());
  for (HloInstruction* p : params_) {
    if (p != nullptr) keep.insert(p);
  }
  // Drop user links pointing at dead instructions, then the instructions.
  for (const auto& i : instructions_) {
    if (keep.count(i.get()) == 0) continue;
    auto& users = i->users_;
    users.erase(std::remove_if(users.begin(), users.end(),
                               [&](HloInstruction* u) { return keep.count(u) == 0; }),
                users.end());
  }
  instructions_.erase(
      std::remove_if(instructions_.begin(), instructions_.end(),
                     [&](const std::unique_ptr<HloInstruction>& i) {
                       return keep.count(i.get()) == 0;
                     }),
      instructions_.end());
}

void HloComputation::SortTopologically() {
  std::unordered_set<const HloInstruction*> placed;
  std::vector<HloInstruction*> order;
  order.reserve(instructions_.size());
  for (const auto& start : instructions_) {
    if (placed.count(start.get())) continue;
    std::vector<std::pair<HloInstruction*, size_t>> stack = {{start.get(), 0}};
    while (!stack.empty()) {
      auto& [instr, next] = stack.back();
      const size_t n_ops = instr->operands().size();
      if (next < n_ops + instr->control_predecessors().size()) {
        HloInstruction* child = next < n_ops ? instr->operand(next)
                                             : instr->control_predecessors()[next - n_ops];
        ++next;
        if (!placed.count(child) && child->parent() == this) stack.push_back({child, 0});
      } else {
        if (placed.insert(instr).second) order.push_back(instr);
        stack.pop_back();
      }
    }
  }
  std::vector<std::unique_ptr<HloInstruction>> sorted;
  sorted.reserve(instructions_.size());
  std::unordered_map<const HloInstruction*, std::unique_ptr<HloInstruction>*> owned;
  for (auto& i : instructions_) owned[i.get()] = &i;
  for (HloInstruction* i : order) sorted.push_back(std::move(*owned[i]));
  instructions_ = std::move(sorted);
}

void HloComputation::ReplaceAllUsesWith(HloInstruction* old, HloInstruction* replacement) {
  const std::vector<HloInstruction*> users = old->users();
  for (HloInstruction* u : users) {
    if (u == replacement) continue;
    for (int64_t i = 0; i < u->operand_count(); ++i) {
      if (u->operand(i) == old) u->ReplaceOperand(i, replacement);
    }
  }
  if (root_ == old) root_ = replacement;
}

std::vector<Shape> HloComputation::ParameterShapes() const {
  std::vector<Shape> shapes;
  for (HloInstruction* p : params_) shapes.push_back(p ? p->shape() : Shape());
  return shapes;
}

}  // namespace tpuoff::hlo
