#include "tools/io/partitioned_io.h"

#include "hlo/ir/instruction.h"
#include "hlo/ir/status_macros.h"
#include "runtime/device/sharding_io.h"

namespace tpuoff::tools {

std::unique_ptr<hlo::HloComputation> GlobalParameterComputation(
    const hlo::PartitionedSignature& sig) {
  auto comp = std::make_unique<hlo::HloComputation>("global_parameters");
  for (size_t i = 0; i < sig.global_parameters.size(); ++i) {
    comp->AddInstruction(hlo::HloInstruction::CreateParameter(
        static_cast<int64_t>(i), sig.global_parameters[i], sig.parameter_names[i]));
  }
  return comp;
}

absl::StatusOr<runtime::RunResult> RunPartitioned(const hlo::HloModule& module,
                                                  const hlo::PartitionedSignature& sig,
                                                  absl::Span<const hlo::Literal> global_args,
                                                  const runtime::RunOptions& options,
                                                  const std::vector<std::string>& output_names) {
  ASSIGN_OR_RETURN(std::vector<std::vector<hlo::Literal>> per_device,
                   runtime::SplitArguments(sig, global_args));
  ASSIGN_OR_RETURN(runtime::RunResult result, runtime::RunSpmd(module, per_device, options));
  ASSIGN_OR_RETURN(result.outputs,
                   runtime::AssembleOutputs(sig, result.outputs, output_names));
  return result;
}

}  // namespace tpuoff::tools
