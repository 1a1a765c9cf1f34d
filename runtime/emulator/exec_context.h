// Internal: the state of one simulated device while it runs a module.
#ifndef TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_
#define TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "hlo/ir/instruction.h"
#include "runtime/device/collectives.h"
#include "runtime/device/device.h"
#include "runtime/emulator/plan.h"
#include "runtime/device/trace.h"

namespace tpuoff::runtime {

struct ExecContext {
  const ModulePlan* plan = nullptr;
  Device* device = nullptr;
  CollectiveBackend* backend = nullptr;
  Trace* trace = nullptr;  // nullptr: no trace
  int64_t device_index = 0;
  int64_t num_devices = 1;
  int num_threads = 1;
  // Executions so far of each collective, so that the k-th execution on
  // every device meets the k-th on the others.
  absl::flat_hash_map<const hlo::HloInstruction*, int64_t> collective_counts;
};

// Runs one collective instruction. `in`/`out` hold the data of the operand
// and result array leaves (depth-first).
absl::Status ExecuteCollective(ExecContext& ctx,
                               const hlo::HloInstruction& instr,
                               const std::vector<const void*>& in,
                               const std::vector<void*>& out);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_
