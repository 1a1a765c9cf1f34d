// Compile-time configuration of the GRPO-loss and entropy kernels
// (docs/GRPO_SPEC.md), its validation, and the names of the modules'
// parameters and outputs.
#ifndef TPUOFF_KERNELS_GRPO_CONFIG_H_
#define TPUOFF_KERNELS_GRPO_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::kernels {

// Where the temperature enters: TRL/Liger divide the logits before the
// softmax; MLLM-JAX divides the log-probability after the log-softmax.
enum class TemperatureMode { kPreSoftmax, kPostLse };
// How per-token losses are aggregated (GRPO_SPEC.md step 7).
enum class LossType { kTokenMean, kSequenceMean, kConstant };

absl::string_view TemperatureModeName(TemperatureMode mode);  // "pre_softmax"
absl::StatusOr<TemperatureMode> ParseTemperatureMode(absl::string_view name);
absl::string_view LossTypeName(LossType type);  // "token_mean"
absl::StatusOr<LossType> ParseLossType(absl::string_view name);

// The policy-loss variants of GRPO_SPEC.md "Policy-loss variants (v2)".
// The surrogate: PPO's clipped ratio, GSPO's sequence-level ratio (gradient
// through the row mean, or per token), CISPO's clipped stop-gradient weight,
// SAPO's soft gate.
enum class PolicyLoss { kPpoClip, kGspo, kGspoToken, kCispo, kSapo };
// The KL term's estimator when beta != 0 (d = ref_logp − logp).
enum class KlEstimator { kK3, kK1, kK2, kLowVarKl };
// Shape of the `advantages` input: [B] broadcast over T, or [B,T].
enum class AdvantageShape { kSequence, kToken };
// sequence_mean's row count: B (count) or the non-empty rows (skip).
enum class EmptyRows { kCount, kSkip };
// The XLA backend a module's memory shape is made for (values never
// depend on it). kTpu: hints for XLA:TPU's memory-space assignment (see
// FusedLinearOptions in grpo_fused_linear.h); kCpu: none, for XLA:CPU and
// other backends (with the hint XLA:CPU needs more temp).
enum class EmitTarget { kTpu, kCpu };
// Rollout importance-sampling correction exp(old − sampler_logp).
enum class IsLevel { kNone, kToken, kSequence };
// Weights above is_cap: capped (truncate) or zeroed (mask).
enum class IsMode { kTruncate, kMask };

absl::string_view PolicyLossName(PolicyLoss v);  // "ppo_clip", "gspo", "gspo_token", ...
absl::StatusOr<PolicyLoss> ParsePolicyLoss(absl::string_view name);
absl::string_view KlEstimatorName(KlEstimator v);  // "k3", "k1", "k2", "low_var_kl"
absl::StatusOr<KlEstimator> ParseKlEstimator(absl::string_view name);
absl::string_view AdvantageShapeName(AdvantageShape v);  // "sequence", "token"
absl::StatusOr<AdvantageShape> ParseAdvantageShape(absl::string_view name);
absl::string_view EmptyRowsName(EmptyRows v);  // "count", "skip"
absl::StatusOr<EmptyRows> ParseEmptyRows(absl::string_view name);
absl::StatusOr<EmitTarget> ParseEmitTarget(absl::string_view name);
absl::string_view IsLevelName(IsLevel v);  // "none", "token", "sequence"
absl::StatusOr<IsLevel> ParseIsLevel(absl::string_view name);
absl::string_view IsModeName(IsMode v);  // "truncate", "mask"
absl::StatusOr<IsMode> ParseIsMode(absl::string_view name);

struct GrpoConfig {
  // Logits shape [batch, seq, vocab].
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t vocab = 0;
  // f32 or bf16. Maths is f32 either way; dlogits come back in this type.
  hlo::PrimitiveType logits_type = hlo::PrimitiveType::kF32;

  double eps_low = 0.2;   // ratio clipped below at 1 - eps_low; in [0, 1]
  double eps_high = 0.2;  // ... and above at 1 + eps_high; >= 0
  double temperature = 1.0;  // > 0
  TemperatureMode temperature_mode = TemperatureMode::kPreSoftmax;
  double beta = 0.0;              // KL weight; ref_logp is an input iff != 0
  std::optional<double> delta;    // upper clamp on the ratio; > 1, ppo_clip only
  LossType loss_type = LossType::kTokenMean;
  std::optional<int64_t> max_len;  // kConstant's normaliser; default `seq`

  // token_mean only: the normaliser N is the run-time scalar parameter
  // total_valid_tokens (a global count) instead of the sum of the mask.
  bool token_count_input = false;
  // old_logp = stop_gradient(logp): no old_logp parameter, ratio == 1.
  bool on_policy = false;

  // Policy-loss variants (GRPO_SPEC.md v2); the defaults give the v1 loss.
  PolicyLoss policy_loss = PolicyLoss::kPpoClip;
  KlEstimator kl_estimator = KlEstimator::kK3;  // used iff beta != 0
  // Δ = logp − old clamped to [−c, c] before any exp (zero gradient where
  // clamped); > 0 when set.
  std::optional<double> log_ratio_clamp;
  AdvantageShape advantage_shape = AdvantageShape::kSequence;
  // κ: per_token_loss −= κ·entropy, which then carries a gradient. Any
  // finite value (negative penalises entropy).
  double entropy_coef = 0.0;
  EmptyRows empty_rows = EmptyRows::kCount;  // sequence_mean only
  double sapo_tau_pos = 1.0;   // SAPO gate temperature for A > 0; > 0
  double sapo_tau_neg = 1.05;  // ... and for A <= 0; > 0
  IsLevel is_level = IsLevel::kNone;  // != none: input sampler_logp [B,T]
  IsMode is_mode = IsMode::kTruncate;
  double is_cap = 2.0;  // C > 0
  // sequence_mean with empty_rows=skip only: the non-empty row count is the
  // run-time scalar parameter total_nonempty_rows (a global count across
  // micro-batches) instead of the count over this batch.
  bool row_count_input = false;

  // Vocab tile width of the tiled kernels; V need not be a multiple, and a
  // block wider than V means one tile.
  int64_t block_size = 2048;
  // Optional row tile of the tiled kernels (tiles become [B, time_block, W]);
  // T need not be a multiple.
  std::optional<int64_t> time_block;

  // Fused LM-head kernel only (grpo_fused_linear): hidden size H of
  // `hidden` [B,T,H] and `lm_head` [H,V] (both in logits_type); 0 = unset.
  int64_t hidden = 0;
  // Its token chunk: rows of the flattened [B*T, H] hidden per matmul tile
  // (unset: all B*T tokens at once); B*T need not be a multiple.
  std::optional<int64_t> token_chunk;
  // The backend the fused kernel's loops are shaped for (grpo_fused_linear
  // only; the other kernels emit one form).
  EmitTarget emit_for = EmitTarget::kTpu;
  // Fused kernel only: the type of the dlogits tile as an operand of the
  // backward's two products (d_hidden += dlogits·lm_headᵀ, d_lm_head +=
  // hiddenᵀ·dlogits). kF32 (default): the f32 tile times the stored bf16/f32
  // operands at HIGHEST precision. kBF16 (bf16 logits_type only): the tile
  // rounded to bf16 first (round to nearest even), so both products are
  // bf16 x bf16 with f32 accumulation, as Liger-Kernel's fused linear losses
  // cast the gradient to the input dtype; each dlogits element then carries
  // up to 2^-9 relative rounding error.
  hlo::PrimitiveType dlogits_type = hlo::PrimitiveType::kF32;
};

// InvalidArgument naming the offending field when the config is unusable,
// or both fields of a contradictory pair (delta with a policy other than
// ppo_clip, empty_rows=skip or a run-time row/token count with another
// aggregation, max_len without loss_type constant). Parameters of a term the
// config leaves out (kl_estimator with beta 0, sapo taus without sapo,
// is_mode/is_cap without is_level) are accepted and unused, as trainers'
// configs carry them.
absl::Status ValidateGrpoConfig(const GrpoConfig& config);

// Whether the per-token policy terms of a row need all of the row's logp
// (gspo's row mean, on-policy sequence-level IS weights).
bool NeedsWholeRows(const GrpoConfig& config);
// Whether the entropy gradient needs the entropy domain's own lse (z/τ when
// the policy gradient's softmax is of z: post_lse with τ != 1).
bool EntropyGradNeedsOwnLse(const GrpoConfig& config);

// Which module variant to emit.
enum class KernelMode { kFwd, kBwd, kFwdBwd };
absl::string_view KernelModeName(KernelMode mode);  // "fwd", "bwd", "fwd_bwd"
absl::StatusOr<KernelMode> ParseKernelMode(absl::string_view name);

// Entry parameter names of a GRPO module, in parameter-number order:
// logits, chosen_ids, completion_mask, advantages ([B], or [B,T] for
// advantage_shape token), [old_logp], [ref_logp], [sampler_logp],
// [total_valid_tokens], [total_nonempty_rows], then for kBwd: lse, logp,
// [entropy] (entropy_coef != 0).
std::vector<std::string> GrpoParameterNames(const GrpoConfig& config,
                                            KernelMode mode);
// Output names of a GRPO module: kFwd: loss, per_token_loss, logp, entropy,
// lse; kBwd: dlogits; kFwdBwd: the five then dlogits.
std::vector<std::string> GrpoOutputNames(KernelMode mode);

// Reads a test-vector case (tests/testdata/README.md): `path_or_text` is
// JSON text when it starts with '{', else a case.json path or the case's
// directory. Only the fields of the config are read (block sizes keep their
// defaults): shape, logits_dtype, on_policy, every v1 and v2 param, and a
// "preset" (applied first, params override it). Unknown params are an error
// so typos do not pass silently. (kernels/grpo_case_json.cc)
absl::StatusOr<GrpoConfig> GrpoConfigFromCaseJson(absl::string_view path_or_text);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_CONFIG_H_
