// Helpers shared by the executor tests: literals from values, parsing, and
// comparison with tolerances.
#ifndef TPUOFF_TESTS_EXECUTOR_TEST_UTIL_H_
#define TPUOFF_TESTS_EXECUTOR_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hlo/ir/literal.h"
#include "hlo/text/text_parser.h"
#include "hlo/ir/verifier.h"
#include "runtime/emulator/executor.h"

namespace tpuoff::runtime::testing {

using hlo::Literal;
using hlo::PrimitiveType;

inline Literal Lit(PrimitiveType t, std::vector<int64_t> dims,
                   std::vector<double> values) {
  Literal l(hlo::Shape(t, std::move(dims)));
  for (int64_t i = 0; i < l.num_elements() && i < static_cast<int64_t>(values.size()); ++i) {
    if (hlo::IsFloatingPoint(t)) {
      l.SetFromDouble(i, values[i]);
    } else {
      l.SetFromInt64(i, static_cast<int64_t>(values[i]));
    }
  }
  return l;
}
inline Literal F32(std::vector<int64_t> d, std::vector<double> v) {
  return Lit(PrimitiveType::kF32, std::move(d), std::move(v));
}
inline Literal S32(std::vector<int64_t> d, std::vector<double> v) {
  return Lit(PrimitiveType::kS32, std::move(d), std::move(v));
}
inline Literal BF16(std::vector<int64_t> d, std::vector<double> v) {
  return Lit(PrimitiveType::kBF16, std::move(d), std::move(v));
}
inline Literal Pred(std::vector<int64_t> d, std::vector<double> v) {
  return Lit(PrimitiveType::kPred, std::move(d), std::move(v));
}

// add_f32 and max_f32 reducer computations for test modules.
inline constexpr const char* kF32Reducers = R"(
add_f32 { af0 = f32[] parameter(0)  af1 = f32[] parameter(1)  ROOT afr = f32[] add(af0, af1) }
max_f32 { mf0 = f32[] parameter(0)  mf1 = f32[] parameter(1)  ROOT mfr = f32[] maximum(mf0, mf1) }
)";

// Row softmax of an f32[rows, cols] parameter: max reduce, exp(x - max),
// sum reduce, division. With `other_row_max`, row r subtracts the max of
// row rows-1-r (a reverse of the row maxima) instead of its own.
inline std::string SoftmaxModule(int64_t rows, int64_t cols, bool other_row_max = false) {
  const std::string s = "[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
  const std::string r = "[" + std::to_string(rows) + "]";
  return "HloModule softmax\n" + std::string(kF32Reducers) +
         "ENTRY e { x = f32" + s + " parameter(0) ninf = f32[] constant(-inf) zero = f32[] constant(0)\n"
         "m = f32" + r + " reduce(x, ninf), dimensions={1}, to_apply=max_f32\n" +
         (other_row_max ? "mr = f32" + r + " reverse(m), dimensions={0}\n" : std::string()) +
         "mb = f32" + s + " broadcast(" + (other_row_max ? "mr" : "m") + "), dimensions={0}\n"
         "d = f32" + s + " subtract(x, mb)\n"
         "ex = f32" + s + " exponential(d)\n"
         "sm = f32" + r + " reduce(ex, zero), dimensions={1}, to_apply=add_f32\n"
         "sb = f32" + s + " broadcast(sm), dimensions={0}\n"
         "ROOT p = f32" + s + " divide(ex, sb) }\n";
}

inline std::unique_ptr<hlo::HloModule> Parse(const std::string& text) {
  auto m = hlo::ParseHloText(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

// Expects `got` to match `want` in shape and values: floats within
// atol + rtol*|want| (NaN matches NaN), integers exactly.
inline void ExpectNear(const Literal& got, const Literal& want, double tol,
                       const std::string& what) {
  ASSERT_TRUE(got.shape().Compatible(want.shape()))
      << what << ": shape " << got.shape().ToString() << " vs "
      << want.shape().ToString();
  const PrimitiveType t = want.shape().element_type();
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (hlo::IsFloatingPoint(t)) {
      const double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << what << " [" << i << "]: got " << g;
      } else if (std::isinf(w)) {
        EXPECT_EQ(g, w) << what << " [" << i << "]";
      } else {
        EXPECT_LE(std::fabs(g - w), tol * (1 + std::fabs(w)))
            << what << " [" << i << "]: got " << g << " want " << w;
      }
    } else {
      EXPECT_EQ(got.GetAsInt64(i), want.GetAsInt64(i)) << what << " [" << i << "]";
    }
  }
}

// Expects two runs of one module to give the same output bits and the same
// per-device HBM peak and allocation count.
inline void ExpectSameRun(const RunResult& got, const RunResult& want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    ASSERT_EQ(got.outputs[i].raw_size(), want.outputs[i].raw_size()) << "output " << i;
    EXPECT_EQ(std::memcmp(got.outputs[i].raw(), want.outputs[i].raw(), want.outputs[i].raw_size()),
              0)
        << "output " << i;
  }
  ASSERT_EQ(got.devices.size(), want.devices.size());
  for (size_t d = 0; d < want.devices.size(); ++d) {
    EXPECT_EQ(got.devices[d].stats.peak_bytes, want.devices[d].stats.peak_bytes) << "device " << d;
    EXPECT_EQ(got.devices[d].stats.num_allocs, want.devices[d].stats.num_allocs) << "device " << d;
  }
}

}  // namespace tpuoff::runtime::testing

#endif  // TPUOFF_TESTS_EXECUTOR_TEST_UTIL_H_
