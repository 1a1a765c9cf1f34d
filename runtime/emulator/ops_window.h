// reduce-window on the host: every output element folds its window of the
// (base-dilated, padded) inputs into the init values with the reducer.
#ifndef TPUOFF_RUNTIME_EMULATOR_OPS_WINDOW_H_
#define TPUOFF_RUNTIME_EMULATOR_OPS_WINDOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/window.h"

namespace tpuoff::runtime {

// The input coordinates every output position of one dimension reads, as
// flat offsets (coordinate * the dimension's stride) in window order:
// offsets[begin[o] .. begin[o + 1]) for output position o. Padding and
// base-dilation holes are left out, as in XLA.
// Output position o of one dimension reads count[o] inputs at the flat
// offsets first[o] + j * step, j = 0, 1, ... (window order; the inputs a
// window reads always form such a progression, padding and dilation holes
// left out), so a table is O(out_dim) whatever the window size (a cumsum
// over a 151936-long axis is a window of that size per output position).
struct WindowTable {
  std::vector<int64_t> first, count;
  int64_t step = 0;
  int64_t total = 0;  // sum of count
};
// The table of window `w` over `base` input elements and `out_dim` output
// positions; `stride` is the dimension's flat input stride.
WindowTable BuildWindowTable(const hlo::WindowDimension& w, int64_t base, int64_t out_dim,
                             int64_t stride);
// A dimension whose window reads exactly its own output position.
bool TrivialWindow(const hlo::WindowDimension& w);

// Variadic reduce-window: inputs[i] and inits[i] (scalars) per input,
// outs[i] per result leaf. Window positions in padding or base-dilation
// holes contribute nothing (the accumulator starts at the init values), as
// in XLA. Each output folds its window in row-major window order, so the
// result does not depend on `num_threads` (outputs are split over threads).
// UNIMPLEMENTED when the reducer is not a scalar computation the emulator
// evaluates.
absl::Status ReduceWindowKernel(const hlo::HloInstruction& instr,
                                absl::Span<const void* const> inputs,
                                absl::Span<const void* const> inits,
                                absl::Span<void* const> outs, int num_threads);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_OPS_WINDOW_H_
