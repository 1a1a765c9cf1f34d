#include "runtime/emulator/device_run.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/emulator/loop_program.h"
#include "runtime/emulator/ops.h"
#include "runtime/emulator/ops_extra.h"
#include "runtime/emulator/ops_window.h"

namespace tpuoff::runtime {

using hlo::HloComputation;
using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::Shape;

namespace {

// memcpy with a null pointer is undefined even for 0 bytes (empty arrays).
inline void CopyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

}  // namespace

// Buffers of one running computation, by planned buffer id.
struct DeviceRun::FrameView {
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

// A computation being run, and the progress of its current step while that
// step waits for a callee or a collective.
struct DeviceRun::Frame : DeviceRun::FrameView {
  enum class Wait { kNone, kCallee, kWhileCondition, kWhileBody, kCollective };
  int step = 0;  // the step being run (num_steps: done)
  Wait wait = Wait::kNone;
  double t0 = 0;      // trace: when the step started
  int64_t bytes = 0;  // trace: bytes it allocated
  // A while step: the loop state and the iterations run so far.
  std::vector<DeviceBuffer*> state;
  int64_t iterations = 0;
};

namespace {

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
      s.code() == absl::StatusCode::kDeadlineExceeded ||
      s.code() == absl::StatusCode::kFailedPrecondition) {
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("device ", ctx.device_index,
                                             ": executing %", instr->name(),
                                             ": ", s.message()));
}

// Ops of ops_extra.h: operand and result leaves handed over as pointers.
absl::Status RunExtraOp(const DeviceRun::FrameView& f, const HloInstruction& x,
                        int num_threads) {
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const HloInstruction* o : x.operands()) {
    for (DeviceBuffer* b : f.Leaves(o)) in.push_back(b ? b->data : nullptr);
  }
  for (DeviceBuffer* b : f.Leaves(&x)) out.push_back(b ? b->data : nullptr);
  return ExecuteExtraOp(x, in, out, num_threads);
}

// Allocates the buffers `step` defines on the device; returns their bytes.
absl::StatusOr<int64_t> AllocateStepBuffers(ExecContext& ctx, DeviceRun::FrameView& f,
                                            const Step& step) {
  int64_t bytes = 0;
  for (int id : step.allocs) {
    const int64_t size = f.plan->buffers[id].bytes;
    ASSIGN_OR_RETURN(f.slots[id], ctx.device->Allocate(size, step.instr->name()));
    bytes += size;
  }
  return bytes;
}

// The arrays a fused step's program reads and writes.
void LoopArrays(const DeviceRun::FrameView& f, const Step& step, const LoopProgram& p,
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

std::vector<int64_t> ReadStarts(const DeviceRun::FrameView& f, const HloInstruction* x, int64_t first) {
  std::vector<int64_t> starts;
  for (int64_t i = first; i < x->operand_count(); ++i) {
    starts.push_back(ReadIndex(x->operand(i)->shape().element_type(), f.Data(x->operand(i))));
  }
  return starts;
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

}  // namespace

DeviceRun::DeviceRun(ExecContext* ctx, absl::Span<const Literal> arguments,
                     const RunLimits* limits)
    : ctx_(ctx), arguments_(arguments), limits_(limits) {}

DeviceRun::~DeviceRun() = default;

absl::StatusOr<DeviceRun::Progress> DeviceRun::Resume() {
  // Host memory running out inside a kernel (std::bad_alloc from a vector,
  // Eigen, ...) fails this device's run, never the process.
  try {
    return ResumeImpl();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", ctx_->device_index, ": host memory exhausted (allocation failed) ", Where()));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("device ", ctx_->device_index, ": ", e.what(), " ", Where()));
  }
}

absl::Status DeviceRun::Start() {
  const ComputationPlan& entry = ctx_->plan->entry();
  RETURN_IF_ERROR(CheckArguments(*entry.computation, arguments_, ctx_->device_index));
  std::vector<DeviceBuffer*> leaves;
  for (size_t i = 0; i < arguments_.size(); ++i) {
    std::vector<const Literal*> flat;
    FlattenLiteral(arguments_[i], &flat);
    for (const Literal* l : flat) {
      if (!l->shape().IsArray()) {
        leaves.push_back(nullptr);
        continue;
      }
      // Arguments are borrowed, not copied: the plan never writes an entry
      // argument (they are not owned), and the accounting is the same.
      ASSIGN_OR_RETURN(DeviceBuffer * b,
                       ctx_->device->AllocateBorrowed(
                           l->raw_size(), entry.computation->parameter(i)->name(),
                           const_cast<uint8_t*>(l->raw())));
      leaves.push_back(b);
    }
  }
  Enter(entry, leaves);
  return absl::OkStatus();
}

void DeviceRun::Enter(const ComputationPlan& plan, const std::vector<DeviceBuffer*>& args) {
  Frame f;
  f.plan = &plan;
  f.slots.assign(plan.buffers.size(), nullptr);
  size_t a = 0;
  for (const std::vector<int>& leaves : plan.param_leaves) {
    for (int id : leaves) {
      DeviceBuffer* b = a < args.size() ? args[a] : nullptr;
      ++a;
      if (id != kNoBuffer) f.slots[id] = b;
    }
  }
  for (int id : plan.frees_on_entry) {
    FreeBuffer(f.slots[id], plan.computation->name());
    f.slots[id] = nullptr;
  }
  frames_.push_back(std::move(f));
}

// "while loop %w (computation main) at iteration 7, executing %x
// (computation body)": the innermost loop and the step being run.
std::string DeviceRun::Where() const {
  if (frames_.empty()) return "before the first step";
  std::string where;
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (it->wait == Frame::Wait::kWhileCondition || it->wait == Frame::Wait::kWhileBody) {
      where = absl::StrCat("in while loop %", it->plan->steps[it->step].instr->name(),
                           " (computation ", it->plan->computation->name(), ") at iteration ",
                           it->iterations + 1, ", ");
      break;
    }
  }
  const Frame& top = frames_.back();
  if (top.step < top.plan->num_steps()) {
    absl::StrAppend(&where, "executing %", top.plan->steps[top.step].instr->name(),
                    " (computation ", top.plan->computation->name(), ")");
  } else {
    absl::StrAppend(&where, "returning from computation ", top.plan->computation->name());
  }
  return where;
}

absl::Status DeviceRun::CheckLimits() {
  if (limits_ == nullptr) return absl::OkStatus();
  if (limits_->abort != nullptr && limits_->abort->load(std::memory_order_relaxed)) {
    return absl::AbortedError(
        absl::StrCat("device ", ctx_->device_index, ": stopped because another device failed"));
  }
  // Devices waiting at a collective hold no thread, so the running ones
  // look after the collective timeout too (every 64 steps, at most every
  // 50 ms).
  if (ctx_->num_devices > 1 && (++polls_ & 63) == 0) {
    const RunLimits::Clock::time_point now = RunLimits::Clock::now();
    if (now - last_poll_ > std::chrono::milliseconds(50)) {
      last_poll_ = now;
      ctx_->backend->ExpireStale();
    }
  }
  if (limits_->cancel != nullptr && limits_->cancel->load(std::memory_order_relaxed)) {
    return absl::CancelledError(
        absl::StrFormat("device %d: cancelled %s", ctx_->device_index, Where()));
  }
  if (limits_->deadline != RunLimits::Clock::time_point::max() &&
      RunLimits::Clock::now() > limits_->deadline) {
    return absl::DeadlineExceededError(
        absl::StrFormat("device %d: exceeded the time limit of %g s %s", ctx_->device_index,
                        limits_->timeout_seconds, Where()));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceRun::Progress> DeviceRun::ResumeImpl() {
  if (!started_) {
    started_ = true;
    RETURN_IF_ERROR(Start());
  }
  if (waiting_) {
    // The collective this device waited at has completed (or failed).
    waiting_ = false;
    if (!collective_status_.ok()) return collective_status_;
    FinishCollective(pending_);
    pending_ = PendingCollective();
    FinishStep();
  }
  std::vector<DeviceBuffer*> result;
  bool returned = false;  // `result` holds a finished callee's outputs
  while (true) {
    RETURN_IF_ERROR(CheckLimits());
    if (returned) {
      returned = false;
      ASSIGN_OR_RETURN(bool step_done, Return(std::move(result)));
      result.clear();
      if (step_done) FinishStep();
      continue;
    }
    Frame& f = frames_.back();
    const ComputationPlan& plan = *f.plan;
    if (f.step == plan.num_steps()) {
      for (int id : plan.output_leaves) {
        result.push_back(id == kNoBuffer ? nullptr : f.slots[id]);
      }
      frames_.pop_back();
      if (frames_.empty()) {
        RETURN_IF_ERROR(MakeOutputs(result));
        return Progress::kFinished;
      }
      returned = true;
      continue;
    }
    if (row_queue_ == nullptr) {
      if (const HloInstruction* w = ctx_->plan->row_while_starting_at(plan.steps[f.step])) {
        StartRowQueue(ctx_->plan->row_while(w), w);
        row_before_loop_ = row_queue_ != nullptr;
      }
    }
    if (row_queue_ != nullptr &&
        (frames_.size() - 1 > row_owner_ ||
         (row_before_loop_ && frames_.size() - 1 == row_owner_))) {
      ASSIGN_OR_RETURN(bool handled, RowLoopStep(f));
      if (handled) continue;
    } else if (const RowChain* chain = ctx_->plan->chain(plan, f.step)) {
      RETURN_IF_ERROR(RunChain(*chain));
      f.step = chain->last + 1;
      continue;
    }
    const Step& step = plan.steps[f.step];
    f.t0 = ctx_->trace ? ctx_->device->NowMicros() : 0;
    ASSIGN_OR_RETURN(f.bytes, AllocateStepBuffers(*ctx_, f, step));
    if (step.kind == StepKind::kOp) {
      const HloOpcode op = step.instr->opcode();
      if (op == HloOpcode::kWhile || op == HloOpcode::kCall || op == HloOpcode::kFusion ||
          op == HloOpcode::kConditional) {
        RETURN_IF_ERROR(Annotate(StartCallee().status(), *ctx_, step.instr));
        continue;
      }
      if (hlo::IsCollective(op)) {
        ASSIGN_OR_RETURN(bool complete, StartCollectiveStep(f, step));
        if (!complete) return Progress::kWaiting;
        FinishStep();
        continue;
      }
    }
    RETURN_IF_ERROR(Annotate(ExecuteOp(f, step), *ctx_, step.instr));
    FinishStep();
  }
}

// The top frame's step is done: trace event, frees, next step.
void DeviceRun::FinishStep() {
  Frame& f = frames_.back();
  const Step& step = f.plan->steps[f.step];
  if (ctx_->trace) {
    int64_t bytes = f.bytes;
    if (step.in_place_of != kNoBuffer) bytes += f.plan->buffers[step.in_place_of].bytes;
    ctx_->trace->AddEvent({step.name, StepCategory(step), ctx_->device_index, f.t0,
                           ctx_->device->NowMicros() - f.t0, bytes});
  }
  for (int id : step.frees) {
    FreeBuffer(f.slots[id], step.instr->name());
    f.slots[id] = nullptr;
  }
  f.wait = Frame::Wait::kNone;
  f.state.clear();
  f.iterations = 0;
  ++f.step;
}

// Starts the callee of the top frame's while / call / fusion / conditional
// step by pushing its frame.
absl::StatusOr<bool> DeviceRun::StartCallee() {
  Frame& f = frames_.back();
  const Step& step = f.plan->steps[f.step];
  const HloInstruction* x = step.instr;
  switch (x->opcode()) {
    case HloOpcode::kWhile: {
      std::vector<DeviceBuffer*> state = f.Leaves(x->operand(0));
      if (row_queue_ != nullptr) {
        std::vector<const void*> copied;
        for (int leaf : step.copy_leaves) copied.push_back(state[leaf] ? state[leaf]->data : nullptr);
        if (row_queue_->Conflicts(copied, {})) RETURN_IF_ERROR(RunRowQueue());
      }
      for (int leaf : step.copy_leaves) {
        DeviceBuffer* src = state[leaf];
        ASSIGN_OR_RETURN(DeviceBuffer * copy, ctx_->device->Allocate(
                                                  src->bytes, absl::StrCat(x->name(), ".state")));
        CopyBytes(copy->data, src->data, src->bytes);
        state[leaf] = copy;
      }
      // The loop owns moved buffers now; the caller must not free them.
      for (int id : step.moves) f.slots[id] = nullptr;
      f.state = state;
      f.iterations = 0;
      f.wait = Frame::Wait::kWhileCondition;
      if (row_queue_ == nullptr) StartRowQueue(ctx_->plan->row_while(x), x);
      Enter(ctx_->plan->Get(x->while_condition(), ParamMode::kBorrowed), state);
      return false;
    }
    case HloOpcode::kCall:
    case HloOpcode::kFusion: {
      std::vector<DeviceBuffer*> args;
      for (const HloInstruction* o : x->operands()) {
        std::vector<DeviceBuffer*> l = f.Leaves(o);
        args.insert(args.end(), l.begin(), l.end());
      }
      f.wait = Frame::Wait::kCallee;
      Enter(ctx_->plan->Get(x->called_computations()[0], ParamMode::kBorrowed), args);
      return false;
    }
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
      std::vector<DeviceBuffer*> args = f.Leaves(x->operand(b + 1));
      f.wait = Frame::Wait::kCallee;
      Enter(ctx_->plan->Get(x->called_computations()[b], ParamMode::kBorrowed), args);
      return false;
    }
    default:
      return absl::InternalError(absl::StrCat("%", x->name(), " calls no computation"));
  }
}

// A callee of the top frame's step returned `result`: true when the step is
// done, false when it pushed the next callee (a while's next condition or
// body).
absl::StatusOr<bool> DeviceRun::Return(std::vector<DeviceBuffer*> result) {
  Frame& f = frames_.back();
  const Step& step = f.plan->steps[f.step];
  const HloInstruction* x = step.instr;
  switch (f.wait) {
    case Frame::Wait::kCallee: {
      const std::vector<int>& out = f.plan->leaves.at(x);
      for (size_t i = 0; i < out.size() && i < result.size(); ++i) {
        if (out[i] != kNoBuffer) f.slots[out[i]] = result[i];
      }
      return true;
    }
    case Frame::Wait::kWhileCondition: {
      if (row_queue_ != nullptr && !result.empty() && result[0] != nullptr &&
          row_queue_->Conflicts({result[0]->data}, {})) {
        RETURN_IF_ERROR(RunRowQueue());
      }
      const bool go = result.empty() || result[0] == nullptr
                          ? false
                          : *static_cast<const uint8_t*>(result[0]->data) != 0;
      for (DeviceBuffer* b : result) FreeBuffer(b, x->while_condition()->name());
      const ComputationPlan& body = ctx_->plan->Get(x->while_body(), ParamMode::kDonated);
      if (!go && row_queue_ != nullptr && x == row_loop_) {
        // The loop ran rows-outer: its queued work runs now.
        RETURN_IF_ERROR(RunRowQueue());
        row_queue_.reset();
        row_loop_ = nullptr;
      }
      if (!go) {
        const std::vector<int>& out = f.plan->leaves.at(x);
        for (size_t i = 0; i < out.size(); ++i) {
          if (out[i] != kNoBuffer && !body.passthrough[i]) f.slots[out[i]] = f.state[i];
        }
        return true;
      }
      if (limits_ != nullptr && limits_->max_loop_iterations > 0 &&
          f.iterations >= limits_->max_loop_iterations) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "device ", ctx_->device_index, ": while loop %", x->name(), " (computation ",
            f.plan->computation->name(), ") did not finish within the limit of ",
            limits_->max_loop_iterations, " iterations"));
      }
      f.wait = Frame::Wait::kWhileBody;
      std::vector<DeviceBuffer*> state = f.state;
      Enter(body, state);
      return false;
    }
    case Frame::Wait::kWhileBody: {
      f.state = std::move(result);
      ++f.iterations;
      f.wait = Frame::Wait::kWhileCondition;
      std::vector<DeviceBuffer*> state = f.state;
      Enter(ctx_->plan->Get(x->while_condition(), ParamMode::kBorrowed), state);
      return false;
    }
    default:
      return absl::InternalError(absl::StrCat("%", x->name(), ": unexpected return"));
  }
}

absl::StatusOr<bool> DeviceRun::StartCollectiveStep(Frame& f, const Step& step) {
  const HloInstruction* x = step.instr;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const HloInstruction* o : x->operands()) {
    for (DeviceBuffer* b : f.Leaves(o)) in.push_back(b ? b->data : nullptr);
  }
  for (DeviceBuffer* b : f.Leaves(x)) out.push_back(b ? b->data : nullptr);
  f.wait = Frame::Wait::kCollective;
  collective_status_ = absl::OkStatus();
  absl::StatusOr<bool> complete =
      StartCollective(*ctx_, *x, in, out, &pending_, [this](const absl::Status& s) {
        collective_status_ = s;
        // A failed collective fails the run: stop the devices still running
        // now (this one may not get a thread while they do).
        if (!s.ok() && limits_ != nullptr && limits_->abort != nullptr) limits_->abort->store(true);
        if (wake_) wake_();
      });
  if (!complete.ok()) return Annotate(complete.status(), *ctx_, x);
  if (*complete) {
    pending_ = PendingCollective();
    return true;
  }
  waiting_ = true;
  return false;
}

// Steps chain.first..chain.last as one row chain (runtime/emulator/row_chain.h).
// Allocations and frees are accounted in the planned order, so HBM figures
// are the step-by-step ones; the host memory of buffers freed inside the
// chain goes back only after the chain has run, as later chunks still read
// it.
absl::Status DeviceRun::RunChain(const RowChain& chain) {
  ExecContext& ctx = *ctx_;
  Frame& f = frames_.back();
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
    } else if (absl::Status s = ExecuteOp(f, step); !s.ok()) {  // a constant
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

// Rows-outer work spreads over the threads by rows: a loop over fewer rows
// than four per thread runs as written.
void DeviceRun::StartRowQueue(int64_t rows, const HloInstruction* loop) {
  if (rows <= 0 || rows < 4 * std::max(1, ctx_->num_threads)) return;
  const RunLimits* limits = limits_;
  row_queue_ = std::make_unique<RowQueue>(rows, ctx_->num_threads, [limits] {
    if (limits == nullptr) return false;
    if (limits->abort != nullptr && limits->abort->load(std::memory_order_relaxed)) return true;
    return limits->deadline != RunLimits::Clock::time_point::max() &&
           RunLimits::Clock::now() > limits->deadline;
  });
  row_owner_ = frames_.size() - 1;
  row_loop_ = loop;
  row_before_loop_ = false;
}

void DeviceRun::FreeBuffer(DeviceBuffer* b, const std::string& op) {
  if (b == nullptr) return;
  if (row_queue_ != nullptr) row_queue_->DeferFree(ctx_->device->TakeData(b), b->bytes);
  ctx_->device->Free(b, op);
}

absl::StatusOr<bool> DeviceRun::RowLoopStep(Frame& f) {
  const Step& step = f.plan->steps[f.step];
  const HloInstruction* x = step.instr;
  RowQueue& queue = *row_queue_;
  std::vector<const void*> reads;
  std::vector<const void*> writes;
  if (step.kind == StepKind::kOp && x == row_loop_ && row_before_loop_) {
    row_before_loop_ = false;  // the loop starts the usual way, its queue kept
    return false;
  }
  if (step.kind == StepKind::kOp) {
    const HloOpcode op = x->opcode();
    if (op == HloOpcode::kWhile || op == HloOpcode::kCall || op == HloOpcode::kFusion ||
        op == HloOpcode::kConditional || hlo::IsCollective(op)) {
      RETURN_IF_ERROR(RunRowQueue());
      return false;
    }
  } else if (step.kind == StepKind::kRootCopy) {
    RETURN_IF_ERROR(RunRowQueue());
    return false;
  }
  f.t0 = ctx_->trace ? ctx_->device->NowMicros() : 0;
  ASSIGN_OR_RETURN(f.bytes, AllocateStepBuffers(*ctx_, f, step));
  if (step.kind == StepKind::kOp) {
    const HloOpcode op = x->opcode();
    const bool aliases = OnlyAliases(*x) ||
                         (op == HloOpcode::kBitcast && f.Data(x) == f.Data(x->operand(0))) ||
                         (op == HloOpcode::kCustomCall && hlo::IsPassThrough(*x));
    if (!aliases) {
      for (const HloInstruction* o : x->operands()) {
        for (DeviceBuffer* b : f.Leaves(o)) reads.push_back(b ? b->data : nullptr);
      }
      for (DeviceBuffer* b : f.Leaves(x)) writes.push_back(b ? b->data : nullptr);
    }
  } else {
    const LoopProgram& p = *ctx_->plan->program(step);
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    LoopArrays(f, step, p, &inputs, &outputs);
    const bool copies_base = step.update && step.in_place_of == kNoBuffer;
    if (!copies_base) {
      std::vector<int64_t> elements(p.inputs.size(), 0), bytes(p.inputs.size(), 0);
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        if (p.inputs[i] == nullptr || !p.inputs[i]->shape().IsArray()) continue;
        elements[i] = p.inputs[i]->shape().num_elements();
        bytes[i] = p.inputs[i]->shape().byte_size();
      }
      RowQueue::Added added = queue.Add(p, inputs, outputs, elements, bytes);
      if (added == RowQueue::Added::kRunQueueFirst) {
        RETURN_IF_ERROR(RunRowQueue());
        added = queue.Add(p, inputs, outputs, elements, bytes);
      }
      if (added == RowQueue::Added::kQueued) {
        if (queue.Full()) RETURN_IF_ERROR(RunRowQueue());
        FinishStep();
        return true;
      }
    }
    reads = inputs;
    if (copies_base) reads.push_back(f.Leaf(x->operand(0))->data);
    writes.assign(outputs.begin(), outputs.end());
  }
  if (step.in_place_of != kNoBuffer && f.slots[step.in_place_of] != nullptr) {
    writes.push_back(f.slots[step.in_place_of]->data);
  }
  if (queue.Conflicts(reads, writes)) RETURN_IF_ERROR(RunRowQueue());
  RETURN_IF_ERROR(Annotate(ExecuteOp(f, step), *ctx_, x));
  FinishStep();
  return true;
}

// Runs the queue of the loop running rows-outer (one trace event for all of
// it).
absl::Status DeviceRun::RunRowQueue() {
  RowQueue& queue = *row_queue_;
  const double t0 = ctx_->trace ? ctx_->device->NowMicros() : 0;
  const int64_t queued = queue.queued();
  if (queue.Run()) {
    if (ctx_->trace && queued > 0) {
      ctx_->trace->AddEvent({absl::StrCat(row_loop_->name(), ": ", queued,
                                          " fused steps rows-outer"),
                             "fusion", ctx_->device_index, t0, ctx_->device->NowMicros() - t0,
                             0});
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckLimits());
  return absl::AbortedError(absl::StrCat("device ", ctx_->device_index, ": stopped ", Where()));
}

absl::Status DeviceRun::MakeOutputs(const std::vector<DeviceBuffer*>& result) {
  const ComputationPlan& entry = ctx_->plan->entry();
  const std::vector<Shape> shapes = LeafShapes(entry.computation->root()->shape());
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsArray()) {
      outputs_.emplace_back(Shape::Token());
      continue;
    }
    const Shape shape(shapes[i].element_type(), shapes[i].dimensions());
    // Results the device owns are handed over without a copy (once each);
    // borrowed arguments and repeated leaves are copied.
    DeviceBuffer* r = i < result.size() ? result[i] : nullptr;
    void* data = r != nullptr && r->bytes == shape.byte_size() ? ctx_->device->TakeData(r)
                                                               : nullptr;
    if (data != nullptr) {
      outputs_.push_back(Literal::AdoptArray(shape, data, &HostFree));
      continue;
    }
    Literal lit(shape);
    if (r != nullptr && lit.raw_size() > 0) CopyBytes(lit.raw(), r->data, lit.raw_size());
    outputs_.push_back(std::move(lit));
  }
  return absl::OkStatus();
}

void DeviceRun::NextRngState(const HloInstruction* instr, uint64_t delta, uint64_t state[2]) {
  auto [it, fresh] = rng_states_.emplace(instr, static_cast<unsigned __int128>(0x7012395));
  state[0] = static_cast<uint64_t>(it->second);
  state[1] = static_cast<uint64_t>(it->second >> 64);
  it->second += delta;
}

absl::Status DeviceRun::ExecuteOp(Frame& f, const Step& step) {
  ExecContext& ctx = *ctx_;
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
  if (OnlyAliases(*x)) return absl::OkStatus();
  switch (x->opcode()) {
    case HloOpcode::kConstant:
      if (x->shape().IsArray() && x->shape().byte_size() > 0) {  // empty: no data
        CopyBytes(f.Data(x), x->literal().raw(), x->shape().byte_size());
      }
      return absl::OkStatus();
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
    case HloOpcode::kPartitionId:
    case HloOpcode::kReplicaId: {
      const uint32_t v = x->opcode() == HloOpcode::kPartitionId
                             ? static_cast<uint32_t>(ctx.device_index) : 0u;
      CopyBytes(f.Data(x), &v, sizeof(v));
      return absl::OkStatus();
    }
    case HloOpcode::kCustomCall:
      if (hlo::IsPassThrough(*x)) return absl::OkStatus();  // aliases its operand
      return RunExtraOp(f, *x, ctx.num_threads);
    case HloOpcode::kRngGetAndUpdateState: {
      uint64_t state[2];
      NextRngState(x, static_cast<uint64_t>(x->attrs().delta), state);
      CopyBytes(f.Data(x), state, sizeof(state));
      return absl::OkStatus();
    }
    case HloOpcode::kRng: {
      uint64_t state[2];
      NextRngState(x, static_cast<uint64_t>(RngStateDelta(*x)), state);
      return RngKernel(*x, f.Data(x->operand(0)), f.Data(x->operand(1)), state, f.Data(x));
    }
    default:
      return RunExtraOp(f, *x, ctx.num_threads);
  }
}


}  // namespace tpuoff::runtime
