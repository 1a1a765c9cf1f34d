#include "hlo/analysis/async_lowering.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

struct PairKind {
  HloOpcode done, start, sync;
};
constexpr PairKind kPairs[] = {
    {HloOpcode::kAsyncDone, HloOpcode::kAsyncStart, HloOpcode::kCall},
    {HloOpcode::kAllReduceDone, HloOpcode::kAllReduceStart, HloOpcode::kAllReduce},
    {HloOpcode::kAllGatherDone, HloOpcode::kAllGatherStart, HloOpcode::kAllGather},
    {HloOpcode::kCollectivePermuteDone, HloOpcode::kCollectivePermuteStart,
     HloOpcode::kCollectivePermute},
    {HloOpcode::kCopyDone, HloOpcode::kCopyStart, HloOpcode::kCopy},
};

const PairKind* KindOfDone(HloOpcode op) {
  for (const PairKind& k : kPairs) {
    if (k.done == op) return &k;
  }
  return nullptr;
}

// The start of `done`'s chain (through async-updates) when every link is
// used only by the next one; nullptr otherwise.
HloInstruction* ExclusiveStart(const HloInstruction* done, HloOpcode start_opcode) {
  if (done->operand_count() != 1) return nullptr;
  HloInstruction* x = done->operand(0);
  while (x->opcode() == HloOpcode::kAsyncUpdate && start_opcode == HloOpcode::kAsyncStart) {
    if (x->users().size() != 1 || x->operand_count() != 1) return nullptr;
    x = x->operand(0);
  }
  if (x->opcode() != start_opcode || x->users().size() != 1) return nullptr;
  return x;
}

bool HasControlEdges(const HloComputation& comp, const HloInstruction* done) {
  if (!done->control_predecessors().empty()) return true;
  for (const auto& x : comp.instructions()) {
    for (const HloInstruction* p : x->control_predecessors()) {
      if (p == done) return true;
    }
  }
  return false;
}

}  // namespace

int64_t LowerAsyncPairs(HloModule* module) {
  int64_t lowered = 0;
  for (const auto& comp : module->computations()) {
    std::vector<std::pair<HloInstruction*, const PairKind*>> dones;
    for (const auto& x : comp->instructions()) {
      if (const PairKind* k = KindOfDone(x->opcode())) dones.push_back({x.get(), k});
    }
    if (dones.empty()) continue;
    for (auto [done, kind] : dones) {
      HloInstruction* start = ExclusiveStart(done, kind->start);
      if (start == nullptr || HasControlEdges(*comp, done) ||
          !start->control_predecessors().empty()) {
        continue;
      }
      std::vector<HloInstruction*> operands = start->operands();
      if (kind->sync == HloOpcode::kCopy) operands.resize(1);
      auto sync = HloInstruction::Create(kind->sync, done->shape(), std::move(operands),
                                         start->attrs(), start->called_computations());
      *sync->mutable_metadata() = start->metadata();
      *sync->mutable_frontend_attributes() = start->frontend_attributes();
      sync->set_sharding(done->sharding());
      const std::string name = done->name();
      done->set_name(absl::StrCat(name, ".async"));
      sync->set_name(name);
      HloInstruction* root = comp->root();  // AddInstruction makes the new one the root
      HloInstruction* added = comp->AddInstruction(std::move(sync));
      comp->set_root(root);
      comp->ReplaceAllUsesWith(done, added);
      ++lowered;
    }
    comp->SortTopologically();
    comp->RemoveDeadInstructions();
  }
  return lowered;
}

}  // namespace tpuoff::hlo
