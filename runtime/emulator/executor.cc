#include "runtime/emulator/executor.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/parallel.h"
#include "runtime/emulator/device_run.h"
#include "runtime/emulator/exec_context.h"
#include "runtime/emulator/plan.h"

namespace tpuoff::runtime {
namespace {

using hlo::Literal;

// Host threads for the run: as asked (0 = all), never more than the
// hardware has (more only oversubscribe the cores; thousands of OpenMP
// threads would exhaust the address space).
int TotalThreads(const RunOptions& options) {
  const int asked = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  return std::max(1, std::min(asked, MaxParallelism()));
}

// Runs the devices' DeviceRuns on `workers` threads (the caller's among
// them). A device waiting at a collective holds no thread: the collective's
// completion queues it again. When no device can run and some still wait,
// their collectives can never complete (a device skipped one, or they wait
// at different ones): those fail at once instead of waiting for a timeout.
class Scheduler {
 public:
  Scheduler(std::vector<std::unique_ptr<DeviceRun>>* runs, CollectiveBackend* backend,
            std::atomic<bool>* abort, int64_t first_device)
      : runs_(*runs), backend_(backend), abort_(abort), first_device_(first_device),
        state_(runs->size(), kReady),
        wake_pending_(runs->size(), false), statuses_(runs->size()) {
    for (size_t d = 0; d < runs_.size(); ++d) {
      ready_.push_back(static_cast<int>(d));
      runs_[d]->set_wake([this, d] { Wake(static_cast<int>(d)); });
    }
    unfinished_ = static_cast<int64_t>(runs_.size());
  }

  // Runs every device to its end on `workers` threads.
  void Run(int workers) {
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w) {
      try {
        threads.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        break;  // fewer threads: devices just take turns
      }
    }
    Work();
    for (std::thread& t : threads) t.join();
  }

  std::vector<absl::Status>& statuses() { return statuses_; }

 private:
  enum State { kReady, kRunning, kWaiting, kDone };

  void Wake(int d) {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_[d] == kWaiting) {
      state_[d] = kReady;
      ready_.push_back(d);
      cv_.notify_all();
    } else if (state_[d] == kRunning) {
      wake_pending_[d] = true;  // its worker requeues it when it returns
    }
  }

  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (unfinished_ > 0) {
      if (ready_.empty()) {
        if (running_ == 0) {
          // Nobody can arrive at the collectives the others wait at.
          lock.unlock();
          backend_->FailPending();
          lock.lock();
          if (ready_.empty() && running_ == 0 && unfinished_ > 0) {
            cv_.wait_for(lock, std::chrono::milliseconds(10));
          }
          continue;
        }
        if (cv_.wait_for(lock, std::chrono::milliseconds(50)) == std::cv_status::timeout) {
          lock.unlock();
          backend_->ExpireStale();
          lock.lock();
        }
        continue;
      }
      const int d = ready_.front();
      ready_.pop_front();
      state_[d] = kRunning;
      ++running_;
      lock.unlock();
      absl::StatusOr<DeviceRun::Progress> progress = runs_[d]->Resume();
      if (progress.ok() && *progress == DeviceRun::Progress::kWaiting) backend_->ExpireStale();
      if (!progress.ok()) {
        abort_->store(true);
        backend_->Abort(first_device_ + d, progress.status());
      }
      lock.lock();
      --running_;
      if (!progress.ok()) {
        statuses_[d] = progress.status();
        state_[d] = kDone;
        --unfinished_;
      } else if (*progress == DeviceRun::Progress::kFinished) {
        state_[d] = kDone;
        --unfinished_;
      } else if (wake_pending_[d]) {
        wake_pending_[d] = false;
        state_[d] = kReady;
        ready_.push_back(d);
      } else {
        state_[d] = kWaiting;
      }
      cv_.notify_all();
    }
  }

  std::vector<std::unique_ptr<DeviceRun>>& runs_;
  CollectiveBackend* backend_;
  std::atomic<bool>* abort_;
  int64_t first_device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> ready_;
  std::vector<State> state_;
  std::vector<bool> wake_pending_;
  std::vector<absl::Status> statuses_;
  int64_t unfinished_ = 0;
  int running_ = 0;
};

// XLA's dumps elide large constants as `{...}`: such a module can be
// analysed but not run.
absl::Status CheckConstantsKnown(const hlo::HloModule& module) {
  for (const auto& c : module.computations()) {
    for (const auto& x : c->instructions()) {
      if (x->opcode() == hlo::HloOpcode::kConstant && !x->has_literal()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "constant %", x->name(), " (", x->shape().ToString(), ", computation ", c->name(),
            ") has elided values ({...}): the module cannot run; dump it with its constants "
            "printed (XLA: --xla_dump_large_constants)"));
      }
    }
  }
  return absl::OkStatus();
}

// The emulator runs what the roots need; XLA also keeps instructions with
// side effects whose results nothing uses (jax.debug.print, an unordered
// io_callback: a host callback). None of them can run here, so such a module
// is refused as if it reached one, instead of running without it.
absl::Status CheckNoUnusedSideEffects(const hlo::HloModule& module) {
  for (const auto& c : module.computations()) {
    std::optional<absl::flat_hash_set<const hlo::HloInstruction*>> reachable;
    for (const auto& x : c->instructions()) {
      const bool effect =
          (x->opcode() == hlo::HloOpcode::kCustomCall && x->attrs().custom_call_has_side_effect) ||
          x->opcode() == hlo::HloOpcode::kOutfeed || x->opcode() == hlo::HloOpcode::kSend ||
          x->opcode() == hlo::HloOpcode::kSendDone;
      if (!effect) continue;
      if (!reachable.has_value()) {
        const auto order = c->ReachablePostOrder();
        reachable.emplace(order.begin(), order.end());
      }
      if (reachable->contains(x.get())) continue;  // run, or refused when reached
      const std::string what =
          x->opcode() == hlo::HloOpcode::kCustomCall
              ? absl::StrCat("custom-call target \"", x->attrs().custom_call_target, "\"")
              : std::string(hlo::HloOpcodeString(x->opcode()));
      return absl::UnimplementedError(absl::StrCat(
          what, " (%", x->name(), ", computation ", c->name(),
          ") has a side effect the emulator cannot perform",
          absl::StrContains(what, "callback")
              ? " (a host callback into the Python process that traced the program: "
                "jax.debug.print, io_callback)"
              : "",
          "; its result is unused, but running without it would drop the effect silently"));
    }
  }
  return absl::OkStatus();
}

PlanOptions PlanOptionsOf(const RunOptions& options) {
  PlanOptions plan_options;
  plan_options.enable_fusion = !options.disable_fusion;
  return plan_options;
}

// `prepared`: the module's plan made earlier for these options; nullptr:
// plan now.
absl::StatusOr<RunResult> RunImpl(
    const hlo::HloModule& module,
    const std::vector<absl::Span<const Literal>>& per_device_arguments,
    const RunOptions& options, CollectiveBackend* backend, const ModulePlan* prepared) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(per_device_arguments.size());
  if (n == 0) return absl::InvalidArgumentError("RunSpmd: no devices");
  const int64_t first_device = options.first_device;
  const int64_t mesh = options.mesh_devices > 0 ? options.mesh_devices : n;
  if (first_device < 0 || first_device + n > mesh) {
    return absl::InvalidArgumentError(absl::StrCat("RunSpmd: devices [", first_device, ", ",
                                                   first_device + n,
                                                   ") are not on a mesh of ", mesh));
  }
  std::unique_ptr<ModulePlan> own_plan;
  if (prepared == nullptr) {
    RETURN_IF_ERROR(CheckConstantsKnown(module));
    RETURN_IF_ERROR(CheckNoUnusedSideEffects(module));
    ASSIGN_OR_RETURN(own_plan, ModulePlan::Build(module, PlanOptionsOf(options),
                                                 !options.disable_row_chains, options.jit));
    prepared = own_plan.get();
  }
  const ModulePlan* plan = prepared;
  std::unique_ptr<InProcessCollectives> own_backend;
  if (backend == nullptr) {
    if (mesh != n) {
      return absl::InvalidArgumentError(
          "RunSpmd: a run of part of the mesh needs a backend spanning every process");
    }
    own_backend = std::make_unique<InProcessCollectives>(
        n, InProcessCollectivesOptions{.timeout_seconds = options.collective_timeout_seconds});
    backend = own_backend.get();
  }
  if (backend->num_devices() != mesh) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective backend spans ", backend->num_devices(), " devices, the mesh has ", mesh));
  }
  RunResult result;
  Trace* trace = options.record_trace ? &result.trace : nullptr;
  std::atomic<bool> abort{false};
  RunLimits limits;
  limits.max_loop_iterations = options.max_loop_iterations;
  limits.abort = &abort;
  limits.cancel = options.cancel;
  if (options.timeout_seconds > 0) {
    limits.timeout_seconds = options.timeout_seconds;
    limits.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(options.timeout_seconds));
  }
  // Devices take turns on at most `workers` threads, each with an equal
  // share of the OpenMP threads.
  const int total = TotalThreads(options);
  const int workers = static_cast<int>(std::min<int64_t>(n, std::max(1, total)));
  const int threads_each = std::max(1, total / workers);
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<ExecContext> contexts(n);
  std::vector<std::unique_ptr<DeviceRun>> runs;
  for (int64_t d = 0; d < n; ++d) {
    devices.push_back(std::make_unique<Device>(first_device + d, options.hbm_capacity_bytes, start, trace,
                                               options.record_allocations));
    contexts[d].plan = plan;
    contexts[d].device = devices[d].get();
    contexts[d].backend = backend;
    contexts[d].trace = trace;
    contexts[d].device_index = first_device + d;
    contexts[d].num_devices = mesh;
    contexts[d].num_threads = threads_each;
    runs.push_back(std::make_unique<DeviceRun>(&contexts[d], per_device_arguments[d], &limits));
  }
  Scheduler scheduler(&runs, backend, &abort, first_device);
  scheduler.Run(workers);
  const std::vector<absl::Status>& statuses = scheduler.statuses();
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
    result.devices.push_back(devices[d]->Report());
    for (Literal& l : runs[d]->TakeOutputs()) result.outputs.push_back(std::move(l));
  }
  runs.clear();
  devices.clear();  // releases the outputs' and arguments' host memory
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

std::vector<std::vector<int64_t>> CollectiveGroups(const hlo::HloModule& module,
                                                   int64_t num_devices) {
  std::set<std::vector<int64_t>> groups;
  std::vector<int64_t> all(num_devices);
  for (int64_t i = 0; i < num_devices; ++i) all[i] = i;
  for (const auto& c : module.computations()) {
    for (const auto& x : c->instructions()) {
      if (!hlo::IsCollective(x->opcode())) continue;
      const auto& listed = x->attrs().replica_groups.groups;
      if (x->opcode() == hlo::HloOpcode::kCollectivePermute || listed.empty()) {
        groups.insert(all);
      } else {
        groups.insert(listed.begin(), listed.end());
      }
    }
  }
  return {groups.begin(), groups.end()};
}

absl::StatusOr<RunResult> RunSpmd(
    const hlo::HloModule& module,
    const std::vector<std::vector<Literal>>& per_device_arguments,
    const RunOptions& options, CollectiveBackend* backend) {
  std::vector<absl::Span<const Literal>> spans;
  for (const auto& args : per_device_arguments) spans.emplace_back(args);
  return RunImpl(module, spans, options, backend, nullptr);
}

absl::StatusOr<RunResult> RunModule(const hlo::HloModule& module,
                                    absl::Span<const Literal> arguments,
                                    const RunOptions& options) {
  return RunImpl(module, {arguments}, options, nullptr, nullptr);
}

absl::StatusOr<std::unique_ptr<PreparedModule>> PreparedModule::Create(
    const hlo::HloModule& module, const RunOptions& options) {
  RETURN_IF_ERROR(CheckConstantsKnown(module));
  RETURN_IF_ERROR(CheckNoUnusedSideEffects(module));
  ASSIGN_OR_RETURN(std::unique_ptr<ModulePlan> plan,
                   ModulePlan::Build(module, PlanOptionsOf(options), !options.disable_row_chains,
                                     options.jit));
  return std::unique_ptr<PreparedModule>(new PreparedModule(
      module, std::move(plan), options.disable_fusion, options.disable_row_chains));
}

PreparedModule::PreparedModule(const hlo::HloModule& module, std::unique_ptr<ModulePlan> plan,
                               bool disable_fusion, bool disable_row_chains)
    : module_(&module), plan_(std::move(plan)), disable_fusion_(disable_fusion),
      disable_row_chains_(disable_row_chains) {}

PreparedModule::~PreparedModule() = default;

absl::Status PreparedModule::CheckOptions(const RunOptions& options) const {
  if (options.disable_fusion != disable_fusion_ ||
      options.disable_row_chains != disable_row_chains_) {
    return absl::InvalidArgumentError(
        "PreparedModule: disable_fusion / disable_row_chains differ from the ones it was "
        "planned with");
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> PreparedModule::Run(absl::Span<const Literal> arguments,
                                              const RunOptions& options) const {
  RETURN_IF_ERROR(CheckOptions(options));
  return RunImpl(*module_, {arguments}, options, nullptr, plan_.get());
}

absl::StatusOr<RunResult> PreparedModule::RunSpmd(
    const std::vector<std::vector<Literal>>& per_device_arguments, const RunOptions& options,
    CollectiveBackend* backend) const {
  RETURN_IF_ERROR(CheckOptions(options));
  std::vector<absl::Span<const Literal>> spans;
  for (const auto& args : per_device_arguments) spans.emplace_back(args);
  return RunImpl(*module_, spans, options, backend, plan_.get());
}

}  // namespace tpuoff::runtime
