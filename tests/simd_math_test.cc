// Vectorised exp/log (runtime/cpu/simd_math.h) against double-precision libm,
// special values, and independence from the array length (tails), plus the
// fork-join pool (runtime/cpu/parallel.h) and the host block cache
// (runtime/cpu/host_memory.h).
#include "runtime/cpu/simd_math.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"

namespace tpuoff::runtime {
namespace {

// |got - want| in units of the float spacing at want (denormal spacing
// below the normal range).
double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : 1e9;
  const float w = static_cast<float>(want);
  if (std::isinf(w)) return std::isinf(got) && (got > 0) == (w > 0) ? 0 : 1e9;
  double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  ulp = std::max<double>(ulp, std::numeric_limits<float>::denorm_min());
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Every 4099th float bit pattern (~1M values over all signs and exponents).
std::vector<float> SweepAllFloats() {
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4099) {
    const uint32_t bits = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &bits, 4);
    xs.push_back(f);
  }
  return xs;
}

TEST(SimdMathTest, ExpWithinOneUlpEverywhere) {
  std::vector<float> x = SweepAllFloats(), y(x.size());
  simd::Exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  float at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = UlpError(y[i], std::exp(static_cast<double>(x[i])));
    if (e > worst) {
      worst = e;
      at = x[i];
    }
  }
  EXPECT_LE(worst, 1.0) << "at x = " << at;
}

TEST(SimdMathTest, LogWithinOneUlpEverywhere) {
  std::vector<float> x = SweepAllFloats(), y(x.size());
  simd::Log(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  float at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = UlpError(y[i], std::log(static_cast<double>(x[i])));
    if (e > worst) {
      worst = e;
      at = x[i];
    }
  }
  EXPECT_LE(worst, 1.0) << "at x = " << at;
}

TEST(SimdMathTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, nan, 89.0f, -104.0f, 88.72f, -87.5f, 1e-45f,
                          -1.0f};
  std::vector<float> e(x.size()), l(x.size());
  simd::Exp(x.data(), e.data(), static_cast<int64_t>(x.size()));
  simd::Log(x.data(), l.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 1.0f);
  EXPECT_EQ(e[2], inf);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[5], inf);                      // overflow
  EXPECT_EQ(e[6], 0.0f);                     // underflow
  EXPECT_GT(e[7], 3.3e38f);                  // near FLT_MAX, finite
  EXPECT_TRUE(std::isfinite(e[7]));
  EXPECT_GT(e[8], 0.0f);                     // subnormal result
  EXPECT_LT(e[8], std::numeric_limits<float>::min());
  EXPECT_EQ(l[0], -inf);
  EXPECT_EQ(l[1], -inf);
  EXPECT_EQ(l[2], inf);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_TRUE(std::isnan(l[4]));
  EXPECT_NEAR(l[9], std::log(static_cast<double>(x[9])), 1e-5);  // subnormal input
  EXPECT_TRUE(std::isnan(l[10]));
}

TEST(SimdMathTest, ResultsDoNotDependOnLengthOrOffset) {
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = -10.0f + 0.173f * i;
  std::vector<float> whole(100);
  simd::Exp(x.data(), whole.data(), 100);
  for (int start = 0; start < 20; ++start) {
    for (int n : {1, 3, 7, 15, 16, 17, 33}) {
      std::vector<float> part(n);
      simd::Exp(x.data() + start, part.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(part[i], whole[start + i]) << "start " << start << " n " << n;
      }
    }
  }
  // In place.
  std::vector<float> y = x;
  simd::Exp(y.data(), y.data(), 100);
  EXPECT_EQ(y, whole);
}

TEST(ParallelForTest, CoversTheRangeOnceInContiguousRanges) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> calls{0};
      ParallelFor(threads, n, [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        ++calls;
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
      EXPECT_LE(calls.load(), std::min<int64_t>(n, 8 * std::min(threads, MaxParallelism())))
          << threads << " threads, n " << n;
      if (threads == 1) {
        EXPECT_EQ(calls.load(), 1);
      }
    }
  }
  ParallelFor(4, 0, [&](int64_t, int64_t) { ADD_FAILURE() << "called for n = 0"; });
}

TEST(ParallelForTest, ManyLoopsInARowAndFromSeveralThreads) {
  // Back-to-back loops exercise the sleep/wake hand-off; concurrent callers
  // run inline when the pool is busy, never deadlock.
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 2000; ++r) {
        ParallelFor(MaxParallelism(), 64, [&](int64_t b, int64_t e) { sum += e - b; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(sum.load(), 3 * 2000 * 64);
}

TEST(HostMemoryTest, LargeBlocksAreRecycledSmallOnesAreNot) {
  ReleaseHostCache();
  EXPECT_EQ(HostCacheBytes(), 0);
  const size_t big = 3 * kHostCacheMinBytes + 100;
  void* a = HostAlloc(big);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, big);
  HostFree(a);
  EXPECT_GE(HostCacheBytes(), static_cast<int64_t>(big));
  void* b = HostAlloc(big);  // same size: the cached block
  EXPECT_EQ(a, b);
  EXPECT_EQ(HostCacheBytes(), 0);
  void* c = HostAlloc(big + 4096);  // another size: a new block
  EXPECT_NE(c, b);
  HostFree(b);
  HostFree(c);
  void* s = HostAlloc(100);
  ASSERT_NE(s, nullptr);
  HostFree(s);
  HostFree(nullptr);
  ReleaseHostCache();
  EXPECT_EQ(HostCacheBytes(), 0);
}

}  // namespace
}  // namespace tpuoff::runtime
