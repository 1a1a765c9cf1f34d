#include "kernels/grpo_reference.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/grpo_policy.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

using hlo::ComparisonDirection;
using hlo::HloOpcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaBuilder;
using hlo::XlaOp;

namespace {

// jax.nn.log_softmax over the minor dimension, also returning the lse.
struct LogSoftmax {
  XlaOp log_probs;  // [B,T,V]
  XlaOp lse;        // [B,T]
};

LogSoftmax EmitLogSoftmax(XlaBuilder* b, XlaOp x) {
  const int64_t width = x.shape().dimensions(2);
  XlaOp m = b->Reduce(x, F32(b, -INFINITY), HloOpcode::kMaximum, {2});
  XlaOp shifted = hlo::Sub(x, BroadcastMinor(b, m, width));
  XlaOp log_sum = hlo::Log(b->Reduce(hlo::Exp(shifted), F32(b, 0), HloOpcode::kAdd, {2}));
  return {hlo::Sub(shifted, BroadcastMinor(b, log_sum, width)), hlo::Add(m, log_sum)};
}

// −Σ_v p_v·log p_v of a log-softmax (`probs` = exp(log_probs) if already
// computed).
XlaOp EmitEntropyOfLogProbs(XlaBuilder* b, XlaOp log_probs, XlaOp probs = XlaOp()) {
  if (!probs.valid()) probs = hlo::Exp(log_probs);
  XlaOp plogp = hlo::Mul(probs, log_probs);
  return hlo::Neg(b->Reduce(plogp, F32(b, 0), HloOpcode::kAdd, {2}));
}

// take_along_axis(x, ids[..., None], axis=-1)[..., 0] as a gather with full
// (b, t, id) index vectors.
XlaOp EmitTakeAlongVocab(XlaBuilder* b, XlaOp x, XlaOp ids) {
  const int64_t batch = x.shape().dimensions(0);
  const int64_t seq = x.shape().dimensions(1);
  const Shape idx_shape(PrimitiveType::kS32, {batch, seq, 1});
  XlaOp index = b->Concatenate(
      {b->Iota(idx_shape, 0), b->Iota(idx_shape, 1), b->Reshape(ids, {batch, seq, 1})}, 2);
  hlo::GatherDimensionNumbers dn;
  dn.collapsed_slice_dims = {0, 1, 2};
  dn.start_index_map = {0, 1, 2};
  dn.index_vector_dim = 2;
  return b->Gather(x, index, dn, {1, 1, 1});
}

XlaOp ToF32(XlaBuilder* b, XlaOp x) {
  return x.shape().element_type() == PrimitiveType::kF32 ? x
                                                         : b->Convert(x, PrimitiveType::kF32);
}

}  // namespace

GrpoOutputs EmitGrpoReference(XlaBuilder* b, const GrpoConfig& c, KernelMode mode,
                              const GrpoParams& p, const AggregationHooks& hooks) {
  const bool post_lse = c.temperature_mode == TemperatureMode::kPostLse;
  const bool own_entropy_domain = post_lse && c.temperature != 1.0;
  XlaOp z = ToF32(b, p.logits);
  XlaOp x = (post_lse || c.temperature == 1.0) ? z : hlo::Div(z, F32(b, c.temperature));
  XlaOp weights = EmitAggregationWeights(b, c, p, hooks);

  GrpoOutputs out;
  XlaOp log_probs;  // log softmax(x), [B,T,V]
  XlaOp probs;      // its exp, shared by the entropy and the gradient
  XlaOp log_q;      // log softmax(z/τ) when that is another domain
  XlaOp lse = p.lse, logp = p.logp, entropy = p.entropy;
  if (mode != KernelMode::kBwd) {
    LogSoftmax ls = EmitLogSoftmax(b, x);
    lse = ls.lse;
    log_probs = ls.log_probs;
    // A sanitised id of -1 (outside the vocabulary, SanitizeChosenIds) picks
    // nothing: its chosen logit counts as 0, logp = 0 - lse.
    XlaOp picked = b->Compare(p.chosen_ids, b->BroadcastInDim(b->ConstantS32(0), {c.batch, c.seq}, {}),
                              ComparisonDirection::kGe);
    logp = b->Select(picked, EmitTakeAlongVocab(b, ls.log_probs, p.chosen_ids), hlo::Neg(ls.lse));
    if (post_lse && c.temperature != 1.0) logp = hlo::Div(logp, F32(b, c.temperature));
    if (mode == KernelMode::kFwdBwd) probs = hlo::Exp(ls.log_probs);
    // The entropy is of softmax(z/τ): the same distribution unless post_lse.
    if (own_entropy_domain) {
      log_q = EmitLogSoftmax(b, hlo::Div(z, F32(b, c.temperature))).log_probs;
      entropy = EmitEntropyOfLogProbs(b, log_q);
    } else {
      entropy = EmitEntropyOfLogProbs(b, ls.log_probs, probs);
    }
  } else {
    log_probs = hlo::Sub(x, BroadcastMinor(b, lse, c.vocab));
    if (own_entropy_domain && c.entropy_coef != 0) {
      log_q = EmitLogSoftmax(b, hlo::Div(z, F32(b, c.temperature))).log_probs;
    }
  }
  PolicyTerms terms = EmitPolicyTerms(
      b, c, p, logp, entropy, weights, hooks,
      {.loss = mode != KernelMode::kBwd, .grad = mode != KernelMode::kFwd});
  if (mode != KernelMode::kBwd) {
    out.per_token_loss = terms.per_token_loss;
    out.logp = logp;
    out.entropy = entropy;
    out.lse = lse;
    out.loss = EmitLoss(b, weights, terms.per_token_loss, hooks);
  }
  if (mode != KernelMode::kFwd) {
    GradCoefficients coef = EmitGradCoefficients(b, c, terms);
    if (!probs.valid()) probs = hlo::Exp(log_probs);
    const Shape btv(PrimitiveType::kS32, {c.batch, c.seq, c.vocab});
    XlaOp onehot = b->Select(
        b->Compare(b->Iota(btv, 2), BroadcastMinor(b, p.chosen_ids, c.vocab),
                   ComparisonDirection::kEq),
        F32(b, 1), F32(b, 0));
    XlaOp grad = hlo::Mul(BroadcastMinor(b, coef.logp, c.vocab), hlo::Sub(onehot, probs));
    if (coef.entropy.valid()) {
      // + e·q_v·(log q_v + H), q = softmax(z/τ).
      XlaOp q = log_q.valid() ? hlo::Exp(log_q) : probs;
      if (!log_q.valid()) log_q = log_probs;
      XlaOp bonus = hlo::Mul(hlo::Mul(BroadcastMinor(b, coef.entropy, c.vocab), q),
                             hlo::Add(log_q, BroadcastMinor(b, entropy, c.vocab)));
      grad = hlo::Add(grad, bonus);
    }
    out.dlogits = c.logits_type == PrimitiveType::kF32 ? grad : b->Convert(grad, c.logits_type);
  }
  return out;
}

XlaOp EmitEntropyReference(XlaBuilder* b, const GrpoConfig& c, XlaOp logits) {
  XlaOp z = ToF32(b, logits);
  XlaOp x = c.temperature == 1.0 ? z : hlo::Div(z, F32(b, c.temperature));
  return EmitEntropyOfLogProbs(b, EmitLogSoftmax(b, x).log_probs);
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoReference(const GrpoConfig& config,
                                                                    KernelMode mode) {
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  XlaBuilder b(absl::StrCat("grpo_reference_", KernelModeName(mode)));
  GrpoParams params = EmitGrpoParameters(&b, config, mode);
  return FinishGrpoModule(&b, mode, EmitGrpoReference(&b, config, mode, params));
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildEntropyReference(
    const GrpoConfig& config) {
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  XlaBuilder b("entropy_reference");
  XlaOp logits =
      b.Parameter(0, Shape(config.logits_type, {config.batch, config.seq, config.vocab}),
                  "logits");
  return FinishModule(&b, {EmitEntropyReference(&b, config, logits)}, {"entropy"});
}

}  // namespace tpuoff::kernels
