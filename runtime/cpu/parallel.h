// The emulator's fork-join pool for data-parallel loops. Unlike an OpenMP
// parallel region it never busy-waits for long: workers spin a few
// microseconds for the next loop, then sleep, so a loaded machine (other
// processes on the same cores) costs a wake-up per loop, not a time slice
// per barrier. A loop is cut into a fixed set of contiguous pieces handed
// out first come first served (a thread slowed by other load takes fewer);
// callers keep results independent of which thread runs which piece.
#ifndef TPUOFF_RUNTIME_CPU_PARALLEL_H_
#define TPUOFF_RUNTIME_CPU_PARALLEL_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace tpuoff::runtime {

// Calls fn(begin, end) on up to `num_threads` threads (the caller is one of
// them) for contiguous, non-empty ranges covering [0, n) once (at most 8
// per thread; a thread may get several). Returns when every call has
// returned. If the pool is busy
// (another ParallelFor in flight, e.g. from another simulated device's
// thread) or num_threads <= 1, runs fn(0, n) on the calling thread.
void ParallelFor(int num_threads, int64_t n,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// Threads the pool can use at once (the hardware's, at least 1).
int MaxParallelism();

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_CPU_PARALLEL_H_
