// The GRPO and entropy kernels as plain JAX writes them: log-softmax and
// softmax over the whole [B,T,V] in f32, the chosen id picked with a gather,
// and the backward written out explicitly. Correct and simple; its f32
// [B,T,V] intermediates are the memory the tiled kernels avoid.
#ifndef TPUOFF_KERNELS_GRPO_REFERENCE_H_
#define TPUOFF_KERNELS_GRPO_REFERENCE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "hlo/ir/builder.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_config.h"

namespace tpuoff::kernels {

GrpoOutputs EmitGrpoReference(hlo::XlaBuilder* b, const GrpoConfig& config, KernelMode mode,
                              const GrpoParams& params, const AggregationHooks& hooks = {});
hlo::XlaOp EmitEntropyReference(hlo::XlaBuilder* b, const GrpoConfig& config,
                                hlo::XlaOp logits);

absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildGrpoReference(const GrpoConfig& config,
                                                                    KernelMode mode);
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildEntropyReference(
    const GrpoConfig& config);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_GRPO_REFERENCE_H_
