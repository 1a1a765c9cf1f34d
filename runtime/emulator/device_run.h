// Internal: one simulated device running the entry computation of a planned
// module, as a resumable task. Computations called by while, call,
// conditional and fusion run as frames on an explicit stack (never by
// recursion, so call chains of any depth run), and a collective that has to
// wait for other devices suspends the task instead of blocking its thread:
// the executor (runtime/emulator/executor.cc) runs many devices on a few
// threads and resumes a device when its collective completes.
#ifndef TPUOFF_RUNTIME_EMULATOR_DEVICE_RUN_H_
#define TPUOFF_RUNTIME_EMULATOR_DEVICE_RUN_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "runtime/emulator/exec_context.h"
#include "runtime/emulator/row_while.h"

namespace tpuoff::runtime {

// Limits every device of a run checks between steps.
struct RunLimits {
  using Clock = std::chrono::steady_clock;
  // Most iterations of any one execution of a while loop (0: no limit).
  int64_t max_loop_iterations = 0;
  // The run fails once this passes (seconds: for messages; 0 = no limit).
  double timeout_seconds = 0;
  Clock::time_point deadline = Clock::time_point::max();
  // Set when some device failed: the others stop at their next step.
  std::atomic<bool>* abort = nullptr;
  // Set by the caller to stop the run (RunOptions::cancel).
  const std::atomic<bool>* cancel = nullptr;
};

class DeviceRun {
 public:
  enum class Progress { kFinished, kWaiting };

  DeviceRun(ExecContext* ctx, absl::Span<const hlo::Literal> arguments,
            const RunLimits* limits);
  ~DeviceRun();
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;

  // Runs until the device finishes (outputs ready), fails, or waits at a
  // collective (kWaiting: call Resume again once `on_collective_done` was
  // called). Never throws: host allocation failures become
  // RESOURCE_EXHAUSTED.
  absl::StatusOr<Progress> Resume();

  // Set before the first Resume: called (from any thread) when a
  // collective the device waits at completes or fails; the executor then
  // queues the device to be resumed.
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }

  // The entry's result leaves, once finished.
  std::vector<hlo::Literal> TakeOutputs() { return std::move(outputs_); }

  // A computation's buffers (internal; public for the helpers in the .cc).
  struct FrameView;

 private:
  struct Frame;
  absl::StatusOr<Progress> ResumeImpl();
  absl::Status Start();
  absl::Status CheckLimits();
  void Enter(const ComputationPlan& plan, const std::vector<DeviceBuffer*>& args);
  absl::StatusOr<bool> StartCallee();
  absl::StatusOr<bool> Return(std::vector<DeviceBuffer*> result);
  void FinishStep();
  absl::Status RunChain(const RowChain& chain);
  // A step of a loop running rows-outer (runtime/emulator/row_while.h):
  // queued, or run now (after the queue when it must wait for it). False
  // when the step is not handled here (a call or collective: the queue has
  // run, and the step goes the usual way).
  absl::StatusOr<bool> RowLoopStep(Frame& f);
  absl::Status RunRowQueue();
  // Frees a buffer; while a loop runs rows-outer its host memory is kept
  // until the queue has run.
  void FreeBuffer(DeviceBuffer* b, const std::string& op);
  absl::Status ExecuteOp(Frame& f, const Step& step);
  absl::StatusOr<bool> StartCollectiveStep(Frame& f, const Step& step);
  absl::Status MakeOutputs(const std::vector<DeviceBuffer*>& result);
  std::string Where() const;
  // Old value of the 128-bit state of an rng / rng-get-and-update-state
  // instruction, advanced by `delta` (XLA:CPU: one state per instruction,
  // starting at 0x7012395 in every execution of the module).
  void NextRngState(const hlo::HloInstruction* instr, uint64_t delta, uint64_t state[2]);

  ExecContext* ctx_;
  absl::Span<const hlo::Literal> arguments_;
  const RunLimits* limits_;
  std::vector<Frame> frames_;
  bool started_ = false;
  bool waiting_ = false;
  PendingCollective pending_;
  absl::Status collective_status_;
  std::function<void()> wake_;
  std::vector<hlo::Literal> outputs_;
  uint64_t polls_ = 0;
  std::unordered_map<const hlo::HloInstruction*, unsigned __int128> rng_states_;
  RunLimits::Clock::time_point last_poll_{};
  // The while loop running rows-outer: its queue and the index of its frame.
  std::unique_ptr<RowQueue> row_queue_;
  size_t row_owner_ = 0;
  const hlo::HloInstruction* row_loop_ = nullptr;
  // The queue started at a step before its loop (RowWhileFirstStep) and
  // the loop has not started yet: that frame's steps go through it too.
  bool row_before_loop_ = false;
  void StartRowQueue(int64_t rows, const hlo::HloInstruction* loop);
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_DEVICE_RUN_H_
