// `tpuoff bench`'s cold-run pieces (tools/cli/bench_cold.h): the page floor
// measured on fresh memory, and its refusals.
#include "tools/cli/bench_cold.h"

#include <gtest/gtest.h>

namespace tpuoff::tools {
namespace {

TEST(BenchCold, ThePageFloorTimesFreshMemory) {
  const std::optional<double> t = TimeFreshPages(int64_t{64} << 20, 3);
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(*t, 0);
}

TEST(BenchCold, ThePageFloorRefusesWhatCannotBeMeasured) {
  EXPECT_FALSE(TimeFreshPages(0, 3).has_value());
  EXPECT_FALSE(TimeFreshPages(-4096, 3).has_value());
  EXPECT_FALSE(TimeFreshPages(4096, 0).has_value());
  // More than the host can back (64 PiB): no figure, not a crash.
  EXPECT_FALSE(TimeFreshPages(int64_t{1} << 56, 1).has_value());
}

}  // namespace
}  // namespace tpuoff::tools
