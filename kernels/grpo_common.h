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
  hlo::XlaOp logits;               // [B,T,V] logits type
  hlo::XlaOp chosen_ids;           // s32 [B,T]
  hlo::XlaOp completion_mask;      // f32 [B,T]
  hlo::XlaOp advantages;           // f32 [B] or [B,T] (advantage_shape token)
  hlo::XlaOp old_logp;             // f32 [B,T], off-policy only
  hlo::XlaOp ref_logp;             // f32 [B,T], beta != 0 only
  hlo::XlaOp sampler_logp;         // f32 [B,T], is_level != none only
  hlo::XlaOp total_valid_tokens;   // f32 [], token_count_input only
  hlo::XlaOp total_nonempty_rows;  // f32 [], row_count_input only
  hlo::XlaOp lse;                  // f32 [B,T], kBwd only
  hlo::XlaOp logp;                 // f32 [B,T], kBwd only
  hlo::XlaOp entropy;              // f32 [B,T], kBwd with entropy_coef != 0 only
};

// Declares the parameters in the order of GrpoParameterNames(). Must run
// before anything else is named in the module, so that the parameter
// instructions get exactly these names.
GrpoParams EmitGrpoParameters(hlo::XlaBuilder* b, const GrpoConfig& config,
                              KernelMode mode);
// The parameters after the logits (chosen_ids onwards), numbered from
// `first`: shared with the fused LM-head kernel, whose logits are two
// parameters.
void EmitPerTokenParameters(hlo::XlaBuilder* b, const GrpoConfig& config, KernelMode mode,
                            int64_t first, GrpoParams* params);
// The members of GrpoParams found among `names` (a module's parameter names,
// `args` its parameters in the same order); the others stay invalid.
GrpoParams GrpoParamsByName(const std::vector<std::string>& names,
                            absl::Span<const hlo::XlaOp> args);
// The advantages as f32 [B,T]: broadcast over T for advantage_shape sequence.
hlo::XlaOp AdvantagesBT(hlo::XlaBuilder* b, const GrpoConfig& config, const GrpoParams& params);

// chosen_ids outside [0, vocab): every kernel form (reference, tiled, fused
// LM-head; unsharded, batch- or vocab-sharded) treats them alike. Such an id
// picks no vocab entry: the token's chosen logit counts as 0, so its logp
// is -lse (÷τ with temperature_mode=post_lse), and its gradient has no
// one-hot term (dlogits = coef·(0 − softmax)). Entropy and lse are
// unaffected. Emitted as: ids outside the range become -1, which no vocab
// column, tile or shard offset ever matches; the reference's gather (which
// would clamp) is overridden for them. `vocab` is the global vocabulary.
hlo::XlaOp SanitizeChosenIds(hlo::XlaBuilder* b, hlo::XlaOp ids, int64_t vocab);

// The module outputs; dlogits only for kBwd/kFwdBwd, the rest not for kBwd.
struct GrpoOutputs {
  hlo::XlaOp loss;            // f32 []
  hlo::XlaOp per_token_loss;  // f32 [B,T]
  hlo::XlaOp logp;            // f32 [B,T]
  hlo::XlaOp entropy;         // f32 [B,T]
  hlo::XlaOp lse;             // f32 [B,T]
  hlo::XlaOp dlogits;         // [B,T,V] logits type
};

// Hooks through which sharded variants make batch-wide quantities global.
struct AggregationHooks {
  // Sums a scalar over every token of the global batch, i.e. across the
  // batch and sequence shards (Σ mask, the loss). Null: identity.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> batch_sum;
  // Sums a per-row f32 [B] quantity over the row's tokens held by other
  // devices, i.e. across sequence shards (Σ_t mask of sequence_mean).
  // Null: identity.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> row_sum;
  // Sums a scalar over the rows held by other devices, i.e. across the batch
  // shards only (every sequence shard of a row holds the whole row's count:
  // the non-empty rows of empty_rows skip). Null: identity.
  std::function<hlo::XlaOp(hlo::XlaBuilder*, hlo::XlaOp)> rows_sum;
  // The whole batch size B used by sequence_mean/constant; 0: config.batch.
  int64_t global_batch = 0;
};

// g = ∂loss/∂per_token_loss, f32 [B,T] (GRPO_SPEC.md step 7, and v2's
// empty_rows: skip divides by the non-empty rows of the whole batch, or by
// total_nonempty_rows). Zero where the mask is zero.
hlo::XlaOp EmitAggregationWeights(hlo::XlaBuilder* b, const GrpoConfig& config,
                                  const GrpoParams& params, const AggregationHooks& hooks);

// loss = Σ g·per_token_loss (then hooks.batch_sum).
hlo::XlaOp EmitLoss(hlo::XlaBuilder* b, hlo::XlaOp weights, hlo::XlaOp per_token_loss,
                    const AggregationHooks& hooks);

// The [B, rows] block of an f32/s32 [B,T] array starting at row t0 (the
// array itself when the block is all of it).
hlo::XlaOp RowBlock(hlo::XlaBuilder* b, hlo::XlaOp x, hlo::XlaOp t0, int64_t rows);

// Finishes the entry computation with the outputs of `mode` (a tuple, or the
// bare array when there is one output), names them (output_names frontend
// attribute) and returns the verified module.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishGrpoModule(hlo::XlaBuilder* b,
                                                                 KernelMode mode,
                                                                 const GrpoOutputs& out);

// Declares the entry output named `name` in the layout `minor_to_major`
// (the module's entry_computation_layout; values and shapes are unchanged,
// the other parameters and outputs keep their layouts). NOT_FOUND if no
// output has that name.
absl::Status SetEntryOutputLayout(hlo::HloModule& module, const std::string& name,
                                  std::vector<int64_t> minor_to_major);

// Same for any list of named outputs.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishModule(
    hlo::XlaBuilder* b, const std::vector<hlo::XlaOp>& outputs,
    const std::vector<std::string>& names);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_COMMON_H_
