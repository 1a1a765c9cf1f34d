// The fused LM-head + GRPO kernel sharded over a device mesh with
// hlo::ShardMap (see kernels/grpo_sharded.h for the conventions: each mesh
// axis shards the batch, the sequence or the vocab, or nothing).
//
// Batch and seq axes split hidden and every per-token array along B and T
// (ragged splits padded, padding rows masked); lm_head is replicated over
// them. Σ mask and the loss are summed over the token (batch and seq) axes,
// sequence_mean's per-row counts over the seq axes; each device's d_lm_head
// is a partial sum over its tokens, summed tile by tile inside the vocab
// loop in f32 before the store over the token axes: by an all-reduce
// (d_lm_head replicated over them), or by a reduce-scatter along H (each
// device keeps H/n rows, ZeRO style; n, the number of token shards, must
// divide H). d_hidden and the per-token outputs stay split.
//
// Vocab axes split lm_head by columns into shards of ceil(V/n) (the last
// ones padded, as XLA tiles an uneven dimension). Each token chunk's local
// statistics are merged over the vocab axes (MergeVocabShards) before they
// are finalised, so the per-token outputs are replicated over them;
// d_lm_head stays split by columns and each device's f32 partial d_hidden
// (its columns' contribution) is summed over the vocab axes with one
// all-reduce at the end.
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
  // Batch/seq axes: reduce-scatter d_lm_head along H over them instead of
  // all-reducing it (default: all-reduce, a replicated d_lm_head).
  bool reduce_scatter_d_lm_head = false;
};

// INVALID_ARGUMENT for a bad mesh, kinds list or config, or H not divisible
// by the token shards (reduce-scatter).
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
