#include "kernels/grpo_policy.h"

#include <functional>
#include <vector>

#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

using hlo::ComparisonDirection;
using hlo::HloOpcode;
using hlo::XlaBuilder;
using hlo::XlaOp;

namespace {

// Helpers over the [B,T] token arrays (B the local batch in batch-sharded
// bodies).
struct Rows {
  XlaBuilder* b;
  std::vector<int64_t> dims;
  // Σ_t over the row's tokens on other devices (sequence shards); null:
  // the rows are whole here.
  std::function<XlaOp(XlaBuilder*, XlaOp)> row_sum;

  XlaOp Fill(double v) const { return b->BroadcastInDim(F32(b, v), dims, {}); }
  XlaOp Keep(XlaOp pred, XlaOp x) const { return b->Select(pred, x, Fill(0)); }
  // Σ_t x_bt as [B]; PerRow broadcasts a [B] array back over T.
  XlaOp RowSum(XlaOp x) const {
    XlaOp local = b->Reduce(x, F32(b, 0), HloOpcode::kAdd, {1});
    return row_sum ? row_sum(b, local) : local;
  }
  XlaOp PerRow(XlaOp x) const { return b->BroadcastInDim(x, dims, {0}); }
  XlaOp Cmp(XlaOp x, double v, ComparisonDirection dir) const {
    return b->Compare(x, F32(b, v), dir);
  }
};

XlaOp Clip(XlaBuilder* b, XlaOp x, double lo, double hi) {
  return hlo::Min(hlo::Max(x, F32(b, lo)), F32(b, hi));
}

XlaOp And(XlaBuilder* b, XlaOp x, XlaOp y) {
  if (!x.valid()) return y;
  if (!y.valid()) return x;
  return b->Binary(HloOpcode::kAnd, x, y);
}

// The surrogate of one policy loss before the IS weight: its value, its
// token-local derivative d sur_bt / d logp_bt, and for gspo the derivative
// with respect to the row's log-ratio, which the caller spreads over the row.
struct Surrogate {
  XlaOp value;
  XlaOp dlocal;     // invalid for gspo
  XlaOp drow_mean;  // gspo only: d sur_bt / d Δ̄_b
};

Surrogate EmitSurrogate(const Rows& rows, const GrpoConfig& c, XlaOp logp, XlaOp mask_on,
                        XlaOp mask, XlaOp dc, XlaOp live, XlaOp adv) {
  XlaBuilder* b = rows.b;
  // r = exp(Δ) with Δ the clamped log-ratio; on-policy Δ = 0 exactly.
  auto ratio = [&]() { return dc.valid() ? hlo::Exp(dc) : rows.Fill(1); };
  auto clipped = [&](XlaOp r) { return Clip(b, r, 1 - c.eps_low, 1 + c.eps_high); };
  auto gated = [&](XlaOp pred, XlaOp x) { return rows.Keep(And(b, pred, live), x); };
  Surrogate s;
  switch (c.policy_loss) {
    case PolicyLoss::kPpoClip: {
      XlaOp r = ratio();
      XlaOp r_d = c.delta.has_value() ? hlo::Min(r, F32(b, *c.delta)) : r;
      XlaOp unclipped = hlo::Mul(r_d, adv);
      XlaOp clip_term = hlo::Mul(clipped(r), adv);
      s.value = hlo::Neg(hlo::Min(unclipped, clip_term));
      // The unclipped branch is active when A·r_clip >= A·r_d (ties to it)
      // and, with delta, when r <= delta.
      XlaOp active = b->Compare(clip_term, unclipped, ComparisonDirection::kGe);
      if (c.delta.has_value()) {
        active = And(b, active, b->Compare(r, F32(b, *c.delta), ComparisonDirection::kLe));
      }
      s.dlocal = gated(active, hlo::Neg(hlo::Mul(adv, r)));
      return s;
    }
    case PolicyLoss::kGspo:
    case PolicyLoss::kGspoToken: {
      // s_b = exp(Σ_t m·Δ / max(Σ_t m, 1)), the same for every token of row b.
      XlaOp seq_ratio = rows.Fill(1);
      if (dc.valid()) {
        XlaOp count = hlo::Max(rows.RowSum(mask), F32(b, 1));
        XlaOp mean = hlo::Div(rows.RowSum(rows.Keep(mask_on, hlo::Mul(mask, dc))), count);
        seq_ratio = rows.PerRow(hlo::Exp(mean));
      }
      XlaOp unclipped = hlo::Mul(seq_ratio, adv);
      XlaOp clip_term = hlo::Mul(clipped(seq_ratio), adv);
      s.value = hlo::Neg(hlo::Min(unclipped, clip_term));
      XlaOp u = rows.Keep(b->Compare(clip_term, unclipped, ComparisonDirection::kGe),
                          hlo::Neg(hlo::Mul(adv, seq_ratio)));
      if (c.policy_loss == PolicyLoss::kGspoToken) {
        // log s_bt = sg(Δ̄_b) + logp_bt − sg(logp_bt): only the token's own
        // logp, and a clamped token gets nothing.
        s.dlocal = live.valid() ? rows.Keep(live, u) : u;
      } else {
        s.drow_mean = u;
      }
      return s;
    }
    case PolicyLoss::kCispo: {
      // −sg(clip(r))·A·logp: the clipped ratio is a constant weight.
      XlaOp weight = hlo::Mul(clipped(ratio()), adv);
      s.value = hlo::Neg(hlo::Mul(weight, logp));
      s.dlocal = hlo::Neg(weight);
      return s;
    }
    case PolicyLoss::kSapo: {
      // −(4/τs)·σ(τs·(r − 1))·A, τs by the sign of A.
      XlaOp r = ratio();
      XlaOp tau = b->Select(rows.Cmp(adv, 0, ComparisonDirection::kGt),
                            rows.Fill(c.sapo_tau_pos), rows.Fill(c.sapo_tau_neg));
      XlaOp sig = b->Unary(HloOpcode::kLogistic, hlo::Mul(tau, hlo::Sub(r, F32(b, 1))));
      XlaOp four_a = hlo::Mul(F32(b, 4), adv);
      s.value = hlo::Neg(hlo::Div(hlo::Mul(four_a, sig), tau));
      // d/dlogp = −4·σ(u)·(1 − σ(u))·r·A (the τs of u cancels the 1/τs).
      XlaOp slope = hlo::Mul(sig, hlo::Sub(F32(b, 1), sig));
      s.dlocal = hlo::Neg(hlo::Mul(hlo::Mul(four_a, slope), r));
      if (live.valid()) s.dlocal = rows.Keep(live, s.dlocal);
      return s;
    }
  }
  return s;
}

// The rollout importance-sampling weight (no gradient): exp(old − sampler)
// per token, or exp(Σ_t m·(old − sampler)) per row; capped or zeroed above
// is_cap (a select, so an overflowing weight gives 0, never NaN).
XlaOp EmitIsWeight(const Rows& rows, const GrpoConfig& c, XlaOp old_value, XlaOp sampler,
                   XlaOp mask_on, XlaOp mask) {
  XlaBuilder* b = rows.b;
  XlaOp log_w = hlo::Sub(old_value, sampler);
  if (c.is_level == IsLevel::kSequence) {
    log_w = rows.PerRow(rows.RowSum(rows.Keep(mask_on, hlo::Mul(mask, log_w))));
  }
  XlaOp w = hlo::Exp(log_w);
  if (c.is_mode == IsMode::kTruncate) return hlo::Min(w, F32(b, c.is_cap));
  return rows.Keep(rows.Cmp(w, c.is_cap, ComparisonDirection::kLe), w);
}

// The KL estimate k and dk/dlogp at d = ref − logp.
struct Kl {
  XlaOp value, dlogp;
};

Kl EmitKl(const Rows& rows, const GrpoConfig& c, XlaOp logp, XlaOp ref) {
  XlaBuilder* b = rows.b;
  XlaOp d = hlo::Sub(ref, logp);
  Kl k;
  switch (c.kl_estimator) {
    case KlEstimator::kK3: {
      XlaOp e = hlo::Exp(d);
      k.value = hlo::Sub(hlo::Sub(e, d), F32(b, 1));
      k.dlogp = hlo::Sub(F32(b, 1), e);
      break;
    }
    case KlEstimator::kK1:
      k.value = hlo::Neg(d);
      k.dlogp = rows.Fill(1);
      break;
    case KlEstimator::kK2:
      k.value = hlo::Mul(F32(b, 0.5), hlo::Mul(d, d));
      k.dlogp = hlo::Neg(d);
      break;
    case KlEstimator::kLowVarKl: {
      // clip(e^{d'} − d' − 1, −10, 10) with d' = clip(d, −20, 20); no
      // gradient where either clip is active.
      constexpr double kD = 20, kK = 10;
      XlaOp dc = Clip(b, d, -kD, kD);
      XlaOp e = hlo::Exp(dc);
      XlaOp raw = hlo::Sub(hlo::Sub(e, dc), F32(b, 1));
      k.value = Clip(b, raw, -kK, kK);
      XlaOp live = And(b, rows.Cmp(b->Unary(HloOpcode::kAbs, d), kD, ComparisonDirection::kLt),
                       And(b, rows.Cmp(raw, kK, ComparisonDirection::kLt),
                           rows.Cmp(raw, -kK, ComparisonDirection::kGt)));
      k.dlogp = rows.Keep(live, hlo::Sub(F32(b, 1), e));
      break;
    }
  }
  return k;
}

}  // namespace

PolicyTerms EmitPolicyTerms(XlaBuilder* b, const GrpoConfig& c, const GrpoParams& p,
                            XlaOp logp, XlaOp entropy, XlaOp weights,
                            const AggregationHooks& hooks, PolicyTermsWanted wanted) {
  const Rows rows{b, logp.shape().dimensions(), hooks.row_sum};
  XlaOp mask = p.completion_mask;
  XlaOp mask_on = rows.Cmp(mask, 0, ComparisonDirection::kNe);
  XlaOp adv = AdvantagesBT(b, c, p);
  // Δ = logp − old, clamped before any exp; invalid on-policy (Δ = 0 in
  // value, dΔ/dlogp = 1, and nothing is ever clamped).
  XlaOp dc, live;
  if (p.old_logp.valid()) {
    XlaOp delta = hlo::Sub(logp, p.old_logp);
    dc = delta;
    if (c.log_ratio_clamp.has_value()) {
      const double cap = *c.log_ratio_clamp;
      dc = Clip(b, delta, -cap, cap);
      live = rows.Cmp(b->Unary(HloOpcode::kAbs, delta), cap, ComparisonDirection::kLt);
    }
  }
  const Surrogate sur = EmitSurrogate(rows, c, logp, mask_on, mask, dc, live, adv);
  XlaOp w;
  if (c.is_level != IsLevel::kNone) {
    w = EmitIsWeight(rows, c, p.old_logp.valid() ? p.old_logp : logp, p.sampler_logp, mask_on,
                     mask);
  }
  auto weighted = [&](XlaOp x) { return w.valid() ? hlo::Mul(w, x) : x; };
  Kl kl;
  if (c.beta != 0) kl = EmitKl(rows, c, logp, p.ref_logp);

  PolicyTerms t;
  if (wanted.loss) {
    t.per_token_loss = weighted(sur.value);
    if (c.beta != 0) {
      t.per_token_loss = hlo::Add(t.per_token_loss, hlo::Mul(F32(b, c.beta), kl.value));
    }
    if (c.entropy_coef != 0) {
      t.per_token_loss = hlo::Sub(t.per_token_loss, hlo::Mul(F32(b, c.entropy_coef), entropy));
    }
  }
  if (wanted.grad) {
    XlaOp coef;
    if (sur.drow_mean.valid()) {
      // gspo: token t' reaches every L_bt through Δ̄_b = Σ m·Δ / n_b, so
      // ∂loss/∂logp_bt' = (Σ_t g·w·∂L_bt/∂Δ̄_b) · m_bt' / n_b (0 if clamped).
      XlaOp row = rows.RowSum(hlo::Mul(weights, weighted(sur.drow_mean)));
      XlaOp count = hlo::Max(rows.RowSum(mask), F32(b, 1));
      coef = hlo::Mul(rows.PerRow(hlo::Div(row, count)), mask);
      if (live.valid()) coef = rows.Keep(live, coef);
    } else {
      coef = hlo::Mul(weights, weighted(sur.dlocal));
    }
    if (c.beta != 0) {
      coef = hlo::Add(coef, hlo::Mul(weights, hlo::Mul(F32(b, c.beta), kl.dlogp)));
    }
    // Exactly 0 where the mask is (even if a term overflowed there).
    t.dloss_dlogp = rows.Keep(rows.Cmp(weights, 0, ComparisonDirection::kNe), coef);
    if (c.entropy_coef != 0) {
      t.dloss_dentropy = hlo::Mul(F32(b, -c.entropy_coef), weights);
    }
  }
  return t;
}

GradCoefficients EmitGradCoefficients(XlaBuilder* b, const GrpoConfig& c,
                                      const PolicyTerms& t) {
  GradCoefficients g;
  auto over_tau = [&](XlaOp x) {
    return c.temperature == 1.0 ? x : hlo::Div(x, F32(b, c.temperature));
  };
  g.logp = over_tau(t.dloss_dlogp);
  if (t.dloss_dentropy.valid()) g.entropy = over_tau(hlo::Neg(t.dloss_dentropy));
  return g;
}

}  // namespace tpuoff::kernels
