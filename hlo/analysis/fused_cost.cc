// kFused counting: walks the emulator's plan (hlo/analysis/buffer_plan.h)
// step by step and counts what each step moves between its buffers, loop
// bodies times their trip counts (hlo/analysis/trip_count.h).
#include <algorithm>
#include <functional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/trip_count.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace internal {
ModuleCost XlaModuleCost(const HloModule& module);
}  // namespace internal

namespace {

double DenseBytes(const Shape& s) { return static_cast<double>(s.total_leaf_bytes()); }

bool IsSliceRead(const HloInstruction* user, const HloInstruction* v) {
  return (user->opcode() == HloOpcode::kSlice || user->opcode() == HloOpcode::kDynamicSlice) &&
         user->operand(0) == v;
}

class FusedCounter {
 public:
  FusedCounter(const BufferPlan& plan, ModuleCost* out) : plan_(plan), out_(out) {}

  absl::Status Walk(const ComputationPlan& p, const std::string& where, double executions) {
    for (const Step& step : p.steps) {
      RETURN_IF_ERROR(WalkStep(p, step, where, executions));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status WalkStep(const ComputationPlan& p, const Step& step, const std::string& where,
                        double executions) {
    OpCost op;
    op.instruction = step.instr;
    op.name = step.name;
    op.where = where;
    op.executions = executions;
    switch (step.kind) {
      case StepKind::kLoop:
      case StepKind::kLoopReduce:
        LoopStep(step, &op);
        break;
      case StepKind::kRootCopy:
        for (const auto& [leaf, buffer] : step.root_copies) {
          op.bytes_read += static_cast<double>(p.buffers[buffer].bytes);
          op.bytes_written += static_cast<double>(p.buffers[buffer].bytes);
        }
        break;
      case StepKind::kOp: {
        const HloInstruction* x = step.instr;
        switch (x->opcode()) {
          case HloOpcode::kWhile:
            return While(p, step, where, executions);
          case HloOpcode::kCall:
          case HloOpcode::kFusion:
            for (const HloComputation* callee : x->called_computations()) {
              RETURN_IF_ERROR(Walk(plan_.Get(callee, ParamMode::kBorrowed),
                                   absl::StrCat(where, " > ", callee->name()), executions));
            }
            return absl::OkStatus();
          case HloOpcode::kConditional:
            return Conditional(step, where, executions);
          default:
            OpStep(p, step, &op);
        }
        break;
      }
    }
    Add(std::move(op));
    return absl::OkStatus();
  }

  void Add(OpCost op) {
    out_->totals.flops += op.executions * op.flops;
    out_->totals.transcendentals += op.executions * op.transcendentals;
    out_->totals.bytes_read += op.executions * op.bytes_read;
    out_->totals.bytes_written += op.executions * op.bytes_written;
    out_->ops.push_back(std::move(op));
  }

  // A fused group: the arithmetic of every member it evaluates, the arrays
  // it takes from outside read once (or only the slices it reads of them),
  // its roots written.
  static void LoopStep(const Step& step, OpCost* op) {
    absl::flat_hash_set<const HloInstruction*> computed(step.fused.begin(), step.fused.end());
    for (const HloInstruction* r : step.roots) computed.insert(r);
    computed.insert(step.instr);
    op->fused_ops = static_cast<int64_t>(computed.size());
    for (const HloInstruction* x : computed) {
      const XlaInstructionCost c = XlaCostOf(*x);
      op->flops += c.flops;
      op->transcendentals += c.transcendentals;
    }
    const HloInstruction* updated =
        step.update ? step.instr->operand(0) : nullptr;  // the array a fused update writes into
    for (const HloInstruction* v : step.reads) {
      if (!v->shape().IsArray()) continue;
      const double full = DenseBytes(v->shape());
      if (v == updated) {
        // In place: untouched outside the update. Otherwise copied first.
        if (step.in_place_of == kNoBuffer) {
          op->bytes_read += full;
          op->bytes_written += full;
        }
        continue;
      }
      bool only_slices = true;
      double sliced = 0;
      bool any = false;
      for (const HloInstruction* u : v->users()) {
        if (!computed.contains(u)) continue;
        any = true;
        if (IsSliceRead(u, v)) {
          sliced += DenseBytes(u->shape());
        } else {
          only_slices = false;
        }
      }
      op->bytes_read += (any && only_slices) ? std::min(sliced, full) : full;
    }
    for (const HloInstruction* r : step.roots) {
      if (step.update && r == step.instr) {
        op->bytes_written += DenseBytes(r->operand(1)->shape());
      } else {
        op->bytes_written += DenseBytes(r->shape());
      }
    }
  }

  static void OpStep(const ComputationPlan& p, const Step& step, OpCost* op) {
    const HloInstruction* x = step.instr;
    const XlaInstructionCost c = XlaCostOf(*x);
    op->flops = std::max(0.0, c.flops);
    op->mxu_flops = c.mxu_flops;
    op->mxu_passes = c.mxu_flops > 0 ? MxuPasses(*x) : 1;
    op->transcendentals = c.transcendentals;
    if (IsCollective(x->opcode())) op->collectives.push_back({x, 1});
    auto operands = [&] {
      double b = 0;
      for (const HloInstruction* o : x->operands()) b += DenseBytes(o->shape());
      return b;
    };
    switch (x->opcode()) {
      case HloOpcode::kParameter:
      case HloOpcode::kConstant:  // already in HBM
      case HloOpcode::kGetTupleElement:
      case HloOpcode::kTuple:
      case HloOpcode::kReshape:
      case HloOpcode::kBitcastConvert:
      case HloOpcode::kOptimizationBarrier:
      case HloOpcode::kAddDependency:
      case HloOpcode::kDomain:
      case HloOpcode::kAfterAll:
      case HloOpcode::kPartitionId:
      case HloOpcode::kReplicaId:
        break;
      case HloOpcode::kBitcast:
      case HloOpcode::kCopy:
      case HloOpcode::kCustomCall:
        // Aliased leaves move nothing; new buffers are copies.
        for (int b : step.allocs) {
          op->bytes_read += static_cast<double>(p.buffers[b].bytes);
          op->bytes_written += static_cast<double>(p.buffers[b].bytes);
        }
        if (x->opcode() == HloOpcode::kCustomCall && !IsPassThrough(*x) && step.allocs.empty()) {
          op->bytes_read = operands();
          op->bytes_written = DenseBytes(x->shape());
        }
        break;
      case HloOpcode::kDynamicUpdateSlice: {
        const double update = DenseBytes(x->operand(1)->shape());
        double index = 0;
        for (int64_t i = 2; i < x->operand_count(); ++i) index += DenseBytes(x->operand(i)->shape());
        op->bytes_read = update + index;
        op->bytes_written = update;
        if (step.in_place_of == kNoBuffer) {  // copies the array first
          op->bytes_read += DenseBytes(x->shape());
          op->bytes_written += DenseBytes(x->shape());
        }
        break;
      }
      case HloOpcode::kSlice:
      case HloOpcode::kDynamicSlice:
      case HloOpcode::kGather: {
        double index = 0;
        for (int64_t i = 1; i < x->operand_count(); ++i) index += DenseBytes(x->operand(i)->shape());
        op->bytes_read = DenseBytes(x->shape()) + index;
        op->bytes_written = DenseBytes(x->shape());
        break;
      }
      default:
        op->bytes_read = operands();
        op->bytes_written = DenseBytes(x->shape());
    }
  }

  absl::Status While(const ComputationPlan& p, const Step& step, const std::string& where,
                     double executions) {
    const HloInstruction* x = step.instr;
    // State leaves copied once before the loop.
    if (!step.copy_leaves.empty()) {
      OpCost copy;
      copy.instruction = x;
      copy.name = absl::StrCat("copy-before.", x->name());
      copy.where = where;
      copy.executions = executions;
      const std::vector<Shape> shapes = LeafShapes(x->shape());
      for (int leaf : step.copy_leaves) {
        copy.bytes_read += DenseBytes(shapes[leaf]);
        copy.bytes_written += DenseBytes(shapes[leaf]);
      }
      Add(std::move(copy));
    }
    (void)p;
    const std::optional<int64_t> trips = WhileTripCount(*x);
    double n = 1;
    if (trips) {
      n = static_cast<double>(*trips);
    } else {
      out_->notes.push_back(absl::StrCat(x->name(), ": trip count unknown, body counted once"));
    }
    const std::string inner = absl::StrCat(where, " > ", x->name(), " (x", trips ? *trips : 1, ")");
    RETURN_IF_ERROR(Walk(plan_.Get(x->while_condition(), ParamMode::kBorrowed),
                         absl::StrCat(inner, " cond"), executions * (n + 1)));
    return Walk(plan_.Get(x->while_body(), ParamMode::kDonated), inner, executions * n);
  }

  // The branch that moves the most (then computes the most) stands for the
  // conditional, as the memory analysis takes its largest branch.
  absl::Status Conditional(const Step& step, const std::string& where, double executions) {
    ModuleCost best;
    bool have = false;
    for (const HloComputation* branch : step.instr->called_computations()) {
      ModuleCost trial;
      FusedCounter sub(plan_, &trial);
      RETURN_IF_ERROR(sub.Walk(plan_.Get(branch, ParamMode::kBorrowed),
                               absl::StrCat(where, " > ", branch->name()), executions));
      const auto key = [](const ModuleCost& m) {
        return std::make_pair(m.totals.bytes_accessed(), m.totals.flops + m.totals.transcendentals);
      };
      if (!have || key(trial) > key(best)) {
        best = std::move(trial);
        have = true;
      }
    }
    for (OpCost& op : best.ops) Add(std::move(op));
    for (std::string& n : best.notes) out_->notes.push_back(std::move(n));
    return absl::OkStatus();
  }

  const BufferPlan& plan_;
  ModuleCost* out_;
};

}  // namespace

const char* CostCountingName(CostCounting counting) {
  return counting == CostCounting::kXla ? "xla" : "fused";
}

absl::StatusOr<ModuleCost> AnalyzeCost(const HloModule& module, const CostOptions& options) {
  if (module.entry() == nullptr) return absl::InvalidArgumentError("module has no entry computation");
  if (options.counting == CostCounting::kXla) return internal::XlaModuleCost(module);
  ASSIGN_OR_RETURN(std::unique_ptr<BufferPlan> plan, BufferPlan::Build(module, options.plan));
  ModuleCost out;
  out.module_name = module.name();
  out.counting = CostCounting::kFused;
  FusedCounter counter(*plan, &out);
  RETURN_IF_ERROR(counter.Walk(plan->entry(), module.entry()->name(), 1));
  return out;
}

}  // namespace tpuoff::hlo
