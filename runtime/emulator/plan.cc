#include "runtime/emulator/plan.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::runtime {
namespace {

// Compiles fused step `step` of `plan` and checks it against the plan: the
// program may read only what the plan schedules as the step's reads, and an
// in-place output must overwrite an input the program reads at the
// output's own index.
absl::StatusOr<LoopProgram> CompileStep(const ComputationPlan& plan,
                                        const Step& step) {
  const hlo::HloInstruction* x = step.instr;
  absl::flat_hash_set<const hlo::HloInstruction*> members(step.fused.begin(),
                                                          step.fused.end());
  const bool reduce = step.kind == StepKind::kLoopReduce;
  absl::StatusOr<LoopProgram> program;
  if (reduce) {
    for (const hlo::HloInstruction* r : step.roots) members.erase(r);
    program = BuildLoopMultiReduceProgram(step.roots, members);
  } else if (step.update) {
    members.erase(x);
    program = BuildLoopUpdateProgram(x, members);
  } else {
    program = BuildLoopProgram(x, members);
  }
  if (!program.ok()) {
    return absl::Status(program.status().code(),
                        absl::StrCat("planning %", x->name(), ": ",
                                     program.status().message()));
  }
  const absl::flat_hash_set<const hlo::HloInstruction*> reads(step.reads.begin(),
                                                               step.reads.end());
  for (const hlo::HloInstruction* in : program->inputs) {
    if (in != nullptr && !reads.contains(in)) {
      return absl::InternalError(absl::StrCat(
          "planning %", x->name(), ": the loop program reads %", in->name(),
          ", which the buffer plan does not schedule as a read"));
    }
  }
  if (step.in_place_of != kNoBuffer && !step.update) {
    bool found = false;
    for (int i : program->identity_inputs) {
      const hlo::HloInstruction* in = program->inputs[i];
      if (in != nullptr && plan.leaves.at(in)[0] == step.in_place_of) found = true;
    }
    if (!found) {
      return absl::InternalError(absl::StrCat(
          "planning %", x->name(), ": the output is planned in place of b",
          step.in_place_of, ", which the loop program does not read at the "
          "output's index"));
    }
  }
  return program;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModulePlan>> ModulePlan::Build(
    const hlo::HloModule& module, const PlanOptions& options, bool row_chains,
    LoopJitMode jit) {
  auto plan = std::unique_ptr<ModulePlan>(new ModulePlan());
  ASSIGN_OR_RETURN(plan->buffers_, hlo::BufferPlan::Build(module, options));
  for (const ComputationPlan* c : plan->buffers_->all()) {
    for (const Step& step : c->steps) {
      if (step.kind != StepKind::kLoop && step.kind != StepKind::kLoopReduce) {
        continue;
      }
      ASSIGN_OR_RETURN(LoopProgram program, CompileStep(*c, step));
      if (ShouldJit(jit, program.shape.num_elements())) {
        program.jit = CompileLoopJit(program, UsesStreamingStores(program));
      }
      plan->programs_[&step] = std::make_unique<LoopProgram>(std::move(program));
    }
    if (!options.enable_fusion || !row_chains) continue;
    for (RowChain& chain : FindRowChains(
             *c, [&](const Step& step) { return plan->program(step); })) {
      const Step* first = &c->steps[chain.first];
      plan->chains_[first] = std::move(chain);
    }
  }
  if (options.enable_fusion && row_chains) {
    auto program = [&](const Step& step) { return plan->program(step); };
    for (const ComputationPlan* c : plan->buffers_->all()) {
      for (int i = 0; i < c->num_steps(); ++i) {
        const Step& step = c->steps[i];
        const hlo::HloInstruction* x = step.instr;
        if (step.kind != StepKind::kOp || x->opcode() != hlo::HloOpcode::kWhile) continue;
        const int64_t rows =
            RowWhileRows(plan->Get(x->while_body(), ParamMode::kDonated),
                         plan->Get(x->while_condition(), ParamMode::kBorrowed), program);
        if (rows == 0) continue;
        plan->row_whiles_[x] = rows;
        if (const int first = RowWhileFirstStep(*c, i, rows, program); first >= 0) {
          plan->row_while_starts_[&c->steps[first]] = x;
        }
      }
    }
  }
  return plan;
}

int64_t ModulePlan::row_while(const hlo::HloInstruction* x) const {
  auto it = row_whiles_.find(x);
  return it == row_whiles_.end() ? 0 : it->second;
}

const hlo::HloInstruction* ModulePlan::row_while_starting_at(const Step& step) const {
  auto it = row_while_starts_.find(&step);
  return it == row_while_starts_.end() ? nullptr : it->second;
}

const RowChain* ModulePlan::chain(const ComputationPlan& plan, int index) const {
  auto it = chains_.find(&plan.steps[index]);
  return it == chains_.end() ? nullptr : &it->second;
}

const LoopProgram* ModulePlan::program(const Step& step) const {
  auto it = programs_.find(&step);
  return it == programs_.end() ? nullptr : it->second.get();
}

}  // namespace tpuoff::runtime
