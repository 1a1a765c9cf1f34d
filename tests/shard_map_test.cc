// hlo::ShardMap: the per-device module a small shard_map produces (text in,
// text out: every collective as XLA prints it, shardings, header), its global
// form, its values on the emulator's mesh, the sharding arithmetic of
// hlo/spmd/sharding_util.h and the global <-> per-device split of
// runtime/device/sharding_io.h, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/spmd/shard_map.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/verifier.h"
#include "runtime/emulator/executor.h"
#include "runtime/device/sharding_io.h"

namespace tpuoff::hlo {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// x f32[8,2] split along rows over 4 devices, w f32[2] replicated. The body
// uses every collective once: psum and pmax of the column sums, all_gather
// then psum_scatter of x, a ring ppermute, and axis_index.
absl::StatusOr<std::unique_ptr<HloModule>> BuildSmall(bool global_form) {
  const std::vector<ShardMapInput> in = {
      {"x", Shape(PrimitiveType::kF32, {8, 2}), PartitionSpec::Split(0)},
      {"w", Shape(PrimitiveType::kF32, {2}), PartitionSpec::Replicated()}};
  const std::vector<ShardMapOutput> out = {
      {"total", PartitionSpec::Replicated()},
      {"peak", PartitionSpec::Replicated()},
      {"scattered", PartitionSpec::Split(0)},
      {"shifted", PartitionSpec::Split(0)},
      {"index", PartitionSpec::Split(0)}};
  auto body = [](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    XlaBuilder* b = ctx.builder();
    XlaOp col_sums = b->Reduce(args[0], b->ConstantF32(0), HloOpcode::kAdd, {0});
    XlaOp total = Add(ctx.Psum(col_sums), args[1]);
    XlaOp peak = ctx.Pmax(col_sums);
    XlaOp scattered = ctx.PsumScatter(ctx.AllGather(args[0], 0), 0);
    XlaOp shifted = ctx.Ppermute(args[0], {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
    XlaOp index = b->Reshape(ctx.AxisIndex(), {1});
    return std::vector<XlaOp>{total, peak, scattered, shifted, index};
  };
  ShardMapOptions options;
  options.global_form = global_form;
  return ShardMap("small", Mesh{4}, in, out, body, options);
}

// The entry computation as XLA prints it (checked against XLA: the
// harness's `xla_run.py run` executes this module on 4 CPU devices and
// gets the values of RunsOnTheMesh).
constexpr char kSmallEntry[] = R"hlo(ENTRY %main (x: f32[2,2], w: f32[2]) -> (f32[2], f32[2], f32[2,2], f32[2,2], s32[1]) {
  %x = f32[2,2]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %w = f32[2]{0} parameter(1), sharding={replicated}
  %constant = f32[] constant(0)
  %reduce = f32[2]{0} reduce(f32[2,2]{1,0} %x, f32[] %constant), dimensions={0}, to_apply=%add_f32
  %all-reduce = f32[2]{0} all-reduce(f32[2]{0} %reduce), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add_f32
  %add.1 = f32[2]{0} add(f32[2]{0} %all-reduce, f32[2]{0} %w)
  %all-reduce.1 = f32[2]{0} all-reduce(f32[2]{0} %reduce), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%maximum_f32
  %all-gather = f32[8,2]{1,0} all-gather(f32[2,2]{1,0} %x), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %reduce-scatter = f32[2,2]{1,0} reduce-scatter(f32[8,2]{1,0} %all-gather), channel_id=4, replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=%add_f32
  %collective-permute = f32[2,2]{1,0} collective-permute(f32[2,2]{1,0} %x), channel_id=5, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  %partition-id = u32[] partition-id()
  %convert = s32[] convert(u32[] %partition-id)
  %reshape = s32[1]{0} reshape(s32[] %convert)
  ROOT %tuple = (f32[2]{0}, f32[2]{0}, f32[2,2]{1,0}, f32[2,2]{1,0}, s32[1]{0}) tuple(f32[2]{0} %add.1, f32[2]{0} %all-reduce.1, f32[2,2]{1,0} %reduce-scatter, f32[2,2]{1,0} %collective-permute, s32[1]{0} %reshape), sharding={{replicated}, {replicated}, {devices=[4,1]<=[4]}, {devices=[4,1]<=[4]}, {devices=[4]<=[4]}}
}
)hlo";

std::string EntryText(const HloModule& module) {
  PrintOptions no_metadata;
  no_metadata.print_metadata = false;
  const std::string text = PrintModule(module, no_metadata);
  const size_t entry = text.find("ENTRY");
  return entry == std::string::npos ? text : text.substr(entry);
}

TEST(ShardMapTest, PerDeviceModuleText) {
  auto module = BuildSmall(false);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(EntryText(**module), kSmallEntry);
  const std::string text = PrintModule(**module);
  EXPECT_THAT(text, HasSubstr("HloModule small, entry_computation_layout={(f32[2,2]{1,0}, "
                              "f32[2]{0})->(f32[2]{0}, f32[2]{0}, f32[2,2]{1,0}, f32[2,2]{1,0}, "
                              "s32[1]{0})}, num_partitions=4"));
  EXPECT_THAT(text, HasSubstr("global_parameter_shapes=\"f32[8,2];f32[2]\""));
  EXPECT_THAT(text, HasSubstr("global_output_shapes=\"f32[2];f32[2];f32[8,2];f32[8,2];s32[4]\""));
  EXPECT_THAT(text, HasSubstr("output_names=\"total,peak,scattered,shifted,index\""));
  EXPECT_EQ((*module)->num_partitions(), 4);
}

// Text in: the printed module parses back, verifies and prints the same.
TEST(ShardMapTest, TextRoundTrip) {
  auto module = BuildSmall(false);
  ASSERT_TRUE(module.ok()) << module.status();
  const std::string text = PrintModule(**module);
  auto parsed = ParseHloText(text, "small.hlo");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(VerifyModule(**parsed).ok());
  EXPECT_EQ(PrintModule(**parsed), text);
  EXPECT_TRUE(IsPartitionedModule(**parsed));
}

TEST(ShardMapTest, GlobalForm) {
  auto module = BuildSmall(true);
  ASSERT_TRUE(module.ok()) << module.status();
  const std::string text = EntryText(**module);
  // Parameters are global; each goes Sharding -> SPMDFullToShardShape.
  EXPECT_THAT(text, HasSubstr("%x = f32[8,2]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}"));
  EXPECT_THAT(text, HasSubstr("%custom-call = f32[8,2]{1,0} custom-call(f32[8,2]{1,0} %x), "
                              "custom_call_target=\"Sharding\", sharding={devices=[4,1]<=[4]}"));
  EXPECT_THAT(text, HasSubstr("%custom-call.1 = f32[2,2]{1,0} custom-call(f32[8,2]{1,0} "
                              "%custom-call), custom_call_target=\"SPMDFullToShardShape\", "
                              "sharding={manual}"));
  EXPECT_THAT(text, HasSubstr("custom_call_target=\"Sharding\", sharding={replicated}"));
  // Outputs go Sharding {manual} -> SPMDShardToFullShape with the global sharding.
  EXPECT_THAT(text, HasSubstr("f32[8,2]{1,0} custom-call(f32[2,2]{1,0} %custom-call."));
  EXPECT_THAT(text, HasSubstr("custom_call_target=\"SPMDShardToFullShape\", "
                              "sharding={devices=[4,1]<=[4]}"));
  EXPECT_THAT(text, HasSubstr("s32[4]{0} custom-call(s32[1]{0} %custom-call."));
  EXPECT_THAT(text, HasSubstr("all-reduce(f32[2]{0} %reduce), channel_id=1, "
                              "replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
                              "to_apply=%add_f32"));
  EXPECT_EQ((*module)->num_partitions(), 4);
  // No per-device signature to record: the parameters are the global arrays.
  EXPECT_EQ((*module)->frontend_attributes().count(std::string(kGlobalParameterShapesAttr)), 0u);
}

// Every collective's value on the emulator's 4-device mesh, with global
// inputs split and global outputs reassembled by the shardings.
TEST(ShardMapTest, RunsOnTheMesh) {
  auto module = BuildSmall(false);
  ASSERT_TRUE(module.ok()) << module.status();
  auto sig = GetPartitionedSignature(**module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = static_cast<float>(i);
  std::vector<Literal> args;
  args.push_back(Literal::FromVector<float>(PrimitiveType::kF32, {8, 2}, xv));
  args.push_back(Literal::FromVector<float>(PrimitiveType::kF32, {2}, std::vector<float>{100, 200}));
  auto per_device = runtime::SplitArguments(*sig, args);
  ASSERT_TRUE(per_device.ok()) << per_device.status();
  auto result = runtime::RunSpmd(**module, *per_device);
  ASSERT_TRUE(result.ok()) << result.status();
  auto out = runtime::AssembleOutputs(*sig, result->outputs, (*module)->OutputNames());
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5u);
  auto values = [](const Literal& l) {
    std::vector<double> v;
    for (int64_t i = 0; i < l.num_elements(); ++i) v.push_back(l.GetAsDouble(i));
    return v;
  };
  EXPECT_THAT(values((*out)[0]), ::testing::ElementsAre(156, 264));  // Σ columns + w
  EXPECT_THAT(values((*out)[1]), ::testing::ElementsAre(26, 28));    // device 3's sums
  std::vector<double> four_x, rolled;
  for (int i = 0; i < 16; ++i) four_x.push_back(4.0 * i);
  for (int i = 0; i < 16; ++i) rolled.push_back((i + 12) % 16);
  EXPECT_EQ(values((*out)[2]), four_x);   // psum_scatter(all_gather(x))
  EXPECT_EQ(values((*out)[3]), rolled);   // device d got device d-1's rows
  EXPECT_THAT(values((*out)[4]), ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(result->devices.size(), 4u);
}

// A padded split: 10 rows over 4 devices are shards of 3, the last holding
// one real row. ShardOffset/ValidShardSize tell each device its part.
TEST(ShardMapTest, PaddedSplit) {
  const std::vector<ShardMapInput> in = {
      {"x", Shape(PrimitiveType::kF32, {10}), PartitionSpec::Split(0, /*allow_padding=*/true)}};
  const std::vector<ShardMapOutput> out = {{"offset", PartitionSpec::Split(0)},
                                           {"valid", PartitionSpec::Split(0)},
                                           {"copy", PartitionSpec::Split(0), 10}};
  auto body = [](ShardMapContext& ctx, absl::Span<const XlaOp> args) {
    XlaBuilder* b = ctx.builder();
    return std::vector<XlaOp>{b->Reshape(ctx.ShardOffset(10), {1}),
                              b->Reshape(ctx.ValidShardSize(10), {1}), args[0]};
  };
  auto module = ShardMap("padded", Mesh{4}, in, out, body);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->entry()->parameter(0)->shape(), Shape(PrimitiveType::kF32, {3}));
  auto sig = GetPartitionedSignature(**module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->global_parameters[0], Shape(PrimitiveType::kF32, {10}));
  EXPECT_EQ(sig->global_outputs[2], Shape(PrimitiveType::kF32, {10}));
  std::vector<float> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<Literal> args;
  args.push_back(Literal::FromVector<float>(PrimitiveType::kF32, {10}, xv));
  auto per_device = runtime::SplitArguments(*sig, args);
  ASSERT_TRUE(per_device.ok()) << per_device.status();
  // The last shard: one real element, zero padding.
  EXPECT_EQ((*per_device)[3][0].GetAsDouble(0), 10);
  EXPECT_EQ((*per_device)[3][0].GetAsDouble(1), 0);
  auto result = runtime::RunSpmd(**module, *per_device);
  ASSERT_TRUE(result.ok()) << result.status();
  auto outs = runtime::AssembleOutputs(*sig, result->outputs, {"offset", "valid", "copy"});
  ASSERT_TRUE(outs.ok()) << outs.status();
  std::vector<int64_t> offset, valid;
  for (int d = 0; d < 4; ++d) {
    offset.push_back((*outs)[0].GetAsInt64(d));
    valid.push_back((*outs)[1].GetAsInt64(d));
  }
  EXPECT_THAT(offset, ::testing::ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(valid, ::testing::ElementsAre(3, 3, 3, 1));
  EXPECT_TRUE((*outs)[2] == args[0]);  // padding dropped on reassembly
}

TEST(ShardMapTest, Errors) {
  auto identity = [](ShardMapContext&, absl::Span<const XlaOp> args) {
    return std::vector<XlaOp>(args.begin(), args.end());
  };
  const Shape s10(PrimitiveType::kF32, {10, 4});
  // Indivisible without allow_padding.
  auto r = ShardMap("m", Mesh{4}, {{"x", s10, PartitionSpec::Split(0)}},
                    {{"y", PartitionSpec::Split(0)}}, identity);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("input 'x' dimension 0 (size 10) is not divisible by the mesh size 4"));
  // Split dimension out of range.
  r = ShardMap("m", Mesh{2}, {{"x", s10, PartitionSpec::Split(2)}},
               {{"y", PartitionSpec::Split(0)}}, identity);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("has no dimension 2"));
  // A mesh of no devices.
  r = ShardMap("m", Mesh{0}, {{"x", s10, PartitionSpec::Replicated()}},
               {{"y", PartitionSpec::Replicated()}}, identity);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("number of devices"));
  // A global size that does not give the local one.
  r = ShardMap("m", Mesh{2}, {{"x", s10, PartitionSpec::Split(0)}},
               {{"y", PartitionSpec::Split(0), 7}}, identity);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("global size of 7"));
  // Output count.
  r = ShardMap("m", Mesh{2}, {{"x", s10, PartitionSpec::Split(0)}},
               {{"y", PartitionSpec::Split(0)}, {"z", PartitionSpec::Replicated()}}, identity);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("returned 1 outputs for 2"));
}

TEST(ShardingUtilTest, Arithmetic) {
  EXPECT_EQ(ShardSize(151936, 8), 18992);
  EXPECT_EQ(ShardSize(37, 8), 5);
  EXPECT_EQ(ShardSize(7, 1), 7);
  const HloSharding v = SplitSharding(3, 2, 8);
  EXPECT_EQ(v.tile_assignment_dims, (std::vector<int64_t>{1, 1, 8}));
  auto local = ShardShape(Shape(PrimitiveType::kBF16, {2, 16, 151937}), v);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local, Shape(PrimitiveType::kBF16, {2, 16, 18993}));
  auto tile = TileIndexOfDevice(v, 3, 5);
  ASSERT_TRUE(tile.ok());
  EXPECT_EQ(*tile, (std::vector<int64_t>{0, 0, 5}));
  EXPECT_EQ(SplitSharding(2, 0, 1), HloSharding::Replicated());
  EXPECT_FALSE(DataTileCounts(v, 2).ok());  // 3 tile dims for a rank-2 array
  auto shapes = DecodeShapeList(EncodeShapeList({Shape(PrimitiveType::kF32, {}),
                                                 Shape(PrimitiveType::kS32, {2, 37})}));
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[1], Shape(PrimitiveType::kS32, {2, 37}));
  EXPECT_FALSE(DecodeShapeList("f32[2,x]").ok());
  EXPECT_FALSE(DecodeShapeList("tuple[]").ok());
}

// A hand-written partitioned module: global shapes from the tile counts
// unless recorded; a recorded shape that does not fit is an error.
TEST(ShardingUtilTest, SignatureOfHandWrittenModule) {
  const std::string text = R"hlo(HloModule m, num_partitions=2

ENTRY %main (x: f32[3,4]) -> f32[3,4] {
  %x = f32[3,4]{1,0} parameter(0), sharding={devices=[1,2]<=[2]}
  ROOT %n = f32[3,4]{1,0} negate(f32[3,4]{1,0} %x), sharding={devices=[1,2]<=[2]}
}
)hlo";
  auto module = ParseHloText(text);
  ASSERT_TRUE(module.ok()) << module.status();
  auto sig = GetPartitionedSignature(**module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->global_parameters[0], Shape(PrimitiveType::kF32, {3, 8}));
  (*(*module)->mutable_frontend_attributes())[std::string(kGlobalParameterShapesAttr)] =
      "f32[3,7]";
  sig = GetPartitionedSignature(**module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->global_parameters[0], Shape(PrimitiveType::kF32, {3, 7}));
  (*(*module)->mutable_frontend_attributes())[std::string(kGlobalParameterShapesAttr)] =
      "f32[3,9]";
  sig = GetPartitionedSignature(**module);
  ASSERT_FALSE(sig.ok());
  EXPECT_THAT(sig.status().message(), HasSubstr("parameter x: global shape f32[3,9]"));
  (*module)->set_num_partitions(4);
  sig = GetPartitionedSignature(**module);
  ASSERT_FALSE(sig.ok());
  EXPECT_THAT(sig.status().message(), HasSubstr("num_partitions=4"));
}

// Replicated outputs must agree bitwise across devices.
TEST(ShardingIoTest, ReplicatedCopiesMustAgree) {
  Literal a = Literal::FromVector<float>(PrimitiveType::kF32, {3}, std::vector<float>{1, 2, 3});
  Literal b = Literal::FromVector<float>(PrimitiveType::kF32, {3}, std::vector<float>{1, 2, 4});
  const Literal* same[] = {&a, &a};
  auto ok = runtime::AssembleGlobal(same, HloSharding::Replicated(), a.shape(), "out");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(*ok == a);
  const Literal* differ[] = {&a, &b};
  auto bad = runtime::AssembleGlobal(differ, HloSharding::Replicated(), a.shape(), "out");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("out: the copies on devices 0 and 1 should be identical but differ at "
                        "linear index 2"));
}

// Split then reassemble is the identity for 2-D tilings, uneven ones too.
TEST(ShardingIoTest, SplitAssembleRoundTrip) {
  std::vector<float> v(5 * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Literal g = Literal::FromVector<float>(PrimitiveType::kF32, {5, 7}, v);
  for (const HloSharding& s : {SplitSharding(2, 0, 2), SplitSharding(2, 1, 4),
                               HloSharding::IotaTiled({2, 2})}) {
    auto local = ShardShape(g.shape(), s);
    ASSERT_TRUE(local.ok());
    const int64_t n = s.tile_assignment_dims[0] * s.tile_assignment_dims[1];
    auto pieces = runtime::SplitGlobal(g, s, *local, n);
    ASSERT_TRUE(pieces.ok()) << pieces.status();
    std::vector<const Literal*> ptrs;
    for (const Literal& p : *pieces) ptrs.push_back(&p);
    auto back = runtime::AssembleGlobal(ptrs, s, g.shape(), "g");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == g);
  }
}

}  // namespace
}  // namespace tpuoff::hlo
