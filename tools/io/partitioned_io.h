// Running a partitioned (per-device SPMD) module on global arrays, as `run`
// and `compare` do: the global arguments are split by the parameters'
// shardings, the program runs on every simulated device, and the global
// outputs are reassembled by the root's sharding (replicated outputs must
// agree bitwise across devices).
#ifndef TPUOFF_TOOLS_IO_PARTITIONED_IO_H_
#define TPUOFF_TOOLS_IO_PARTITIONED_IO_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/sharding_util.h"
#include "runtime/emulator/executor.h"

namespace tpuoff::tools {

// A computation of parameters only, with the names and GLOBAL shapes of a
// partitioned module's entry parameters: what LoadInputsFromDirectory,
// MakeRandomInputs and ExpectedParametersText read.
std::unique_ptr<hlo::HloComputation> GlobalParameterComputation(
    const hlo::PartitionedSignature& signature);

// Splits `global_args`, runs `module` with RunSpmd and reassembles: the
// result's outputs are the global outputs (one per result leaf), its
// devices the per-device reports. `output_names` name outputs in messages.
absl::StatusOr<runtime::RunResult> RunPartitioned(const hlo::HloModule& module,
                                                  const hlo::PartitionedSignature& signature,
                                                  absl::Span<const hlo::Literal> global_args,
                                                  const runtime::RunOptions& options,
                                                  const std::vector<std::string>& output_names);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_PARTITIONED_IO_H_
