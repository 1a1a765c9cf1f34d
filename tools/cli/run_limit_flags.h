// The flags bounding a run on the emulator, shared by `run` and `compare`:
// --max-loop-iterations, --timeout and --collective-timeout
// (runtime::RunOptions).
#ifndef TPUOFF_TOOLS_CLI_RUN_LIMIT_FLAGS_H_
#define TPUOFF_TOOLS_CLI_RUN_LIMIT_FLAGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/emulator/executor.h"
#include "tools/cli/flags.h"

namespace tpuoff::tools {

struct RunLimitFlags {
  int64_t max_loop_iterations = 0;  // 0 = no limit
  double timeout = 0;               // seconds; 0 = no limit
  double collective_timeout = 60;   // seconds
};

void RegisterRunLimitFlags(FlagSet& flags, RunLimitFlags* out);
// INVALID_ARGUMENT naming the flag when a value is out of range.
absl::Status CheckRunLimitFlags(const RunLimitFlags& limits);
void ApplyRunLimits(const RunLimitFlags& limits, runtime::RunOptions* options);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_RUN_LIMIT_FLAGS_H_
