#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tpuoff::runtime {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins up to ~`micros` for `done()`; false if it did not happen.
template <typename F>
bool SpinFor(double micros, F&& done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(micros);
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

constexpr double kSpinMicros = 20;
// Pieces a loop is cut into per participating thread (handed out first come
// first served).
constexpr int kPiecesPerThread = 8;

class Pool {
 public:
  explicit Pool(int workers) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { WorkerLoop(w + 1); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_.store(true);
      job_.store(((job_.load() >> 32) + 1) << 32);
    }
    job_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // False when another loop is in flight (the caller then runs it alone).
  bool Run(int num_threads, int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
    std::unique_lock<std::mutex> lock(run_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const int chunks = static_cast<int>(std::min<int64_t>({num_threads, size(), n}));
    fn_ = &fn;
    n_ = n;
    pieces_ = std::min<int64_t>(n, int64_t{kPiecesPerThread} * chunks);
    next_piece_.store(0);
    remaining_.store(chunks - 1);
    // One word carries the generation and the chunk count, so a worker that
    // was not part of the previous loop never reads this loop's fields.
    {
      std::lock_guard<std::mutex> l(mu_);
      const uint64_t gen = (job_.load() >> 32) + 1;
      job_.store(gen << 32 | static_cast<uint32_t>(chunks), std::memory_order_release);
    }
    job_cv_.notify_all();
    RunChunk(0, chunks);
    if (!SpinFor(kSpinMicros, [&] { return remaining_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> l(mu_);
      done_cv_.wait(l, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
    }
    fn_ = nullptr;
    return true;
  }

 private:
  // Takes pieces until none is left: a participant delayed by the OS (other
  // load on its core) just takes fewer, instead of holding up the loop.
  void RunChunk(int /*c*/, int /*chunks*/) {
    for (int64_t p; (p = next_piece_.fetch_add(1, std::memory_order_relaxed)) < pieces_;) {
      const int64_t begin = n_ * p / pieces_;
      const int64_t end = n_ * (p + 1) / pieces_;
      if (begin < end) (*fn_)(begin, end);
    }
  }

  void WorkerLoop(int index) {
    uint64_t seen = 0;  // job_ starts at 0: a late-starting worker still sees job 1
    while (true) {
      if (!SpinFor(kSpinMicros, [&] { return job_.load(std::memory_order_acquire) != seen; })) {
        std::unique_lock<std::mutex> l(mu_);
        job_cv_.wait(l, [&] { return job_.load(std::memory_order_acquire) != seen; });
      }
      seen = job_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      const int chunks = static_cast<int>(seen & 0xffffffffu);
      if (index < chunks) {
        RunChunk(index, chunks);
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          // Taking the lock orders this after a caller's predicate check.
          { std::lock_guard<std::mutex> l(mu_); }
          done_cv_.notify_one();
        }
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mu_;
  // Sleeping (after the spin) on job_ / remaining_ changes. std::atomic::wait
  // is avoided: GCC 12's implementation can lose wake-ups.
  std::mutex mu_;
  std::condition_variable job_cv_, done_cv_;
  std::atomic<uint64_t> job_{0};  // generation << 32 | chunks
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  // The loop in flight (written before job_ is published).
  absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t pieces_ = 0;
  std::atomic<int64_t> next_piece_{0};
};

Pool& GlobalPool() {
  // Leaked: workers must outlive every static destructor that might run a loop.
  static Pool* pool = new Pool(MaxParallelism() - 1);
  return *pool;
}

}  // namespace

int MaxParallelism() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ParallelFor(int num_threads, int64_t n,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn) {
  if (n <= 0) return;
  if (num_threads <= 1 || n == 1 || !GlobalPool().Run(num_threads, n, fn)) fn(0, n);
}

}  // namespace tpuoff::runtime
