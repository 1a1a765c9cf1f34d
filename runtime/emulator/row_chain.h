// Row chains: consecutive fused steps of a planned computation that the
// emulator runs row chunk by row chunk instead of step by step, so a chunk
// of rows read by the first step is still in L1/L2 when the later steps read
// it again. The case that matters: softmax-like math over [rows, V] — a max
// reduce, then a reduce of exp(x - max) over the same rows, then (in the
// untiled kernels) the elementwise gradient — where step-by-step execution
// streams the whole array from memory once per step.
//
// A chain has R rows. Each member step splits into R row units: a reduce
// whose kept dimensions multiply to R (a row is one reduce output element,
// reduced whole, in the same order as ever: results are bit-identical), or
// an elementwise loop whose leading dimensions multiply to R (a row is the
// elements under them). Every load of an array written inside the chain
// must read only the row it computes: an array with R * L elements read at
// row r within [r*L, (r+1)*L) (a broadcast of a per-row value, or the same
// row of a [rows, V] array). Dynamic offsets and reduce init values never
// come from inside the chain; dynamic-update-slice steps never join one.
// Constant steps between them (a reduce's init value materialised in a loop
// body) join too: they read nothing and are written before the chain runs.
//
// The buffer plan is untouched: the executor allocates and frees (accounts)
// in the planned order, and only returns the host memory of buffers freed
// inside a chain once the whole chain has run.
#ifndef TPUOFF_RUNTIME_EMULATOR_ROW_CHAIN_H_
#define TPUOFF_RUNTIME_EMULATOR_ROW_CHAIN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "hlo/analysis/buffer_plan.h"
#include "runtime/emulator/loop_program.h"

namespace tpuoff::runtime {

struct RowChain {
  int first = 0;  // step indices of the plan, inclusive; >= 2 fused steps
  int last = 0;
  int64_t rows = 0;  // R
  // Per fused member step (first..last, constant steps skipped): row units
  // of LoopExecution per row (1 for a reduce; the elements under one row
  // for an elementwise loop).
  std::vector<int64_t> units_per_row;
  int64_t rows_per_chunk = 1;  // rows a thread runs through all steps at once
  int64_t elements = 0;        // iteration-space elements of all steps
};

// The chains of `plan`, disjoint, in step order. `program` returns the
// compiled program of a fused step (nullptr for other steps).
std::vector<RowChain> FindRowChains(
    const hlo::ComputationPlan& plan,
    const std::function<const LoopProgram*(const hlo::Step&)>& program);

// Runs chain member executions (one per fused step, in order) over all rows:
// chunks of rows spread over `num_threads`, each chunk through every step.
void RunRowChain(const RowChain& chain, const std::vector<LoopExecution>& steps,
                 int num_threads);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_ROW_CHAIN_H_
