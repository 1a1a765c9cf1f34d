// Streaming softmax statistics over vocab tiles: the per-tile forward
// statistics, their associative merge (also the cross-device merge of vocab
// shards), and the per-tile gradient. Every function takes a tile of logits
// as an XlaOp, so the fused LM-head kernel can feed hidden@lm_head tiles.
//
// For a row (b,t) and a set S of vocab columns with x_v = z_v * scale:
//   max  = max_{v in S} x_v
//   sum  = Σ_S exp(x_v − max)
//   usum = Σ_S exp(x_v − max) · (x_v − max)      (centred: no cancellation)
// Then lse = max + log(sum) and entropy = log(sum) − usum/sum.
#ifndef TPUOFF_KERNELS_VOCAB_STATS_H_
#define TPUOFF_KERNELS_VOCAB_STATS_H_

#include <cstdint>
#include <functional>

#include "hlo/ir/builder.h"

namespace tpuoff::kernels {

// Statistics of one softmax "domain" (one scale of the logits), per row.
// All members are f32 with the row shape (e.g. [B,T]); usum is invalid when
// the entropy is not tracked in this domain.
struct SoftmaxStats {
  hlo::XlaOp max;
  hlo::XlaOp sum;
  hlo::XlaOp usum;
};

// What to accumulate. The lse domain is x = z * lse_scale; the entropy
// domain is z * entropy_scale, shared with the lse domain when the scales are
// equal (the usual case), tracked separately otherwise (post_lse with τ≠1).
struct StatsSpec {
  bool need_lse = true;
  double lse_scale = 1.0;
  bool need_entropy = true;
  double entropy_scale = 1.0;
  // Pick x_y (in the lse domain) for a per-row target column.
  bool need_chosen = true;

  bool shared_domain() const {
    return need_lse && need_entropy && lse_scale == entropy_scale;
  }
};

// Everything accumulated over a vocab range. `entropy` aliases `lse` when
// the domains are shared. `chosen` is Σ over the range of x_v·1[v = y]: the
// chosen logit when y is in the range, 0 otherwise, so ranges just add.
struct VocabStats {
  SoftmaxStats lse;
  SoftmaxStats entropy;
  hlo::XlaOp chosen;
};

// The neutral element: max = −inf, sums 0, over rows of `row_dims`.
VocabStats EmptyVocabStats(hlo::XlaBuilder* b, const StatsSpec& spec,
                           absl::Span<const int64_t> row_dims);

// Statistics of one tile. `z_tile` is [rows..., W] in any float type
// (converted to f32 here); `target` is s32 [rows...]: the chosen id minus
// the id of the tile's first column (out of [0,W) means "not in this tile");
// ignored unless spec.need_chosen.
VocabStats EmitTileStats(hlo::XlaBuilder* b, hlo::XlaOp z_tile, hlo::XlaOp target,
                         const StatsSpec& spec);
// EmitTileStats over the tile's first `valid` columns only (s32 scalar; <= 0
// means none, >= W all). The other columns are ignored whatever they hold:
// the padding of an uneven vocab shard.
VocabStats EmitMaskedTileStats(hlo::XlaBuilder* b, hlo::XlaOp z_tile, hlo::XlaOp target,
                               hlo::XlaOp valid, const StatsSpec& spec);

// The statistics re-expressed relative to `new_max` (>= stats.max): sum and
// usum scaled by exp(max − new_max), usum shifted by (max − new_max)·sum.
// Cross-device merge of vocab shards = all-reduce max of `max`, then
// RescaleStats to it, then all-reduce sum of sum/usum (and of chosen).
SoftmaxStats RescaleStats(hlo::XlaBuilder* b, const SoftmaxStats& stats, hlo::XlaOp new_max);

// Associative merge of two partial states (GRPO_SPEC.md step 2).
SoftmaxStats MergeSoftmaxStats(hlo::XlaBuilder* b, const SoftmaxStats& x,
                               const SoftmaxStats& y);
VocabStats MergeVocabStats(hlo::XlaBuilder* b, const VocabStats& x, const VocabStats& y,
                           const StatsSpec& spec);

// Flattening to a list of XlaOps (loop state, collectives) and back, in a
// fixed order determined by the spec.
std::vector<hlo::XlaOp> FlattenVocabStats(const VocabStats& stats, const StatsSpec& spec);
VocabStats UnflattenVocabStats(absl::Span<const hlo::XlaOp> flat, const StatsSpec& spec);

// lse = max + log(sum); entropy = log(sum) − usum/sum.
hlo::XlaOp LseOf(hlo::XlaBuilder* b, const SoftmaxStats& stats);
hlo::XlaOp EntropyOf(hlo::XlaBuilder* b, const SoftmaxStats& stats);

// The entropy bonus's share of a tile's gradient (GRPO_SPEC.md v2 "Entropy
// with a gradient"): e·q_v·(log q_v + H) with log q_v = z_v·scale − lse. All
// f32 [rows...] like the tile's rows.
struct EntropyGradRows {
  hlo::XlaOp coef;     // e = κ·g/τ
  hlo::XlaOp entropy;  // H
  // lse of the entropy domain z·scale; invalid: the same domain as the
  // policy gradient's softmax (its `scale` and `lse`), so q = p.
  hlo::XlaOp lse;
  double scale = 1.0;
};

// Gradient of one tile: c·(1[v = y] − exp(z·scale − lse)) as f32 [rows..., W],
// with `lse` and `c` f32 [rows...] and `target` as for EmitTileStats, plus
// the entropy term when `entropy` is given. Rows with c == 0 (and e == 0)
// come out exactly 0 (up to the sign of zero).
hlo::XlaOp EmitTileGrad(hlo::XlaBuilder* b, hlo::XlaOp z_tile, double scale,
                        hlo::XlaOp lse, hlo::XlaOp c, hlo::XlaOp target,
                        const EntropyGradRows* entropy = nullptr);
// EmitTileGrad with exact zeros in the columns at or beyond `valid` (s32).
hlo::XlaOp EmitMaskedTileGrad(hlo::XlaBuilder* b, hlo::XlaOp z_tile, double scale,
                              hlo::XlaOp lse, hlo::XlaOp c, hlo::XlaOp target,
                              hlo::XlaOp valid, const EntropyGradRows* entropy = nullptr);

// Small helpers shared by the emitters.
// `x` (rank r) broadcast along a new minor dimension of size `width`.
hlo::XlaOp BroadcastMinor(hlo::XlaBuilder* b, hlo::XlaOp x, int64_t width);
hlo::XlaOp F32(hlo::XlaBuilder* b, double v);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_VOCAB_STATS_H_
