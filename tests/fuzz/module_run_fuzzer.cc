// libFuzzer target running small fuzzed modules end to end: parse (HLO
// text, or a binary HloModuleProto when the bytes are not text) -> verify -> plan (static memory analysis) -> run on the emulator
// under limits (at most 16 iterations per while loop, 2 s of wall time,
// 64 MiB of planned device memory, bounded work per op). Any input must
// end in OK or a clean error; a module that runs must run again to
// bit-identical outputs (the emulator is deterministic).
// Seeds: tests/fuzz/corpus_module_run (small modules: loops, calls,
// conditionals, collectives on 2-4 devices, reductions, fusion chains) and
// corpus_module_run_proto (a link to corpus_proto: the builder tests'
// modules as protos).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hlo/analysis/memory_analysis.h"
#include "hlo/ir/verifier.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_parser.h"
#include "runtime/emulator/executor.h"

namespace {

using namespace tpuoff;  // NOLINT

constexpr int64_t kMaxElements = int64_t{1} << 16;  // per array
constexpr int64_t kMaxWork = int64_t{1} << 22;      // per op, elements touched
constexpr int64_t kMaxPeakBytes = int64_t{64} << 20;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "module_run_fuzzer: %s\n", what.c_str());
  std::abort();
}

int64_t Elements(const hlo::Shape& s) {
  if (s.IsTuple()) {
    int64_t n = 0;
    for (const hlo::Shape& e : s.tuple_shapes()) n += Elements(e);
    return n;
  }
  return s.IsArray() ? s.num_elements() : 0;
}

// Small arrays and bounded work per op, so one run stays within the
// fuzzer's time and memory budget even under ASan.
bool SmallEnough(const hlo::HloModule& m) {
  if (m.num_partitions() > 4 || m.replica_count() > 1) return false;
  for (const auto& c : m.computations()) {
    if (c->instruction_count() > 2000) return false;
    for (const auto& x : c->instructions()) {
      const int64_t out = Elements(x->shape());
      if (out > kMaxElements) return false;
      int64_t in = 0;
      for (const hlo::HloInstruction* o : x->operands()) in += Elements(o->shape());
      if (in > 4 * kMaxElements) return false;
      // Ops whose work is not linear in their operands and result.
      int64_t work = in + out;
      if (x->opcode() == hlo::HloOpcode::kDot || x->opcode() == hlo::HloOpcode::kConvolution ||
          x->opcode() == hlo::HloOpcode::kReduceWindow) {
        work = out * std::max<int64_t>(1, in);
      }
      if (work > kMaxWork) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 14)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto module = hlo::ParseHloText(text, "fuzz.hlo");
  // Not HLO text: a binary HloModuleProto, which can carry attributes text
  // cannot spell (dimension numbers out of range, unsorted lists, ...).
  if (!module.ok()) module = hlo::ModuleFromProtoBytes(text);
  if (!module.ok() || !hlo::VerifyModule(**module).ok()) return 0;
  const hlo::HloModule& m = **module;
  if (!SmallEnough(m)) return 0;
  absl::StatusOr<hlo::MemoryAnalysis> analysis = hlo::AnalyzeMemory(m);
  if (!analysis.ok()) return 0;  // e.g. a computation calling itself
  if (analysis->peak.bytes > kMaxPeakBytes) return 0;

  const int64_t devices = std::max<int64_t>(1, m.num_partitions());
  std::vector<std::vector<hlo::Literal>> args(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (const hlo::HloInstruction* p : m.entry()->parameters()) {
      args[d].emplace_back(p->shape());  // zeros
    }
  }
  runtime::RunOptions options;
  options.num_threads = 2;
  options.max_loop_iterations = 16;
  options.timeout_seconds = 2;
  options.collective_timeout_seconds = 2;
  options.hbm_capacity_bytes = int64_t{1} << 30;
  options.record_allocations = false;
  absl::StatusOr<runtime::RunResult> first = runtime::RunSpmd(m, args, options);
  if (!first.ok()) return 0;
  absl::StatusOr<runtime::RunResult> second = runtime::RunSpmd(m, args, options);
  if (!second.ok()) {
    if (second.status().code() == absl::StatusCode::kDeadlineExceeded) return 0;  // loaded host
    Fail("a module that ran once failed the second time: " + second.status().ToString() +
         "\n" + text);
  }
  if (first->outputs.size() != second->outputs.size()) Fail("output counts differ\n" + text);
  for (size_t i = 0; i < first->outputs.size(); ++i) {
    if (!(first->outputs[i] == second->outputs[i])) {
      Fail("two runs gave different outputs (output " + std::to_string(i) + ")\n" + text);
    }
  }
  return 0;
}
