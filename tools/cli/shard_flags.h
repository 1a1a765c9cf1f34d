// The sharding flags of dump/run/compare/memory: `--mesh=N|AxB[xC...]
// --shard=KIND[,KIND...] [--global-form]` on top of the kernel flags -> a
// (per-device) module. One KIND per mesh axis, from none, batch, seq, vocab
// (a single KIND on a 1-D mesh; on an N-D mesh a single KIND applies to
// every axis).
#ifndef TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_
#define TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_sharded.h"
#include "tools/cli/flags.h"
#include "tools/cli/kernel_flags.h"

namespace tpuoff::tools {

struct ShardFlags {
  std::string mesh = "8";      // "N" or "AxB": devices per mesh axis (v6e-8: 8 or 2x4)
  std::string shard = "none";  // one of none|batch|seq|vocab per mesh axis, comma-separated
  bool global_form = false;    // JAX's global form instead of per-device
};

struct ShardFlagOptions {
  bool with_none = true;         // --shard accepts "none" alone (compare: no)
  bool with_global_form = true;  // register --global-form
  std::string prefix;            // flag names "<prefix>mesh", "<prefix>shard"
};

// Adds --mesh, --shard (and --global-form) bound to `out`.
void RegisterShardFlags(FlagSet& flags, ShardFlags* out, const ShardFlagOptions& options = {});

// Usage checks: the flags need --kernel; --mesh parses with at most 4096
// devices; --shard has one valid kind per mesh axis (or one for all);
// --global-form needs some sharding; the kernel must shard that way (a tiled
// kernel for vocab). INVALID_ARGUMENT naming the flag.
absl::Status CheckShardFlagUsage(const FlagSet& flags, const ShardFlags& values,
                                 const KernelFlags& kernel, const ShardFlagOptions& options = {});

// The usage checks of a command that takes MODULE_FILE or --kernel (dump,
// run, memory, cost, compile): the kernel flags (resolving a --preset in
// place), the shard flags, and exactly one of the two sources given.
absl::Status CheckModuleOrKernelUsage(const FlagSet& flags, KernelFlags* kernel,
                                      const ShardFlags& shard,
                                      const ShardFlagOptions& options = {});

// `prefix` names the flags in messages ("against-").
absl::StatusOr<kernels::ShardingSpec> ShardingSpecFromFlags(const ShardFlags& flags,
                                                            absl::string_view prefix = "");

// Devices of --mesh (1 when it does not parse).
int64_t MeshDeviceCount(const ShardFlags& flags);

// "2x4 batch,vocab"-style description of the flags.
std::string DescribeSharding(const kernels::ShardingSpec& sharding);
// What each device holds of a [B,T,V] problem: "vocab-sharded over 8 devices
// (5 vocab columns each)", "batch,vocab-sharded over mesh 2x4 (8 devices;
// per device B 1, T 4096, V 18992)".
std::string DescribeShardBlocks(const kernels::ShardingSpec& sharding, int64_t batch,
                                int64_t seq, int64_t vocab);

// The kernel module the kernel and shard flags describe (unsharded for
// --shard=none). INVALID_ARGUMENT for unusable combinations.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedModule(const KernelFlags& kernel,
                                                                    const ShardFlags& shard);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_SHARD_FLAGS_H_
