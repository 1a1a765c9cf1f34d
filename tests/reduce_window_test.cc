// reduce-window end to end: XLA's `window={...}` text syntax (print/parse
// fixed point, errors), the proto `window` field, shape inference, and the
// emulator against hand-computed values and an independent reference that
// materialises the dilated, padded base (run with 1 and 4 threads, fusion on
// and off; all runs must agree bit for bit). tests/corpus/reduce_window.hlo
// was checked against real XLA by tools/xla_check (identical outputs).
#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/proto/proto_io.h"
#include "hlo/ir/shape_inference.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/window.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::WindowDimension;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

const char* kReducers = R"(
add_f32 { add.a = f32[] parameter(0)  add.b = f32[] parameter(1)  ROOT add.r = f32[] add(add.a, add.b) }
max_f32 { max.a = f32[] parameter(0)  max.b = f32[] parameter(1)  ROOT max.r = f32[] maximum(max.a, max.b) }
add_s32 { adds.a = s32[] parameter(0)  adds.b = s32[] parameter(1)  ROOT adds.r = s32[] add(adds.a, adds.b) }
max_bf16 { maxb.a = bf16[] parameter(0)  maxb.b = bf16[] parameter(1)  ROOT maxb.r = bf16[] maximum(maxb.a, maxb.b) }
argmax {
  am.av = f32[] parameter(0)  am.ai = s32[] parameter(1)  am.bv = f32[] parameter(2)  am.bi = s32[] parameter(3)
  am.ge = pred[] compare(am.av, am.bv), direction=GE
  am.v = f32[] select(am.ge, am.av, am.bv)  am.i = s32[] select(am.ge, am.ai, am.bi)
  ROOT am.t = (f32[], s32[]) tuple(am.v, am.i)
}
)";

std::string Module(const std::string& entry) {
  return std::string("HloModule rw\n") + kReducers + entry;
}

// "f32[2,3]" for element type `t` and `dims`.
std::string ShapeText(const std::string& t, const std::vector<int64_t>& dims) {
  return absl::StrCat(t, "[", absl::StrJoin(dims, ","), "]");
}

// One random integer in [lo, hi] per element of `dims` (sums exact in f32
// and f64; a narrow range gives many ties).
std::vector<double> SmallIntegers(const std::vector<int64_t>& dims, int lo, int hi,
                                  std::mt19937& rng) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<double> v(count);
  for (double& e : v) e = std::uniform_int_distribution<int>(lo, hi)(rng);
  return v;
}

// A select-and-scatter module in element type `t`: select compares with
// `dir`, scatter adds, init 0.5.
std::string SelectAndScatterModule(const std::string& t, const std::string& dir,
                                   const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& src_dims,
                                   const std::vector<WindowDimension>& w) {
  return absl::StrCat(
      "HloModule sas\nsel { a = ", t, "[] parameter(0) b = ", t,
      "[] parameter(1) ROOT c = pred[] compare(a, b), direction=", dir, " }\nsum { p = ", t,
      "[] parameter(0) q = ", t, "[] parameter(1) ROOT r = ", t, "[] add(p, q) }\nENTRY e { x = ",
      ShapeText(t, dims), " parameter(0) g = ", ShapeText(t, src_dims), " parameter(1) z = ", t,
      "[] constant(0.5) ROOT s = ", ShapeText(t, dims),
      " select-and-scatter(x, g, z), window=", hlo::WindowToString(w),
      ", select=sel, scatter=sum }\n");
}

// The generic path's select-and-scatter (the module in f64, which no fast
// path takes) of operand `x` and source `g`, into `out`.
void GenericSelectAndScatter(const std::string& dir, const std::vector<int64_t>& dims,
                             const std::vector<int64_t>& src_dims,
                             const std::vector<WindowDimension>& w, const std::vector<double>& x,
                             const std::vector<double>& g, std::vector<double>* out) {
  auto m64 = Parse(SelectAndScatterModule("f64", dir, dims, src_dims, w));
  ASSERT_NE(m64, nullptr);
  auto r = RunModule(*m64, {Lit(hlo::PrimitiveType::kF64, dims, x),
                            Lit(hlo::PrimitiveType::kF64, src_dims, g)}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  out->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) (*out)[i] = r->outputs[0].GetAsDouble(i);
}

const HloInstruction* Find(const hlo::HloModule& m, HloOpcode op) {
  for (const auto& c : m.computations()) {
    for (const auto& x : c->instructions()) {
      if (x->opcode() == op) return x.get();
    }
  }
  return nullptr;
}

// Every run (fusion on/off, 1 and 4 threads) must give the same bits.
std::vector<Literal> RunAllWays(const hlo::HloModule& m, const std::vector<Literal>& args) {
  std::vector<Literal> first;
  for (bool fusion : {true, false}) {
    for (int threads : {1, 4}) {
      RunOptions opts;
      opts.num_threads = threads;
      opts.disable_fusion = !fusion;
      auto r = RunModule(m, args, opts);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return {};
      if (first.empty()) {
        first = std::move(r->outputs);
        continue;
      }
      EXPECT_EQ(first.size(), r->outputs.size());
      for (size_t i = 0; i < first.size() && i < r->outputs.size(); ++i) {
        EXPECT_TRUE(first[i] == r->outputs[i]) << "output " << i << " differs (fusion "
                                                << fusion << ", threads " << threads << ")";
      }
    }
  }
  return first;
}

// ---------------------------------------------------------------------------
// Text, proto and shape rules.

TEST(ReduceWindowFormat, PrintsXlaSyntaxAndReparsesToTheSameAttributes) {
  auto m = Parse(Module(R"(ENTRY e {
  x = f32[7] parameter(0)  z = f32[] constant(0)
  ROOT r = f32[3] reduce-window(x, z), window={size=2 stride=3 pad=1_-2 lhs_dilate=2 rhs_dilate=3 rhs_reversal=1}, to_apply=add_f32
})"));
  ASSERT_NE(m, nullptr);
  const std::string printed = hlo::PrintModule(*m);
  EXPECT_THAT(printed, HasSubstr("window={size=2 stride=3 pad=1_-2 lhs_dilate=2 rhs_dilate=3 "
                                 "rhs_reversal=1}, to_apply=%add_f32"));
  auto again = Parse(printed);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(hlo::PrintModule(*again), printed);
  const std::vector<WindowDimension> want = {{2, 3, 1, -2, 3, 2, true}};
  EXPECT_EQ(Find(*again, HloOpcode::kReduceWindow)->attrs().window, want);
}

TEST(ReduceWindowFormat, DefaultFieldsAreOmittedLikeXla) {
  std::vector<WindowDimension> w(3);
  w[2].size = 32;
  w[2].stride = 32;
  w[2].padding_low = w[2].padding_high = 10;
  EXPECT_EQ(hlo::WindowToString(w), "{size=1x1x32 stride=1x1x32 pad=0_0x0_0x10_10}");
  EXPECT_EQ(hlo::WindowToString({}), "{}");
  EXPECT_EQ(hlo::WindowToString({WindowDimension{}}), "{size=1}");
}

TEST(ReduceWindowFormat, ProtoWindowFieldRoundTrips) {
  auto m = Parse(Module(R"(ENTRY e {
  x = f32[2,7] parameter(0)  z = f32[] constant(0)
  ROOT r = f32[2,3] reduce-window(x, z), window={size=1x2 stride=1x3 pad=0_0x1_-2 lhs_dilate=1x2 rhs_dilate=1x3 rhs_reversal=0x1}, to_apply=add_f32
})"));
  ASSERT_NE(m, nullptr);
  auto bytes = hlo::ModuleToProtoBytes(*m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = hlo::ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(hlo::PrintModule(**back), hlo::PrintModule(*m));
  EXPECT_EQ(Find(**back, HloOpcode::kReduceWindow)->attrs().window,
            Find(*m, HloOpcode::kReduceWindow)->attrs().window);
}

TEST(ReduceWindowFormat, MalformedWindowsAreErrorsNamingThePlace) {
  struct Bad {
    std::string window;
    std::string message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"window={size=2 foo=1}", "unknown window field 'foo'"},
           {"window={size=2 size=2}", "window field size given twice"},
           {"window={stride=2}", "a window needs size="},
           {"window={size=2 pad=1}", "window pad entries are low_high"},
           {"window={size=2 rhs_reversal=2}", "rhs_reversal entries are 0 or 1"},
           {"window={size=2x2 stride=1}", "window stride has 1 dimensions, size= has 2"},
           {"window={size=0}", "window dimension 0: size must be >= 1"},
           {"window={size=2 stride=0}", "stride must be >= 1"},
           {"window={size=2 lhs_dilate=0}", "dilations must be >= 1"},
           {"window={size=2 pad=-9_0}", "padding makes the padded base negative"},
           {"window={size=2x2}", "window has 2 dimensions, the operand has rank 1"},
           {"window={size=a}", "expected window values"},
       }) {
    SCOPED_TRACE(b.window);
    auto m = hlo::ParseHloText(Module("ENTRY e { x = f32[7] parameter(0)  z = f32[] constant(0)\n"
                                      "  ROOT r = reduce-window(x, z), " + b.window +
                                      ", to_apply=add_f32 }"),
                               "bad.hlo");
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(m.status().message(), HasSubstr(b.message));
    EXPECT_THAT(m.status().message(), HasSubstr("bad.hlo:"));
  }
  // A window may be omitted only at rank 0 (as XLA prints it).
  auto no_window = hlo::ParseHloText(
      Module("ENTRY e { x = f32[7] parameter(0)  z = f32[] constant(0)\n"
             "  ROOT r = f32[7] reduce-window(x, z), to_apply=add_f32 }"));
  ASSERT_TRUE(no_window.ok()) << no_window.status();
  const absl::Status verified = hlo::VerifyModule(**no_window);
  ASSERT_FALSE(verified.ok());
  EXPECT_THAT(verified.message(), HasSubstr("reduce-window"));
  EXPECT_THAT(verified.message(), HasSubstr("rank"));
  auto rank0 = hlo::ParseHloText(
      Module("ENTRY e { x = f32[] parameter(0)  z = f32[] constant(0)\n"
             "  ROOT r = f32[] reduce-window(x, z), to_apply=add_f32 }"));
  EXPECT_TRUE(rank0.ok()) << rank0.status();
  auto on_reduce = hlo::ParseHloText(
      Module("ENTRY e { x = f32[7] parameter(0)  z = f32[] constant(0)\n"
             "  ROOT r = f32[] reduce(x, z), dimensions={0}, window={size=2}, to_apply=add_f32 }"));
  ASSERT_FALSE(on_reduce.ok());
  EXPECT_THAT(on_reduce.status().message(), HasSubstr("attribute window does not apply to reduce"));
}

TEST(ReduceWindowShape, InfersVariadicResultsAndRejectsBadOperands) {
  auto m = Parse(Module("ENTRY e { x = f32[4] parameter(0)  ROOT z = f32[] constant(0) }"));
  ASSERT_NE(m, nullptr);
  hlo::HloComputation* argmax = nullptr;
  hlo::HloComputation* add = nullptr;
  for (const auto& c : m->computations()) {
    if (c->name() == "argmax") argmax = c.get();
    if (c->name() == "add_f32") add = c.get();
  }
  ASSERT_NE(argmax, nullptr);
  hlo::HloAttributes a;
  a.window = {WindowDimension{3, 2, 1, 0, 1, 1, false}};
  const hlo::Shape f(hlo::PrimitiveType::kF32, {6}), s(hlo::PrimitiveType::kS32, {6});
  const hlo::Shape f0 = hlo::Shape::Scalar(hlo::PrimitiveType::kF32);
  const hlo::Shape s0 = hlo::Shape::Scalar(hlo::PrimitiveType::kS32);
  std::vector<hlo::HloComputation*> called = {argmax};
  auto ok = hlo::InferShape(HloOpcode::kReduceWindow, {&f, &s, &f0, &s0}, a, called, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->ToString(), "(f32[3], s32[3])");
  auto odd = hlo::InferShape(HloOpcode::kReduceWindow, {&f, &s, &f0}, a, called, nullptr);
  EXPECT_THAT(odd.status().message(), HasSubstr("needs N inputs followed by N init values"));
  auto bad_init = hlo::InferShape(HloOpcode::kReduceWindow, {&f, &f}, a, {add}, nullptr);
  EXPECT_THAT(bad_init.status().message(), HasSubstr("init value 0 must be a scalar"));
  auto bad_reducer = hlo::InferShape(HloOpcode::kReduceWindow, {&f, &f0}, a, called, nullptr);
  EXPECT_THAT(bad_reducer.status().message(), HasSubstr("computation argmax takes 4 parameters"));
}

// ---------------------------------------------------------------------------
// Execution.

struct RunCase {
  std::string name;
  std::string entry;
  std::vector<Literal> args;
  std::vector<Literal> want;
};

class ReduceWindowRun : public ::testing::TestWithParam<int> {};

std::vector<RunCase> RunCases() {
  std::vector<RunCase> c;
  auto add = [&](std::string name, std::string entry, std::vector<Literal> args,
                 std::vector<Literal> want) {
    c.push_back({std::move(name), std::move(entry), std::move(args), std::move(want)});
  };
  add("strided_sum", "ENTRY e { x = f32[7] parameter(0) z = f32[] constant(0) ROOT r = f32[3] "
      "reduce-window(x, z), window={size=3 stride=2}, to_apply=add_f32 }",
      {F32({7}, {1, 2, 3, 4, 5, 6, 7})}, {F32({3}, {6, 12, 18})});
  add("padded_max", "ENTRY e { x = f32[3] parameter(0) z = f32[] constant(-inf) ROOT r = f32[4] "
      "reduce-window(x, z), window={size=2 pad=1_1}, to_apply=max_f32 }",
      {F32({3}, {1, 5, 2})}, {F32({4}, {1, 5, 5, 2})});
  add("base_dilation_holes_add_nothing", "ENTRY e { x = f32[3] parameter(0) z = f32[] constant(0) "
      "ROOT r = f32[4] reduce-window(x, z), window={size=2 lhs_dilate=2}, to_apply=add_f32 }",
      {F32({3}, {1, 2, 3})}, {F32({4}, {1, 2, 2, 3})});
  add("window_dilation", "ENTRY e { x = f32[5] parameter(0) z = f32[] constant(0) ROOT r = f32[3] "
      "reduce-window(x, z), window={size=2 rhs_dilate=2}, to_apply=add_f32 }",
      {F32({5}, {1, 2, 3, 4, 5})}, {F32({3}, {4, 6, 8})});
  // The init value enters once per output, also for windows entirely in padding.
  add("init_once_all_padding", "ENTRY e { x = f32[2] parameter(0) z = f32[] constant(10) "
      "ROOT r = f32[4] reduce-window(x, z), window={size=2 pad=3_0}, to_apply=add_f32 }",
      {F32({2}, {1, 2})}, {F32({4}, {10, 10, 11, 13})});
  add("negative_padding_and_reversal", "ENTRY e { x = f32[6] parameter(0) z = f32[] constant(0) "
      "ROOT r = f32[2] reduce-window(x, z), window={size=2 stride=2 pad=-1_-1 rhs_reversal=1}, "
      "to_apply=add_f32 }",
      {F32({6}, {1, 2, 4, 8, 16, 32})}, {F32({2}, {6, 24})});
  add("two_dims", "ENTRY e { x = s32[3,4] parameter(0) z = s32[] constant(0) ROOT r = s32[2,2] "
      "reduce-window(x, z), window={size=2x2 stride=1x2}, to_apply=add_s32 }",
      {S32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}, {S32({2, 2}, {14, 22, 30, 38})});
  add("bf16_max", "ENTRY e { x = bf16[4] parameter(0) z = bf16[] constant(-inf) ROOT r = bf16[2] "
      "reduce-window(x, z), window={size=2 stride=2}, to_apply=max_bf16 }",
      {BF16({4}, {0.5, -1, 3, 2.5})}, {BF16({2}, {0.5, 3})});
  add("variadic_argmax_ties_keep_the_first",
      "ENTRY e { x = f32[6] parameter(0) i = s32[6] iota(), iota_dimension=0 "
      "ninf = f32[] constant(-inf) m1 = s32[] constant(-1) ROOT r = (f32[3], s32[3]) "
      "reduce-window(x, i, ninf, m1), window={size=3 stride=2 pad=1_0}, to_apply=argmax }",
      {F32({6}, {3, 9, 9, -2, 7, 1})}, {F32({3}, {9, 9, 7}), S32({3}, {1, 1, 4})});
  add("scalar", "ENTRY e { x = f32[] parameter(0) z = f32[] constant(1) ROOT r = f32[] "
      "reduce-window(x, z), window={}, to_apply=add_f32 }",
      {F32({}, {2.5})}, {F32({}, {3.5})});
  // Only offsets inside the base are visited: a 2^30 window is as cheap as a
  // small one (a prefix sum here).
  add("huge_window_prefix_sum", "ENTRY e { x = f32[3] parameter(0) z = f32[] constant(0) "
      "ROOT r = f32[3] reduce-window(x, z), window={size=1073741824 pad=1073741823_0}, "
      "to_apply=add_f32 }",
      {F32({3}, {1, 2, 3})}, {F32({3}, {1, 3, 6})});
  add("empty_output", "ENTRY e { x = f32[2] parameter(0) z = f32[] constant(0) ROOT r = f32[0] "
      "reduce-window(x, z), window={size=3}, to_apply=add_f32 }",
      {F32({2}, {1, 2})}, {F32({0}, {})});
  return c;
}

TEST_P(ReduceWindowRun, MatchesHandComputedOutputs) {
  const std::vector<RunCase> cases = RunCases();
  const RunCase& tc = cases[GetParam()];
  SCOPED_TRACE(tc.name);
  auto m = Parse(Module(tc.entry));
  ASSERT_NE(m, nullptr);
  const absl::Status verified = hlo::VerifyModule(*m);
  ASSERT_TRUE(verified.ok()) << verified;
  std::vector<Literal> got = RunAllWays(*m, tc.args);
  std::vector<const Literal*> flat;
  for (const Literal& l : got) flat.push_back(&l);
  ASSERT_EQ(flat.size(), tc.want.size());
  for (size_t i = 0; i < flat.size(); ++i) ExpectNear(*flat[i], tc.want[i], 0, tc.name);
}

INSTANTIATE_TEST_SUITE_P(Table, ReduceWindowRun,
                         ::testing::Range(0, static_cast<int>(RunCases().size())),
                         [](const auto& info) { return RunCases()[info.param].name; });

// An independent reference: materialise the base-dilated, padded input (holes
// and padding as "absent"), then fold every window in order.
std::vector<double> Reference(const std::vector<double>& x, const std::vector<int64_t>& dims,
                              const std::vector<WindowDimension>& w, bool max,
                              std::vector<int64_t>* out_dims) {
  const size_t rank = dims.size();
  std::vector<int64_t> pdims(rank);
  for (size_t d = 0; d < rank; ++d) {
    pdims[d] = (dims[d] - 1) * w[d].base_dilation + 1 + w[d].padding_low + w[d].padding_high;
  }
  int64_t pcount = 1;
  for (int64_t p : pdims) pcount *= p;
  std::vector<double> padded(pcount, std::nan(""));  // NaN = absent
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t rest = i, off = 0, stride = 1;
    std::vector<int64_t> idx(rank);
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    bool inside = true;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t p = idx[d] * w[d].base_dilation + w[d].padding_low;
      inside &= p >= 0 && p < pdims[d];
      off += p * stride;
      stride *= pdims[d];
    }
    if (inside) padded[off] = x[i];
  }
  out_dims->clear();
  int64_t ocount = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t span = (w[d].size - 1) * w[d].window_dilation + 1;
    out_dims->push_back(pdims[d] < span ? 0 : (pdims[d] - span) / w[d].stride + 1);
    ocount *= out_dims->back();
  }
  std::vector<double> out(ocount, max ? -kInf : 0.0);
  for (int64_t o = 0; o < ocount; ++o) {
    std::vector<int64_t> oi(rank);
    for (int64_t d = rank - 1, rest = o; d >= 0; --d) {
      oi[d] = rest % (*out_dims)[d];
      rest /= (*out_dims)[d];
    }
    std::vector<int64_t> k(rank, 0);
    while (true) {
      int64_t off = 0, stride = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        off += (oi[d] * w[d].stride + k[d] * w[d].window_dilation) * stride;
        stride *= pdims[d];
      }
      const double v = padded[off];
      if (!std::isnan(v)) out[o] = max ? std::max(out[o], v) : out[o] + v;
      int64_t d = rank - 1;
      for (; d >= 0; --d) {
        if (++k[d] < w[d].size) break;
        k[d] = 0;
      }
      if (d < 0) break;
    }
  }
  return out;
}

TEST(ReduceWindowRun, RandomWindowsMatchTheMaterialisedReference) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = pick(1, 3);
    std::vector<int64_t> dims;
    std::vector<WindowDimension> w(rank);
    for (int d = 0; d < rank; ++d) {
      dims.push_back(pick(1, 9));
      w[d] = {pick(1, 4), pick(1, 3), pick(-1, 3), pick(-1, 3), pick(1, 2), pick(1, 2), false};
    }
    std::vector<int64_t> out_dims;
    const bool max = trial % 2 == 1;
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    std::vector<double> x(count);
    // Small integers: sums are exact in f32 whatever the order.
    for (double& v : x) v = pick(-8, 8);
    auto expected_dims = hlo::WindowOutputDimensions(dims, w);
    if (!expected_dims.ok()) continue;  // padding made the base negative
    const std::vector<double> want = Reference(x, dims, w, max, &out_dims);
    ASSERT_EQ(*expected_dims, out_dims);
    const std::string entry = "ENTRY e { x = " + ShapeText("f32", dims) +
                              " parameter(0) z = f32[] constant(" + (max ? "-inf" : "0") +
                              ") ROOT r = " + ShapeText("f32", out_dims) + " reduce-window(x, z), window=" +
                              hlo::WindowToString(w) + ", to_apply=" + (max ? "max_f32" : "add_f32") +
                              " }";
    SCOPED_TRACE(entry);
    auto m = Parse(Module(entry));
    ASSERT_NE(m, nullptr);
    std::vector<Literal> got = RunAllWays(*m, {F32(dims, x)});
    ASSERT_EQ(got.size(), 1u);
    ExpectNear(got[0], F32(out_dims, want), 0, "random window");
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// select-and-scatter (pooling's gradient): the f32 path with its tabled
// window walk against the generic path (the same module in f64, which no
// fast path takes), on random windows with overlaps, padding, window and
// base dilation and ties (small integers: sums exact in both), for every
// select direction.
TEST(ReduceWindowRun, SelectAndScatterFastPathMatchesTheGenericOne) {
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* dirs[] = {"GE", "GT", "LE", "LT"};
  int checked = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const int rank = pick(1, 4);
    std::vector<int64_t> dims;
    std::vector<WindowDimension> w(rank);
    for (int d = 0; d < rank; ++d) {
      dims.push_back(pick(1, 7));
      w[d] = {pick(1, 3), pick(1, 3), pick(0, 2), pick(0, 2), pick(1, 2), pick(1, 2), false};
    }
    auto src_dims = hlo::WindowOutputDimensions(dims, w);
    if (!src_dims.ok()) continue;
    const std::vector<double> x = SmallIntegers(dims, -3, 3, rng);  // many ties
    const std::vector<double> g = SmallIntegers(*src_dims, -9, 9, rng);
    const std::string text = SelectAndScatterModule("f32", dirs[trial % 4], dims, *src_dims, w);
    SCOPED_TRACE(text);
    auto m32 = Parse(text);
    ASSERT_NE(m32, nullptr);
    std::vector<double> want;
    ASSERT_NO_FATAL_FAILURE(
        GenericSelectAndScatter(dirs[trial % 4], dims, *src_dims, w, x, g, &want));
    auto fast = RunModule(*m32, {F32(dims, x), F32(*src_dims, g)}, {});
    ASSERT_TRUE(fast.ok()) << fast.status();
    ExpectNear(fast->outputs[0], F32(dims, want), 0, "select-and-scatter");
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

// Pooling over NHWC (the last dimension's window trivial): the emulator
// folds a whole channel row per window position. Every output element must
// still see its window in row-major order, so f32 sums of non-integer
// values equal a float reference that adds in that order, bit for bit
// (RunAllWays: 1 and 4 threads, fusion on and off, all equal). Shapes up to
// [8,16,16,32] with 3x3 windows put the work over the threading threshold.
TEST(ReduceWindowRun, ChannelRowsFoldInWindowOrder) {
  std::mt19937 rng(23);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 24; ++trial) {
    const int rank = pick(2, 4);
    const bool large = trial % 6 == 5;
    std::vector<int64_t> dims;
    std::vector<WindowDimension> w(rank);
    for (int d = 0; d + 1 < rank; ++d) {
      dims.push_back(large ? (d == 0 ? 8 : 16) : pick(1, 9));
      w[d] = {pick(1, 3), pick(1, 3), pick(0, 2), pick(0, 2), pick(1, 2), pick(1, 2), false};
    }
    dims.push_back(large ? 32 : pick(1, 11));
    w[rank - 1] = {1, 1, 0, 0, 1, 1, false};
    auto out_dims = hlo::WindowOutputDimensions(dims, w);
    if (!out_dims.ok()) continue;
    const bool max = trial % 2 == 1;
    int64_t count = 1, out_count = 1;
    for (int64_t d : dims) count *= d;
    for (int64_t d : *out_dims) out_count *= d;
    std::vector<float> x(count);
    for (float& v : x) v = normal(rng);
    // The float reference: window offsets row-major (last fastest), holes
    // and padding skipped, each value folded into a float accumulator.
    std::vector<double> want(out_count);
    std::vector<int64_t> o(rank), k(rank);
    for (int64_t flat = 0; flat < out_count; ++flat) {
      for (int64_t d = rank - 1, rest = flat; d >= 0; --d) {
        o[d] = rest % (*out_dims)[d];
        rest /= (*out_dims)[d];
      }
      float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
      std::fill(k.begin(), k.end(), 0);
      while (true) {
        int64_t in_flat = 0;
        bool inside = true;
        for (int d = 0; d < rank; ++d) {
          const int64_t pos = o[d] * w[d].stride + k[d] * w[d].window_dilation - w[d].padding_low;
          if (pos < 0 || pos > (dims[d] - 1) * w[d].base_dilation || pos % w[d].base_dilation) {
            inside = false;
            break;
          }
          in_flat = in_flat * dims[d] + pos / w[d].base_dilation;
        }
        if (inside) acc = max ? std::max(acc, x[in_flat]) : acc + x[in_flat];
        int d = rank - 1;
        for (; d >= 0; --d) {
          if (++k[d] < w[d].size) break;
          k[d] = 0;
        }
        if (d < 0) break;
      }
      want[flat] = acc;
    }
    const std::string entry = "ENTRY e { x = " + ShapeText("f32", dims) +
                              " parameter(0) z = f32[] constant(" + (max ? "-inf" : "0") +
                              ") ROOT r = " + ShapeText("f32", *out_dims) +
                              " reduce-window(x, z), window=" + hlo::WindowToString(w) +
                              ", to_apply=" + (max ? "max_f32" : "add_f32") + " }";
    SCOPED_TRACE(entry);
    auto m = Parse(Module(entry));
    ASSERT_NE(m, nullptr);
    std::vector<double> xd(x.begin(), x.end());
    std::vector<Literal> got = RunAllWays(*m, {F32(dims, xd)});
    ASSERT_EQ(got.size(), 1u);
    ExpectNear(got[0], F32(*out_dims, want), 0, "channel rows");
  }
}

// select-and-scatter over NHWC (max pooling's gradient): channel rows
// selected together, and batch indices scattered on several threads when
// the batch window cannot overlap. Against the generic path (f64), with 1
// and 4 threads; batch windows that overlap (size 2 stride 1) and padded
// ones take the one-thread walk and must agree too.
TEST(ReduceWindowRun, SelectAndScatterChannelRowsAndBatchThreads) {
  std::mt19937 rng(31);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const WindowDimension batch_windows[] = {
      {1, 1, 0, 0, 1, 1, false}, {1, 2, 0, 0, 1, 1, false}, {2, 2, 0, 1, 1, 1, false},
      {2, 1, 0, 0, 1, 1, false}, {1, 1, 1, 0, 1, 1, false}};
  int checked = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> dims = {pick(3, 10), pick(4, 14), pick(4, 14), pick(1, 12)};
    std::vector<WindowDimension> w(4);
    w[0] = batch_windows[trial % 5];
    for (int d = 1; d < 3; ++d) w[d] = {pick(2, 3), pick(1, 2), pick(0, 1), pick(0, 1), 1, 1, false};
    w[3] = {1, 1, 0, 0, 1, 1, false};
    auto src_dims = hlo::WindowOutputDimensions(dims, w);
    if (!src_dims.ok()) continue;
    const std::vector<double> x = SmallIntegers(dims, -3, 3, rng);  // many ties
    const std::vector<double> g = SmallIntegers(*src_dims, -9, 9, rng);
    const std::string dir = trial % 2 ? "GE" : "GT";
    const std::string text = SelectAndScatterModule("f32", dir, dims, *src_dims, w);
    SCOPED_TRACE(text);
    auto m32 = Parse(text);
    ASSERT_NE(m32, nullptr);
    std::vector<double> want;
    ASSERT_NO_FATAL_FAILURE(GenericSelectAndScatter(dir, dims, *src_dims, w, x, g, &want));
    for (int threads : {1, 4}) {
      RunOptions opts;
      opts.num_threads = threads;
      auto fast = RunModule(*m32, {F32(dims, x), F32(*src_dims, g)}, opts);
      ASSERT_TRUE(fast.ok()) << fast.status();
      ExpectNear(fast->outputs[0], F32(dims, want), 0, "select-and-scatter rows");
    }
    ++checked;
  }
  EXPECT_GT(checked, 15);
}

TEST(ReduceWindowRun, JaxStridedTileMaxOverARaggedVocab) {
  // What XLA:CPU emits for a row max over V=70 in tiles of 32 (post-optimisation
  // JAX dumps): size=1x32, stride=1x32, the vocab padded 13 on both sides.
  auto m = Parse(Module(R"(ENTRY e {
  x = f32[3,70] parameter(0)  z = f32[] constant(-inf)
  ROOT r = f32[3,3] reduce-window(x, z), window={size=1x32 stride=1x32 pad=0_0x13_13}, to_apply=max_f32
})"));
  ASSERT_NE(m, nullptr);
  std::vector<double> x(210);
  for (int i = 0; i < 210; ++i) x[i] = std::sin(0.37 * i) * 10;
  std::vector<double> want(9, -kInf);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 70; ++c) {
      const int tile = (c + 13) / 32;
      want[r * 3 + tile] = std::max(want[r * 3 + tile], static_cast<double>(static_cast<float>(x[r * 70 + c])));
    }
  }
  std::vector<Literal> got = RunAllWays(*m, {F32({3, 70}, x)});
  ASSERT_EQ(got.size(), 1u);
  ExpectNear(got[0], F32({3, 3}, want), 0, "tile max");
}

// jnp.cumsum lowers to a window as long as the axis (pad=n-1_0). bf16 and
// f16 fold in f32 and round once, as XLA:CPU computes them: 600 ones sum
// to 600 (rounding every step would stop at 256 in bf16), each prefix
// exact; and the window tables stay linear in the axis (a 40000-long f32
// cumsum: 1.6e9 table entries, 12.8 GB, before).
TEST(ReduceWindowRun, CumulativeSumsFoldHalfTypesInF32) {
  for (const char* type : {"bf16", "f16"}) {
    const std::string t = type;
    auto m = Parse("HloModule m\nadd { a = " + t + "[] parameter(0) b = " + t +
                   "[] parameter(1) ROOT s = " + t + "[] add(a, b) }\n" +
                   "ENTRY e { x = " + t + "[600] parameter(0) z = " + t + "[] constant(0)\n" +
                   "  ROOT r = " + t + "[600] reduce-window(x, z), window={size=600 pad=599_0}, "
                   "to_apply=add }");
    ASSERT_NE(m, nullptr) << t;
    std::vector<double> want(600);
    for (int i = 0; i < 600; ++i) want[i] = i + 1;  // representable: <= 2^8 * 4 apart
    const Literal ones = Lit(t == "bf16" ? PrimitiveType::kBF16 : PrimitiveType::kF16, {600},
                             std::vector<double>(600, 1.0));
    std::vector<Literal> got = RunAllWays(*m, {ones});
    ASSERT_EQ(got.size(), 1u);
    // 600 is representable in both; the prefixes round once each (bf16:
    // 8 significant bits, so 257 -> 256, ...): compare to the rounded sums.
    std::vector<double> rounded(600);
    for (int i = 0; i < 600; ++i) {
      Literal one = Lit(ones.shape().element_type(), {}, {want[i]});
      rounded[i] = one.GetAsDouble(0);
    }
    ExpectNear(got[0], Lit(ones.shape().element_type(), {600}, rounded), 0, t + " cumsum");
  }
  const int64_t n = 40000;
  auto m = Parse(Module("ENTRY e { x = f32[40000] parameter(0) z = f32[] constant(0)\n"
                        "  ROOT r = f32[40000] reduce-window(x, z), "
                        "window={size=40000 pad=39999_0}, to_apply=add_f32 }"));
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({n}, std::vector<double>(n, 1.0))}, RunOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{4095}, n - 2, n - 1}) {
    EXPECT_EQ(r->outputs[0].GetAsDouble(i), static_cast<double>(i + 1)) << i;
  }
}

// Prefix windows (cumsum/cummax along one axis) take a running fold: the
// same bits as folding every window afresh, which the generic path does
// (the same reducer followed by a copy is no plain reducer), on random
// floats, along either axis, with a non-zero init; windows that stop being
// prefixes, and reversed ones, take the general walk. (bf16's f32 fold:
// CumulativeSumsFoldHalfTypesInF32.)
TEST(ReduceWindowRun, PrefixWindowsFoldAsEveryWindowAfresh) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> x(4 * 300);
  for (double& v : x) v = u(rng);
  struct Case {
    std::string type, window, op, init;
  };
  const std::vector<Case> cases = {
      {"f32", "size=1x300 pad=0_0x299_0", "add", "0"},
      {"f32", "size=4x1 pad=3_0x0_0", "add", "2.5"},
      {"f32", "size=1x300 pad=0_0x299_0", "maximum", "-inf"},
      {"f32", "size=1x200 pad=0_0x199_0", "add", "0"},  // prefixes, then sliding windows
      {"f32", "size=1x300 pad=0_0x299_0 rhs_reversal=0x1", "add", "0"},  // reversed: afresh
  };
  for (const Case& c : cases) {
    const std::string& t = c.type;
    auto module = [&](bool plain) {
      return "HloModule m\nr { a = " + t + "[] parameter(0) b = " + t + "[] parameter(1) s = " + t +
             "[] " + c.op + "(a, b)" + (plain ? "" : " c = " + t + "[] copy(s)") + " }\n" +
             "ENTRY e { x = " + t + "[4,300] parameter(0) z = " + t + "[] constant(" + c.init +
             ")\n  ROOT w = " + t + "[4,300] reduce-window(x, z), window={" + c.window +
             "}, to_apply=r }";
    };
    SCOPED_TRACE(module(true));
    auto fast = Parse(module(true));
    auto generic = Parse(module(false));
    ASSERT_NE(fast, nullptr);
    ASSERT_NE(generic, nullptr);
    const Literal in = Lit(t == "bf16" ? PrimitiveType::kBF16 : PrimitiveType::kF32, {4, 300}, x);
    auto a = RunModule(*fast, {in}, RunOptions());
    auto b = RunModule(*generic, {in}, RunOptions());
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectNear(a->outputs[0], b->outputs[0], 0, c.window + " " + c.op);
  }
}

}  // namespace
}  // namespace tpuoff::runtime
