// The cost model (hlo/analysis/cost_analysis.h, tpu_model.h, trip_count.h):
// XLA counting on small modules against numbers jaxlib's HloCostAnalysis
// printed for the same text, fused counting of what the plan moves, trip
// counts, and predicted times against rooflines computed by hand from the
// v6e figures (918e12 bf16 FLOP/s, 1.64e12 B/s HBM, 9e10 B/s per ICI link
// one way, 1 us per hop).
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/tpu_model.h"
#include "hlo/analysis/trip_count.h"
#include "hlo/ir/computation.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo {
namespace {

constexpr double kRel = 1e-9;

std::unique_ptr<HloModule> Parse(const std::string& text) {
  auto m = ParseHloText(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  return m.ok() ? std::move(m).value() : nullptr;
}

ModuleCost Cost(const HloModule& m, CostCounting counting) {
  CostOptions o;
  o.counting = counting;
  absl::StatusOr<ModuleCost> c = AnalyzeCost(m, o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : ModuleCost{};
}

double Predict(const HloModule& m, CostCounting counting, int64_t devices = 1,
               const char* topology = nullptr) {
  const ModuleCost c = Cost(m, counting);
  absl::StatusOr<IciTopology> t =
      topology ? IciTopology::Parse(topology) : IciTopology::V6eSlice(devices);
  EXPECT_TRUE(t.ok()) << t.status();
  absl::StatusOr<ModulePrediction> p = PredictModule(c, devices, *t);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->max_seconds : -1;
}

// ---- XLA counting (numbers from jaxlib 0.10.2's hlo_module_cost_analysis).

struct XlaCase {
  const char* name;
  const char* text;
  double flops, transcendentals, bytes;
};

const XlaCase kXlaCases[] = {
    {"dot_exp",
     R"(HloModule m
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[16,4] parameter(1)
  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT x = f32[8,4] exponential(d)
})",
     1024, 32, 1152},
    // slice reads what it writes; dynamic-slice adds its first start index
    // (XLA counts operand 1 only); a tuple writes its 8-byte pointer table;
    // get-tuple-element and parameters move nothing.
    {"slices_tuple",
     R"(HloModule m
ENTRY e {
  p = f32[64,128] parameter(0)
  i = s32[] parameter(1)
  s = f32[16,128] slice(p), slice={[0:16], [0:128]}
  z = s32[] constant(0)
  d = f32[8,128] dynamic-slice(p, i, z), dynamic_slice_sizes={8,128}
  t = (f32[16,128], f32[8,128]) tuple(s, d)
  ROOT g = f32[8,128] get-tuple-element(t), index=1
})",
     0, 0, 24596},
    // reduce: (elements in - elements out) applications of the reducer;
    // dynamic-update-slice reads and writes its update.
    {"reduce_dus",
     R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[32,64] parameter(0)
  z = f32[] constant(0)
  r = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  u = f32[4,64] parameter(1)
  i = s32[] parameter(2)
  ROOT w = f32[32,64] dynamic-update-slice(p, u, i, i)
})",
     32 * 64 - 32, 0, 10376},
};

TEST(XlaCounting, MatchesHloCostAnalysis) {
  for (const XlaCase& c : kXlaCases) {
    auto m = Parse(c.text);
    ASSERT_NE(m, nullptr) << c.name;
    const ModuleCost cost = Cost(*m, CostCounting::kXla);
    EXPECT_DOUBLE_EQ(cost.totals.flops, c.flops) << c.name;
    EXPECT_DOUBLE_EQ(cost.totals.transcendentals, c.transcendentals) << c.name;
    EXPECT_DOUBLE_EQ(cost.totals.bytes_accessed(), c.bytes) << c.name;
  }
}

// ---- Trip counts and the fused counting.

const char* kLoop = R"(HloModule loop
cond {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[1024] get-tuple-element(s), index=1
  y = f32[1024] exponential(x)
  ROOT t = (s32[], f32[1024]) tuple(j, y)
}
ENTRY e {
  z = s32[] constant(0)
  p = f32[1024] parameter(0)
  t = (s32[], f32[1024]) tuple(z, p)
  w = (s32[], f32[1024]) while(t), condition=cond, body=body
  ROOT r = f32[1024] get-tuple-element(w), index=1
})";

TEST(TripCount, CountedLoops) {
  auto m = Parse(kLoop);
  ASSERT_NE(m, nullptr);
  const HloInstruction* w = m->entry()->FindInstruction("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(WhileTripCount(*w), 10);
  // i <= 9 from 0, and 10 > i (operands swapped): 10 trips each; step 3 to
  // < 10: 0,3,6,9 = 4 trips.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"ROOT lt = pred[] compare(i, n), direction=LT\n",
            "ROOT lt = pred[] compare(n, i), direction=GT\n"},
           {"n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT",
            "n = s32[] constant(9)\n  ROOT lt = pred[] compare(i, n), direction=LE"}}) {
    std::string text = kLoop;
    text.replace(text.find(from), from.size(), to);
    auto v = Parse(text);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(WhileTripCount(*v->entry()->FindInstruction("w")), 10) << to;
  }
  std::string text = kLoop;
  text.replace(text.find("one = s32[] constant(1)"), 23, "one = s32[] constant(3)");
  auto v = Parse(text);
  EXPECT_EQ(WhileTripCount(*v->entry()->FindInstruction("w")), 4);
  // A data-dependent bound has no static count.
  text = kLoop;
  text.replace(text.find("n = s32[] constant(10)"), 22, "n = s32[] get-tuple-element(s), index=0");
  auto u = Parse(text);
  EXPECT_EQ(WhileTripCount(*u->entry()->FindInstruction("w")), std::nullopt);
}

TEST(FusedCounting, LoopBodyTimesTripCount) {
  auto m = Parse(kLoop);
  ASSERT_NE(m, nullptr);
  const ModuleCost fused = Cost(*m, CostCounting::kFused);
  // exp of 1024 floats per trip, 10 trips; XLA counts the body once.
  EXPECT_DOUBLE_EQ(fused.totals.transcendentals, 10 * 1024);
  EXPECT_DOUBLE_EQ(Cost(*m, CostCounting::kXla).totals.transcendentals, 1024);
  // Each trip reads and writes the 4 KiB state array at least once.
  EXPECT_GE(fused.totals.bytes_accessed(), 10 * 2 * 4096);
}

TEST(FusedCounting, FusedChainMovesItsInputsAndOutputOnce) {
  // exp(x) * 2 + x: one fused loop reading x once and writing the result;
  // XLA counts each op's operands and output.
  auto m = Parse(R"(HloModule m
ENTRY e {
  x = f32[4096] parameter(0)
  e = f32[4096] exponential(x)
  two = f32[] constant(2)
  b = f32[4096] broadcast(two), dimensions={}
  p = f32[4096] multiply(e, b)
  ROOT s = f32[4096] add(p, x)
})");
  ASSERT_NE(m, nullptr);
  const ModuleCost fused = Cost(*m, CostCounting::kFused);
  EXPECT_DOUBLE_EQ(fused.totals.bytes_read, 4096 * 4);
  EXPECT_DOUBLE_EQ(fused.totals.bytes_written, 4096 * 4);
  EXPECT_DOUBLE_EQ(fused.totals.flops, 2 * 4096);
  EXPECT_DOUBLE_EQ(fused.totals.transcendentals, 4096);
  const ModuleCost xla = Cost(*m, CostCounting::kXla);
  EXPECT_DOUBLE_EQ(xla.totals.bytes_accessed(), 147460);  // jaxlib's figure
}

// ---- Predicted times against hand-computed rooflines.

TEST(Roofline, Bf16MatmulIsMemoryBoundAt1024) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  a = bf16[1024,1024] parameter(0)
  b = bf16[1024,1024] parameter(1)
  ROOT d = bf16[1024,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_NE(m, nullptr);
  const double flops = 2.0 * 1024 * 1024 * 1024;
  const double bytes = 3.0 * 1024 * 1024 * 2;
  const double want = std::max(flops / 918e12, bytes / 1.64e12);  // memory: 3.836 us
  EXPECT_NEAR(Predict(*m, CostCounting::kFused), want, want * kRel);
  EXPECT_NEAR(Predict(*m, CostCounting::kXla), want, want * kRel);
}

TEST(Roofline, F32MatmulPassesByPrecision) {
  const std::string base = R"(HloModule m
ENTRY e {
  a = f32[4096,4096] parameter(0)
  b = f32[4096,4096] parameter(1)
  ROOT d = f32[4096,4096] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}PREC
})";
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double memory = 3.0 * 4096 * 4096 * 4 / 1.64e12;  // 122.8 us
  for (const auto& [prec, passes] : std::vector<std::pair<std::string, double>>{
           {"", 1}, {", operand_precision={highest,highest}", 6},
           {", operand_precision={high,high}", 3}}) {
    std::string text = base;
    text.replace(text.find("PREC"), 4, prec);
    auto m = Parse(text);
    ASSERT_NE(m, nullptr) << prec;
    const double want = std::max(flops * passes / 918e12, memory);
    EXPECT_NEAR(Predict(*m, CostCounting::kFused), want, want * kRel) << prec;
  }
}

TEST(Roofline, TranscendentalsAgainstHbm) {
  auto m = Parse(R"(HloModule m
ENTRY e {
  x = bf16[1048576] parameter(0)
  ROOT y = bf16[1048576] exponential(x)
})");
  ASSERT_NE(m, nullptr);
  const double n = 1048576;
  const double eup = n / (8 * 128 * 1.5e9);  // 0.68 us
  const double hbm = 2 * n * 2 / 1.64e12;    // 2.56 us
  EXPECT_NEAR(Predict(*m, CostCounting::kFused), std::max(eup, hbm), hbm * kRel);
}

TEST(Roofline, RingAllReduceOnTheTrayAndThePod) {
  auto text = [](int n) {
    std::string groups;
    for (int i = 0; i < n; ++i) groups += (i ? "," : "") + std::to_string(i);
    return "HloModule m, num_partitions=" + std::to_string(n) + R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[1048576] parameter(0)
  ROOT r = f32[1048576] all-reduce(p), channel_id=1, replica_groups={{)" +
           groups + R"(}}, use_global_device_ids=true, to_apply=add
})";
  };
  const double v = 1048576.0 * 4;
  const double memory = 2 * v / 1.64e12;
  {
    // v6e-8: 2x4 without wraparound; the group spans both axes, one link
    // each way on each: B = 2 x 9e10; 1 + 3 hops each way round.
    auto m = Parse(text(8));
    ASSERT_NE(m, nullptr);
    const double want = memory + 2 * (7.0 / 8) * v / 1.8e11 + 2 * 4 * 1e-6;
    EXPECT_NEAR(Predict(*m, CostCounting::kFused, 8), want, want * kRel);
    EXPECT_NEAR(Predict(*m, CostCounting::kXla, 8), want, want * kRel);
  }
  {
    // 16x16 torus: both axes wrap, two links each way per axis: B = 4 x 9e10;
    // 8 + 8 hops.
    auto m = Parse(text(256));
    ASSERT_NE(m, nullptr);
    const double want = memory + 2 * (255.0 / 256) * v / 3.6e11 + 2 * 16 * 1e-6;
    EXPECT_NEAR(Predict(*m, CostCounting::kFused, 256), want, want * kRel);
  }
}

TEST(Roofline, AllGatherAlongOneAxisOfA2x4Mesh) {
  // Groups {0,1,2,3} and {4,5,6,7}: each runs along the 4-chip axis of the
  // tray, one link each way, 3 hops.
  auto m = Parse(R"(HloModule m, num_partitions=8
ENTRY e {
  p = bf16[256,1024] parameter(0)
  ROOT g = bf16[1024,1024] all-gather(p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true
})");
  ASSERT_NE(m, nullptr);
  const double out = 1024.0 * 1024 * 2;
  const double want = (out + out / 4) / 1.64e12 + 0.75 * out / 9e10 + 3e-6;
  EXPECT_NEAR(Predict(*m, CostCounting::kFused, 8), want, want * kRel);
}

TEST(Topology, V6eSlicesAndParsing) {
  auto eight = IciTopology::V6eSlice(8);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->ToString(), "2x4 (no wraparound)");
  EXPECT_EQ(eight->Hops(0, 7), 4);
  auto pod = IciTopology::V6eSlice(256);
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(pod->ToString(), "16x16 torus");
  EXPECT_EQ(pod->Hops(0, 15), 1);  // wraparound
  EXPECT_EQ(pod->Hops(0, 255), 2);
  EXPECT_FALSE(IciTopology::V6eSlice(257).ok());
  EXPECT_FALSE(IciTopology::Parse("2xfour").ok());
  EXPECT_EQ(IciTopology::Parse("4x4:torus")->ToString(), "4x4 torus");
}

}  // namespace
}  // namespace tpuoff::hlo
