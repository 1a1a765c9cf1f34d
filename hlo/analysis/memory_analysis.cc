#include "hlo/analysis/memory_analysis.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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
// Most overlapping buffer pairs a best-fit placement is computed for.
constexpr int64_t kMaxPlacementPairs = int64_t{1} << 25;

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

  // Whether a step of `p` writes another value over buffer `id` in place.
  bool WrittenOver(const ComputationPlan& p, int id) {
    auto [it, fresh] = written_.try_emplace(&p);
    if (fresh) {
      for (const Step& st : p.steps) {
        if (st.in_place_of != kNoBuffer) it->second.insert(st.in_place_of);
      }
    }
    return it->second.contains(id);
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

  // One running computation of the replay. Callees run as activations
  // pushed on an explicit stack (never by recursion, so call chains of any
  // depth replay); `op` holds the progress of the step waiting for them.
  struct OpProgress {
    int phase = 0;   // while: 0 condition, 1 body, 2 last condition
    int branch = 0;  // conditional: branch being probed / run
    int best = 0;
    int64_t best_peak = -1;
    bool probing = false;
    std::vector<int> state;  // while state leaves
    // Conditional probes roll back to these marks.
    size_t mark_buffers = 0, mark_sites = 0, mark_freed = 0;
    int64_t mark_now = 0, mark_live = 0, mark_peak = 0;
  };
  struct Activation {
    const ComputationPlan* plan = nullptr;
    std::vector<int> slots;
    int parent = -1;  // caller's site
    int first_site = -1;
    int step = 0;     // step being run
    int site = -1;    // its site
    OpProgress op;
  };

  // Replays `p` called with `args` from site `parent`; its result leaves.
  absl::StatusOr<std::vector<int>> Run(const ComputationPlan& p,
                                       const std::vector<int>& args, int parent) {
    std::vector<Activation> stack;
    Enter(&stack, p, args, parent);
    std::vector<int> result;
    bool returned = false;  // `result` holds the outputs of a finished callee
    while (true) {
      if (++work_ > kMaxReplayWork) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "memory analysis: replaying the program takes more than ", kMaxReplayWork,
            " steps (computations called from very many sites, or deeply nested "
            "conditionals)"));
      }
      const size_t depth = stack.size();
      if (returned) {
        returned = false;
        ASSIGN_OR_RETURN(bool done, Resume(&stack, std::move(result)));
        if (done) FinishStep(stack.back());
        continue;
      }
      Activation& a = stack.back();
      if (a.step == a.plan->num_steps()) {
        for (int id : a.plan->output_leaves) {
          result.push_back(id == kNoBuffer ? kNone : a.slots[id]);
        }
        stack.pop_back();
        if (stack.empty()) return result;
        returned = true;
        continue;
      }
      const Step& step = a.plan->steps[a.step];
      a.site = a.step == 0 ? a.first_site : NewSite(a.parent, *a.plan, a.step);
      for (int id : step.allocs) {
        const PlannedBuffer& pb = a.plan->buffers[id];
        a.slots[id] = Alloc(pb.defined_by, a.plan->computation, pb.shape, pb.bytes, a.site);
        buffers_[a.slots[id]].written_over = WrittenOver(*a.plan, id);
      }
      a.op = OpProgress();
      ASSIGN_OR_RETURN(bool done, step.kind == StepKind::kOp ? StartOp(&stack) : true);
      if (done && stack.size() == depth) FinishStep(stack.back());
    }
  }

  void Enter(std::vector<Activation>* stack, const ComputationPlan& p,
             const std::vector<int>& args, int parent) {
    Activation a;
    a.plan = &p;
    a.parent = parent;
    a.slots.assign(p.buffers.size(), kNone);
    size_t k = 0;
    for (const std::vector<int>& leaves : p.param_leaves) {
      for (int id : leaves) {
        const int b = k < args.size() ? args[k] : kNone;
        ++k;
        if (id != kNoBuffer) a.slots[id] = b;
      }
    }
    // Arguments never read are freed on entry: attributed to step 0.
    a.first_site = p.steps.empty() ? parent : NewSite(parent, p, 0);
    for (int id : p.frees_on_entry) {
      Free(a.slots[id], a.first_site);
      a.slots[id] = kNone;
    }
    stack->push_back(std::move(a));
  }

  void FinishStep(Activation& a) {
    const Step& step = a.plan->steps[a.step];
    for (int id : step.frees) {
      Free(a.slots[id], a.site);
      a.slots[id] = kNone;
    }
    ++a.step;
  }

  std::vector<int> Arguments(const Activation& a, const HloInstruction* x) const {
    std::vector<int> args;
    for (const HloInstruction* o : x->operands()) {
      std::vector<int> l = LeavesOf(*a.plan, a.slots, o);
      args.insert(args.end(), l.begin(), l.end());
    }
    return args;
  }

  // Starts the op of the top activation's step: true when it is done, false
  // when it pushed a callee (Resume continues it).
  absl::StatusOr<bool> StartOp(std::vector<Activation>* stack) {
    Activation& a = stack->back();
    const HloInstruction* x = a.plan->steps[a.step].instr;
    switch (x->opcode()) {
      case HloOpcode::kWhile: {
        const Step& step = a.plan->steps[a.step];
        a.op.state = LeavesOf(*a.plan, a.slots, x->operand(0));
        for (int leaf : step.copy_leaves) {
          const int src = a.op.state[leaf];
          if (src == kNone) continue;
          const Shape shape = buffers_[src].shape;
          a.op.state[leaf] = Alloc(x, a.plan->computation, shape, buffers_[src].bytes, a.site);
        }
        for (int id : step.moves) a.slots[id] = kNone;  // the loop owns them now
        const int site = a.site;
        std::vector<int> state = a.op.state;
        Enter(stack, plan_.Get(x->while_condition(), ParamMode::kBorrowed), state, site);
        return false;
      }
      case HloOpcode::kCall:
      case HloOpcode::kFusion: {
        const int site = a.site;
        std::vector<int> args = Arguments(a, x);
        Enter(stack, plan_.Get(x->called_computations()[0], ParamMode::kBorrowed), args, site);
        return false;
      }
      case HloOpcode::kConditional:
        a.op.probing = x->called_computations().size() > 1;
        StartBranch(stack);
        return false;
      default:
        return true;
    }
  }

  // Pushes branch a.op.branch of the top activation's conditional, marking
  // the replay first when it is a probe (rolled back afterwards).
  void StartBranch(std::vector<Activation>* stack) {
    Activation& a = stack->back();
    const HloInstruction* x = a.plan->steps[a.step].instr;
    OpProgress& op = a.op;
    if (op.probing) {
      op.mark_buffers = buffers_.size();
      op.mark_sites = sites_.size();
      op.mark_freed = freed_.size();
      op.mark_now = now_;
      op.mark_live = live_bytes_;
      op.mark_peak = peak_since_mark_;
      peak_since_mark_ = live_bytes_;
    }
    const int site = a.site;
    std::vector<int> args = LeavesOf(*a.plan, a.slots, x->operand(op.branch + 1));
    Enter(stack, plan_.Get(x->called_computations()[op.branch], ParamMode::kBorrowed), args,
          site);
  }

  // A callee of the top activation's step returned `result`: true when the
  // step is done, false when it pushed another callee.
  absl::StatusOr<bool> Resume(std::vector<Activation>* stack, std::vector<int> result) {
    Activation& a = stack->back();
    const Step& step = a.plan->steps[a.step];
    const HloInstruction* x = step.instr;
    OpProgress& op = a.op;
    switch (x->opcode()) {
      case HloOpcode::kWhile: {
        // condition, body, condition: every further iteration repeats the
        // same allocations over state buffers of the same sizes.
        const ComputationPlan& body = plan_.Get(x->while_body(), ParamMode::kDonated);
        const int site = a.site;
        if (op.phase == 1) {
          op.state = std::move(result);
          op.phase = 2;
          std::vector<int> state = op.state;
          Enter(stack, plan_.Get(x->while_condition(), ParamMode::kBorrowed), state, site);
          return false;
        }
        for (int b : result) Free(b, site);  // the predicate
        if (op.phase == 0) {
          op.phase = 1;
          std::vector<int> state = op.state;
          Enter(stack, body, state, site);
          return false;
        }
        const std::vector<int>& out = a.plan->leaves.at(x);
        for (size_t i = 0; i < out.size() && i < op.state.size(); ++i) {
          if (out[i] != kNoBuffer && !body.passthrough[i]) a.slots[out[i]] = op.state[i];
        }
        return true;
      }
      case HloOpcode::kConditional: {
        if (!op.probing) {
          Bind(*a.plan, x, result, a.slots);
          return true;
        }
        // The branch whose replay reaches the highest live bytes (ties: the
        // lowest index), found by replaying each and rolling back.
        if (peak_since_mark_ > op.best_peak) {
          op.best_peak = peak_since_mark_;
          op.best = op.branch;
        }
        for (size_t i = op.mark_freed; i < freed_.size(); ++i) {
          if (freed_[i] < static_cast<int>(op.mark_buffers)) buffers_[freed_[i]].end = kOpen;
        }
        freed_.resize(op.mark_freed);
        buffers_.resize(op.mark_buffers);
        sites_.resize(op.mark_sites);
        time_site_.resize(op.mark_now);
        now_ = op.mark_now;
        live_bytes_ = op.mark_live;
        peak_since_mark_ = std::max(op.mark_peak, live_bytes_);
        if (++op.branch == static_cast<int>(x->called_computations().size())) {
          op.probing = false;
          op.branch = op.best;
        }
        StartBranch(stack);
        return false;
      }
      default:  // call, fusion
        Bind(*a.plan, x, result, a.slots);
        return true;
    }
  }

  void Bind(const ComputationPlan& p, const HloInstruction* x,
            const std::vector<int>& result, std::vector<int>& slots) const {
    const std::vector<int>& out = p.leaves.at(x);
    for (size_t i = 0; i < out.size() && i < result.size(); ++i) {
      if (out[i] != kNoBuffer) slots[out[i]] = result[i];
    }
  }

  // Bounds the replay, which walks every call site and probes every
  // conditional branch: programs whose replay is exponential in their size
  // fail instead of hanging.
  static constexpr int64_t kMaxReplayWork = int64_t{1} << 26;
  int64_t work_ = 0;

  const BufferPlan& plan_;
  std::vector<AllocatedBuffer> buffers_;
  absl::flat_hash_map<const ComputationPlan*, absl::flat_hash_set<int>> written_;
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
  // The placement's work grows with the overlapping pairs; past a bound it
  // is left out (-1) rather than taking minutes.
  if (CountOverlappingPairs(dense) <= kMaxPlacementPairs) {
    a.best_fit_bytes = BestFitPlacement(dense).heap_bytes;
    a.tpu_best_fit_bytes = BestFitPlacement(padded).heap_bytes;
  } else {
    a.best_fit_bytes = a.tpu_best_fit_bytes = -1;
  }
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
