#include "runtime/emulator/executor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/exec_context.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/emulator/loop_program.h"
#include "runtime/emulator/ops.h"
#include "runtime/emulator/ops_extra.h"
#include "runtime/emulator/ops_window.h"
#include "runtime/emulator/plan.h"

namespace tpuoff::runtime {
namespace {

// memcpy with a null pointer is undefined even for 0 bytes (empty arrays).
inline void CopyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}


using hlo::HloComputation;
using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::Shape;

// Buffers of one running computation, by planned buffer id.
struct Frame {
  const ComputationPlan* plan;
  std::vector<DeviceBuffer*> slots;

  DeviceBuffer* Leaf(const HloInstruction* x, size_t i = 0) const {
    const int id = plan->leaves.at(x)[i];
    return id == kNoBuffer ? nullptr : slots[id];
  }
  void* Data(const HloInstruction* x, size_t i = 0) const {
    DeviceBuffer* b = Leaf(x, i);
    return b ? b->data : nullptr;
  }
  std::vector<DeviceBuffer*> Leaves(const HloInstruction* x) const {
    std::vector<DeviceBuffer*> out;
    for (int id : plan->leaves.at(x)) out.push_back(id == kNoBuffer ? nullptr : slots[id]);
    return out;
  }
};

absl::StatusOr<std::vector<DeviceBuffer*>> RunComputation(
    ExecContext& ctx, const ComputationPlan& plan,
    const std::vector<DeviceBuffer*>& args);

absl::Status ExecuteOp(ExecContext& ctx, Frame& f, const Step& step);

// Ops of ops_extra.h: operand and result leaves handed over as pointers.
absl::Status RunExtraOp(Frame& f, const HloInstruction& x) {
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const HloInstruction* o : x.operands()) {
    for (DeviceBuffer* b : f.Leaves(o)) in.push_back(b ? b->data : nullptr);
  }
  for (DeviceBuffer* b : f.Leaves(&x)) out.push_back(b ? b->data : nullptr);
  return ExecuteExtraOp(x, in, out);
}
absl::Status RunChain(ExecContext& ctx, Frame& f, const RowChain& chain);

// Allocates the buffers `step` defines on the device; returns their bytes.
absl::StatusOr<int64_t> AllocateStepBuffers(ExecContext& ctx, Frame& f, const Step& step) {
  int64_t bytes = 0;
  for (int id : step.allocs) {
    const int64_t size = f.plan->buffers[id].bytes;
    ASSIGN_OR_RETURN(f.slots[id], ctx.device->Allocate(size, step.instr->name()));
    bytes += size;
  }
  return bytes;
}

std::string StepCategory(const Step& step) {
  switch (step.kind) {
    case StepKind::kLoop: return step.fused.size() > 1 ? "fusion" : "elementwise";
    case StepKind::kLoopReduce: return "reduce";
    case StepKind::kRootCopy: return "copy";
    case StepKind::kOp: break;
  }
  if (hlo::IsCollective(step.instr->opcode())) return "collective";
  if (step.instr->opcode() == HloOpcode::kWhile) return "while";
  return "op";
}

absl::Status Annotate(const absl::Status& s, const ExecContext& ctx,
                      const HloInstruction* instr) {
  if (s.ok() || s.code() == absl::StatusCode::kResourceExhausted ||
      s.code() == absl::StatusCode::kAborted ||
      s.code() == absl::StatusCode::kDeadlineExceeded) {
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("device ", ctx.device_index,
                                             ": executing %", instr->name(),
                                             ": ", s.message()));
}

absl::StatusOr<std::vector<DeviceBuffer*>> RunComputation(
    ExecContext& ctx, const ComputationPlan& plan,
    const std::vector<DeviceBuffer*>& args) {
  Frame f{&plan, std::vector<DeviceBuffer*>(plan.buffers.size(), nullptr)};
  size_t a = 0;
  for (const std::vector<int>& leaves : plan.param_leaves) {
    for (int id : leaves) {
      DeviceBuffer* b = a < args.size() ? args[a] : nullptr;
      ++a;
      if (id != kNoBuffer) f.slots[id] = b;
    }
  }
  for (int id : plan.frees_on_entry) {
    ctx.device->Free(f.slots[id], plan.computation->name());
    f.slots[id] = nullptr;
  }
  for (int si = 0; si < plan.num_steps(); ++si) {
    if (const RowChain* chain = ctx.plan->chain(plan, si)) {
      RETURN_IF_ERROR(RunChain(ctx, f, *chain));
      si = chain->last;
      continue;
    }
    const Step& step = plan.steps[si];
    const double t0 = ctx.trace ? ctx.device->NowMicros() : 0;
    ASSIGN_OR_RETURN(int64_t bytes, AllocateStepBuffers(ctx, f, step));
    RETURN_IF_ERROR(Annotate(ExecuteOp(ctx, f, step), ctx, step.instr));
    if (ctx.trace) {
      if (step.in_place_of != kNoBuffer) bytes += plan.buffers[step.in_place_of].bytes;
      ctx.trace->AddEvent({step.name, StepCategory(step), ctx.device_index, t0,
                           ctx.device->NowMicros() - t0, bytes});
    }
    for (int id : step.frees) {
      ctx.device->Free(f.slots[id], step.instr->name());
      f.slots[id] = nullptr;
    }
  }
  std::vector<DeviceBuffer*> out;
  for (int id : plan.output_leaves) out.push_back(id == kNoBuffer ? nullptr : f.slots[id]);
  return out;
}

// The arrays a fused step's program reads and writes.
void LoopArrays(const Frame& f, const Step& step, const LoopProgram& p,
                std::vector<const void*>* inputs, std::vector<void*>* outputs) {
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    inputs->push_back(p.inputs[i] ? f.Data(p.inputs[i]) : p.literals[i]->raw());
  }
  if (step.kind == StepKind::kLoopReduce) {
    for (const HloInstruction* r : step.roots) outputs->push_back(f.Data(r));
  } else {
    outputs->push_back(f.Data(step.instr));
  }
}

// Steps chain.first..chain.last as one row chain (runtime/emulator/row_chain.h).
// Allocations and frees are accounted in the planned order, so HBM figures
// are the step-by-step ones; the host memory of buffers freed inside the
// chain goes back only after the chain has run, as later chunks still read
// it.
absl::Status RunChain(ExecContext& ctx, Frame& f, const RowChain& chain) {
  const ComputationPlan& plan = *f.plan;
  const double t0 = ctx.trace ? ctx.device->NowMicros() : 0;
  const int n = chain.last - chain.first + 1;
  std::vector<std::vector<const void*>> inputs(n);
  std::vector<std::vector<void*>> outputs(n);
  std::vector<LoopExecution> steps;
  steps.reserve(n);
  std::vector<void*> released;
  auto release = [&] {
    for (void* p : released) HostFree(p);
  };
  int64_t bytes = 0;
  std::string name;
  for (int k = 0; k < n; ++k) {
    const Step& step = plan.steps[chain.first + k];
    absl::StatusOr<int64_t> allocated = AllocateStepBuffers(ctx, f, step);
    if (!allocated.ok()) {
      release();
      return allocated.status();
    }
    bytes += *allocated;
    if (const LoopProgram* p = ctx.plan->program(step)) {
      LoopArrays(f, step, *p, &inputs[k], &outputs[k]);
      steps.emplace_back(*p, inputs[k], outputs[k]);
    } else if (absl::Status s = ExecuteOp(ctx, f, step); !s.ok()) {  // a constant
      release();
      return Annotate(s, ctx, step.instr);
    }
    for (int id : step.frees) {
      released.push_back(ctx.device->TakeData(f.slots[id]));
      ctx.device->Free(f.slots[id], step.instr->name());
      f.slots[id] = nullptr;
    }
    absl::StrAppend(&name, k ? " + " : "", step.name);
  }
  RunRowChain(chain, steps, ctx.num_threads);
  release();
  if (ctx.trace) {
    ctx.trace->AddEvent({name + " (row chain)", "fusion", ctx.device_index, t0,
                         ctx.device->NowMicros() - t0, bytes});
  }
  return absl::OkStatus();
}

absl::Status RunWhile(ExecContext& ctx, Frame& f, const Step& step) {
  const HloInstruction* x = step.instr;
  const ComputationPlan& body = ctx.plan->Get(x->while_body(), ParamMode::kDonated);
  const ComputationPlan& cond = ctx.plan->Get(x->while_condition(), ParamMode::kBorrowed);
  std::vector<DeviceBuffer*> state = f.Leaves(x->operand(0));
  for (int leaf : step.copy_leaves) {
    DeviceBuffer* src = state[leaf];
    ASSIGN_OR_RETURN(DeviceBuffer * copy,
                     ctx.device->Allocate(src->bytes, absl::StrCat(x->name(), ".state")));
    CopyBytes(copy->data, src->data, src->bytes);
    state[leaf] = copy;
  }
  // The loop owns moved buffers now; the caller must not free them.
  for (int id : step.moves) f.slots[id] = nullptr;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<DeviceBuffer*> pred, RunComputation(ctx, cond, state));
    const bool go = pred.empty() || pred[0] == nullptr
                        ? false
                        : *static_cast<const uint8_t*>(pred[0]->data) != 0;
    for (DeviceBuffer* b : pred) ctx.device->Free(b, x->while_condition()->name());
    if (!go) break;
    ASSIGN_OR_RETURN(state, RunComputation(ctx, body, state));
  }
  const std::vector<int>& out = f.plan->leaves.at(x);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != kNoBuffer && !body.passthrough[i]) f.slots[out[i]] = state[i];
  }
  return absl::OkStatus();
}

absl::Status RunCallee(ExecContext& ctx, Frame& f, const HloInstruction* x,
                       const HloComputation* callee,
                       const std::vector<const HloInstruction*>& operands) {
  std::vector<DeviceBuffer*> args;
  for (const HloInstruction* o : operands) {
    std::vector<DeviceBuffer*> l = f.Leaves(o);
    args.insert(args.end(), l.begin(), l.end());
  }
  ASSIGN_OR_RETURN(std::vector<DeviceBuffer*> result,
                   RunComputation(ctx, ctx.plan->Get(callee, ParamMode::kBorrowed), args));
  const std::vector<int>& out = f.plan->leaves.at(x);
  for (size_t i = 0; i < out.size() && i < result.size(); ++i) {
    if (out[i] != kNoBuffer) f.slots[out[i]] = result[i];
  }
  return absl::OkStatus();
}

std::vector<int64_t> ReadStarts(const Frame& f, const HloInstruction* x, int64_t first) {
  std::vector<int64_t> starts;
  for (int64_t i = first; i < x->operand_count(); ++i) {
    starts.push_back(ReadIndex(x->operand(i)->shape().element_type(), f.Data(x->operand(i))));
  }
  return starts;
}

absl::Status ExecuteOp(ExecContext& ctx, Frame& f, const Step& step) {
  const HloInstruction* x = step.instr;
  if (step.kind == StepKind::kLoop || step.kind == StepKind::kLoopReduce) {
    const LoopProgram& p = *ctx.plan->program(step);
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    LoopArrays(f, step, p, &inputs, &outputs);
    if (step.update && step.in_place_of == kNoBuffer) {
      // Not in place: the result starts as a copy of the array updated.
      DeviceBuffer* base = f.Leaf(x->operand(0));
      CopyBytes(outputs[0], base->data, base->bytes);
    }
    RunLoopProgram(p, inputs, outputs, ctx.num_threads);
    return absl::OkStatus();
  }
  if (step.kind == StepKind::kRootCopy) {
    const std::vector<int>& src = f.plan->leaves.at(x);
    for (const auto& [leaf, nb] : step.root_copies) {
      CopyBytes(f.slots[nb]->data, f.slots[src[leaf]]->data, f.slots[nb]->bytes);
    }
    return absl::OkStatus();
  }
  switch (x->opcode()) {
    case HloOpcode::kConstant:
      if (x->shape().IsArray() && x->shape().byte_size() > 0) {  // empty: no data
        CopyBytes(f.Data(x), x->literal().raw(), x->shape().byte_size());
      }
      return absl::OkStatus();
    case HloOpcode::kGetTupleElement:
    case HloOpcode::kTuple:
    case HloOpcode::kReshape:
    case HloOpcode::kBitcastConvert:
    case HloOpcode::kOptimizationBarrier:
    case HloOpcode::kAfterAll:
    case HloOpcode::kAddDependency:
      return absl::OkStatus();  // aliases
    case HloOpcode::kBitcast:
      if (f.Data(x) == f.Data(x->operand(0))) return absl::OkStatus();
      return BitcastPhysicalKernel(*x, f.Data(x->operand(0)), f.Data(x));
    case HloOpcode::kCopy: {
      std::vector<DeviceBuffer*> in = f.Leaves(x->operand(0));
      std::vector<DeviceBuffer*> out = f.Leaves(x);
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] && out[i] != in[i]) CopyBytes(out[i]->data, in[i]->data, in[i]->bytes);
      }
      return absl::OkStatus();
    }
    case HloOpcode::kConcatenate: {
      std::vector<const void*> ins;
      for (const HloInstruction* o : x->operands()) ins.push_back(f.Data(o));
      ConcatenateKernel(*x, ins, f.Data(x));
      return absl::OkStatus();
    }
    case HloOpcode::kPad:
      PadKernel(*x, f.Data(x->operand(0)), f.Data(x->operand(1)), f.Data(x));
      return absl::OkStatus();
    case HloOpcode::kDynamicSlice:
      DynamicSliceKernel(*x, f.Data(x->operand(0)), ReadStarts(f, x, 1), f.Data(x));
      return absl::OkStatus();
    case HloOpcode::kDynamicUpdateSlice:
      DynamicUpdateSliceKernel(*x, f.Data(x->operand(0)), f.Data(x->operand(1)),
                               ReadStarts(f, x, 2), f.Data(x));
      return absl::OkStatus();
    case HloOpcode::kGather:
      GatherKernel(*x, f.Data(x->operand(0)), f.Data(x->operand(1)), f.Data(x));
      return absl::OkStatus();
    case HloOpcode::kScatter: {
      const int64_t n = (x->operand_count() - 1) / 2;
      std::vector<const void*> ops, upds;
      std::vector<void*> outs;
      for (int64_t i = 0; i < n; ++i) {
        ops.push_back(f.Data(x->operand(i)));
        upds.push_back(f.Data(x->operand(n + 1 + i)));
        outs.push_back(f.Data(x, i));
      }
      return ScatterKernel(*x, ops, f.Data(x->operand(n)), upds, outs);
    }
    case HloOpcode::kReduce: {
      const int64_t n = x->operand_count() / 2;
      std::vector<const void*> ins, inits;
      std::vector<void*> outs;
      for (int64_t i = 0; i < n; ++i) {
        ins.push_back(f.Data(x->operand(i)));
        inits.push_back(f.Data(x->operand(n + i)));
        outs.push_back(f.Data(x, i));
      }
      return ReduceKernel(*x, ins, inits, outs);
    }
    case HloOpcode::kReduceWindow: {
      const int64_t n = x->operand_count() / 2;
      std::vector<const void*> ins, inits;
      std::vector<void*> outs;
      for (int64_t i = 0; i < n; ++i) {
        ins.push_back(f.Data(x->operand(i)));
        inits.push_back(f.Data(x->operand(n + i)));
        outs.push_back(f.Data(x, i));
      }
      return ReduceWindowKernel(*x, ins, inits, outs, ctx.num_threads);
    }
    case HloOpcode::kDot:
      return DotKernel(*x, f.Data(x->operand(0)), f.Data(x->operand(1)), f.Data(x),
                       ctx.num_threads);
    case HloOpcode::kWhile:
      return RunWhile(ctx, f, step);
    case HloOpcode::kCall:
    case HloOpcode::kFusion:
      return RunCallee(ctx, f, x, x->called_computations()[0],
                       std::vector<const HloInstruction*>(x->operands().begin(),
                                                          x->operands().end()));
    case HloOpcode::kConditional: {
      const HloInstruction* sel = x->operand(0);
      const int64_t branches = static_cast<int64_t>(x->called_computations().size());
      int64_t b;
      if (sel->shape().element_type() == hlo::PrimitiveType::kPred) {
        b = *static_cast<const uint8_t*>(f.Data(sel)) ? 0 : 1;
      } else {
        b = ReadIndex(sel->shape().element_type(), f.Data(sel));
        if (b < 0 || b >= branches) b = branches - 1;  // XLA: out of range -> last
      }
      return RunCallee(ctx, f, x, x->called_computations()[b], {x->operand(b + 1)});
    }
    case HloOpcode::kPartitionId:
    case HloOpcode::kReplicaId: {
      const uint32_t v = x->opcode() == HloOpcode::kPartitionId
                             ? static_cast<uint32_t>(ctx.device_index) : 0u;
      CopyBytes(f.Data(x), &v, sizeof(v));
      return absl::OkStatus();
    }
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllGather:
    case HloOpcode::kReduceScatter:
    case HloOpcode::kCollectivePermute:
    case HloOpcode::kAllToAll: {
      if (!x->attrs().permute_slice_sizes.empty()) {
        return absl::UnimplementedError(absl::StrCat(
            "%", x->name(), ": in-place collective-permute (slice_sizes=) is not supported "
            "by the emulator"));
      }
      std::vector<const void*> in;
      std::vector<void*> out;
      for (const HloInstruction* o : x->operands()) {
        for (DeviceBuffer* b : f.Leaves(o)) in.push_back(b ? b->data : nullptr);
      }
      for (DeviceBuffer* b : f.Leaves(x)) out.push_back(b ? b->data : nullptr);
      return ExecuteCollective(ctx, *x, in, out);
    }
    case HloOpcode::kCustomCall:
      if (hlo::IsPassThrough(*x)) return absl::OkStatus();  // aliases its operand
      return RunExtraOp(f, *x);
    default:
      return RunExtraOp(f, *x);
  }
}

void FlattenLiteral(const Literal& lit, std::vector<const Literal*>* out) {
  if (lit.shape().IsTuple()) {
    for (const Literal& e : lit.tuple_elements()) FlattenLiteral(e, out);
  } else {
    out->push_back(&lit);
  }
}

absl::Status CheckArguments(const HloComputation& entry,
                            absl::Span<const Literal> args, int64_t device) {
  if (static_cast<int64_t>(args.size()) != entry.num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, ": entry computation ", entry.name(), " takes ",
        entry.num_parameters(), " arguments, got ", args.size()));
  }
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    const HloInstruction* p = entry.parameter(i);
    if (!args[i].shape().Compatible(p->shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", device, ": argument ", i, " (%", p->name(), ") has shape ",
          args[i].shape().ToString(), ", expected ", p->shape().ToString()));
    }
  }
  return absl::OkStatus();
}

// Runs the entry computation on one device; fills `outputs`.
absl::Status RunDevice(ExecContext& ctx, absl::Span<const Literal> args,
                       std::vector<Literal>* outputs) {
  const ComputationPlan& entry = ctx.plan->entry();
  RETURN_IF_ERROR(CheckArguments(*entry.computation, args, ctx.device_index));
  std::vector<DeviceBuffer*> leaves;
  for (size_t i = 0; i < args.size(); ++i) {
    std::vector<const Literal*> flat;
    FlattenLiteral(args[i], &flat);
    for (const Literal* l : flat) {
      if (!l->shape().IsArray()) {
        leaves.push_back(nullptr);
        continue;
      }
      // Arguments are borrowed, not copied: the plan never writes an entry
      // argument (they are not owned), and the accounting is the same.
      ASSIGN_OR_RETURN(DeviceBuffer * b,
                       ctx.device->AllocateBorrowed(
                           l->raw_size(), entry.computation->parameter(i)->name(),
                           const_cast<uint8_t*>(l->raw())));
      leaves.push_back(b);
    }
  }
  ASSIGN_OR_RETURN(std::vector<DeviceBuffer*> result, RunComputation(ctx, entry, leaves));
  const std::vector<Shape> shapes = LeafShapes(entry.computation->root()->shape());
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsArray()) {
      outputs->emplace_back(Shape::Token());
      continue;
    }
    const Shape shape(shapes[i].element_type(), shapes[i].dimensions());
    // Results the device owns are handed over without a copy (once each);
    // borrowed arguments and repeated leaves are copied.
    void* data = result[i] != nullptr && result[i]->bytes == shape.byte_size()
                     ? ctx.device->TakeData(result[i])
                     : nullptr;
    if (data != nullptr) {
      outputs->push_back(Literal::AdoptArray(shape, data, &HostFree));
      continue;
    }
    Literal lit(shape);
    if (result[i] != nullptr && lit.raw_size() > 0) {
      CopyBytes(lit.raw(), result[i]->data, lit.raw_size());
    }
    outputs->push_back(std::move(lit));
  }
  return absl::OkStatus();
}

int TotalThreads(const RunOptions& options) {
  return options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
}

// XLA's dumps elide large constants as `{...}`: such a module can be
// analysed but not run.
absl::Status CheckConstantsKnown(const hlo::HloModule& module) {
  for (const auto& c : module.computations()) {
    for (const auto& x : c->instructions()) {
      if (x->opcode() == HloOpcode::kConstant && !x->has_literal()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "constant %", x->name(), " (", x->shape().ToString(), ", computation ", c->name(),
            ") has elided values ({...}): the module cannot run; dump it with its constants "
            "printed (XLA: --xla_dump_large_constants)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> RunImpl(
    const hlo::HloModule& module,
    const std::vector<absl::Span<const Literal>>& per_device_arguments,
    const RunOptions& options, CollectiveBackend* backend) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(per_device_arguments.size());
  if (n == 0) return absl::InvalidArgumentError("RunSpmd: no devices");
  RETURN_IF_ERROR(CheckConstantsKnown(module));
  PlanOptions plan_options;
  plan_options.enable_fusion = !options.disable_fusion;
  ASSIGN_OR_RETURN(std::unique_ptr<ModulePlan> plan,
                   ModulePlan::Build(module, plan_options, !options.disable_row_chains));
  std::unique_ptr<InProcessCollectives> own_backend;
  if (backend == nullptr) {
    own_backend = std::make_unique<InProcessCollectives>(n);
    backend = own_backend.get();
  }
  if (backend->num_devices() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective backend spans ", backend->num_devices(), " devices, run has ", n));
  }
  RunResult result;
  Trace* trace = options.record_trace ? &result.trace : nullptr;
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<ExecContext> contexts(n);
  const int threads_each = std::max<int>(1, TotalThreads(options) / static_cast<int>(n));
  for (int64_t d = 0; d < n; ++d) {
    devices.push_back(std::make_unique<Device>(d, options.hbm_capacity_bytes, start, trace));
    contexts[d].plan = plan.get();
    contexts[d].device = devices[d].get();
    contexts[d].backend = backend;
    contexts[d].trace = trace;
    contexts[d].device_index = d;
    contexts[d].num_devices = n;
    contexts[d].num_threads = threads_each;
  }
  std::vector<absl::Status> statuses(n);
  std::vector<std::vector<Literal>> outputs(n);
  auto run_one = [&](int64_t d) {
    statuses[d] = RunDevice(contexts[d], per_device_arguments[d], &outputs[d]);
    if (!statuses[d].ok()) backend->Abort(d, statuses[d]);
  };
  if (n == 1) {
    run_one(0);
  } else {
    std::vector<std::thread> workers;
    for (int64_t d = 0; d < n; ++d) workers.emplace_back(run_one, d);
    for (std::thread& t : workers) t.join();
  }
  // Report the root cause: a failure that is not a consequence of another
  // device's abort, lowest device first.
  const absl::Status* first = nullptr;
  for (const absl::Status& s : statuses) {
    if (!s.ok() && s.code() != absl::StatusCode::kAborted) {
      first = &s;
      break;
    }
  }
  if (first == nullptr) {
    for (const absl::Status& s : statuses) {
      if (!s.ok()) {
        first = &s;
        break;
      }
    }
  }
  if (first != nullptr) return *first;
  for (int64_t d = 0; d < n; ++d) {
    DeviceReport report = devices[d]->Report();
    if (!options.record_allocations) report.records.clear();
    result.devices.push_back(std::move(report));
    for (Literal& l : outputs[d]) result.outputs.push_back(std::move(l));
  }
  devices.clear();  // releases the outputs' and arguments' host memory
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

absl::StatusOr<RunResult> RunSpmd(
    const hlo::HloModule& module,
    const std::vector<std::vector<Literal>>& per_device_arguments,
    const RunOptions& options, CollectiveBackend* backend) {
  std::vector<absl::Span<const Literal>> spans;
  for (const auto& args : per_device_arguments) spans.emplace_back(args);
  return RunImpl(module, spans, options, backend);
}

absl::StatusOr<RunResult> RunModule(const hlo::HloModule& module,
                                    absl::Span<const Literal> arguments,
                                    const RunOptions& options) {
  return RunImpl(module, {arguments}, options, nullptr);
}

}  // namespace tpuoff::runtime
