// Inlines `call` instructions into their callers, as XLA's CallInliner does
// before buffer assignment: values passed through a call then live in the
// caller's buffers, so e.g. a dynamic-update-slice in a called computation
// (lax.scan's stacked outputs) updates the loop's buffer in place instead of
// copying a borrowed one. Fusions whose root updates a parameter in place
// (dynamic-update-slice, scatter: XLA:CPU's optimised scans) are inlined for
// the same reason.
#ifndef TPUOFF_HLO_ANALYSIS_CALL_INLINER_H_
#define TPUOFF_HLO_ANALYSIS_CALL_INLINER_H_

#include <cstdint>

#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// Most instructions inlining may add to a module; calls past it stay calls.
inline constexpr int64_t kMaxInlinedInstructions = int64_t{1} << 24;

// Inlines every call and in-place fusion (callees stay in the module,
// possibly unused); returns how many were inlined.
int64_t InlineCalls(HloModule* module);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_CALL_INLINER_H_
