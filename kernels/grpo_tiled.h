// The vocab-tiled GRPO and entropy kernels: logits are read tile by tile
// ([B, rows, block_size] dynamic slices, plus one static-width tail tile), the
// forward keeps running softmax statistics per token, and the backward
// recomputes p per tile from the saved lse and writes dlogits tile by tile.
// No [B,T,V] intermediate exists other than logits and dlogits.
//
// The pieces are public so the sharded and fused kernels can reuse them:
// EmitVocabRangeStats/EmitVocabRangeGrad are the per-shard bodies over a
// local vocab range, TiledOptions carries the cross-device hooks.
#ifndef TPUOFF_KERNELS_GRPO_TILED_H_
#define TPUOFF_KERNELS_GRPO_TILED_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_config.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

struct TileOptions {
  int64_t block_size = 2048;  // vocab tile width (clamped to the range)
  // Ranges of at most this many full tiles are emitted straight-line.
  int64_t max_unrolled_blocks = 1;
  // s32 scalar in the caller's builder: the range's columns at or beyond it
  // are padding (an uneven vocab shard), ignored by the statistics and given
  // zero gradient. Invalid: every column is real.
  hlo::XlaOp valid_width;
};

// Forward statistics of rows [t0, t0 + rows) of `logits` ([B, T, Vr], the
// local vocab range; t0 an s32 scalar) streamed over vocab tiles. `target`
// is s32 [B, rows]: chosen id minus the global id of local column 0, so ids
// outside the range pick nothing (only used when spec.need_chosen).
VocabStats EmitVocabRangeStats(hlo::XlaBuilder* b, hlo::XlaOp logits, hlo::XlaOp t0,
                               int64_t rows, hlo::XlaOp target, const StatsSpec& spec,
                               const TileOptions& tiles);

// Backward over the same range: writes c·(1[v = y] − exp(z·scale − lse)) for
// rows [t0, t0 + rows) into `dlogits` ([B, T, Vr], the logits' shape, any
// float type) tile by tile and returns the updated array. lse, c: f32 [B, rows].
// With `entropy` (members [B, rows]) the entropy bonus's term is added
// (EmitTileGrad).
hlo::XlaOp EmitVocabRangeGrad(hlo::XlaBuilder* b, hlo::XlaOp logits, hlo::XlaOp t0,
                              int64_t rows, hlo::XlaOp target, hlo::XlaOp lse,
                              hlo::XlaOp c, double scale, hlo::XlaOp dlogits,
                              const TileOptions& tiles,
                              const EntropyGradRows* entropy = nullptr);

// The softmax domains a GRPO config needs: lse of x (z/τ or z), entropy of
// z/τ, and the chosen logit.
StatsSpec GrpoStatsSpec(const GrpoConfig& config);
StatsSpec EntropyStatsSpec(const GrpoConfig& config);

struct TiledOptions {
  int64_t max_unrolled_blocks = 1;
  // s32 scalar: global vocab id of the logits' column 0 (vocab sharding).
  // Invalid: 0.
  hlo::XlaOp vocab_offset;
  // s32 scalar: local columns at or beyond it are padding (the last shards
  // of a vocab split XLA pads to ceil(V/N)). Invalid: none.
  hlo::XlaOp vocab_valid_width;
  // Combines a row block's local vocab statistics across vocab shards before
  // they are finalised (all-reduce max, RescaleStats, all-reduce sum).
  // Emitted in the builder it is given (possibly a loop body). Null: identity.
  std::function<VocabStats(hlo::XlaBuilder*, const VocabStats&, const StatsSpec&)>
      merge_vocab_stats;
  AggregationHooks aggregation;
};

// The whole tiled GRPO computation on already declared parameters: the
// forward vocab stream (lse, logp, entropy per token; row block by row
// block), the policy terms on whole [B,T] rows (grpo_policy.h), then the
// vocab gradient pass. The entropy bonus's gradient needs nothing beyond the
// stream's lse and entropy (and its own lse(z/τ) in post_lse mode with τ != 1,
// also from the stream); only a backward-only module in that mode makes one
// extra statistics pass to get lse(z/τ).
GrpoOutputs EmitGrpoTiled(hlo::XlaBuilder* b, const GrpoConfig& config, KernelMode mode,
                          const GrpoParams& params, const TiledOptions& options = {});

// Per-token entropy f32 [B,T] of `logits`, tiled.
hlo::XlaOp EmitEntropyTiled(hlo::XlaBuilder* b, const GrpoConfig& config, hlo::XlaOp logits,
                            const TiledOptions& options = {});

// Complete modules (validated config, named parameters and outputs).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoTiled(const GrpoConfig& config,
                                                                KernelMode mode);
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildEntropyTiled(const GrpoConfig& config);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_TILED_H_
