// Tile loops run rows-outer (runtime/emulator/row_while.h): which loops the
// planner picks, that results (bit for bit, any thread count) and HBM
// figures are those of running the loop as written, and that every way a
// loop body can need another row's data (a reverse of a per-row value, a
// reduce over rows, a row-shifted slice, reads of an array the loop
// updates) still gives them.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/grpo_sharded.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/emulator/plan.h"
#include "tests/executor_test_util.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

constexpr int64_t kRows = 64, kTile = 16384, kTiles = 4, kCols = kTile * kTiles;

enum class Body {
  kOwnRows,        // every op row-local
  kReversedMax,    // exp(t - max of row rows-1-r): another row of a queued value
  kRowTotal,       // a scalar total over all rows carried in the state
  kShiftedSlice,   // the tile starts at row i of a taller x (a shared read)
  kReadsPrevTile,  // adds the previous tile of the updated array, rows reversed
  kAccumulates,    // out[:, tile] += e: the update reads the zeros it overwrites
};

// A loop over kTiles tiles of x: per tile the row max, e = exp(t - max),
// acc += sum e (per row), out[:, tile] = e.
std::string LoopModule(Body body) {
  const int64_t x_rows = body == Body::kShiftedSlice ? kRows + 16 : kRows;
  const std::string x = "f32[" + std::to_string(x_rows) + "," + std::to_string(kCols) + "]";
  const std::string out = "f32[64," + std::to_string(kCols) + "]";
  const std::string tile = "f32[64," + std::to_string(kTile) + "]";
  const std::string state = "(s32[], " + x + ", f32[64], " + out + ", f32[])";
  std::string b = "HloModule row_loop\n" + std::string(kF32Reducers);
  b += "cond { p = " + state + " parameter(0) i = s32[] get-tuple-element(p), index=0\n"
       "n = s32[] constant(" + std::to_string(kTiles) + ")\n"
       "ROOT lt = pred[] compare(i, n), direction=LT }\n";
  b += "body { p = " + state + " parameter(0)\n"
       "i = s32[] get-tuple-element(p), index=0\n"
       "x = " + x + " get-tuple-element(p), index=1\n"
       "acc = f32[64] get-tuple-element(p), index=2\n"
       "out = " + out + " get-tuple-element(p), index=3\n"
       "tot = f32[] get-tuple-element(p), index=4\n"
       "w = s32[] constant(" + std::to_string(kTile) + ")\n"
       "off = s32[] multiply(i, w)\n"
       "z = s32[] constant(0)\n";
  b += "t = " + tile + " dynamic-slice(x, " + (body == Body::kShiftedSlice ? "i" : "z") +
       ", off), dynamic_slice_sizes={64," + std::to_string(kTile) + "}\n"
       "ninf = f32[] constant(-inf)\n"
       "zero = f32[] constant(0)\n"
       "m = f32[64] reduce(t, ninf), dimensions={1}, to_apply=max_f32\n";
  if (body == Body::kReversedMax) b += "mr = f32[64] reverse(m), dimensions={0}\n";
  b += "mb = " + tile + " broadcast(" + (body == Body::kReversedMax ? "mr" : "m") +
       "), dimensions={0}\n"
       "d = " + tile + " subtract(t, mb)\n"
       "e = " + tile + " exponential(d)\n"
       // The same values again for the update, so that the update fuses
       // with them as in the kernels (e itself feeds the reduce).
       "dw = " + tile + " subtract(t, mb)\n"
       "ew = " + tile + " exponential(dw)\n";
  std::string written = "ew";
  if (body == Body::kReadsPrevTile) {
    b += "prev = s32[] subtract(off, w)\n"
         "ob = " + tile + " dynamic-slice(out, z, prev), dynamic_slice_sizes={64," +
         std::to_string(kTile) + "}\n"
         "obr = " + tile + " reverse(ob), dimensions={0}\n"
         "e2 = " + tile + " add(ew, obr)\n";
    written = "e2";
  }
  if (body == Body::kAccumulates) {
    b += "oa = " + tile + " dynamic-slice(out, z, off), dynamic_slice_sizes={64," +
         std::to_string(kTile) + "}\n"
         "e3 = " + tile + " add(ew, oa)\n";
    written = "e3";
  }
  b += "s = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f32\n"
       "acc2 = f32[64] add(acc, s)\n";
  if (body == Body::kRowTotal) {
    b += "st = f32[] reduce(s, zero), dimensions={0}, to_apply=add_f32\n"
         "tot2 = f32[] add(tot, st)\n";
  } else {
    b += "tot2 = f32[] add(tot, zero)\n";
  }
  b += "u = " + out + " dynamic-update-slice(out, " + written + ", z, off)\n"
       "one = s32[] constant(1)\n"
       "i2 = s32[] add(i, one)\n"
       "ROOT r = " + state + " tuple(i2, x, acc2, u, tot2) }\n";
  b += "ENTRY e { x = " + x + " parameter(0)\n"
       "i0 = s32[] constant(0) zero = f32[] constant(0)\n"
       "acc0 = f32[64] broadcast(zero), dimensions={}\n"
       "out0 = " + out + " broadcast(zero), dimensions={}\n"
       "s0 = " + state + " tuple(i0, x, acc0, out0, zero)\n"
       "wl = " + state + " while(s0), condition=cond, body=body\n"
       "a = f32[64] get-tuple-element(wl), index=2\n"
       "o = " + out + " get-tuple-element(wl), index=3\n"
       "tt = f32[] get-tuple-element(wl), index=4\n"
       "ROOT res = (f32[64], " + out + ", f32[]) tuple(a, o, tt) }\n";
  return b;
}

Literal Wave(int64_t rows, int64_t cols) {
  Literal l(hlo::Shape(PrimitiveType::kF32, {rows, cols}));
  for (int64_t i = 0; i < rows * cols; ++i) {
    l.data<float>()[i] = static_cast<float>(std::sin(i * 0.37) * 6 + (i % 7) + (i / cols) * 0.1);
  }
  return l;
}

const hlo::HloInstruction* WhileOf(const hlo::HloModule& m) {
  for (const auto& x : m.entry()->instructions()) {
    if (x->opcode() == hlo::HloOpcode::kWhile) return x.get();
  }
  return nullptr;
}

int64_t RowsOuterEvents(const RunResult& r) {
  int64_t n = 0;
  for (const TraceEvent& e : r.trace.events()) {
    n += e.name.find("rows-outer") != std::string::npos;
  }
  return n;
}

// Leaves a block of `bytes` full of NaNs in the host allocator's cache, so
// that the next buffer of that size starts dirty (a dropped store that was
// needed shows up as NaN instead of reading fresh zero pages).
void DirtyHostCache(size_t bytes) {
  void* p = HostAlloc(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 0xff, bytes);
  HostFree(p);
}

TEST(RowWhile, PlannerPicksRowLocalTileLoops) {
  auto m = Parse(LoopModule(Body::kOwnRows));
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->row_while(WhileOf(*m)), kRows);
  // The zero fill of `out` right before the loop joins its queue (its stores
  // the loop's updates overwrite are dropped).
  int starts = 0;
  for (const hlo::Step& s : (*plan)->entry().steps) {
    if ((*plan)->row_while_starting_at(s) == WhileOf(*m)) {
      ++starts;
      EXPECT_EQ(s.instr->name(), "out0");
    }
  }
  EXPECT_EQ(starts, 1);
  auto off = ModulePlan::Build(*m, {}, /*row_chains=*/false);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)->row_while(WhileOf(*m)), 0);
  auto unfused = ModulePlan::Build(*m, hlo::PlanOptions{.enable_fusion = false});
  ASSERT_TRUE(unfused.ok());
  EXPECT_EQ((*unfused)->row_while(WhileOf(*m)), 0);
}

TEST(RowWhile, SmallLoopsAndLoopsWithLargeUnfusedOpsStayAsWritten) {
  // A loop of three iterations over an f32[shape] whose body computes
  // `y` from `x` with `ops`.
  auto loop = [](const std::string& shape, const std::string& ops) {
    const std::string t = "f32[" + shape + "]", st = "(s32[], " + t + ")";
    return "HloModule l\n"
           "c { p = " + st + " parameter(0) i = s32[] get-tuple-element(p), index=0\n"
           "n = s32[] constant(3) ROOT lt = pred[] compare(i, n), direction=LT }\n"
           "b { p = " + st + " parameter(0) i = s32[] get-tuple-element(p), index=0\n"
           "x = " + t + " get-tuple-element(p), index=1\n" + ops +
           "one = s32[] constant(1) i2 = s32[] add(i, one)\n"
           "ROOT r = " + st + " tuple(i2, y) }\n"
           "ENTRY e { x = " + t + " parameter(0) i0 = s32[] constant(0)\n"
           "s0 = " + st + " tuple(i0, x)\n"
           "ROOT w = " + st + " while(s0), condition=c, body=b }\n";
  };
  // A loop whose fused steps are all small is not worth it; a dot in the
  // body (not row-local, not small) keeps the loop as written.
  for (const std::string& text :
       {loop("8,64", "y = f32[8,64] exponential(x)\n"),
        loop("1024,1024", "ex = f32[1024,1024] exponential(x)\n"
                          "y = f32[1024,1024] dot(ex, x), lhs_contracting_dims={1}, "
                          "rhs_contracting_dims={0}\n")}) {
    auto m = Parse(text);
    ASSERT_NE(m, nullptr);
    auto plan = ModulePlan::Build(*m);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ((*plan)->row_while(WhileOf(*m)), 0) << text;
  }
}

// The own-rows loop against a float64 evaluation of the same math.
TEST(RowWhile, OwnRowsLoopMatchesFloat64) {
  auto m = Parse(LoopModule(Body::kOwnRows));
  ASSERT_NE(m, nullptr);
  const Literal x = Wave(kRows, kCols);
  RunOptions o;
  o.record_trace = true;
  auto got = RunModule(*m, {x}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(RowsOuterEvents(*got), 1);  // queued through the loop, run once at its end
  const float* xv = x.data<float>();
  const float* acc = got->outputs[0].data<float>();
  const float* out = got->outputs[1].data<float>();
  double worst = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < kTiles; ++k) {
      const float* t = xv + r * kCols + k * kTile;
      double mx = -INFINITY;
      for (int64_t j = 0; j < kTile; ++j) mx = std::max<double>(mx, t[j]);
      for (int64_t j = 0; j < kTile; ++j) {
        // The subtraction in f32, as the module does it.
        const double e = std::exp(static_cast<double>(t[j] - static_cast<float>(mx)));
        sum += e;
        worst = std::max(worst, std::fabs(out[r * kCols + k * kTile + j] - e) / (1e-30 + e));
      }
    }
    EXPECT_NEAR(acc[r], sum, 1e-5 * sum) << "row " << r;
  }
  EXPECT_LT(worst, 4e-7);  // exp to a few f32 ulps
  EXPECT_EQ(got->outputs[2].data<float>()[0], 0.0f);
}

TEST(RowWhile, EveryBodyMatchesTheLoopAsWrittenBitForBit) {
  for (Body body : {Body::kOwnRows, Body::kReversedMax, Body::kRowTotal, Body::kShiftedSlice,
                    Body::kReadsPrevTile, Body::kAccumulates}) {
    SCOPED_TRACE("body " + std::to_string(static_cast<int>(body)));
    auto m = Parse(LoopModule(body));
    ASSERT_NE(m, nullptr);
    const Literal x = Wave(body == Body::kShiftedSlice ? kRows + 16 : kRows, kCols);
    RunOptions plain;
    plain.disable_row_chains = true;
    plain.record_trace = true;
    auto want = RunModule(*m, {x}, plain);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(RowsOuterEvents(*want), 0);
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      RunOptions o;
      o.num_threads = threads;
      o.record_trace = true;
      DirtyHostCache(kRows * kCols * sizeof(float));
      auto got = RunModule(*m, {x}, o);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSameRun(*got, *want);
      // A body that needs other rows runs the queue before each such step
      // (once per iteration here); the others once, at the loop's end.
      const int64_t runs = RowsOuterEvents(*got);
      if (body == Body::kOwnRows || body == Body::kShiftedSlice || body == Body::kAccumulates) {
        EXPECT_EQ(runs, 1);
      } else {
        EXPECT_GE(runs, kTiles);
      }
    }
  }
}

TEST(RowWhile, LimitsStillStopTheLoop) {
  auto m = Parse(LoopModule(Body::kOwnRows));
  ASSERT_NE(m, nullptr);
  const Literal x = Wave(kRows, kCols);
  RunOptions o;
  o.max_loop_iterations = 2;
  auto r = RunModule(*m, {x}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("within the limit of 2 iterations"), std::string::npos)
      << r.status();
  // A loop it runs afterwards in the same process is unaffected.
  auto again = RunModule(*m, {x}, {});
  ASSERT_TRUE(again.ok()) << again.status();
}

// The GRPO kernels' tile loops at a shape whose tiles pass the size bar:
// every output and the peak, unsharded and over a vocab-sharded mesh.
TEST(RowWhile, GrpoKernelsMatchTheLoopsAsWritten) {
  for (const char* kernel : {"grpo_tiled", "entropy_tiled"}) {
    for (const char* dtype : {"f32", "bf16"}) {
      for (const char* shard : {"none", "vocab"}) {
        SCOPED_TRACE(std::string(kernel) + " " + dtype + " shard " + shard);
        tools::KernelFlags k;
        k.kernel = kernel;
        k.mode = k.kernel == "entropy_tiled" ? "fwd" : "fwd_bwd";
        k.batch = 2;
        k.seq = 128;
        k.vocab = 33000;
        k.block_size = 4096;
        k.logits_dtype = dtype;
        auto spec = tools::KernelSpecFromFlags(k);
        ASSERT_TRUE(spec.ok()) << spec.status();
        kernels::ShardingSpec sharding;
        const int devices = std::string(shard) == "vocab" ? 2 : 1;
        sharding.kind = devices == 2 ? kernels::ShardKind::kVocab : kernels::ShardKind::kNone;
        sharding.mesh.num_devices = devices;
        auto module = kernels::BuildShardedKernel(*spec, sharding);
        ASSERT_TRUE(module.ok()) << module.status();
        auto plan = ModulePlan::Build(**module);
        ASSERT_TRUE(plan.ok()) << plan.status();
        int loops = 0;
        for (const hlo::ComputationPlan* c : (*plan)->buffers().all()) {
          for (const hlo::Step& s : c->steps) {
            loops += s.kind == hlo::StepKind::kOp &&
                     s.instr->opcode() == hlo::HloOpcode::kWhile &&
                     (*plan)->row_while(s.instr) == k.batch * k.seq;
          }
        }
        EXPECT_EQ(loops, k.kernel == "entropy_tiled" ? 1 : 2);
        auto inputs = tools::MakeRandomInputs(*(*module)->entry(), tools::RandomInputOptions());
        ASSERT_TRUE(inputs.ok()) << inputs.status();
        std::vector<std::vector<Literal>> per_device;
        for (int d = 0; d < devices; ++d) {
          std::vector<Literal> copy;
          for (const Literal& l : *inputs) copy.push_back(l);
          per_device.push_back(std::move(copy));
        }
        RunOptions plain;
        plain.disable_row_chains = true;
        auto want = RunSpmd(**module, per_device, plain);
        ASSERT_TRUE(want.ok()) << want.status();
        for (int threads : {1, 2}) {
          RunOptions o;
          o.num_threads = threads;
          o.record_trace = true;
          auto got = RunSpmd(**module, per_device, o);
          ASSERT_TRUE(got.ok()) << got.status();
          ExpectSameRun(*got, *want);
          EXPECT_GE(RowsOuterEvents(*got), devices * loops);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::runtime
