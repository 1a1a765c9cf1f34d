// The loop JIT (runtime/emulator/loop_jit.h) against the block interpreter:
// every output of every module bit-identical with the JIT compiling every
// program it can (RunOptions::jit = kAlways) and with it off — elementwise
// ops of each type on special values (NaN, infinities, signed zeros,
// subnormals, the edges of exp's range, integer extremes and out-of-range
// shifts), reductions of each kind, tails of every length, dynamic slices
// and updates, non-temporal stores, exp and log on a million bit patterns,
// and the GRPO kernels. Without LLVM the JIT compiles nothing and the
// comparisons still hold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "runtime/emulator/executor.h"
#include "runtime/emulator/loop_jit.h"
#include "runtime/emulator/plan.h"
#include "tests/executor_test_util.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::runtime {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using testing::Parse;

// Programs of `m`'s plan that the JIT compiled.
int CompiledPrograms(const hlo::HloModule& m) {
  auto plan = ModulePlan::Build(m, {}, true, LoopJitMode::kAlways);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return 0;
  int n = 0;
  for (const hlo::ComputationPlan* c : (*plan)->buffers().all()) {
    for (const hlo::Step& s : c->steps) {
      const LoopProgram* p = (*plan)->program(s);
      n += p != nullptr && p->jit != nullptr;
    }
  }
  return n;
}

// Bit for bit, except that two NaNs match whatever their sign and payload:
// where two different NaNs meet in one operation, IEEE leaves which one
// comes out to the instruction (and so to each compiler's choice of operand
// order); every other value, and whether a value is NaN, must agree.
void ExpectSameBits(const Literal& got, const Literal& want, const std::string& what) {
  ASSERT_TRUE(got.shape().Compatible(want.shape())) << what;
  if (std::memcmp(got.raw(), want.raw(), want.raw_size()) == 0) return;
  const int64_t w = hlo::ByteWidth(want.shape().element_type());
  const bool floats = hlo::IsFloatingPoint(want.shape().element_type());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (floats && std::isnan(got.GetAsDouble(i)) && std::isnan(want.GetAsDouble(i))) continue;
    if (std::memcmp(got.raw() + i * w, want.raw() + i * w, w) != 0) {
      ADD_FAILURE() << what << ": element " << i << " differs: jit " << got.GetAsDouble(i)
                    << ", interpreter " << want.GetAsDouble(i);
      return;
    }
  }
}

// Runs `m` with the JIT off and compiling everything it can (1 and 2
// threads); expects bit-identical outputs. Returns the programs compiled.
int ExpectJitMatches(const hlo::HloModule& m, absl::Span<const Literal> args,
                     const std::string& what) {
  RunOptions off;
  off.jit = LoopJitMode::kNever;
  auto want = RunModule(m, args, off);
  EXPECT_TRUE(want.ok()) << what << ": " << want.status();
  if (!want.ok()) return 0;
  for (int threads : {1, 2}) {
    RunOptions on;
    on.jit = LoopJitMode::kAlways;
    on.num_threads = threads;
    auto got = RunModule(m, args, on);
    EXPECT_TRUE(got.ok()) << what << ": " << got.status();
    if (!got.ok()) return 0;
    EXPECT_EQ(got->outputs.size(), want->outputs.size());
    for (size_t i = 0; i < want->outputs.size() && i < got->outputs.size(); ++i) {
      ExpectSameBits(got->outputs[i], want->outputs[i],
                     what + " output " + std::to_string(i) + " threads " +
                         std::to_string(threads));
    }
  }
  return CompiledPrograms(m);
}

// Values that find differences: specials, exp's range edges, and random
// values of both signs over many magnitudes.
std::vector<double> FloatValues(int64_t n, uint32_t seed) {
  const double specials[] = {std::nan(""), -std::nan(""), INFINITY, -INFINITY, 0.0, -0.0,
                             1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38,
                             88.72, 88.73, 89.0, 89.1, -87.33, -87.34, -103.9, -104.0,
                             -104.5, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 2147483648.0,
                             -2147483904.0, 4294967296.0, 16777217.0};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-40, 40);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 7 == 3) {
      v[i] = specials[(i / 7) % std::size(specials)];
    } else {
      v[i] = mant(rng) * std::ldexp(1.0, expo(rng) / 4);
    }
  }
  return v;
}

std::vector<double> IntValues(int64_t n, uint32_t seed) {
  const double specials[] = {0, 1, -1, 2147483647.0, -2147483648.0, 31, 32, 33, 40, -5, 7};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> any(std::numeric_limits<int32_t>::min(),
                                             std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int32_t> small(-40, 40);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = i % 5 == 0 ? specials[(i / 5) % std::size(specials)]
                      : (i % 2 ? any(rng) : small(rng));
  }
  return v;
}

// Float ops over [7, 133] (tails of every kind), each its own output, and
// one long chain mixing them.
std::string FloatZoo(const std::string& t) {
  const std::string s = t + "[7,133]";
  return "HloModule zoo_" + t + "\n" + testing::kF32Reducers +
         "ENTRY e { x = " + s + " parameter(0)  y = " + s + " parameter(1)\n"
         "u0 = " + s + " exponential(x)  u1 = " + s + " log(x)  u2 = " + s + " sqrt(x)\n"
         "u3 = " + s + " rsqrt(x)  u4 = " + s + " floor(x)  u5 = " + s + " ceil(x)\n"
         "u6 = " + s + " round-nearest-afz(x)  u7 = " + s + " round-nearest-even(x)\n"
         "u8 = " + s + " sign(x)  u9 = " + s + " abs(x)  u10 = " + s + " negate(x)\n"
         "b0 = " + s + " add(x, y)  b1 = " + s + " subtract(x, y)  b2 = " + s + " multiply(x, y)\n"
         "b3 = " + s + " divide(x, y)  b4 = " + s + " maximum(x, y)  b5 = " + s + " minimum(x, y)\n"
         "c0 = pred[7,133] compare(x, y), direction=LT\n"
         "c1 = pred[7,133] compare(x, y), direction=NE\n"
         "c2 = pred[7,133] compare(x, y), direction=GE, type=TOTALORDER\n"
         "c3 = pred[7,133] and(c0, c2)  fin = pred[7,133] is-finite(x)\n"
         "s0 = " + s + " select(c3, x, y)  s1 = " + s + " select(fin, y, x)\n"
         "cl = " + s + " clamp(y, x, b0)\n"
         "i0 = s32[7,133] convert(x)  i1 = u32[7,133] convert(y)  f0 = " + s + " convert(i0)\n"
         "p0 = pred[7,133] convert(x)  f1 = " + s + " convert(p0)  f2 = " + s + " convert(i1)\n"
         "io = " + s + " iota(), iota_dimension=1  ir = " + s + " iota(), iota_dimension=0\n"
         "k1 = " + s + " subtract(x, ir)  k2 = " + s + " exponential(k1)  k3 = " + s + " multiply(k2, io)\n"
         "k4 = " + s + " select(c1, k3, u2)  k5 = " + s + " add(k4, cl)  k6 = " + s + " log(k5)\n"
         "ROOT r = (" + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s +
         "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s +
         "," + s + "," + s + "," + s + ", s32[7,133], u32[7,133]," + s + "," + s + "," + s + "," +
         s + ", pred[7,133]) "
         "tuple(u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, b0, b1, b2, b3, b4, b5, s0, s1, cl, "
         "i0, i1, f0, f1, f2, k6, c3) }\n";
}

TEST(LoopJit, FloatOpsMatchTheInterpreter) {
  for (PrimitiveType t : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
    const std::string name = t == PrimitiveType::kF32 ? "f32" : "bf16";
    auto m = Parse(FloatZoo(name));
    ASSERT_NE(m, nullptr);
    std::vector<Literal> args;
    args.push_back(testing::Lit(t, {7, 133}, FloatValues(7 * 133, 1)));
    args.push_back(testing::Lit(t, {7, 133}, FloatValues(7 * 133, 2)));
    const int compiled = ExpectJitMatches(*m, args, name + " zoo");
    if (LoopJitAvailable()) EXPECT_GE(compiled, 20) << name;
  }
}

// f32 -> bf16 rounding of stored bf16 outputs, on bit patterns: NaNs whose
// payload is only in the low 16 bits (quieted, never turned into an
// infinity), both signs of quiet NaNs, ties to even either way, the largest
// floats rounding up to infinity, subnormals; against F32ToBf16
// (hlo/ir/float16.h) exactly, NaN bits included (a convert does no
// arithmetic, so nothing is left to IEEE's choice). Rounding in registers
// (bf16 arithmetic) is FloatOpsMatchTheInterpreter's. Run twice: with
// subnormals among every 64 values, and with a single one (on a CPU with
// AVX512_BF16 the compiled store converts with VCVTNE2PS2BF16, which reads
// subnormals as zero, and takes the integer steps only for groups that
// hold one: both paths are checked).
void CheckBf16Stores(int64_t rows, int64_t cols, bool subnormals_everywhere) {
  const uint32_t normal[] = {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7f808000u, 0x7fc00000u,
                             0xffc00001u, 0x7fbfffffu, 0x3f808000u, 0x3f818000u, 0xbf808000u,
                             0x3f817fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f800000u,
                             0xff800000u, 0x00000000u, 0x80000000u, 0x3f800000u, 0x4049fdb0u,
                             0x00800000u, 0x80800000u, 0x00ffffffu, 0x0080ffffu};
  const uint32_t subnormal[] = {0x00008000u, 0x00018000u, 0x80007fffu, 0x0001ffffu,
                                0x007fffffu, 0x807f8000u, 0x00000001u};
  const int64_t n = rows * cols;
  Literal x(hlo::Shape(PrimitiveType::kF32, {rows, cols}));
  std::mt19937 rng(11);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = static_cast<uint32_t>(rng());
    if (i % 3 == 0) b = normal[(i / 3) % std::size(normal)];
    if (!subnormals_everywhere && (b & 0x7f800000u) == 0 && (b & 0x7fffffffu) != 0) {
      b |= 0x00800000u;  // random bits: made normal
    }
    if (subnormals_everywhere ? i % 5 == 1 : i == n / 2 + 7) {
      b = subnormal[(i / 5) % std::size(subnormal)];
    }
    std::memcpy(x.raw() + 4 * i, &b, 4);
  }
  const std::string shape = absl::StrCat("[", rows, ",", cols, "]");
  auto m = Parse(absl::StrCat("HloModule bf\nENTRY e { x = f32", shape, " parameter(0)\n",
                              "ROOT s = bf16", shape, " convert(x) }\n"));
  ASSERT_NE(m, nullptr);
  std::vector<Literal> args;
  args.push_back(std::move(x));
  if (LoopJitAvailable()) EXPECT_EQ(CompiledPrograms(*m), 1);
  for (LoopJitMode mode : {LoopJitMode::kAlways, LoopJitMode::kNever}) {
    RunOptions o;
    o.jit = mode;
    auto got = RunModule(*m, args, o);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->outputs.size(), 1u);
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, args[0].raw() + 4 * i, 4);
      uint16_t stored;
      std::memcpy(&stored, got->outputs[0].raw() + 2 * i, 2);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      ASSERT_EQ(stored, hlo::F32ToBf16(v))
          << "element " << i << " bits 0x" << std::hex << bits
          << (mode == LoopJitMode::kAlways ? " (jit)" : " (interpreter)");
    }
  }
}

TEST(LoopJit, Bf16StoresMatchF32ToBf16BitForBit) {
  CheckBf16Stores(5, 67, /*subnormals_everywhere=*/true);
  CheckBf16Stores(6, 1000, /*subnormals_everywhere=*/false);
}

TEST(LoopJit, IntegerOpsMatchTheInterpreter) {
  const std::string s = "s32[5,71]";
  auto m = Parse(
      "HloModule ints\nENTRY e { a = " + s + " parameter(0)  b = " + s + " parameter(1)\n"
      "o0 = " + s + " add(a, b)  o1 = " + s + " subtract(a, b)  o2 = " + s + " multiply(a, b)\n"
      "o3 = " + s + " divide(a, b)  o4 = " + s + " remainder(a, b)  o5 = " + s + " maximum(a, b)\n"
      "o6 = " + s + " minimum(a, b)  o7 = " + s + " and(a, b)  o8 = " + s + " or(a, b)\n"
      "o9 = " + s + " xor(a, b)  o10 = " + s + " shift-left(a, b)\n"
      "o11 = " + s + " shift-right-logical(a, b)  o12 = " + s + " shift-right-arithmetic(a, b)\n"
      "o13 = " + s + " negate(a)  o14 = " + s + " abs(a)  o15 = " + s + " not(a)\n"
      "o16 = " + s + " popcnt(a)  o17 = " + s + " count-leading-zeros(a)  o18 = " + s + " sign(a)\n"
      "ua = u32[5,71] convert(a)  ub = u32[5,71] convert(b)\n"
      "o19 = u32[5,71] divide(ua, ub)  o20 = u32[5,71] maximum(ua, ub)\n"
      "o21 = u32[5,71] shift-right-logical(ua, ub)  c = pred[5,71] compare(ua, ub), direction=LT\n"
      "o22 = " + s + " select(c, o2, o4)  o23 = f32[5,71] convert(a)  o24 = f32[5,71] convert(ua)\n"
      "ROOT r = (" + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," +
      s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s + "," + s +
      "," + s + ", u32[5,71], u32[5,71], u32[5,71]," + s + ", f32[5,71], f32[5,71]) "
      "tuple(o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15, o16, o17, "
      "o18, o19, o20, o21, o22, o23, o24) }\n");
  ASSERT_NE(m, nullptr);
  std::vector<Literal> args;
  args.push_back(testing::S32({5, 71}, IntValues(5 * 71, 3)));
  args.push_back(testing::S32({5, 71}, IntValues(5 * 71, 4)));
  const int compiled = ExpectJitMatches(*m, args, "ints");
  if (LoopJitAvailable()) EXPECT_GE(compiled, 20);
}

// Streaming reductions: each reducer and type, sibling reduces in one
// pass (sum e, sum e*d), a one-hot select fold and a product fold, rows of
// 1..300 elements (partial lane groups and vectors).
TEST(LoopJit, ReductionsMatchTheInterpreter) {
  for (int64_t cols : {1, 5, 63, 64, 71, 300, 2500}) {
    for (const char* t : {"f32", "bf16"}) {
      const std::string T(t);
      const std::string s = T + "[6," + std::to_string(cols) + "]", r = T + "[6]";
      auto m = Parse(
          "HloModule red\n"
          "add_t { a0 = " + T + "[] parameter(0) a1 = " + T + "[] parameter(1) ROOT ar = " + T +
          "[] add(a0, a1) }\n"
          "max_t { m0 = " + T + "[] parameter(0) m1 = " + T + "[] parameter(1) ROOT mr = " + T +
          "[] maximum(m0, m1) }\n"
          "min_t { n0 = " + T + "[] parameter(0) n1 = " + T + "[] parameter(1) ROOT nr = " + T +
          "[] minimum(n0, n1) }\n"
          "mul_t { p0 = " + T + "[] parameter(0) p1 = " + T + "[] parameter(1) ROOT pr = " + T +
          "[] multiply(p0, p1) }\n"
          "ENTRY e { x = " + s + " parameter(0)  ids = s32[6] parameter(1)\n"
          "zero = " + T + "[] constant(0)  one = " + T + "[] constant(1)  ninf = " + T +
          "[] constant(-inf)  inf = " + T + "[] constant(inf)\n"
          "mx = " + r + " reduce(x, ninf), dimensions={1}, to_apply=max_t\n"
          "mn = " + r + " reduce(x, inf), dimensions={1}, to_apply=min_t\n"
          "pr = " + r + " reduce(x, one), dimensions={1}, to_apply=mul_t\n"
          "mb = " + s + " broadcast(mx), dimensions={0}  d = " + s + " subtract(x, mb)\n"
          "ex = " + s + " exponential(d)  ed = " + s + " multiply(ex, d)\n"
          "se = " + r + " reduce(ex, zero), dimensions={1}, to_apply=add_t\n"
          "sed = " + r + " reduce(ed, zero), dimensions={1}, to_apply=add_t\n"
          "io = s32[6," + std::to_string(cols) + "] iota(), iota_dimension=1\n"
          "ib = s32[6," + std::to_string(cols) + "] broadcast(ids), dimensions={0}\n"
          "hot = pred[6," + std::to_string(cols) + "] compare(io, ib), direction=EQ\n"
          "zb = " + s + " broadcast(zero), dimensions={}  pick = " + s + " select(hot, x, zb)\n"
          "ch = " + r + " reduce(pick, zero), dimensions={1}, to_apply=add_t\n"
          "ROOT o = (" + r + "," + r + "," + r + "," + r + "," + r + "," + r + ") "
          "tuple(mx, mn, pr, se, sed, ch) }\n");
      ASSERT_NE(m, nullptr);
      std::vector<double> x = FloatValues(6 * cols, 5);
      // Mostly finite rows, so sums are not all NaN.
      for (int64_t i = 0; i < 6 * cols; ++i) {
        if (i / cols != 5 && !std::isfinite(x[i])) x[i] = 0.25 * (i % 9);
      }
      std::vector<Literal> args;
      args.push_back(testing::Lit(T == "f32" ? PrimitiveType::kF32 : PrimitiveType::kBF16,
                                  {6, cols}, x));
      args.push_back(testing::S32({6}, {0, 3, static_cast<double>(cols - 1), -1,
                                        static_cast<double>(cols), 62}));
      const int compiled = ExpectJitMatches(*m, args, s + " reductions");
      if (LoopJitAvailable()) EXPECT_GE(compiled, 1) << s;
    }
  }
  // Integer reducers.
  auto m = Parse(
      "HloModule ired\n"
      "add_s { a0 = s32[] parameter(0) a1 = s32[] parameter(1) ROOT ar = s32[] add(a0, a1) }\n"
      "max_s { m0 = s32[] parameter(0) m1 = s32[] parameter(1) ROOT mr = s32[] maximum(m0, m1) }\n"
      "xor_s { x0 = s32[] parameter(0) x1 = s32[] parameter(1) ROOT xr = s32[] xor(x0, x1) }\n"
      "ENTRY e { x = s32[3,199] parameter(0)  z = s32[] constant(0)  lo = s32[] constant(-2147483648)\n"
      "sq = s32[3,199] multiply(x, x)\n"
      "s = s32[3] reduce(sq, z), dimensions={1}, to_apply=add_s\n"
      "m = s32[3] reduce(x, lo), dimensions={1}, to_apply=max_s\n"
      "r = s32[3] reduce(x, z), dimensions={1}, to_apply=xor_s\n"
      "ROOT o = (s32[3], s32[3], s32[3]) tuple(s, m, r) }\n");
  ASSERT_NE(m, nullptr);
  std::vector<Literal> args;
  args.push_back(testing::S32({3, 199}, IntValues(3 * 199, 6)));
  ExpectJitMatches(*m, args, "integer reductions");
}

// Max and min reduces alone take a loop of plain max (min) instructions and
// fall back to the exact fold when a NaN shows up (loop_jit.cc,
// EmitMinMaxPass): rows with a NaN first, in the middle, last or in the
// tail after the whole 64-element groups, signed zeros tying for the
// result, infinities, and a NaN starting value; from bf16 (converted) and
// f32, at widths around the 64-element groups.
TEST(LoopJit, MaxMinReducesAgreeWithTheExactFold) {
  const double nan = std::nan(""), inf = INFINITY;
  for (int64_t cols : {5, 64, 100, 2048, 2500}) {
    for (const char* t : {"f32", "bf16"}) {
      for (double start : {-inf, inf, nan, 0.0, -0.0}) {
        const std::string T(t), C = std::to_string(cols);
        const std::string in = T + "[9," + C + "]";
        auto m = Parse(
            "HloModule mm\n"
            "max_t { m0 = f32[] parameter(0) m1 = f32[] parameter(1) ROOT mr = f32[] maximum(m0, m1) }\n"
            "min_t { n0 = f32[] parameter(0) n1 = f32[] parameter(1) ROOT nr = f32[] minimum(n0, n1) }\n"
            "ENTRY e { x = " + in + " parameter(0)  i = f32[] parameter(1)\n"
            "xf = f32[9," + C + "] convert(x)\n"
            "mx = f32[9] reduce(xf, i), dimensions={1}, to_apply=max_t\n"
            "mn = f32[9] reduce(xf, i), dimensions={1}, to_apply=min_t\n"
            "ROOT o = (f32[9], f32[9]) tuple(mx, mn) }\n");
        ASSERT_NE(m, nullptr);
        std::mt19937 rng(static_cast<uint32_t>(cols));
        std::normal_distribution<double> normal(0.0, 3.0);
        std::vector<double> x(9 * cols);
        for (int64_t r = 0; r < 9; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            double v = normal(rng);
            switch (r) {
              case 1: if (c == cols / 2) v = nan; break;
              case 2: if (c == 0) v = -nan; if (c == cols - 1) v = nan; break;
              case 3: v = (c * 7 % 5 < 2) ? 0.0 : -0.0; break;           // zeros tie
              case 4: v = c % 3 == 0 ? -0.0 : (c % 3 == 1 ? 0.0 : -std::fabs(v) - 1); break;
              case 5: v = c == cols / 3 ? inf : (c == cols / 4 ? -inf : v); break;
              case 6: v = -inf; break;
              case 7: if (c == cols - 1) v = nan; break;                   // the tail
              case 8: v = std::fabs(v) + 1; break;
              default: break;
            }
            x[r * cols + c] = v;
          }
        }
        std::vector<Literal> args;
        args.push_back(testing::Lit(T == "f32" ? PrimitiveType::kF32 : PrimitiveType::kBF16,
                                    {9, cols}, x));
        args.push_back(testing::Lit(PrimitiveType::kF32, {}, {start}));
        const std::string what = in + " start " + std::to_string(start);
        const int compiled = ExpectJitMatches(*m, args, what);
        if (LoopJitAvailable()) EXPECT_GE(compiled, 1) << what;
        // And against the values themselves: NaN rows give NaN.
        RunOptions on;
        on.jit = LoopJitMode::kAlways;
        auto got = RunModule(*m, args, on);
        ASSERT_TRUE(got.ok()) << got.status();
        for (int k = 0; k < 2; ++k) {
          const Literal& out = got->outputs[k];
          EXPECT_EQ(std::isnan(out.GetAsDouble(1)), true) << what;
          EXPECT_EQ(std::isnan(out.GetAsDouble(2)), true) << what;
          EXPECT_EQ(std::isnan(out.GetAsDouble(7)), true) << what;
          EXPECT_EQ(std::isnan(out.GetAsDouble(0)), std::isnan(start)) << what;
        }
        if (!std::isnan(start) && start < 0) {
          EXPECT_EQ(got->outputs[0].GetAsDouble(5), inf) << what;
          EXPECT_EQ(got->outputs[0].GetAsDouble(6), -inf) << what;
        }
      }
    }
  }
}

// exp and log of a million bit patterns (every exponent, both signs, NaN
// payloads, subnormals) through compiled and interpreted loops.
TEST(LoopJit, ExpAndLogMatchSimdMathBitForBit) {
  constexpr int64_t kN = int64_t{1} << 20;
  auto m = Parse(
      "HloModule el\nENTRY e { x = f32[1024,1024] parameter(0)\n"
      "a = f32[1024,1024] exponential(x)  b = f32[1024,1024] log(x)\n"
      "ROOT r = (f32[1024,1024], f32[1024,1024]) tuple(a, b) }\n");
  ASSERT_NE(m, nullptr);
  Literal x(hlo::Shape(PrimitiveType::kF32, {1024, 1024}));
  std::mt19937 rng(7);
  uint32_t* bits = reinterpret_cast<uint32_t*>(x.raw());
  for (int64_t i = 0; i < kN; ++i) {
    // Half any pattern, half |x| < 128 (where exp is finite and nonzero).
    bits[i] = rng();
    if (i % 2) bits[i] = (bits[i] & 0x80ffffffu) | ((0x7a + (bits[i] >> 24) % 13) << 23);
  }
  std::vector<Literal> args;
  args.push_back(std::move(x));
  const int compiled = ExpectJitMatches(*m, args, "exp/log");
  if (LoopJitAvailable()) EXPECT_EQ(compiled, 2);
}

// A dynamic slice of a larger array (start clamped) feeding an update
// written at a clamped dynamic offset, as the tiled kernels' loop bodies do.
TEST(LoopJit, DynamicSlicesAndUpdatesMatchTheInterpreter) {
  for (int start : {-3, 0, 17, 500}) {
    auto m = Parse(
        "HloModule dus\nENTRY e { big = bf16[3,300] parameter(0)  acc = f32[3,300] parameter(1)\n"
        "st = s32[] parameter(2)  z = s32[] constant(0)\n"
        "t = bf16[3,77] dynamic-slice(big, z, st), dynamic_slice_sizes={3,77}\n"
        "f = f32[3,77] convert(t)  e = f32[3,77] exponential(f)  n = f32[3,77] negate(e)\n"
        "ROOT u = f32[3,300] dynamic-update-slice(acc, n, z, st) }\n");
    ASSERT_NE(m, nullptr);
    std::vector<Literal> args;
    args.push_back(testing::BF16({3, 300}, FloatValues(900, 8)));
    args.push_back(testing::F32({3, 300}, FloatValues(900, 9)));
    args.push_back(testing::S32({}, {static_cast<double>(start)}));
    ExpectJitMatches(*m, args, "dynamic update at " + std::to_string(start));
  }
}

// Consecutive rows of a compiled program go in one call when every load
// advances by one step per row (JitItem::rows): rows of a [3,5,40] space
// whose loads do (a [3,5,40] array, a [3,5] per-row value, an update of a
// wider array) and whose loads or index do not (a [5] array broadcast over
// the leading dimension, a transposed array, an iota along a row
// dimension), elementwise and reduced, at 1 and 2 threads.
TEST(LoopJit, RowBatchesMatchTheInterpreter) {
  const std::string common =
      "x = f32[3,5,40] parameter(0)  r = f32[3,5] parameter(1)  b = f32[5] parameter(2)\n"
      "y = f32[5,3,40] parameter(3)  acc = f32[3,5,100] parameter(4)  st = s32[] parameter(5)\n"
      "z = s32[] constant(0)  zero = f32[] constant(0)\n"
      "rb = f32[3,5,40] broadcast(r), dimensions={0,1}\n"
      "bb = f32[3,5,40] broadcast(b), dimensions={1}\n"
      "yt = f32[3,5,40] transpose(y), dimensions={1,0,2}\n"
      "io = s32[3,5,40] iota(), iota_dimension=0  iof = f32[3,5,40] convert(io)\n";
  const char* operands[] = {"rb", "bb", "yt", "iof"};
  for (const char* other : operands) {
    const std::string o = other;
    auto m = Parse(
        "HloModule rows\nadd { a = f32[] parameter(0)  c = f32[] parameter(1)\n"
        "ROOT s = f32[] add(a, c) }\nENTRY e { " + common +
        "d = f32[3,5,40] subtract(x, " + o + ")  e = f32[3,5,40] exponential(d)\n"
        "s = f32[3,5] reduce(e, zero), dimensions={2}, to_apply=add\n"
        "u = f32[3,5,100] dynamic-update-slice(acc, e, z, z, st)\n"
        "m = f32[3,5,40] multiply(x, " + o + ")\n"
        "ROOT t = (f32[3,5], f32[3,5,100], f32[3,5,40]) tuple(s, u, m) }\n");
    ASSERT_NE(m, nullptr);
    std::vector<Literal> args;
    args.push_back(testing::F32({3, 5, 40}, FloatValues(600, 21)));
    args.push_back(testing::F32({3, 5}, FloatValues(15, 22)));
    args.push_back(testing::F32({5}, FloatValues(5, 23)));
    args.push_back(testing::F32({5, 3, 40}, FloatValues(600, 24)));
    args.push_back(testing::F32({3, 5, 100}, FloatValues(1500, 25)));
    args.push_back(testing::S32({}, {37}));
    EXPECT_GT(ExpectJitMatches(*m, args, "rows with " + o), 0) << o;
  }
}

// The compiled program with non-temporal stores (what LoopExecution picks
// for updates of arrays beyond 256 MiB) writes what the interpreter does,
// from every alignment of the output.
TEST(LoopJit, StreamingStoresMatchTheInterpreter) {
  if (!LoopJitAvailable()) GTEST_SKIP() << "built without LLVM";
  for (const char* out_type : {"bf16", "f32"}) {
  const std::string t(out_type);
  auto m = Parse(
      "HloModule st\nENTRY e { x = f32[4,203] parameter(0)  acc = " + t + "[4,1000] parameter(1)\n"
      "o = s32[] parameter(2)  z = s32[] constant(0)\n"
      "e = f32[4,203] exponential(x)  b = " + t + "[4,203] convert(e)\n"
      "ROOT u = " + t + "[4,1000] dynamic-update-slice(acc, b, z, o) }\n");
  ASSERT_NE(m, nullptr);
  const PrimitiveType ot = t == "f32" ? PrimitiveType::kF32 : PrimitiveType::kBF16;
  auto plan = ModulePlan::Build(*m, {}, true, LoopJitMode::kNever);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const LoopProgram* update = nullptr;
  for (const hlo::Step& s : (*plan)->entry().steps) {
    if (const LoopProgram* p = (*plan)->program(s); p != nullptr && p->update) update = p;
  }
  ASSERT_NE(update, nullptr);
  LoopProgram streamed = *update;
  streamed.jit = CompileLoopJit(streamed, /*streaming_stores=*/true);
  ASSERT_NE(streamed.jit, nullptr);
  Literal x = testing::F32({4, 203}, FloatValues(812, 10));
  for (int offset : {0, 1, 5, 31, 32, 797}) {
    Literal s = testing::S32({}, {static_cast<double>(offset)});
    Literal out_jit(hlo::Shape(ot, {4, 1000}));
    Literal out_int(hlo::Shape(ot, {4, 1000}));
    std::memset(out_jit.raw(), 0x11, out_jit.raw_size());
    std::memset(out_int.raw(), 0x11, out_int.raw_size());
    // Program inputs are parameters x and o (the base array is not read).
    std::vector<const void*> inputs;
    for (size_t i = 0; i < update->inputs.size(); ++i) {
      const hlo::HloInstruction* in = update->inputs[i];
      if (in == nullptr) {
        inputs.push_back(update->literals[i]->raw());
      } else if (in->name() == "x") {
        inputs.push_back(x.raw());
      } else {
        ASSERT_EQ(in->name(), "o");
        inputs.push_back(s.raw());
      }
    }
    void* o1[] = {out_jit.raw()};
    void* o2[] = {out_int.raw()};
    RunLoopProgram(streamed, inputs, o1, 2);
    RunLoopProgram(*update, inputs, o2, 2);
    ExpectSameBits(out_jit, out_int, t + " streamed update at " + std::to_string(offset));
  }
  }
}

TEST(LoopJit, GrpoKernelsMatchTheInterpreter) {
  for (const char* kernel : {"grpo_tiled", "grpo_reference", "entropy_tiled", "grpo_fused_linear"}) {
    for (const char* dtype : {"f32", "bf16"}) {
      tools::KernelFlags k;
      k.kernel = kernel;
      k.mode = k.kernel == "entropy_tiled" ? "fwd" : "fwd_bwd";
      k.batch = 2;
      k.seq = 24;
      k.vocab = 3001;
      k.block_size = 512;
      k.logits_dtype = dtype;
      if (k.kernel == "grpo_fused_linear") k.hidden = 32;
      auto module = tools::BuildKernelModule(k);
      ASSERT_TRUE(module.ok()) << module.status();
      auto inputs = tools::MakeRandomInputs(*(*module)->entry(), tools::RandomInputOptions());
      ASSERT_TRUE(inputs.ok()) << inputs.status();
      const int compiled =
          ExpectJitMatches(**module, *inputs, std::string(kernel) + " " + dtype);
      if (LoopJitAvailable()) EXPECT_GE(compiled, 3) << kernel << " " << dtype;
    }
  }
}

TEST(LoopJit, AutoModeCompilesOnlyLargeLoops) {
  EXPECT_FALSE(ShouldJit(LoopJitMode::kNever, int64_t{1} << 30));
  EXPECT_TRUE(ShouldJit(LoopJitMode::kAlways, 1));
  if (std::getenv("TPUOFF_JIT") == nullptr) {
    EXPECT_FALSE(ShouldJit(LoopJitMode::kAuto, 1000));
    EXPECT_TRUE(ShouldJit(LoopJitMode::kAuto, int64_t{1} << 24));
  }
}

}  // namespace
}  // namespace tpuoff::runtime
