// The fast (chunked, parallel, vectorised Box-Muller) random inputs of
// `tpuoff run --random-inputs` / `tpuoff bench`: normal logits with the
// right moments and tails, independent of the thread count.
#include "tools/io/random_inputs.h"

#include <omp.h>

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "tools/cli/kernel_flags.h"

namespace tpuoff::tools {
namespace {

absl::StatusOr<std::vector<hlo::Literal>> Make(const std::string& dtype, int64_t seq) {
  KernelFlags k;
  k.kernel = "grpo_tiled";
  k.mode = "fwd_bwd";
  k.batch = 2;
  k.seq = seq;
  k.vocab = 4099;
  k.logits_dtype = dtype;
  auto m = BuildKernelModule(k);
  if (!m.ok()) return m.status();
  RandomInputOptions o;
  o.seed = 5;
  return MakeRandomInputs(*(*m)->entry(), o);
}

// The generated input of the parameter named `name`.
const hlo::Literal& ArgNamed(const hlo::HloComputation& entry,
                             const std::vector<hlo::Literal>& in, const std::string& name) {
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    if (entry.parameter(i)->name() == name) return in[i];
  }
  ADD_FAILURE() << "no parameter " << name;
  return in[0];
}

TEST(RandomInputsTest, LogitsAreStandardNormal) {
  for (const char* dtype : {"f32", "bf16"}) {
    auto in = Make(dtype, 40);  // 327,920 samples
    ASSERT_TRUE(in.ok()) << in.status();
    const hlo::Literal& z = (*in)[0];
    const int64_t n = z.num_elements();
    double s1 = 0, s2 = 0, s4 = 0, mx = 0;
    int64_t beyond2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = z.GetAsDouble(i);
      s1 += v;
      s2 += v * v;
      s4 += v * v * v * v;
      mx = std::max(mx, std::fabs(v));
      beyond2 += std::fabs(v) > 2;
    }
    const double mean = s1 / n, var = s2 / n - mean * mean;
    // Standard errors: mean 1/sqrt(n) = 0.0017, var sqrt(2/n) = 0.0025.
    EXPECT_NEAR(mean, 0, 0.01) << dtype;
    EXPECT_NEAR(var, 1, 0.015) << dtype;
    EXPECT_NEAR(s4 / n, 3, 0.1) << dtype;  // kurtosis of a normal
    EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 0.003) << dtype;  // P(|x| > 2)
    EXPECT_GT(mx, 4.0) << dtype;  // tails exist (P(|x|>4) * n ~ 21)
    EXPECT_LT(mx, 7.0) << dtype;
  }
}

TEST(RandomInputsTest, ValuesDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = Make("bf16", 33);
  omp_set_num_threads(2);
  auto two = Make("bf16", 33);
  omp_set_num_threads(saved);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->size(), two->size());
  for (size_t i = 0; i < one->size(); ++i) EXPECT_TRUE((*one)[i] == (*two)[i]) << i;
}

// The derived inputs of a backward module (lse, logp, entropy) are the row
// statistics of the generated logits: checked against float64 sums of the
// same values, at a vocabulary that is not a multiple of the vector width
// nor of the 2048-value blocks the statistics are computed in.
// Without an entropy input the lse is summed as the logits are generated
// (tools/io/normal_fill.cc), in pieces split at chunk and row boundaries:
// V = 70001 puts rows across the 65536-value chunks.
TEST(RandomInputsTest, DerivedInputsAreTheLogitsRowStatistics) {
  for (const char* dtype : {"f32", "bf16"}) {
    for (const char* mode : {"pre_softmax", "post_lse"}) {
      for (const bool with_entropy : {true, false}) {
        KernelFlags k;
        k.kernel = "grpo_tiled";
        k.mode = "bwd";
        k.batch = 2;
        k.seq = 3;
        k.vocab = with_entropy ? 5003 : 70001;
        k.logits_dtype = dtype;
        k.temperature = 0.7;
        k.temperature_mode = mode;
        // With a coefficient the backward module takes `entropy` too.
        k.entropy_coef = with_entropy ? 0.01 : 0.0;
        auto m = BuildKernelModule(k);
        ASSERT_TRUE(m.ok()) << m.status();
        const hlo::HloComputation& entry = *(*m)->entry();
        RandomInputOptions o;
        o.seed = 9;
        o.temperature = 0.7;
        o.post_lse = std::string(mode) == "post_lse";
        auto in = MakeRandomInputs(entry, o);
        ASSERT_TRUE(in.ok()) << in.status();
        auto arg = [&](const std::string& name) -> const hlo::Literal& {
          return ArgNamed(entry, *in, name);
        };
        const hlo::Literal& z = arg("logits");
        const hlo::Literal& ids = arg("chosen_ids");
        const int64_t v = k.vocab, rows = k.batch * k.seq;
        // lse and logp over z·scale; entropy of softmax(z/τ) in both modes.
        const double scale = o.post_lse ? 1.0 : 1.0 / 0.7;
        for (int64_t r = 0; r < rows; ++r) {
          double mx = -INFINITY, mu = -INFINITY;
          for (int64_t j = 0; j < v; ++j) {
            mx = std::max(mx, z.GetAsDouble(r * v + j) * scale);
            mu = std::max(mu, z.GetAsDouble(r * v + j) / 0.7);
          }
          double se = 0, st = 0, sut = 0;
          for (int64_t j = 0; j < v; ++j) {
            se += std::exp(z.GetAsDouble(r * v + j) * scale - mx);
            const double u = z.GetAsDouble(r * v + j) / 0.7 - mu;
            st += std::exp(u);
            sut += std::exp(u) * u;
          }
          const double lse = mx + std::log(se);
          double logp = z.GetAsDouble(r * v + ids.GetAsInt64(r)) * scale - lse;
          if (o.post_lse) logp /= 0.7;
          const double entropy = std::log(st) - sut / st;
          const std::string where = std::string(dtype) + " " + mode + " V=" + std::to_string(v) +
                                    " row " + std::to_string(r);
          // f32 exps, f64 sums, stored as f32: a few f32 ulps of the value.
          EXPECT_NEAR(arg("lse").GetAsDouble(r), lse, 4e-6 * std::fabs(lse)) << where;
          EXPECT_NEAR(arg("logp").GetAsDouble(r), logp, 4e-6 * std::fabs(lse)) << where;
          if (with_entropy) {
            EXPECT_NEAR(arg("entropy").GetAsDouble(r), entropy, 4e-6 * std::fabs(entropy)) << where;
          }
          EXPECT_GT(entropy, 1.0) << where;  // not a degenerate row
        }
      }
    }
  }
}

// The fused kernel's derived inputs are statistics of hidden·lm_head (it has
// no logits parameter): exact below the size limit (checked against float64
// products of the generated arrays), and beyond it the chosen logit exact
// and lse / entropy those of V normal logits with the row's variance
// (checked on sampled rows against float64 at the stated accuracy).
struct FusedStats {
  double lse, logp, entropy;
};
FusedStats ExactFusedStats(const hlo::Literal& hidden, const hlo::Literal& w, int64_t r,
                           int64_t y, int64_t h, int64_t v, double tau) {
  std::vector<double> u(v, 0.0);
  for (int64_t k = 0; k < h; ++k) {
    const double hk = hidden.GetAsDouble(r * h + k);
    for (int64_t j = 0; j < v; ++j) u[j] += hk * w.GetAsDouble(k * v + j);
  }
  double mx = -INFINITY;
  for (double& x : u) mx = std::max(mx, x /= tau);
  double se = 0, sue = 0;
  for (double x : u) {
    se += std::exp(x - mx);
    sue += std::exp(x - mx) * (x - mx);
  }
  const double lse = mx + std::log(se);
  return {lse, u[y] - lse, std::log(se) - sue / se};
}

TEST(RandomInputsTest, FusedDerivedInputsComeFromHiddenTimesLmHead) {
  struct Shape {
    int64_t seq, vocab, hidden;
    bool exact;
    double lse_tol, entropy_tol;  // absolute
  };
  // 2x40 rows of V=3001 (exact, f32 products vs f64), and 2x512 rows of
  // V=151936 with H=64 (1.0e10 multiply-adds: the estimate). At τ = 0.8 the
  // scaled logits' variance is about 1.56, so the exp-sum's relative spread
  // is sqrt((e^1.56 - 1) / V) = 0.005: the tolerances are 5 and 8 of that
  // (measured: lse within 0.0075, entropy within 0.0105 on these rows).
  for (const Shape& sh : {Shape{40, 3001, 32, true, 2e-4, 2e-4},
                          Shape{512, 151936, 64, false, 0.025, 0.04}}) {
    for (const char* dtype : {"f32", "bf16"}) {
      KernelFlags k;
      k.kernel = "grpo_fused_linear";
      k.mode = "bwd";
      k.batch = 2;
      k.seq = sh.seq;
      k.vocab = sh.vocab;
      k.hidden = sh.hidden;
      k.logits_dtype = dtype;
      k.temperature = 0.8;
      k.entropy_coef = 0.01;  // the backward then takes `entropy` too
      auto m = BuildKernelModule(k);
      ASSERT_TRUE(m.ok()) << m.status();
      const hlo::HloComputation& entry = *(*m)->entry();
      RandomInputOptions o;
      o.seed = 3;
      o.temperature = 0.8;
      auto in = MakeRandomInputs(entry, o);
      ASSERT_TRUE(in.ok()) << in.status();
      auto arg = [&](const std::string& name) -> const hlo::Literal& {
        return ArgNamed(entry, *in, name);
      };
      const int64_t rows = 2 * sh.seq;
      const int64_t step = sh.exact ? 1 : rows / 8 + 1;
      for (int64_t r = 0; r < rows; r += step) {
        const int64_t y = arg("chosen_ids").GetAsInt64(r);
        const FusedStats want =
            ExactFusedStats(arg("hidden"), arg("lm_head"), r, y, sh.hidden, sh.vocab, 0.8);
        const std::string where = std::string(dtype) + " V=" + std::to_string(sh.vocab) +
                                  " row " + std::to_string(r);
        EXPECT_NEAR(arg("lse").GetAsDouble(r), want.lse, sh.lse_tol) << where;
        EXPECT_NEAR(arg("logp").GetAsDouble(r), want.logp, sh.lse_tol) << where;
        EXPECT_NEAR(arg("entropy").GetAsDouble(r), want.entropy, sh.entropy_tol) << where;
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::tools
