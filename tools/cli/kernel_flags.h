// The kernel-generation flags shared by dump/run/compare/memory/bench:
// `--kernel=... --mode=... --batch --seq --vocab ...` -> a kernel module.
#ifndef TPUOFF_TOOLS_CLI_KERNEL_FLAGS_H_
#define TPUOFF_TOOLS_CLI_KERNEL_FLAGS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/module.h"
#include "kernels/build_kernel.h"
#include "tools/cli/flags.h"

namespace tpuoff::tools {

// Raw flag values; defaults follow GRPO_SPEC.md.
struct KernelFlags {
  std::string kernel;  // grpo_reference|grpo_tiled|entropy_*|grpo_fused_linear
  std::string mode = "fwd";        // fwd|bwd|fwd_bwd
  int64_t batch = 2;               // B
  int64_t seq = 16;                // T
  int64_t vocab = 151936;          // V (Qwen2.5)
  std::string logits_dtype = "f32";  // f32|bf16
  double eps_low = 0.2;
  double eps_high = 0.2;
  double temperature = 1.0;
  std::string temperature_mode = "pre_softmax";  // pre_softmax|post_lse
  double beta = 0.0;
  std::optional<double> delta;     // unset: no upper clamp on the ratio
  std::string loss_type = "token_mean";  // token_mean|sequence_mean|constant
  std::optional<int64_t> max_len;  // for constant; unset: T
  bool token_count_input = false;  // total_valid_tokens is a parameter
  bool on_policy = false;          // no old_logp parameter
  int64_t block_size = 2048;       // vocab tile width
  // Policy-loss variants (GRPO_SPEC.md v2), defaults as in the spec.
  std::string policy_loss = "ppo_clip";  // ppo_clip|gspo|gspo_token|cispo|sapo
  std::string kl_estimator = "k3";       // k3|k1|k2|low_var_kl
  std::optional<double> log_ratio_clamp;  // unset: no clamp of logp − old
  std::string advantage_shape = "sequence";  // sequence ([B]) | token ([B,T])
  double entropy_coef = 0.0;
  std::string empty_rows = "count";  // count|skip (sequence_mean)
  double sapo_tau_pos = 1.0;
  double sapo_tau_neg = 1.05;
  std::string is_level = "none";     // none|token|sequence (input sampler_logp)
  std::string is_mode = "truncate";  // truncate|mask
  double is_cap = 2.0;
  bool row_count_input = false;      // total_nonempty_rows is a parameter
  // A trainer's defaults (kernels/grpo_presets.h) for every loss option the
  // command line does not set; resolved by CheckKernelFlagUsage.
  std::string preset = "none";
  bool preset_resolved = false;
  // grpo_fused_linear only: hidden size H (Qwen2.5-1.5B) and token chunk.
  int64_t hidden = 1536;
  std::optional<int64_t> token_chunk;  // unset: all B*T tokens per tile
  std::string emit_for = "tpu";        // tpu|cpu: the backend the loops are shaped for
  std::string dlogits_dtype = "f32";   // f32|bf16: dlogits tile type in the gradient products
};

// Adds --kernel, --mode, --batch, ... bound to `out`.
void RegisterKernelFlags(FlagSet& flags, KernelFlags* out);

// Usage checks after parsing: kernel flags other than --kernel need
// --kernel; values must be in range (B,T,V,block >= 1, temperature > 0, ...);
// invalid combinations name both flags. Also resolves --preset into
// `values`: every loss option the command line left unset takes the preset's
// value, except the preset's aggregation extras (--max-len,
// --token-count-input, --empty-rows, --row-count-input) when --loss-type is
// given and its --delta when --policy-loss is given and is not ppo_clip.
// INVALID_ARGUMENT naming the flag (the CLI exits 2).
absl::Status CheckKernelFlagUsage(const FlagSet& flags, KernelFlags* values);

// The kernel spec the flags describe; INVALID_ARGUMENT naming the flag when
// the config is unusable (validated by kernels::ValidateGrpoConfig), or when
// a --preset was not resolved by CheckKernelFlagUsage.
absl::StatusOr<kernels::KernelSpec> KernelSpecFromFlags(const KernelFlags& flags);

// Inputs given to a kernel the flags describe (`params`: its global
// parameters, `args` in that order): every chosen_ids value must be a
// vocabulary index in [0, --vocab). INVALID_ARGUMENT naming the first one
// outside, by position. (The emitted HLO has a defined result for such ids,
// kernels/grpo_common.h SanitizeChosenIds, but they are never what a user
// meant.)
absl::Status CheckKernelInputs(const KernelFlags& flags, const hlo::HloComputation& params,
                               absl::Span<const hlo::Literal> args);

// KernelSpecFromFlags + kernels::BuildKernel: the verified kernel module.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildKernelModule(
    const KernelFlags& flags);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_KERNEL_FLAGS_H_
