#include "hlo/ir/module.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tpuoff::hlo {

HloComputation* HloModule::AddComputation(
    std::unique_ptr<HloComputation> computation, bool is_entry) {
  HloComputation* raw = computation.get();
  raw->parent_ = this;
  raw->unique_id_ = NextUniqueId();
  for (const auto& instr : raw->instructions_) {
    instr->unique_id_ = NextUniqueId();
  }
  computations_.push_back(std::move(computation));
  if (is_entry) entry_ = raw;
  return raw;
}

HloComputation* HloModule::FindComputation(const std::string& name) const {
  for (const auto& c : computations_) {
    if (c->name() == name) return c.get();
  }
  return nullptr;
}

std::vector<std::string> HloModule::OutputNames() const {
  auto it = frontend_.find("output_names");
  if (it == frontend_.end() || it->second.empty()) return {};
  return absl::StrSplit(it->second, ',');
}

void HloModule::UniquifyInstructionNames() {
  absl::flat_hash_set<std::string> used;
  std::vector<HloComputation*> order;
  if (entry_ != nullptr) order.push_back(entry_);
  for (const auto& c : computations_) {
    if (c.get() != entry_) order.push_back(c.get());
  }
  for (HloComputation* c : order) {
    for (const auto& instr : c->instructions_) {
      if (used.insert(instr->name()).second) continue;
      for (int64_t n = 1;; ++n) {
        std::string candidate = absl::StrCat(instr->name(), ".", n);
        if (used.insert(candidate).second) {
          instr->set_name(std::move(candidate));
          break;
        }
      }
    }
  }
}

void HloModule::SetOutputNames(const std::vector<std::string>& names) {
  frontend_["output_names"] = absl::StrJoin(names, ",");
}

}  // namespace tpuoff::hlo
