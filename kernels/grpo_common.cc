#include "kernels/grpo_common.h"

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/vocab_stats.h"

namespace tpuoff::kernels {

using hlo::ComparisonDirection;
using hlo::HloOpcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaBuilder;
using hlo::XlaOp;

GrpoParams EmitGrpoParameters(XlaBuilder* b, const GrpoConfig& c, KernelMode mode) {
  const std::vector<int64_t> bt = {c.batch, c.seq};
  const Shape f32_bt(PrimitiveType::kF32, bt);
  GrpoParams p;
  int64_t n = 0;
  p.logits = b->Parameter(n++, Shape(c.logits_type, {c.batch, c.seq, c.vocab}), "logits");
  p.chosen_ids = b->Parameter(n++, Shape(PrimitiveType::kS32, bt), "chosen_ids");
  p.completion_mask = b->Parameter(n++, f32_bt, "completion_mask");
  p.advantages = b->Parameter(n++, Shape(PrimitiveType::kF32, {c.batch}), "advantages");
  if (!c.on_policy) p.old_logp = b->Parameter(n++, f32_bt, "old_logp");
  if (c.beta != 0) p.ref_logp = b->Parameter(n++, f32_bt, "ref_logp");
  if (c.token_count_input) {
    p.total_valid_tokens =
        b->Parameter(n++, Shape::Scalar(PrimitiveType::kF32), "total_valid_tokens");
  }
  if (mode == KernelMode::kBwd) {
    p.lse = b->Parameter(n++, f32_bt, "lse");
    p.logp = b->Parameter(n++, f32_bt, "logp");
  }
  return p;
}

PolicyTerms EmitPolicyTerms(XlaBuilder* b, const GrpoConfig& c, XlaOp logp, XlaOp old_logp,
                            XlaOp ref_logp, XlaOp adv, PolicyTermsWanted wanted) {
  const std::vector<int64_t>& rows = logp.shape().dimensions();
  // On-policy: old = stop_gradient(logp), so r == 1 exactly (value and
  // derivative dr/dlogp = r = 1).
  XlaOp r = old_logp.valid() ? hlo::Exp(hlo::Sub(logp, old_logp))
                             : b->BroadcastInDim(F32(b, 1), rows, {});
  XlaOp r_clip = hlo::Min(hlo::Max(r, F32(b, 1 - c.eps_low)), F32(b, 1 + c.eps_high));
  XlaOp r_d = c.delta.has_value() ? hlo::Min(r, F32(b, *c.delta)) : r;
  XlaOp unclipped = hlo::Mul(r_d, adv);
  XlaOp clipped = hlo::Mul(r_clip, adv);
  XlaOp kl_d;  // d = ref − logp
  if (c.beta != 0) kl_d = hlo::Sub(ref_logp, logp);

  PolicyTerms t;
  if (wanted.loss) {
    t.per_token_loss = hlo::Neg(hlo::Min(unclipped, clipped));
    if (c.beta != 0) {
      XlaOp kl = hlo::Sub(hlo::Sub(hlo::Exp(kl_d), kl_d), F32(b, 1));
      t.per_token_loss = hlo::Add(t.per_token_loss, hlo::Mul(F32(b, c.beta), kl));
    }
  }
  if (wanted.grad) {
    // The unclipped branch is active when A·r_clip >= A·r_d (ties to it) and,
    // with delta, when r <= delta.
    XlaOp active = b->Compare(clipped, unclipped, ComparisonDirection::kGe);
    if (c.delta.has_value()) {
      XlaOp below = b->Compare(r, F32(b, *c.delta), ComparisonDirection::kLe);
      active = b->Binary(HloOpcode::kAnd, active, below);
    }
    XlaOp s = b->Select(active, hlo::Neg(hlo::Mul(adv, r)), F32(b, 0));
    if (c.beta != 0) {
      s = hlo::Add(s, hlo::Mul(F32(b, c.beta), hlo::Sub(F32(b, 1), hlo::Exp(kl_d))));
    }
    t.dloss_dlogp = s;
  }
  return t;
}

XlaOp EmitAggregationWeights(XlaBuilder* b, const GrpoConfig& c, const GrpoParams& p,
                             const AggregationHooks& hooks) {
  const XlaOp m = p.completion_mask;
  const int64_t global_batch = hooks.global_batch > 0 ? hooks.global_batch : c.batch;
  switch (c.loss_type) {
    case LossType::kTokenMean: {
      XlaOp n;
      if (p.total_valid_tokens.valid()) {
        n = p.total_valid_tokens;  // already global
      } else {
        n = b->Reduce(m, F32(b, 0), HloOpcode::kAdd, {0, 1});
        if (hooks.batch_sum) n = hooks.batch_sum(b, n);
      }
      return hlo::Div(m, hlo::Max(n, F32(b, 1)));
    }
    case LossType::kSequenceMean: {
      XlaOp per_seq = b->Reduce(m, F32(b, 0), HloOpcode::kAdd, {1});
      if (hooks.row_sum) per_seq = hooks.row_sum(b, per_seq);
      XlaOp denom = hlo::Mul(hlo::Max(per_seq, F32(b, 1)), F32(b, global_batch));
      return hlo::Div(m, b->BroadcastInDim(denom, {c.batch, c.seq}, {0}));
    }
    case LossType::kConstant: {
      const int64_t max_len = c.max_len.value_or(c.seq);
      return hlo::Div(m, F32(b, static_cast<double>(global_batch) * max_len));
    }
  }
  return XlaOp();
}

XlaOp EmitLoss(XlaBuilder* b, XlaOp weights, XlaOp per_token_loss,
               const AggregationHooks& hooks) {
  XlaOp loss = b->Reduce(hlo::Mul(weights, per_token_loss), F32(b, 0), HloOpcode::kAdd, {0, 1});
  if (hooks.batch_sum) loss = hooks.batch_sum(b, loss);
  return loss;
}

XlaOp EmitGradCoefficient(XlaBuilder* b, const GrpoConfig& c, XlaOp weights,
                          XlaOp dloss_dlogp) {
  XlaOp coef = hlo::Mul(weights, dloss_dlogp);
  if (c.temperature != 1.0) coef = hlo::Div(coef, F32(b, c.temperature));
  XlaOp live = b->Compare(weights, F32(b, 0), ComparisonDirection::kNe);
  return b->Select(live, coef, F32(b, 0));
}

XlaOp RowBlock(XlaBuilder* b, XlaOp x, XlaOp t0, int64_t rows) {
  if (!x.valid() || x.shape().dimensions(1) == rows) return x;
  return b->DynamicSlice(x, {b->ConstantS32(0), t0}, {x.shape().dimensions(0), rows});
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishModule(
    XlaBuilder* b, const std::vector<XlaOp>& outputs, const std::vector<std::string>& names) {
  if (outputs.size() != names.size() || outputs.empty()) {
    return absl::InternalError(absl::StrCat(b->name(), ": ", outputs.size(),
                                            " outputs for ", names.size(), " names"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].valid()) {
      if (!b->first_error().ok()) return b->first_error();
      return absl::InternalError(
          absl::StrCat(b->name(), ": output ", names[i], " was not emitted"));
    }
    b->SetOpName(outputs[i], names[i]);
  }
  XlaOp root = outputs.size() == 1 ? outputs[0] : b->Tuple(outputs);
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module, b->Build(root));
  module->SetOutputNames(names);
  return module;
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> FinishGrpoModule(XlaBuilder* b,
                                                                 KernelMode mode,
                                                                 const GrpoOutputs& out) {
  std::vector<XlaOp> ops;
  if (mode != KernelMode::kBwd) {
    ops = {out.loss, out.per_token_loss, out.logp, out.entropy, out.lse};
  }
  if (mode != KernelMode::kFwd) ops.push_back(out.dlogits);
  return FinishModule(b, ops, GrpoOutputNames(mode));
}

}  // namespace tpuoff::kernels
