#include "hlo/analysis/v6e_loop_residency.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "hlo/analysis/trip_count.h"
#include "hlo/ir/computation.h"

namespace tpuoff::hlo {
namespace {

// A place holding the argument: an array value (index -1) or element
// `index` of a tuple value.
using Pos = std::pair<const HloInstruction*, int64_t>;

class ReadCounter {
 public:
  explicit ReadCounter(int64_t arg_bytes) : arg_bytes_(arg_bytes) {}

  // Bytes of the argument read by one run of `comp` in which `start` holds
  // it. Every loop found on the way whose iteration reads all of it is
  // recorded with its per-iteration reads.
  int64_t Reads(std::vector<Pos> start) {
    int64_t reads = 0;
    std::set<Pos> seen(start.begin(), start.end());
    std::vector<Pos> work = std::move(start);
    auto push = [&](Pos p) {
      if (seen.insert(p).second) work.push_back(p);
    };
    while (!work.empty()) {
      const auto [x, index] = work.back();
      work.pop_back();
      for (const HloInstruction* u : x->users()) {
        if (index >= 0) {
          switch (u->opcode()) {
            case HloOpcode::kGetTupleElement:
              if (u->tuple_index() == index) push({u, -1});
              break;
            case HloOpcode::kOptimizationBarrier:
              push({u, index});
              break;
            case HloOpcode::kWhile: {
              const HloInstruction* param = u->while_body()->parameter(0);
              const int64_t per_trip = Reads({{param, index}});
              if (per_trip >= arg_bytes_) loops_.push_back({u, per_trip});
              reads += per_trip * WhileTripCount(*u).value_or(1);
              push({u, index});  // an invariant leaves the loop unchanged
              break;
            }
            default:  // a nested tuple, the root: not a read
              break;
          }
          continue;
        }
        switch (u->opcode()) {
          case HloOpcode::kReshape:
          case HloOpcode::kBitcast:
          case HloOpcode::kAddDependency:
            if (u->operand(0) == x) push({u, -1});
            break;
          case HloOpcode::kTuple:
            for (int64_t i = 0; i < u->operand_count(); ++i) {
              if (u->operand(i) == x) push({u, i});
            }
            break;
          case HloOpcode::kSlice:
          case HloOpcode::kDynamicSlice:
            reads += u->shape().byte_size();
            break;
          default:
            reads += arg_bytes_;
            break;
        }
      }
    }
    return reads;
  }

  const std::vector<std::pair<const HloInstruction*, int64_t>>& loops() const { return loops_; }

 private:
  int64_t arg_bytes_;
  std::vector<std::pair<const HloInstruction*, int64_t>> loops_;
};

void CollectCalled(const HloComputation* c, std::set<const HloComputation*>* out) {
  if (c == nullptr || !out->insert(c).second) return;
  for (const auto& instr : c->instructions()) {
    for (const HloComputation* called : instr->called_computations()) CollectCalled(called, out);
  }
}

}  // namespace

std::vector<V6eLoopResident> FindV6eLoopResidents(const MemoryAnalysis& a) {
  // Logical time range of each computation's allocations.
  std::map<const HloComputation*, std::pair<int64_t, int64_t>> span;
  for (const AllocatedBuffer& b : a.buffers) {
    if (b.computation == nullptr || b.end <= b.start) continue;
    auto [it, fresh] = span.try_emplace(b.computation, b.start, b.end);
    if (!fresh) {
      it->second.first = std::min(it->second.first, b.start);
      it->second.second = std::max(it->second.second, b.end);
    }
  }
  std::vector<V6eLoopResident> out;
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const AllocatedBuffer& b = a.buffers[i];
    if (b.kind != BufferKind::kArgument || b.instruction == nullptr ||
        b.instruction->opcode() != HloOpcode::kParameter || b.bytes <= 0) {
      continue;
    }
    ReadCounter counter(b.bytes);
    counter.Reads({{b.instruction, -1}});
    for (const auto& [loop, per_trip] : counter.loops()) {
      std::set<const HloComputation*> inside;
      for (const HloComputation* c : loop->called_computations()) CollectCalled(c, &inside);
      int64_t start = std::numeric_limits<int64_t>::max(), end = 0;
      for (const HloComputation* c : inside) {
        auto it = span.find(c);
        if (it == span.end()) continue;
        start = std::min(start, it->second.first);
        end = std::max(end, it->second.second);
      }
      if (end <= start) continue;
      out.push_back({static_cast<int>(i), loop, start, end, b.tpu_bytes, per_trip});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const V6eLoopResident& x, const V6eLoopResident& y) {
    return x.start != y.start ? x.start < y.start : x.buffer < y.buffer;
  });
  return out;
}

}  // namespace tpuoff::hlo
