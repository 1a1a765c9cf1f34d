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

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_COLD_H_
