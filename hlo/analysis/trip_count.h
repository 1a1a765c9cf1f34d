// Static trip counts of while loops, for the cost model: XLA's
// backend_config `known_trip_count`, or a counted loop — an integer
// induction variable in the state tuple, started from a constant, stepped by
// a constant in the body, and compared with a constant in the condition
// (the form of tpuoff's tile loops and of jax's fori_loop / scan).
#ifndef TPUOFF_HLO_ANALYSIS_TRIP_COUNT_H_
#define TPUOFF_HLO_ANALYSIS_TRIP_COUNT_H_

#include <cstdint>
#include <optional>

#include "hlo/ir/instruction.h"

namespace tpuoff::hlo {

// The number of times `loop` (a while) runs its body; nullopt when unknown.
std::optional<int64_t> WhileTripCount(const HloInstruction& loop);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_TRIP_COUNT_H_
