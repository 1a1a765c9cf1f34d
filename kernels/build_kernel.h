// One entry point from a kernel name, a mode and a config to a verified HLO
// module (what the CLI and the tests call).
#ifndef TPUOFF_KERNELS_BUILD_KERNEL_H_
#define TPUOFF_KERNELS_BUILD_KERNEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hlo/ir/module.h"
#include "kernels/grpo_config.h"

namespace tpuoff::kernels {

enum class KernelKind {
  kGrpoReference,
  kGrpoTiled,
  kEntropyReference,
  kEntropyTiled,
  kGrpoFusedLinear,  // hidden [B,T,H] + lm_head [H,V] instead of logits
};

// "grpo_reference", "grpo_tiled", "entropy_reference", "entropy_tiled",
// "grpo_fused_linear".
absl::string_view KernelKindName(KernelKind kind);
absl::StatusOr<KernelKind> ParseKernelKind(absl::string_view name);
std::vector<KernelKind> AllKernelKinds();
bool IsEntropyKernel(KernelKind kind);

struct KernelSpec {
  KernelKind kind = KernelKind::kGrpoTiled;
  // GRPO kernels: fwd, bwd or fwd_bwd. Entropy kernels have only kFwd.
  KernelMode mode = KernelMode::kFwdBwd;
  GrpoConfig config;
};

// The module of `spec`: validated config, parameters and outputs named as in
// docs/GRPO_SPEC.md, verified. InvalidArgument for a bad config or a mode
// the kernel does not have.
absl::StatusOr<std::unique_ptr<hlo::HloModule>> BuildKernel(const KernelSpec& spec);

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_BUILD_KERNEL_H_
