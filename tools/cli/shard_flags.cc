#include "tools/cli/shard_flags.h"

#include "absl/strings/str_cat.h"
#include "hlo/spmd/shard_map.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::tools {

void RegisterShardFlags(FlagSet& flags, ShardFlags* out, const ShardFlagOptions& options) {
  flags.AddInt64("mesh", &out->mesh, "kernel: devices on the 1-D mesh (v6e cores)");
  std::vector<std::string> choices = {"batch", "vocab"};
  if (options.with_none) choices.insert(choices.begin(), "none");
  flags.AddEnum("shard", &out->shard, choices,
                "kernel: split the batch or the vocab over the mesh (per-device "
                "SPMD module with collectives)");
  if (options.with_global_form) {
    flags.AddBool("global-form", &out->global_form,
                  "kernel: emit JAX's global form of the shard_map (Sharding/"
                  "SPMDFullToShardShape custom-calls) instead of the per-device module");
  }
}

absl::Status CheckShardFlagUsage(const FlagSet& flags, const ShardFlags& v,
                                 const KernelFlags& kernel) {
  for (const char* name : {"mesh", "shard", "global-form"}) {
    if (flags.WasSet(name) && !flags.WasSet("kernel")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " only applies with --kernel=NAME"));
    }
  }
  if (flags.WasSet("mesh") && !flags.WasSet("shard")) {
    return absl::InvalidArgumentError(
        "--mesh only applies with --shard=batch or --shard=vocab (it sets the devices the "
        "kernel is sharded over)");
  }
  if (v.mesh < 1 || v.mesh > hlo::kMaxMeshDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mesh must be in [1, ", hlo::kMaxMeshDevices, "], got ", v.mesh));
  }
  if (v.global_form && v.shard == "none") {
    return absl::InvalidArgumentError("--global-form needs --shard=batch or --shard=vocab");
  }
  if (!flags.WasSet("kernel") || v.shard == "none") return absl::OkStatus();
  absl::StatusOr<kernels::KernelSpec> spec = KernelSpecFromFlags(kernel);
  if (!spec.ok()) return absl::OkStatus();  // reported by CheckKernelFlagUsage
  ASSIGN_OR_RETURN(kernels::ShardingSpec sharding, ShardingSpecFromFlags(v));
  if (absl::Status s = kernels::ValidateShardedKernel(*spec, sharding); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--shard=", v.shard, " --mesh=", v.mesh,
                                                   ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::ShardingSpec> ShardingSpecFromFlags(const ShardFlags& f) {
  kernels::ShardingSpec spec;
  ASSIGN_OR_RETURN(spec.kind, kernels::ParseShardKind(f.shard));
  spec.mesh.num_devices = f.mesh;
  spec.global_form = f.global_form;
  return spec;
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedModule(const KernelFlags& kernel,
                                                                    const ShardFlags& shard) {
  ASSIGN_OR_RETURN(kernels::KernelSpec spec, KernelSpecFromFlags(kernel));
  ASSIGN_OR_RETURN(kernels::ShardingSpec sharding, ShardingSpecFromFlags(shard));
  return kernels::BuildShardedKernel(spec, sharding);
}

}  // namespace tpuoff::tools
