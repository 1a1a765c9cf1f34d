// tpuoff's model of XLA:TPU's HBM/VMEM placement on v6e
// (hlo/analysis/v6e_memory_spaces.h): hand-written live ranges with known
// answers (what fits the MSA budget, smallest first, over time), XLA:TPU's
// fusions of dot products and operand slices, and a real module. Its
// agreement with XLA:TPU itself is checked by tests/pjrt/tpu_compile_test.cc
// where libtpu is available.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/ir/status_macros.h"
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

// A parsed module and its static memory analysis with the planner's fusion
// off (every temporary its own buffer); the analysis points into the module.
struct Unfused {
  std::unique_ptr<HloModule> module;
  MemoryAnalysis analysis;
};

absl::StatusOr<Unfused> AnalyzeUnfused(const std::string& text) {
  Unfused u;
  ASSIGN_OR_RETURN(u.module, ParseHloText(text));
  MemoryAnalysisOptions opts;
  opts.plan.enable_fusion = false;
  ASSIGN_OR_RETURN(u.analysis, AnalyzeMemory(*u.module, opts));
  return u;
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

TEST(V6eMemorySpaces, SmallestFirstUntilTheBudgetIsFull) {
  MemoryAnalysis a;
  // Placed 5, 20, 30, 50, 60, 100 MiB. The 50 MiB one [4,8) is alone when
  // placed; the 60 MiB one [2,6) then overlaps it (110 > 96) and stays in
  // HBM although it would fit beside the 30 MiB one alone. The 100 MiB one
  // never fits (over the budget; and it overlaps the 5 MiB one).
  a.buffers = {Buf(BufferKind::kArgument, 10 * kMiB, 0, 20),
               Buf(BufferKind::kTemp, 50 * kMiB, 4, 8), Buf(BufferKind::kTemp, 60 * kMiB, 2, 6),
               Buf(BufferKind::kTemp, 30 * kMiB, 1, 3), Buf(BufferKind::kTemp, 20 * kMiB, 9, 12),
               Buf(BufferKind::kTemp, 100 * kMiB, 12, 14),
               Buf(BufferKind::kTemp, 5 * kMiB, 13, 15)};
  V6eMemorySplit s = SplitV6eMemory(a);
  EXPECT_EQ(s.in_vmem, (std::vector<bool>{false, true, false, true, true, false, true}));
  // HBM temporaries: 60 MiB over [2,6), 100 MiB over [12,14): peak 100.
  EXPECT_EQ(s.hbm_temp_bytes, 100 * kMiB);
  EXPECT_EQ(s.largest_hbm_temp, 100 * kMiB);
  EXPECT_EQ(s.num_hbm_temps, 2);
  EXPECT_EQ(s.hbm_bytes, 110 * kMiB);
  EXPECT_EQ(s.vmem_bytes, 50 * kMiB);
}

TEST(V6eMemorySpaces, ABufferOfExactlyTheBudgetNeedsTheWholeBudget) {
  MemoryAnalysis a;
  // 96 MiB alone fits; beside a 64 KiB row vector live at the same time it
  // does not (smaller buffers are placed first).
  a.buffers = {Buf(BufferKind::kTemp, 96 * kMiB, 0, 10)};
  EXPECT_EQ(SplitV6eMemory(a).hbm_temp_bytes, 0);
  a.buffers.push_back(Buf(BufferKind::kTemp, 64 << 10, 3, 4));
  V6eMemorySplit s = SplitV6eMemory(a);
  EXPECT_EQ(s.in_vmem, (std::vector<bool>{false, true}));
  EXPECT_EQ(s.hbm_temp_bytes, 96 * kMiB);
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

TEST(V6eMemorySpaces, XlaTpuFusesDotProductsIntoTheirAddAndSlicesIntoTheirDots) {
  // z = h·tile is read by an exponential (kept); p = g·tileᵀ only by the
  // accumulating add, which runs in place over the accumulator (fused:
  // XLA:TPU's output fusion); the dynamic-slice
  // tile only by dots (fused: the dots read its window of w); u, a slice
  // also read by a negate, is kept.
  absl::StatusOr<Unfused> u = AnalyzeUnfused(R"(HloModule m
ENTRY %main (h: bf16[256,512], w: bf16[512,4096], acc: f32[256,512]) -> (f32[256,512], f32[512,256]) {
  %h = bf16[256,512]{1,0} parameter(0)
  %w = bf16[512,4096]{1,0} parameter(1)
  %acc = f32[256,512]{1,0} parameter(2)
  %c0 = s32[] constant(0)
  %c1024 = s32[] constant(1024)
  %tile = bf16[512,1024]{1,0} dynamic-slice(bf16[512,4096]{1,0} %w, s32[] %c0, s32[] %c1024), dynamic_slice_sizes={512,1024}
  %z = f32[256,1024]{1,0} dot(bf16[256,512]{1,0} %h, bf16[512,1024]{1,0} %tile), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %g = f32[256,1024]{1,0} exponential(f32[256,1024]{1,0} %z)
  %p = f32[256,512]{1,0} dot(f32[256,1024]{1,0} %g, bf16[512,1024]{1,0} %tile), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %accn = f32[256,512]{1,0} negate(f32[256,512]{1,0} %acc)
  %a = f32[256,512]{1,0} add(f32[256,512]{1,0} %accn, f32[256,512]{1,0} %p)
  %u = bf16[512,256]{1,0} slice(bf16[512,4096]{1,0} %w), slice={[0:512], [0:256]}
  %nu = bf16[512,256]{1,0} negate(bf16[512,256]{1,0} %u)
  %v = f32[512,256]{1,0} convert(bf16[512,256]{1,0} %nu)
  ROOT %r = (f32[256,512]{1,0}, f32[512,256]{1,0}) tuple(f32[256,512]{1,0} %a, f32[512,256]{1,0} %v)
})");
  ASSERT_TRUE(u.ok()) << u.status();
  const MemoryAnalysis* a = &u->analysis;
  std::vector<std::string> fused;
  for (const AllocatedBuffer& b : a->buffers) {
    if (AbsorbedByXlaTpuDot(b)) fused.push_back(b.instruction->name());
  }
  EXPECT_EQ(fused, (std::vector<std::string>{"tile", "p"}));
  V6eMemorySplit s = SplitV6eMemory(*a);
  EXPECT_EQ(s.num_fused, 2);
  int placed = 0;
  for (size_t i = 0; i < a->buffers.size(); ++i) {
    const HloInstruction* x = a->buffers[i].instruction;
    if (x != nullptr && (x->name() == "tile" || x->name() == "p")) {
      EXPECT_FALSE(s.in_vmem[i]);
    }
    if (s.in_vmem[i]) ++placed;
  }
  EXPECT_EQ(placed, s.num_vmem_buffers);
}

TEST(V6eMemorySpaces, ADotProductTheAddWritesOverIsKept) {
  // a = acc + p runs in place over p (acc is an argument, borrowed): p's
  // buffer then holds a too, and stays.
  absl::StatusOr<Unfused> u = AnalyzeUnfused(R"(HloModule m
ENTRY %main (g: f32[256,1024], w: f32[512,1024], acc: f32[256,512]) -> f32[256,512] {
  %g = f32[256,1024]{1,0} parameter(0)
  %w = f32[512,1024]{1,0} parameter(1)
  %acc = f32[256,512]{1,0} parameter(2)
  %p = f32[256,512]{1,0} dot(f32[256,1024]{1,0} %g, f32[512,1024]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %a = f32[256,512]{1,0} add(f32[256,512]{1,0} %acc, f32[256,512]{1,0} %p)
  ROOT %n = f32[256,512]{1,0} negate(f32[256,512]{1,0} %a)
})");
  ASSERT_TRUE(u.ok()) << u.status();
  const MemoryAnalysis* a = &u->analysis;
  bool seen = false;
  for (const AllocatedBuffer& b : a->buffers) {
    if (b.instruction->name() != "p") continue;
    seen = true;
    EXPECT_TRUE(b.written_over);
    EXPECT_FALSE(AbsorbedByXlaTpuDot(b));
  }
  EXPECT_TRUE(seen);
}

TEST(V6eMemorySpaces, OnAModule) {
  // x (argument); e = exp(x) and n = -x live together; r = e * n (the
  // output, possibly in place of one of them).
  absl::StatusOr<Unfused> u = AnalyzeUnfused(R"(HloModule m
ENTRY %main (x: f32[1024,1024]) -> f32[1024,1024] {
  %x = f32[1024,1024]{1,0} parameter(0)
  %e = f32[1024,1024]{1,0} exponential(f32[1024,1024]{1,0} %x)
  %n = f32[1024,1024]{1,0} negate(f32[1024,1024]{1,0} %x)
  ROOT %r = f32[1024,1024]{1,0} multiply(f32[1024,1024]{1,0} %e, f32[1024,1024]{1,0} %n)
})");
  ASSERT_TRUE(u.ok()) << u.status();
  const MemoryAnalysis* a = &u->analysis;
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
