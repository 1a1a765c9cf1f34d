// XLA:TPU's two memories on a v6e TensorCore, modelled on a MemoryAnalysis:
// which of the program's buffers XLA's buffer assignment puts in HBM and
// which its memory-space assignment (MSA) keeps in on-chip VMEM, and the
// HBM that XLA then allocates, counted as XLA counts it.
//
// What XLA does (seen in its optimised modules, `tpuoff compile
// --dump-optimized`, where a VMEM buffer's layout carries memory space
// S(1)):
//   - Entry parameters and outputs are the caller's HBM buffers. XLA
//     allocates each output for the whole program (a separate allocation,
//     not shared with temporaries), so its HBM is
//       argument + output + temp - alias
//     with `temp` the peak of the HBM temporaries over the program. (MSA may
//     stage a copy of a parameter or output in VMEM; the HBM buffer stays.)
//   - Program-scoped temporaries go to VMEM when MSA finds room: a v6e core
//     has 128 MiB of VMEM, of which XLA reserves the scoped-VMEM limit
//     (--xla_tpu_scoped_vmem_limit_kib; libtpu's own message: "VmemSizeBytes
//     - scoped_vmem_limit ... MSA can allocate in VMEM directly") for each
//     instruction's own operand windows; the largest scoped allocation in
//     the dumps of tpuoff's kernels is 29.6 MiB, within a 32 MiB limit.
//     The rest, 96 MiB, is MSA's budget.
//
// How MSA chooses (xla/service/memory_space_assignment in openxla/xla): it
// ranks every buffer by the time VMEM would save its reads and writes
// (instructions bound by memory, not compute; each enclosing while loop
// multiplies the saving) divided by the square root of its size, and gives
// VMEM to the best-ranked first, for its whole live range or, failing
// that, for the stretches between its uses (prefetching from and evicting
// to HBM). A value with an add-dependency among its positions is never
// placed in VMEM (the fused kernel uses that to keep d_lm_head's loop state
// in HBM). tpuoff does not have XLA:TPU's per-instruction cost numbers, so
// the model is a simplification that reproduces what the optimised modules
// of tpuoff's tiled and fused kernels show:
//   1. Buffers of the emulator's plan that XLA:TPU does not materialise are
//      dropped (AbsorbedByXlaTpuDot: dot products accumulated by an add,
//      operand slices of dots).
//   2. Arguments read whole by every iteration of a loop are placed in VMEM
//      for the loop first (v6e_loop_residency.h; the fused kernel's
//      `hidden` in its backward loop).
//   3. Then every temporary (BufferKind::kTemp, TPU-padded size), smallest
//      first (ties: earlier first), when it and what is already placed fit
//      in the budget at every time of its live range; otherwise it stays in
//      HBM. Of buffers VMEM saves similar time for, MSA's √size divisor
//      prefers the smaller; and in the dumps, what XLA leaves in HBM when
//      not everything fits is the largest per-iteration tile (e.g. the f32
//      logits tile rather than the smaller d_lm_head accumulator and
//      lm_head tile of a token-chunked backward), and a buffer as large as
//      the whole budget (the f32 [16384,1536] d_hidden accumulator, 96 MiB)
//      never.
// When the temporaries fit the budget (the regime tpuoff's tiled and fused
// kernels are designed for), nothing is left in HBM and the model's HBM is
// exact up to XLA's own bookkeeping temp (< 0.5 MB). Beyond the budget it
// follows the placements seen in the dumps, but MSA's cost model can
// choose otherwise for other programs: there it is an estimate, and
// `tpuoff compile` shows XLA's own figure beside it.
#ifndef TPUOFF_HLO_ANALYSIS_V6E_MEMORY_SPACES_H_
#define TPUOFF_HLO_ANALYSIS_V6E_MEMORY_SPACES_H_

#include <cstdint>
#include <vector>

#include "hlo/analysis/memory_analysis.h"

namespace tpuoff::hlo {

struct V6eMemoryOptions {
  int64_t vmem_bytes = int64_t{128} << 20;        // per TensorCore
  int64_t scoped_vmem_bytes = int64_t{32} << 20;  // XLA's scoped-VMEM reserve
  int64_t msa_budget() const { return vmem_bytes - scoped_vmem_bytes; }
  // Arguments read whole in every iteration of a loop are placed in VMEM
  // for the loop first (v6e_loop_residency.h).
  bool loop_residents = true;
};

struct V6eMemorySplit {
  // TPU-padded, over the whole program (each entry buffer once).
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  // Peak of the temporaries left in HBM.
  int64_t hbm_temp_bytes = 0;
  // argument + output + hbm_temp: XLA's HBM allocation for the program.
  int64_t hbm_bytes = 0;
  // Peak of the temporaries placed in VMEM (<= the MSA budget).
  int64_t vmem_bytes = 0;
  // Per MemoryAnalysis::buffers entry: placed in VMEM.
  std::vector<bool> in_vmem;
  int64_t num_vmem_buffers = 0;
  int64_t num_hbm_temps = 0;
  // The largest temporary left in HBM (0 when none).
  int64_t largest_hbm_temp = 0;
  // Temporaries of the emulator's plan that XLA:TPU fuses into a dot
  // (AbsorbedByXlaTpuDot), counted in neither memory.
  int64_t num_fused = 0;
  // (argument, loop) pairs placed in VMEM for the loop.
  int64_t num_loop_residents = 0;
};

// Whether XLA:TPU fuses the value of temporary `b` into a dot instead of
// keeping it as a buffer, as its optimised modules show for tpuoff's fused
// kernel (never when the emulator writes another value over `b` in place):
//   - a dot whose only user is an add: the output fusion accumulates the
//     product straight into the add's result (`convolution_add_fusion`:
//     the backward's d_hidden += dlogits·wᵀ and d_lm_head tile += hᵀ·dlogits);
//   - a slice or dynamic-slice read only by dots (directly or through a
//     select over it, e.g. zeroed padding columns): the dot fusion reads
//     its window of the sliced array (the lm_head tile of each vocab step).
bool AbsorbedByXlaTpuDot(const AllocatedBuffer& b);

V6eMemorySplit SplitV6eMemory(const MemoryAnalysis& analysis,
                              const V6eMemoryOptions& options = {});

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_V6E_MEMORY_SPACES_H_
