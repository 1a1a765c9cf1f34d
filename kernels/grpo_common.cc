#include "kernels/grpo_common.h"

#include <algorithm>

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
  GrpoParams p;
  p.logits = b->Parameter(0, Shape(c.logits_type, {c.batch, c.seq, c.vocab}), "logits");
  EmitPerTokenParameters(b, c, mode, 1, &p);
  return p;
}

void EmitPerTokenParameters(XlaBuilder* b, const GrpoConfig& c, KernelMode mode, int64_t first,
                            GrpoParams* p) {
  const std::vector<int64_t> bt = {c.batch, c.seq};
  const Shape f32_bt(PrimitiveType::kF32, bt);
  const Shape scalar = Shape::Scalar(PrimitiveType::kF32);
  int64_t n = first;
  p->chosen_ids = b->Parameter(n++, Shape(PrimitiveType::kS32, bt), "chosen_ids");
  p->completion_mask = b->Parameter(n++, f32_bt, "completion_mask");
  p->advantages = b->Parameter(
      n++, c.advantage_shape == AdvantageShape::kToken ? f32_bt : Shape(PrimitiveType::kF32, {c.batch}),
      "advantages");
  if (!c.on_policy) p->old_logp = b->Parameter(n++, f32_bt, "old_logp");
  if (c.beta != 0) p->ref_logp = b->Parameter(n++, f32_bt, "ref_logp");
  if (c.is_level != IsLevel::kNone) p->sampler_logp = b->Parameter(n++, f32_bt, "sampler_logp");
  if (c.token_count_input) p->total_valid_tokens = b->Parameter(n++, scalar, "total_valid_tokens");
  if (c.row_count_input) p->total_nonempty_rows = b->Parameter(n++, scalar, "total_nonempty_rows");
  if (mode == KernelMode::kBwd) {
    p->lse = b->Parameter(n++, f32_bt, "lse");
    p->logp = b->Parameter(n++, f32_bt, "logp");
    if (c.entropy_coef != 0) p->entropy = b->Parameter(n++, f32_bt, "entropy");
  }
  p->chosen_ids = SanitizeChosenIds(b, p->chosen_ids, c.vocab);  // after every parameter
}

XlaOp SanitizeChosenIds(XlaBuilder* b, XlaOp ids, int64_t vocab) {
  const std::vector<int64_t>& dims = ids.shape().dimensions();
  auto splat = [&](int32_t v) { return b->BroadcastInDim(b->ConstantS32(v), dims, {}); };
  XlaOp low = b->Compare(ids, splat(0), ComparisonDirection::kGe);
  XlaOp high = b->Compare(ids, splat(static_cast<int32_t>(vocab)), ComparisonDirection::kLt);
  // in range = low && high, written as select(low, high, false).
  XlaOp in_range = b->Select(low, high, low);
  return b->Select(in_range, ids, splat(-1));
}

GrpoParams GrpoParamsByName(const std::vector<std::string>& names, absl::Span<const XlaOp> args) {
  GrpoParams p;
  const std::pair<const char*, XlaOp*> slots[] = {
      {"logits", &p.logits},
      {"chosen_ids", &p.chosen_ids},
      {"completion_mask", &p.completion_mask},
      {"advantages", &p.advantages},
      {"old_logp", &p.old_logp},
      {"ref_logp", &p.ref_logp},
      {"sampler_logp", &p.sampler_logp},
      {"total_valid_tokens", &p.total_valid_tokens},
      {"total_nonempty_rows", &p.total_nonempty_rows},
      {"lse", &p.lse},
      {"logp", &p.logp},
      {"entropy", &p.entropy}};
  for (size_t i = 0; i < names.size() && i < args.size(); ++i) {
    for (const auto& [name, slot] : slots) {
      if (names[i] == name) *slot = args[i];
    }
  }
  return p;
}

XlaOp AdvantagesBT(XlaBuilder* b, const GrpoConfig& c, const GrpoParams& p) {
  if (c.advantage_shape == AdvantageShape::kToken) return p.advantages;
  return b->BroadcastInDim(p.advantages, {c.batch, c.seq}, {0});
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
      XlaOp rows = F32(b, global_batch);
      if (c.empty_rows == EmptyRows::kSkip) {
        if (p.total_nonempty_rows.valid()) {
          rows = p.total_nonempty_rows;  // already global
        } else {
          XlaOp nonempty = b->Select(b->Compare(per_seq, F32(b, 0), ComparisonDirection::kGt),
                                     b->BroadcastInDim(F32(b, 1), {c.batch}, {}),
                                     b->BroadcastInDim(F32(b, 0), {c.batch}, {}));
          rows = b->Reduce(nonempty, F32(b, 0), HloOpcode::kAdd, {0});
          if (hooks.rows_sum) rows = hooks.rows_sum(b, rows);
        }
        rows = hlo::Max(rows, F32(b, 1));
      }
      XlaOp denom = hlo::Mul(hlo::Max(per_seq, F32(b, 1)), rows);
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
  // Masked tokens contribute nothing (GRPO_SPEC): a select, not only g = 0,
  // so that a masked token's non-finite per_token_loss (an overflowing ratio
  // at a padding position) cannot make the loss 0 * inf = NaN. The same
  // values otherwise (0 * finite is a zero either way).
  XlaOp weighted = b->Select(b->Compare(weights, F32(b, 0), ComparisonDirection::kNe),
                             hlo::Mul(weights, per_token_loss), F32(b, 0));
  XlaOp loss = b->Reduce(weighted, F32(b, 0), HloOpcode::kAdd, {0, 1});
  if (hooks.batch_sum) loss = hooks.batch_sum(b, loss);
  return loss;
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

absl::Status SetEntryOutputLayout(hlo::HloModule& module, const std::string& name,
                                  std::vector<int64_t> minor_to_major) {
  const hlo::HloComputation& entry = *module.entry();
  const std::vector<std::string> names = module.OutputNames();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) {
    return absl::NotFoundError(absl::StrCat(module.name(), ": no output named ", name));
  }
  std::vector<hlo::Shape> params = module.entry_parameter_layouts().has_value()
                                       ? *module.entry_parameter_layouts()
                                       : entry.ParameterShapes();
  hlo::Shape result = module.entry_parameter_layouts().has_value()
                          ? module.entry_result_layout()
                          : entry.root()->shape();
  hlo::Shape* leaf = result.IsTuple()
                         ? &(*result.mutable_tuple_shapes())[it - names.begin()]
                         : &result;
  if (leaf->rank() != static_cast<int64_t>(minor_to_major.size())) {
    return absl::InvalidArgumentError(absl::StrCat(module.name(), ": layout of rank ",
                                                   minor_to_major.size(), " for output ", name,
                                                   " ", leaf->ToString()));
  }
  leaf->set_minor_to_major(std::move(minor_to_major));
  module.set_entry_layout(std::move(params), std::move(result));
  return absl::OkStatus();
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
