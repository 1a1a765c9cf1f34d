#include "hlo/analysis/memory_analysis.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/analysis/heap_simulator.h"
#include "hlo/ir/status_macros.h"
#include "hlo/analysis/tpu_layout.h"

namespace tpuoff::hlo {
namespace {

constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();
constexpr int kNone = -1;  // no allocation (token leaves, moved buffers)

// A step of one activation of a computation; chained to its caller's step.
struct Site {
  int parent = -1;
  const ComputationPlan* plan = nullptr;
  int step = 0;
};

// Replays a BufferPlan as runtime/emulator/executor.cc runs it, recording every
// allocation's live range. Keep the two in step: the agreement test
// (tests/memory_analysis_test.cc) checks the peaks are equal.
class Replayer {
 public:
  explicit Replayer(const BufferPlan& plan) : plan_(plan) {}

  absl::Status RunEntry() {
    const ComputationPlan& entry = plan_.entry();
    std::vector<int> args;
    for (const HloInstruction* param : entry.computation->parameters()) {
      if (param == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "computation ", entry.computation->name(),
            " has a gap in its parameter numbers"));
      }
      for (const Shape& leaf : LeafShapes(param->shape())) {
        args.push_back(leaf.IsArray() ? Alloc(param, entry.computation, leaf,
                                              leaf.byte_size(), -1)
                                      : kNone);
      }
    }
    for (int b : args) {
      if (b != kNone) buffers_[b].kind = BufferKind::kArgument;
    }
    ASSIGN_OR_RETURN(std::vector<int> outputs, Run(entry, args, -1));
    for (int b : outputs) {
      if (b != kNone && buffers_[b].kind != BufferKind::kArgument) {
        buffers_[b].kind = BufferKind::kOutput;
      }
    }
    const int64_t end = now_;
    for (AllocatedBuffer& b : buffers_) {
      if (b.end == kOpen) b.end = end;
    }
    return absl::OkStatus();
  }

  std::vector<AllocatedBuffer>& buffers() { return buffers_; }
  int64_t num_times() const { return now_; }

  ProgramPoint PointAt(int64_t time) const {
    ProgramPoint point;
    if (time < 0 || time >= static_cast<int64_t>(time_site_.size())) return point;
    std::vector<std::string> parts;
    for (int s = time_site_[time]; s >= 0; s = sites_[s].parent) {
      const Site& site = sites_[s];
      const Step& step = site.plan->steps[site.step];
      parts.push_back(absl::StrCat(site.plan->computation->name(), " step ",
                                   site.step, " (", step.name, ")"));
      if (point.instruction == nullptr) point.instruction = step.instr;
      if (site.parent < 0) point.entry_step = site.step;
    }
    if (parts.empty()) {
      point.where = "entry arguments";
      return point;
    }
    std::reverse(parts.begin(), parts.end());
    point.where = absl::StrJoin(parts, " > ");
    return point;
  }

 private:
  int Alloc(const HloInstruction* instr, const HloComputation* comp,
            const Shape& shape, int64_t bytes, int site) {
    AllocatedBuffer b;
    b.instruction = instr;
    b.computation = comp;
    b.shape = Shape(shape.element_type(), shape.dimensions());
    b.shape.set_minor_to_major(shape.minor_to_major());
    b.bytes = bytes;
    b.tpu_bytes = TpuPaddedBytes(b.shape);
    b.start = Tick(site);
    b.end = kOpen;
    live_bytes_ += bytes;
    peak_since_mark_ = std::max(peak_since_mark_, live_bytes_);
    buffers_.push_back(std::move(b));
    return static_cast<int>(buffers_.size()) - 1;
  }

  void Free(int b, int site) {
    if (b == kNone || buffers_[b].end != kOpen) return;
    buffers_[b].end = Tick(site);
    live_bytes_ -= buffers_[b].bytes;
    freed_.push_back(b);
  }

  int64_t Tick(int site) {
    time_site_.push_back(site);
    return now_++;
  }

  int NewSite(int parent, const ComputationPlan& p, int step) {
    sites_.push_back({parent, &p, step});
    return static_cast<int>(sites_.size()) - 1;
  }

  std::vector<int> LeavesOf(const ComputationPlan& p, const std::vector<int>& slots,
                            const HloInstruction* x) const {
    std::vector<int> out;
    for (int id : p.leaves.at(x)) out.push_back(id == kNoBuffer ? kNone : slots[id]);
    return out;
  }

  absl::StatusOr<std::vector<int>> Run(const ComputationPlan& p,
                                       const std::vector<int>& args, int parent) {
    std::vector<int> slots(p.buffers.size(), kNone);
    size_t a = 0;
    for (const std::vector<int>& leaves : p.param_leaves) {
      for (int id : leaves) {
        const int b = a < args.size() ? args[a] : kNone;
        ++a;
        if (id != kNoBuffer) slots[id] = b;
      }
    }
    // Arguments never read are freed on entry: attributed to step 0.
    const int first_site = p.steps.empty() ? parent : NewSite(parent, p, 0);
    for (int id : p.frees_on_entry) {
      Free(slots[id], first_site);
      slots[id] = kNone;
    }
    for (int s = 0; s < p.num_steps(); ++s) {
      const Step& step = p.steps[s];
      const int site = s == 0 ? first_site : NewSite(parent, p, s);
      for (int id : step.allocs) {
        const PlannedBuffer& pb = p.buffers[id];
        slots[id] = Alloc(pb.defined_by, p.computation, pb.shape, pb.bytes, site);
      }
      if (step.kind == StepKind::kOp) {
        RETURN_IF_ERROR(RunOp(p, step, site, slots));
      }
      for (int id : step.frees) {
        Free(slots[id], site);
        slots[id] = kNone;
      }
    }
    std::vector<int> out;
    for (int id : p.output_leaves) out.push_back(id == kNoBuffer ? kNone : slots[id]);
    return out;
  }

  absl::Status RunOp(const ComputationPlan& p, const Step& step, int site,
                     std::vector<int>& slots) {
    const HloInstruction* x = step.instr;
    switch (x->opcode()) {
      case HloOpcode::kWhile:
        return RunWhile(p, step, site, slots);
      case HloOpcode::kCall:
      case HloOpcode::kFusion: {
        std::vector<int> args;
        for (const HloInstruction* o : x->operands()) {
          std::vector<int> l = LeavesOf(p, slots, o);
          args.insert(args.end(), l.begin(), l.end());
        }
        const ComputationPlan& callee =
            plan_.Get(x->called_computations()[0], ParamMode::kBorrowed);
        ASSIGN_OR_RETURN(std::vector<int> result, Run(callee, args, site));
        Bind(p, x, result, slots);
        return absl::OkStatus();
      }
      case HloOpcode::kConditional: {
        ASSIGN_OR_RETURN(const int b, WorstBranch(p, x, site, slots));
        const ComputationPlan& branch =
            plan_.Get(x->called_computations()[b], ParamMode::kBorrowed);
        ASSIGN_OR_RETURN(std::vector<int> result,
                         Run(branch, LeavesOf(p, slots, x->operand(b + 1)), site));
        Bind(p, x, result, slots);
        return absl::OkStatus();
      }
      default:
        return absl::OkStatus();
    }
  }

  void Bind(const ComputationPlan& p, const HloInstruction* x,
            const std::vector<int>& result, std::vector<int>& slots) const {
    const std::vector<int>& out = p.leaves.at(x);
    for (size_t i = 0; i < out.size() && i < result.size(); ++i) {
      if (out[i] != kNoBuffer) slots[out[i]] = result[i];
    }
  }

  absl::Status RunWhile(const ComputationPlan& p, const Step& step, int site,
                        std::vector<int>& slots) {
    const HloInstruction* x = step.instr;
    const ComputationPlan& body = plan_.Get(x->while_body(), ParamMode::kDonated);
    const ComputationPlan& cond =
        plan_.Get(x->while_condition(), ParamMode::kBorrowed);
    std::vector<int> state = LeavesOf(p, slots, x->operand(0));
    for (int leaf : step.copy_leaves) {
      const int src = state[leaf];
      if (src == kNone) continue;
      const AllocatedBuffer& from = buffers_[src];
      const Shape shape = from.shape;
      state[leaf] = Alloc(x, p.computation, shape, from.bytes, site);
    }
    for (int id : step.moves) slots[id] = kNone;  // the loop owns them now
    // condition, body, condition: every further iteration repeats the same
    // allocations over state buffers of the same sizes.
    for (int round = 0; round < 2; ++round) {
      ASSIGN_OR_RETURN(std::vector<int> pred, Run(cond, state, site));
      for (int b : pred) Free(b, site);
      if (round == 1) break;
      ASSIGN_OR_RETURN(state, Run(body, state, site));
    }
    const std::vector<int>& out = p.leaves.at(x);
    for (size_t i = 0; i < out.size() && i < state.size(); ++i) {
      if (out[i] != kNoBuffer && !body.passthrough[i]) slots[out[i]] = state[i];
    }
    return absl::OkStatus();
  }

  // The branch whose replay reaches the highest live bytes (ties: the
  // lowest index), found by replaying each and rolling back.
  absl::StatusOr<int> WorstBranch(const ComputationPlan& p, const HloInstruction* x,
                                  int site, const std::vector<int>& slots) {
    const int n = static_cast<int>(x->called_computations().size());
    if (n == 1) return 0;
    int best = 0;
    int64_t best_peak = -1;
    for (int b = 0; b < n; ++b) {
      const size_t mark_buffers = buffers_.size(), mark_sites = sites_.size(),
                   mark_freed = freed_.size();
      const int64_t mark_now = now_, mark_live = live_bytes_,
                    mark_peak = peak_since_mark_;
      peak_since_mark_ = live_bytes_;
      const ComputationPlan& branch =
          plan_.Get(x->called_computations()[b], ParamMode::kBorrowed);
      RETURN_IF_ERROR(Run(branch, LeavesOf(p, slots, x->operand(b + 1)), site).status());
      if (peak_since_mark_ > best_peak) {
        best_peak = peak_since_mark_;
        best = b;
      }
      for (size_t i = mark_freed; i < freed_.size(); ++i) {
        if (freed_[i] < static_cast<int>(mark_buffers)) buffers_[freed_[i]].end = kOpen;
      }
      freed_.resize(mark_freed);
      buffers_.resize(mark_buffers);
      sites_.resize(mark_sites);
      time_site_.resize(mark_now);
      now_ = mark_now;
      live_bytes_ = mark_live;
      peak_since_mark_ = std::max(mark_peak, live_bytes_);
    }
    return best;
  }

  const BufferPlan& plan_;
  std::vector<AllocatedBuffer> buffers_;
  std::vector<Site> sites_;
  std::vector<int> time_site_;  // site of each logical time
  std::vector<int> freed_;      // buffers in the order freed (for rollback)
  int64_t now_ = 0;
  int64_t live_bytes_ = 0;
  int64_t peak_since_mark_ = 0;
};

// The peak of one view (dense or padded bytes) with its split.
MemoryPeak MakePeak(const HeapPeak& heap, const std::vector<AllocatedBuffer>& buffers,
                    const Replayer& replay, bool tpu) {
  MemoryPeak peak;
  peak.bytes = heap.bytes;
  peak.time = heap.time;
  peak.live = heap.live;
  peak.point = replay.PointAt(heap.time);
  for (int i : heap.live) {
    const AllocatedBuffer& b = buffers[i];
    const int64_t bytes = tpu ? b.tpu_bytes : b.bytes;
    switch (b.kind) {
      case BufferKind::kArgument: peak.argument_bytes += bytes; break;
      case BufferKind::kOutput: peak.output_bytes += bytes; break;
      case BufferKind::kTemp: peak.temp_bytes += bytes; break;
    }
  }
  return peak;
}

std::string PeakToString(const MemoryAnalysis& a, const MemoryPeak& peak, bool tpu,
                         int64_t best_fit, int top) {
  std::string out = absl::StrCat(
      tpu ? "tpu " : "", "peak ", peak.bytes, " at t=", peak.time, " (",
      peak.point.where, "): argument ", peak.argument_bytes, ", output ",
      peak.output_bytes, ", temp ", peak.temp_bytes, "; best-fit ", best_fit, "\n");
  for (int i = 0; i < static_cast<int>(peak.live.size()) && i < top; ++i) {
    const AllocatedBuffer& b = a.buffers[peak.live[i]];
    absl::StrAppend(&out, "  %", b.instruction ? b.instruction->name() : "?", " ",
                    b.shape.ToString(), " ", tpu ? b.tpu_bytes : b.bytes, " ",
                    BufferKindName(b.kind), " [", b.start, ",", b.end, ")\n");
  }
  if (static_cast<int>(peak.live.size()) > top) {
    absl::StrAppend(&out, "  ... ", peak.live.size() - top, " more\n");
  }
  return out;
}

// Equality of what a report shows, for grouping devices.
bool SameAnalysis(const MemoryAnalysis& a, const MemoryAnalysis& b) {
  auto same_peak = [&](const MemoryPeak& x, const MemoryPeak& y, bool tpu) {
    if (x.bytes != y.bytes || x.time != y.time || x.live.size() != y.live.size() ||
        x.point.where != y.point.where || x.argument_bytes != y.argument_bytes ||
        x.output_bytes != y.output_bytes || x.temp_bytes != y.temp_bytes) {
      return false;
    }
    for (size_t i = 0; i < x.live.size(); ++i) {
      const AllocatedBuffer& p = a.buffers[x.live[i]];
      const AllocatedBuffer& q = b.buffers[y.live[i]];
      if ((tpu ? p.tpu_bytes != q.tpu_bytes : p.bytes != q.bytes) ||
          !p.shape.Compatible(q.shape) || p.kind != q.kind ||
          (p.instruction == nullptr) != (q.instruction == nullptr) ||
          (p.instruction && p.instruction->name() != q.instruction->name())) {
        return false;
      }
    }
    return true;
  };
  return a.best_fit_bytes == b.best_fit_bytes &&
         a.tpu_best_fit_bytes == b.tpu_best_fit_bytes &&
         a.argument_bytes == b.argument_bytes && a.output_bytes == b.output_bytes &&
         same_peak(a.peak, b.peak, false) && same_peak(a.tpu_peak, b.tpu_peak, true);
}

}  // namespace

std::string MemoryAnalysis::ToString(int top) const {
  return absl::StrCat(PeakToString(*this, peak, false, best_fit_bytes, top),
                      PeakToString(*this, tpu_peak, true, tpu_best_fit_bytes, top));
}

absl::StatusOr<MemoryAnalysis> AnalyzeMemory(const HloModule& module,
                                             const BufferPlan& plan) {
  Replayer replay(plan);
  RETURN_IF_ERROR(replay.RunEntry());
  MemoryAnalysis a;
  a.module_name = module.name();
  a.buffers = std::move(replay.buffers());
  a.num_times = replay.num_times();
  std::vector<LiveInterval> dense, padded;
  dense.reserve(a.buffers.size());
  padded.reserve(a.buffers.size());
  for (const AllocatedBuffer& b : a.buffers) {
    dense.push_back({b.bytes, b.start, b.end});
    padded.push_back({b.tpu_bytes, b.start, b.end});
    if (b.kind == BufferKind::kArgument) a.argument_bytes += b.bytes;
    if (b.kind == BufferKind::kOutput) a.output_bytes += b.bytes;
  }
  a.peak = MakePeak(FindPeak(dense), a.buffers, replay, false);
  a.tpu_peak = MakePeak(FindPeak(padded), a.buffers, replay, true);
  a.best_fit_bytes = BestFitPlacement(dense).heap_bytes;
  a.tpu_best_fit_bytes = BestFitPlacement(padded).heap_bytes;
  return a;
}

absl::StatusOr<MemoryAnalysis> AnalyzeMemory(const HloModule& module,
                                             const MemoryAnalysisOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<BufferPlan> plan,
                   BufferPlan::Build(module, options.plan));
  return AnalyzeMemory(module, *plan);
}

absl::StatusOr<DeviceMemoryReport> AnalyzeDeviceMemory(
    const HloModule& module, const MemoryAnalysisOptions& options) {
  DeviceMemoryReport report;
  report.module_name = module.name();
  report.num_devices = std::max<int64_t>(1, module.num_partitions());
  DeviceGroup group;
  for (int64_t d = 0; d < report.num_devices; ++d) group.devices.push_back(d);
  ASSIGN_OR_RETURN(group.analysis, AnalyzeMemory(module, options));
  report.groups.push_back(std::move(group));
  return report;
}

absl::StatusOr<DeviceMemoryReport> AnalyzeDeviceMemory(
    const std::vector<const HloModule*>& modules,
    const MemoryAnalysisOptions& options) {
  if (modules.empty()) {
    return absl::InvalidArgumentError("AnalyzeDeviceMemory: no device modules");
  }
  DeviceMemoryReport report;
  report.module_name = modules[0]->name();
  report.num_devices = static_cast<int64_t>(modules.size());
  for (int64_t d = 0; d < report.num_devices; ++d) {
    ASSIGN_OR_RETURN(MemoryAnalysis a, AnalyzeMemory(*modules[d], options));
    bool grouped = false;
    for (DeviceGroup& g : report.groups) {
      if (SameAnalysis(g.analysis, a)) {
        g.devices.push_back(d);
        grouped = true;
        break;
      }
    }
    if (!grouped) report.groups.push_back({{d}, std::move(a)});
  }
  return report;
}

}  // namespace tpuoff::hlo
