// tpuoff's model of XLA:TPU's HBM/VMEM placement on v6e
// (hlo/analysis/v6e_memory_spaces.h): hand-written live ranges with known
// answers (what fits the MSA budget, largest first, over time), and a real
// module. Its agreement with XLA:TPU itself is checked by
// tests/pjrt/tpu_compile_test.cc where libtpu is available.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

AllocatedBuffer Buf(BufferKind kind, int64_t tpu_bytes, int64_t start, int64_t end) {
  AllocatedBuffer b;
  b.kind = kind;
  b.bytes = tpu_bytes;
  b.tpu_bytes = tpu_bytes;
  b.start = start;
  b.end = end;
  return b;
}

TEST(V6eMemorySpaces, BudgetIsVmemLessTheScopedReserve) {
  V6eMemoryOptions o;
  EXPECT_EQ(o.vmem_bytes, 128 * kMiB);
  EXPECT_EQ(o.scoped_vmem_bytes, 32 * kMiB);
  EXPECT_EQ(o.msa_budget(), 96 * kMiB);
}

TEST(V6eMemorySpaces, TemporariesThatFitGoToVmem) {
  MemoryAnalysis a;
  a.buffers = {Buf(BufferKind::kArgument, 500 * kMiB, 0, 10),
               Buf(BufferKind::kOutput, 300 * kMiB, 2, 10),
               Buf(BufferKind::kTemp, 40 * kMiB, 3, 6), Buf(BufferKind::kTemp, 50 * kMiB, 4, 8)};
  V6eMemorySplit s = SplitV6eMemory(a);
  EXPECT_EQ(s.argument_bytes, 500 * kMiB);
  EXPECT_EQ(s.output_bytes, 300 * kMiB);
  EXPECT_EQ(s.hbm_temp_bytes, 0);
  EXPECT_EQ(s.hbm_bytes, 800 * kMiB);
  EXPECT_EQ(s.vmem_bytes, 90 * kMiB);
  EXPECT_EQ(s.num_vmem_buffers, 2);
  EXPECT_EQ(s.in_vmem, (std::vector<bool>{false, false, true, true}));
}

TEST(V6eMemorySpaces, LargestFirstUntilTheBudgetIsFull) {
  MemoryAnalysis a;
  // 60 and 50 MiB overlap at t=[4,6): 110 > 96, so the 50 MiB one (placed
  // second) stays in HBM; the 30 MiB one overlaps only the 60 (90 <= 96).
  // A 20 MiB one later, alone, fits. One of 100 MiB never fits.
  a.buffers = {Buf(BufferKind::kArgument, 10 * kMiB, 0, 20),
               Buf(BufferKind::kTemp, 50 * kMiB, 4, 8), Buf(BufferKind::kTemp, 60 * kMiB, 2, 6),
               Buf(BufferKind::kTemp, 30 * kMiB, 1, 3), Buf(BufferKind::kTemp, 20 * kMiB, 9, 12),
               Buf(BufferKind::kTemp, 100 * kMiB, 12, 14),
               Buf(BufferKind::kTemp, 5 * kMiB, 13, 15)};
  V6eMemorySplit s = SplitV6eMemory(a);
  EXPECT_EQ(s.in_vmem, (std::vector<bool>{false, false, true, true, true, false, true}));
  // HBM temporaries: 50 MiB over [4,8), 100 MiB over [12,14): peak 100.
  EXPECT_EQ(s.hbm_temp_bytes, 100 * kMiB);
  EXPECT_EQ(s.largest_hbm_temp, 100 * kMiB);
  EXPECT_EQ(s.num_hbm_temps, 2);
  EXPECT_EQ(s.hbm_bytes, 110 * kMiB);
  EXPECT_EQ(s.vmem_bytes, 90 * kMiB);
}

TEST(V6eMemorySpaces, SmallerBudgetSpillsMore) {
  MemoryAnalysis a;
  a.buffers = {Buf(BufferKind::kTemp, 8 * kMiB, 0, 4), Buf(BufferKind::kTemp, 8 * kMiB, 2, 6)};
  V6eMemoryOptions o;
  o.vmem_bytes = 48 * kMiB;  // budget 16 MiB: both fit
  EXPECT_EQ(SplitV6eMemory(a, o).hbm_temp_bytes, 0);
  o.vmem_bytes = 44 * kMiB;  // budget 12 MiB: the later one stays in HBM
  V6eMemorySplit s = SplitV6eMemory(a, o);
  EXPECT_EQ(s.in_vmem, (std::vector<bool>{true, false}));
  EXPECT_EQ(s.hbm_temp_bytes, 8 * kMiB);
}

TEST(V6eMemorySpaces, OnAModule) {
  // x (argument); e = exp(x) and n = -x live together; r = e * n (the
  // output, possibly in place of one of them).
  auto m = ParseHloText(R"(HloModule m
ENTRY %main (x: f32[1024,1024]) -> f32[1024,1024] {
  %x = f32[1024,1024]{1,0} parameter(0)
  %e = f32[1024,1024]{1,0} exponential(f32[1024,1024]{1,0} %x)
  %n = f32[1024,1024]{1,0} negate(f32[1024,1024]{1,0} %x)
  ROOT %r = f32[1024,1024]{1,0} multiply(f32[1024,1024]{1,0} %e, f32[1024,1024]{1,0} %n)
})");
  ASSERT_TRUE(m.ok()) << m.status();
  MemoryAnalysisOptions opts;
  opts.plan.enable_fusion = false;  // keep the temporaries
  absl::StatusOr<MemoryAnalysis> a = AnalyzeMemory(**m, opts);
  ASSERT_TRUE(a.ok()) << a.status();
  V6eMemorySplit s = SplitV6eMemory(*a);
  EXPECT_EQ(s.argument_bytes, 4 * kMiB);
  EXPECT_EQ(s.output_bytes, 4 * kMiB);
  EXPECT_GT(s.num_vmem_buffers, 0);
  EXPECT_EQ(s.hbm_temp_bytes, 0);
  EXPECT_EQ(s.hbm_bytes, 8 * kMiB);
  V6eMemoryOptions tiny;
  tiny.vmem_bytes = tiny.scoped_vmem_bytes + kMiB;  // nothing fits
  V6eMemorySplit t = SplitV6eMemory(*a, tiny);
  EXPECT_EQ(t.num_vmem_buffers, 0);
  // e or n (4 MiB each) left in HBM, or both.
  EXPECT_GE(t.hbm_temp_bytes, 4 * kMiB);
  EXPECT_LE(t.hbm_temp_bytes, 8 * kMiB);
  EXPECT_EQ(t.hbm_bytes, 8 * kMiB + t.hbm_temp_bytes);
}

}  // namespace
}  // namespace tpuoff::hlo
