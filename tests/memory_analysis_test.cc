// The static HBM analysis (hlo/analysis/memory_analysis.h): TPU padding rules, the
// heap simulator on hand-written live ranges, text-in/text-out reports of
// small modules, and agreement with the emulator: on every kernel, mode and
// dtype at small ragged shapes and on every corpus module that runs, the
// static peak equals the device peak the emulator measures, and the replayed
// allocation sequence equals the emulator's allocation record; the same on
// batch- and vocab-sharded per-device programs run SPMD.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "hlo/analysis/heap_simulator.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/text/text_parser.h"
#include "hlo/analysis/tpu_layout.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_sharded.h"
#include "runtime/emulator/executor.h"
#include "tools/cli/memory_report.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::hlo {
namespace {

std::unique_ptr<HloModule> ParseOrDie(const std::string& text) {
  auto m = ParseHloText(text);
  EXPECT_TRUE(m.ok()) << m.status() << "\n" << text;
  return m.ok() ? std::move(m).value() : nullptr;
}

// ---------------------------------------------------------------------------
// TPU padding.

struct PadCase {
  const char* name;
  Shape shape;
  int64_t bytes;
};

TEST(TpuLayout, PaddedBytes) {
  Shape col_major(PrimitiveType::kF32, {300, 5});
  col_major.set_minor_to_major({0, 1});
  const PadCase cases[] = {
      {"f32[3,5] -> 8x128x4", Shape(PrimitiveType::kF32, {3, 5}), 8 * 128 * 4},
      {"bf16[3,5] -> 8x128x2", Shape(PrimitiveType::kBF16, {3, 5}), 8 * 128 * 2},
      {"f16[17,129] -> 24x256x2", Shape(PrimitiveType::kF16, {17, 129}), 24 * 256 * 2},
      {"s8[3,5] -> 32x128x1", Shape(PrimitiveType::kS8, {3, 5}), 32 * 128},
      {"pred[3,5] stored as 4 bytes", Shape(PrimitiveType::kPred, {3, 5}), 8 * 128 * 4},
      {"f64[3,5] -> 8x128x8", Shape(PrimitiveType::kF64, {3, 5}), 8 * 128 * 8},
      {"aligned f32[8,128] unchanged", Shape(PrimitiveType::kF32, {8, 128}), 8 * 128 * 4},
      {"aligned bf16[16,256] unchanged", Shape(PrimitiveType::kBF16, {16, 256}),
       16 * 256 * 2},
      {"bf16[8,128] unchanged (T(8,128)(2,1))", Shape(PrimitiveType::kBF16, {8, 128}),
       8 * 128 * 2},
      {"bf16[9,128] pads the sublanes", Shape(PrimitiveType::kBF16, {9, 128}),
       16 * 128 * 2},
      {"major dims are not padded", Shape(PrimitiveType::kF32, {3, 2, 9, 130}),
       3 * 2 * 16 * 256 * 4},
      {"layout {0,1}: minor dim 0", col_major, 384 * 8 * 4},
      {"rank 1: multiple of 1024", Shape(PrimitiveType::kF32, {1000}), 1024 * 4},
      {"rank 1 bf16", Shape(PrimitiveType::kBF16, {1025}), 2048 * 2},
      {"scalar: 128 elements", Shape::Scalar(PrimitiveType::kF32), 128 * 4},
      {"zero elements", Shape(PrimitiveType::kF32, {0, 7}), 0},
      {"tuple sums leaves",
       Shape::Tuple({Shape(PrimitiveType::kF32, {3, 5}), Shape::Scalar(PrimitiveType::kS32)}),
       8 * 128 * 4 + 128 * 4},
  };
  for (const PadCase& c : cases) {
    EXPECT_EQ(TpuPaddedBytes(c.shape), c.bytes) << c.name;
  }
  EXPECT_EQ(TpuPaddedDimensions(Shape(PrimitiveType::kBF16, {2, 3, 5})),
            (std::vector<int64_t>{2, 8, 128}));
  EXPECT_EQ(TpuTilingName(Shape(PrimitiveType::kBF16, {2, 3, 5})), "T(8,128)");
  EXPECT_EQ(TpuTilingName(Shape(PrimitiveType::kF32, {7})), "T(1024)");
}

// ---------------------------------------------------------------------------
// Heap simulator.

TEST(HeapSimulator, PeakTimeAndLiveSet) {
  // a [0,4) 10B, b [1,3) 30B, c [3,6) 25B, d [4,5) 20B.
  const std::vector<LiveInterval> iv = {{10, 0, 4}, {30, 1, 3}, {25, 3, 6}, {20, 4, 5}};
  HeapPeak p = FindPeak(iv);
  EXPECT_EQ(p.bytes, 45);  // t=4: c + d (a is freed at 4); t=1..2 has 40
  EXPECT_EQ(p.time, 4);
  EXPECT_EQ(p.live, (std::vector<int>{2, 3}));
  // Touching intervals do not overlap: [0,2) and [2,4) peak at 7, not 12.
  HeapPeak q = FindPeak(std::vector<LiveInterval>{{7, 0, 2}, {5, 2, 4}});
  EXPECT_EQ(q.bytes, 7);
  EXPECT_EQ(q.time, 0);
  EXPECT_EQ(FindPeak({}).bytes, 0);
  EXPECT_EQ(FindPeak({}).time, -1);
}

TEST(HeapSimulator, BestFitReusesHolesAndReportsFragmentation) {
  // A long-lived 10 and two 30s that never overlap share one slot.
  HeapPlacement p = BestFitPlacement(
      std::vector<LiveInterval>{{10, 0, 10}, {30, 1, 4}, {30, 5, 9}});
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{30, 0, 0}));
  EXPECT_EQ(p.heap_bytes, 40);
  // Fragmentation: K 8 [0,2) at 0, M 6 [1,10) above it at 8, N 6 [3,5)
  // in K's old slot at 0; O 4 [4,10) finds only the 2-byte hole 6..8 and
  // goes on top at 14: heap 18 > peak 16 (M + N + O at t=4).
  const std::vector<LiveInterval> frag = {{8, 0, 2}, {6, 1, 10}, {6, 3, 5}, {4, 4, 10}};
  HeapPlacement f = BestFitPlacement(frag);
  HeapPeak fp = FindPeak(frag);
  EXPECT_EQ(fp.bytes, 16);
  EXPECT_EQ(fp.time, 4);
  EXPECT_EQ(f.offsets, (std::vector<int64_t>{0, 8, 0, 14}));
  EXPECT_EQ(f.heap_bytes, 18);
  // Best fit takes the smallest hole that fits, not the first: when the
  // 5-byte buffer is placed, the holes are 0..10 (the dead 10) and 27..34
  // (the dead 7, below the long-lived 6 at 34..40).
  const std::vector<LiveInterval> holes = {{10, 0, 2}, {9, 0, 10}, {8, 0, 10},
                                           {7, 0, 2},  {6, 0, 10}, {5, 3, 9}};
  HeapPlacement h = BestFitPlacement(holes);
  EXPECT_EQ(h.offsets, (std::vector<int64_t>{0, 10, 19, 27, 34, 27}));
  EXPECT_EQ(h.heap_bytes, 40);
}

// ---------------------------------------------------------------------------
// Text in, text out: small modules with hand-derived peaks.

struct TextCase {
  const char* name;
  const char* hlo;
  const char* expected;  // MemoryAnalysis::ToString()
};

const TextCase kTextCases[] = {
    {"two outputs, nothing freed",
     R"(HloModule chain
ENTRY e { x = f32[256] parameter(0) a = f32[256] exponential(x) b = f32[256] log(x)
  ROOT t = (f32[256], f32[256]) tuple(a, b) })",
     "peak 3072 at t=2 (e step 1 (b)): argument 1024, output 2048, temp 0; best-fit 3072\n"
     "  %x f32[256] 1024 argument [0,3)\n"
     "  %a f32[256] 1024 output [1,3)\n"
     "  %b f32[256] 1024 output [2,3)\n"
     "tpu peak 12288 at t=2 (e step 1 (b)): argument 4096, output 8192, temp 0; "
     "best-fit 12288\n"
     "  %x f32[256] 4096 argument [0,3)\n"
     "  %a f32[256] 4096 output [1,3)\n"
     "  %b f32[256] 4096 output [2,3)\n"},
    // negate writes over the dying concatenate (in place); the slice needs
    // its own buffer while the concatenate's is still live.
    {"in place, then a temporary dies",
     R"(HloModule temps
ENTRY e { x = f32[2,64] parameter(0) c = f32[4,64] concatenate(x, x), dimensions={0}
  n = f32[4,64] negate(c) ROOT s = f32[2,64] slice(n), slice={[0:2], [0:64]} })",
     "peak 2048 at t=2 (e step 2 (s)): argument 512, output 512, temp 1024; best-fit 2048\n"
     "  %c f32[4,64] 1024 temp [1,3)\n"
     "  %x f32[2,64] 512 argument [0,4)\n"
     "  %s f32[2,64] 512 output [2,4)\n"
     "tpu peak 12288 at t=2 (e step 2 (s)): argument 4096, output 4096, temp 4096; "
     "best-fit 12288\n"
     "  %x f32[2,64] 4096 argument [0,4)\n"
     "  %c f32[4,64] 4096 temp [1,3)\n"
     "  %s f32[2,64] 4096 output [2,4)\n"},
    // The borrowed argument x is copied into the loop state; the counter z
    // is handed over and updated in place; the peak is inside the body.
    {"while: copied state, peak in the body",
     R"(HloModule loop
cond { cp = (s32[], f32[16]) parameter(0) ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(3) ROOT lt = pred[] compare(ci, n), direction=LT }
body { bp = (s32[], f32[16]) parameter(0) i = s32[] get-tuple-element(bp), index=0
  v = f32[16] get-tuple-element(bp), index=1 one = s32[] constant(1) j = s32[] add(i, one)
  c = f32[32] concatenate(v, v), dimensions={0} sl = f32[16] slice(c), slice={[0:16]}
  ROOT bt = (s32[], f32[16]) tuple(j, sl) }
ENTRY e { x = f32[16] parameter(0) z = s32[] constant(0) s = (s32[], f32[16]) tuple(z, x)
  ROOT loop = (s32[], f32[16]) while(s), condition=cond, body=body })",
     "peak 260 at t=5 (e step 2 (loop) > body step 3 (c)): argument 64, output 4, "
     "temp 192; best-fit 260\n"
     "  %c f32[32] 128 temp [5,8)\n"
     "  %x f32[16] 64 argument [0,11)\n"
     "  %loop f32[16] 64 temp [2,6)\n"
     "  %z s32[] 4 output [1,11)\n"
     "tpu peak 12800 at t=5 (e step 2 (loop) > body step 3 (c)): argument 4096, "
     "output 512, temp 8192; best-fit 12800\n"
     "  %x f32[16] 4096 argument [0,11)\n"
     "  %loop f32[16] 4096 temp [2,6)\n"
     "  %c f32[32] 4096 temp [5,8)\n"
     "  %z s32[] 512 output [1,11)\n"},
};

TEST(MemoryAnalysisText, HandWrittenModules) {
  for (const TextCase& c : kTextCases) {
    SCOPED_TRACE(c.name);
    auto m = ParseOrDie(c.hlo);
    ASSERT_NE(m, nullptr);
    absl::StatusOr<MemoryAnalysis> a = AnalyzeMemory(*m);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->ToString(), c.expected);
    auto r = runtime::RunModule(*m, {Literal(m->entry()->parameter(0)->shape())});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->devices[0].stats.peak_bytes, a->peak.bytes);
  }
}

TEST(MemoryAnalysisText, RootIsAnArgument) {
  // Nothing but the borrowed argument: the peak is at the entry.
  auto m = ParseOrDie(R"(HloModule ok
ENTRY e { ROOT x = f32[2] parameter(0) })");
  ASSERT_NE(m, nullptr);
  absl::StatusOr<MemoryAnalysis> a = AnalyzeMemory(*m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->peak.bytes, 8);
  EXPECT_EQ(a->peak.point.where, "entry arguments");
  EXPECT_EQ(a->peak.argument_bytes, 8);
}

// ---------------------------------------------------------------------------
// Agreement with the emulator.

// (alloc?, bytes) in the order they happen.
using AllocSequence = std::vector<std::pair<bool, int64_t>>;

AllocSequence StaticSequence(const MemoryAnalysis& a) {
  std::vector<std::pair<int64_t, std::pair<bool, int64_t>>> events;
  for (const AllocatedBuffer& b : a.buffers) {
    events.push_back({b.start, {true, b.bytes}});
    if (b.end < a.num_times) events.push_back({b.end, {false, b.bytes}});
  }
  std::sort(events.begin(), events.end());
  AllocSequence out;
  for (const auto& e : events) out.push_back(e.second);
  return out;
}

AllocSequence DeviceSequence(const runtime::DeviceReport& d) {
  AllocSequence out;
  for (const runtime::AllocationRecord& r : d.records) {
    out.push_back({r.kind == runtime::AllocationRecord::Kind::kAlloc, r.bytes});
  }
  return out;
}

// Runs `module` on the emulator (SPMD when it has partitions) and checks
// every device's peak (and, without loops, its whole allocation sequence)
// against the static analysis,
// with fusion on and off.
void ExpectAgreement(const HloModule& module, const std::string& what,
                     bool random_inputs) {
  for (bool fusion : {true, false}) {
    SCOPED_TRACE(absl::StrCat(what, fusion ? "" : " (fusion off)"));
    MemoryAnalysisOptions options;
    options.plan.enable_fusion = fusion;
    absl::StatusOr<DeviceMemoryReport> report = AnalyzeDeviceMemory(module, options);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->groups.size(), 1u);
    const MemoryAnalysis& a = report->groups[0].analysis;
    const int64_t n = std::max<int64_t>(1, module.num_partitions());
    EXPECT_EQ(report->num_devices, n);
    EXPECT_EQ(static_cast<int64_t>(report->groups[0].devices.size()), n);

    std::vector<std::vector<Literal>> args(n);
    for (int64_t d = 0; d < n; ++d) {
      if (random_inputs) {
        tools::RandomInputOptions o;
        o.seed = 7;
        o.device = d;
        auto r = tools::MakeRandomInputs(*module.entry(), o);
        ASSERT_TRUE(r.ok()) << r.status();
        args[d] = std::move(r).value();
      } else {
        for (const HloInstruction* p : module.entry()->parameters()) {
          args[d].emplace_back(p->shape());
        }
      }
    }
    runtime::RunOptions run;
    run.disable_fusion = !fusion;
    run.num_threads = 1;
    auto r = runtime::RunSpmd(module, args, run);
    ASSERT_TRUE(r.ok()) << r.status();
    // The replay runs each loop body once; the emulator repeats it, so the
    // whole allocation sequence is comparable only without loops.
    bool has_while = false;
    for (const auto& c : module.computations()) {
      for (const auto& x : c->instructions()) has_while |= x->opcode() == HloOpcode::kWhile;
    }
    const AllocSequence expected = StaticSequence(a);
    for (const runtime::DeviceReport& d : r->devices) {
      EXPECT_EQ(a.peak.bytes, d.stats.peak_bytes) << "device " << d.device_id;
      if (!has_while) {
        EXPECT_EQ(expected, DeviceSequence(d)) << "device " << d.device_id;
      }
    }
    // The live set and the split account for the peak exactly.
    int64_t live = 0;
    for (int i : a.peak.live) live += a.buffers[i].bytes;
    EXPECT_EQ(live, a.peak.bytes);
    EXPECT_EQ(a.peak.argument_bytes + a.peak.output_bytes + a.peak.temp_bytes, a.peak.bytes);
    EXPECT_GE(a.best_fit_bytes, a.peak.bytes);
    EXPECT_GE(a.tpu_peak.bytes, a.peak.bytes);
    EXPECT_GE(a.tpu_best_fit_bytes, a.tpu_peak.bytes);
  }
}

struct KernelCase {
  const char* name;
  int64_t batch, seq, vocab, block;
  std::optional<int64_t> time_block;
  double beta;
  bool on_policy;
};

TEST(MemoryAnalysisAgreement, EveryKernelModeAndDtype) {
  // V = 300 with 128-wide tiles: two full tiles in a while loop and a
  // ragged 44-wide tail; T = 5 with a 2-row time tile: ragged rows too.
  const KernelCase cases[] = {
      {"ragged vocab", 2, 5, 300, 128, std::nullopt, 0.0, false},
      {"ragged rows, KL, on-policy", 3, 5, 300, 128, 2, 0.04, true},
      {"one tile", 1, 3, 100, 2048, std::nullopt, 0.0, false},
  };
  int checked = 0;
  for (const KernelCase& kc : cases) {
    for (kernels::KernelKind kind : kernels::AllKernelKinds()) {
      const bool entropy = kernels::IsEntropyKernel(kind);
      for (kernels::KernelMode mode :
           {kernels::KernelMode::kFwd, kernels::KernelMode::kBwd,
            kernels::KernelMode::kFwdBwd}) {
        if (entropy && mode != kernels::KernelMode::kFwd) continue;
        for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
          kernels::KernelSpec spec;
          spec.kind = kind;
          spec.mode = mode;
          spec.config.batch = kc.batch;
          spec.config.seq = kc.seq;
          spec.config.vocab = kc.vocab;
          spec.config.block_size = kc.block;
          spec.config.time_block = kc.time_block;
          spec.config.beta = kc.beta;
          spec.config.on_policy = kc.on_policy;
          spec.config.logits_type = type;
          if (kernels::KernelKindName(kind) == "grpo_fused_linear") {
            spec.config.hidden = 24;
            spec.config.token_chunk = 4;
          }
          const std::string what =
              absl::StrCat(kc.name, ": ", kernels::KernelKindName(kind), " ",
                           kernels::KernelModeName(mode), " ", PrimitiveTypeName(type));
          absl::StatusOr<std::unique_ptr<HloModule>> m = kernels::BuildKernel(spec);
          ASSERT_TRUE(m.ok()) << what << ": " << m.status();
          ExpectAgreement(**m, what, /*random_inputs=*/true);
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 3 * 2 * (2 * 3 + 2));
}

TEST(MemoryAnalysisAgreement, ShardedKernels) {
  // Per-device SPMD programs on a 4-device mesh; every device's measured
  // peak must equal the single static figure of the group. V = 301 splits
  // unevenly over 4 devices (76-column shards, the last with 73 real ones).
  int checked = 0;
  for (kernels::ShardKind shard : {kernels::ShardKind::kBatch, kernels::ShardKind::kVocab}) {
    for (kernels::KernelKind kind : kernels::AllKernelKinds()) {
      const bool entropy = kernels::IsEntropyKernel(kind);
      for (kernels::KernelMode mode :
           {kernels::KernelMode::kFwd, kernels::KernelMode::kBwd,
            kernels::KernelMode::kFwdBwd}) {
        if (entropy && mode != kernels::KernelMode::kFwd) continue;
        for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
          kernels::KernelSpec spec;
          spec.kind = kind;
          spec.mode = mode;
          spec.config.batch = 4;
          spec.config.seq = 5;
          spec.config.vocab = 301;
          spec.config.block_size = 32;
          spec.config.logits_type = type;
          if (kernels::KernelKindName(kind) == "grpo_fused_linear") {
            spec.config.hidden = 24;
            spec.config.token_chunk = 4;
          }
          kernels::ShardingSpec sharding;
          sharding.kind = shard;
          sharding.mesh.num_devices = 4;
          if (!kernels::ValidateShardedKernel(spec, sharding).ok()) continue;
          const std::string what = absl::StrCat(
              kernels::ShardKindName(shard), "-sharded ", kernels::KernelKindName(kind), " ",
              kernels::KernelModeName(mode), " ", PrimitiveTypeName(type));
          absl::StatusOr<std::unique_ptr<HloModule>> m =
              kernels::BuildShardedKernel(spec, sharding);
          ASSERT_TRUE(m.ok()) << what << ": " << m.status();
          ASSERT_EQ((*m)->num_partitions(), 4) << what;
          ExpectAgreement(**m, what, /*random_inputs=*/true);
          ++checked;
        }
      }
    }
  }
  // Batch: every GRPO kernel's 3 modes and both entropy kernels; vocab: the
  // tiled ones. Both dtypes.
  EXPECT_GE(checked, 2 * (2 * 3 + 2) + 2 * (3 + 1));
}

TEST(MemoryAnalysisAgreement, EveryCorpusModuleThatRuns) {
  const std::filesystem::path dir = std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests/corpus";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".hlo") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto m = ParseHloText(text.str(), entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status();
    bool has_custom_call = false;
    for (const auto& c : (*m)->computations()) {
      for (const auto& x : c->instructions()) {
        has_custom_call |= x->opcode() == HloOpcode::kCustomCall;
      }
    }
    if (has_custom_call) continue;  // the emulator cannot run these
    ExpectAgreement(**m, entry.path().filename().string(), /*random_inputs=*/false);
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// ---------------------------------------------------------------------------
// Report rendering.

TEST(MemoryReport, JsonParsesAndCarriesTheNumbers) {
  auto m = ParseOrDie(kTextCases[1].hlo);
  ASSERT_NE(m, nullptr);
  auto report = AnalyzeDeviceMemory(*m);
  ASSERT_TRUE(report.ok()) << report.status();
  tools::MemoryReportOptions options;
  options.hbm_capacity_bytes = 10000;  // dense peak fits, TPU-padded does not
  options.top = 2;
  const nlohmann::json json = nlohmann::json::parse(tools::MemoryReportJson(*report, options));
  EXPECT_FALSE(json["fits"].get<bool>());
  const nlohmann::json& g = json["groups"][0];
  EXPECT_EQ(g["peak_bytes"].get<int64_t>(), 2048);
  EXPECT_EQ(g["tpu_peak_bytes"].get<int64_t>(), 12288);
  EXPECT_EQ(g["padding_overhead_bytes"].get<int64_t>(), 12288 - 2048);
  EXPECT_EQ(g["temp_bytes"].get<int64_t>(), 1024);
  EXPECT_EQ(g["peak_instruction"].get<std::string>(), "s");
  EXPECT_EQ(g["num_live_at_peak"].get<int64_t>(), 3);
  // The v6e model: every argument and output in HBM, the temporaries in VMEM.
  EXPECT_EQ(g["v6e_hbm_temp_bytes"].get<int64_t>(), 0);
  EXPECT_GT(g["v6e_vmem_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(g["v6e_hbm_bytes"].get<int64_t>(),
            g["tpu_peak_bytes"].get<int64_t>() - g["tpu_temp_bytes"].get<int64_t>());
  ASSERT_EQ(g["live_at_peak"].size(), 2u);
  const nlohmann::json& top = g["live_at_peak"][0];
  EXPECT_EQ(top["instruction"].get<std::string>(), "c");
  EXPECT_EQ(top["dtype"].get<std::string>(), "f32");
  EXPECT_EQ(top["bytes"].get<int64_t>(), 1024);
  EXPECT_EQ(top["tpu_bytes"].get<int64_t>(), 4096);
  EXPECT_EQ(top["kind"].get<std::string>(), "temp");

  const std::string text = tools::FormatMemoryReport(*report, options);
  EXPECT_NE(text.find("DOES NOT FIT: TPU-padded peak 12.00K of 9.77K hbm"), std::string::npos)
      << text;
  EXPECT_NE(text.find("peak HBM            2.00K (2048 bytes)"), std::string::npos) << text;
  EXPECT_NE(text.find("XLA:TPU v6e model   HBM "), std::string::npos) << text;
}

TEST(MemoryReport, IdenticalDevicesAreGrouped) {
  auto a = ParseOrDie(kTextCases[0].hlo);
  auto b = ParseOrDie(kTextCases[0].hlo);
  auto c = ParseOrDie(kTextCases[1].hlo);
  ASSERT_TRUE(a && b && c);
  auto report = AnalyzeDeviceMemory(std::vector<const HloModule*>{a.get(), c.get(), b.get()});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->num_devices, 3);
  ASSERT_EQ(report->groups.size(), 2u);
  EXPECT_EQ(report->groups[0].devices, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(report->groups[1].devices, (std::vector<int64_t>{1}));
  const std::string text = tools::FormatMemoryReport(*report, {});
  EXPECT_NE(text.find("devices 0,2 (2 identical):"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndevice 1:"), std::string::npos) << text;
}

}  // namespace
}  // namespace tpuoff::hlo
