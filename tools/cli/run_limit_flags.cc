#include "tools/cli/run_limit_flags.h"

#include "absl/strings/str_cat.h"

namespace tpuoff::tools {

// Longer than any run could take, small enough for time arithmetic.
constexpr double kMaxSeconds = 1e9;

void RegisterRunLimitFlags(FlagSet& flags, RunLimitFlags* out) {
  flags.AddInt64("max-loop-iterations", &out->max_loop_iterations,
                 "fail a while loop that runs more iterations than this (0 = no limit)");
  flags.AddDouble("timeout", &out->timeout,
                  "fail the run after this many seconds, naming the loop and instruction "
                  "being run (0 = no limit); with --backend=pjrt the plugin's process is "
                  "killed then");
  flags.AddDouble("collective-timeout", &out->collective_timeout,
                  "seconds a device waits at a collective for devices still running");
}

absl::Status CheckRunLimitFlags(const RunLimitFlags& l) {
  if (l.max_loop_iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-loop-iterations must be >= 0 (0 = no limit), got ", l.max_loop_iterations));
  }
  if (!(l.timeout >= 0) || l.timeout > kMaxSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout must be in [0, 1e9] seconds (0 = no limit), got ", l.timeout));
  }
  if (!(l.collective_timeout > 0) || l.collective_timeout > kMaxSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--collective-timeout must be in (0, 1e9] seconds, got ", l.collective_timeout));
  }
  return absl::OkStatus();
}

void ApplyRunLimits(const RunLimitFlags& l, runtime::RunOptions* options) {
  options->max_loop_iterations = l.max_loop_iterations;
  options->timeout_seconds = l.timeout;
  options->collective_timeout_seconds = l.collective_timeout;
}

}  // namespace tpuoff::tools
