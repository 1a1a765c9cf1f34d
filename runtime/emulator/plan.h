// The emulator's executable plan: the pure-IR hlo::BufferPlan (schedule,
// fusion groups, buffer assignment and lifetimes; hlo/analysis/buffer_plan.h) plus a
// compiled LoopProgram per fused step. The executor allocates and frees
// exactly as the BufferPlan says, which is what lets the static HBM analysis
// (hlo/analysis/memory_analysis.h) reproduce the emulator's peaks without running.
#ifndef TPUOFF_RUNTIME_EMULATOR_PLAN_H_
#define TPUOFF_RUNTIME_EMULATOR_PLAN_H_

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "hlo/analysis/buffer_plan.h"
#include "hlo/ir/module.h"
#include "runtime/emulator/loop_jit.h"
#include "runtime/emulator/loop_program.h"
#include "runtime/emulator/row_chain.h"
#include "runtime/emulator/row_while.h"

namespace tpuoff::runtime {

// The plan's vocabulary, under the names the runtime has always used.
using hlo::BufferKind;
using hlo::BufferKindName;
using hlo::ComputationPlan;
using hlo::kNoBuffer;
using hlo::LeafCount;
using hlo::LeafShapes;
using hlo::ParamMode;
using hlo::PlannedBuffer;
using hlo::PlanOptions;
using hlo::Step;
using hlo::StepKind;

class ModulePlan {
 public:
  // Plans the module (hlo::BufferPlan::Build) and compiles every fused
  // step. INTERNAL if a fused group cannot be compiled or its program reads
  // something the plan does not keep alive.
  // `row_chains`: group steps into row chains (runtime/emulator/row_chain.h)
  // and find while loops to run rows-outer (runtime/emulator/row_while.h)
  // when fusion is enabled. `jit`: which fused loops are compiled to machine
  // code (runtime/emulator/loop_jit.h; results are bit-identical either way).
  static absl::StatusOr<std::unique_ptr<ModulePlan>> Build(
      const hlo::HloModule& module, const PlanOptions& options = {}, bool row_chains = true,
      LoopJitMode jit = LoopJitMode::kAuto);

  const hlo::BufferPlan& buffers() const { return *buffers_; }
  const ComputationPlan& entry() const { return buffers_->entry(); }
  // CHECK-fails if the computation was not planned in this mode.
  const ComputationPlan& Get(const hlo::HloComputation* computation,
                             ParamMode mode) const {
    return buffers_->Get(computation, mode);
  }
  // The compiled loop of a kLoop / kLoopReduce step of this plan; nullptr
  // for other steps.
  const LoopProgram* program(const Step& step) const;
  // The row chain (runtime/emulator/row_chain.h) starting at step `index` of `plan`,
  // or nullptr.
  const RowChain* chain(const ComputationPlan& plan, int index) const;
  // The rows a while instruction runs rows-outer by
  // (runtime/emulator/row_while.h), or 0.
  int64_t row_while(const hlo::HloInstruction* x) const;
  // The rows-outer while loop whose queue starts at this step (before the
  // loop: runtime/emulator/row_while.h, RowWhileFirstStep), or nullptr.
  const hlo::HloInstruction* row_while_starting_at(const Step& step) const;

 private:
  std::unique_ptr<hlo::BufferPlan> buffers_;
  // Row chains keyed by their first step (only with fusion enabled).
  absl::flat_hash_map<const Step*, RowChain> chains_;
  absl::flat_hash_map<const hlo::HloInstruction*, int64_t> row_whiles_;
  absl::flat_hash_map<const Step*, const hlo::HloInstruction*> row_while_starts_;
  // Keyed by step address: steps do not move once planned.
  absl::flat_hash_map<const Step*, std::unique_ptr<LoopProgram>> programs_;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_PLAN_H_
