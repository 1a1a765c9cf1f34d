// Internal: the state of one simulated device while it runs a module, and
// the collective steps it submits to the CollectiveBackend.
#ifndef TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_
#define TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// A collective step between Submit and completion: the leaves the backend
// reads and writes (some in scratch owned here), and what is left to do
// with the received data afterwards.
struct PendingCollective {
  std::vector<CollectiveOp> ops;
  std::vector<CollectiveLeaf> leaves;
  std::vector<std::vector<uint8_t>> scratch;
  // [g][outer][row] received -> [outer][g][row] in the result.
  struct Interleaved {
    const uint8_t* from;
    uint8_t* to;
    int64_t g, outer, row;
  };
  std::vector<Interleaved> after;
  struct Copy {
    const uint8_t* from;
    uint8_t* to;
    int64_t bytes;
  };
  std::vector<Copy> copies;
};

// Starts one collective instruction. `in`/`out` hold the data of the
// operand and result array leaves (depth-first). Returns true when it
// completed (outputs written), false when it waits for other devices:
// `done` is then called on completion, after which FinishCollective must
// run on the device's own thread.
absl::StatusOr<bool> StartCollective(ExecContext& ctx, const hlo::HloInstruction& instr,
                                     const std::vector<const void*>& in,
                                     const std::vector<void*>& out, PendingCollective* pending,
                                     CollectiveDone done);
void FinishCollective(const PendingCollective& pending);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_EXEC_CONTEXT_H_
