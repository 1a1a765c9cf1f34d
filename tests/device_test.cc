// Device: HBM accounting, allocator statistics, records and OOM messages.
#include "runtime/device/device.h"

#include <gtest/gtest.h>

#include "runtime/device/trace.h"

namespace tpuoff::runtime {
namespace {

TEST(Device, TracksStatsAndRecords) {
  Trace trace;
  Device dev(3, 1000, Device::Clock::now(), &trace);
  auto a = dev.Allocate(400, "a");
  auto b = dev.Allocate(300, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(dev.stats().bytes_in_use, 700);
  dev.Free(*a, "b");
  auto c = dev.Allocate(500, "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(dev.stats().bytes_in_use, 800);
  EXPECT_EQ(dev.stats().peak_bytes, 800);
  EXPECT_EQ(dev.stats().num_allocs, 3);
  EXPECT_EQ(dev.stats().largest_alloc, 500);
  DeviceReport r = dev.Report();
  ASSERT_EQ(r.records.size(), 4u);
  EXPECT_EQ(r.records[2].kind, AllocationRecord::Kind::kFree);
  EXPECT_EQ(r.records[2].bytes, 400);
  EXPECT_EQ(r.records[3].bytes_in_use_after, 800);
  EXPECT_EQ(r.name, "TPU_3 (v6e)");
  EXPECT_EQ(trace.counters().size(), 4u);
  EXPECT_EQ(trace.counters().back().bytes_in_use, 800);
}

TEST(Device, ExceedingCapacityIsResourceExhausted) {
  Device dev(1, 1000, Device::Clock::now(), nullptr);
  ASSERT_TRUE(dev.Allocate(600, "big").ok());
  ASSERT_TRUE(dev.Allocate(100, "small").ok());
  auto r = dev.Allocate(301, "fusion.7");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(r.status().message()),
            "device 1: out of HBM while allocating 301B (301 bytes) for %fusion.7 "
            "(in use 700B (700 bytes) of 1000B hbm); largest live buffers: "
            "600B for %big, 100B for %small");
  EXPECT_EQ(dev.stats().bytes_in_use, 700);  // the failed request left no trace
  EXPECT_TRUE(dev.Allocate(300, "fits").ok());
}

TEST(Device, HumanBytesLikeXla) {
  EXPECT_EQ(HumanBytes(12), "12B");
  EXPECT_EQ(HumanBytes(1536), "1.50K");
  EXPECT_EQ(HumanBytes(32LL << 30), "32.00G");
}

}  // namespace
}  // namespace tpuoff::runtime
