// The fused LM-head + GRPO kernel sharded over a 1-D mesh with
// hlo::ShardMap (see kernels/grpo_sharded.h for the conventions).
//
// Batch sharding: hidden and every per-token array are split along B (N
// must divide B), lm_head is replicated. Σ mask and the loss are
// all-reduced; each device's d_lm_head is a partial sum over its tokens,
// summed tile by tile inside the vocab loop in f32 before the store: by an
// all-reduce (d_lm_head replicated), or by a reduce-scatter along H (each
// device keeps H/N rows, ZeRO style; N must divide H). d_hidden and the
// per-token outputs stay split along B.
//
// Vocab sharding: lm_head is split by columns into shards of ceil(V/N) (the
// last ones padded, as XLA tiles an uneven dimension); hidden and the
// per-token arrays are replicated. Each token chunk's local statistics are
// merged across devices (MergeVocabShards) before they are finalised, so the
// per-token outputs are replicated; d_lm_head stays split by columns and
// each device's f32 partial d_hidden (its columns' contribution) is summed
// with one all-reduce at the end.
#ifndef TPUOFF_KERNELS_GRPO_FUSED_LINEAR_SHARDED_H_
#define TPUOFF_KERNELS_GRPO_FUSED_LINEAR_SHARDED_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hlo/ir/module.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_sharded.h"

namespace tpuoff::kernels {

struct FusedShardingOptions {
  // Batch sharding only: reduce-scatter d_lm_head along H instead of
  // all-reducing it (default: all-reduce, a replicated d_lm_head).
  bool reduce_scatter_d_lm_head = false;
};

// INVALID_ARGUMENT for a bad mesh or config, B not divisible by N (batch),
// or H not divisible by N (batch with reduce-scatter).
absl::Status ValidateFusedLinearSharding(const GrpoConfig& config,
                                         const ShardingSpec& sharding,
                                         const FusedShardingOptions& options = {});

// The per-device module (or JAX's global form) of grpo_fused_linear in
// `spec.mode` sharded as `sharding` (kNone: the single-device module).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoFusedLinearSharded(
    const KernelSpec& spec, const ShardingSpec& sharding,
    const FusedShardingOptions& options = {});

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_FUSED_LINEAR_SHARDED_H_
