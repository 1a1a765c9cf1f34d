#include "kernels/grpo_presets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuoff::kernels {
namespace {

// The loss options a preset owns, at the spec's defaults; each preset
// starts from this so that applying one never keeps another's values.
GrpoConfig Neutral(const GrpoConfig& c) {
  GrpoConfig out = c;
  const GrpoConfig d;
  out.policy_loss = d.policy_loss;
  out.eps_low = d.eps_low;
  out.eps_high = d.eps_high;
  out.delta.reset();
  out.log_ratio_clamp.reset();
  out.beta = d.beta;
  out.kl_estimator = d.kl_estimator;
  out.entropy_coef = d.entropy_coef;
  out.loss_type = d.loss_type;
  out.max_len.reset();
  out.token_count_input = false;
  out.empty_rows = d.empty_rows;
  out.row_count_input = false;
  out.sapo_tau_pos = d.sapo_tau_pos;
  out.sapo_tau_neg = d.sapo_tau_neg;
  out.is_mode = d.is_mode;
  out.is_cap = d.is_cap;
  // All three trainers divide the logits by the sampling temperature before
  // the log-softmax.
  out.temperature_mode = TemperatureMode::kPreSoftmax;
  return out;
}

// TRL (huggingface/trl trl/trainer/grpo_config.py, grpo_trainer.py
// _compute_loss): epsilon 0.2, epsilon_high None (= epsilon), beta 0.0, k3
// KL, delta None, sapo temperatures 1.0/1.05; the vLLM importance-sampling
// correction (only with use_vllm) defaults to mode "sequence_mask" with
// clip_max 3.0, so --is-level=sequence gives it.
GrpoConfig Trl(const GrpoConfig& c) {
  GrpoConfig out = Neutral(c);
  out.is_mode = IsMode::kMask;
  out.is_cap = 3.0;
  return out;
}

// verl (volcengine/verl verl/trainer/config/actor/actor.yaml,
// verl/trainer/ppo/core_algos.py): clip_ratio 0.2; the log-ratio clamped to
// ±20 before exp; KL loss off (use_kl_loss false) with kl_loss_type
// low_var_kl; rollout IS off (rollout_is null) with threshold 2.0, truncated;
// the default (legacy) dp_actor normalises by the micro-batch's own counts.
GrpoConfig Verl(const GrpoConfig& c) {
  GrpoConfig out = Neutral(c);
  out.kl_estimator = KlEstimator::kLowVarKl;
  out.is_mode = IsMode::kTruncate;
  out.is_cap = 2.0;
  return out;
}

struct Preset {
  const char* name;
  GrpoConfig (*apply)(const GrpoConfig&);
};

const Preset kPresets[] = {
    // TRL loss_type="grpo": per-sequence token mean, then the mean over all B
    // rows (empty ones count).
    {"trl-grpo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Trl(c);
       o.loss_type = LossType::kSequenceMean;
       o.empty_rows = EmptyRows::kCount;
       return o;
     }},
    // TRL loss_type="dapo" (GRPOConfig's default loss_type), normalised by
    // num_items_in_batch, the global token count of the accumulated batch
    // (input total_valid_tokens), with the DAPO paper's clip-higher
    // epsilon_high 0.28 (docs/source/paper_index.md, DAPO section).
    {"trl-dapo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Trl(c);
       o.eps_high = 0.28;
       o.loss_type = LossType::kTokenMean;
       o.token_count_input = true;
       return o;
     }},
    // TRL loss_type="dr_grpo": Σ over the batch / (B · max_completion_length),
    // max_completion_length defaulting to 512.
    {"trl-dr-grpo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Trl(c);
       o.loss_type = LossType::kConstant;
       o.max_len = 512;
       return o;
     }},
    // TRL's GSPO setting (docs/source/paper_index.md, GSPO section):
    // importance_sampling_level="sequence" (gradient through the row mean),
    // loss_type="grpo", epsilon 3e-4, epsilon_high 4e-4, beta 0.
    {"trl-gspo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Trl(c);
       o.policy_loss = PolicyLoss::kGspo;
       o.eps_low = 3e-4;
       o.eps_high = 4e-4;
       o.loss_type = LossType::kSequenceMean;
       o.empty_rows = EmptyRows::kCount;
       return o;
     }},
    // verl policy_loss.loss_mode "vanilla", loss_agg_mode "token-mean": PPO
    // with dual-clip clip_ratio_c 3.0, which for 1 + eps_high <= 3 equals the
    // upper ratio clamp delta = 3 (value and gradient).
    {"verl-grpo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Verl(c);
       o.delta = 3.0;
       o.log_ratio_clamp = 20.0;
       o.loss_type = LossType::kTokenMean;
       return o;
     }},
    // verl loss_mode "gspo": the per-token-gradient form (sg(row mean) +
    // logp − sg(logp)), always aggregated "seq-mean-token-mean" (mean over
    // non-empty rows); clip ratios 3e-4/4e-4 of
    // examples/gspo_trainer/test_gspo_3b_math.sh (the GSPO paper's).
    {"verl-gspo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Verl(c);
       o.policy_loss = PolicyLoss::kGspoToken;
       o.eps_low = 3e-4;
       o.eps_high = 4e-4;
       o.loss_type = LossType::kSequenceMean;
       o.empty_rows = EmptyRows::kSkip;
       return o;
     }},
    // Tunix (google/tunix tunix/rl/grpo/grpo_learner.py GRPOConfig,
    // tunix/rl/algo_core.py grpo_loss_fn, tunix/rl/common.py): epsilon 0.2
    // both ways, log-ratio clipped to ±20, beta 0.04 with kl_loss_mode "kl"
    // (logp − ref = k1), loss_agg_mode "sequence-mean-token-mean" over
    // non-empty rows; sampler_is off, threshold 2.0, truncated.
    {"tunix-grpo",
     [](const GrpoConfig& c) {
       GrpoConfig o = Neutral(c);
       o.log_ratio_clamp = 20.0;
       o.beta = 0.04;
       o.kl_estimator = KlEstimator::kK1;
       o.loss_type = LossType::kSequenceMean;
       o.empty_rows = EmptyRows::kSkip;
       o.is_mode = IsMode::kTruncate;
       o.is_cap = 2.0;
       return o;
     }},
};

}  // namespace

std::vector<std::string> GrpoPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

absl::Status ApplyGrpoPreset(absl::string_view name, GrpoConfig* config) {
  for (const Preset& p : kPresets) {
    if (name == p.name) {
      *config = p.apply(*config);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown preset '", name, "' (expected ", absl::StrJoin(GrpoPresetNames(), ", "), ")"));
}

}  // namespace tpuoff::kernels
