#include "tools/io/backend_run.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/status_macros.h"
#include "runtime/device/sharding_io.h"
#include "runtime/device/process_world.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "tools/io/rank_run.h"

namespace tpuoff::tools {

absl::string_view BackendName(Backend backend) {
  return backend == Backend::kPjrt ? "pjrt" : "emulator";
}

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "emulator") return Backend::kEmulator;
  if (name == "pjrt") return Backend::kPjrt;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", name, "' (expected emulator or pjrt)"));
}

namespace {

absl::StatusOr<BackendResult> RunOnRanksBackend(
    const hlo::HloModule& module, const std::optional<hlo::PartitionedSignature>& sig,
    const std::vector<std::vector<hlo::Literal>>& arguments, const BackendOptions& options,
    const std::vector<std::string>& output_names) {
  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  if (options.backend != Backend::kEmulator) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", runtime::WorldRank(), ": --backend=", BackendName(options.backend),
        " does not run across MPI ranks (only the emulator does)"));
  }
  ASSIGN_OR_RETURN(runtime::DeviceBlock block, LocalDevices(n));
  std::vector<std::vector<hlo::Literal>> split;
  const std::vector<std::vector<hlo::Literal>>* local = &arguments;
  if (!options.local_arguments) {
    if (sig.has_value()) {
      if (arguments.size() != 1) {
        return absl::InvalidArgumentError(
            "a partitioned module takes one set of global arguments");
      }
      ASSIGN_OR_RETURN(split, runtime::SplitArguments(*sig, arguments[0], block.first,
                                                      block.count));
    } else {
      if (static_cast<int64_t>(arguments.size()) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected ", n, " argument sets, got ", arguments.size()));
      }
      for (int64_t d = 0; d < block.count; ++d) {
        std::vector<hlo::Literal> set;
        for (const hlo::Literal& l : arguments[block.first + d]) set.push_back(l);
        split.push_back(std::move(set));
      }
    }
    local = &split;
  }
  BackendResult result;
  ASSIGN_OR_RETURN(result.run, RunOnRanks(module, *local, options.emulator));
  split.clear();
  result.summary = absl::StrCat("emulator: ", n, " simulated devices on ", runtime::WorldSize(),
                                " MPI ranks");
  if (sig.has_value() && runtime::WorldRank() == 0) {
    ASSIGN_OR_RETURN(result.run.outputs,
                     runtime::AssembleOutputs(*sig, result.run.outputs, output_names));
  }
  return result;
}

}  // namespace

absl::StatusOr<BackendResult> RunOnBackend(const hlo::HloModule& module,
                                           const std::optional<hlo::PartitionedSignature>& sig,
                                           const std::vector<std::vector<hlo::Literal>>& arguments,
                                           const BackendOptions& options,
                                           const std::vector<std::string>& output_names) {
  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  if (runtime::Distributed() && n > 1) return RunOnRanksBackend(module, sig, arguments, options,
                                                                 output_names);
  std::vector<std::vector<hlo::Literal>> split;
  const std::vector<std::vector<hlo::Literal>>* per_device_ptr = &arguments;
  if (sig.has_value()) {
    if (arguments.size() != 1) {
      return absl::InvalidArgumentError("a partitioned module takes one set of global arguments");
    }
    ASSIGN_OR_RETURN(split, runtime::SplitArguments(*sig, arguments[0]));
    per_device_ptr = &split;
  }
  const std::vector<std::vector<hlo::Literal>>& per_device = *per_device_ptr;
  BackendResult result;
  if (options.backend == Backend::kEmulator) {
    ASSIGN_OR_RETURN(result.run, n == 1 && !sig.has_value()
                                     ? runtime::RunModule(module, per_device[0], options.emulator)
                                     : runtime::RunSpmd(module, per_device, options.emulator));
    result.summary = absl::StrCat("emulator: ", n, n == 1 ? " simulated device" : " simulated devices");
  } else {
    runtime::pjrt::ExecuteOptions o;
    o.plugin_path = options.pjrt_plugin;
    o.timeout_seconds = options.pjrt_timeout_seconds;
    o.cancel = options.pjrt_cancel;
    ASSIGN_OR_RETURN(runtime::pjrt::ExecuteResult r,
                     runtime::pjrt::Execute(module, per_device, o));
    result.run.outputs = std::move(r.outputs);
    result.run.wall_seconds = r.compile_seconds + r.execute_seconds;
    result.summary = absl::StrFormat(
        "pjrt: %s (PJRT API %d.%d, platform %s), %d %s, compile %.3f s, execute %.3f s",
        r.plugin.path, r.plugin.api_major, r.plugin.api_minor, r.platform, r.num_devices,
        r.num_devices == 1 ? "device" : "devices", r.compile_seconds, r.execute_seconds);
  }
  if (sig.has_value()) {
    ASSIGN_OR_RETURN(result.run.outputs,
                     runtime::AssembleOutputs(*sig, result.run.outputs, output_names));
  }
  return result;
}

}  // namespace tpuoff::tools
