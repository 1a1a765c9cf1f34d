#include "tools/cli/shard_flags.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hlo/ir/status_macros.h"
#include "hlo/spmd/mesh.h"
#include "hlo/spmd/sharding_util.h"

namespace tpuoff::tools {

void RegisterShardFlags(FlagSet& flags, ShardFlags* out, const ShardFlagOptions& options) {
  const std::string& p = options.prefix;
  flags.AddString(p + "mesh", &out->mesh,
                  "kernel: the device mesh, N or AxB[xC...] (v6e chips per axis, first axis "
                  "major: partition a*B+b is position (a,b))",
                  "N|AxB[xC...]");
  flags.AddString(p + "shard", &out->shard,
                  std::string("kernel: what each mesh axis splits, one of none|batch|seq|vocab "
                              "per axis, comma-separated (e.g. batch,vocab on 2x4); a per-device "
                              "SPMD module with collectives") +
                      (options.with_none ? "" : "; not all none"),
                  "KIND[,KIND]");
  if (options.with_global_form) {
    flags.AddBool("global-form", &out->global_form,
                  "kernel: emit JAX's global form of the shard_map (Sharding/"
                  "SPMDFullToShardShape custom-calls) instead of the per-device module");
  }
}

absl::Status CheckModuleOrKernelUsage(const FlagSet& flags, KernelFlags* kernel,
                                      const ShardFlags& shard, const ShardFlagOptions& options) {
  RETURN_IF_ERROR(CheckKernelFlagUsage(flags, kernel));
  RETURN_IF_ERROR(CheckShardFlagUsage(flags, shard, *kernel, options));
  const bool from_kernel = flags.WasSet("kernel");
  if (from_kernel == !flags.positionals().empty()) {
    return absl::InvalidArgumentError(from_kernel
                                          ? "give either MODULE_FILE or --kernel, not both"
                                          : "expected MODULE_FILE or --kernel=NAME");
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::ShardingSpec> ShardingSpecFromFlags(const ShardFlags& f,
                                                            absl::string_view p) {
  kernels::ShardingSpec spec;
  absl::StatusOr<hlo::Mesh> mesh = hlo::ParseMeshShape(f.mesh);
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", p, "mesh must be N or AxB[xC...] with at most ", hlo::kMaxMeshDevices,
        " devices (each size >= 1), got '", f.mesh, "'"));
  }
  spec.mesh = *std::move(mesh);
  std::vector<kernels::ShardKind> kinds;
  for (absl::string_view part : absl::StrSplit(f.shard, ',')) {
    absl::StatusOr<kernels::ShardKind> kind = kernels::ParseShardKind(part);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", p, "shard expects one of none|batch|seq|vocab per mesh axis, got '", f.shard,
          "'"));
    }
    kinds.push_back(*kind);
  }
  const int64_t axes = spec.mesh.num_axes();
  if (kinds.size() == 1) {
    spec.kind = kinds[0];
    if (axes > 1) spec.axis_kinds.assign(axes, kinds[0]);
  } else if (static_cast<int64_t>(kinds.size()) == axes) {
    spec.axis_kinds = kinds;
    spec.kind = kinds[0];
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", p, "shard=", f.shard, " has ", kinds.size(), " entries but --", p, "mesh=", f.mesh,
        " has ",
        axes, axes == 1 ? " axis" : " axes", " (one of none|batch|seq|vocab per axis)"));
  }
  spec.global_form = f.global_form;
  return spec;
}

int64_t MeshDeviceCount(const ShardFlags& f) {
  absl::StatusOr<hlo::Mesh> mesh = hlo::ParseMeshShape(f.mesh);
  return mesh.ok() ? mesh->num_devices : 1;
}

std::string DescribeSharding(const kernels::ShardingSpec& s) {
  return absl::StrCat(s.mesh.ShapeString(), " ", s.KindsString());
}

std::string DescribeShardBlocks(const kernels::ShardingSpec& s, int64_t batch, int64_t seq,
                                int64_t vocab) {
  const int64_t n = s.mesh.num_devices;
  absl::StatusOr<kernels::ShardLayout> l = kernels::LayoutOf(s);
  if (!l.ok()) return DescribeSharding(s);
  const int64_t b = hlo::ShardSize(batch, l->nb), t = hlo::ShardSize(seq, l->ns),
                v = hlo::ShardSize(vocab, l->nv);
  const std::string devices = absl::StrCat(n, n == 1 ? " device" : " devices");
  if (s.mesh.num_axes() == 1) {
    std::string each;
    switch (s.Kinds()[0]) {
      case kernels::ShardKind::kVocab: each = absl::StrCat(v, " vocab columns"); break;
      case kernels::ShardKind::kBatch:
        each = absl::StrCat(b, b == 1 ? " sequence" : " sequences");
        break;
      case kernels::ShardKind::kSeq:
        each = absl::StrCat(t, t == 1 ? " position" : " positions");
        break;
      case kernels::ShardKind::kNone: each = "everything"; break;
    }
    return absl::StrCat(s.KindsString(), "-sharded over ", devices, " (", each, " each)");
  }
  return absl::StrCat(s.KindsString(), "-sharded over mesh ", s.mesh.ShapeString(), " (",
                      devices, "; per device B ", b, ", T ", t, ", V ", v, ")");
}

absl::Status CheckShardFlagUsage(const FlagSet& flags, const ShardFlags& v,
                                 const KernelFlags& kernel, const ShardFlagOptions& options) {
  const std::string& p = options.prefix;
  for (const std::string& name : {p + "mesh", p + "shard", std::string("global-form")}) {
    if (flags.WasSet(name) && !flags.WasSet("kernel")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " only applies with --kernel=NAME"));
    }
  }
  if (flags.WasSet(p + "mesh") && !flags.WasSet(p + "shard")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", p, "mesh only applies with --", p,
        "shard=KIND[,KIND...] (it sets the devices the kernel is sharded over)"));
  }
  ASSIGN_OR_RETURN(kernels::ShardingSpec sharding, ShardingSpecFromFlags(v, p));
  if (v.global_form && !sharding.Sharded()) {
    return absl::InvalidArgumentError(
        "--global-form needs a sharding (--shard=batch, seq or vocab on some axis)");
  }
  if (!options.with_none && !sharding.Sharded()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", p, "shard must split something (batch, seq or vocab), got '", v.shard, "'"));
  }
  if (!flags.WasSet("kernel") || !sharding.Sharded()) return absl::OkStatus();
  absl::StatusOr<kernels::KernelSpec> spec = KernelSpecFromFlags(kernel);
  if (!spec.ok()) return absl::OkStatus();  // reported by CheckKernelFlagUsage
  if (absl::Status s = kernels::ValidateShardedKernel(*spec, sharding); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", p, "shard=", v.shard, " --", p,
                                                   "mesh=", v.mesh, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedModule(const KernelFlags& kernel,
                                                                    const ShardFlags& shard) {
  ASSIGN_OR_RETURN(kernels::KernelSpec spec, KernelSpecFromFlags(kernel));
  ASSIGN_OR_RETURN(kernels::ShardingSpec sharding, ShardingSpecFromFlags(shard));
  return kernels::BuildShardedKernel(spec, sharding);
}

}  // namespace tpuoff::tools
