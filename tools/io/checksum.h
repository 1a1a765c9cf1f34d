// The checksum `tpuoff run` prints per output.
#ifndef TPUOFF_TOOLS_IO_CHECKSUM_H_
#define TPUOFF_TOOLS_IO_CHECKSUM_H_

#include <cstdint>
#include <string>

#include "hlo/ir/literal.h"

namespace tpuoff::tools {

// Order-independent summary of an array literal, printed by `run` so results
// can be compared at a glance: sums in double over the finite elements,
// counts of NaN, +inf and -inf elements (so +inf and -inf never add up to a
// NaN sum), and a hash of the raw bytes (bit-exactness).
// Both are defined per 1 MiB chunk of the raw bytes:
// - hash: 32 lanes of 32-bit FNV-1a, lane l over the chunk's 4-byte
//   little-endian words l, l+32, l+64, ... (a short last word zero-padded),
//   then the chunk's length and the 32 lanes in order through 64-bit
//   FNV-1a; the chunks' hashes combined in order by 64-bit FNV-1a;
// - sums: sixteen lanes, element i of a whole group of sixteen in lane
//   i % 16 and the ragged tail in lane 0, each lane adding in element
//   order; the lanes added in order, then the chunks in order.
// Chunks are processed in parallel; results do not depend on the thread
// count.
struct Checksum {
  double sum = 0;      // of the finite elements
  double abs_sum = 0;  // of the finite elements
  int64_t nan_count = 0;
  int64_t pos_inf_count = 0;
  int64_t neg_inf_count = 0;
  uint64_t hash = 0;
};
Checksum ComputeChecksum(const hlo::Literal& literal);
// "sum=... abs_sum=... hash=0123456789abcdef" (+ " nan=N", " +inf=N",
// " -inf=N" when N > 0).
std::string FormatChecksum(const Checksum& c);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_CHECKSUM_H_
