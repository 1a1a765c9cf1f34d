// Public entry points of the host emulator: run an HLO module on one
// simulated TPU v6e device, or an SPMD program on N devices that talk through
// a CollectiveBackend. Each computation is planned once (schedule, fusion
// groups, buffer lifetimes; see runtime/emulator/plan.h) and then run with OpenMP.
//
// Numerics follow XLA:CPU: bf16/f16 are stored as 16 bits and computed in
// f32 with round-to-nearest-even on every store; integer ops wrap; NaN/Inf
// propagate; reductions combine in a fixed order, so outputs are
// bit-identical for any thread count.
#ifndef TPUOFF_RUNTIME_EMULATOR_EXECUTOR_H_
#define TPUOFF_RUNTIME_EMULATOR_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "runtime/device/collectives.h"
#include "runtime/device/device.h"
#include "runtime/device/trace.h"
#include "runtime/emulator/loop_jit.h"

namespace tpuoff::runtime {

struct RunOptions {
  // Host threads in total (0 = all available; at most the hardware's).
  // Devices take turns on min(devices, threads) worker threads, each with
  // an equal share, at least one.
  int num_threads = 0;
  // HBM capacity of each simulated device.
  int64_t hbm_capacity_bytes = kDefaultHbmBytes;
  // Record a Chrome trace (events per op/fused group, HBM counter track).
  bool record_trace = false;
  // Record every allocation and free in DeviceReport::records.
  bool record_allocations = true;
  // Turn the planner's elementwise fusion off (every op materialises its
  // result); for tests and debugging. Results are bit-identical either way.
  bool disable_fusion = false;
  // Run every fused step on its own instead of grouping steps into row
  // chains (runtime/emulator/row_chain.h), and tile loops iterations-outer
  // instead of rows-outer (runtime/emulator/row_while.h); for tests and
  // debugging. Results and HBM figures are bit-identical either way.
  bool disable_row_chains = false;
  // Which fused loops are compiled to machine code with LLVM
  // (runtime/emulator/loop_jit.h): kAuto those over many elements (and the
  // TPUOFF_JIT environment variable, auto/always/never, decides for kAuto),
  // kAlways every one the JIT expresses, kNever none. Results are
  // bit-identical either way; builds without LLVM interpret everything.
  LoopJitMode jit = LoopJitMode::kAuto;
  // Most iterations any one execution of a while loop may run (0: no
  // limit); more fail the run with RESOURCE_EXHAUSTED naming the loop, its
  // computation and the device.
  int64_t max_loop_iterations = 0;
  // Wall-clock limit of the whole run in seconds (0: none), checked by every
  // device between steps: DEADLINE_EXCEEDED naming the device, the
  // innermost loop and its iteration, and the instruction being run.
  double timeout_seconds = 0;
  // Another thread sets it to stop the run (e.g. the Python binding on
  // Ctrl-C): every device stops at its next step with CANCELLED naming the
  // device, the innermost loop and its iteration, and the instruction (as
  // the time limit does). nullptr: not cancellable.
  const std::atomic<bool>* cancel = nullptr;
  // How long a device may wait at a collective for the rest of its group
  // while they are still running (DEADLINE_EXCEEDED naming the waiting and
  // the missing devices). A collective the others can no longer reach
  // (they finished, or wait at another one) fails at once.
  double collective_timeout_seconds = 60;
  // A run spread over processes (runtime/device/process_world.h): this
  // process runs the mesh devices [first_device, first_device + the number
  // of argument sets) of `mesh_devices` in all (0: just those), talking to
  // the others through the backend RunSpmd is given. partition-id, device
  // ids and collectives use the mesh-wide device numbers.
  int64_t first_device = 0;
  int64_t mesh_devices = 0;
};

struct RunResult {
  // Leaves of the root tuple (depth-first), or the single array.
  std::vector<hlo::Literal> outputs;
  // Allocator statistics and records per device, in device order.
  std::vector<DeviceReport> devices;
  Trace trace;  // empty unless RunOptions::record_trace
  double wall_seconds = 0;
};

// Runs `module`'s entry computation on one device (device 0 of a mesh of
// one). `arguments` match the entry parameters in number and shape
// (INVALID_ARGUMENT otherwise). Running out of HBM is RESOURCE_EXHAUSTED:
// "device 0: out of HBM while allocating N bytes for %op (in use X of
// 32.00G hbm); largest live buffers: ...". Collectives run as on a mesh of
// one device (identity); partition-id and replica-id are 0.
absl::StatusOr<RunResult> RunModule(const hlo::HloModule& module,
                                    absl::Span<const hlo::Literal> arguments,
                                    const RunOptions& options = {});

// Runs the same per-device program on N = per_device_arguments.size()
// simulated devices. They take turns on at most min(N, threads) host
// threads: a device waiting at a collective holds no thread, so any N
// works (2048 devices on 2 threads). partition-id
// returns the device's index in the mesh (replica-id is 0). Collectives go
// through `backend` (nullptr: an InProcessCollectives for N devices is
// created). RunResult::outputs holds device 0's outputs followed by device
// 1's, ... (num_outputs_per_device = outputs.size() / N). The first device
// failure fails the run; other devices are aborted, never left waiting.
absl::StatusOr<RunResult> RunSpmd(
    const hlo::HloModule& module,
    const std::vector<std::vector<hlo::Literal>>& per_device_arguments,
    const RunOptions& options = {}, CollectiveBackend* backend = nullptr);

class ModulePlan;

// A module planned once (schedule, fusion groups, buffer lifetimes, compiled
// loops: what RunModule and RunSpmd do on every call) for repeated runs, as
// a compiled executable is run. Results and HBM figures are those of
// RunModule / RunSpmd. The module must outlive it, unchanged.
class PreparedModule {
 public:
  // Fails as RunModule would before running (elided constants, a fused
  // group that cannot be compiled).
  static absl::StatusOr<std::unique_ptr<PreparedModule>> Create(const hlo::HloModule& module,
                                                                const RunOptions& options = {});
  ~PreparedModule();
  // `options` may differ from Create's except in disable_fusion and
  // disable_row_chains (INVALID_ARGUMENT).
  absl::StatusOr<RunResult> Run(absl::Span<const hlo::Literal> arguments,
                                const RunOptions& options = {}) const;
  absl::StatusOr<RunResult> RunSpmd(
      const std::vector<std::vector<hlo::Literal>>& per_device_arguments,
      const RunOptions& options = {}, CollectiveBackend* backend = nullptr) const;

 private:
  PreparedModule(const hlo::HloModule& module, std::unique_ptr<ModulePlan> plan,
                 bool disable_fusion, bool disable_row_chains);
  absl::Status CheckOptions(const RunOptions& options) const;

  const hlo::HloModule* module_;
  std::unique_ptr<ModulePlan> plan_;
  bool disable_fusion_, disable_row_chains_;
};

// Every distinct device group the collectives of `module` can use on a mesh
// of `num_devices` (replica groups as listed; the whole mesh for an op
// without groups and for collective-permute), in a fixed order: what a
// backend spanning processes makes communicators for.
std::vector<std::vector<int64_t>> CollectiveGroups(const hlo::HloModule& module,
                                                   int64_t num_devices);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_EXECUTOR_H_
