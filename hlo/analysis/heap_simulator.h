// Heap simulation over buffer live ranges, with liveness kept apart from
// placement (as in XLA's heap_simulator): the no-fragmentation peak is the
// most bytes live at any one time, a lower bound for every allocator; a
// best-fit placement assigns offsets in one linear heap and reports the
// heap size that placement needs (>= the peak; the difference is
// fragmentation).
#ifndef TPUOFF_HLO_ANALYSIS_HEAP_SIMULATOR_H_
#define TPUOFF_HLO_ANALYSIS_HEAP_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace tpuoff::hlo {

// A buffer live over logical times [start, end): allocated at `start`,
// freed at `end` (an interval ending at t and one starting at t do not
// overlap).
struct LiveInterval {
  int64_t bytes = 0;
  int64_t start = 0;
  int64_t end = 0;
};

struct HeapPeak {
  int64_t bytes = 0;  // most bytes live at once (0 when nothing is)
  int64_t time = -1;  // first time the peak is reached
  // Intervals live at `time`, largest first (ties: lower index first).
  std::vector<int> live;
};

// The no-fragmentation peak, by a sweep over interval ends and starts.
HeapPeak FindPeak(absl::Span<const LiveInterval> intervals);

struct HeapPlacement {
  int64_t heap_bytes = 0;        // end of the highest placed buffer
  std::vector<int64_t> offsets;  // per interval
};

// Global decreasing-size best fit (XLA's default heap): buffers are placed
// largest first (ties: longer-lived, then earlier, then lower index), each
// in the smallest gap left by already placed buffers whose intervals
// overlap it, or above them when no gap fits. O((n + P) log n) for P
// overlapping pairs (CountOverlappingPairs): a long program whose buffers
// live briefly places in near-linear time; one where everything is live at
// once is quadratic, so callers bound P first.
HeapPlacement BestFitPlacement(absl::Span<const LiveInterval> intervals);

// The number of pairs of (non-empty) intervals that overlap, in
// O(n log n): the work BestFitPlacement does beyond sorting.
int64_t CountOverlappingPairs(absl::Span<const LiveInterval> intervals);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_HEAP_SIMULATOR_H_
