// The GRPO and entropy kernels sharded over a 1-D mesh of devices with
// hlo::ShardMap: per-device SPMD programs whose communication is explicit.
//
// (The fused LM-head kernel's sharded forms: kernels/grpo_fused_linear_sharded.h,
// reached through BuildShardedKernel too.)
//
// Batch sharding: every [B,...] array is split
// along B, which N must divide. The token-mean normaliser Σ mask and the loss
// are all-reduced (sum); sequence_mean and constant divide by the global B.
// Per-token outputs and dlogits stay split along B, the loss is replicated.
//
// Vocab sharding (tiled kernels): logits are split along V in shards of
// W = ceil(V/N) columns, XLA's tiling of an uneven dimension (151936 / 8 =
// 18992 exactly; 37 / 8 gives 7 shards of 5 and a last one of 2 real
// columns + 3 padding). Device d owns global columns [d·W, d·W + W) and
// finds, from partition-id, how many of them are real: clamp(V − d·W, 0, W).
// Its vocab tile loop (ragged inside the shard too: full tiles then a static
// tail) masks the padding columns out of the statistics and writes zero
// gradient there, so nothing is copied or padded on device. Each row's local
// (max, sum, Σe·u, chosen logit) are merged with one all-reduce max and one
// all-reduce sum of the rescaled terms; the per-token outputs are then
// computed identically on every device (replicated); the backward is local
// and dlogits stays split along V.
#ifndef TPUOFF_KERNELS_GRPO_SHARDED_H_
#define TPUOFF_KERNELS_GRPO_SHARDED_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/shard_map.h"
#include "kernels/build_kernel.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

enum class ShardKind { kNone, kBatch, kVocab };
absl::string_view ShardKindName(ShardKind kind);  // "none", "batch", "vocab"
absl::StatusOr<ShardKind> ParseShardKind(absl::string_view name);

struct ShardingSpec {
  ShardKind kind = ShardKind::kNone;
  hlo::Mesh mesh;            // default: 8 devices
  bool global_form = false;  // JAX's global form instead of per-device
};

// Cross-device merge of per-shard vocab statistics of rows: all-reduce max
// of the maxima, each shard's terms rescaled to it (RescaleStats), then one
// all-reduce sum of the sums, Σe·u and chosen logits. Emitted in the builder
// of `local`'s ops.
VocabStats MergeVocabShards(hlo::ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec);

// Whether `spec` can be sharded as `sharding`: INVALID_ARGUMENT for a bad
// mesh, B not divisible by N (batch) or a non-tiled kernel (vocab);
// UNIMPLEMENTED for kernels without a sharded form.
absl::Status ValidateShardedKernel(const KernelSpec& spec, const ShardingSpec& sharding);

// kNone: BuildKernel(spec). Otherwise the per-device module (or its global
// form) of `spec` sharded over `sharding.mesh`. INVALID_ARGUMENT for B not
// divisible by N (batch), a non-tiled kernel (vocab), a bad mesh or config;
// UNIMPLEMENTED for kernels without a sharded form.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedKernel(
    const KernelSpec& spec, const ShardingSpec& sharding);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_SHARDED_H_
