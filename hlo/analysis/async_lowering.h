// Rewrites XLA's asynchronous start/done pairs into the synchronous op they
// overlap with other work, for running on the emulator (which has nothing
// to overlap): async-start/-update/-done becomes a call of the wrapped
// computation (inlined afterwards like any call), all-reduce-start/-done an
// all-reduce, all-gather-start/-done an all-gather, collective-permute-
// start/-done a collective-permute and copy-start/-done a copy. A pair whose
// start or update has another user stays as it is; running it then fails
// naming its opcode, as send/recv do.
#ifndef TPUOFF_HLO_ANALYSIS_ASYNC_LOWERING_H_
#define TPUOFF_HLO_ANALYSIS_ASYNC_LOWERING_H_

#include <cstdint>

#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// Returns how many pairs were rewritten. The synchronous op takes the done's
// name (outputs keep their names) and the start's attributes and metadata.
int64_t LowerAsyncPairs(HloModule* module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_ASYNC_LOWERING_H_
