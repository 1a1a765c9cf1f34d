// A run spread over the ranks of an MPI job (`mpirun -np P tpuoff run ...`,
// runtime/device/process_world.h): each rank holds and runs only its block
// of the mesh's devices, reads only its devices' pieces of the global
// inputs, and sends its devices' outputs and HBM reports to rank 0, which
// then holds what a single-process run returns.
#ifndef TPUOFF_TOOLS_IO_RANK_RUN_H_
#define TPUOFF_TOOLS_IO_RANK_RUN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/sharding_util.h"
#include "runtime/device/process_world.h"
#include "runtime/emulator/executor.h"

namespace tpuoff::tools {

// This rank's devices of a mesh of `num_devices` (every device in a single
// process). INVALID_ARGUMENT when the ranks cannot share them evenly.
absl::StatusOr<runtime::DeviceBlock> LocalDevices(int64_t num_devices);

// This rank's argument sets of a partitioned module from DIR/<parameter>.npy
// holding the GLOBAL arrays: each device's piece is read by offset, so no
// rank reads (or holds) more of a file than its devices need. `params` are
// the global parameters (their names give the files).
absl::StatusOr<std::vector<std::vector<hlo::Literal>>> LoadLocalShards(
    const hlo::PartitionedSignature& signature, const hlo::HloComputation& params,
    const std::string& dir, runtime::DeviceBlock block);

// Runs this rank's devices (`local_arguments`, one set per device of
// LocalDevices) with collectives over MPI, then gathers: on rank 0 the
// result is RunSpmd's for the whole mesh (every device's outputs in device
// order, every device's report); on the other ranks it is empty. A
// distributed run records no trace or allocation records.
absl::StatusOr<runtime::RunResult> RunOnRanks(
    const hlo::HloModule& module, const std::vector<std::vector<hlo::Literal>>& local_arguments,
    const runtime::RunOptions& options);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_RANK_RUN_H_
