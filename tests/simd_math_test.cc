// Vectorised exp/log (runtime/cpu/simd_math.h) against double-precision libm,
// special values, and independence from the array length (tails), plus the
// fork-join pool (runtime/cpu/parallel.h) and the host block cache
// (runtime/cpu/host_memory.h).
#include "runtime/cpu/simd_math.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"
#include "tests/sanitizer.h"

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

// Tolerances (runtime/cpu/simd_math.h states them): exp 1.02 ulp (1.01
// measured on every 3rd float), log 0.9 ulp (0.83 measured); relative error
// below 2^-23 for results in the normal range. Builds without FMA (the
// sanitizer build's SSE path) round differently and must meet them too.
constexpr double kExpUlp = 1.02;
constexpr double kLogUlp = 0.9;
constexpr double kMaxRelError = 1.0 / (1 << 23);

struct Worst {
  double ulp = 0, rel = 0;
  float ulp_at = 0, rel_at = 0;
};

Worst Measure(void (*fn)(const float*, float*, int64_t), double (*ref)(double),
              const std::vector<float>& x) {
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
  Worst w;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = ref(static_cast<double>(x[i]));
    const double u = UlpError(y[i], want);
    if (u > w.ulp) {
      w.ulp = u;
      w.ulp_at = x[i];
    }
    if (std::fabs(want) >= std::numeric_limits<float>::min() &&
        std::fabs(want) <= std::numeric_limits<float>::max()) {
      const double r = std::fabs(y[i] - want) / std::fabs(want);
      if (r > w.rel) {
        w.rel = r;
        w.rel_at = x[i];
      }
    }
  }
  return w;
}

// n points evenly spaced over [lo, hi].
std::vector<float> Grid(float lo, float hi, int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / (n - 1);
  return x;
}

double Exp(double x) { return std::exp(x); }
double Log(double x) { return std::log(x); }

TEST(SimdMathTest, ExpAccuracy) {
  struct Range {
    const char* what;
    std::vector<float> x;
  };
  const std::vector<Range> ranges = {
      {"every 4099th float", SweepAllFloats()},
      {"softmax x - max in [-20, 0]", Grid(-20.0f, 0.0f, 1 << 20)},
      {"[-87.3, 88.7] (normal results)", Grid(-87.33f, 88.72f, 1 << 20)},
      {"[-104, -87.3] (subnormal results)", Grid(-104.0f, -87.34f, 1 << 18)},
  };
  for (const Range& r : ranges) {
    const Worst w = Measure(&simd::Exp, &Exp, r.x);
    EXPECT_LE(w.ulp, kExpUlp) << r.what << ": at x = " << w.ulp_at;
    EXPECT_LE(w.rel, kMaxRelError) << r.what << ": at x = " << w.rel_at;
  }
}

TEST(SimdMathTest, LogAccuracy) {
  struct Range {
    const char* what;
    std::vector<float> x;
  };
  const std::vector<Range> ranges = {
      {"every 4099th float", SweepAllFloats()},
      // The sums a log-sum-exp takes the log of: 1 up to the vocabulary.
      {"sums in [1, 151936]", Grid(1.0f, 151936.0f, 1 << 20)},
      {"[1, 2] densely", Grid(1.0f, 2.0f, 1 << 20)},
      {"(0, 1)", Grid(1e-30f, 1.0f, 1 << 18)},
  };
  for (const Range& r : ranges) {
    const Worst w = Measure(&simd::Log, &Log, r.x);
    EXPECT_LE(w.ulp, kLogUlp) << r.what << ": at x = " << w.ulp_at;
    EXPECT_LE(w.rel, kMaxRelError) << r.what << ": at x = " << w.rel_at;
  }
}

double Tanh(double x) { return std::tanh(x); }

TEST(SimdMathTest, TanhAccuracy) {
  struct Range {
    const char* what;
    std::vector<float> x;
  };
  const std::vector<Range> ranges = {
      {"every 4099th float", SweepAllFloats()},
      {"[-10, 10]", Grid(-10.0f, 10.0f, 1 << 20)},
      {"around the switch at 0.625", Grid(0.6f, 0.65f, 1 << 18)},
      {"[-1e-3, 1e-3]", Grid(-1e-3f, 1e-3f, 1 << 18)},
  };
  for (const Range& r : ranges) {
    const Worst w = Measure(&simd::Tanh, &Tanh, r.x);
    EXPECT_LE(w.ulp, 2.0) << r.what << ": at x = " << w.ulp_at;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.0f, -0.0f, inf, -inf, nan, 1e-40f, -1e-40f, 50.0f, -50.0f};
  std::vector<float> y(x.size());
  simd::Tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::signbit(y[1]));
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 1e-40f);
  EXPECT_EQ(y[6], -1e-40f);
  EXPECT_EQ(y[7], 1.0f);
  EXPECT_EQ(y[8], -1.0f);
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

  // Far outside the range the polynomial covers, both signs, and NaN of
  // either sign: exp saturates to 0 / inf or stays NaN.
  const float fmax = std::numeric_limits<float>::max();
  std::vector<float> far = {89.5f, -104.5f, 1e30f, -1e30f, fmax, -fmax, -nan, 3e9f, -3e9f};
  std::vector<float> ef(far.size());
  simd::Exp(far.data(), ef.data(), static_cast<int64_t>(far.size()));
  for (size_t i = 0; i < far.size(); ++i) {
    if (std::isnan(far[i])) {
      EXPECT_TRUE(std::isnan(ef[i]));
    } else {
      EXPECT_EQ(ef[i], far[i] > 0 ? inf : 0.0f) << "exp(" << far[i] << ")";
    }
  }
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

TEST(HostMemoryTest, MappedBlocksAreZeroWritableAndRecycled) {
  // Blocks of 8 MiB and more are mapped with their pages populated.
  ReleaseHostCache();
  const size_t big = (size_t{9} << 20) + 100;
  uint8_t* a = static_cast<uint8_t*>(HostAlloc(big));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 7, big);
  EXPECT_EQ(a[big - 1], 7);
  HostFree(a);
  EXPECT_GE(HostCacheBytes(), static_cast<int64_t>(big));
  void* b = HostAlloc(big);
  EXPECT_EQ(b, a);
  HostFree(b);
  ReleaseHostCache();
  EXPECT_EQ(HostCacheBytes(), 0);
}


TEST(HostMemoryTest, LargeBlocksArePopulatedUpFrontInSlices) {
  // 200 MiB + a ragged tail: populated by up to three threads (64 MiB
  // slices, MADV_POPULATE_WRITE) or one MAP_POPULATE call; either way every
  // page is resident and zero before the caller touches it.
  if (testing::kUnderAddressSanitizer) GTEST_SKIP() << "blocks are malloc blocks under ASan";
  ReleaseHostCache();
  const size_t big = (size_t{200} << 20) + 12345;
  uint8_t* a = static_cast<uint8_t*>(HostAlloc(big));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (big + page - 1) / page;
  std::vector<unsigned char> resident(pages, 0);
  ASSERT_EQ(mincore(a, pages * page, resident.data()), 0);
  size_t missing = 0;
  for (unsigned char r : resident) missing += (r & 1) ? 0 : 1;
  EXPECT_EQ(missing, 0u) << "of " << pages << " pages";
  for (size_t off : {size_t{0}, size_t{64} << 20, size_t{128} << 20, big - 1}) {
    EXPECT_EQ(a[off], 0) << off;
    a[off] = 5;
  }
  HostFree(a);
  ReleaseHostCache();
  EXPECT_EQ(HostCacheBytes(), 0);
}

}  // namespace
}  // namespace tpuoff::runtime
