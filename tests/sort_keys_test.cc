// runtime/emulator/sort_keys: sorts whose comparator is compare(f(a), f(b))
// (jax's sorts) order by the keys f(x) instead of calling the comparator.
// Checked bit for bit against the same sorts with the comparator's result
// passed through a `copy` (which the keyed form does not match: the
// comparator runs for every comparison): ascending and descending, plain,
// TOTALORDER and jax's NaN/-0 canonicalising form, f32 / bf16 / f64 / s32 /
// u32 / s8 keys, rows along either dimension, a payload operand, and data
// with both NaNs, both zeros, infinities, subnormals and ties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/emulator/sort_keys.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime::testing {
namespace {

// f32 values with every special the orders treat apart, and ties.
std::vector<uint32_t> SpecialBits(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const uint32_t specials[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x00000000u, 0x80000000u,
                               0x7f800000u, 0xff800000u, 0x00000001u, 0x80000001u, 0x00800000u};
  std::vector<uint32_t> bits(n);
  for (int64_t i = 0; i < n; ++i) {
    float f = normal(rng);
    if (i % 7 == 0) f = std::round(f);  // ties
    std::memcpy(&bits[i], &f, 4);
    if (i % 11 == 0) bits[i] = specials[(i / 11) % 10];
  }
  return bits;
}

Literal F32Bits(std::vector<int64_t> dims, const std::vector<uint32_t>& bits) {
  Literal lit(hlo::Shape(PrimitiveType::kF32, std::move(dims)));
  std::memcpy(lit.raw(), bits.data(), bits.size() * 4);
  return lit;
}

// The comparator's two sides for key type T over parameters a, b.
std::string Comparator(const std::string& form, const std::string& t, bool payload) {
  std::string params = absl::StrCat("a = ", t, "[] parameter(0)\n  b = ", t, "[] parameter(1)\n");
  if (payload) params += "  pa = s32[] parameter(2)\n  pb = s32[] parameter(3)\n";
  if (form == "jax") {  // jax's float sort: NaN -> +NaN, -0 -> +0, then TOTALORDER
    return absl::StrCat(params, R"(  nan = T[] constant(nan)
  zero = T[] constant(0)
  na = pred[] compare(a, a), direction=NE
  za = pred[] compare(a, zero), direction=EQ
  ca0 = T[] select(za, zero, a)
  ca = T[] select(na, nan, ca0)
  nb = pred[] compare(b, b), direction=NE
  zb = pred[] compare(b, zero), direction=EQ
  cb0 = T[] select(zb, zero, b)
  cb = T[] select(nb, nan, cb0)
  c = pred[] compare(ca, cb), direction=DIR, type=TOTALORDER
)");
  }
  if (form == "total") return params + "  c = pred[] compare(a, b), direction=DIR, type=TOTALORDER\n";
  if (form == "negated") {  // f(x) = -x on both sides
    return params + "  na = T[] negate(a)\n  nb = T[] negate(b)\n  c = pred[] compare(na, nb), direction=DIR\n";
  }
  return params + "  c = pred[] compare(a, b), direction=DIR\n";
}

// A module sorting f32 data converted to `t`, rows along `dim` of [R, C],
// with an s32 payload (the element's index) when `payload`; `copy`: the
// comparator ends in a copy of its compare (the comparator path).
std::string SortModule(const std::string& form, const std::string& t, const std::string& dir,
                       bool payload, int dim, bool copy, int64_t r, int64_t c) {
  std::string cmp = Comparator(form, t, payload);
  cmp += copy ? "  ROOT r = pred[] copy(c)\n" : "";
  if (!copy) absl::StrReplaceAll({{"  c = pred[]", "  ROOT c = pred[]"}}, &cmp);
  absl::StrReplaceAll({{"T[]", t + "[]"}, {"DIR", dir}}, &cmp);
  const std::string shape = absl::StrCat("[", r, ",", c, "]");
  std::string entry = absl::StrCat("ENTRY e {\n  x = f32", shape, " parameter(0)\n  k = ", t, shape,
                                   " convert(x)\n");
  if (payload) {
    entry += absl::StrCat("  i = s32", shape, " iota(), iota_dimension=", dim, "\n  ROOT s = (", t,
                          shape, ", s32", shape, ") sort(k, i), dimensions={", dim,
                          "}, is_stable=true, to_apply=cmp\n}\n");
  } else {
    entry += absl::StrCat("  ROOT s = ", t, shape, " sort(k), dimensions={", dim,
                          "}, is_stable=true, to_apply=cmp\n}\n");
  }
  return absl::StrCat("HloModule sort_keys\ncmp {\n  ", cmp, "}\n", entry);
}

bool SameBits(const std::vector<Literal>& a, const std::vector<Literal>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].raw_size() != b[i].raw_size() ||
        std::memcmp(a[i].raw(), b[i].raw(), a[i].raw_size()) != 0) {
      return false;
    }
  }
  return true;
}

TEST(SortKeys, KeyedSortsEqualTheComparatorBitForBit) {
  const int64_t r = 6, c = 700;
  int cases = 0;
  for (const char* t : {"f32", "bf16", "f64", "s32", "u32", "s8"}) {
    const bool floating = std::string(t)[0] == 'f' || std::string(t)[0] == 'b';
    for (const char* form : {"plain", "total", "jax", "negated"}) {
      if (!floating && (std::string(form) == "total" || std::string(form) == "jax")) continue;
      if (std::string(t)[0] == 'u' && std::string(form) == "negated") continue;
      for (const char* dir : {"LT", "GT"}) {
        for (bool payload : {false, true}) {
          for (int dim : {0, 1}) {
            // Integers: finite data in range (the conversion of NaN or
            // out-of-range floats is not what is tested here).
            std::vector<uint32_t> bits = SpecialBits(r * c, 17 + cases);
            if (!floating) {
              for (uint32_t& b : bits) {
                float f;
                std::memcpy(&f, &b, 4);
                if (!std::isfinite(f)) f = 1.0f;
                f = std::fmod(std::round(f * 7.0f), 100.0f);
                std::memcpy(&b, &f, 4);
              }
            }
            const Literal x = F32Bits({r, c}, bits);
            const std::string label = absl::StrCat(t, " ", form, " ", dir, payload ? " payload" : "",
                                                   " dim ", dim);
            auto keyed = hlo::ParseHloText(SortModule(form, t, dir, payload, dim, false, r, c));
            auto called = hlo::ParseHloText(SortModule(form, t, dir, payload, dim, true, r, c));
            ASSERT_TRUE(keyed.ok()) << label << ": " << keyed.status();
            ASSERT_TRUE(called.ok()) << label << ": " << called.status();
            // The keyed form is taken where the comparator has it (a
            // plain float compare takes it too, and falls back per row on
            // NaN keys), never for the copy.
            const hlo::HloComputation* cmp = nullptr;
            for (const auto& comp : (*keyed)->computations()) {
              if (comp->name() == "cmp") cmp = comp.get();
            }
            ASSERT_NE(cmp, nullptr);
            EXPECT_NE(SortKeys::Match(cmp), nullptr) << label;
            for (const auto& comp : (*called)->computations()) {
              if (comp->name() == "cmp") EXPECT_EQ(SortKeys::Match(comp.get()), nullptr) << label;
            }
            auto a = RunModule(**keyed, {x});
            auto b = RunModule(**called, {x});
            ASSERT_TRUE(a.ok()) << label << ": " << a.status();
            ASSERT_TRUE(b.ok()) << label << ": " << b.status();
            EXPECT_TRUE(SameBits(a->outputs, b->outputs)) << label;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 4 * 8 + 2 * 2 * 8 + 1 * 1 * 8);  // floats, s32 and s8, u32
}

// Forms that order differently from their keys' unsigned order keep the
// comparator: LE/GE (not strict), a compare of different expressions, one
// reading the payload, and a key that does not read its element.
TEST(SortKeys, OtherComparatorsAreNotKeyed) {
  const std::string head = "HloModule m\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n";
  const std::string tail = "}\nENTRY e {\n  x = f32[5] parameter(0)\n  ROOT s = f32[5] sort(x), "
                           "dimensions={0}, to_apply=cmp\n}\n";
  for (const std::string& body :
       {std::string("  ROOT c = pred[] compare(a, b), direction=LE\n"),
        std::string("  n = f32[] negate(a)\n  ROOT c = pred[] compare(n, b), direction=LT\n"),
        std::string("  z = f32[] constant(1)\n  ROOT c = pred[] compare(z, z), direction=LT\n"),
        std::string("  ROOT c = pred[] compare(b, a), direction=LT\n")}) {
    auto m = hlo::ParseHloText(head + body + tail);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const auto& comp : (*m)->computations()) {
      if (comp->name() == "cmp") EXPECT_EQ(SortKeys::Match(comp.get()), nullptr) << body;
    }
  }
}

}  // namespace
}  // namespace tpuoff::runtime::testing
