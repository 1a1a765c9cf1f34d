// A loop over the blocks [start, start + width) of a range [0, total): a
// while loop over the full blocks (dynamic start, static width) followed by
// one straight-line tail block of static width total % block. Nothing is
// padded or copied to make the range a multiple of the block, and no
// dynamic-slice start is ever out of range (XLA would clamp it).
#ifndef TPUOFF_KERNELS_BLOCK_LOOP_H_
#define TPUOFF_KERNELS_BLOCK_LOOP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "hlo/ir/builder.h"

namespace tpuoff::kernels {

// Emits one block into `b` (the loop body's builder, or the caller's for a
// straight-line block). `start` is an s32 scalar: the loop counter times the
// block inside the loop, a constant otherwise. `invariants` and `carried` are
// the values of the caller's arrays as seen from `b`. Returns the new carried
// values (same count, shapes and types).
using BlockBodyFn = std::function<std::vector<hlo::XlaOp>(
    hlo::XlaBuilder* b, hlo::XlaOp start, int64_t width,
    absl::Span<const hlo::XlaOp> invariants, absl::Span<const hlo::XlaOp> carried)>;

struct BlockLoopOptions {
  // Base name of the loop's body/condition computations.
  std::string name = "block_loop";
  // With at most this many full blocks, they are emitted straight-line
  // instead of as a while loop (0: always a loop when there is a full block).
  int64_t max_unrolled_blocks = 1;
  // The tail block after a loop reads its invariants (and the carried
  // values) through an optimization barrier with the loop's results, so it
  // runs after the loop. Otherwise XLA may hoist the tail's work that does
  // not need the carried values above the loop, and keep what it computed
  // alive across the whole loop.
  bool tail_after_loop = false;
};

// Runs `body` over [0, total) in blocks of `block` (> 0; clamped to total)
// and returns the final carried values. Invariants travel through the loop
// state unchanged (a while body sees only its parameter). Errors are
// reported to `b` (and to its Build()).
std::vector<hlo::XlaOp> ForEachBlock(hlo::XlaBuilder* b, int64_t total, int64_t block,
                                     absl::Span<const hlo::XlaOp> invariants,
                                     absl::Span<const hlo::XlaOp> carried,
                                     const BlockBodyFn& body,
                                     const BlockLoopOptions& options = {});

}  // namespace tpuoff::kernels

#endif  // TPUOFF_KERNELS_BLOCK_LOOP_H_
