// runtime/pjrt/program.h: what the PJRT backend sends a plugin, checked
// without a plugin: the CompileOptionsProto fields, the {manual} shardings of
// a per-device SPMD module, the entry layouts, and the module inside an
// optimised program.
#include "runtime/pjrt/program.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/text/text_parser.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_sharded.h"
#include "runtime/pjrt/pjrt_backend.h"
#if __has_include("proto/compile_options.pb.h")
#include "proto/compile_options.pb.h"
#include "proto/hlo.pb.h"
#else
#include "compile_options.pb.h"
#include "hlo.pb.h"
#endif

namespace tpuoff::runtime::pjrt {
namespace {

using ::testing::HasSubstr;

constexpr char kSpmd[] = R"(HloModule spmd, num_partitions=4
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %main (x: f32[2,3], y: f32[3]) -> (f32[2,3], f32[3]) {
  %x = f32[2,3]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %y = f32[3]{0} parameter(1)
  %r = f32[2,3]{1,0} all-reduce(f32[2,3]{1,0} %x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add
  ROOT %t = (f32[2,3]{1,0}, f32[3]{0}) tuple(f32[2,3]{1,0} %r, f32[3]{0} %y)
}
)";

xla::HloModuleProto Parse(const std::string& bytes) {
  xla::HloModuleProto p;
  EXPECT_TRUE(p.ParseFromString(bytes));
  return p;
}

TEST(PjrtProgram, PerDeviceSpmdModuleBecomesManual) {
  auto m = hlo::ParseHloText(kSpmd);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::string> bytes = PjrtProgramBytes(**m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const xla::HloModuleProto p = Parse(*bytes);
  int boundary = 0;
  for (const xla::HloComputationProto& c : p.computations()) {
    if (c.id() != p.entry_computation_id()) continue;
    for (const xla::HloInstructionProto& i : c.instructions()) {
      if (i.opcode() == "parameter") {
        ++boundary;
        ASSERT_TRUE(i.has_sharding()) << i.name();
        EXPECT_EQ(i.sharding().type(), xla::OpSharding::MANUAL) << i.name();
      } else if (i.id() == c.root_id()) {
        ++boundary;
        ASSERT_TRUE(i.has_sharding());
        EXPECT_EQ(i.sharding().type(), xla::OpSharding::TUPLE);
        ASSERT_EQ(i.sharding().tuple_shardings_size(), 2);
        for (const xla::OpSharding& s : i.sharding().tuple_shardings()) {
          EXPECT_EQ(s.type(), xla::OpSharding::MANUAL);
        }
      } else {
        EXPECT_FALSE(i.has_sharding()) << i.name();
      }
    }
  }
  EXPECT_EQ(boundary, 3);
}

// A partition-id nothing reads gets no sharding from XLA's propagation,
// and the partitioner refuses a non-manual one as ambiguous: every
// partition-id / replica-id goes as {manual}; so does a `Sharding`
// annotation without a sharding (a lowered global program keeps some),
// which XLA's propagation refuses with a RET_CHECK.
TEST(PjrtProgram, DeviceIndicesAndBareAnnotationsAreManual) {
  auto m = hlo::ParseHloText(R"(HloModule dead_pid, num_partitions=2
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), sharding={devices=[2]<=[2]}
  %pid = u32[] partition-id()
  %rid = u32[] replica-id()
  %a = f32[4]{0} custom-call(f32[4]{0} %x), custom_call_target="Sharding"
  ROOT %n = f32[4]{0} negate(f32[4]{0} %a), sharding={devices=[2]<=[2]}
}
)");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::string> bytes = PjrtProgramBytes(**m);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const xla::HloModuleProto p = Parse(*bytes);
  int seen = 0;
  for (const xla::HloComputationProto& c : p.computations()) {
    for (const xla::HloInstructionProto& i : c.instructions()) {
      if (i.opcode() != "partition-id" && i.opcode() != "replica-id" &&
          i.opcode() != "custom-call") {
        continue;
      }
      ++seen;
      ASSERT_TRUE(i.has_sharding()) << i.name();
      EXPECT_EQ(i.sharding().type(), xla::OpSharding::MANUAL) << i.name();
    }
  }
  EXPECT_EQ(seen, 3);
}

TEST(PjrtProgram, SingleDeviceModuleIsSentAsIs) {
  auto m = hlo::ParseHloText(R"(HloModule one
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0), sharding={replicated}
  ROOT %n = f32[2]{0} negate(f32[2]{0} %x)
})");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::string> bytes = PjrtProgramBytes(**m);
  ASSERT_TRUE(bytes.ok());
  const xla::HloModuleProto p = Parse(*bytes);
  EXPECT_EQ(p.computations(0).instructions(0).sharding().type(), xla::OpSharding::REPLICATED);
}

TEST(PjrtProgram, CompileOptionsFields) {
  auto m = hlo::ParseHloText(kSpmd);
  ASSERT_TRUE(m.ok());
  const std::string program = *PjrtProgramBytes(**m);
  absl::StatusOr<std::string> bytes =
      CompileOptionsBytes({.num_partitions = 4, .device_ids = {0, 1, 2, 3}}, program);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  xla::CompileOptionsProto o;
  ASSERT_TRUE(o.ParseFromString(*bytes));
  const xla::ExecutableBuildOptionsProto& b = o.executable_build_options();
  EXPECT_EQ(b.device_ordinal(), -1);
  EXPECT_EQ(b.num_replicas(), 1);
  EXPECT_EQ(b.num_partitions(), 4);
  EXPECT_TRUE(b.use_spmd_partitioning());
  EXPECT_FALSE(b.use_shardy_partitioner());
  ASSERT_EQ(b.device_assignment().computation_devices_size(), 4);
  EXPECT_EQ(b.device_assignment().replica_count(), 1);
  EXPECT_EQ(b.device_assignment().computation_devices(3).replica_device_ids(0), 3);
  // Entry layouts: two parameters and the tuple result, arrays with layouts.
  ASSERT_EQ(o.argument_layouts_size(), 2);
  EXPECT_EQ(o.argument_layouts(0).layout().minor_to_major_size(), 2);
  EXPECT_EQ(b.result_layout().tuple_shapes_size(), 2);
  EXPECT_FALSE(b.result_layout().has_layout());

  absl::StatusOr<std::string> one = CompileOptionsBytes({}, program);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(o.ParseFromString(*one));
  EXPECT_EQ(o.executable_build_options().num_partitions(), 1);
  EXPECT_FALSE(o.executable_build_options().use_spmd_partitioning());
  EXPECT_FALSE(o.executable_build_options().has_device_assignment());

  EXPECT_FALSE(CompileOptionsBytes({.num_partitions = 0}, program).ok());
  EXPECT_FALSE(CompileOptionsBytes({.num_partitions = 2, .device_ids = {0}}, program).ok());
  EXPECT_FALSE(CompileOptionsBytes({}, "not a module proto \xff\xff").ok());
}

// The fused kernel declares d_lm_head vocab-major; the compile options carry
// that layout to XLA.
TEST(PjrtProgram, FusedKernelSendsItsDLmHeadLayout) {
  kernels::KernelSpec spec;
  spec.kind = kernels::KernelKind::kGrpoFusedLinear;
  spec.mode = kernels::KernelMode::kFwdBwd;
  spec.config.batch = 1;
  spec.config.seq = 8;
  spec.config.vocab = 64;
  spec.config.hidden = 16;
  spec.config.block_size = 16;
  auto m = kernels::BuildKernel(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string program = *PjrtProgramBytes(**m);
  xla::CompileOptionsProto o;
  ASSERT_TRUE(o.ParseFromString(*CompileOptionsBytes({}, program)));
  const xla::ShapeProto& result = o.executable_build_options().result_layout();
  ASSERT_EQ(result.tuple_shapes_size(), 7);
  const xla::ShapeProto& d_lm_head = result.tuple_shapes(6);
  ASSERT_EQ(d_lm_head.dimensions_size(), 2);
  EXPECT_EQ(d_lm_head.dimensions(0), 16);
  EXPECT_EQ(d_lm_head.layout().minor_to_major(0), 0);
  EXPECT_EQ(d_lm_head.layout().minor_to_major(1), 1);
  EXPECT_EQ(result.tuple_shapes(5).layout().minor_to_major(0), 2);  // d_hidden row-major
}

TEST(PjrtProgram, OptimizedProgramFormats) {
  auto m = hlo::ParseHloText(kSpmd);
  ASSERT_TRUE(m.ok());
  const std::string module = *PjrtProgramBytes(**m);
  xla::HloModuleProtoWithConfig wrapped;
  ASSERT_TRUE(wrapped.mutable_hlo_module()->ParseFromString(module));
  std::string bytes;
  ASSERT_TRUE(wrapped.SerializeToString(&bytes));
  bytes += std::string("\x12\x03\x08\x01\x10", 5);  // field 2 (config): skipped
  absl::StatusOr<std::string> got = ModuleProtoFromProgram(bytes, "hlo_with_config");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Parse(*got).name(), "spmd");
  EXPECT_EQ(*ModuleProtoFromProgram(module, "hlo"), module);
  EXPECT_EQ(ModuleProtoFromProgram(module, "mlir").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ModuleProtoFromProgram("\xff\xff\xff", "hlo_with_config").status().code(),
            absl::StatusCode::kDataLoss);
}

// Without the PJRT C API header every entry point says how to build it.
TEST(PjrtBackend, UnavailableBuildSaysHow) {
  if (Available()) return;  // the real backend: tests/pjrt/ cover it
  absl::StatusOr<PluginInfo> p = LoadPlugin("/nonexistent");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p.status().message(), HasSubstr("tools/pjrt/setup_plugins.sh"));
}

}  // namespace
}  // namespace tpuoff::runtime::pjrt

namespace tpuoff::runtime::pjrt {
namespace {

// [2,3] stored column-major ({0,1}): element (i,j) at j*2+i.
TEST(PjrtProgram, PermuteToRowMajor) {
  hlo::Literal device(hlo::Shape(hlo::PrimitiveType::kF32, {2, 3}));
  hlo::Literal out(device.shape());
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) device.data<float>()[j * 2 + i] = 10 * i + j;
  }
  const std::vector<int64_t> m2m = {0, 1};
  PermuteToRowMajor(device, m2m, &out);
  const std::vector<float> want = {0, 1, 2, 10, 11, 12};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(out.data<float>()[k], want[k]) << k;
  // Rank 3, minor_to_major {1,2,0}: dim 1 fastest, then 2, then 0.
  hlo::Literal d3(hlo::Shape(hlo::PrimitiveType::kS32, {2, 3, 4}));
  hlo::Literal o3(d3.shape());
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) d3.data<int32_t>()[a * 12 + c * 3 + b] = 100 * a + 10 * b + c;
  const std::vector<int64_t> m3 = {1, 2, 0};
  PermuteToRowMajor(d3, m3, &o3);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(o3.data<int32_t>()[(a * 3 + b) * 4 + c], 100 * a + 10 * b + c);
}

}  // namespace
}  // namespace tpuoff::runtime::pjrt
