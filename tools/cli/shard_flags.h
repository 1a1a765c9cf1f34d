// The sharding flags of dump/run/compare: `--mesh=N --shard=none|batch|vocab
// [--global-form]` on top of the kernel flags -> a (per-device) module.
#ifndef TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_
#define TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_sharded.h"
#include "tools/cli/flags.h"
#include "tools/cli/kernel_flags.h"

namespace tpuoff::tools {

struct ShardFlags {
  int64_t mesh = 8;            // devices on the 1-D mesh (v6e-8)
  std::string shard = "none";  // none|batch|vocab
  bool global_form = false;    // JAX's global form instead of per-device
};

struct ShardFlagOptions {
  bool with_none = true;         // --shard accepts "none" (compare: no)
  bool with_global_form = true;  // register --global-form
};

// Adds --mesh, --shard (and --global-form) bound to `out`.
void RegisterShardFlags(FlagSet& flags, ShardFlags* out, const ShardFlagOptions& options = {});

// Usage checks: the flags need --kernel; --mesh in [1, 4096]; --global-form
// needs --shard=batch|vocab; the kernel must shard that way (B divisible by
// N, a tiled kernel for vocab). INVALID_ARGUMENT naming the flag.
absl::Status CheckShardFlagUsage(const FlagSet& flags, const ShardFlags& values,
                                 const KernelFlags& kernel);

absl::StatusOr<kernels::ShardingSpec> ShardingSpecFromFlags(const ShardFlags& flags);

// The kernel module the kernel and shard flags describe (unsharded for
// --shard=none). INVALID_ARGUMENT for unusable combinations (B % N != 0...).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedModule(const KernelFlags& kernel,
                                                                    const ShardFlags& shard);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_
