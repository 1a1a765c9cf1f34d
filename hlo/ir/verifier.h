// Structural and shape checks of a whole module. Errors name the computation
// and the instruction.
#ifndef TPUOFF_HLO_IR_VERIFIER_H_
#define TPUOFF_HLO_IR_VERIFIER_H_

#include "absl/status/status.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

absl::Status VerifyModule(const HloModule& module);

// Whether the HLO text and proto readers would take `module` back: every
// array within their per-array byte limit (hlo/ir/limits.h). A module built
// in memory (a kernel for huge flags, which `memory --kernel` analyses) may
// exceed it; writers check this first instead of writing what nothing reads.
absl::Status VerifyReadable(const HloModule& module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_VERIFIER_H_
