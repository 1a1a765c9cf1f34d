// Deterministic random arguments for a module's entry parameters, sensible
// per parameter name for GRPO/entropy modules (GRPO_SPEC.md names):
//   logits, hidden, advantages ~ N(0,1); lm_head ~ N(0, 1/H);
//   chosen_ids uniform in [0, V); completion_mask 0/1 (80% ones);
//   old_logp / ref_logp = log_softmax(logits)[y] + N(0, 0.1^2) when logits
//   are a parameter (else -U(0.5, 5)); lse / logp exactly as the forward
//   computes them from logits; total_valid_tokens = max(1, sum of the mask).
// Any other parameter: floats U[-1, 1], integers in [0, 8), pred 0/1.
// Each parameter draws from its own stream seeded by (seed, name, device),
// split into fixed chunks generated in parallel, so values depend on neither
// parameter order nor the thread count.
#ifndef TPUOFF_TOOLS_IO_RANDOM_INPUTS_H_
#define TPUOFF_TOOLS_IO_RANDOM_INPUTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/literal.h"

namespace tpuoff::tools {

struct RandomInputOptions {
  uint64_t seed = 0;
  // Mixed into every stream so SPMD devices get different data.
  int64_t device = 0;
  // Used to derive lse/logp/old_logp consistently with the kernel.
  double temperature = 1.0;
  bool post_lse = false;  // temperature_mode=post_lse
  // V for chosen_ids when neither logits nor lm_head is a parameter.
  std::optional<int64_t> vocab;
};

// One literal per parameter of `entry`, in parameter order.
absl::StatusOr<std::vector<hlo::Literal>> MakeRandomInputs(
    const hlo::HloComputation& entry, const RandomInputOptions& options);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_RANDOM_INPUTS_H_
