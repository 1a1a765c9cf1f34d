// A computation owns its instructions, kept in an order where operands come
// before users (the order they were added in).
#ifndef TPUOFF_HLO_IR_COMPUTATION_H_
#define TPUOFF_HLO_IR_COMPUTATION_H_

#include <memory>
#include <string>
#include <vector>

#include "hlo/ir/instruction.h"

namespace tpuoff::hlo {

class HloModule;

class HloComputation {
 public:
  explicit HloComputation(std::string name) : name_(std::move(name)) {}
  HloComputation(const HloComputation&) = delete;
  HloComputation& operator=(const HloComputation&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Takes ownership; parameters are also indexed by parameter number.
  HloInstruction* AddInstruction(std::unique_ptr<HloInstruction> instr);

  const std::vector<std::unique_ptr<HloInstruction>>& instructions() const {
    return instructions_;
  }
  int64_t instruction_count() const {
    return static_cast<int64_t>(instructions_.size());
  }
  // Parameters by number (nullptr for a gap, which the verifier rejects).
  const std::vector<HloInstruction*>& parameters() const { return params_; }
  int64_t num_parameters() const { return static_cast<int64_t>(params_.size()); }
  HloInstruction* parameter(int64_t i) const { return params_[i]; }

  HloInstruction* root() const { return root_; }
  void set_root(HloInstruction* root) { root_ = root; }

  // Instructions in the order added, which is a valid topological order.
  std::vector<HloInstruction*> InstructionOrder() const;
  // Post order from the root (dead instructions excluded).
  std::vector<HloInstruction*> ReachablePostOrder() const;
  HloInstruction* FindInstruction(const std::string& name) const;

  // Removes instructions not reachable from the root (parameters stay).
  void RemoveDeadInstructions();
  // Reorders the instructions so each follows its operands and control
  // predecessors, otherwise keeping their order (after rewrites that add
  // instructions at the end).
  void SortTopologically();
  // Points every user of `old` (and the root) at `replacement`.
  void ReplaceAllUsesWith(HloInstruction* old, HloInstruction* replacement);

  HloModule* parent() const { return parent_; }
  int64_t unique_id() const { return unique_id_; }
  bool is_fusion_computation() const { return is_fusion_; }
  void set_is_fusion_computation(bool v) { is_fusion_ = v; }
  const std::string& execution_thread() const { return execution_thread_; }
  void set_execution_thread(std::string t) { execution_thread_ = std::move(t); }

  // Program shape: parameter shapes and the root's shape.
  std::vector<Shape> ParameterShapes() const;

 private:
  friend class HloModule;
  std::string name_;
  std::vector<std::unique_ptr<HloInstruction>> instructions_;
  std::vector<HloInstruction*> params_;
  HloInstruction* root_ = nullptr;
  HloModule* parent_ = nullptr;
  int64_t unique_id_ = -1;
  bool is_fusion_ = false;
  std::string execution_thread_;
};

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_COMPUTATION_H_
