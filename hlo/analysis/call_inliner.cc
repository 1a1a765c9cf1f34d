#include "hlo/analysis/call_inliner.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

// Copies `callee`'s instructions into `caller` in place of `call`; returns
// the copy of the callee's root.
HloInstruction* InlineOne(HloComputation* caller, HloInstruction* call, int64_t* counter) {
  const HloComputation* callee = call->to_apply();
  std::unordered_map<const HloInstruction*, HloInstruction*> copy;
  HloInstruction* root = caller->root();
  for (const HloInstruction* x : callee->InstructionOrder()) {
    if (x->opcode() == HloOpcode::kParameter) {
      copy[x] = call->operand(x->parameter_number());
      continue;
    }
    std::vector<HloInstruction*> operands;
    for (const HloInstruction* o : x->operands()) operands.push_back(copy.at(o));
    auto c = HloInstruction::Create(x->opcode(), x->shape(), std::move(operands), x->attrs(),
                                    x->called_computations());
    if (x->has_literal()) c->set_literal(x->literal());
    *c->mutable_metadata() = x->metadata();
    *c->mutable_frontend_attributes() = x->frontend_attributes();
    c->set_sharding(x->sharding());
    c->set_name(absl::StrCat(x->name(), ".inlined.", (*counter)++));
    for (const HloInstruction* p : x->control_predecessors()) {
      if (copy.count(p)) c->AddControlPredecessor(copy.at(p));
    }
    copy[x] = caller->AddInstruction(std::move(c));
  }
  caller->set_root(root);
  return copy.at(callee->root());
}

}  // namespace

int64_t InlineCalls(HloModule* module) {
  int64_t inlined = 0, counter = 0;
  // Callees come before callers, so a callee's own calls are inlined first.
  for (const auto& comp : module->computations()) {
    std::vector<HloInstruction*> calls;
    for (const auto& x : comp->instructions()) {
      if (x->opcode() == HloOpcode::kCall && x->called_computations().size() == 1 &&
          x->control_predecessors().empty()) {
        calls.push_back(x.get());
      }
    }
    if (calls.empty()) continue;
    for (HloInstruction* call : calls) {
      HloInstruction* result = InlineOne(comp.get(), call, &counter);
      comp->ReplaceAllUsesWith(call, result);
      ++inlined;
    }
    comp->SortTopologically();
    comp->RemoveDeadInstructions();
  }
  return inlined;
}

}  // namespace tpuoff::hlo
