// Row chains (runtime/emulator/row_chain.h): which steps the planner groups, and that
// running a chain chunk of rows by chunk of rows changes neither results
// (bit for bit, any thread count) nor the simulated HBM figures.
#include <cstring>

#include "runtime/emulator/plan.h"
#include "tests/executor_test_util.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

Literal Wave(int64_t rows, int64_t cols) {
  Literal l(hlo::Shape(PrimitiveType::kF32, {rows, cols}));
  for (int64_t i = 0; i < rows * cols; ++i) {
    l.data<float>()[i] = static_cast<float>(std::sin(i * 0.37) * 6 + (i % 7));
  }
  return l;
}

std::vector<const RowChain*> Chains(const ModulePlan& plan) {
  std::vector<const RowChain*> out;
  const ComputationPlan& entry = plan.entry();
  for (int i = 0; i < entry.num_steps(); ++i) {
    if (const RowChain* c = plan.chain(entry, i)) out.push_back(c);
  }
  return out;
}

TEST(RowChain, SoftmaxRunsAsOneChain) {
  const int64_t rows = 40, cols = 3000;
  auto m = Parse(SoftmaxModule(rows, cols));
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<const RowChain*> chains = Chains(**plan);
  ASSERT_EQ(chains.size(), 1u);
  const RowChain& c = *chains[0];
  EXPECT_EQ(c.rows, rows);
  // Both reduces and both elementwise loops, 3000 elements per row each.
  EXPECT_EQ(c.units_per_row.size(), 4u);
  EXPECT_EQ(c.units_per_row.front(), 1);  // the max reduce: one segment per row
  EXPECT_EQ(c.units_per_row.back(), cols);  // the division: a row of elements
  EXPECT_EQ(c.rows_per_chunk, (int64_t{1} << 16) / cols);
  // Without fusion there is nothing to chain.
  auto unfused = ModulePlan::Build(*m, hlo::PlanOptions{.enable_fusion = false});
  ASSERT_TRUE(unfused.ok());
  EXPECT_TRUE(Chains(**unfused).empty());
  auto off = ModulePlan::Build(*m, {}, /*row_chains=*/false);
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(Chains(**off).empty());
}

TEST(RowChain, ResultsAndPeaksMatchStepByStep) {
  for (bool other_row_max : {false, true}) {
    auto m = Parse(SoftmaxModule(37, 5000, other_row_max));
    ASSERT_NE(m, nullptr);
    Literal x = Wave(37, 5000);
    RunOptions plain;
    plain.disable_row_chains = true;
    auto want = RunModule(*m, {x}, plain);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int threads : {1, 2, 3}) {
      RunOptions o;
      o.num_threads = threads;
      auto got = RunModule(*m, {x}, o);
      ASSERT_TRUE(got.ok()) << got.status();
      SCOPED_TRACE(std::string(other_row_max ? "other row max" : "own row max") +
                   " threads " + std::to_string(threads));
      ExpectSameRun(*got, *want);
    }
  }
}

TEST(RowChain, ReadingAnotherRowOfAChainValueEndsTheChain) {
  // The subtraction reads the max of row rows-1-r: the max reduce must have
  // finished every row first, so it cannot share a chain with it.
  auto m = Parse(SoftmaxModule(16, 1000, /*other_row_max=*/true));
  ASSERT_NE(m, nullptr);
  auto plan = ModulePlan::Build(*m);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ComputationPlan& entry = (*plan)->entry();
  for (const RowChain* c : Chains(**plan)) {
    for (int i = c->first; i <= c->last; ++i) {
      const hlo::Step& s = entry.steps[i];
      for (const hlo::HloInstruction* r : s.roots) EXPECT_NE(r->name(), "m") << s.name;
      EXPECT_NE(s.instr->name(), "m") << s.name;
    }
  }
  // The sum reduce and the division still chain.
  ASSERT_EQ(Chains(**plan).size(), 1u);
}

// The GRPO kernels, whose loop bodies hold the chains that matter, on every
// output and per-device peak, unsharded and vocab-sharded.
TEST(RowChain, GrpoKernelsMatchStepByStep) {
  for (const char* kernel : {"grpo_tiled", "grpo_reference", "entropy_tiled"}) {
    for (const char* dtype : {"f32", "bf16"}) {
      tools::KernelFlags k;
      k.kernel = kernel;
      k.mode = k.kernel == "entropy_tiled" ? "fwd" : "fwd_bwd";
      k.batch = 2;
      k.seq = 24;
      k.vocab = 3001;
      k.block_size = 512;
      k.logits_dtype = dtype;
      auto module = tools::BuildKernelModule(k);
      ASSERT_TRUE(module.ok()) << module.status();
      auto plan = ModulePlan::Build(**module);
      ASSERT_TRUE(plan.ok()) << plan.status();
      int chains = 0;
      for (const hlo::ComputationPlan* c : (*plan)->buffers().all()) {
        for (int i = 0; i < c->num_steps(); ++i) chains += (*plan)->chain(*c, i) != nullptr;
      }
      EXPECT_GT(chains, 0) << kernel;
      auto inputs = tools::MakeRandomInputs(*(*module)->entry(), tools::RandomInputOptions());
      ASSERT_TRUE(inputs.ok()) << inputs.status();
      RunOptions plain;
      plain.disable_row_chains = true;
      auto want = RunModule(**module, *inputs, plain);
      ASSERT_TRUE(want.ok()) << want.status();
      for (int threads : {1, 2}) {
        RunOptions o;
        o.num_threads = threads;
        auto got = RunModule(**module, *inputs, o);
        ASSERT_TRUE(got.ok()) << got.status();
        SCOPED_TRACE(std::string(kernel) + " " + dtype + " threads " + std::to_string(threads));
        ExpectSameRun(*got, *want);
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::runtime
