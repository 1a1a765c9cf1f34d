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
    const int64_t pieces = std::min<int64_t>({n, int64_t{kPiecesPerThread} * chunks, kMaxPieces});
    fn_ = &fn;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t gen = (job_.load() >> 32) + 1;
    // Published before job_: a worker that sees the new job finds its pieces.
    claim_.store(gen << 32 | static_cast<uint64_t>(pieces) << 16, std::memory_order_release);
    {
      std::lock_guard<std::mutex> l(mu_);
      job_.store(gen << 32 | static_cast<uint32_t>(chunks), std::memory_order_release);
    }
    job_cv_.notify_all();
    RunPieces(static_cast<uint32_t>(gen));
    // Waits for the pieces other threads took, not for the threads: a worker
    // still asleep (or not yet scheduled) when the pieces ran out is not
    // waited for; it finds none left when it wakes.
    auto all_done = [&] { return done_.load(std::memory_order_acquire) == pieces; };
    if (!SpinFor(kSpinMicros, all_done)) {
      std::unique_lock<std::mutex> l(mu_);
      done_cv_.wait(l, all_done);
    }
    fn_ = nullptr;
    return true;
  }

 private:
  // Largest piece count (16 bits of claim_).
  static constexpr int64_t kMaxPieces = 0xffff;

  // Takes pieces of loop `gen` until none is left: a participant delayed by
  // the OS (other load on its core) just takes fewer, instead of holding up
  // the loop. A piece is claimed by one compare-and-swap on the word holding
  // the generation, the piece count and the next piece, so a thread that
  // comes late (its loop finished, maybe the next one started) never takes a
  // piece of a loop it did not see, and the loop's fields are stable while
  // it runs a piece it claimed (the caller waits for every piece).
  void RunPieces(uint32_t gen) {
    uint64_t s = claim_.load(std::memory_order_acquire);
    while (true) {
      const int64_t next = static_cast<int64_t>(s & 0xffff);
      const int64_t pieces = static_cast<int64_t>((s >> 16) & 0xffff);
      if (static_cast<uint32_t>(s >> 32) != gen || next >= pieces) return;
      if (!claim_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        continue;  // s reloaded
      }
      const int64_t begin = n_ * next / pieces;
      const int64_t end = n_ * (next + 1) / pieces;
      if (begin < end) (*fn_)(begin, end);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == pieces) {
        // Taking the lock orders this after a caller's predicate check.
        { std::lock_guard<std::mutex> l(mu_); }
        done_cv_.notify_one();
      }
      s = claim_.load(std::memory_order_acquire);
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
      if (index < chunks) RunPieces(static_cast<uint32_t>(seen >> 32));
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mu_;
  // Sleeping (after the spin) on job_ / done_ changes. std::atomic::wait
  // is avoided: GCC 12's implementation can lose wake-ups.
  std::mutex mu_;
  std::condition_variable job_cv_, done_cv_;
  std::atomic<uint64_t> job_{0};    // generation << 32 | chunks
  std::atomic<uint64_t> claim_{0};  // generation << 32 | pieces << 16 | next piece
  std::atomic<int64_t> done_{0};    // pieces of the loop in flight that returned
  std::atomic<bool> stop_{false};
  // The loop in flight (written before claim_ is published).
  absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
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
