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

struct GrpoConfig {
  // Logits shape [batch, seq, vocab].
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t vocab = 0;
  // f32 or bf16. Maths is f32 either way; dlogits come back in this type.
  hlo::PrimitiveType logits_type = hlo::PrimitiveType::kF32;

  double eps_low = 0.2;   // ratio clipped below at 1 - eps_low; in [0, 1)
  double eps_high = 0.2;  // ... and above at 1 + eps_high; >= 0
  double temperature = 1.0;  // > 0
  TemperatureMode temperature_mode = TemperatureMode::kPreSoftmax;
  double beta = 0.0;              // k3 KL weight; ref_logp is an input iff != 0
  std::optional<double> delta;    // upper clamp on the ratio; > 1 when set
  LossType loss_type = LossType::kTokenMean;
  std::optional<int64_t> max_len;  // kConstant's normaliser; default `seq`

  // token_mean only: the normaliser N is the run-time scalar parameter
  // total_valid_tokens (a global count) instead of the sum of the mask.
  bool token_count_input = false;
  // old_logp = stop_gradient(logp): no old_logp parameter, ratio == 1.
  bool on_policy = false;

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
};

// InvalidArgument naming the offending field when the config is unusable.
absl::Status ValidateGrpoConfig(const GrpoConfig& config);

// Which module variant to emit.
enum class KernelMode { kFwd, kBwd, kFwdBwd };
absl::string_view KernelModeName(KernelMode mode);  // "fwd", "bwd", "fwd_bwd"
absl::StatusOr<KernelMode> ParseKernelMode(absl::string_view name);

// Entry parameter names of a GRPO module, in parameter-number order:
// logits, chosen_ids, completion_mask, advantages, [old_logp], [ref_logp],
// [total_valid_tokens], then for kBwd: lse, logp.
std::vector<std::string> GrpoParameterNames(const GrpoConfig& config,
                                            KernelMode mode);
// Output names of a GRPO module: kFwd: loss, per_token_loss, logp, entropy,
// lse; kBwd: dlogits; kFwdBwd: the five then dlogits.
std::vector<std::string> GrpoOutputNames(KernelMode mode);

// Reads a test-vector case (tests/testdata/README.md): `path_or_text` is
// JSON text when it starts with '{', else a case.json path or the case's
// directory. Only the fields of the config are read (block sizes keep their
// defaults); unknown params are an error so typos do not pass silently.
// The v2 policy-loss parameters (policy_loss, kl_estimator, log_ratio_clamp,
// advantage_shape, entropy_coef, empty_rows, sapo_tau_pos/neg, is_level,
// is_mode, is_cap, total_nonempty_rows) are recognised but GrpoConfig does not
// hold them yet: at their defaults they are accepted, any other valid value is
// Unimplemented naming the parameter, an invalid one InvalidArgument.
absl::StatusOr<GrpoConfig> GrpoConfigFromCaseJson(absl::string_view path_or_text);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_CONFIG_H_
