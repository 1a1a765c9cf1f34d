// Refusing work the host cannot hold before allocating any of it: a run's
// inputs, every simulated device's buffers (the static peak of the plan the
// emulator will follow, hlo/analysis/memory_analysis.h) and the copies made
// after it, against what the host can still give this process (MemAvailable,
// the cgroup limit, `ulimit -v` and `ulimit -d`).
#ifndef TPUOFF_TOOLS_IO_HOST_BUDGET_H_
#define TPUOFF_TOOLS_IO_HOST_BUDGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/sharding_util.h"

namespace tpuoff::tools {

struct HostNeed {
  int64_t inputs = 0;      // argument arrays (global and per device)
  int64_t per_device = 0;  // each device's buffers beyond its arguments
  int64_t num_devices = 1;
  int64_t outputs = 0;         // copies after the run (reassembly, .npy files)
  int64_t total() const;
};

// Bytes of the array leaves of `computation`'s parameters (saturating).
int64_t ParameterBytes(const hlo::HloComputation& computation);
// bytes * n, saturating at the int64 maximum.
int64_t SaturatingBytes(int64_t bytes, int64_t n);
// Bytes of the array leaves of `shapes` (saturating).
int64_t ShapesBytes(const std::vector<hlo::Shape>& shapes);
// Bytes of the array leaves of `computation`'s result (saturating).
int64_t ResultBytes(const hlo::HloComputation& computation);

// The host memory one device of `module` uses beyond its arguments: the
// planned peak (hlo::AnalyzeMemory) minus the arguments live there. -1 when
// the analysis fails (the run then reports its own error).
int64_t DeviceBytesBeyondArguments(const hlo::HloModule& module);

// What running `module` needs on the host, as `tpuoff run` and tpuoff.run
// count it: the argument arrays, every local device's buffers beyond its
// arguments, a partitioned module's (`signature` given) reassembled global
// outputs, and `output_copies` more copies of the outputs (files written).
struct RunHostOptions {
  // Devices this process runs (a rank's block); -1: all of the module's.
  int64_t local_devices = -1;
  // A partitioned module's global argument arrays are made here (not when
  // the caller's arrays are borrowed, or a rank reads only its pieces).
  bool global_inputs = true;
  // The per-device argument sets are new arrays (not views of the
  // caller's arrays; a partitioned module's pieces always are).
  bool device_inputs = true;
  int64_t output_copies = 0;
};
HostNeed RunHostNeed(const hlo::HloModule& module, const hlo::PartitionedSignature* signature,
                     const RunHostOptions& options);

// RESOURCE_EXHAUSTED "not enough host memory: <what> needs about X
// (inputs A, device buffers B on N devices, outputs C) but the host has Y
// available (MemAvailable M; ulimit -v ...)" when need.total() > what the
// host has; OK when it fits or nothing is known about the host.
absl::Status CheckHostMemory(absl::string_view what, const HostNeed& need);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_HOST_BUDGET_H_
