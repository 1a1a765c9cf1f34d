// Which entry parameters XLA:TPU keeps in on-chip VMEM while a loop runs:
// part of tpuoff's model of XLA:TPU's memory placement on v6e
// (v6e_memory_spaces.h).
//
// XLA's memory-space assignment (MSA) ranks every buffer by the time VMEM
// would save its accesses, loops weighing more (each nesting level counts
// as several runs), and gives VMEM to the best-ranked first. An argument
// read once per loop iteration is such a buffer: its copy in VMEM (a
// prefetch at the loop's start, slices copied asynchronously) saves one
// HBM read of all of it per iteration, while its HBM buffer stays where it
// is. XLA:TPU's optimised modules (`tpuoff compile --dump-optimized`, memory
// space S(1)) show it for the fused LM-head kernel's `hidden` [N,H]: in
// every backward loop, sharded or not, with or without token chunks (there
// an inner loop reads it chunk by chunk, all of it per vocab tile), it is
// in VMEM for the whole loop, ahead of the loop's own temporaries; `lm_head`,
// of which each vocab step reads one [H,W] tile, is not.
//
// The rule modelled: an entry parameter is resident in VMEM during a while
// loop when one iteration of the loop reads at least all of its bytes
// (dot, elementwise or other whole reads, plus the slices it reads, inner
// loops counted times their trip counts), and it fits the VMEM budget.
#ifndef TPUOFF_HLO_ANALYSIS_V6E_LOOP_RESIDENCY_H_
#define TPUOFF_HLO_ANALYSIS_V6E_LOOP_RESIDENCY_H_

#include <cstdint>
#include <vector>

#include "hlo/analysis/memory_analysis.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::hlo {

struct V6eLoopResident {
  int buffer = -1;                       // the argument's MemoryAnalysis::buffers index
  const HloInstruction* loop = nullptr;  // the while
  int64_t start = 0;                     // the loop's logical times [start, end)
  int64_t end = 0;
  int64_t bytes = 0;            // the argument, TPU-padded
  int64_t bytes_per_trip = 0;   // of it read by one iteration of the loop
};

// Every (argument, loop) pair for which one iteration reads at least the
// whole argument, for loops whose body allocates something in the analysis
// (their time range). Loops at any depth; ordered by loop, then argument.
std::vector<V6eLoopResident> FindV6eLoopResidents(const MemoryAnalysis& analysis);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_V6E_LOOP_RESIDENCY_H_
