// The predicted TPU v6e timeline of a module for `tpuoff run --trace`: the
// cost model's ops (hlo/analysis/cost_analysis.h, fused counting, the same
// plan the emulator ran) laid out per device on the trace's predicted track
// with their v6e times (hlo/analysis/tpu_model.h), beside the host wall-time
// track. A collective starts when the last device of its group reaches it
// and ends for all of them together; flows link ring neighbours of the group
// (source -> target for collective-permute). Ops inside loops appear once
// with the time of all their trips (args: executions).
#ifndef TPUOFF_TOOLS_CLI_PREDICTED_TRACE_H_
#define TPUOFF_TOOLS_CLI_PREDICTED_TRACE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "hlo/ir/module.h"
#include "runtime/device/trace.h"

namespace tpuoff::tools {

// Appends the predicted timeline of `module` run on `num_devices` devices
// (an SPMD program on each) to `trace`. Events start at 0 like the host
// track's.
absl::Status AppendPredictedTimeline(const hlo::HloModule& module, int64_t num_devices,
                                     runtime::Trace* trace);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_PREDICTED_TRACE_H_
