// Pieces shared by every GRPO kernel variant: the entry parameters, the
// per-token policy terms (clipped surrogate, KL, their derivative), the
// aggregation weights, and the named outputs (docs/GRPO_SPEC.md).
#ifndef TPUOFF_KERNELS_GRPO_COMMON_H_
#define TPUOFF_KERNELS_GRPO_COMMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_config.h"

namespace tpuoff::kernels {

// The entry parameters; members absent for the config/mode are invalid ops.
struct GrpoParams {
  hlo::XlaOp logits;              // [B,T,V] logits type
  hlo::XlaOp chosen_ids;          // s32 [B,T]
  hlo::XlaOp completion_mask;     // f32 [B,T]
  hlo::XlaOp advantages;          // f32 [B]
  hlo::XlaOp old_logp;            // f32 [B,T], off-policy only
  hlo::XlaOp ref_logp;            // f32 [B,T], beta != 0 only
  hlo::XlaOp total_valid_tokens;  // f32 [], token_count_input only
  hlo::XlaOp lse;                 // f32 [B,T], kBwd only
  hlo::XlaOp logp;                // f32 [B,T], kBwd only
};

// Declares the parameters in the order of GrpoParameterNames(). Must run
// before anything else is named in the module, so that the parameter
// instructions get exactly these names.
GrpoParams EmitGrpoParameters(hlo::XlaBuilder* b, const GrpoConfig& config,
                              KernelMode mode);

// The module outputs; dlogits only for kBwd/kFwdBwd, the rest not for kBwd.
struct GrpoOutputs {
  hlo::XlaOp loss;            // f32 []
  hlo::XlaOp per_token_loss;  // f32 [B,T]
  hlo::XlaOp logp;            // f32 [B,T]
  hlo::XlaOp entropy;         // f32 [B,T]
  hlo::XlaOp lse;             // f32 [B,T]
  hlo::XlaOp dlogits;         // [B,T,V] logits type
};

// Per-token policy terms over rows of any shape R (all operands f32 [R]):
// `old_logp` invalid means on-policy (ratio 1), `ref_logp` is used iff
// beta != 0, `adv` is A already broadcast to R.
struct PolicyTerms {
  hlo::XlaOp per_token_loss;  // −min(r_d·A, r_clip·A) + beta·(e^d − d − 1)
  hlo::XlaOp dloss_dlogp;     // s of GRPO_SPEC.md "Backward"
};
struct PolicyTermsWanted {
  bool loss = true;
  bool grad = true;
};
PolicyTerms EmitPolicyTerms(hlo::XlaBuilder* b, const GrpoConfig& config, hlo::XlaOp logp,
                            hlo::XlaOp old_logp, hlo::XlaOp ref_logp, hlo::XlaOp adv,
                            PolicyTermsWanted wanted = {});

// Hooks through which sharded variants make batch-wide quantities global.
struct AggregationHooks {
  // Sums a scalar over every token of the global batch, i.e. across the
  // batch and sequence shards (Σ mask, the loss). Null: identity.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> batch_sum;
  // Sums a per-row f32 [B] quantity over the row's tokens held by other
  // devices, i.e. across sequence shards (Σ_t mask of sequence_mean).
  // Null: identity.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> row_sum;
  // The whole batch size B used by sequence_mean/constant; 0: config.batch.
  int64_t global_batch = 0;
};

// g = ∂loss/∂per_token_loss, f32 [B,T] (GRPO_SPEC.md step 7). Zero where
// the mask is zero.
hlo::XlaOp EmitAggregationWeights(hlo::XlaBuilder* b, const GrpoConfig& config,
                                  const GrpoParams& params, const AggregationHooks& hooks);

// loss = Σ g·per_token_loss (then hooks.batch_sum).
hlo::XlaOp EmitLoss(hlo::XlaBuilder* b, hlo::XlaOp weights, hlo::XlaOp per_token_loss,
                    const AggregationHooks& hooks);

// c = g·s/τ, exactly 0 where g == 0 (masked rows get exactly zero gradient
// even if s overflowed).
hlo::XlaOp EmitGradCoefficient(hlo::XlaBuilder* b, const GrpoConfig& config,
                               hlo::XlaOp weights, hlo::XlaOp dloss_dlogp);

// The [B, rows] block of an f32/s32 [B,T] array starting at row t0 (the
// array itself when the block is all of it).
hlo::XlaOp RowBlock(hlo::XlaBuilder* b, hlo::XlaOp x, hlo::XlaOp t0, int64_t rows);

// Finishes the entry computation with the outputs of `mode` (a tuple, or the
// bare array when there is one output), names them (output_names frontend
// attribute) and returns the verified module.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishGrpoModule(hlo::XlaBuilder* b,
                                                                 KernelMode mode,
                                                                 const GrpoOutputs& out);

// Same for any list of named outputs.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishModule(
    hlo::XlaBuilder* b, const std::vector<hlo::XlaOp>& outputs,
    const std::vector<std::string>& names);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_COMMON_H_
