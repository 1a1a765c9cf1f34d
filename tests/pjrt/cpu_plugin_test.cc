// The PJRT backend on the XLA CPU plugin, through its C++ API: plugin
// loading and its errors, argument checks, values against the emulator for
// a single-device and an SPMD module with collectives, and a compile error
// coming back as a Status. Registered only with the CPU plugin (tests/pjrt/).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/text/text_parser.h"
#include "runtime/emulator/executor.h"
#include "runtime/pjrt/pjrt_backend.h"

namespace tpuoff::runtime::pjrt {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<hlo::HloModule> Parse(const std::string& text) {
  auto m = hlo::ParseHloText(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

hlo::Literal F32(std::vector<int64_t> dims, std::vector<float> v) {
  return hlo::Literal::FromVector<float>(hlo::PrimitiveType::kF32, dims, v);
}

TEST(CpuPlugin, LoadsAndReportsItsApi) {
  absl::StatusOr<PluginInfo> p = LoadPlugin(DefaultCpuPluginPath());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->api_major, 0);
  EXPECT_GE(p->api_minor, 81);
}

TEST(CpuPlugin, LoadErrors) {
  EXPECT_EQ(LoadPlugin("/nonexistent/plugin.so").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadPlugin("").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PluginInfo> text = LoadPlugin(TPUOFF_SOURCE_DIR "/README.md");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr("cannot load"));
}

constexpr char kAddMul[] = R"(HloModule am
ENTRY %main (x: f32[2,3], y: f32[2,3]) -> (f32[2,3], f32[]) {
  %x = f32[2,3]{1,0} parameter(0)
  %y = f32[2,3]{1,0} parameter(1)
  %p = f32[2,3]{1,0} multiply(f32[2,3]{1,0} %x, f32[2,3]{1,0} %y)
  %z = f32[] constant(0)
  %t = f32[] reduce(f32[2,3]{1,0} %p, f32[] %z), dimensions={0,1}, to_apply=%add
  ROOT %r = (f32[2,3]{1,0}, f32[]) tuple(f32[2,3]{1,0} %p, f32[] %t)
}
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
})";

TEST(CpuPlugin, SingleDeviceMatchesTheEmulator) {
  auto m = Parse(kAddMul);
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<hlo::Literal>> args(1);
  args[0].push_back(F32({2, 3}, {1, 2, 3, 4, 5, 6}));
  args[0].push_back(F32({2, 3}, {0.5, -1, 2, 0.25, 3, -2}));
  absl::StatusOr<ExecuteResult> r = Execute(*m, args);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->platform, "cpu");
  ASSERT_EQ(r->outputs.size(), 2u);
  const std::vector<float> want = {0.5, -2, 6, 1, 15, -12};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(r->outputs[0].data<float>()[i], want[i]);
  EXPECT_FLOAT_EQ(r->outputs[1].data<float>()[0], 8.5f);
  absl::StatusOr<RunResult> emu = RunModule(*m, args[0]);
  ASSERT_TRUE(emu.ok());
  EXPECT_TRUE(emu->outputs[0] == r->outputs[0]);
}

TEST(CpuPlugin, ArgumentErrorsNameTheParameter) {
  auto m = Parse(kAddMul);
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<hlo::Literal>> args(1);
  args[0].push_back(F32({2, 3}, {1, 2, 3, 4, 5, 6}));
  args[0].push_back(F32({3, 2}, {1, 2, 3, 4, 5, 6}));
  absl::Status s = Execute(*m, args).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("argument 1 (%y)"));
  args[0].pop_back();
  EXPECT_THAT(Execute(*m, args).status().message(), HasSubstr("1 arguments for 2 parameters"));
  std::vector<std::vector<hlo::Literal>> two(2);
  EXPECT_EQ(Execute(*m, two).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuPlugin, SpmdModuleWithCollectivesRunsPerDevice) {
  auto m = Parse(R"(HloModule spmd, num_partitions=4
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (x: f32[2]) -> (f32[2], u32[]) {
  %x = f32[2]{0} parameter(0), sharding={devices=[4]<=[4]}
  %r = f32[2]{0} all-reduce(f32[2]{0} %x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add
  %p = u32[] partition-id()
  ROOT %t = (f32[2]{0}, u32[]) tuple(f32[2]{0} %r, u32[] %p)
})");
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<hlo::Literal>> args(4);
  for (int d = 0; d < 4; ++d) args[d].push_back(F32({2}, {1.0f * d, 10.0f * d}));
  absl::StatusOr<ExecuteResult> r = Execute(*m, args);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->num_devices, 4);
  ASSERT_EQ(r->outputs.size(), 8u);
  for (int d = 0; d < 4; ++d) {
    EXPECT_FLOAT_EQ(r->outputs[2 * d].data<float>()[0], 6);
    EXPECT_FLOAT_EQ(r->outputs[2 * d].data<float>()[1], 60);
    EXPECT_EQ(r->outputs[2 * d + 1].data<uint32_t>()[0], static_cast<uint32_t>(d));
  }
}

// A custom-call the CPU plugin does not know: a compile error, as a Status.
TEST(CpuPlugin, CompileErrorIsAStatus) {
  auto m = Parse(R"(HloModule cc
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  ROOT %c = f32[2]{0} custom-call(f32[2]{0} %x), custom_call_target="no_such_target_anywhere"
})");
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<hlo::Literal>> args(1);
  args[0].push_back(F32({2}, {1, 2}));
  absl::Status s = Execute(*m, args).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cc"));
}

}  // namespace
}  // namespace tpuoff::runtime::pjrt
