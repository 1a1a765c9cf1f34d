// `tpuoff plan`'s search (tools/cli/planner.h) against brute force on a small
// space: for every configuration, every batch up to one past its answer is
// analysed; the answer is each configuration's largest fitting batch, the
// overall answer the largest of those, and among configurations reaching it
// none is predicted faster. Peaks must be what `tpuoff memory` reports.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "tests/sanitizer.h"
#include "tools/cli/planner.h"

namespace tpuoff::tools {
namespace {

PlanRequest SmallRequest() {
  PlanRequest r;
  r.hidden = 64;
  r.vocab = 3000;
  r.seq = 16;
  r.mesh = "4";
  r.logits_dtype = "bf16";
  r.hbm_gib = 2.0 / 1024;  // 2 MiB per device: batches in the tens to hundreds
  r.block_sizes = {512, 2048};
  r.token_chunks = {std::nullopt, 32};
  r.max_batch = 4096;
  return r;
}

TEST(Planner, NeverBeatenByAConfigurationOfItsSpace) {
  for (int64_t step : {1, 3}) {
    // Under AddressSanitizer the brute force (each batch of each
    // configuration planned) takes minutes: there only the batch step 3.
    if (tpuoff::testing::kUnderAddressSanitizer && step == 1) continue;
    PlanRequest r = SmallRequest();
    r.batch_step = step;
    absl::StatusOr<PlanResult> result = SearchPlan(r);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->best.has_value());
    const int64_t capacity = HbmCapacityBytes(r.hbm_gib);
    absl::StatusOr<std::vector<PlanConfig>> all = PlanConfigs(r);
    ASSERT_TRUE(all.ok()) << all.status();
    const std::vector<PlanConfig>& configs = *all;
    ASSERT_EQ(configs.size(), result->candidates.size());
    int64_t overall = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
      // Brute force: every multiple of the step, until 64 in a row neither
      // build nor fit.
      int64_t best = 0;
      int64_t misses = 0;
      for (int64_t b = step; b <= r.max_batch && misses < 64; b += step) {
        absl::StatusOr<int64_t> peak = PlanPeakBytes(configs[i], b);
        if (peak.ok() && *peak <= capacity) {
          best = b;
          misses = 0;
        } else {
          ++misses;
        }
      }
      EXPECT_EQ(result->candidates[i].batch, best)
          << "config " << i << " " << configs[i].kernel.kernel << " " << configs[i].shard.shard
          << " block " << configs[i].kernel.block_size;
      overall = std::max(overall, best);
    }
    EXPECT_EQ(result->best->batch, overall);
    EXPECT_EQ(result->best->batch % step, 0);
    // No configuration with the same batch is predicted faster.
    for (size_t i = 0; i < configs.size(); ++i) {
      if (result->candidates[i].batch != overall) continue;
      absl::StatusOr<double> t = PlanPredictedSeconds(configs[i], overall);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_GE(*t, result->best->predicted_seconds) << "config " << i;
    }
    // The answer's peak is what the memory analysis says, within capacity,
    // and the next step does not fit.
    absl::StatusOr<int64_t> peak = PlanPeakBytes(result->best->config, result->best->batch);
    ASSERT_TRUE(peak.ok());
    EXPECT_EQ(*peak, result->best->peak_bytes);
    EXPECT_LE(*peak, capacity);
    absl::StatusOr<int64_t> next = PlanPeakBytes(result->best->config, result->best->batch + step);
    EXPECT_TRUE(!next.ok() || *next > capacity);
  }
}

TEST(Planner, NothingFitsGivesNoAnswer) {
  PlanRequest r = SmallRequest();
  r.hbm_gib = 1.0 / (1 << 20);  // 1 KiB
  absl::StatusOr<PlanResult> result = SearchPlan(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->best.has_value());
}

}  // namespace
}  // namespace tpuoff::tools
