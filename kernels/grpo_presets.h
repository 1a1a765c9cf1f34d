// Named presets: the policy-loss options and aggregation a trainer uses by
// default (TRL GRPOTrainer, verl's PPO actor, Tunix GRPOLearner), read from
// their sources; README.md "Loss presets" cites the file and default of
// every value and what a preset cannot express.
#ifndef TPUOFF_KERNELS_GRPO_PRESETS_H_
#define TPUOFF_KERNELS_GRPO_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/grpo_config.h"

namespace tpuoff::kernels {

// "trl-grpo", "trl-dapo", "trl-dr-grpo", "trl-gspo", "verl-grpo",
// "verl-gspo", "tunix-grpo".
std::vector<std::string> GrpoPresetNames();

// Sets every loss option of `config` (the surrogate, clip range, delta,
// log-ratio clamp, KL weight and estimator, entropy coefficient, aggregation
// with its normaliser inputs, SAPO taus, importance-sampling mode and cap,
// where the temperature enters) to the preset's; shapes, dtype, the
// temperature value, on_policy, advantage_shape, is_level and block sizes are
// left alone (they describe the inputs and the sampler, not the trainer).
// InvalidArgument for an unknown name.
absl::Status ApplyGrpoPreset(absl::string_view name, GrpoConfig* config);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_PRESETS_H_
