// The oneDNN block-grid products behind bf16 dots (runtime/emulator/gemm.h):
// against a float64 reference for every operand layout, batches and grids
// with ragged blocks; bit-identical for any thread count. The f32 variant
// runs everywhere; the bf16 one only where oneDNN has a native bf16 matmul.
#include "runtime/emulator/gemm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/ir/float16.h"

namespace tpuoff::runtime {
namespace {

struct Case {
  int64_t batch, m, k, n;
  bool a_col, b_col;
};

// Deterministic values in [-1, 1).
std::vector<float> Values(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<int32_t>(seed >> 40) - (1 << 23)) * 0x1.0p-23f;
  }
  return v;
}

// Element (i, j) of matrix b of a [batch, rows, cols] stack stored
// row-major, or column-major when col.
float At(const std::vector<float>& v, int64_t b, int64_t i, int64_t j, int64_t rows, int64_t cols,
         bool col) {
  const int64_t base = b * rows * cols;
  return col ? v[base + j * rows + i] : v[base + i * cols + j];
}

class GemmTest : public ::testing::TestWithParam<Case> {};

void Check(const Case& c, GemmType type) {
  std::vector<float> a = Values(c.batch * c.m * c.k, 1), b = Values(c.batch * c.k * c.n, 2);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  if (type == GemmType::kBf16) {
    // The reference sees the bf16 values.
    for (size_t i = 0; i < a.size(); ++i) a[i] = hlo::RoundToBf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = hlo::RoundToBf16(b[i]);
    for (size_t i = 0; i < a.size(); ++i) a16[i] = hlo::F32ToBf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b16[i] = hlo::F32ToBf16(b[i]);
  }
  const void* ad = type == GemmType::kBf16 ? static_cast<const void*>(a16.data()) : a.data();
  const void* bd = type == GemmType::kBf16 ? static_cast<const void*>(b16.data()) : b.data();
  std::vector<float> one(c.batch * c.m * c.n, -7.0f), two(one.size(), -7.0f);
  ASSERT_TRUE(Gemm(c.batch, c.m, c.k, c.n, {ad, type, c.a_col}, {bd, type, c.b_col}, one.data(), 1)
                  .ok());
  ASSERT_TRUE(Gemm(c.batch, c.m, c.k, c.n, {ad, type, c.a_col}, {bd, type, c.b_col}, two.data(), 2)
                  .ok());
  double worst = 0;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double want = 0, scale = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double p = double{At(a, bi, i, kk, c.m, c.k, c.a_col)} *
                           At(b, bi, kk, j, c.k, c.n, c.b_col);
          want += p;
          scale += std::fabs(p);
        }
        const int64_t idx = (bi * c.m + i) * c.n + j;
        // f32 accumulation: relative to the sum of |terms|, k * 2^-24 at worst.
        const double err = std::fabs(one[idx] - want) / std::max(scale, 1e-30);
        worst = std::max(worst, err);
        ASSERT_EQ(one[idx], two[idx]) << "thread count changed element " << idx;
      }
    }
  }
  EXPECT_LT(worst, 1e-6 * std::max<int64_t>(1, c.k / 64 + 1));
}

TEST_P(GemmTest, F32MatchesFloat64Reference) { Check(GetParam(), GemmType::kF32); }

TEST_P(GemmTest, Bf16MatchesFloat64Reference) {
  if (!GemmNativeBf16()) {
    GTEST_SKIP() << "no native bf16 matmul on this CPU: " << GemmDescription();
  }
  Check(GetParam(), GemmType::kBf16);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    ::testing::Values(Case{1, 64, 64, 64, false, false}, Case{1, 300, 97, 700, false, false},
                      Case{1, 300, 97, 700, true, false}, Case{1, 300, 97, 700, false, true},
                      Case{1, 300, 97, 700, true, true}, Case{3, 40, 130, 50, false, true},
                      Case{2, 513, 33, 129, true, false}, Case{1, 5, 1000, 3, false, false}));

TEST(Gemm, EmptyContractionGivesZeros) {
  std::vector<float> c(6, 3.0f);
  ASSERT_TRUE(Gemm(1, 2, 0, 3, {nullptr, GemmType::kF32, false}, {nullptr, GemmType::kF32, false},
                   c.data(), 2)
                  .ok());
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

TEST(Gemm, MixedTypesAreRefused) {
  std::vector<float> a(4), c(4);
  std::vector<uint16_t> b(4);
  const absl::Status s = Gemm(1, 2, 2, 2, {a.data(), GemmType::kF32, false},
                              {b.data(), GemmType::kBf16, false}, c.data(), 1);
  EXPECT_FALSE(s.ok());
}

TEST(Gemm, DescriptionNamesTheBackendAndTheBf16Path) {
  const std::string d = GemmDescription();
  EXPECT_NE(d.find("oneDNN"), std::string::npos) << d;
  EXPECT_NE(d.find(GemmNativeBf16() ? "native" : "converted to f32"), std::string::npos) << d;
}

}  // namespace
}  // namespace tpuoff::runtime
