// Memory behaviour of the planner and executor: fusion keeps [rows, cols]
// intermediates from materialising, loops over vocab tiles do not copy their
// state per iteration, OOM reports, traces and thread-count determinism.
#include <cmath>
#include <regex>

#include "nlohmann/json.hpp"
#include "runtime/emulator/plan.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

Literal Ramp(int64_t rows, int64_t cols, double scale) {
  Literal l(hlo::Shape(PrimitiveType::kF32, {rows, cols}));
  for (int64_t i = 0; i < rows * cols; ++i) {
    l.data<float>()[i] = static_cast<float>(std::sin(i * 0.37) * scale);
  }
  return l;
}

TEST(ExecutorMemory, FusedSoftmaxDoesNotMaterialiseIntermediates) {
  const int64_t rows = 64, cols = 4096;
  const int64_t mat = rows * cols * 4;  // one [rows, cols] f32 array
  auto m = Parse(SoftmaxModule(rows, cols));
  ASSERT_NE(m, nullptr);
  Literal x = Ramp(rows, cols, 5.0);
  auto fused = RunModule(*m, {x});
  ASSERT_TRUE(fused.ok()) << fused.status();
  RunOptions unfused_opts;
  unfused_opts.disable_fusion = true;
  auto unfused = RunModule(*m, {x}, unfused_opts);
  ASSERT_TRUE(unfused.ok()) << unfused.status();

  // Values: each row sums to 1 and matches a double reference.
  const float* p = fused->outputs[0].data<float>();
  for (int64_t r = 0; r < rows; r += 17) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, x.data<float>()[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x.data<float>()[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; c += 511) {
      const double want = std::exp(x.data<float>()[r * cols + c] - mx) / sum;
      EXPECT_NEAR(p[r * cols + c], want, 1e-6 * (1 + want));
    }
  }
  EXPECT_TRUE(fused->outputs[0] == unfused->outputs[0]) << "fusion changed the bits";

  // Argument + output are two arrays; everything else must stay below two
  // more materialised intermediates (the chain has four of that size).
  const int64_t peak = fused->devices[0].stats.peak_bytes;
  EXPECT_LT(peak, 2 * mat + 2 * mat);
  // In fact only exp(x - max) is materialised (it feeds two consumers) and
  // the division writes over it in place.
  EXPECT_LE(peak, 2 * mat + 4 * rows * 4);
  EXPECT_GT(unfused->devices[0].stats.peak_bytes, peak);

  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok());
  int loops = 0, reduces = 0;
  for (const Step& s : (*plan)->entry().steps) {
    loops += s.kind == StepKind::kLoop;
    reduces += s.kind == StepKind::kLoopReduce;
  }
  EXPECT_EQ(reduces, 2) << (*plan)->entry().ToString();
  EXPECT_EQ(loops, 2) << (*plan)->entry().ToString();
}

// out[r, :] = exp(logits[r, :]) tile by tile in a while loop, the way vocab
// tiling kernels walk V with dynamic-slice / dynamic-update-slice.
std::string TiledExpModule(int64_t rows, int64_t vocab, int64_t tile) {
  const std::string full = "f32[" + std::to_string(rows) + "," + std::to_string(vocab) + "]";
  const std::string t = "f32[" + std::to_string(rows) + "," + std::to_string(tile) + "]";
  const std::string state = "(s32[], " + full + ", " + full + ")";
  return "HloModule tiles\n"
         "cond { cp = " + state + " parameter(0) ci = s32[] get-tuple-element(cp), index=0\n"
         "  n = s32[] constant(" + std::to_string(vocab / tile) + ")\n"
         "  ROOT c = pred[] compare(ci, n), direction=LT }\n"
         "body { bp = " + state + " parameter(0) i = s32[] get-tuple-element(bp), index=0\n"
         "  lg = " + full + " get-tuple-element(bp), index=1\n"
         "  out = " + full + " get-tuple-element(bp), index=2\n"
         "  ts = s32[] constant(" + std::to_string(tile) + ") z = s32[] constant(0)\n"
         "  start = s32[] multiply(i, ts)\n"
         "  tl = " + t + " dynamic-slice(lg, z, start), dynamic_slice_sizes={" +
         std::to_string(rows) + "," + std::to_string(tile) + "}\n"
         "  e = " + t + " exponential(tl)\n"
         "  upd = " + full + " dynamic-update-slice(out, e, z, start)\n"
         "  one = s32[] constant(1) j = s32[] add(i, one)\n"
         "  ROOT bt = " + state + " tuple(j, lg, upd) }\n"
         "ENTRY e { x = " + full + " parameter(0) zero = f32[] constant(0)\n"
         "  init = " + full + " broadcast(zero), dimensions={}\n"
         "  i0 = s32[] constant(0) s = " + state + " tuple(i0, x, init)\n"
         "  w = " + state + " while(s), condition=cond, body=body\n"
         "  ROOT r = " + full + " get-tuple-element(w), index=2 }\n";
}

TEST(ExecutorMemory, WhileOverTilesDoesNotCopyLoopState) {
  const int64_t rows = 4, vocab = 4096, tile = 512;
  const int64_t full = rows * vocab * 4;
  auto m = Parse(TiledExpModule(rows, vocab, tile));
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(hlo::VerifyModule(*m).ok()) << hlo::VerifyModule(*m);
  Literal x = Ramp(rows, vocab, 3.0);
  auto r = RunModule(*m, {x});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t i = 0; i < rows * vocab; i += 97) {
    EXPECT_FLOAT_EQ(r->outputs[0].data<float>()[i], std::exp(x.data<float>()[i])) << i;
  }
  const DeviceReport& dev = r->devices[0];
  // Logits (argument) + the output buffer updated in place; tiles are small.
  EXPECT_LE(dev.stats.peak_bytes, 2 * full + 4 * rows * tile * 4);
  int full_allocs = 0;
  for (const AllocationRecord& rec : dev.records) {
    full_allocs += rec.kind == AllocationRecord::Kind::kAlloc && rec.bytes == full;
  }
  EXPECT_EQ(full_allocs, 2) << "a loop-carried [rows, vocab] array was copied";
}

TEST(ExecutorMemory, OutOfMemoryReportsDeviceOpAndLiveBuffers) {
  auto m = Parse(R"(HloModule oom
    ENTRY e { x = f32[16,16] parameter(0) a = f32[16,16] exponential(x) b = f32[16,16] log(x)
      c = f32[16,16] negate(x) ROOT t = (f32[16,16], f32[16,16], f32[16,16]) tuple(a, b, c) })");
  ASSERT_NE(m, nullptr);
  RunOptions opts;
  opts.hbm_capacity_bytes = 3000;
  auto r = RunModule(*m, {Ramp(16, 16, 1.0)}, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(r.status().message());
  for (const char* part : {"device 0", "out of HBM while allocating", "(1024 bytes)", "for %b",
                           "in use 2.00K (2048 bytes) of 2.93K hbm", "largest live buffers:",
                           "%x", "%a"}) {
    EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
  }
}

TEST(ExecutorMemory, DefaultCapacityIs32GiBInMessages) {
  EXPECT_EQ(HumanBytes(kDefaultHbmBytes), "32.00G");
}

TEST(ExecutorMemory, TraceCounterMaximumEqualsPeak) {
  auto m = Parse(SoftmaxModule(8, 3000));
  ASSERT_NE(m, nullptr);
  RunOptions opts;
  opts.record_trace = true;
  auto r = RunModule(*m, {Ramp(8, 3000, 2.0)}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string json = r->trace.ToChromeJson();
  ASSERT_EQ(json.rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(json.find("\"process_name\""), std::string::npos);
  EXPECT_NE(json.find("TPU_0"), std::string::npos);
  // Complete events per step: a fused group is named after its root; the
  // softmax's reduces and elementwise loops run as one row chain, named after
  // its steps.
  EXPECT_NE(json.find("\"ph\":\"X\",\"name\":\"ninf + zero + m + fusion.ex(3 ops) + sm + "
                      "fusion.p(2 ops) (row chain)\""),
            std::string::npos)
      << json.substr(0, 2000);
  std::regex counter("\"name\":\"HBM bytes in use\",\"pid\":0,[^}]*\"bytes\":([0-9]+)");
  int64_t max_counter = -1;
  int samples = 0;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), counter);
       it != std::sregex_iterator(); ++it) {
    max_counter = std::max<int64_t>(max_counter, std::stoll((*it)[1]));
    ++samples;
  }
  EXPECT_GT(samples, 2);
  EXPECT_EQ(max_counter, r->devices[0].stats.peak_bytes);
  // A JSON document whose events all carry the Chrome trace fields.
  const nlohmann::json doc = nlohmann::json::parse(json);
  ASSERT_TRUE(doc["traceEvents"].is_array());
  for (const nlohmann::json& e : doc["traceEvents"]) {
    EXPECT_TRUE(e["ph"].is_string() && e["name"].is_string() && e["pid"].is_number_integer())
        << e.dump();
    if (e["ph"] != "M") {
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
    }
  }
}

TEST(ExecutorMemory, BitIdenticalAcrossThreadCounts) {
  // Long rows so reductions split into several chunks and loops run in
  // parallel; the result must not depend on the thread count.
  auto m = Parse(SoftmaxModule(3, 150000));
  ASSERT_NE(m, nullptr);
  Literal x = Ramp(3, 150000, 10.0);
  std::vector<Literal> results;
  for (int threads : {1, 2, 3}) {
    RunOptions opts;
    opts.num_threads = threads;
    auto r = RunModule(*m, {x}, opts);
    ASSERT_TRUE(r.ok()) << r.status();
    results.push_back(std::move(r->outputs[0]));
  }
  EXPECT_TRUE(results[0] == results[1]);
  EXPECT_TRUE(results[0] == results[2]);
}

TEST(ExecutorMemory, DynamicUpdateSliceInPlaceWhenOperandDies) {
  auto m = Parse(R"(HloModule dus
    ENTRY e { x = f32[1024] parameter(0) u = f32[4] parameter(1) i = s32[] parameter(2)
      y = f32[1024] negate(x) ROOT r = f32[1024] dynamic-update-slice(y, u, i) })");
  ASSERT_NE(m, nullptr);
  auto r = RunModule(*m, {F32({1024}, {}),
                          F32({4}, {1, 2, 3, 4}), S32({}, {10})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].data<float>()[11], 2.0f);
  // x, y (updated in place), u, i.
  EXPECT_EQ(r->devices[0].stats.num_allocs, 4);
  EXPECT_EQ(r->devices[0].stats.peak_bytes, 2 * 4096 + 16 + 4);
  EXPECT_EQ(r->devices[0].stats.largest_alloc, 4096);
}

}  // namespace
}  // namespace tpuoff::runtime
