// The forms of real JAX/XLA HLO that issue 16 added: parser forms (module
// name with a colon, duplicate names, mesh replica groups, dim_labels), and
// the ops convolution, sort, topk, select-and-scatter, reduce-precision, plus
// a Shardy global program, each checked against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "hlo/ir/float16.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/proto/proto_io.h"
#include "hlo/spmd/global_program.h"
#include "hlo/text/text_printer.h"
#include "tests/executor_test_util.h"

namespace tpuoff::runtime::testing {
namespace {

std::vector<Literal> RunOk(const hlo::HloModule& m, std::vector<Literal> args) {
  auto r = RunModule(m, args, RunOptions());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return std::move(r->outputs);
}

TEST(XlaFormsParse, ColonModuleNameAndDuplicateNamesAreUniquified) {
  auto m = Parse(R"(HloModule dup:
body { x = (s32[], f32[2]) parameter(0) ROOT x.1 = (s32[], f32[2]) copy(x) }
cond { x = (s32[], f32[2]) parameter(0) i = s32[] get-tuple-element(x), index=0
       n = s32[] constant(3) ROOT lt = pred[] compare(i, n), direction=LT }
ENTRY e { x = f32[2] parameter(0) z = s32[] constant(0)
          t = (s32[], f32[2]) tuple(z, x)
          ROOT w = (s32[], f32[2]) while(t), condition=cond, body=body })");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "dup");
  EXPECT_EQ(m->entry()->parameter(0)->name(), "x");  // the entry keeps its names
  std::set<std::string> names;
  for (const auto& c : m->computations()) {
    for (const auto& i : c->instructions()) {
      EXPECT_TRUE(names.insert(i->name()).second) << i->name();
    }
  }
  EXPECT_TRUE(hlo::VerifyModule(*m).ok());
}

TEST(XlaFormsParse, MeshReplicaGroupsExpandAndPrintBack) {
  const std::string text = R"(HloModule m, num_partitions=8
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(x), channel_id=1, replica_groups=mesh['a'=4,'b'=2] {'a'}, use_global_device_ids=true, to_apply=add })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  const auto& g = m->entry()->root()->attrs().replica_groups.groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(g[1], (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_NE(hlo::PrintModule(*m).find("replica_groups=mesh['a'=4,'b'=2] {'a'}"),
            std::string::npos);
  EXPECT_FALSE(hlo::ParseHloText(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(x), replica_groups=mesh['a'=4] {'c'}, to_apply=add })").ok());
}

// XLA:CPU's optimised SPMD modules spell replica groups as mesh axes with a
// device order and sub-axes (MeshAxesReplicaGroupList). Groups checked
// against XLA's definition worked by hand: the mesh's devices reshaped to
// the named parts and transposed (unnamed parts first), in chunks.
std::string MeshAllReduce(const std::string& groups) {
  return R"(HloModule m, num_partitions=8
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups=)" + groups +
         R"(, use_global_device_ids=true, to_apply=add })";
}

std::vector<std::vector<int64_t>> GroupsOf(const std::string& groups) {
  auto m = Parse(MeshAllReduce(groups));
  if (m == nullptr) return {};
  return m->entry()->root()->attrs().replica_groups.groups;
}

using Groups = std::vector<std::vector<int64_t>>;

TEST(XlaFormsParse, MeshDeviceIdsAndSubAxes) {
  // Mesh 4x2 whose devices are [2,4]T(1,0) = 0,4,1,5,2,6,3,7 (row-major):
  // along 'a' at b=0 the positions 0,2,4,6 hold devices 0,1,2,3.
  const Groups by_a = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_EQ(GroupsOf("mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}"), by_a);
  EXPECT_EQ(GroupsOf("mesh['a'=4,'b'=2], device_ids=(0,4,1,5,2,6,3,7) {'a'}"), by_a);
  EXPECT_EQ(GroupsOf("mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'b'}"),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Order of the named axes: the first named is major.
  EXPECT_EQ(GroupsOf("mesh['a'=2,'b'=2,'c'=2] {'c','a'}"),
            (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  // 'a':(2)2 is the middle of 'a' reshaped to [2,2,1]; 'b' stays whole.
  EXPECT_EQ(GroupsOf("mesh['a'=4,'b'=2] {'a':(2)2}"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(GroupsOf("mesh['a'=4,'b'=2] {'a':(1)2}"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Two sub-axes of one axis ([8] -> [2,2,2]), named minor part first.
  EXPECT_EQ(GroupsOf("mesh['a'=8] {'a':(4)2,'a':(1)2}"), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  // What XLA:CPU wrote for a reshape merging a 2x4 mesh's axes: devices
  // 0,2,1,3,4,6,5,7; position 4 a0 + 2 a1 + b, grouped over a1.
  EXPECT_EQ(GroupsOf("mesh['axis_0'=4,'axis_1'=2,'axis_2'=1], device_ids=([2,2,2]T(0,2,1)) "
                     "{'axis_0':(2)2}"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));

  // Printed back as written, and the same through the binary proto.
  for (const std::string g : {"mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}",
                              "mesh['a'=4,'b'=2], device_ids=(0,4,1,5,2,6,3,7) {'b'}",
                              "mesh['a'=8] {'a':(4)2,'a':(1)2}",
                              "mesh['a'=4,'b'=2], device_ids=([2,2,2]T(0,2,1)) {'a':(2)2}"}) {
    auto m = Parse(MeshAllReduce(g));
    ASSERT_NE(m, nullptr) << g;
    const std::string printed = hlo::PrintModule(*m);
    EXPECT_NE(printed.find("replica_groups=" + g), std::string::npos) << printed;
    auto again = hlo::ModuleFromProtoBytes(*hlo::ModuleToProtoBytes(*m));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(hlo::PrintModule(**again), printed);
    EXPECT_EQ((*again)->entry()->root()->attrs().replica_groups.groups,
              m->entry()->root()->attrs().replica_groups.groups) << g;
  }

  // Refused as XLA refuses them, naming what is wrong.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"mesh['a'=4,'b'=2], device_ids=(0,0,1,2,3,4,5,6) {'a'}", "permutation of 0..7"},
      {"mesh['a'=4,'b'=2], device_ids=(0,1,2) {'a'}", "lists 3 devices for a mesh of 8"},
      {"mesh['a'=4,'b'=2], device_ids=(0,1,2,3,4,5,6,7,8) {'a'}", "more than the mesh's 8"},
      {"mesh['a'=4,'b'=2], device_ids=([4,4]) {'a'}", "must hold the mesh's 8 devices"},
      {"mesh['a'=4,'b'=2], device_ids=([2,4]T(0,0)) {'a'}", "T(...) must permute"},
      {"mesh['a'=4,'b'=2] {'a':(3)2}", "does not fit the axis of size 4"},
      {"mesh['a'=4,'b'=2] {'a':(1)4}", "does not fit the axis of size 4"},
      {"mesh['a'=4,'b'=2] {'a':(0)2}", "pre-sizes must be >= 1"},
      {"mesh['a'=8] {'a':(1)4,'a':(2)2}", "sub-axes of 'a' overlap"},
      {"mesh['a'=4,'b'=2] {'a','a':(1)2}", "'a' is named more than once"},
      {"mesh['a'=4,'b'=2] {'c'}", "'c' is not a mesh axis"},
  };
  for (const auto& [g, message] : bad) {
    auto m = hlo::ParseHloText(MeshAllReduce(g));
    ASSERT_FALSE(m.ok()) << g;
    EXPECT_NE(m.status().message().find(message), std::string::npos) << g << ": " << m.status();
  }
}

// The emulator reduces over the groups the device order gives (before, the
// order was ignored: device 0 summed devices 0,2,4,6).
TEST(XlaFormsRun, MeshDeviceIdsGroupTheRightDevices) {
  auto m = Parse(MeshAllReduce("mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}"));
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<Literal>> args(8);
  for (int d = 0; d < 8; ++d) args[d].push_back(F32({2}, {1.0 * (1 << d), -1.0 * d}));
  auto r = RunSpmd(*m, args, RunOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 8u);
  for (int d = 0; d < 8; ++d) {
    const int g = d / 4;  // groups {0,1,2,3} and {4,5,6,7}
    double bits = 0, neg = 0;
    for (int k = 4 * g; k < 4 * g + 4; ++k) {
      bits += 1 << k;
      neg -= k;
    }
    ExpectNear(r->outputs[d], F32({2}, {bits, neg}), 0, "device " + std::to_string(d));
  }
}

// Forms found by a sweep of what jax 0.10.2 writes: `map` (XLA:CPU's
// optimised bf16 scans), a psum reducer wrapped in a Sharding annotation
// (partial-manual shard_map), jax.debug.print's `()` result with a
// one-element tuple sharding, and StableHLO text given by mistake.
TEST(XlaFormsRun, MapAppliesItsComputationPerElement) {
  auto m = Parse(R"(HloModule m
f { a = f32[] parameter(0) b = f32[] parameter(1) p = f32[] multiply(a, b)
    one = f32[] constant(1) ROOT r = f32[] add(p, one) }
g { a = bf16[] parameter(0) ROOT r = bf16[] add(a, a) }
ENTRY e { x = f32[2,3] parameter(0) y = f32[2,3] parameter(1) h = bf16[3] parameter(2)
  m1 = f32[2,3] map(x, y), dimensions={0,1}, to_apply=f
  m2 = bf16[3] map(h), dimensions={0}, to_apply=g
  ROOT t = (f32[2,3], bf16[3]) tuple(m1, m2) })");
  ASSERT_NE(m, nullptr);
  std::vector<Literal> got = RunOk(*m, {F32({2, 3}, {1, 2, 3, 4, 5, 6}),
                                        F32({2, 3}, {-1, 0.5, 2, 0, 3, -2}),
                                        BF16({3}, {1.5, -3, 100})});
  ASSERT_EQ(got.size(), 2u);
  ExpectNear(got[0], F32({2, 3}, {0, 2, 7, 1, 16, -11}), 0, "map f32");
  ExpectNear(got[1], BF16({3}, {3, -6, 200}), 0, "map bf16");
}

TEST(XlaFormsRun, CollectiveReducerLooksThroughShardingAnnotations) {
  auto m = Parse(R"(HloModule m, num_partitions=4
r { a = f32[] parameter(0) b = f32[] parameter(1) s = f32[] add(a, b)
    ROOT c = f32[] custom-call(s), custom_call_target="Sharding", sharding={replicated} }
ENTRY e { x = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=r })");
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<Literal>> args(4);
  for (int d = 0; d < 4; ++d) args[d].push_back(F32({2}, {1.0 + d, 10.0 * d}));
  auto r = RunSpmd(*m, args, RunOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  for (int d = 0; d < 4; ++d) ExpectNear(r->outputs[d], F32({2}, {10, 60}), 0, "all-reduce");
}

TEST(XlaFormsParse, EmptyTupleTakesOneShardingAndMlirTextIsNamed) {
  const std::string text = R"(HloModule m
ENTRY e { x = f32[2] parameter(0)
  cb = () custom-call(x), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, sharding=SHARDING
  ROOT y = f32[2] add(x, x) })";
  auto with = [&](const std::string& sharding) {
    std::string t = text;
    t.replace(t.find("SHARDING"), 8, sharding);
    return hlo::ParseHloText(t);
  };
  EXPECT_TRUE(with("{{maximal device=0}}").ok()) << with("{{maximal device=0}}").status();
  auto two = with("{{maximal device=0}, {maximal device=0}}");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("tuple sharding has 2 elements for shape ()"),
            std::string::npos) << two.status();
  auto mlir = hlo::ParseHloText("module @jit_f attributes {} {\n  func.func public @main() {}\n}\n");
  ASSERT_FALSE(mlir.ok());
  EXPECT_NE(mlir.status().message().find("StableHLO"), std::string::npos) << mlir.status();
  EXPECT_NE(mlir.status().message().find("dialect=\"hlo\""), std::string::npos) << mlir.status();
}

// Shardings name partitions (XLA's HloSharding::Validate in its verifier):
// every command that verifies a module refuses one naming a device the
// module does not have, or one device twice, naming the instruction (before,
// only `run` refused it, and only on entry parameters and the root).
TEST(XlaFormsParse, ShardingsNameOnlyTheModulesPartitions) {
  auto module = [](const std::string& partitions, const std::string& sharding) {
    return "HloModule m" + partitions + "\nENTRY e { p = f32[8] parameter(0), sharding={replicated}\n"
           "  n = f32[8] negate(p), sharding=" + sharding + "\n  ROOT t = (f32[8], f32[8]) tuple(p, n),"
           " sharding={{replicated}, " + sharding + "} }";
  };
  auto verify = [](const std::string& text) -> absl::Status {
    auto m = hlo::ParseHloText(text);
    if (!m.ok()) return m.status();
    return hlo::VerifyModule(**m);
  };
  for (const char* ok : {"{devices=[4]0,1,2,3}", "{devices=[4]3,1,0,2}", "{devices=[2,2]<=[4] last_tile_dim_replicate}",
                         "{maximal device=3}", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"}) {
    EXPECT_TRUE(verify(module(", num_partitions=4", ok)).ok()) << ok << ": "
                                                                << verify(module(", num_partitions=4", ok));
  }
  struct Bad {
    const char* partitions;
    const char* sharding;
    const char* message;
  };
  for (const Bad& b : {Bad{", num_partitions=2", "{devices=[4]0,1,2,3}",
                           "instruction n: sharding names device 2 but the module has num_partitions=2"},
                       Bad{", num_partitions=4", "{maximal device=4}", "names device 4"},
                       Bad{", num_partitions=4", "{devices=[4]0,1,1,3}", "names device 1 twice"},
                       Bad{", num_partitions=2", "{devices=[2,2]<=[4] last_tile_dim_replicate}", "names device 2"}}) {
    const absl::Status st = verify(module(b.partitions, b.sharding));
    ASSERT_FALSE(st.ok()) << b.sharding;
    EXPECT_NE(st.message().find(b.message), std::string::npos) << st;
  }
  // Without num_partitions (JAX's global SPMD programs before partitioning)
  // the mesh's shardings are taken as they are.
  EXPECT_TRUE(verify(module("", "{devices=[4]0,1,2,3}")).ok());
}

// jax.debug.print and an unordered io_callback leave a side-effecting
// custom-call whose result nothing uses: the emulator (which runs what the
// root needs) ran such a module without the effect, exit 0. Now it is
// refused naming the call; an unused call without side effects is still
// dead code.
TEST(XlaFormsRun, UnusedSideEffectsAreRefusedNotDropped) {
  const std::string text = R"(HloModule m
ENTRY e { x = f32[2] parameter(0)
  cb = () custom-call(x), custom_call_target="xla_ffi_python_cpu_callback"EFFECT
  ROOT y = f32[2] add(x, x) })";
  auto with = [&](const std::string& effect) {
    std::string t = text;
    t.replace(t.find("EFFECT"), 6, effect);
    return hlo::ParseHloText(t);
  };
  auto effect = with(", custom_call_has_side_effect=true");
  ASSERT_TRUE(effect.ok()) << effect.status();
  Literal x = Literal::FromVector<float>(PrimitiveType::kF32, {2}, {1, 2});
  auto refused = runtime::RunModule(**effect, {x});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("\"xla_ffi_python_cpu_callback\" (%cb, computation e) "
                                            "has a side effect the emulator cannot perform"),
            std::string::npos) << refused.status();
  auto pure = with("");
  ASSERT_TRUE(pure.ok()) << pure.status();
  auto ran = runtime::RunModule(**pure, {x});
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->outputs[0].GetAsDouble(1), 4.0);
}

// Convolutions oneDNN does not take (s8 x s8 -> s32, s32, f64, c64) run a
// direct loop: checked against oneDNN's f32 convolution of the same
// integer-valued data (exact in both) over strides, padding, both
// dilations, reversal, feature and batch groups, 1-D and 2-D.
TEST(XlaFormsRun, GenericConvolutionsMatchOneDnnOnIntegerData) {
  struct Conv {
    std::string lhs, rhs, out, attrs;
  };
  const std::vector<Conv> convs = {
      {"[1,9,4]", "[3,4,6]", "[1,4,6]", "window={size=3 stride=2 pad=1_0}, dim_labels=b0f_0io->b0f"},
      {"[2,7,4]", "[2,2,6]", "[2,13,6]",
       "window={size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f, "
       "feature_group_count=2"},
      {"[4,5,3]", "[2,3,4]", "[2,4,4]",
       "window={size=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f, batch_group_count=2"},
      {"[1,6,5,2]", "[3,2,2,3]", "[1,3,4,3]",
       "window={size=3x2 stride=2x1 pad=1_1x0_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f"},
      {"[3,1,5,5]", "[4,3,2,2]", "[1,4,5,5]",
       "window={size=2x2 pad=0_1x1_0 rhs_reversal=1x0}, dim_labels=fb01_oi01->bf01"},
  };
  auto values = [](const std::string& dims, int seed) {
    std::vector<int64_t> d;
    for (absl::string_view x : absl::StrSplit(dims.substr(1, dims.size() - 2), ',')) {
      d.push_back(std::stoll(std::string(x)));
    }
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7 + seed * 13) % 11) - 5;
    return std::make_pair(d, v);
  };
  for (const Conv& c : convs) {
    auto [ld, lv] = values(c.lhs, 1);
    auto [rd, rv] = values(c.rhs, 2);
    auto text = [&](const std::string& in, const std::string& out) {
      return "HloModule m\nENTRY e { x = " + in + c.lhs + " parameter(0) w = " + in + c.rhs +
             " parameter(1)\n  ROOT c = " + out + c.out + " convolution(x, w), " + c.attrs + " }";
    };
    auto f32 = Parse(text("f32", "f32"));
    ASSERT_NE(f32, nullptr) << c.attrs;
    std::vector<Literal> want = RunOk(*f32, {F32(ld, lv), F32(rd, rv)});
    ASSERT_EQ(want.size(), 1u);
    for (const auto& [in, out] : std::vector<std::pair<std::string, std::string>>{
             {"s8", "s32"}, {"s32", "s32"}, {"f64", "f64"}, {"c64", "c64"}}) {
      auto m = Parse(text(in, out));
      ASSERT_NE(m, nullptr) << in << " " << c.attrs;
      const PrimitiveType it = m->entry()->parameter(0)->shape().element_type();
      Literal lhs(hlo::Shape(it, ld)), rhs(hlo::Shape(it, rd));
      for (int64_t i = 0; i < lhs.num_elements(); ++i) {
        if (it == PrimitiveType::kC64) {
          lhs.data<float>()[2 * i] = static_cast<float>(lv[i]);
        } else {
          lhs.SetFromDouble(i, lv[i]);
        }
      }
      for (int64_t i = 0; i < rhs.num_elements(); ++i) {
        if (it == PrimitiveType::kC64) {
          rhs.data<float>()[2 * i] = static_cast<float>(rv[i]);
        } else {
          rhs.SetFromDouble(i, rv[i]);
        }
      }
      std::vector<Literal> got = RunOk(*m, {lhs, rhs});
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].num_elements(), want[0].num_elements());
      for (int64_t i = 0; i < want[0].num_elements(); ++i) {
        const double g = got[0].shape().element_type() == PrimitiveType::kC64
                             ? got[0].data<float>()[2 * i]
                             : got[0].GetAsDouble(i);
        ASSERT_EQ(g, want[0].GetAsDouble(i)) << in << " " << c.attrs << " [" << i << "]";
        if (got[0].shape().element_type() == PrimitiveType::kC64) {
          ASSERT_EQ(got[0].data<float>()[2 * i + 1], 0.0f);
        }
      }
    }
  }
}

// XLA's dumps elide large constants: `{...}` loads as unknown values, prints
// and converts back the same way, is analysed for memory, and `run` refuses.
TEST(XlaFormsParse, ElidedConstantsAreAnalysedButNotRun) {
  const std::string text = R"(HloModule m
ENTRY e { x = f32[8,12] parameter(0)
  table = f32[8,12] constant({...})
  ROOT r = f32[8,12] add(x, table) })";
  auto m = Parse(text);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->entry()->root()->operand(1)->has_literal());
  const std::string printed = hlo::PrintModule(*m);
  EXPECT_NE(printed.find("constant({...})"), std::string::npos) << printed;
  auto bytes = hlo::ModuleFromProtoBytes(*hlo::ModuleToProtoBytes(*m));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(hlo::PrintModule(**bytes), printed);
  // The same peak as with the values spelt out (there the constant folds
  // into the fused add; here it is a buffer the add updates in place).
  std::string spelt = text;
  std::string values = "{";
  for (int r = 0; r < 8; ++r) {
    absl::StrAppend(&values, r ? ", {" : "{", absl::StrJoin(std::vector<int>(12, r), ", "), "}");
  }
  spelt.replace(spelt.find("{...}"), 5, values + "}");
  auto full = Parse(spelt);
  ASSERT_NE(full, nullptr);
  auto mem = hlo::AnalyzeMemory(*m);
  auto mem_full = hlo::AnalyzeMemory(*full);
  ASSERT_TRUE(mem.ok()) << mem.status();
  ASSERT_TRUE(mem_full.ok()) << mem_full.status();
  EXPECT_EQ(mem->peak.bytes, mem_full->peak.bytes);
  EXPECT_EQ(mem->peak.bytes, 2 * 8 * 12 * 4);
  auto r = RunModule(*m, {F32({8, 12}, std::vector<double>(96, 1.0))}, RunOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("%table"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("elided"), std::string::npos) << r.status();
  // Only a whole constant may be elided.
  EXPECT_FALSE(hlo::ParseHloText(R"(HloModule m
ENTRY e { ROOT c = f32[3] constant({1, ...}) })").ok());
}

// XLA's compact tuple access `%t#1#0` is get-tuple-element(get-tuple-element
// (t, 1), 0): one instruction per distinct prefix, named apart from the
// computation's own names, printed as plain get-tuple-element.
TEST(XlaFormsParse, CompactTupleAccessBecomesGetTupleElement) {
  auto m = Parse(R"(HloModule m
ENTRY e { x = f32[3] parameter(0) y = f32[3] parameter(1)
  inner = (f32[3], f32[3]) tuple(y, x)
  t = (f32[3], (f32[3], f32[3])) tuple(x, inner)
  t.gte.0 = f32[3] negate(x)
  a = f32[3] add(f32[3] %t#0, t#1#0)
  b = f32[3] add(a, t.gte.0)
  ROOT r = f32[3] multiply(b, %t#1#0) })");
  ASSERT_NE(m, nullptr);
  std::set<std::string> gtes;
  for (const auto& i : m->entry()->instructions()) {
    if (i->opcode() == hlo::HloOpcode::kGetTupleElement) gtes.insert(i->name());
  }
  EXPECT_EQ(gtes, (std::set<std::string>{"t.gte.0.1", "t.gte.1", "t.gte.1.0"}));
  EXPECT_TRUE(hlo::VerifyModule(*m).ok());
  // r = (x + y - x) * y = y * y
  auto out = RunOk(*m, {F32({3}, {1, 2, 3}), F32({3}, {4, -5, 0.5})});
  ASSERT_EQ(out.size(), 1u);
  ExpectNear(out[0], F32({3}, {16, 25, 0.25}), 1e-6, "r");
  const std::string printed = hlo::PrintModule(*m);
  EXPECT_EQ(printed.find('#'), std::string::npos) << printed;
  auto again = Parse(printed);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(hlo::PrintModule(*again), printed);
  const std::string head = R"(HloModule m
ENTRY e { x = f32[3] parameter(0) t = (f32[3], f32[3]) tuple(x, x)
  ROOT r = f32[3] )";
  for (const auto& [body, what] : std::vector<std::pair<std::string, std::string>>{
           {"negate(t#-1) }", "tuple index after '#' must be >= 0"},
           {"negate(t#2) }", "index"},
           {"negate(t#0#0) }", "tuple"},
           {"negate(t#) }", "#"}}) {
    auto bad = hlo::ParseHloText(head + body);
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << body << ": " << bad.status();
  }
}

TEST(XlaFormsParse, DimLabelsStartingWithDigitsRoundTrip) {
  auto m = Parse(R"(HloModule m
ENTRY e { x = f32[3,5,5,2] parameter(0) w = f32[3,3,3,4] parameter(1)
  ROOT c = f32[5,5,2,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf })");
  ASSERT_NE(m, nullptr);
  EXPECT_NE(hlo::PrintModule(*m).find("dim_labels=f01b_i01o->01bf"), std::string::npos);
}

TEST(XlaFormsRun, ConvolutionDilationPaddingAndGroups) {
  // 1-D, NWC, lhs dilation 2 (a transposed convolution), padding 1_1, two
  // feature groups: output feature o reads input channel o only.
  auto m = Parse(R"(HloModule m
ENTRY e { x = f32[1,3,2] parameter(0) w = f32[2,1,2] parameter(1)
  ROOT c = f32[1,6,2] convolution(x, w), window={size=2 pad=1_1 lhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=2 })");
  ASSERT_NE(m, nullptr);
  // Channel 0 = 1 2 3 dilated and padded: 0 1 0 2 0 3 0, taps (1, 2);
  // channel 1 = 10 20 30 -> 0 10 0 20 0 30 0, taps (3, 4).
  auto out = RunOk(*m, {F32({1, 3, 2}, {1, 10, 2, 20, 3, 30}), F32({2, 1, 2}, {1, 3, 2, 4})});
  ASSERT_EQ(out.size(), 1u);
  ExpectNear(out[0], F32({1, 6, 2}, {2, 40, 1, 30, 4, 80, 2, 60, 6, 120, 3, 90}), 1e-6, "conv");
}

TEST(XlaFormsRun, ConvolutionBatchGroupsAndReversal) {
  // batch_group_count=2: batch b feeds output features of group b.
  auto m = Parse(R"(HloModule m
ENTRY e { x = f32[2,3,1] parameter(0) w = f32[2,1,2] parameter(1)
  ROOT c = f32[1,2,2] convolution(x, w), window={size=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f, batch_group_count=2 })");
  ASSERT_NE(m, nullptr);
  // Reversed taps: o0 taps (2, 1) on batch 0 = 1 2 3; o1 taps (4, 3) on batch 1 = 5 6 7.
  auto out = RunOk(*m, {F32({2, 3, 1}, {1, 2, 3, 5, 6, 7}), F32({2, 1, 2}, {1, 3, 2, 4})});
  ASSERT_EQ(out.size(), 1u);
  ExpectNear(out[0], F32({1, 2, 2}, {2 * 1 + 1 * 2, 4 * 5 + 3 * 6, 2 * 2 + 1 * 3, 4 * 6 + 3 * 7}),
             1e-6, "batch-grouped conv");
}

TEST(XlaFormsRun, SortWithComparatorAndTopK) {
  auto m = Parse(R"(HloModule m
cmp { a = f32[] parameter(0) b = f32[] parameter(1) c = s32[] parameter(2) d = s32[] parameter(3)
      ROOT gt = pred[] compare(a, b), direction=GT }
ENTRY e { k = f32[2,4] parameter(0) v = s32[2,4] parameter(1)
  s = (f32[2,4], s32[2,4]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp
  t = (f32[2,2], s32[2,2]) topk(k), k=2, largest=false
  s0 = f32[2,4] get-tuple-element(s), index=0  s1 = s32[2,4] get-tuple-element(s), index=1
  t0 = f32[2,2] get-tuple-element(t), index=0  t1 = s32[2,2] get-tuple-element(t), index=1
  ROOT r = (f32[2,4], s32[2,4], f32[2,2], s32[2,2]) tuple(s0, s1, t0, t1) })");
  ASSERT_NE(m, nullptr);
  auto out = RunOk(*m, {F32({2, 4}, {3, 1, 3, 2, -1, 5, 0, 5}), S32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})});
  ASSERT_EQ(out.size(), 4u);
  // Descending and stable: equal keys keep their order.
  ExpectNear(out[0], F32({2, 4}, {3, 3, 2, 1, 5, 5, 0, -1}), 0, "sorted keys");
  ExpectNear(out[1], S32({2, 4}, {0, 2, 3, 1, 5, 7, 6, 4}), 0, "sorted values");
  ExpectNear(out[2], F32({2, 2}, {1, 2, -1, 0}), 0, "topk smallest");
  ExpectNear(out[3], S32({2, 2}, {1, 3, 0, 2}), 0, "topk indices (per row)");
}

TEST(XlaFormsRun, SelectAndScatterIsMaxPoolGradient) {
  auto m = Parse(R"(HloModule m
ge { a = f32[] parameter(0) b = f32[] parameter(1) ROOT g = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[5] parameter(0) g = f32[2] parameter(1) z = f32[] constant(0)
  ROOT s = f32[5] select-and-scatter(x, g, z), window={size=3 stride=2}, select=ge, scatter=add })");
  ASSERT_NE(m, nullptr);
  // Windows [0,3) and [2,5): maxima at 1 (value 7) and 2 (value 6).
  auto out = RunOk(*m, {F32({5}, {1, 7, 6, 2, 6}), F32({2}, {10, 100})});
  ASSERT_EQ(out.size(), 1u);
  ExpectNear(out[0], F32({5}, {0, 10, 100, 0, 0}), 0, "select-and-scatter");
}

TEST(XlaFormsRun, ReducePrecisionToBf16AndErfPopcnt) {
  auto m = Parse(R"(HloModule m
ENTRY e { x = f32[3] parameter(0) n = s32[3] parameter(1)
  r = f32[3] reduce-precision(x), exponent_bits=8, mantissa_bits=7
  f = f32[3] erf(x) p = s32[3] popcnt(n) c = s32[3] count-leading-zeros(n)
  ROOT t = (f32[3], f32[3], s32[3], s32[3]) tuple(r, f, p, c) })");
  ASSERT_NE(m, nullptr);
  auto out = RunOk(*m, {F32({3}, {1.00390625, 0.1, -3e38}), S32({3}, {0, 7, -1})});
  ASSERT_EQ(out.size(), 4u);
  ExpectNear(out[0], F32({3}, {1.0, hlo::RoundToBf16(0.1f), hlo::RoundToBf16(-3e38f)}), 0,
             "reduce-precision");
  ExpectNear(out[1], F32({3}, {std::erf(1.00390625), std::erf(0.1), -1}), 1e-6, "erf");
  ExpectNear(out[2], S32({3}, {0, 3, 32}), 0, "popcnt");
  ExpectNear(out[3], S32({3}, {32, 29, 0}), 0, "clz");
}

TEST(XlaFormsGlobal, ShardyShardMapRunsOnItsShards) {
  // psum over 4 devices of x*2 sliced by rows: every device's [1,2] shard
  // doubled and summed; the result is replicated.
  auto m = Parse(R"(HloModule g, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=4]>}}
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
body { p = f32[1,2] parameter(0) two = f32[] constant(2) b = f32[1,2] broadcast(two), dimensions={}
  m = f32[1,2] multiply(p, b)
  ROOT r = f32[1,2] all-reduce(m), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add }
ENTRY e { x = f32[4,2] parameter(0), sharding={devices=[4,1]<=[4]}
  l = f32[1,2] custom-call(x), custom_call_target="xla.sdy.GlobalToLocalShape", frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\"x\"}>"}
  c = f32[1,2] call(l), to_apply=body
  ROOT g = f32[1,2] custom-call(c), custom_call_target="xla.sdy.LocalToGlobalShape", frontend_attributes={xla.sdy.manual_axes="#sdy<manual_axes{\"x\"}>",xla.sdy.out_shardings="#sdy.sharding_per_value<[<@mesh, [{}, {}]>]>"} })");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(hlo::IsGlobalProgram(*m));
  ASSERT_TRUE(hlo::LowerGlobalProgram(m.get()).ok());
  ASSERT_TRUE(hlo::VerifyModule(*m).ok());
  EXPECT_EQ(m->num_partitions(), 4);
  std::vector<std::vector<Literal>> args(4);
  for (auto& a : args) a.push_back(F32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  auto r = RunSpmd(*m, args, RunOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 4u);
  for (const Literal& o : r->outputs) ExpectNear(o, F32({1, 2}, {32, 40}), 0, "psum");
}

}  // namespace
}  // namespace tpuoff::runtime::testing
