// The fused LM-head + GRPO kernel (grpo_fused_linear): the parameters
// `hidden` [B,T,H] and `lm_head` [H,V] replace `logits`, and the [B,T,V]
// logits and their gradient never exist (Liger's fused-linear GRPO, Apple's
// Cut Cross-Entropy, as portable HLO).
//
// Tokens are flattened to N = B*T rows and cut into token chunks of C rows
// (GrpoConfig::token_chunk, default N); the vocab into tiles of W columns
// (block_size). Every tile of logits is the f32 product
// hidden[chunk] · lm_head[:, tile] of shape [C, W]:
//   forward   chunk loop ⊃ vocab loop: streaming softmax statistics
//             (EmitTileStats), then the GRPO per-token terms on [B,T].
//   backward  vocab loop ⊃ chunk loop: the tile's logits are recomputed, its
//             dlogits formed from the saved lse (EmitTileGrad), then
//             d_lm_head[:, tile] = Σ_chunks hidden[chunk]ᵀ · dlogits (f32,
//             written once per tile) and d_hidden[chunk] += dlogits ·
//             lm_head[:, tile]ᵀ (an f32 [N,H] accumulator).
// The vocab-outer backward keeps the d_lm_head accumulation per tile, so the
// only f32 accumulator of full size is d_hidden's ([N,H] ≪ [N,V]).
// Every matmul has an f32 result; operands keep their stored types (the
// gradient matmuls multiply the f32 dlogits tile by bf16 hidden/lm_head
// as they are, so no widened copy of a chunk or tile is ever made; with
// GrpoConfig::dlogits_type bf16 the tile is rounded to bf16 first and both
// gradient matmuls are bf16 x bf16).
//
// Outputs: loss, per_token_loss, logp, entropy, lse (fwd), d_hidden in the
// hidden type and d_lm_head in the lm_head type (bwd), all seven (fwd_bwd).
#ifndef TPUOFF_KERNELS_GRPO_FUSED_LINEAR_H_
#define TPUOFF_KERNELS_GRPO_FUSED_LINEAR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_config.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

// Config checks beyond ValidateGrpoConfig: hidden (H) must be set (> 0).
absl::Status ValidateFusedLinearConfig(const GrpoConfig& config);

// Entry parameter names, in parameter-number order: hidden, lm_head,
// chosen_ids, completion_mask, advantages, [old_logp], [ref_logp],
// [total_valid_tokens], then for kBwd: lse, logp.
std::vector<std::string> FusedLinearParameterNames(const GrpoConfig& config,
                                                   KernelMode mode);
// kFwd: loss, per_token_loss, logp, entropy, lse; kBwd: d_hidden, d_lm_head;
// kFwdBwd: all seven.
std::vector<std::string> FusedLinearOutputNames(KernelMode mode);

// The entry parameters: `grpo.logits` is invalid, the rest as in GrpoParams.
struct FusedLinearParams {
  hlo::XlaOp hidden;   // [B,T,H] logits type
  hlo::XlaOp lm_head;  // [H,V] logits type (V: the local columns when sharded)
  GrpoParams grpo;
};
// Declares them in the order of FusedLinearParameterNames(); must run first
// (the parameter instructions get exactly these names).
FusedLinearParams EmitFusedLinearParameters(hlo::XlaBuilder* b, const GrpoConfig& config,
                                            KernelMode mode);

struct FusedLinearOutputs {
  hlo::XlaOp loss, per_token_loss, logp, entropy, lse;  // not for kBwd
  hlo::XlaOp d_hidden;                                  // [B,T,H], not for kFwd
  hlo::XlaOp d_lm_head;                                 // [H,V] (or a row shard)
};

// Cross-device hooks for the sharded variants; every null hook is the
// identity, which gives the single-device kernel.
struct FusedLinearOptions {
  // Full tile/chunk loops of at most this many iterations are unrolled.
  int64_t max_unrolled_blocks = 1;
  // Vocab sharding (lm_head split by columns): s32 scalar, the global vocab
  // id of the local lm_head's column 0; invalid: 0.
  hlo::XlaOp vocab_offset;
  // Vocab sharding with an uneven split: s32 scalar, the number of real
  // local lm_head columns; the rest are padding (any contents), kept out of
  // the statistics and given zero gradient. Invalid: all are real.
  hlo::XlaOp vocab_valid_width;
  // Vocab sharding: combines a token chunk's local statistics across the
  // vocab shards before they are finalised (see TiledOptions).
  std::function<VocabStats(hlo::XlaBuilder*, const VocabStats&, const StatsSpec&)>
      merge_vocab_stats;
  // Vocab sharding: sums the f32 [N,H] partial d_hidden (this shard's
  // columns' contribution) across the vocab shards, e.g. an all-reduce.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> reduce_d_hidden;
  // Batch sharding: sums one f32 [H,W] tile of d_lm_head across the batch
  // shards inside the vocab loop (all-reduce), or reduce-scatters it along
  // dim 0 to [H / d_lm_head_row_shards, W] (each device then keeps a row
  // shard of d_lm_head, ZeRO style).
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> reduce_d_lm_head_tile;
  // Rows of d_lm_head are split this many ways by reduce_d_lm_head_tile (1:
  // the output is all of [H,V]); must divide H.
  int64_t d_lm_head_row_shards = 1;
  // Global batch sums (Σ mask, loss) for batch sharding.
  AggregationHooks aggregation;
};

// The whole fused computation on already declared parameters. Errors go to
// `b` (and its Build()).
FusedLinearOutputs EmitGrpoFusedLinear(hlo::XlaBuilder* b, const GrpoConfig& config,
                                       KernelMode mode, const FusedLinearParams& params,
                                       const FusedLinearOptions& options = {});

// Declares d_lm_head [H,V] in layout {0,1} (vocab-major: physically [V,H],
// the layout of a torch Linear weight). Its vocab tiles are written by a
// dynamic-update-slice inside the vocab loop; XLA:TPU produces each tile's
// hᵀ·dlogits product vocab-major and keeps the accumulator in that layout,
// so with a row-major d_lm_head it copies the whole [H,V] array once more
// at the end (two [H,V] buffers live). Values are unchanged; the emulator
// keeps arrays row-major whatever the declared layout.
absl::Status SetDLmHeadLayout(hlo::HloModule& module);

// Finishes the entry computation with the named outputs of `mode` (d_lm_head
// in SetDLmHeadLayout's layout).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishFusedLinearModule(
    hlo::XlaBuilder* b, KernelMode mode, const FusedLinearOutputs& out);

// The complete single-device module (validated config, named parameters and
// outputs, verified).
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoFusedLinear(const GrpoConfig& config,
                                                                      KernelMode mode);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_FUSED_LINEAR_H_
