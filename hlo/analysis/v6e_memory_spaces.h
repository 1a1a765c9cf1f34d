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
// The model: every temporary (BufferKind::kTemp, TPU-padded size) is placed
// in VMEM, largest first (ties: earlier first), when it and the VMEM
// temporaries already placed fit in the budget at every time of its live
// range; otherwise it stays in HBM. When the program's temporaries fit the
// budget (the regime tpuoff's tiled and fused kernels are designed for),
// nothing is left in HBM and the model's HBM is exact up to padding. Beyond
// the budget MSA chooses by its own cost model (bytes accessed per byte of
// VMEM, prefetches and evictions of long-lived values), which this model
// does not reproduce: there it is an estimate, and `tpuoff compile` shows
// XLA's own figure beside it.
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
};

V6eMemorySplit SplitV6eMemory(const MemoryAnalysis& analysis,
                              const V6eMemoryOptions& options = {});

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_V6E_MEMORY_SPACES_H_
