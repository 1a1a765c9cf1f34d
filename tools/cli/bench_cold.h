// The cold figure of a `tpuoff bench` case: what a user sees running the
// kernel once, i.e. one `tpuoff run --kernel=... --random-inputs` process
// (generating the inputs, planning, the run on fresh host memory, the
// checksums, the exit), timed from spawn to exit, with the child's CPU time
// and minor page faults from wait4. Beside the warm emulator median it gives
// the cold/warm ratio.
#ifndef TPUOFF_TOOLS_CLI_BENCH_COLD_H_
#define TPUOFF_TOOLS_CLI_BENCH_COLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/bench_cases.h"

namespace tpuoff::tools {

// The `tpuoff run` arguments (after "run") of the case's kernel with
// --random-inputs.
std::vector<std::string> ColdRunArguments(const BenchCase& c, int num_threads);

// `reps` runs of `binary` with those arguments, one process each: median
// wall and CPU seconds into t (samples too), the median minor page faults
// into *minor_faults. A failed run sets t->error (exit status and the tail
// of its stderr). These runs use the loop JIT's disk cache (jit_disk_cache.h)
// as a user's repeated runs do; with `empty_jit_cache`, one more run with
// an empty cache (its wall seconds: the loops compiled, as on a first run).
void TimeColdRuns(const std::string& binary, const BenchCase& c, int reps, int num_threads,
                  Timing* t, int64_t* minor_faults,
                  std::optional<double>* empty_jit_cache = nullptr);

// The cold runs' page floor: `reps` times mapping `bytes` of fresh memory
// the way the runtime maps its large buffers (every page populated for
// writing, on this host's threads) and returning it to the system; the
// median seconds, or nullopt when the host cannot back `bytes` (or either
// is <= 0). With the bytes of a cold run's minor page faults: what the
// kernel charges to give a process that much memory and take it back,
// before any of it is computed. (Not wait4's peak RSS: a spawned child's
// counts its parent's peak from before the exec.)
std::optional<double> TimeFreshPages(int64_t bytes, int reps);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_COLD_H_
