#include "tools/cli/kernel_flags.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/status_macros.h"
#include "kernels/grpo_presets.h"

namespace tpuoff::tools {
namespace {

// Every kernel flag except --kernel itself (they only apply with --kernel).
const std::vector<std::string>& DependentFlags() {
  static const auto* names = new std::vector<std::string>{
      "mode",        "batch",           "seq",         "vocab",
      "logits-dtype", "eps-low",        "eps-high",    "temperature",
      "temperature-mode", "beta",       "delta",       "loss-type",
      "max-len",     "token-count-input", "on-policy", "block-size",
      "hidden",      "token-chunk",     "policy-loss", "kl-estimator",
      "log-ratio-clamp", "advantage-shape", "entropy-coef", "empty-rows",
      "sapo-tau-pos", "sapo-tau-neg",   "is-level",    "is-mode",
      "is-cap",      "row-count-input", "preset",  "emit-for",
      "dlogits-dtype"};
  return *names;
}

}  // namespace

void RegisterKernelFlags(FlagSet& flags, KernelFlags* out) {
  flags.AddEnum("kernel", &out->kernel,
                {"grpo_reference", "grpo_tiled", "entropy_reference",
                 "entropy_tiled", "grpo_fused_linear"},
                "generate this kernel instead of reading MODULE_FILE");
  flags.AddEnum("mode", &out->mode, {"fwd", "bwd", "fwd_bwd"},
                "kernel: forward, backward (takes lse/logp, and entropy with --entropy-coef) or "
                "value-and-grad");
  flags.AddInt64("batch", &out->batch, "kernel: batch size B");
  flags.AddInt64("seq", &out->seq, "kernel: sequence length T");
  flags.AddInt64("vocab", &out->vocab, "kernel: vocabulary size V");
  flags.AddEnum("logits-dtype", &out->logits_dtype, {"f32", "bf16"},
                "kernel: element type of logits (and dlogits)");
  flags.AddDouble("eps-low", &out->eps_low, "kernel: lower clip epsilon");
  flags.AddDouble("eps-high", &out->eps_high, "kernel: upper clip epsilon");
  flags.AddDouble("temperature", &out->temperature,
                  "kernel: sampling temperature tau (> 0)");
  flags.AddEnum("temperature-mode", &out->temperature_mode,
                {"pre_softmax", "post_lse"},
                "kernel: softmax(z/tau) or (z_y - lse(z))/tau");
  flags.AddDouble("beta", &out->beta,
                  "kernel: KL weight, estimator --kl-estimator (0 = no ref_logp)");
  flags.AddOptionalDouble("delta", &out->delta,
                          "kernel: upper clamp on the ratio");
  flags.AddEnum("loss-type", &out->loss_type,
                {"token_mean", "sequence_mean", "constant"},
                "kernel: loss aggregation");
  flags.AddOptionalInt64("max-len", &out->max_len,
                         "kernel: normaliser of loss-type=constant (none = T)");
  flags.AddBool("token-count-input", &out->token_count_input,
                "kernel: take total_valid_tokens as a parameter");
  flags.AddBool("on-policy", &out->on_policy,
                "kernel: no old_logp parameter (ratio = 1)");
  flags.AddInt64("block-size", &out->block_size,
                 "kernel: vocab tile width of tiled kernels");
  std::vector<std::string> presets = {"none"};
  for (const std::string& name : kernels::GrpoPresetNames()) presets.push_back(name);
  flags.AddEnum("preset", &out->preset, presets,
                "kernel: a trainer's loss options (README 'Loss presets'); the other flags "
                "override it");
  flags.AddEnum("policy-loss", &out->policy_loss,
                {"ppo_clip", "gspo", "gspo_token", "cispo", "sapo"},
                "kernel: the surrogate (GRPO_SPEC v2)");
  flags.AddEnum("kl-estimator", &out->kl_estimator, {"k3", "k1", "k2", "low_var_kl"},
                "kernel: KL estimator of the beta term");
  flags.AddOptionalDouble("log-ratio-clamp", &out->log_ratio_clamp,
                          "kernel: clamp logp - old_logp to [-c, c] before exp");
  flags.AddEnum("advantage-shape", &out->advantage_shape, {"sequence", "token"},
                "kernel: advantages [B] or [B,T]");
  flags.AddDouble("entropy-coef", &out->entropy_coef,
                  "kernel: entropy bonus kappa (per_token_loss -= kappa*entropy, with gradient)");
  flags.AddEnum("empty-rows", &out->empty_rows, {"count", "skip"},
                "kernel: sequence_mean divides by B (count) or the non-empty rows (skip)");
  flags.AddDouble("sapo-tau-pos", &out->sapo_tau_pos, "kernel: SAPO temperature for A > 0");
  flags.AddDouble("sapo-tau-neg", &out->sapo_tau_neg, "kernel: SAPO temperature for A <= 0");
  flags.AddEnum("is-level", &out->is_level, {"none", "token", "sequence"},
                "kernel: rollout importance-sampling correction (input sampler_logp)");
  flags.AddEnum("is-mode", &out->is_mode, {"truncate", "mask"},
                "kernel: IS weights above --is-cap are capped or zeroed");
  flags.AddDouble("is-cap", &out->is_cap, "kernel: IS weight cap C (> 0)");
  flags.AddBool("row-count-input", &out->row_count_input,
                "kernel: take total_nonempty_rows as a parameter (sequence_mean, "
                "empty-rows=skip)");
  flags.AddInt64("hidden", &out->hidden,
                 "grpo_fused_linear: hidden size H of hidden [B,T,H] and lm_head [H,V]");
  flags.AddOptionalInt64("token-chunk", &out->token_chunk,
                         "grpo_fused_linear: tokens per matmul tile (none = B*T)");
  flags.AddEnum("emit-for", &out->emit_for, {"tpu", "cpu"},
                "grpo_fused_linear: the XLA backend its loops are shaped for (tpu: d_lm_head's "
                "loop state pinned to HBM for XLA:TPU's memory-space assignment; cpu: without "
                "that hint, with which XLA:CPU needs more temp; same values)");
  flags.AddEnum("dlogits-dtype", &out->dlogits_dtype, {"f32", "bf16"},
                "grpo_fused_linear: type of the dlogits tile in the d_hidden and d_lm_head "
                "products (bf16, with --logits-dtype=bf16 only: rounded to bf16 so both are "
                "bf16 x bf16 products with f32 accumulation, as Liger-Kernel; f32: exact f32 "
                "tile at HIGHEST precision)");
}

namespace {

// The preset's values for every loss option the command line left unset.
absl::Status ResolvePreset(const FlagSet& flags, KernelFlags* f) {
  f->preset_resolved = true;
  if (f->preset == "none") return absl::OkStatus();
  kernels::GrpoConfig c;
  RETURN_IF_ERROR(kernels::ApplyGrpoPreset(f->preset, &c));
  auto unset = [&](const char* name) { return !flags.WasSet(name); };
  // Options that only go with the preset's own aggregation / surrogate.
  const bool own_aggregation = unset("loss-type");
  const bool own_delta =
      unset("policy-loss") || f->policy_loss == kernels::PolicyLossName(c.policy_loss) ||
      f->policy_loss == "ppo_clip";
  if (unset("policy-loss")) f->policy_loss = std::string(kernels::PolicyLossName(c.policy_loss));
  if (unset("eps-low")) f->eps_low = c.eps_low;
  if (unset("eps-high")) f->eps_high = c.eps_high;
  if (unset("delta") && own_delta) f->delta = c.delta;
  if (unset("log-ratio-clamp")) f->log_ratio_clamp = c.log_ratio_clamp;
  if (unset("beta")) f->beta = c.beta;
  if (unset("kl-estimator")) f->kl_estimator = std::string(kernels::KlEstimatorName(c.kl_estimator));
  if (unset("entropy-coef")) f->entropy_coef = c.entropy_coef;
  if (unset("temperature-mode")) {
    f->temperature_mode = std::string(kernels::TemperatureModeName(c.temperature_mode));
  }
  if (own_aggregation) {
    f->loss_type = std::string(kernels::LossTypeName(c.loss_type));
    if (unset("max-len")) f->max_len = c.max_len;
    if (unset("token-count-input")) f->token_count_input = c.token_count_input;
    if (unset("empty-rows")) f->empty_rows = std::string(kernels::EmptyRowsName(c.empty_rows));
    if (unset("row-count-input")) f->row_count_input = c.row_count_input;
  }
  if (unset("sapo-tau-pos")) f->sapo_tau_pos = c.sapo_tau_pos;
  if (unset("sapo-tau-neg")) f->sapo_tau_neg = c.sapo_tau_neg;
  if (unset("is-mode")) f->is_mode = std::string(kernels::IsModeName(c.is_mode));
  if (unset("is-cap")) f->is_cap = c.is_cap;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckKernelFlagUsage(const FlagSet& flags, KernelFlags* values) {
  RETURN_IF_ERROR(ResolvePreset(flags, values));
  const KernelFlags& v = *values;
  if (!flags.WasSet("kernel")) {
    for (const std::string& name : DependentFlags()) {
      if (flags.WasSet(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " only applies with --kernel=NAME"));
      }
    }
    return absl::OkStatus();
  }
  auto positive = [](const char* name, int64_t value) -> absl::Status {
    if (value >= 1) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be >= 1, got ", value));
  };
  for (auto [name, value] : {std::pair{"batch", v.batch}, {"seq", v.seq},
                             {"vocab", v.vocab}, {"block-size", v.block_size}}) {
    if (absl::Status s = positive(name, value); !s.ok()) return s;
  }
  if (v.max_len.has_value()) {
    if (absl::Status s = positive("max-len", *v.max_len); !s.ok()) return s;
  }
  if (v.kernel != "grpo_fused_linear") {
    for (const char* name : {"hidden", "token-chunk", "emit-for", "dlogits-dtype"}) {
      if (flags.WasSet(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " only applies with --kernel=grpo_fused_linear"));
      }
    }
  } else {
    if (absl::Status s = positive("hidden", v.hidden); !s.ok()) return s;
    if (v.dlogits_dtype == "bf16" && v.logits_dtype != "bf16") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dlogits-dtype=bf16 needs --logits-dtype=bf16 (bf16 hidden and lm_head), got "
          "--logits-dtype=", v.logits_dtype));
    }
    if (v.token_chunk.has_value()) {
      if (absl::Status s = positive("token-chunk", *v.token_chunk); !s.ok()) return s;
    }
    if (v.hidden > (int64_t{1} << 40) / v.vocab ||
        v.hidden > (int64_t{1} << 40) / v.batch / v.seq) {
      return absl::InvalidArgumentError(
          "--hidden * --vocab or --batch * --seq * --hidden is too large (> 2^40 elements)");
    }
  }
  // Guard the product so a typo cannot request an absurd logits tensor.
  if (v.batch > (int64_t{1} << 40) / v.seq ||
      v.batch * v.seq > (int64_t{1} << 40) / v.vocab) {
    return absl::InvalidArgumentError(
        "--batch * --seq * --vocab is too large (> 2^40 elements)");
  }
  return KernelSpecFromFlags(v).status();
}

absl::StatusOr<kernels::KernelSpec> KernelSpecFromFlags(const KernelFlags& f) {
  if (f.preset != "none" && !f.preset_resolved) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--preset=", f.preset, " was not resolved (CheckKernelFlagUsage applies it)"));
  }
  kernels::KernelSpec spec;
  ASSIGN_OR_RETURN(spec.kind, kernels::ParseKernelKind(f.kernel));
  ASSIGN_OR_RETURN(spec.mode, kernels::ParseKernelMode(f.mode));
  if (kernels::IsEntropyKernel(spec.kind) && spec.mode != kernels::KernelMode::kFwd) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernel=", f.kernel, " has only --mode=fwd, got --mode=", f.mode));
  }
  kernels::GrpoConfig& c = spec.config;
  c.batch = f.batch;
  c.seq = f.seq;
  c.vocab = f.vocab;
  c.logits_type = f.logits_dtype == "bf16" ? hlo::PrimitiveType::kBF16
                                           : hlo::PrimitiveType::kF32;
  c.eps_low = f.eps_low;
  c.eps_high = f.eps_high;
  c.temperature = f.temperature;
  ASSIGN_OR_RETURN(c.temperature_mode,
                   kernels::ParseTemperatureMode(f.temperature_mode));
  c.beta = f.beta;
  c.delta = f.delta;
  ASSIGN_OR_RETURN(c.loss_type, kernels::ParseLossType(f.loss_type));
  c.max_len = f.max_len;
  c.token_count_input = f.token_count_input;
  c.on_policy = f.on_policy;
  c.block_size = f.block_size;
  ASSIGN_OR_RETURN(c.policy_loss, kernels::ParsePolicyLoss(f.policy_loss));
  ASSIGN_OR_RETURN(c.kl_estimator, kernels::ParseKlEstimator(f.kl_estimator));
  c.log_ratio_clamp = f.log_ratio_clamp;
  ASSIGN_OR_RETURN(c.advantage_shape, kernels::ParseAdvantageShape(f.advantage_shape));
  c.entropy_coef = f.entropy_coef;
  ASSIGN_OR_RETURN(c.empty_rows, kernels::ParseEmptyRows(f.empty_rows));
  c.sapo_tau_pos = f.sapo_tau_pos;
  c.sapo_tau_neg = f.sapo_tau_neg;
  ASSIGN_OR_RETURN(c.is_level, kernels::ParseIsLevel(f.is_level));
  ASSIGN_OR_RETURN(c.is_mode, kernels::ParseIsMode(f.is_mode));
  c.is_cap = f.is_cap;
  c.row_count_input = f.row_count_input;
  if (spec.kind == kernels::KernelKind::kGrpoFusedLinear) {
    c.hidden = f.hidden;
    c.token_chunk = f.token_chunk;
    ASSIGN_OR_RETURN(c.emit_for, kernels::ParseEmitTarget(f.emit_for));
    c.dlogits_type = f.dlogits_dtype == "bf16" ? hlo::PrimitiveType::kBF16
                                               : hlo::PrimitiveType::kF32;
  }
  if (absl::Status s = kernels::ValidateGrpoConfig(c); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid kernel flags: ", s.message()));
  }
  return spec;
}

absl::Status CheckKernelInputs(const KernelFlags& flags, const hlo::HloComputation& params,
                               absl::Span<const hlo::Literal> args) {
  for (size_t i = 0; i < args.size() && i < params.parameters().size(); ++i) {
    const hlo::HloInstruction* p = params.parameters()[i];
    const hlo::Literal& ids = args[i];
    if (p == nullptr || p->name() != "chosen_ids" || !ids.shape().IsArray() ||
        ids.shape().element_type() != hlo::PrimitiveType::kS32) {
      continue;
    }
    const int32_t* v = ids.data<int32_t>();
    const int64_t n = ids.num_elements();
    for (int64_t k = 0; k < n; ++k) {
      if (v[k] >= 0 && v[k] < flags.vocab) continue;
      // The position as [b,t] (row-major).
      std::vector<int64_t> index(ids.shape().rank());
      int64_t rest = k;
      for (int64_t d = ids.shape().rank() - 1; d >= 0; --d) {
        index[d] = rest % ids.shape().dimensions(d);
        rest /= ids.shape().dimensions(d);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "chosen_ids[", absl::StrJoin(index, ","), "] = ", v[k],
          " is outside the vocabulary [0, ", flags.vocab,
          "): every chosen id must be a vocab index (--vocab=", flags.vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildKernelModule(
    const KernelFlags& flags) {
  ASSIGN_OR_RETURN(kernels::KernelSpec spec, KernelSpecFromFlags(flags));
  return kernels::BuildKernel(spec);
}

}  // namespace tpuoff::tools
