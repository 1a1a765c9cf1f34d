// Accuracy sweep of the vectorised exp/log candidates (runtime/cpu/simd_math.h
// and the library alternatives of simd_alternatives.h) against double-precision
// libm: max ulp and max relative error per input range, and the special values.
// Prints a markdown table; exit status 0 (it measures, it does not judge: the
// tolerances live in tests/simd_math_test.cc).
//
//   simd_accuracy [STEP]   STEP: every STEP-th float bit pattern of each range
//                          (default 3; 1 = every float, ~2^31 libm calls).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/simd_math.h"
#include "tools/bench/simd_alternatives.h"

namespace tpuoff::bench {
namespace {

struct Candidate {
  const char* name;
  ArrayFn fn;
};

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// |got - want| in units of the f32 spacing at want (denormal spacing below the
// normal range); a wrong special value (NaN, inf, sign) counts as 1e9.
double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  const float w = static_cast<float>(want);
  if (std::isinf(w)) return got == w ? 0 : 1e9;
  if (!std::isfinite(got)) return 1e9;
  double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  ulp = std::max<double>(ulp, std::numeric_limits<float>::denorm_min());
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

struct Stats {
  double max_ulp = 0;
  float ulp_at = 0;
  double max_rel = 0;  // over results in the normal f32 range [FLT_MIN, FLT_MAX]
  int64_t count = 0;
};

// Every `step`-th float bit pattern between the bit patterns of lo and hi
// (same sign), in chunks.
Stats Sweep(ArrayFn fn, double (*ref)(double), float lo, float hi, uint32_t step) {
  uint32_t a = Bits(lo), b = Bits(hi);
  if (a > b) std::swap(a, b);
  Stats s;
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> x(kChunk), y(kChunk);
  for (uint64_t start = a; start <= b;) {
    int64_t n = 0;
    uint64_t bits = start;
    for (; n < kChunk && bits <= b; bits += step) x[n++] = FromBits(static_cast<uint32_t>(bits));
    start = bits;
    fn(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = ref(static_cast<double>(x[i]));
      const double u = UlpError(y[i], want);
      if (u > s.max_ulp) {
        s.max_ulp = u;
        s.ulp_at = x[i];
      }
      if (std::fabs(want) >= std::numeric_limits<float>::min() &&
          std::fabs(want) <= std::numeric_limits<float>::max()) {
        s.max_rel = std::max(s.max_rel, std::fabs(y[i] - want) / std::fabs(want));
      }
    }
    s.count += n;
  }
  return s;
}

struct Range {
  const char* what;
  float lo, hi;
};

// The special inputs: the result must equal libm's rounded to f32 (NaN for NaN).
int SpecialFailures(ArrayFn fn, double (*ref)(double), const char* func,
                    const std::vector<float>& xs, std::string* failures) {
  std::vector<float> y(xs.size());
  fn(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
  int bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = ref(static_cast<double>(xs[i]));
    // Finite results may be off by an ulp; special results must be exact.
    const bool special_want = !std::isfinite(static_cast<float>(want)) ||
                              static_cast<float>(want) == 0.0f;
    const float w = static_cast<float>(want);
    const bool ok = special_want ? (y[i] == w || (std::isnan(w) && std::isnan(y[i])))
                                 : UlpError(y[i], want) <= 4;
    if (!ok) {
      ++bad;
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s(%g)=%g ", func, xs[i], y[i]);
      *failures += buf;
    }
  }
  return bad;
}

void Report(const char* func, double (*ref)(double), const std::vector<Candidate>& cands,
            const std::vector<Range>& ranges, const std::vector<float>& specials,
            uint32_t step) {
  std::printf("\n%s (every %u-th float of each range; max ulp [at x] / max rel error)\n\n", func,
              step);
  std::printf("| range |");
  for (const Candidate& c : cands) std::printf(" %s |", c.name);
  std::printf("\n|---|");
  for (size_t i = 0; i < cands.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Range& r : ranges) {
    std::printf("| %s |", r.what);
    for (const Candidate& c : cands) {
      const Stats s = Sweep(c.fn, ref, r.lo, r.hi, step);
      if (s.max_ulp >= 1e9) {
        std::printf(" wrong special value [%g] |", s.ulp_at);
      } else {
        std::printf(" %.3g [%g] / %.2e |", s.max_ulp, s.ulp_at, s.max_rel);
      }
    }
    std::printf("\n");
  }
  std::printf("| special values (%zu) |", specials.size());
  std::string notes;
  for (const Candidate& c : cands) {
    std::string failures;
    const int bad = SpecialFailures(c.fn, ref, func, specials, &failures);
    std::printf(" %d wrong |", bad);
    if (bad) notes += std::string("  ") + c.name + ": " + failures + "\n";
  }
  std::printf("\n%s", notes.c_str());
}

}  // namespace
}  // namespace tpuoff::bench

int main(int argc, char** argv) {
  using namespace tpuoff;
  using bench::Candidate;
  const uint32_t step = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 3;
  if (step == 0) {
    std::fprintf(stderr, "usage: simd_accuracy [STEP>=1]\n");
    return 2;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float fmin = std::numeric_limits<float>::min();
  const float dmin = std::numeric_limits<float>::denorm_min();
  const float fmax = std::numeric_limits<float>::max();
  std::printf("ISA: tpuoff %s, alternatives %s\n", runtime::simd::VectorIsaName(),
              bench::AlternativesIsaName());

  const std::vector<Candidate> exps = {{"tpuoff", &runtime::simd::Exp},
                                       {"hwy", &bench::HwyExp},
                                       {"sleef_u10", &bench::SleefExpU10}};
  const std::vector<bench::Range> exp_ranges = {
      {"softmax x-max in [-20, 0]", -20.0f, -0.0f},
      {"x in [-87.3, -20] (normal results)", -87.33f, -20.0f},
      {"x in [-104, -87.3] (subnormal results)", -104.0f, -87.34f},
      {"x in [0, 88.72]", 0.0f, 88.72f},
      {"all negative floats", -0.0f, -inf},
      {"all positive floats", 0.0f, inf},
  };
  const std::vector<float> exp_specials = {0.0f, -0.0f, inf, -inf, nan, -nan, 88.8f, 89.0f, 1e30f,
                                           fmax, -104.5f, -1000.0f, -1e30f, -fmax, -87.5f,
                                           -103.9f, 88.72f};
  bench::Report("exp", [](double x) { return std::exp(x); }, exps, exp_ranges, exp_specials, step);

  const std::vector<Candidate> logs = {{"tpuoff", &runtime::simd::Log},
                                       {"hwy", &bench::HwyLog},
                                       {"sleef_u10", &bench::SleefLogU10},
                                       {"sleef_u35", &bench::SleefLogU35}};
  const std::vector<bench::Range> log_ranges = {
      {"sums in [1, 2^18]", 1.0f, 262144.0f},
      {"normals in [FLT_MIN, 1)", fmin, 0.99999994f},
      {"[2^18, FLT_MAX]", 262144.0f, fmax},
      {"subnormals", dmin, std::nextafter(fmin, 0.0f)},
  };
  const std::vector<float> log_specials = {0.0f, -0.0f, inf, -inf, nan, -nan, -1.0f, -dmin,
                                           dmin, fmin, fmax, 1.0f};
  bench::Report("log", [](double x) { return std::log(x); }, logs, log_ranges, log_specials, step);
  return 0;
}
