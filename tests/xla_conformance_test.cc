// HLO patterns found in real XLA/JAX output by the conformance harness
// (tools/xla_check), pinned here so the emulator keeps running them without
// Python: XLA:CPU's post-optimisation fusions (kind=kLoop/kCustom with JSON
// backend_config, YNNPACK's "__ynn_fusion" included, whose body is plain
// HLO), the wrapped reduce-window of a tiled row max, and a reduce whose init
// constant also feeds a broadcast in the same loop group. Expected values are
// hand-computed; every case runs with fusion on and off, 1 and 3 threads.
#include <gmock/gmock.h>

#include "hlo/text/text_printer.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime {
namespace {

using namespace ::tpuoff::runtime::testing;  // NOLINT
using hlo::Literal;

std::vector<Literal> RunAllWays(const std::string& text, const std::vector<Literal>& args) {
  auto m = Parse(text);
  if (m == nullptr) return {};
  const absl::Status verified = hlo::VerifyModule(*m);
  EXPECT_TRUE(verified.ok()) << verified;
  // The module XLA-style text prints must also re-parse to the same program.
  auto reparsed = Parse(hlo::PrintModule(*m));
  EXPECT_NE(reparsed, nullptr);
  std::vector<Literal> first;
  for (bool fusion : {true, false}) {
    for (int threads : {1, 3}) {
      RunOptions opts;
      opts.num_threads = threads;
      opts.disable_fusion = !fusion;
      auto r = RunModule(*m, args, opts);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return {};
      if (first.empty()) {
        first = std::move(r->outputs);
        continue;
      }
      for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_TRUE(first[i] == r->outputs[i]) << "output " << i << ", fusion " << fusion
                                               << ", threads " << threads;
      }
    }
  }
  return first;
}

TEST(XlaPatterns, ReduceInitConstantSharedWithABroadcast) {
  // Once crashed the emulator (the fused constant had no buffer): relu then
  // row sum, the 0 both the relu bound and the reduce's init.
  std::vector<Literal> got = RunAllWays(R"(HloModule shared_init
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[2,3] parameter(0)  c = f32[] constant(0)
  bc = f32[2,3] broadcast(c), dimensions={}
  m = f32[2,3] maximum(x, bc)
  ROOT r = f32[2] reduce(m, c), dimensions={1}, to_apply=add
})", {F32({2, 3}, {1, -2, 3, -4, 5, 0.5})});
  ASSERT_EQ(got.size(), 1u);
  ExpectNear(got[0], F32({2}, {4, 5.5}), 0, "relu row sum");
}

TEST(XlaPatterns, CpuPostOptimisationFusionsRunAsTheirBodies) {
  // Shapes of XLA:CPU's optimised GRPO module: a wrapped reduce-window (tile
  // maxima, V=70 padded 13 each side into 3 tiles of 32), a kLoop fusion with
  // outer_dimension_partitions, and a YNNPACK kCustom fusion reducing them.
  std::vector<Literal> got = RunAllWays(R"(HloModule jit_post_opt, is_scheduled=true
%max_f32 (p0: f32[], p1: f32[]) -> f32[] {
  %p0 = f32[] parameter(0)
  %p1 = f32[] parameter(1)
  ROOT %mx = f32[] maximum(%p0, %p1)
}
%wrapped_reduce-window_computation (param_0: f32[2,70], param_1: f32[]) -> f32[2,3] {
  %param_0 = f32[2,70]{1,0} parameter(0)
  %param_1 = f32[] parameter(1)
  ROOT %reduce-window.1 = f32[2,3]{1,0} reduce-window(%param_0, %param_1), window={size=1x32 stride=1x32 pad=0_0x13_13}, to_apply=%max_f32
}
%fused_computation (param_0.1: f32[2,3]) -> f32[2,3] {
  %param_0.1 = f32[2,3]{1,0} parameter(0)
  %two = f32[] constant(2)
  %b2 = f32[2,3]{1,0} broadcast(%two), dimensions={}
  ROOT %mul = f32[2,3]{1,0} multiply(%param_0.1, %b2)
}
%fused_computation.2 (param_0.2: f32[2,3], param_1.2: f32[]) -> f32[2] {
  %param_0.2 = f32[2,3]{1,0} parameter(0)
  %param_1.2 = f32[] parameter(1)
  ROOT %reduce_max.0 = f32[2]{0} reduce(%param_0.2, %param_1.2), dimensions={1}, to_apply=%max_f32
}
ENTRY %main.1 (logits: f32[2,70]) -> (f32[2,3], f32[2]) {
  %logits = f32[2,70]{1,0} parameter(0)
  %constant.1 = f32[] constant(-inf)
  %wrapped_reduce-window = f32[2,3]{1,0} fusion(%logits, %constant.1), kind=kLoop, calls=%wrapped_reduce-window_computation, backend_config={"outer_dimension_partitions":["2"]}
  %multiply_fusion = f32[2,3]{1,0} fusion(%wrapped_reduce-window), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/mul" stack_frame_id=3}
  %ynn_fusion.2 = f32[2]{0} fusion(%multiply_fusion, %constant.1), kind=kCustom, calls=%fused_computation.2, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  ROOT %tuple = (f32[2,3]{1,0}, f32[2]{0}) tuple(%multiply_fusion, %ynn_fusion.2)
})", {[] {
        std::vector<double> v(140);
        for (int i = 0; i < 140; ++i) v[i] = (i * 37) % 101 - 50;  // distinct, mixed signs
        return F32({2, 70}, v);
      }()});
  // Tiles over columns [0,19), [19,51), [51,70) of each row.
  std::vector<double> tiles(6, -1e9);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 70; ++c) {
      const int t = c < 19 ? 0 : c < 51 ? 1 : 2;
      tiles[r * 3 + t] = std::max(tiles[r * 3 + t], 2.0 * (((r * 70 + c) * 37) % 101 - 50));
    }
  }
  ASSERT_EQ(got.size(), 2u);
  ExpectNear(got[0], F32({2, 3}, tiles), 0, "tile maxima x2");
  ExpectNear(got[1], F32({2}, {std::max({tiles[0], tiles[1], tiles[2]}),
                                std::max({tiles[3], tiles[4], tiles[5]})}),
             0, "row max");
}

}  // namespace
}  // namespace tpuoff::runtime
