// Every module of tests/corpus runs on the emulator (zero inputs; SPMD
// modules on num_partitions devices) without error, and twice with equal
// bits; modules with custom-calls the emulator does not run fail with
// UNIMPLEMENTED naming the target.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/emulator/ops_lapack.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using hlo::Literal;

TEST(ExecutorCorpus, EveryCorpusModuleRuns) {
  const std::filesystem::path dir = std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests/corpus";
  int ran = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".hlo") continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto m = hlo::ParseHloText(text.str(), entry.path().string());
    ASSERT_TRUE(m.ok()) << m.status();
    const int64_t n = std::max<int64_t>(1, (*m)->num_partitions());
    std::vector<std::vector<Literal>> args(n);
    for (int64_t d = 0; d < n; ++d) {
      for (const hlo::HloInstruction* p : (*m)->entry()->parameters()) {
        args[d].emplace_back(p->shape());
      }
    }
    bool has_custom_call = false;
    for (const auto& c : (*m)->computations()) {
      for (const auto& x : c->instructions()) {
        has_custom_call |= x->opcode() == hlo::HloOpcode::kCustomCall && !hlo::IsPassThrough(*x) &&
                           !IsLapackTarget(x->attrs().custom_call_target) &&
                           x->attrs().custom_call_target != "TopK";
      }
    }
    auto r1 = RunSpmd(**m, args);
    if (has_custom_call) {  // a target the emulator does not run
      EXPECT_EQ(r1.status().code(), absl::StatusCode::kUnimplemented) << r1.status();
      EXPECT_NE(r1.status().message().find("custom-call target"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(r1.ok()) << r1.status();
    auto r2 = RunSpmd(**m, args);
    ASSERT_TRUE(r2.ok()) << r2.status();
    ASSERT_EQ(r1->outputs.size(), r2->outputs.size());
    for (size_t i = 0; i < r1->outputs.size(); ++i) {
      EXPECT_TRUE(r1->outputs[i] == r2->outputs[i]) << "output " << i;
    }
    ++ran;
  }
  EXPECT_GT(ran, 0);
}

}  // namespace
}  // namespace tpuoff::runtime
