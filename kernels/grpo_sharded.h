// The GRPO and entropy kernels sharded over a device mesh (1-D or N-D,
// hlo/spmd/mesh.h) with hlo::ShardMap: per-device SPMD programs whose
// communication is explicit. Each mesh axis shards one way: batch, seq,
// vocab or none (replicated); several axes may shard the same way (their
// product is that dimension's shard count, the first axis major).
//
// (The fused LM-head kernel's sharded forms: kernels/grpo_fused_linear_sharded.h,
// reached through BuildShardedKernel too.)
//
// Every split follows XLA's tiling of an uneven dimension: shards of
// ceil(S/n), the last ones padded (tpuoff's split zero-fills the padding).
// B, T and V need not divide their shard counts.
//
// Batch axes split every [B,...] array along B; seq axes split every
// [B,T,...] array along T (advantages [B] stay whole). A device's padding
// rows (global b >= B or t >= T) get mask 0 inside the body, so they weigh
// nothing. Per-token math is local. What spans tokens is summed over the
// axes holding other tokens: the token-mean count Σ mask and the loss over
// the batch and seq axes, each row's Σ_t mask (sequence_mean) over the seq
// axes; sequence_mean and constant divide by the global B (and constant by
// the global max_len). Per-token outputs and dlogits stay split.
//
// Vocab axes (tiled kernels): logits are split along V in shards of
// W = ceil(V/n) columns (151936 / 8 = 18992 exactly; 37 / 8 gives 7 shards of
// 5 and a last one of 2 real columns + 3 padding). Device d owns global
// columns [i·W, i·W + W), i its index along the vocab axes, and finds, from
// partition-id, how many of them are real: clamp(V − i·W, 0, W). Its vocab
// tile loop (ragged inside the shard too: full tiles then a static tail)
// masks the padding columns out of the statistics and writes zero gradient
// there, so nothing is copied or padded on device. Each row's local (max,
// sum, Σe·u, chosen logit) are merged over the vocab axes with one
// all-reduce max and one all-reduce sum of the rescaled terms; the per-token
// outputs are then computed identically on every vocab shard (replicated
// over the vocab axes); the backward is local and dlogits stays split.
#ifndef TPUOFF_KERNELS_GRPO_SHARDED_H_
#define TPUOFF_KERNELS_GRPO_SHARDED_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"
#include "hlo/spmd/shard_map.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_common.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

enum class ShardKind { kNone, kBatch, kVocab, kSeq };
absl::string_view ShardKindName(ShardKind kind);  // "none", "batch", "vocab", "seq"
absl::StatusOr<ShardKind> ParseShardKind(absl::string_view name);

struct ShardingSpec {
  // 1-D shorthand: every mesh axis shards this way (when axis_kinds is empty).
  ShardKind kind = ShardKind::kNone;
  hlo::Mesh mesh;  // default: 8 devices on one axis
  // How each mesh axis shards, one entry per axis (e.g. {kBatch, kVocab} on
  // a 2x4 mesh); empty: `kind` on every axis.
  std::vector<ShardKind> axis_kinds;
  bool global_form = false;  // JAX's global form instead of per-device

  // One kind per mesh axis.
  std::vector<ShardKind> Kinds() const;
  // Whether any axis of more than one device shards something.
  bool Sharded() const;
  // "batch", "seq,vocab", ...
  std::string KindsString() const;
};

// Which mesh axes shard which dimension, and the shard counts.
struct ShardLayout {
  hlo::AxisSet batch, seq, vocab;
  hlo::AxisSet tokens;  // batch and seq axes, in mesh order
  int64_t nb = 1, ns = 1, nv = 1;
};
// INVALID_ARGUMENT for a bad mesh or a kinds list not matching its axes.
absl::StatusOr<ShardLayout> LayoutOf(const ShardingSpec& sharding);

// The ShardMap spec of a global array (by parameter/output name and rank):
// logits [B,T,V], hidden [B,T,H], [B,T] and [B] arrays, lm_head [H,V],
// dlogits, d_hidden, d_lm_head; scalars replicated.
hlo::PartitionSpec ArraySpec(const ShardLayout& layout, const std::string& name, int64_t rank);

// mask, with 0 at this device's padding rows (global b >= B or t >= T) when
// the batch or seq split is uneven; unchanged otherwise.
hlo::XlaOp MaskShardPadding(hlo::ShardMapContext& ctx, const ShardLayout& layout,
                            const GrpoConfig& global, hlo::XlaOp mask);

// The per-shard config: B, T, V of one device's block; max_len kept global.
GrpoConfig LocalConfig(const GrpoConfig& global, const ShardLayout& layout);

// The hooks of a body on `layout`: Σ over the token (batch and seq) axes,
// Σ_t over the seq axes, the global B.
AggregationHooks ShardAggregationHooks(hlo::ShardMapContext& ctx, const ShardLayout& layout,
                                       const GrpoConfig& global);

// The ShardMap outputs of the unsharded module `global`'s outputs (ArraySpec
// of each, with the global sizes of the split dimensions).
std::vector<hlo::ShardMapOutput> ShardedOutputs(const hlo::HloModule& global,
                                                const ShardLayout& layout);

// "grpo_tiled_vocab_sharded" on a 1-D mesh, "grpo_tiled_2x4_batch_vocab_sharded"
// on a 2-D one (`suffix` before "_sharded").
std::string ShardedModuleName(const std::string& global_name, const ShardingSpec& sharding,
                              absl::string_view suffix);

// Cross-device merge of per-shard vocab statistics of rows: all-reduce max
// of the maxima, each shard's terms rescaled to it (RescaleStats), then one
// all-reduce sum of the sums, Σe·u and chosen logits. Emitted in the builder
// of `local`'s ops.
VocabStats MergeVocabShards(hlo::ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec);
// The same over the mesh axes `axes` only.
VocabStats MergeVocabShards(hlo::ShardMapContext& ctx, const VocabStats& local,
                            const StatsSpec& spec, const hlo::AxisSet& axes);

// Whether `spec` can be sharded as `sharding`: INVALID_ARGUMENT for a bad
// mesh or kinds list, or a non-tiled kernel on vocab axes; UNIMPLEMENTED for
// kernels without a sharded form.
absl::Status ValidateShardedKernel(const KernelSpec& spec, const ShardingSpec& sharding);

// Nothing sharded: BuildKernel(spec). Otherwise the per-device module (or
// its global form) of `spec` sharded over `sharding.mesh`. Errors as
// ValidateShardedKernel, and a bad config.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildShardedKernel(
    const KernelSpec& spec, const ShardingSpec& sharding);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_SHARDED_H_
