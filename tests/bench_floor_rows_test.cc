// The benchmark floor's row kernels (tools/cli/bench_floor_rows.h), every
// ISA variant this CPU can run, against float64 sums of the same row: the
// forward's lse and entropy, the backward's c (1[j == y] - softmax_j).
#include "tools/cli/bench_floor_rows.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/ir/float16.h"

namespace tpuoff::tools {
namespace {

bool CpuRuns(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (isa == "avx512") {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("fma");
  }
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == "baseline";
}

std::vector<const FloorRowKernels*> Variants() {
  std::vector<const FloorRowKernels*> out;
  for (const FloorRowKernels* k :
       {FloorRowKernelsAvx512(), FloorRowKernelsAvx2(), FloorRowKernelsBaseline()}) {
    if (k != nullptr && CpuRuns(k->isa)) out.push_back(k);
  }
  return out;
}

// A row of v logits: N(0, 2^2), with `jump` added from element `jump_at` on
// (a later block whose max exceeds the first block's by more than the
// kernels' slack, so they re-base their sums).
std::vector<float> Row(int64_t v, uint32_t seed, int64_t jump_at, float jump) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> z(v);
  for (int64_t j = 0; j < v; ++j) z[j] = normal(gen) + (j >= jump_at ? jump : 0.0f);
  return z;
}

struct Reference {
  double lse, entropy;
  std::vector<double> p;  // softmax of z * scale
};

Reference Softmax(const std::vector<float>& z, float scale) {
  Reference r;
  double mx = -INFINITY;
  for (float x : z) mx = std::max(mx, double{x} * scale);
  double s = 0, u = 0;
  for (float x : z) {
    const double d = double{x} * scale - mx;
    s += std::exp(d);
    u += std::exp(d) * d;
  }
  r.lse = mx + std::log(s);
  r.entropy = std::log(s) - u / s;
  for (float x : z) r.p.push_back(std::exp(double{x} * scale - r.lse));
  return r;
}

TEST(BenchFloorRowsTest, TheChosenVariantIsTheWidestThisCpuRuns) {
  const std::vector<const FloorRowKernels*> v = Variants();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(std::string(FloorRowKernelsForCpu().isa), v.front()->isa);
}

TEST(BenchFloorRowsTest, EveryVariantMatchesFloat64) {
  struct Case {
    int64_t v, jump_at;
    float jump, scale;
    int64_t y;  // outside [0, v): no one-hot column
  };
  const Case cases[] = {
      {5003, 5003, 0.0f, 1.0f, 17},       // ragged tail, one block and a bit
      {151936, 151936, 0.0f, 1.0f / 0.7f, 151935},  // the seed vocabulary, y last
      {9000, 4096, 40.0f, 1.0f, 4100},    // re-based at the third block
      {777, 777, 0.0f, 0.5f, -1},         // shorter than a block, no one-hot
      {40, 40, 0.0f, 1.0f, 3},            // shorter than two vectors
  };
  for (const FloorRowKernels* k : Variants()) {
    for (const Case& c : cases) {
      const std::vector<float> zf = Row(c.v, static_cast<uint32_t>(c.v), c.jump_at, c.jump);
      std::vector<uint16_t> zb(c.v);
      std::vector<float> zb_values(c.v);
      for (int64_t j = 0; j < c.v; ++j) {
        zb[j] = hlo::F32ToBf16(zf[j]);
        zb_values[j] = hlo::Bf16ToF32(zb[j]);
      }
      for (bool bf16 : {false, true}) {
        const std::string where = std::string(k->isa) + (bf16 ? " bf16" : " f32") +
                                  " v=" + std::to_string(c.v);
        const Reference ref = Softmax(bf16 ? zb_values : zf, c.scale);
        FloorRowStats s;
        if (bf16) {
          k->forward_bf16(zb.data(), c.v, c.scale, &s);
        } else {
          k->forward_f32(zf.data(), c.v, c.scale, &s);
        }
        const double lse = s.ref + std::log(double{s.sum});
        const double entropy = std::log(double{s.sum}) - double{s.usum} / s.sum;
        // f32 exps (~1 ulp) summed in f32 over up to 152k terms.
        EXPECT_NEAR(lse, ref.lse, 2e-5 * std::max(1.0, std::fabs(ref.lse))) << where;
        EXPECT_NEAR(entropy, ref.entropy, 2e-4 * std::max(1.0, std::fabs(ref.entropy)))
            << where;

        // Backward into a buffer starting one element past an aligned
        // address: the kernels' scalar head runs up to their stream-store
        // alignment.
        const float coef = -0.37f;
        const float lse_f = static_cast<float>(ref.lse);
        double worst = 0;
        int64_t worst_at = -1;
        if (bf16) {
          std::vector<uint16_t> out(c.v + 64);
          uint16_t* o = out.data() + 1;
          k->backward_bf16(zb.data(), c.v, c.scale, lse_f, coef, c.y, o);
          for (int64_t j = 0; j < c.v; ++j) {
            const double want = coef * ((j == c.y ? 1.0 : 0.0) - ref.p[j]);
            // bf16 output: 2^-8 relative, plus the f32 exp's error.
            const double err = std::fabs(hlo::Bf16ToF32(o[j]) - want) /
                               (std::fabs(want) * 0x1.0p-8 + 1e-30 + 1e-6 * std::fabs(coef));
            if (err > worst) worst = err, worst_at = j;
          }
        } else {
          std::vector<float> out(c.v + 32);
          float* o = out.data() + 1;
          k->backward_f32(zf.data(), c.v, c.scale, lse_f, coef, c.y, o);
          for (int64_t j = 0; j < c.v; ++j) {
            const double want = coef * ((j == c.y ? 1.0 : 0.0) - ref.p[j]);
            // 1e-5 relative (exp ~1 ulp times the argument's rounding: |x|
            // up to ~60), 1e-9 absolute.
            const double err =
                std::fabs(o[j] - want) / (std::fabs(want) * 1e-5 + 1e-9 * std::fabs(coef));
            if (err > worst) worst = err, worst_at = j;
          }
        }
        EXPECT_LE(worst, 1.0) << where << " backward, worst at " << worst_at;
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::tools
