// The emulator's fork-join pool (runtime/cpu/parallel.h): every index of a
// loop runs exactly once, in contiguous non-empty ranges, whatever the thread
// count, however many loops follow each other (workers that wake late must
// not take a piece of a later loop), with concurrent and nested callers and
// with a piece that is much slower than the others.
#include "runtime/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tpuoff::runtime {
namespace {

// Runs one loop; returns the ranges it was called with, sorted.
std::vector<std::pair<int64_t, int64_t>> Ranges(int threads, int64_t n) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  ParallelFor(threads, n, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> l(mu);
    ranges.emplace_back(begin, end);
  });
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ParallelForTest, CoversEveryIndexOnceInContiguousRanges) {
  for (int threads : {1, 2, 3, 4, 64}) {
    for (int64_t n : {0, 1, 2, 3, 7, 8, 15, 16, 17, 100, 1000, 100003}) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << " n " << n);
      const auto ranges = Ranges(threads, n);
      int64_t next = 0;
      for (const auto& [begin, end] : ranges) {
        EXPECT_EQ(begin, next) << "a gap or an overlap";
        EXPECT_LT(begin, end) << "an empty range";
        next = end;
      }
      EXPECT_EQ(next, n);
      // At most 8 pieces per participating thread (the header's promise).
      const int64_t participants = std::min<int64_t>({threads, MaxParallelism(), n});
      EXPECT_LE(static_cast<int64_t>(ranges.size()), std::max<int64_t>(1, 8 * participants));
      if (threads <= 1 || n <= 1) {
        EXPECT_LE(ranges.size(), 1u);
      }
    }
  }
}

// Many short loops back to back, each writing its own generation into every
// index: a piece run for the wrong loop (a worker waking after its loop ended
// and taking a piece of the next) would leave a stale value or a count != 1.
TEST(ParallelForTest, BackToBackLoopsNeverMix) {
  constexpr int64_t kN = 37;
  std::vector<std::atomic<int>> hits(kN);
  std::vector<int> value(kN, -1);
  for (int loop = 0; loop < 20000; ++loop) {
    for (auto& h : hits) h.store(0, std::memory_order_relaxed);
    const int64_t n = 1 + loop % kN;
    ParallelFor(MaxParallelism(), n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        hits[i].fetch_add(1, std::memory_order_relaxed);
        value[i] = loop;
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[i].load(), 1) << "loop " << loop << " index " << i;
      ASSERT_EQ(value[i], loop) << "loop " << loop << " index " << i;
    }
    for (int64_t i = n; i < kN; ++i) ASSERT_EQ(hits[i].load(), 0) << "loop " << loop;
  }
}

// A loop returns only after every piece has returned, also when one piece is
// slow and another thread runs it.
TEST(ParallelForTest, WaitsForASlowPiece) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int64_t> sum{0};
    ParallelFor(MaxParallelism(), 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if (i == round % 16) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        sum.fetch_add(i + 1, std::memory_order_relaxed);
      }
    });
    EXPECT_EQ(sum.load(), 16 * 17 / 2) << "round " << round;
  }
}

// Callers on several threads at once, each also nesting a loop inside its
// pieces: the pool runs one loop at a time, the others run on their caller.
TEST(ParallelForTest, ConcurrentAndNestedCallers) {
  constexpr int kCallers = 4;
  std::vector<int64_t> totals(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int loop = 0; loop < 300; ++loop) {
        std::atomic<int64_t> sum{0};
        ParallelFor(MaxParallelism(), 10, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            ParallelFor(MaxParallelism(), 5, [&](int64_t b, int64_t e) {
              for (int64_t j = b; j < e; ++j) sum.fetch_add(i * 5 + j, std::memory_order_relaxed);
            });
          }
        });
        totals[c] += sum.load();
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(totals[c], 300 * (50 * 49 / 2)) << "caller " << c;
}

}  // namespace
}  // namespace tpuoff::runtime
