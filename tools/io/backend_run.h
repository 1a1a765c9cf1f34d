// Running a module on a chosen backend, as `run`, `compare` and `bench` do:
// the host emulator (runtime/emulator) or a PJRT plugin (runtime/pjrt), with
// the same argument handling (per-device sets, or global arrays split and
// reassembled for a partitioned module) and the same result layout.
#ifndef TPUOFF_TOOLS_IO_BACKEND_RUN_H_
#define TPUOFF_TOOLS_IO_BACKEND_RUN_H_

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/sharding_util.h"
#include "runtime/emulator/executor.h"

namespace tpuoff::tools {

enum class Backend { kEmulator, kPjrt };
absl::string_view BackendName(Backend backend);  // "emulator", "pjrt"
absl::StatusOr<Backend> ParseBackend(absl::string_view name);

struct BackendOptions {
  Backend backend = Backend::kEmulator;
  runtime::RunOptions emulator;  // for kEmulator
  std::string pjrt_plugin;       // for kPjrt; empty: the build's CPU plugin
  // For kPjrt (the plugin runs in a child process): its time limit in
  // seconds (0: none) and a flag that cancels it (the emulator's are in
  // `emulator`).
  double pjrt_timeout_seconds = 0;
  const std::atomic<bool>* pjrt_cancel = nullptr;
  // In a distributed run (runtime::Distributed(), emulator only): the
  // arguments already are this rank's devices' sets (tools/io/rank_run.h
  // LocalDevices), not the global arrays or every device's sets.
  bool local_arguments = false;
};

struct BackendResult {
  // Outputs as RunModule/RunSpmd return them (global for a partitioned
  // module), the emulator's per-device reports (none for PJRT) and its
  // trace.
  runtime::RunResult run;
  // One line on what ran where, e.g. "pjrt: .../xla_cpu_pjrt.so (PJRT API
  // 0.81, platform cpu), 8 devices, compile 0.41 s, execute 0.02 s".
  std::string summary;
};

// Runs `module`. `signature` set: a partitioned module taking the GLOBAL
// arguments `arguments[0]` (split by the parameters' shardings; outputs
// reassembled, named by `output_names` in messages). Otherwise
// `arguments` holds one set per device (num_partitions of them, or one).
// In a distributed run (mpirun, more than one rank) a module of several
// devices runs on every rank's block of them (tools/io/rank_run.h); the
// result is the whole mesh's on rank 0 and empty on the other ranks.
absl::StatusOr<BackendResult> RunOnBackend(const hlo::HloModule& module,
                                           const std::optional<hlo::PartitionedSignature>& signature,
                                           const std::vector<std::vector<hlo::Literal>>& arguments,
                                           const BackendOptions& options,
                                           const std::vector<std::string>& output_names);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_BACKEND_RUN_H_
