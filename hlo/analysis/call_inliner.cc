#include "hlo/analysis/call_inliner.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

// A fusion that updates one of its parameters in place: its root is a
// dynamic-update-slice or scatter of a parameter (XLA:CPU's fusions of
// lax.scan's stacked outputs, `x.at[i].set`). XLA's buffer assignment gives
// its result the operand's buffer; the emulator runs a fusion on borrowed
// operands, so such a fusion is inlined and the update planned in place in
// the caller (buffer_plan) when the operand dies there.
bool IsInPlaceFusion(const HloInstruction& x) {
  if (x.opcode() != HloOpcode::kFusion || x.called_computations().size() != 1) return false;
  const HloInstruction* root = x.called_computations()[0]->root();
  return root != nullptr &&
         (root->opcode() == HloOpcode::kDynamicUpdateSlice ||
          root->opcode() == HloOpcode::kScatter) &&
         root->operand(0)->opcode() == HloOpcode::kParameter;
}

bool Inlinable(const HloInstruction& x) {
  return (x.opcode() == HloOpcode::kCall || IsInPlaceFusion(x)) &&
         x.called_computations().size() == 1 && x.control_predecessors().empty();
}

// Copies `callee`'s instructions into `caller` in place of `call`; returns
// the copy of the callee's root. Calls among the copies are appended to
// `pending`.
HloInstruction* InlineOne(HloComputation* caller, HloInstruction* call, int64_t* counter,
                          std::deque<HloInstruction*>* pending) {
  const HloComputation* callee = call->called_computations()[0];
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
    HloInstruction* added = caller->AddInstruction(std::move(c));
    if (Inlinable(*added)) pending->push_back(added);
    copy[x] = added;
  }
  caller->set_root(root);
  return copy.at(callee->root());
}

}  // namespace

int64_t InlineCalls(HloModule* module) {
  // Computations reached only through `call`s are never callers here: their
  // calls are inlined where their copies land. Inlining callers top-down
  // from the other computations (the entry, loop bodies, reducers, ...)
  // copies each callee's original body once per call site, so the work is
  // the size of the inlined program: a 100,000-deep chain of calls takes
  // linear time (inlining every computation in place would copy each
  // level's already inlined body again, quadratically).
  std::unordered_set<const HloComputation*> called_elsewhere, called_by_call;
  for (const auto& comp : module->computations()) {
    for (const auto& x : comp->instructions()) {
      for (const HloComputation* c : x->called_computations()) {
        (Inlinable(*x) ? called_by_call : called_elsewhere).insert(c);
      }
    }
  }
  int64_t inlined = 0, counter = 0;
  int64_t budget = kMaxInlinedInstructions;
  for (const auto& comp : module->computations()) {
    const bool entry = comp.get() == module->entry();
    if (!entry && called_by_call.count(comp.get()) && !called_elsewhere.count(comp.get())) {
      continue;
    }
    std::deque<HloInstruction*> pending;
    for (const auto& x : comp->instructions()) {
      if (Inlinable(*x)) pending.push_back(x.get());
    }
    if (pending.empty()) continue;
    while (!pending.empty()) {
      HloInstruction* call = pending.front();
      pending.pop_front();
      // A program that grows past the budget (calls that fan out
      // exponentially) keeps its remaining calls: the emulator runs them.
      const int64_t size =
          static_cast<int64_t>(call->called_computations()[0]->instructions().size());
      if (size > budget) continue;
      budget -= size;
      HloInstruction* result = InlineOne(comp.get(), call, &counter, &pending);
      comp->ReplaceAllUsesWith(call, result);
      ++inlined;
    }
    comp->SortTopologically();
    comp->RemoveDeadInstructions();
  }
  return inlined;
}

}  // namespace tpuoff::hlo
