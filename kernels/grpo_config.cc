#include "kernels/grpo_config.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::kernels {
namespace {

absl::Status Bad(absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("GrpoConfig: ", msg));
}

// One table per option enum: names in enumerator order, default first.
template <typename E, size_t N>
absl::string_view NameOf(E value, const char* const (&names)[N]) {
  const size_t i = static_cast<size_t>(value);
  return i < N ? names[i] : "?";
}

template <typename E, size_t N>
absl::StatusOr<E> ParseName(absl::string_view name, const char* what,
                            const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", name, "' (expected ",
                                                 absl::StrJoin(names, ", "), ")"));
}

constexpr const char* kPolicyLossNames[] = {"ppo_clip", "gspo", "gspo_token", "cispo", "sapo"};
constexpr const char* kKlEstimatorNames[] = {"k3", "k1", "k2", "low_var_kl"};
constexpr const char* kAdvantageShapeNames[] = {"sequence", "token"};
constexpr const char* kEmptyRowsNames[] = {"count", "skip"};
constexpr const char* kEmitTargetNames[] = {"tpu", "cpu"};
constexpr const char* kIsLevelNames[] = {"none", "token", "sequence"};
constexpr const char* kIsModeNames[] = {"truncate", "mask"};

}  // namespace

absl::string_view PolicyLossName(PolicyLoss v) { return NameOf(v, kPolicyLossNames); }
absl::StatusOr<PolicyLoss> ParsePolicyLoss(absl::string_view name) {
  return ParseName<PolicyLoss>(name, "policy loss", kPolicyLossNames);
}
absl::string_view KlEstimatorName(KlEstimator v) { return NameOf(v, kKlEstimatorNames); }
absl::StatusOr<KlEstimator> ParseKlEstimator(absl::string_view name) {
  return ParseName<KlEstimator>(name, "KL estimator", kKlEstimatorNames);
}
absl::string_view AdvantageShapeName(AdvantageShape v) {
  return NameOf(v, kAdvantageShapeNames);
}
absl::StatusOr<AdvantageShape> ParseAdvantageShape(absl::string_view name) {
  return ParseName<AdvantageShape>(name, "advantage shape", kAdvantageShapeNames);
}
absl::string_view EmptyRowsName(EmptyRows v) { return NameOf(v, kEmptyRowsNames); }
absl::StatusOr<EmptyRows> ParseEmptyRows(absl::string_view name) {
  return ParseName<EmptyRows>(name, "empty_rows mode", kEmptyRowsNames);
}
absl::StatusOr<EmitTarget> ParseEmitTarget(absl::string_view name) {
  return ParseName<EmitTarget>(name, "emit target", kEmitTargetNames);
}
absl::string_view IsLevelName(IsLevel v) { return NameOf(v, kIsLevelNames); }
absl::StatusOr<IsLevel> ParseIsLevel(absl::string_view name) {
  return ParseName<IsLevel>(name, "importance-sampling level", kIsLevelNames);
}
absl::string_view IsModeName(IsMode v) { return NameOf(v, kIsModeNames); }
absl::StatusOr<IsMode> ParseIsMode(absl::string_view name) {
  return ParseName<IsMode>(name, "importance-sampling mode", kIsModeNames);
}

absl::string_view TemperatureModeName(TemperatureMode mode) {
  return mode == TemperatureMode::kPostLse ? "post_lse" : "pre_softmax";
}

absl::StatusOr<TemperatureMode> ParseTemperatureMode(absl::string_view name) {
  if (name == "pre_softmax") return TemperatureMode::kPreSoftmax;
  if (name == "post_lse") return TemperatureMode::kPostLse;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown temperature mode '", name, "' (expected pre_softmax or post_lse)"));
}

absl::string_view LossTypeName(LossType type) {
  switch (type) {
    case LossType::kTokenMean: return "token_mean";
    case LossType::kSequenceMean: return "sequence_mean";
    case LossType::kConstant: return "constant";
  }
  return "?";
}

absl::StatusOr<LossType> ParseLossType(absl::string_view name) {
  if (name == "token_mean") return LossType::kTokenMean;
  if (name == "sequence_mean") return LossType::kSequenceMean;
  if (name == "constant") return LossType::kConstant;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loss type '", name, "' (expected token_mean, sequence_mean or constant)"));
}

absl::string_view KernelModeName(KernelMode mode) {
  switch (mode) {
    case KernelMode::kFwd: return "fwd";
    case KernelMode::kBwd: return "bwd";
    case KernelMode::kFwdBwd: return "fwd_bwd";
  }
  return "?";
}

absl::StatusOr<KernelMode> ParseKernelMode(absl::string_view name) {
  if (name == "fwd") return KernelMode::kFwd;
  if (name == "bwd") return KernelMode::kBwd;
  if (name == "fwd_bwd") return KernelMode::kFwdBwd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kernel mode '", name, "' (expected fwd, bwd or fwd_bwd)"));
}

namespace {

// A float parameter as the kernels use it: an f32 constant (also with bf16
// logits, whose math runs in f32). It must survive the conversion: finite,
// and a normal f32 unless it is exactly 0 (a value below f32's smallest
// normal number turns into 0 or a denormal, e.g. temperature=1e-300 would
// divide by 0 and make every output NaN).
absl::Status CheckF32Parameter(const char* name, double v) {
  if (!std::isfinite(v)) return Bad(absl::StrCat(name, " must be finite, got ", v));
  if (std::fabs(v) > std::numeric_limits<float>::max()) {
    return Bad(absl::StrCat(name, "=", v, " overflows f32, the type the kernels compute in "
                            "(largest ", std::numeric_limits<float>::max(), ")"));
  }
  if (v != 0 && std::fabs(v) < std::numeric_limits<float>::min()) {
    return Bad(absl::StrCat(name, "=", v, " is below the smallest normal f32 (",
                            std::numeric_limits<float>::min(),
                            "): the kernels compute in f32 and would see 0 or a denormal"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGrpoConfig(const GrpoConfig& c) {
  if (c.batch <= 0 || c.seq <= 0 || c.vocab <= 0) {
    return Bad(absl::StrCat("batch, seq and vocab must be > 0, got [", c.batch, ",", c.seq,
                            ",", c.vocab, "]"));
  }
  // chosen_ids and tile offsets are s32.
  constexpr int64_t kMaxS32 = std::numeric_limits<int32_t>::max();
  if (c.vocab > kMaxS32 || c.seq > kMaxS32 || c.batch > kMaxS32) {
    return Bad("batch, seq and vocab must fit in s32");
  }
  if (c.batch > std::numeric_limits<int64_t>::max() / c.seq / c.vocab) {
    return Bad("batch*seq*vocab overflows int64");
  }
  if (c.logits_type != hlo::PrimitiveType::kF32 &&
      c.logits_type != hlo::PrimitiveType::kBF16) {
    return Bad(absl::StrCat("logits type must be f32 or bf16, got ",
                            hlo::PrimitiveTypeName(c.logits_type)));
  }
  for (auto [name, value] :
       {std::pair{"eps_low", c.eps_low}, {"eps_high", c.eps_high},
        {"temperature", c.temperature}, {"beta", c.beta}, {"delta", c.delta.value_or(2.0)},
        {"log_ratio_clamp", c.log_ratio_clamp.value_or(20.0)}, {"entropy_coef", c.entropy_coef},
        {"sapo_tau_pos", c.sapo_tau_pos}, {"sapo_tau_neg", c.sapo_tau_neg}, {"is_cap", c.is_cap}}) {
    RETURN_IF_ERROR(CheckF32Parameter(name, value));
  }
  // The range checks below hold for the f32 values the kernels use too.
  if (static_cast<float>(c.eps_low) > 1.0f) {
    return Bad(absl::StrCat("eps_low must be in [0, 1], got ", c.eps_low));
  }
  if (c.delta.has_value() && static_cast<float>(*c.delta) <= 1.0f && *c.delta > 1) {
    return Bad(absl::StrCat("delta must be > 1 when set, got ", *c.delta, " (1 in f32)"));
  }
  // eps_low = 1 clips below at 0: TRL's upper-only cispo cap.
  if (!std::isfinite(c.eps_low) || c.eps_low < 0 || c.eps_low > 1) {
    return Bad(absl::StrCat("eps_low must be in [0, 1], got ", c.eps_low));
  }
  if (!std::isfinite(c.eps_high) || c.eps_high < 0) {
    return Bad(absl::StrCat("eps_high must be finite and >= 0, got ", c.eps_high));
  }
  if (!std::isfinite(c.temperature) || c.temperature <= 0) {
    return Bad(absl::StrCat("temperature must be finite and > 0, got ", c.temperature));
  }
  if (!std::isfinite(c.beta) || c.beta < 0) {
    return Bad(absl::StrCat("beta must be finite and >= 0, got ", c.beta));
  }
  if (c.delta.has_value() && (!std::isfinite(*c.delta) || *c.delta <= 1)) {
    return Bad(absl::StrCat("delta must be finite and > 1 when set, got ", *c.delta));
  }
  if (c.max_len.has_value() && *c.max_len <= 0) {
    return Bad(absl::StrCat("max_len must be > 0, got ", *c.max_len));
  }
  if (c.max_len.has_value() && c.loss_type != LossType::kConstant) {
    return Bad(absl::StrCat("max_len is only used by loss_type constant, not ",
                            LossTypeName(c.loss_type)));
  }
  if (c.token_count_input && c.loss_type != LossType::kTokenMean) {
    return Bad(absl::StrCat("a run-time token count (total_valid_tokens) needs loss_type "
                            "token_mean, not ",
                            LossTypeName(c.loss_type)));
  }
  if (c.delta.has_value() && c.policy_loss != PolicyLoss::kPpoClip) {
    return Bad(absl::StrCat("delta (the upper ratio clamp) applies to policy_loss ppo_clip only, "
                            "not ", PolicyLossName(c.policy_loss)));
  }
  if (c.log_ratio_clamp.has_value() &&
      (!std::isfinite(*c.log_ratio_clamp) || *c.log_ratio_clamp <= 0)) {
    return Bad(absl::StrCat("log_ratio_clamp must be finite and > 0 when set, got ",
                            *c.log_ratio_clamp));
  }
  if (!std::isfinite(c.entropy_coef)) {
    return Bad(absl::StrCat("entropy_coef must be finite, got ", c.entropy_coef));
  }
  for (auto [name, tau] : {std::pair{"sapo_tau_pos", c.sapo_tau_pos},
                           std::pair{"sapo_tau_neg", c.sapo_tau_neg}}) {
    if (!std::isfinite(tau) || tau <= 0) {
      return Bad(absl::StrCat(name, " must be finite and > 0, got ", tau));
    }
  }
  if (!std::isfinite(c.is_cap) || c.is_cap <= 0) {
    return Bad(absl::StrCat("is_cap must be finite and > 0, got ", c.is_cap));
  }
  if (c.empty_rows == EmptyRows::kSkip && c.loss_type != LossType::kSequenceMean) {
    return Bad(absl::StrCat("empty_rows skip applies to loss_type sequence_mean only, not ",
                            LossTypeName(c.loss_type)));
  }
  if (c.row_count_input &&
      (c.loss_type != LossType::kSequenceMean || c.empty_rows != EmptyRows::kSkip)) {
    return Bad(absl::StrCat("a run-time row count (total_nonempty_rows) needs loss_type "
                            "sequence_mean with empty_rows skip, not ",
                            LossTypeName(c.loss_type), " with empty_rows ",
                            EmptyRowsName(c.empty_rows)));
  }
  if (c.block_size <= 0) {
    return Bad(absl::StrCat("block_size must be > 0, got ", c.block_size));
  }
  if (c.time_block.has_value() && *c.time_block <= 0) {
    return Bad(absl::StrCat("time_block must be > 0 when set, got ", *c.time_block));
  }
  if (c.hidden < 0 || c.hidden > std::numeric_limits<int32_t>::max()) {
    return Bad(absl::StrCat("hidden must be in [0, 2^31) (0 = unset), got ", c.hidden));
  }
  if (c.token_chunk.has_value() && *c.token_chunk <= 0) {
    return Bad(absl::StrCat("token_chunk must be > 0 when set, got ", *c.token_chunk));
  }
  if (c.dlogits_type != hlo::PrimitiveType::kF32 && c.dlogits_type != hlo::PrimitiveType::kBF16) {
    return Bad(absl::StrCat("dlogits_type must be f32 or bf16, got ",
                            hlo::PrimitiveTypeName(c.dlogits_type)));
  }
  if (c.dlogits_type == hlo::PrimitiveType::kBF16 && c.logits_type != hlo::PrimitiveType::kBF16) {
    return Bad("dlogits_type bf16 needs bf16 logits (hidden and lm_head): with f32 operands "
               "the products stay f32");
  }
  return absl::OkStatus();
}

bool NeedsWholeRows(const GrpoConfig& c) {
  return c.policy_loss == PolicyLoss::kGspo || c.policy_loss == PolicyLoss::kGspoToken ||
         (c.is_level == IsLevel::kSequence && c.on_policy);
}

bool EntropyGradNeedsOwnLse(const GrpoConfig& c) {
  return c.entropy_coef != 0 && c.temperature_mode == TemperatureMode::kPostLse &&
         c.temperature != 1.0;
}

std::vector<std::string> GrpoParameterNames(const GrpoConfig& config, KernelMode mode) {
  std::vector<std::string> names = {"logits", "chosen_ids", "completion_mask", "advantages"};
  if (!config.on_policy) names.push_back("old_logp");
  if (config.beta != 0) names.push_back("ref_logp");
  if (config.is_level != IsLevel::kNone) names.push_back("sampler_logp");
  if (config.token_count_input) names.push_back("total_valid_tokens");
  if (config.row_count_input) names.push_back("total_nonempty_rows");
  if (mode == KernelMode::kBwd) {
    names.push_back("lse");
    names.push_back("logp");
    if (config.entropy_coef != 0) names.push_back("entropy");
  }
  return names;
}

std::vector<std::string> GrpoOutputNames(KernelMode mode) {
  if (mode == KernelMode::kBwd) return {"dlogits"};
  std::vector<std::string> names = {"loss", "per_token_loss", "logp", "entropy", "lse"};
  if (mode == KernelMode::kFwdBwd) names.push_back("dlogits");
  return names;
}

}  // namespace tpuoff::kernels
