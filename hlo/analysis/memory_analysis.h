// Static HBM analysis of one device's program, without running it.
//
// The module is planned exactly as the emulator plans it (hlo/analysis/buffer_plan.h:
// same schedule, fusion groups, aliasing and frees), and the plan is replayed
// the way runtime/emulator/executor.cc walks it: entry arguments are allocated first,
// each step allocates its buffers, runs (callees recursively: call, fusion
// and conditional results come back from the callee; a while copies the
// state leaves the plan says to copy, then runs condition, body, condition,
// one iteration standing for all since every iteration allocates the same),
// then frees its dying buffers. Every allocation gets a live range
// [alloc time, free time) in logical time (the replay's event number), and
// a heap simulation over those ranges (hlo/analysis/heap_simulator.h) gives the
// no-fragmentation peak, which equals the emulator's measured device peak,
// and a best-fit placement's heap size. A TPU view repeats both with every
// buffer padded to v6e tiles (hlo/analysis/tpu_layout.h).
//
// Data-dependent control flow is resolved statically: a while body is
// assumed to run at least once (a loop that runs zero times peaks lower in
// the emulator), and a conditional takes the branch with the highest peak
// (the emulator runs the branch the data selects).
#ifndef TPUOFF_HLO_ANALYSIS_MEMORY_ANALYSIS_H_
#define TPUOFF_HLO_ANALYSIS_MEMORY_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/analysis/buffer_plan.h"
#include "hlo/ir/module.h"

namespace tpuoff::hlo {

// One allocation of the replayed program: a planned buffer in one
// activation of its computation.
struct AllocatedBuffer {
  // The instruction whose value it holds: a parameter for arguments, the
  // op for temporaries, the while for loop state copied before the loop,
  // the root for root copies.
  const HloInstruction* instruction = nullptr;
  const HloComputation* computation = nullptr;  // whose step allocated it
  Shape shape;            // array shape
  int64_t bytes = 0;      // as the emulator accounts it (dense)
  int64_t tpu_bytes = 0;  // padded to v6e tiles
  // kArgument: an entry argument; kOutput: part of the entry's result;
  // kTemp: everything else (XLA's temp allocation).
  BufferKind kind = BufferKind::kTemp;
  int64_t start = 0;  // live over [start, end) in logical time
  int64_t end = 0;
  // A later step writes another value over it in place (an elementwise op
  // or dynamic-update-slice on its dying operand): it then also holds that
  // value, not only `instruction`'s.
  bool written_over = false;
};

// Where in the program a logical time falls: the chain of steps from the
// entry down to the innermost computation, e.g.
// "main step 7 (%loop) > body step 3 (fusion.e(4 ops))".
struct ProgramPoint {
  std::string where;
  int entry_step = -1;                          // step of the entry
  const HloInstruction* instruction = nullptr;  // innermost step's instr
};

struct MemoryPeak {
  int64_t bytes = 0;
  int64_t time = -1;  // first logical time at the peak
  ProgramPoint point;
  // AllocatedBuffer indices live at the peak, largest first.
  std::vector<int> live;
  // The peak split like XLA's compiled memory stats.
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t temp_bytes = 0;
};

struct MemoryAnalysis {
  std::string module_name;
  std::vector<AllocatedBuffer> buffers;
  int64_t num_times = 0;  // logical times used (allocations + frees)
  MemoryPeak peak;        // dense bytes: the emulator's peak
  MemoryPeak tpu_peak;    // every buffer padded to v6e tiles
  // Heap size of a best-fit placement, and the same with padded buffers;
  // -1 when not computed (more than 2^25 pairs of buffers live together,
  // where the placement's cost grows quadratically).
  int64_t best_fit_bytes = 0;
  int64_t tpu_best_fit_bytes = 0;
  // Totals over the program (not only at the peak).
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;

  // An exact, deterministic summary: the peak, its time and program point,
  // the split, the best fit and the `top` largest live buffers, for both
  // views (tests compare it as text).
  std::string ToString(int top = 10) const;
};

struct MemoryAnalysisOptions {
  // Plan as the emulator will run (RunOptions::disable_fusion <->
  // plan.enable_fusion = false).
  PlanOptions plan;
};

// Plans `module` (BufferPlan::Build) and analyses the entry program of one
// device. Errors are the planner's (e.g. a computation that calls itself).
absl::StatusOr<MemoryAnalysis> AnalyzeMemory(
    const HloModule& module, const MemoryAnalysisOptions& options = {});

// Analyses an existing plan of `module`.
absl::StatusOr<MemoryAnalysis> AnalyzeMemory(const HloModule& module,
                                             const BufferPlan& plan);

// Per-device results, identical devices grouped: an SPMD module runs the
// same program with the same shapes on all num_partitions devices, so its
// devices form one group; several per-device modules group by equal
// analyses.
struct DeviceGroup {
  std::vector<int64_t> devices;  // device indices, ascending
  MemoryAnalysis analysis;
};

struct DeviceMemoryReport {
  std::string module_name;
  int64_t num_devices = 1;
  std::vector<DeviceGroup> groups;
};

absl::StatusOr<DeviceMemoryReport> AnalyzeDeviceMemory(
    const HloModule& module, const MemoryAnalysisOptions& options = {});

// One module per device (device d runs modules[d]); equal analyses (same
// peaks, best fits, splits and live sets) are grouped.
absl::StatusOr<DeviceMemoryReport> AnalyzeDeviceMemory(
    const std::vector<const HloModule*>& modules,
    const MemoryAnalysisOptions& options = {});

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_ANALYSIS_MEMORY_ANALYSIS_H_
