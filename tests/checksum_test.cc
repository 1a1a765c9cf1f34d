// The checksum `tpuoff run` prints per output: exact sums on small arrays,
// NaNs counted apart, the hash sensitive to every bit and independent of the
// number of threads on arrays spanning many chunks.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/literal.h"
#include "tools/io/checksum.h"

namespace tpuoff::tools {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;

TEST(Checksum, SumsAndCountsNaNs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {1.5f, -2.0f, nan, 4.0f, -0.5f, 8.0f, nan, 16.0f, 32.0f, -64.0f, 0.25f};
  Literal lit = Literal::FromVector<float>(PrimitiveType::kF32, {11}, v);
  const Checksum c = ComputeChecksum(lit);
  EXPECT_EQ(c.nan_count, 2);
  EXPECT_DOUBLE_EQ(c.sum, 1.5 - 2 + 4 - 0.5 + 8 + 16 + 32 - 64 + 0.25);
  EXPECT_DOUBLE_EQ(c.abs_sum, 1.5 + 2 + 4 + 0.5 + 8 + 16 + 32 + 64 + 0.25);
  EXPECT_NE(FormatChecksum(c).find("nan=2"), std::string::npos);
}

TEST(Checksum, Bf16ValuesAreSummedAsTheirFloatValues) {
  Literal lit(Shape(PrimitiveType::kBF16, {3}));
  lit.SetFromDouble(0, 0.5);
  lit.SetFromDouble(1, -3.0);
  lit.SetFromDouble(2, 1.0 / 3.0);  // rounds to bf16
  const Checksum c = ComputeChecksum(lit);
  const double third = hlo::Bf16ToF32(hlo::F32ToBf16(1.0f / 3.0f));
  EXPECT_DOUBLE_EQ(c.sum, 0.5 - 3.0 + third);
  EXPECT_DOUBLE_EQ(c.abs_sum, 0.5 + 3.0 + third);
}

TEST(Checksum, OtherTypesGoThroughTheGenericPath) {
  Literal ints = Literal::FromVector<int32_t>(PrimitiveType::kS32, {5}, std::vector<int32_t>{3, -4, 5, -6, 7});
  Checksum c = ComputeChecksum(ints);
  EXPECT_DOUBLE_EQ(c.sum, 5);
  EXPECT_DOUBLE_EQ(c.abs_sum, 25);
  EXPECT_EQ(c.nan_count, 0);
  Literal f64(Shape(PrimitiveType::kF64, {10}));
  for (int i = 0; i < 10; ++i) f64.data<double>()[i] = i - 4.5;
  f64.data<double>()[9] = std::numeric_limits<double>::quiet_NaN();
  c = ComputeChecksum(f64);
  EXPECT_DOUBLE_EQ(c.sum, -4.5 - 3.5 - 2.5 - 1.5 - 0.5 + 0.5 + 1.5 + 2.5 + 3.5);
  EXPECT_DOUBLE_EQ(c.abs_sum, 4.5 + 3.5 + 2.5 + 1.5 + 0.5 + 0.5 + 1.5 + 2.5 + 3.5);
  EXPECT_EQ(c.nan_count, 1);
}

// 3 MiB + a ragged tail of f32: several hash chunks and a short last word.
Literal Ramp(int64_t n) {
  Literal lit(Shape(PrimitiveType::kF32, {n}));
  float* d = lit.data<float>();
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>((i % 1000) - 500) * 0.125f;
  return lit;
}

TEST(Checksum, IndependentOfThreadCountAndSensitiveToEveryBit) {
  const int64_t n = (3 << 18) + 7;
  Literal lit = Ramp(n);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Checksum one = ComputeChecksum(lit);
  omp_set_num_threads(4);
  const Checksum four = ComputeChecksum(lit);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.hash, four.hash);
  EXPECT_EQ(one.sum, four.sum);
  EXPECT_EQ(one.abs_sum, four.abs_sum);

  double sum = 0, abs_sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += lit.data<float>()[i];
    abs_sum += std::fabs(lit.data<float>()[i]);
  }
  // Sums of exactly representable multiples of 1/8: every order is exact.
  EXPECT_EQ(one.sum, sum);
  EXPECT_EQ(one.abs_sum, abs_sum);

  for (int64_t flip : {int64_t{0}, int64_t{(1 << 18) + 3}, n - 1}) {
    Literal other = lit;
    uint32_t bits;
    std::memcpy(&bits, other.data<float>() + flip, 4);
    bits ^= 1u;  // the lowest mantissa bit: sums barely move, the hash must
    std::memcpy(other.data<float>() + flip, &bits, 4);
    EXPECT_NE(ComputeChecksum(other).hash, one.hash) << "flipped element " << flip;
  }
}

// The hash in its defined form, one word at a time: per 1 MiB chunk 32
// lanes of 32-bit FNV-1a (4-byte word w of the chunk in lane w % 32, a short
// last word zero-padded), then the chunk's length and the lanes in order
// through 64-bit FNV-1a; the chunks' hashes in order.
uint64_t ReferenceHash(const uint8_t* p, int64_t size) {
  constexpr uint64_t kOffset = 0xcbf29ce484222325ull, kPrime = 0x100000001b3ull;
  constexpr uint32_t kOffset32 = 0x811c9dc5u, kPrime32 = 0x01000193u;
  uint64_t h = kOffset;
  for (int64_t begin = 0; begin < std::max<int64_t>(size, 1); begin += 1 << 20) {
    const int64_t bytes = std::min<int64_t>(size - begin, 1 << 20);
    uint32_t lane[32];
    for (uint32_t& l : lane) l = kOffset32;
    for (int64_t i = 0; i < bytes; i += 4) {
      uint32_t w = 0;
      std::memcpy(&w, p + begin + i, static_cast<size_t>(std::min<int64_t>(4, bytes - i)));
      uint32_t& l = lane[(i / 4) % 32];
      l = (l ^ w) * kPrime32;
    }
    uint64_t chunk = (kOffset ^ static_cast<uint64_t>(bytes)) * kPrime;
    for (uint32_t l : lane) chunk = (chunk ^ l) * kPrime;
    h = (h ^ chunk) * kPrime;
  }
  return h;
}

TEST(Checksum, HashFollowsTheDefinedLanes) {
  // Sizes around the 128-byte block and the 1 MiB chunk, in three element
  // types (the f32 and bf16 paths hash while they sum; s8 hashes alone).
  for (int64_t size : {int64_t{0}, int64_t{5}, int64_t{128}, int64_t{200}, int64_t{(1 << 20) + 77},
                       int64_t{(2 << 20) + 128 * 5 + 36}}) {
    for (PrimitiveType t : {PrimitiveType::kS8, PrimitiveType::kBF16, PrimitiveType::kF32}) {
      const int64_t width = t == PrimitiveType::kS8 ? 1 : t == PrimitiveType::kBF16 ? 2 : 4;
      Literal lit(Shape(t, {size / width}));
      uint64_t state = static_cast<uint64_t>(size) * 77 + width;
      for (int64_t i = 0; i < lit.raw_size(); ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        lit.raw()[i] = static_cast<uint8_t>(state >> 56);
      }
      EXPECT_EQ(ComputeChecksum(lit).hash, ReferenceHash(lit.raw(), lit.raw_size()))
          << "size " << size << " width " << width;
    }
  }
}

TEST(Checksum, ChunksAreNotInterchangeable) {
  // Two arrays with the same chunks in swapped order hash differently.
  const int64_t chunk_floats = (1 << 20) / 4;
  Literal a(Shape(PrimitiveType::kF32, {2 * chunk_floats}));
  Literal b(Shape(PrimitiveType::kF32, {2 * chunk_floats}));
  for (int64_t i = 0; i < chunk_floats; ++i) {
    a.data<float>()[i] = 1.0f;
    b.data<float>()[chunk_floats + i] = 1.0f;
  }
  const Checksum ca = ComputeChecksum(a), cb = ComputeChecksum(b);
  EXPECT_EQ(ca.sum, cb.sum);
  EXPECT_NE(ca.hash, cb.hash);
}

// The sums in their defined order: per 1 MiB chunk sixteen lanes (element i
// of a whole group of sixteen in lane i % 16, the ragged tail in lane 0), the
// lanes added in order into the chunk's sums, the chunks' sums added in
// order; non-finite values left out.
template <typename T>
void ReferenceSums(const T* v, int64_t n, double (*as_double)(T), double* sum,
                   double* abs_sum) {
  const int64_t per_chunk = (1 << 20) / sizeof(T);
  *sum = 0;
  *abs_sum = 0;
  for (int64_t first = 0; first < n; first += per_chunk) {
    const int64_t len = std::min(per_chunk, n - first);
    double s[16] = {}, a[16] = {};
    for (int64_t i = 0; i < len; ++i) {
      const double x = as_double(v[first + i]);
      if (!std::isfinite(x)) continue;
      const int lane = i < len / 16 * 16 ? static_cast<int>(i % 16) : 0;
      s[lane] += x;
      a[lane] += std::fabs(x);
    }
    double chunk_sum = 0, chunk_abs = 0;
    for (int l = 0; l < 16; ++l) {
      chunk_sum += s[l];
      chunk_abs += a[l];
    }
    *sum += chunk_sum;
    *abs_sum += chunk_abs;
  }
}

TEST(Checksum, VectorSumsMatchTheDefinedOrderBitForBit) {
  // Values of many magnitudes (sums are inexact, so the order shows), f32
  // and bf16, over several chunks with a ragged tail; then one +inf and one
  // NaN in the middle chunk, which must be counted and left out.
  const int64_t n = (3 << 18) + 13;
  Literal f(Shape(PrimitiveType::kF32, {n}));
  Literal h(Shape(PrimitiveType::kBF16, {n}));
  uint64_t state = 12345;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x = std::ldexp(static_cast<float>(static_cast<int32_t>(state >> 40) - (1 << 23)),
                               static_cast<int>((state >> 20) % 40) - 40);
    f.data<float>()[i] = x;
    h.data<uint16_t>()[i] = hlo::F32ToBf16(x);
  }
  auto f_as = [](float x) { return double{x}; };
  auto h_as = [](uint16_t x) { return double{hlo::Bf16ToF32(x)}; };
  for (int with_specials = 0; with_specials < 2; ++with_specials) {
    if (with_specials) {
      f.data<float>()[(1 << 18) + 5] = std::numeric_limits<float>::infinity();
      f.data<float>()[(1 << 18) + 100] = std::numeric_limits<float>::quiet_NaN();
      h.data<uint16_t>()[(1 << 19) + 5] = 0x7f80;  // +inf
      h.data<uint16_t>()[(1 << 19) + 100] = 0x7fc0;  // NaN
    }
    double sum, abs_sum;
    ReferenceSums<float>(f.data<float>(), n, +f_as, &sum, &abs_sum);
    Checksum c = ComputeChecksum(f);
    EXPECT_EQ(c.sum, sum) << "f32, specials " << with_specials;
    EXPECT_EQ(c.abs_sum, abs_sum);
    EXPECT_EQ(c.pos_inf_count, with_specials);
    EXPECT_EQ(c.nan_count, with_specials);
    ReferenceSums<uint16_t>(h.data<uint16_t>(), n, +h_as, &sum, &abs_sum);
    c = ComputeChecksum(h);
    EXPECT_EQ(c.sum, sum) << "bf16, specials " << with_specials;
    EXPECT_EQ(c.abs_sum, abs_sum);
    EXPECT_EQ(c.pos_inf_count, with_specials);
    EXPECT_EQ(c.nan_count, with_specials);
  }
}

}  // namespace
}  // namespace tpuoff::tools
