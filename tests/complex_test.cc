// Complex element types (c64, c128): one table of ops run through the
// emulator (fused and unfused) against values computed here with
// std::complex, and the text, proto and .npy forms of complex values.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_printer.h"
#include "tests/executor_test_util.h"
#include "tools/io/npy.h"

namespace tpuoff::runtime::testing {
namespace {

using Z = std::complex<double>;

Literal Complex(PrimitiveType t, std::vector<int64_t> dims, const std::vector<Z>& v) {
  Literal l(hlo::Shape(t, std::move(dims)));
  for (int64_t i = 0; i < l.num_elements(); ++i) {
    if (t == PrimitiveType::kC64) {
      l.data<float>()[2 * i] = static_cast<float>(v[i].real());
      l.data<float>()[2 * i + 1] = static_cast<float>(v[i].imag());
    } else {
      l.data<double>()[2 * i] = v[i].real();
      l.data<double>()[2 * i + 1] = v[i].imag();
    }
  }
  return l;
}

Z At(const Literal& l, int64_t i) {
  if (l.shape().element_type() == PrimitiveType::kC64) {
    return {l.data<float>()[2 * i], l.data<float>()[2 * i + 1]};
  }
  return {l.data<double>()[2 * i], l.data<double>()[2 * i + 1]};
}

// |got - want| <= tol * (1 + |want|) per element.
void ExpectComplexNear(const Literal& got, PrimitiveType type, const std::vector<Z>& want,
                       double tol, const std::string& what) {
  ASSERT_EQ(got.shape().element_type(), type) << what;
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(std::abs(At(got, i) - want[i]), tol * (1 + std::abs(want[i])))
        << what << " [" << i << "]: got " << At(got, i) << " want " << want[i];
  }
}

const std::vector<Z> kA = {{1.5, -2}, {-0.25, 0.5}, {3, 0}, {0, -1.75}};
const std::vector<Z> kB = {{0.5, 1}, {2, -3}, {-1.25, 0.75}, {0.125, 4}};

// (a+bi)(c+di) and (a+bi)/(c+di) written out, independent of std::complex.
Z Mul(Z x, Z y) {
  return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
}
Z Div(Z x, Z y) {
  const double d = y.real() * y.real() + y.imag() * y.imag();
  return {(x.real() * y.real() + x.imag() * y.imag()) / d,
          (x.imag() * y.real() - x.real() * y.imag()) / d};
}

struct BinaryCase {
  const char* op;
  Z (*f)(Z, Z);
};
const BinaryCase kBinary[] = {
    {"add", [](Z x, Z y) { return x + y; }},
    {"subtract", [](Z x, Z y) { return x - y; }},
    {"multiply", &Mul},
    {"divide", &Div},
    {"power", [](Z x, Z y) { return std::pow(x, y); }},
};
struct UnaryCase {
  const char* op;
  Z (*f)(Z);
};
const UnaryCase kUnary[] = {
    {"negate", [](Z x) { return -x; }},
    {"exponential", [](Z x) { return std::exp(x); }},
    {"log", [](Z x) { return std::log(x); }},
    {"sqrt", [](Z x) { return std::sqrt(x); }},
    {"rsqrt", [](Z x) { return 1.0 / std::sqrt(x); }},
    {"tanh", [](Z x) { return std::tanh(x); }},
    {"sine", [](Z x) { return std::sin(x); }},
    {"cosine", [](Z x) { return std::cos(x); }},
    {"sign", [](Z x) { return x / std::abs(x); }},
    {"exponential-minus-one", [](Z x) { return std::exp(x) - 1.0; }},
    {"log-plus-one", [](Z x) { return std::log(1.0 + x); }},
};

struct TypeCase {
  PrimitiveType type;
  const char* name;
  double tol;
};
const TypeCase kTypes[] = {{PrimitiveType::kC64, "c64", 2e-6},
                           {PrimitiveType::kC128, "c128", 1e-13}};

std::vector<Literal> RunText(const std::string& text, std::vector<Literal> args, bool fusion) {
  auto m = Parse(text);
  if (m == nullptr) return {};
  RunOptions o;
  o.disable_fusion = !fusion;
  auto r = RunModule(*m, args, o);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << text;
  if (!r.ok()) return {};
  return std::move(r->outputs);
}

TEST(ComplexOps, ElementwiseTable) {
  for (const TypeCase& t : kTypes) {
    for (bool fusion : {true, false}) {
      for (const BinaryCase& c : kBinary) {
        const std::string text = absl::StrCat(
            "HloModule m\nENTRY e { a = ", t.name, "[4] parameter(0) b = ", t.name,
            "[4] parameter(1)\n ROOT r = ", t.name, "[4] ", c.op, "(a, b) }");
        auto out = RunText(text, {Complex(t.type, {4}, kA), Complex(t.type, {4}, kB)}, fusion);
        ASSERT_EQ(out.size(), 1u);
        std::vector<Z> want;
        for (int i = 0; i < 4; ++i) want.push_back(c.f(kA[i], kB[i]));
        ExpectComplexNear(out[0], t.type, want, t.tol, absl::StrCat(t.name, " ", c.op));
      }
      for (const UnaryCase& c : kUnary) {
        const std::string text = absl::StrCat("HloModule m\nENTRY e { a = ", t.name,
                                              "[4] parameter(0)\n ROOT r = ", t.name, "[4] ",
                                              c.op, "(a) }");
        auto out = RunText(text, {Complex(t.type, {4}, kA)}, fusion);
        ASSERT_EQ(out.size(), 1u);
        std::vector<Z> want;
        for (int i = 0; i < 4; ++i) want.push_back(c.f(kA[i]));
        // c64 transcendental functions are evaluated in float.
        ExpectComplexNear(out[0], t.type, want, t.type == PrimitiveType::kC64 ? 1e-5 : t.tol,
                          absl::StrCat(t.name, " ", c.op));
      }
    }
  }
}

TEST(ComplexOps, PartsCompareSelectConvertAndBroadcast) {
  const std::string text = R"(HloModule m
ENTRY e { re = f32[4] parameter(0) im = f32[4] parameter(1) w = c64[4] parameter(2)
  z = c64[4] complex(re, im)
  r = f32[4] real(z)  i = f32[4] imag(z)  a = f32[4] abs(z)
  eq = pred[4] compare(z, w), direction=EQ
  ne = pred[4] compare(z, w), direction=NE
  k = c64[] constant((0.5, -2))
  kb = c64[4] broadcast(k), dimensions={}
  s = c64[4] select(eq, kb, w)
  wide = c128[4] convert(z)
  fromreal = c64[4] convert(re)
  t = c64[2,2] reshape(z)
  tt = c64[2,2] transpose(t), dimensions={1,0}
  ROOT out = (f32[4], f32[4], f32[4], pred[4], pred[4], c64[4], c128[4], c64[4], c64[2,2])
      tuple(r, i, a, eq, ne, s, wide, fromreal, tt) })";
  const std::vector<double> re = {1.5, -0.25, 3, 0}, im = {-2, 0.5, 0, -1.75};
  const std::vector<Z> w = {{1.5, -2}, {9, 9}, {3, 0}, {0, 1.75}};
  for (bool fusion : {true, false}) {
    auto out = RunText(text, {F32({4}, re), F32({4}, im), Complex(PrimitiveType::kC64, {4}, w)},
                   fusion);
    ASSERT_EQ(out.size(), 9u);
    std::vector<Z> z;
    std::vector<double> abs_z;
    for (int i = 0; i < 4; ++i) {
      z.emplace_back(re[i], im[i]);
      abs_z.push_back(std::hypot(re[i], im[i]));
    }
    ExpectNear(out[0], F32({4}, re), 0, "real");
    ExpectNear(out[1], F32({4}, im), 0, "imag");
    ExpectNear(out[2], F32({4}, abs_z), 1e-7, "abs");
    ExpectNear(out[3], Pred({4}, {1, 0, 1, 0}), 0, "eq");
    ExpectNear(out[4], Pred({4}, {0, 1, 0, 1}), 0, "ne");
    ExpectComplexNear(out[5], PrimitiveType::kC64, {{0.5, -2}, w[1], {0.5, -2}, w[3]}, 0,
                      "select of a broadcast constant");
    ExpectComplexNear(out[6], PrimitiveType::kC128, z, 0, "convert c64 -> c128");
    ExpectComplexNear(out[7], PrimitiveType::kC64,
                      {Z(re[0], 0), Z(re[1], 0), Z(re[2], 0), Z(re[3], 0)}, 0,
                      "convert f32 -> c64");
    ExpectComplexNear(out[8], PrimitiveType::kC64, {z[0], z[2], z[1], z[3]}, 0, "transpose");
  }
}

TEST(ComplexOps, ReduceSumsAndDot) {
  const std::string text = R"(HloModule m
sum { a = c64[] parameter(0) b = c64[] parameter(1) ROOT s = c64[] add(a, b) }
ENTRY e { x = c64[2,3] parameter(0) y = c64[3,2] parameter(1)
  zero = c64[] constant((0, 0))
  rows = c64[2] reduce(x, zero), dimensions={1}, to_apply=sum
  cols = c64[3] reduce(x, zero), dimensions={0}, to_apply=sum
  d = c64[2,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (c64[2], c64[3], c64[2,2]) tuple(rows, cols, d) })";
  const std::vector<Z> x = {{1, 2}, {3, -1}, {0.5, 0}, {-2, 1}, {0, 4}, {1, 1}};
  const std::vector<Z> y = {{1, 0}, {0, 1}, {2, -1}, {1, 1}, {-1, 3}, {0.5, 0.5}};
  for (bool fusion : {true, false}) {
    auto out = RunText(text, {Complex(PrimitiveType::kC64, {2, 3}, x),
                          Complex(PrimitiveType::kC64, {3, 2}, y)},
                   fusion);
    ASSERT_EQ(out.size(), 3u);
    std::vector<Z> rows(2), cols(3), d(4);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        rows[i] += x[i * 3 + j];
        cols[j] += x[i * 3 + j];
      }
      for (int k = 0; k < 2; ++k) {
        for (int j = 0; j < 3; ++j) d[i * 2 + k] += Mul(x[i * 3 + j], y[j * 2 + k]);
      }
    }
    ExpectComplexNear(out[0], PrimitiveType::kC64, rows, 1e-6, "row sums");
    ExpectComplexNear(out[1], PrimitiveType::kC64, cols, 1e-6, "column sums");
    ExpectComplexNear(out[2], PrimitiveType::kC64, d, 1e-6, "dot");
  }
}

// Reducers and comparators that take complex values apart, as jnp.max and
// jnp.sort of complex arrays lower: the lexicographic (real, imaginary)
// maximum, |z| summed, and an ascending sort by real then imaginary part.
TEST(ComplexOps, ReducersAndComparatorsTakePartsApart) {
  const std::string text = R"(HloModule m
lexmax { a = c64[] parameter(0) b = c64[] parameter(1)
  ar = f32[] real(a) br = f32[] real(b) ai = f32[] imag(a) bi = f32[] imag(b)
  gt = pred[] compare(ar, br), direction=GT  eq = pred[] compare(ar, br), direction=EQ
  gi = pred[] compare(ai, bi), direction=GE  tie = pred[] and(eq, gi)
  keep = pred[] or(gt, tie)  ROOT r = c64[] select(keep, a, b) }
absum { a = c64[] parameter(0) b = c64[] parameter(1)
  aa = f32[] real(a) bb = f32[] abs(b) s = f32[] add(aa, bb) z = f32[] constant(0)
  ROOT r = c64[] complex(s, z) }
less { a = c64[] parameter(0) b = c64[] parameter(1)
  ar = f32[] real(a) br = f32[] real(b) ai = f32[] imag(a) bi = f32[] imag(b)
  lt = pred[] compare(ar, br), direction=LT  eq = pred[] compare(ar, br), direction=EQ
  li = pred[] compare(ai, bi), direction=LT  tie = pred[] and(eq, li)
  ROOT r = pred[] or(lt, tie) }
ENTRY e { x = c64[5] parameter(0)
  lowest = c64[] constant((-inf, -inf))  zero = c64[] constant((0, 0))
  m = c64[] reduce(x, lowest), dimensions={0}, to_apply=lexmax
  n = c64[] reduce(x, zero), dimensions={0}, to_apply=absum
  s = c64[5] sort(x), dimensions={0}, to_apply=less
  ROOT t = (c64[], c64[], c64[5]) tuple(m, n, s) })";
  const std::vector<Z> x = {{1, 2}, {3, -1}, {3, 0.5}, {-2, 1}, {0, 4}};
  for (bool fusion : {true, false}) {
    auto out = RunText(text, {Complex(PrimitiveType::kC64, {5}, x)}, fusion);
    ASSERT_EQ(out.size(), 3u);
    double abs_sum = 0;
    for (const Z& z : x) abs_sum += std::abs(z);
    ExpectComplexNear(out[0], PrimitiveType::kC64, {{3, 0.5}}, 0, "lexicographic max");
    ExpectComplexNear(out[1], PrimitiveType::kC64, {{abs_sum, 0}}, 1e-6, "sum of |z|");
    ExpectComplexNear(out[2], PrimitiveType::kC64, {{-2, 1}, {0, 4}, {1, 2}, {3, -1}, {3, 0.5}},
                      0, "sorted");
  }
}

TEST(ComplexOps, ShapeRulesRejectWhatXlaRejects) {
  struct Bad {
    const char* text;
    const char* message;
  } cases[] = {
      {"HloModule m\nENTRY e { a = c64[2] parameter(0) ROOT r = f32[2] convert(a) }",
       "complex to real"},
      {"HloModule m\nENTRY e { a = c64[2] parameter(0) ROOT r = c64[2] maximum(a, a) }",
       "complex"},
      {"HloModule m\nENTRY e { a = f16[2] parameter(0) ROOT r = c64[2] complex(a, a) }",
       "f32 or two f64"},
      {"HloModule m\nENTRY e { a = c64[2] parameter(0) ROOT r = c64[2] floor(a) }",
       "floating-point"},
  };
  for (const Bad& c : cases) {
    auto m = hlo::ParseHloText(c.text);
    const absl::Status s = m.ok() ? hlo::VerifyModule(**m) : m.status();
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s;
  }
  // Ordered comparisons of complex numbers fail at run time, naming the op.
  auto m = Parse("HloModule m\nENTRY e { a = c64[2] parameter(0) "
                 "ROOT r = pred[2] compare(a, a), direction=LT }");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {Complex(PrimitiveType::kC64, {2}, {{1, 0}, {2, 0}})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("compare is not defined for element type c64"),
            std::string::npos)
      << r.status();
}

TEST(ComplexFormats, ConstantsRoundTripThroughTextAndProto) {
  const std::string text = R"(HloModule m, entry_computation_layout={()->(c64[3]{0}, c128[], c64[2,1]{1,0})}

ENTRY %e () -> (c64[3], c128[], c64[2,1]) {
  %a = c64[3]{0} constant({(1, -2.5), (nan, inf), (-0.0, 3.4028235e+38)})
  %b = c128[] constant((0.1, -1e-300))
  %c = c64[2,1]{1,0} constant({ {(0, 1)}, {(-inf, -nan(0x1))} })
  ROOT %t = (c64[3]{0}, c128[], c64[2,1]{1,0}) tuple(c64[3]{0} %a, c128[] %b, c64[2,1]{1,0} %c)
}
)";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  const std::string printed = hlo::PrintModule(*m);
  EXPECT_EQ(printed, text);
  const Literal& b = m->entry()->instructions()[1]->literal();
  EXPECT_EQ(b.data<double>()[0], 0.1);
  EXPECT_EQ(b.data<double>()[1], -1e-300);
  auto bytes = hlo::ModuleToProtoBytes(*m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = hlo::ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(hlo::PrintModule(**back), text);
  // Malformed complex values name the problem.
  for (const char* bad : {"c64[] constant(1)", "c64[] constant((1 2))", "c64[] constant((1, 2, 3))",
                          "c64[1] constant({(1, 1e39)})"}) {
    auto r = hlo::ParseHloText(absl::StrCat("HloModule m\nENTRY e { ROOT c = ", bad, " }"));
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(ComplexFormats, NpyReadsAndWritesComplex) {
  const Literal lit = Complex(PrimitiveType::kC128, {2}, {{1, -2}, {0.5, 3}});
  auto bytes = tools::LiteralToNpy(lit);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_NE(bytes->find("'descr': '<c16'"), std::string::npos);
  auto arr = tools::ParseNpy(*bytes, "z.npy");
  ASSERT_TRUE(arr.ok()) << arr.status();
  auto back = tools::NpyToLiteral(*arr, hlo::Shape(PrimitiveType::kC64, {2}), "z.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectComplexNear(*back, PrimitiveType::kC64, {{1, -2}, {0.5, 3}}, 0, "c128 -> c64 read");
  auto c64 = tools::LiteralToNpy(*back);
  ASSERT_TRUE(c64.ok());
  EXPECT_NE(c64->find("'descr': '<c8'"), std::string::npos);
  // A real float array fills the real parts.
  auto real = tools::LiteralToNpy(F32({2}, {4, 5}));
  auto real_arr = tools::ParseNpy(*real, "r.npy");
  auto z = tools::NpyToLiteral(*real_arr, hlo::Shape(PrimitiveType::kC64, {2}), "r.npy");
  ASSERT_TRUE(z.ok()) << z.status();
  ExpectComplexNear(*z, PrimitiveType::kC64, {{4, 0}, {5, 0}}, 0, "float -> c64 read");
  // Integers are not complex values.
  auto ints = tools::LiteralToNpy(S32({2}, {1, 2}));
  auto int_arr = tools::ParseNpy(*ints, "i.npy");
  auto bad = tools::NpyToLiteral(*int_arr, hlo::Shape(PrimitiveType::kC64, {2}), "i.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("complex64, complex128 or a float dtype"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace tpuoff::runtime::testing
