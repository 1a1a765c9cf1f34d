// Process CPU seconds (all threads, user + system) for the Google
// Benchmarks' manual times: on a machine shared with other jobs they move
// far less than wall time.
#ifndef TPUOFF_TOOLS_BENCH_CPU_TIME_H_
#define TPUOFF_TOOLS_BENCH_CPU_TIME_H_

#include <sys/resource.h>

namespace tpuoff {

inline double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace tpuoff

#endif  // TPUOFF_TOOLS_BENCH_CPU_TIME_H_
