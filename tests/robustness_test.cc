// Robustness of the library layers (the CLI's are tests/cli/robustness_*.sh):
// importers enforce the text parser's limits, walks over long chains and
// deep call nestings do not recurse, the best-fit placement and the
// overlap count agree with brute force, a device's memory stays flat across
// loop iterations when allocations are not recorded, and many devices run
// on a few threads.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/analysis/heap_simulator.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/ir/verifier.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "runtime/emulator/executor.h"
#include "tests/sanitizer.h"

namespace tpuoff {
namespace {

constexpr int kScale = tpuoff::testing::kUnderAddressSanitizer ? 10 : 1;

std::unique_ptr<hlo::HloModule> Parse(const std::string& text) {
  auto m = hlo::ParseHloText(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  EXPECT_TRUE(hlo::VerifyModule(**m).ok()) << hlo::VerifyModule(**m);
  return *std::move(m);
}

TEST(ImportLimits, ProtoArraysLargerThanTheTextParserAllowsAreRejected) {
  auto m = Parse("HloModule small\nENTRY e { x = f32[8] parameter(0) ROOT n = f32[8] negate(x) }");
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::string> json = hlo::ModuleToProtoJson(*m);
  ASSERT_TRUE(json.ok());
  std::string big = *json;
  for (size_t at = big.find("\"8\""); at != std::string::npos; at = big.find("\"8\"", at)) {
    big.replace(at, 3, "\"999999999999\"");
  }
  auto from_json = hlo::ModuleFromProtoJson(big);
  ASSERT_FALSE(from_json.ok());
  EXPECT_NE(from_json.status().message().find("bytes per array"), std::string::npos)
      << from_json.status();
  // The same through the binary form.
  auto text = hlo::ParseHloText(
      "HloModule big\nENTRY e { x = f32[999999999999] parameter(0) ROOT n = f32[999999999999] "
      "negate(x) }",
      "big.hlo", {.max_array_bytes = int64_t{1} << 62});
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::string> bytes = hlo::ModuleToProtoBytes(**text);
  ASSERT_TRUE(bytes.ok());
  auto from_bytes = hlo::ModuleFromProtoBytes(*bytes);
  ASSERT_FALSE(from_bytes.ok());
  EXPECT_NE(from_bytes.status().message().find("bytes per array"), std::string::npos)
      << from_bytes.status();
  // Writers check the same limit first (a kernel emitted for huge flags was
  // written, then refused by every reader), naming the array.
  EXPECT_TRUE(hlo::VerifyModule(**text).ok());
  const absl::Status verified = hlo::VerifyReadable(**text);
  ASSERT_FALSE(verified.ok());
  EXPECT_NE(verified.message().find("instruction x: shape f32[999999999999] needs"),
            std::string::npos) << verified;
  EXPECT_NE(verified.message().find("bytes per array"), std::string::npos) << verified;
}

std::string Chain(int n) {
  std::string t = "HloModule chain\nENTRY e { x = f32[4] parameter(0)\n";
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&t, "n", i, " = f32[4] negate(", prev, ")\n");
    prev = absl::StrCat("n", i);
  }
  return absl::StrCat(t, "ROOT r = f32[4] copy(", prev, ") }\n");
}

std::string Calls(int n) {
  std::string t = "HloModule calls\nc0 { a0 = f32[4] parameter(0) ROOT r0 = f32[4] negate(a0) }\n";
  for (int i = 1; i < n; ++i) {
    absl::StrAppend(&t, "c", i, " { a", i, " = f32[4] parameter(0) ROOT r", i,
                    " = f32[4] call(a", i, "), to_apply=c", i - 1, " }\n");
  }
  return absl::StrCat(t, "ENTRY e { x = f32[4] parameter(0) ROOT r = f32[4] call(x), to_apply=c",
                      n - 1, " }\n");
}

// Parse, verify, print, proto round trip, plan, analyse and run: every
// walk must be iterative for these to finish (a recursion per instruction
// or per call level overflows an 8 MiB stack long before these sizes).
void ExpectLargeModuleWorks(const std::string& text, double want_first) {
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(hlo::PrintModule(*m).empty());
  absl::StatusOr<std::string> bytes = hlo::ModuleToProtoBytes(*m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = hlo::ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<hlo::MemoryAnalysis> a = hlo::AnalyzeMemory(*m);
  ASSERT_TRUE(a.ok()) << a.status();
  // A few 16-byte buffers at a time, however long the chain or deep the nesting.
  EXPECT_LE(a->peak.bytes, 256);
  hlo::Literal x(hlo::Shape(hlo::PrimitiveType::kF32, {4}));
  for (int i = 0; i < 4; ++i) x.SetFromDouble(i, i + 1.5);
  std::vector<hlo::Literal> args;
  args.push_back(x);
  absl::StatusOr<runtime::RunResult> r = runtime::RunModule(*m, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].GetAsDouble(0), want_first);
  EXPECT_EQ(r->devices[0].stats.peak_bytes, a->peak.bytes);
}

TEST(LargePrograms, LongChainParsesPlansAndRuns) {
  ExpectLargeModuleWorks(Chain(200000 / kScale), 1.5);  // an even number of negations
}

TEST(LargePrograms, DeepCallNestingParsesPlansAndRuns) {
  ExpectLargeModuleWorks(Calls(100000 / kScale), -1.5);  // the innermost negates once
}

TEST(HeapSimulator, PlacementAndOverlapCountAgreeWithBruteForce) {
  std::vector<hlo::LiveInterval> iv;
  uint32_t seed = 1;
  auto next = [&](int m) {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<int64_t>((seed >> 8) % m);
  };
  for (int i = 0; i < 300; ++i) {
    const int64_t start = next(200);
    iv.push_back({1 + next(64), start, start + 1 + next(30)});
  }
  int64_t pairs = 0;
  for (size_t i = 0; i < iv.size(); ++i) {
    for (size_t j = i + 1; j < iv.size(); ++j) {
      pairs += iv[i].start < iv[j].end && iv[j].start < iv[i].end;
    }
  }
  EXPECT_EQ(hlo::CountOverlappingPairs(iv), pairs);
  hlo::HeapPlacement p = hlo::BestFitPlacement(iv);
  // A valid placement: overlapping intervals never share heap bytes, and
  // the heap is at least the no-fragmentation peak.
  for (size_t i = 0; i < iv.size(); ++i) {
    for (size_t j = i + 1; j < iv.size(); ++j) {
      if (!(iv[i].start < iv[j].end && iv[j].start < iv[i].end)) continue;
      const bool apart = p.offsets[i] + iv[i].bytes <= p.offsets[j] ||
                         p.offsets[j] + iv[j].bytes <= p.offsets[i];
      EXPECT_TRUE(apart) << "intervals " << i << " and " << j << " share heap bytes";
    }
  }
  EXPECT_GE(p.heap_bytes, hlo::FindPeak(iv).bytes);
  // A long program of short-lived buffers: near-linear, and tight.
  std::vector<hlo::LiveInterval> chain;
  for (int i = 0; i < 200000 / kScale; ++i) chain.push_back({8, i, i + 2});
  EXPECT_EQ(hlo::CountOverlappingPairs(chain), 200000 / kScale - 1);
  EXPECT_EQ(hlo::BestFitPlacement(chain).heap_bytes, 16);
}

TEST(Loops, DeviceMemoryIsFlatWithoutAllocationRecords) {
  auto m = Parse(R"(HloModule count
    cond { c = s64[] parameter(0) lim = s64[] constant(20000) ROOT lt = pred[] compare(c, lim), direction=LT }
    body { b = s64[] parameter(0) one = s64[] constant(1) ROOT n = s64[] add(b, one) }
    ENTRY e { z = s64[] constant(0) ROOT w = s64[] while(z), condition=cond, body=body })");
  ASSERT_NE(m, nullptr);
  runtime::RunOptions options;
  options.record_allocations = false;
  auto r = runtime::RunModule(*m, {}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].GetAsInt64(0), 20000);
  EXPECT_TRUE(r->devices[0].records.empty());
  EXPECT_GT(r->devices[0].stats.num_allocs, 20000);
  // Recording on: every allocation and free is kept.
  options.record_allocations = true;
  r = runtime::RunModule(*m, {}, options);
  ASSERT_TRUE(r.ok());
  const int64_t records = static_cast<int64_t>(r->devices[0].records.size());
  EXPECT_GE(records, r->devices[0].stats.num_allocs);      // every allocation
  EXPECT_LE(records, 2 * r->devices[0].stats.num_allocs);  // and its free
  // The iteration limit names the loop.
  options.max_loop_iterations = 100;
  r = runtime::RunModule(*m, {}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("while loop %w (computation e)"), std::string::npos)
      << r.status();
}

TEST(Devices, ManyDevicesRunOnFewThreads) {
  const int n = 1024 / kScale;
  auto m2 = Parse(absl::StrCat("HloModule many, num_partitions=", n, R"(
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ENTRY e { pid = u32[] partition-id() c = f32[] convert(pid) bc = f32[2] broadcast(c), dimensions={}
      ROOT ar = f32[2] all-reduce(bc), channel_id=1, to_apply=add })"));
  ASSERT_NE(m2, nullptr);
  auto r = runtime::RunSpmd(*m2, std::vector<std::vector<hlo::Literal>>(n), {.num_threads = 2});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), static_cast<size_t>(n));
  const double want = n * (n - 1) / 2.0;
  for (int d = 0; d < n; ++d) EXPECT_EQ(r->outputs[d].GetAsDouble(1), want) << "device " << d;
}

}  // namespace
}  // namespace tpuoff
