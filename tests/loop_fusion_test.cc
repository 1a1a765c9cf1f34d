// The fusion forms behind the tiled GRPO kernels' speed: dynamic-slice
// folded into loads, cheap producers recomputed in several groups,
// multi-output (sibling) reductions, and a dynamic-update-slice fused with
// the loop computing its update. Each case checks the plan's shape (what was
// fused) and that results are bit-identical to the unfused run, for 1 and 2
// threads; values are also checked against hand computation.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/ir/float16.h"
#include "runtime/cpu/elementwise_kernels.h"
#include "runtime/emulator/plan.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using testing::F32;
using testing::Parse;
using testing::S32;

// Runs fused (1 and 2 threads) and unfused; expects identical bits.
std::vector<hlo::Literal> RunAllWays(const hlo::HloModule& m,
                                     const std::vector<hlo::Literal>& args) {
  RunOptions unfused;
  unfused.disable_fusion = true;
  auto want = RunModule(m, args, unfused);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!want.ok()) return {};
  for (int threads : {1, 2}) {
    RunOptions o;
    o.num_threads = threads;
    auto got = RunModule(m, args, o);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {};
    EXPECT_EQ(got->outputs.size(), want->outputs.size());
    for (size_t i = 0; i < got->outputs.size() && i < want->outputs.size(); ++i) {
      EXPECT_TRUE(got->outputs[i] == want->outputs[i])
          << "output " << i << " differs from the unfused run, threads " << threads;
    }
  }
  return std::move(want->outputs);
}

const ComputationPlan& PlanOf(const ModulePlan& plan, const hlo::HloModule& m,
                              const std::string& name) {
  for (const auto& c : m.computations()) {
    if (c->name() == name) {
      const ParamMode mode = name == m.entry()->name() ? ParamMode::kBorrowed : ParamMode::kDonated;
      return plan.Get(c.get(), mode);
    }
  }
  ADD_FAILURE() << "no computation " << name;
  return plan.entry();
}

bool HasStepFor(const ComputationPlan& p, const std::string& instr) {
  for (const Step& s : p.steps) {
    if (s.instr->name() == instr) return true;
  }
  return false;
}

hlo::Literal Ramp(std::vector<int64_t> dims, double scale) {
  hlo::Literal l(hlo::Shape(hlo::PrimitiveType::kF32, dims));
  for (int64_t i = 0; i < l.num_elements(); ++i) {
    l.data<float>()[i] = static_cast<float>(scale * std::sin(0.37 * i));
  }
  return l;
}

// Softmax statistics of a [4, 6] tile at column `start` of [4, 20]: the
// max, then sum e^d, sum e^d*d and the picked column in one pass.
constexpr char kTileStats[] = R"(HloModule tile_stats
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] maximum(a, b) }
ENTRY e {
  x = f32[4,20] parameter(0) start = s32[] parameter(1) target = s32[4] parameter(2)
  z = s32[] constant(0)
  tile = f32[4,6] dynamic-slice(x, z, start), dynamic_slice_sizes={4,6}
  ninf = f32[] constant(-inf) zero = f32[] constant(0)
  m = f32[4] reduce(tile, ninf), dimensions={1}, to_apply=max
  mb = f32[4,6] broadcast(m), dimensions={0}
  d = f32[4,6] subtract(tile, mb)
  ex = f32[4,6] exponential(d)
  ed = f32[4,6] multiply(ex, d)
  s = f32[4] reduce(ex, zero), dimensions={1}, to_apply=add
  u = f32[4] reduce(ed, zero), dimensions={1}, to_apply=add
  io = s32[4,6] iota(), iota_dimension=1
  tb = s32[4,6] broadcast(target), dimensions={0}
  hit = pred[4,6] compare(io, tb), direction=EQ
  zb = f32[4,6] broadcast(zero), dimensions={}
  pick = f32[4,6] select(hit, tile, zb)
  c = f32[4] reduce(pick, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(m, s, u, c)
})";

TEST(LoopFusion, TileStatisticsFuseIntoTwoPasses) {
  auto m = Parse(kTileStats);
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ComputationPlan& p = (*plan)->entry();
  int reduce_steps = 0;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::kLoopReduce) continue;
    ++reduce_steps;
    if (s.roots.size() > 1) {
      EXPECT_EQ(s.roots.size(), 3u) << p.ToString();  // s, u, c share a pass
    }
  }
  EXPECT_EQ(reduce_steps, 2) << p.ToString();
  // Neither the tile nor its f32 intermediates are materialised.
  for (const char* name : {"tile", "d", "ex", "ed", "pick", "mb"}) {
    EXPECT_FALSE(HasStepFor(p, name)) << name << " has its own step\n" << p.ToString();
  }
  for (int start : {0, 7, 14, 99, -3}) {  // 99 and -3 clamp to 14 and 0
    std::vector<hlo::Literal> args;
    args.push_back(Ramp({4, 20}, 3.0));
    args.push_back(S32({}, {static_cast<double>(start)}));
    args.push_back(S32({4}, {0, 5, 2, 9}));  // 9: outside the tile, picks nothing
    std::vector<hlo::Literal> out = RunAllWays(*m, args);
    ASSERT_EQ(out.size(), 4u);
    const int s0 = std::clamp(start, 0, 14);
    const float* x = args[0].data<float>();
    const int target[4] = {0, 5, 2, 9};
    for (int r = 0; r < 4; ++r) {
      double mx = -INFINITY, se = 0, ue = 0, pick = 0;
      for (int j = 0; j < 6; ++j) mx = std::max<double>(mx, x[r * 20 + s0 + j]);
      for (int j = 0; j < 6; ++j) {
        const double d = x[r * 20 + s0 + j] - mx;
        se += std::exp(d);
        ue += std::exp(d) * d;
        if (j == target[r]) pick = x[r * 20 + s0 + j];
      }
      EXPECT_FLOAT_EQ(out[0].data<float>()[r], static_cast<float>(mx)) << start;
      EXPECT_NEAR(out[1].data<float>()[r], se, 1e-5 * se) << start;
      EXPECT_NEAR(out[2].data<float>()[r], ue, 1e-5 * (1 + std::fabs(ue))) << start;
      EXPECT_FLOAT_EQ(out[3].data<float>()[r], static_cast<float>(pick)) << start;
    }
  }
}

// A tile loop writing exp(tile) * 2 in bf16 into a carried array: the
// dynamic-update-slice and its update are one loop writing in place.
constexpr char kUpdateLoop[] = R"(HloModule update_loop
cond { cp = (s32[], f32[3,40], bf16[3,40]) parameter(0) ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(5) ROOT c = pred[] compare(ci, n), direction=LT }
body { bp = (s32[], f32[3,40], bf16[3,40]) parameter(0) i = s32[] get-tuple-element(bp), index=0
  x = f32[3,40] get-tuple-element(bp), index=1 out = bf16[3,40] get-tuple-element(bp), index=2
  w = s32[] constant(8) z = s32[] constant(0) start = s32[] multiply(i, w)
  tile = f32[3,8] dynamic-slice(x, z, start), dynamic_slice_sizes={3,8}
  two = f32[] constant(2) tb = f32[3,8] broadcast(two), dimensions={}
  e = f32[3,8] exponential(tile) g = f32[3,8] multiply(e, tb)
  gb = bf16[3,8] convert(g)
  upd = bf16[3,40] dynamic-update-slice(out, gb, z, start)
  one = s32[] constant(1) j = s32[] add(i, one)
  ROOT bt = (s32[], f32[3,40], bf16[3,40]) tuple(j, x, upd) }
ENTRY e { x = f32[3,40] parameter(0) zero = bf16[] constant(0)
  init = bf16[3,40] broadcast(zero), dimensions={}
  i0 = s32[] constant(0) s = (s32[], f32[3,40], bf16[3,40]) tuple(i0, x, init)
  w = (s32[], f32[3,40], bf16[3,40]) while(s), condition=cond, body=body
  ROOT r = bf16[3,40] get-tuple-element(w), index=2 }
)";

TEST(LoopFusion, DynamicUpdateSliceFusesWithItsUpdateInPlace) {
  auto m = Parse(kUpdateLoop);
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ComputationPlan& body = PlanOf(**plan, *m, "body");
  bool found = false;
  for (const Step& s : body.steps) {
    if (s.instr->name() != "upd") continue;
    found = true;
    EXPECT_EQ(s.kind, StepKind::kLoop);
    EXPECT_TRUE(s.update);
    EXPECT_NE(s.in_place_of, kNoBuffer) << body.ToString();
  }
  EXPECT_TRUE(found) << body.ToString();
  for (const char* name : {"tile", "e", "g", "gb"}) {
    EXPECT_FALSE(HasStepFor(body, name)) << name << "\n" << body.ToString();
  }
  std::vector<hlo::Literal> args;
  args.push_back(Ramp({3, 40}, 2.0));
  std::vector<hlo::Literal> out = RunAllWays(*m, args);
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 120; ++i) {
    const float want = hlo::RoundToBf16(2.0f * std::exp(args[0].data<float>()[i]));
    EXPECT_NEAR(out[0].GetAsDouble(i), want, 1e-6 * want) << i;
  }
}

// The updated array is still read after the update: not in place, the
// result starts as a copy, and the original keeps its values.
TEST(LoopFusion, DynamicUpdateSliceNotInPlaceCopiesTheBase) {
  auto m = Parse(R"(HloModule dus_copy
ENTRY e { base = f32[2,10] parameter(0) src = f32[2,3] parameter(1) at = s32[] parameter(2)
  z = s32[] constant(0) n = f32[2,3] negate(src)
  upd = f32[2,10] dynamic-update-slice(base, n, z, at)
  again = f32[2,10] add(base, base)
  ROOT t = (f32[2,10], f32[2,10]) tuple(upd, again) })");
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Step& s : (*plan)->entry().steps) {
    if (s.instr->name() == "upd") {
      EXPECT_TRUE(s.update);
      EXPECT_EQ(s.in_place_of, kNoBuffer);
    }
  }
  for (int at : {0, 4, 7, 12}) {  // 12 clamps to 7
    std::vector<hlo::Literal> args;
    args.push_back(Ramp({2, 10}, 1.0));
    args.push_back(Ramp({2, 3}, 5.0));
    args.push_back(S32({}, {static_cast<double>(at)}));
    std::vector<hlo::Literal> out = RunAllWays(*m, args);
    ASSERT_EQ(out.size(), 2u);
    const int a = std::min(at, 7);
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 10; ++c) {
        const float base = args[0].data<float>()[r * 10 + c];
        const bool in = c >= a && c < a + 3;
        const float want = in ? -args[1].data<float>()[r * 3 + c - a] : base;
        EXPECT_EQ(out[0].data<float>()[r * 10 + c], want) << at << " " << r << "," << c;
        EXPECT_EQ(out[1].data<float>()[r * 10 + c], base + base);
      }
    }
  }
}

// Sibling reduces merge only when no user of the earlier one runs before
// the later one.
TEST(LoopFusion, SiblingReducesRespectDependencies) {
  auto m = Parse(R"(HloModule siblings
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] add(a, b) }
ENTRY e { x = f32[3,5] parameter(0) zero = f32[] constant(0)
  s1 = f32[3] reduce(x, zero), dimensions={1}, to_apply=add
  b1 = f32[3,5] broadcast(s1), dimensions={0}
  y = f32[3,5] multiply(x, b1)
  s2 = f32[3] reduce(y, zero), dimensions={1}, to_apply=add
  sq = f32[3,5] multiply(x, x)
  s3 = f32[3] reduce(sq, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[3], f32[3], f32[3]) tuple(s1, s2, s3) })");
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Step& s : (*plan)->entry().steps) {
    if (s.kind != StepKind::kLoopReduce) continue;
    std::vector<std::string> names;
    for (const hlo::HloInstruction* r : s.roots) names.push_back(r->name());
    // s1 feeds s2, so s1 is never a sibling of s2 (s3 may join either).
    const bool has1 = std::find(names.begin(), names.end(), "s1") != names.end();
    const bool has2 = std::find(names.begin(), names.end(), "s2") != names.end();
    EXPECT_FALSE(has1 && has2) << (*plan)->entry().ToString();
  }
  std::vector<hlo::Literal> args;
  args.push_back(Ramp({3, 5}, 1.5));
  std::vector<hlo::Literal> out = RunAllWays(*m, args);
  ASSERT_EQ(out.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    double s1 = 0, s3 = 0;
    for (int c = 0; c < 5; ++c) {
      const double v = args[0].data<float>()[r * 5 + c];
      s1 += v;
      s3 += v * v;
    }
    EXPECT_NEAR(out[0].data<float>()[r], s1, 1e-5);
    EXPECT_NEAR(out[1].data<float>()[r], s1 * s1, 1e-4 * (1 + s1 * s1));
    EXPECT_NEAR(out[2].data<float>()[r], s3, 1e-5 * (1 + s3));
  }
}

// A convert read by two groups is recomputed in both instead of being
// materialised; its value is still materialised when an unfused op reads it.
TEST(LoopFusion, CheapProducersAreDuplicatedNotMaterialised) {
  auto m = Parse(R"(HloModule dup
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0) b = f32[] parameter(1) ROOT r = f32[] maximum(a, b) }
ENTRY e { x = bf16[2,300] parameter(0) f = f32[2,300] convert(x)
  ninf = f32[] constant(-inf) zero = f32[] constant(0)
  mx = f32[2] reduce(f, ninf), dimensions={1}, to_apply=max
  mb = f32[2,300] broadcast(mx), dimensions={0}
  d = f32[2,300] subtract(f, mb) e = f32[2,300] exponential(d)
  s = f32[2] reduce(e, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[2], f32[2]) tuple(mx, s) })");
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(HasStepFor((*plan)->entry(), "f")) << (*plan)->entry().ToString();
  std::vector<hlo::Literal> args;
  args.push_back(testing::BF16({2, 300}, {}));
  for (int i = 0; i < 600; ++i) args[0].SetFromDouble(i, 4 * std::sin(0.1 * i));
  std::vector<hlo::Literal> out = RunAllWays(*m, args);
  ASSERT_EQ(out.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < 300; ++c) mx = std::max(mx, args[0].GetAsDouble(r * 300 + c));
    for (int c = 0; c < 300; ++c) s += std::exp(args[0].GetAsDouble(r * 300 + c) - mx);
    EXPECT_EQ(out[0].data<float>()[r], static_cast<float>(mx));
    EXPECT_NEAR(out[1].data<float>()[r], s, 1e-5 * s);
  }
}

// A program whose every element is the same value runs as a fill: one
// element computed, then copied (streamed past the caches for outputs far
// larger than them). Checked on every element type width, odd lengths (the
// fill's unaligned head and tail), a computed constant, and a broadcast that
// varies by row (not a fill).
TEST(LoopFusionTest, UniformProgramsFillTheOutput) {
  const std::string m_text = R"(
HloModule fills
ENTRY e {
  s = f32[] parameter(0)
  v = f32[7] parameter(1)
  c = f32[] constant(2.5)
  z = bf16[] constant(0)
  bz = bf16[3,1001] broadcast(z), dimensions={}
  sum = f32[] add(s, c)
  bs = f32[5,333] broadcast(sum), dimensions={}
  i = s32[] constant(-3)
  bi = s32[17] broadcast(i), dimensions={}
  t1 = pred[] constant(true)
  bp = pred[9,13] broadcast(t1), dimensions={}
  d = f64[] constant(0.125)
  bd = f64[11] broadcast(d), dimensions={}
  rows = f32[7,129] broadcast(v), dimensions={0}
  ROOT t = (bf16[3,1001], f32[5,333], s32[17], pred[9,13], f64[11], f32[7,129]) tuple(bz, bs, bi, bp, bd, rows)
})";
  auto m = Parse(m_text);
  ASSERT_NE(m, nullptr);
  std::vector<hlo::Literal> args;
  args.push_back(F32({}, {-1.0}));
  args.push_back(F32({7}, {1, 2, 3, 4, 5, 6, 7}));
  const std::vector<hlo::Literal> out = RunAllWays(*m, args);
  ASSERT_EQ(out.size(), 6u);
  for (int64_t i = 0; i < 3 * 1001; ++i) {
    ASSERT_EQ(out[0].data<uint16_t>()[i], 0) << i;
  }
  for (int64_t i = 0; i < 5 * 333; ++i) ASSERT_EQ(out[1].data<float>()[i], 1.5f) << i;
  for (int64_t i = 0; i < 17; ++i) ASSERT_EQ(out[2].data<int32_t>()[i], -3) << i;
  for (int64_t i = 0; i < 9 * 13; ++i) ASSERT_EQ(out[3].data<uint8_t>()[i], 1) << i;
  for (int64_t i = 0; i < 11; ++i) ASSERT_EQ(out[4].data<double>()[i], 0.125) << i;
  for (int64_t r = 0; r < 7; ++r) {
    for (int64_t c = 0; c < 129; ++c) ASSERT_EQ(out[5].data<float>()[r * 129 + c], r + 1.0f);
  }
}

TEST(LoopFusionTest, FillElementsCoversUnalignedRanges) {
  std::vector<uint8_t> buf(4096 + 256);
  for (int width : {1, 2, 4, 8}) {
    for (bool streaming : {false, true}) {
      for (int64_t offset : {0, 8, 24, 64}) {
        for (int64_t bytes : {int64_t{0}, int64_t{8}, int64_t{56}, int64_t{64}, int64_t{200},
                              int64_t{4096}}) {
          std::fill(buf.begin(), buf.end(), 0xAB);
          const uint64_t value = 0x0102030405060708ull;
          FillElements(buf.data() + offset, bytes, &value, width, streaming);
          for (int64_t i = 0; i < static_cast<int64_t>(buf.size()); ++i) {
            const bool inside = i >= offset && i < offset + bytes;
            const uint8_t want = inside ? reinterpret_cast<const uint8_t*>(&value)[(i - offset) % width]
                                        : 0xAB;
            ASSERT_EQ(buf[i], want) << "width " << width << " streaming " << streaming
                                    << " offset " << offset << " bytes " << bytes << " at " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::runtime
