// Keeping a oneDNN primitive on the calling thread. oneDNN (Debian's build
// uses OpenMP) runs a primitive on omp_get_max_threads() threads unless
// called inside an active OpenMP parallel region; for a small primitive the
// OpenMP team's start and its barriers (whose idle threads busy-wait, on a
// machine shared with other processes for a whole time slice) cost more
// than the work. Single-threaded, the kernel oneDNN picks and its summation
// order do not depend on the thread count either.
#ifndef TPUOFF_RUNTIME_EMULATOR_ONEDNN_THREADS_H_
#define TPUOFF_RUNTIME_EMULATOR_ONEDNN_THREADS_H_

#include <omp.h>

namespace tpuoff::runtime {

// While alive, oneDNN calls from this thread run on this thread alone.
class OneDnnOnThisThread {
 public:
  OneDnnOnThisThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneDnnOnThisThread() { omp_set_num_threads(saved_); }
  OneDnnOnThisThread(const OneDnnOnThisThread&) = delete;
  OneDnnOnThisThread& operator=(const OneDnnOnThisThread&) = delete;

 private:
  int saved_;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_ONEDNN_THREADS_H_
