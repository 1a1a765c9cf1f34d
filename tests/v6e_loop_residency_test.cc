// The loop-residency part of tpuoff's v6e memory model
// (hlo/analysis/v6e_loop_residency.h): an argument read whole by every
// iteration of a loop is kept in VMEM for the loop, one read a slice per
// iteration is not; inner loops count times their trip counts; and a
// resident argument takes VMEM the loop's temporaries then do not get.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/v6e_loop_residency.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

MemoryAnalysis Analyze(const std::string& text) {
  auto m = ParseHloText(text);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  static std::vector<std::unique_ptr<HloModule>> keep;  // the analysis points into it
  keep.push_back(std::move(*m));
  absl::StatusOr<MemoryAnalysis> a = AnalyzeMemory(*keep.back());
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : MemoryAnalysis{};
}

// Four vocab steps: each reads all of h [512,512] (1 MiB, by a dot) and one
// [512,1024] tile of w [512,4096] (8 MiB), and accumulates exp(h·tile).
constexpr char kTileLoop[] = R"(HloModule tiles
cond { cp = (s32[], f32[512,512], f32[512,4096], f32[512,1024]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0 n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT }
body { bp = (s32[], f32[512,512], f32[512,4096], f32[512,1024]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  h = f32[512,512] get-tuple-element(bp), index=1
  w = f32[512,4096] get-tuple-element(bp), index=2
  acc = f32[512,1024] get-tuple-element(bp), index=3
  c0 = s32[] constant(0) c1024 = s32[] constant(1024) v0 = s32[] multiply(i, c1024)
  t = f32[512,1024] dynamic-slice(w, c0, v0), dynamic_slice_sizes={512,1024}
  z = f32[512,1024] dot(h, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[512,1024] exponential(z)
  a = f32[512,1024] add(acc, e)
  one = s32[] constant(1) j = s32[] add(i, one)
  ROOT bt = (s32[], f32[512,512], f32[512,4096], f32[512,1024]) tuple(j, h, w, a) }
ENTRY e { h = f32[512,512] parameter(0) w = f32[512,4096] parameter(1)
  z = s32[] constant(0) f0 = f32[] constant(0)
  acc0 = f32[512,1024] broadcast(f0), dimensions={}
  s = (s32[], f32[512,512], f32[512,4096], f32[512,1024]) tuple(z, h, w, acc0)
  loop = (s32[], f32[512,512], f32[512,4096], f32[512,1024]) while(s), condition=cond, body=body
  ROOT r = f32[512,1024] get-tuple-element(loop), index=3 })";

TEST(V6eLoopResidency, AnArgumentReadWholeEachIterationIsResident) {
  MemoryAnalysis a = Analyze(kTileLoop);
  std::vector<V6eLoopResident> r = FindV6eLoopResidents(a);
  ASSERT_EQ(r.size(), 1u);
  const AllocatedBuffer& h = a.buffers[r[0].buffer];
  EXPECT_EQ(h.instruction->name(), "h");
  EXPECT_EQ(h.kind, BufferKind::kArgument);
  EXPECT_EQ(r[0].loop->name(), "loop");
  EXPECT_EQ(r[0].bytes_per_trip, kMiB);  // all of h, once; w only 2 of its 8 MiB
  EXPECT_EQ(r[0].bytes, h.tpu_bytes);
  EXPECT_LT(r[0].start, r[0].end);
  // Every temporary of the body lives within the loop's range.
  for (const AllocatedBuffer& b : a.buffers) {
    if (b.computation != nullptr && b.computation->name() == "body") {
      EXPECT_GE(b.start, r[0].start) << b.instruction->name();
      EXPECT_LE(b.end, r[0].end) << b.instruction->name();
    }
  }
}

TEST(V6eLoopResidency, TheResidentTakesVmemFromTheTemporaries) {
  MemoryAnalysis a = Analyze(kTileLoop);
  V6eMemoryOptions o;
  o.loop_residents = false;
  const V6eMemorySplit without = SplitV6eMemory(a, o);
  o.loop_residents = true;
  const V6eMemorySplit with = SplitV6eMemory(a, o);
  EXPECT_EQ(without.num_loop_residents, 0);
  EXPECT_EQ(with.num_loop_residents, 1);
  EXPECT_EQ(without.hbm_temp_bytes, 0);
  EXPECT_EQ(with.hbm_temp_bytes, 0);  // 96 MiB hold everything
  EXPECT_EQ(with.vmem_bytes, without.vmem_bytes + kMiB);
  // A budget that holds the loop's temporaries only without h: with h
  // resident, one 2 MiB temporary of the loop stays in HBM.
  o.vmem_bytes = o.scoped_vmem_bytes + without.vmem_bytes;
  o.loop_residents = false;
  EXPECT_EQ(SplitV6eMemory(a, o).hbm_temp_bytes, 0);
  o.loop_residents = true;
  const V6eMemorySplit tight = SplitV6eMemory(a, o);
  EXPECT_EQ(tight.num_loop_residents, 1);
  EXPECT_EQ(tight.hbm_temp_bytes, 2 * kMiB);
  EXPECT_EQ(tight.hbm_bytes, tight.argument_bytes + tight.output_bytes + 2 * kMiB);
  // Too small for h itself: it is not resident, nothing changes.
  o.vmem_bytes = o.scoped_vmem_bytes + kMiB / 2;
  EXPECT_EQ(SplitV6eMemory(a, o).num_loop_residents, 0);
}

// Two vocab steps over w [512,2048]; in each, an inner loop over four row
// chunks [128,512] of h [512,512]: one outer iteration reads all of h,
// one inner iteration a quarter of it.
constexpr char kChunkLoops[] = R"(HloModule chunks
icond { cp = (s32[], f32[512,512], f32[512,1024], f32[512,1024]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0 n = s32[] constant(4)
  ROOT lt = pred[] compare(ci, n), direction=LT }
ibody { bp = (s32[], f32[512,512], f32[512,1024], f32[512,1024]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  h = f32[512,512] get-tuple-element(bp), index=1
  t = f32[512,1024] get-tuple-element(bp), index=2
  acc = f32[512,1024] get-tuple-element(bp), index=3
  c0 = s32[] constant(0) c128 = s32[] constant(128) r0 = s32[] multiply(i, c128)
  hc = f32[128,512] dynamic-slice(h, r0, c0), dynamic_slice_sizes={128,512}
  z = f32[128,1024] dot(hc, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cur = f32[128,1024] dynamic-slice(acc, r0, c0), dynamic_slice_sizes={128,1024}
  s = f32[128,1024] add(cur, z)
  a = f32[512,1024] dynamic-update-slice(acc, s, r0, c0)
  one = s32[] constant(1) j = s32[] add(i, one)
  ROOT bt = (s32[], f32[512,512], f32[512,1024], f32[512,1024]) tuple(j, h, t, a) }
ocond { cp = (s32[], f32[512,512], f32[512,2048], f32[512,1024]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0 n = s32[] constant(2)
  ROOT lt = pred[] compare(ci, n), direction=LT }
obody { bp = (s32[], f32[512,512], f32[512,2048], f32[512,1024]) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  h = f32[512,512] get-tuple-element(bp), index=1
  w = f32[512,2048] get-tuple-element(bp), index=2
  acc = f32[512,1024] get-tuple-element(bp), index=3
  c0 = s32[] constant(0) c1024 = s32[] constant(1024) v0 = s32[] multiply(i, c1024)
  t = f32[512,1024] dynamic-slice(w, c0, v0), dynamic_slice_sizes={512,1024}
  is = (s32[], f32[512,512], f32[512,1024], f32[512,1024]) tuple(c0, h, t, acc)
  inner = (s32[], f32[512,512], f32[512,1024], f32[512,1024]) while(is), condition=icond, body=ibody
  a = f32[512,1024] get-tuple-element(inner), index=3
  one = s32[] constant(1) j = s32[] add(i, one)
  ROOT bt = (s32[], f32[512,512], f32[512,2048], f32[512,1024]) tuple(j, h, w, a) }
ENTRY e { h = f32[512,512] parameter(0) w = f32[512,2048] parameter(1)
  z = s32[] constant(0) f0 = f32[] constant(0)
  acc0 = f32[512,1024] broadcast(f0), dimensions={}
  s = (s32[], f32[512,512], f32[512,2048], f32[512,1024]) tuple(z, h, w, acc0)
  outer = (s32[], f32[512,512], f32[512,2048], f32[512,1024]) while(s), condition=ocond, body=obody
  ROOT r = f32[512,1024] get-tuple-element(outer), index=3 })";

TEST(V6eLoopResidency, InnerLoopsCountTimesTheirTrips) {
  MemoryAnalysis a = Analyze(kChunkLoops);
  std::vector<V6eLoopResident> r = FindV6eLoopResidents(a);
  // h for the outer loop only (4 trips x 256 KiB); w never (1 of 4 MiB).
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(a.buffers[r[0].buffer].instruction->name(), "h");
  EXPECT_EQ(r[0].loop->name(), "outer");
  EXPECT_EQ(r[0].bytes_per_trip, kMiB);
}

TEST(V6eLoopResidency, NoLoopNoResident) {
  MemoryAnalysis a = Analyze(R"(HloModule flat
ENTRY e { x = f32[512,512] parameter(0) y = f32[512,512] exponential(x)
  ROOT r = f32[512,512] add(x, y) })");
  EXPECT_TRUE(FindV6eLoopResidents(a).empty());
}

}  // namespace
}  // namespace tpuoff::hlo
