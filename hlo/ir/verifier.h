// Structural and shape checks of a whole module. Errors name the computation
// and the instruction.
#ifndef TPUOFF_HLO_IR_VERIFIER_H_
#define TPUOFF_HLO_IR_VERIFIER_H_

#include "absl/status/status.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

absl::Status VerifyModule(const HloModule& module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_VERIFIER_H_
