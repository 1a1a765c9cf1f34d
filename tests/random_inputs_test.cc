// The fast (chunked, parallel, vectorised Box-Muller) random inputs of
// `tpuoff run --random-inputs` / `tpuoff bench`: normal logits with the
// right moments and tails, independent of the thread count.
#include "tools/io/random_inputs.h"

#include <omp.h>

#include <cmath>

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

}  // namespace
}  // namespace tpuoff::tools
