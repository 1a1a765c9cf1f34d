// The per-token policy terms of every GRPO kernel (GRPO_SPEC.md step 5 and
// "Policy-loss variants (v2)"): the surrogate (ppo_clip, gspo, gspo_token,
// cispo, sapo) with the log-ratio clamp and the rollout importance-sampling
// weight, the KL estimators, the entropy bonus; their value per token and
// the loss's derivatives with respect to each token's logp and entropy.
//
// Everything works on whole [B,T] arrays: gspo's sequence ratio and the
// sequence-level IS weight are row reductions. The kernels compute logp,
// lse and entropy over the vocab first (one stream), these terms on [B,T]
// next, and the vocab gradient pass last.
#ifndef TPUOFF_KERNELS_GRPO_POLICY_H_
#define TPUOFF_KERNELS_GRPO_POLICY_H_

#include "hlo/ir/builder.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_config.h"

namespace tpuoff::kernels {

struct PolicyTermsWanted {
  bool loss = true;
  bool grad = true;
};

struct PolicyTerms {
  // Surrogate·w + beta·k − κ·entropy, f32 [B,T] (loss wanted). At masked
  // positions the formula's value (gspo: the row's; IS: the token's own w).
  hlo::XlaOp per_token_loss;
  // ∂loss/∂logp_bt with the aggregation weights included (gspo couples the
  // tokens of a row); exactly 0 where the weights are 0 (grad wanted).
  hlo::XlaOp dloss_dlogp;
  // ∂loss/∂entropy_bt = −κ·g (grad wanted and entropy_coef != 0).
  hlo::XlaOp dloss_dentropy;
};

// `logp` and `entropy` f32 [B,T] (entropy only read when entropy_coef != 0
// and the loss is wanted); the other inputs come from `params` (old_logp,
// ref_logp, sampler_logp, advantages, completion_mask); `weights` is
// EmitAggregationWeights' g.
PolicyTerms EmitPolicyTerms(hlo::XlaBuilder* b, const GrpoConfig& config,
                            const GrpoParams& params, hlo::XlaOp logp, hlo::XlaOp entropy,
                            hlo::XlaOp weights, const AggregationHooks& hooks,
                            PolicyTermsWanted wanted = {});

// The per-row coefficients of the vocab gradient
//   dz_v = c·(1[v = y] − p_v) + e·q_v·(log q_v + H)
// (p = softmax of the lse domain, q = softmax(z/τ), H the entropy):
// c = ∂loss/∂logp / τ and e = κ·g/τ (the 1/τ in both temperature modes).
struct GradCoefficients {
  hlo::XlaOp logp;     // c, f32 [B,T]
  hlo::XlaOp entropy;  // e, f32 [B,T]; invalid when entropy_coef == 0
};
GradCoefficients EmitGradCoefficients(hlo::XlaBuilder* b, const GrpoConfig& config,
                                      const PolicyTerms& terms);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_POLICY_H_
