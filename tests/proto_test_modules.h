// Builder-made modules that together use every opcode and every attribute
// the proto format carries. Shared by tests/proto_format_test.cc (round
// trips) and the proto fuzzer's seed corpus.
#ifndef TPUOFF_TESTS_PROTO_TEST_MODULES_H_
#define TPUOFF_TESTS_PROTO_TEST_MODULES_H_

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlo/ir/builder.h"
#include "hlo/text/text_parser.h"

namespace tpuoff::hlo::test_modules {

using ModuleOr = absl::StatusOr<std::unique_ptr<HloModule>>;

inline Shape F32(std::vector<int64_t> dims) { return Shape(PrimitiveType::kF32, std::move(dims)); }
inline Shape S32(std::vector<int64_t> dims) { return Shape(PrimitiveType::kS32, std::move(dims)); }

// Every elementwise opcode from the opcode table, compares, select, clamp,
// converts and copy.
inline ModuleOr ElementwiseModule() {
  XlaBuilder b("elementwise");
  XlaOp x = b.Parameter(0, F32({4, 8}), "x");
  XlaOp y = b.Parameter(1, F32({4, 8}), "y");
  XlaOp i = b.Parameter(2, S32({4, 8}), "i");
  XlaOp j = b.Parameter(3, S32({4, 8}), "j");
  std::vector<XlaOp> outs;
  for (int k = 0; k < NumOpcodes(); ++k) {
    const auto op = static_cast<HloOpcode>(k);
    const bool integer = op == HloOpcode::kNot || op == HloOpcode::kAnd ||
                         op == HloOpcode::kOr || op == HloOpcode::kXor ||
                         op == HloOpcode::kShiftLeft || op == HloOpcode::kShiftRightLogical ||
                         op == HloOpcode::kShiftRightArithmetic ||
                         op == HloOpcode::kPopulationCount || op == HloOpcode::kClz ||
                         op == HloOpcode::kMulhi;
    if (IsElementwiseUnary(op)) outs.push_back(b.Unary(op, integer ? i : x));
    if (IsElementwiseBinary(op)) outs.push_back(integer ? b.Binary(op, i, j) : b.Binary(op, x, y));
  }
  outs.push_back(b.AddOp(HloOpcode::kIsFinite, {x}));
  for (ComparisonDirection d : {ComparisonDirection::kEq, ComparisonDirection::kNe,
                                ComparisonDirection::kGe, ComparisonDirection::kLe,
                                ComparisonDirection::kLt}) {
    outs.push_back(b.Compare(x, y, d));
  }
  XlaOp gt = b.Compare(x, y, ComparisonDirection::kGt);
  b.SetName(gt, "compare_gt");
  if (gt.valid()) gt.instruction()->mutable_attrs()->comparison_type = "TOTALORDER";
  outs.push_back(gt);
  outs.push_back(b.Select(b.Compare(i, j, ComparisonDirection::kLt), x, y));
  outs.push_back(b.Clamp(y, x, y));
  outs.push_back(b.Convert(x, PrimitiveType::kBF16));
  outs.push_back(b.BitcastConvert(x, PrimitiveType::kS32));
  outs.push_back(b.AddOp(HloOpcode::kCopy, {x}));
  return b.Build(b.Tuple(outs));
}

// Layout-changing and data-movement ops; also a dead instruction.
inline ModuleOr ShapesModule() {
  XlaBuilder b("shapes");
  XlaOp x = b.Parameter(0, F32({2, 3, 4}), "x");
  XlaOp idx = b.ConstantS32(1);
  Shape flat = F32({24});
  XlaOp ds = b.DynamicSlice(x, {idx, idx, idx}, {1, 2, 2});
  std::vector<XlaOp> outs = {
      b.BroadcastInDim(x, {5, 2, 3, 4}, {1, 2, 3}),
      b.Reshape(x, {6, 4}),
      b.AddOp(HloOpcode::kBitcast, {x}, {}, {}, &flat),
      b.Transpose(x, {2, 0, 1}),
      b.Reverse(x, {0, 2}),
      b.Slice(x, {0, 1, 0}, {2, 3, 4}, {1, 1, 2}),
      ds,
      b.DynamicUpdateSlice(x, ds, {idx, idx, idx}),
      b.Concatenate({x, x}, 1),
      b.Pad(x, b.ConstantF32(0), {{1, 0, 0}, {0, 2, 1}, {0, 0, 0}}),
      b.Iota(S32({3, 5}), 1),
  };
  Exp(x);  // dead: exported and imported all the same
  return b.Build(b.Tuple(outs));
}

// Reductions (single and variadic), dots, gather and scatter.
inline ModuleOr ReduceDotModule() {
  XlaBuilder b("reduce_dot");
  XlaOp x = b.Parameter(0, F32({8, 16}), "x");
  XlaOp w = b.Parameter(1, F32({16, 4}), "w");
  XlaOp idx = b.Parameter(2, S32({5, 1}), "idx");
  XlaOp lhs = b.Parameter(3, F32({2, 3, 4}), "lhs");
  XlaOp rhs = b.Parameter(4, F32({2, 4, 5}), "rhs");
  XlaOp init = b.ConstantF32(0);
  b.SetName(init, "init");
  XlaOp sum = b.Reduce(x, init, HloOpcode::kAdd, {1});

  auto argmax = b.CreateSubBuilder("argmax");
  {
    XlaOp av = argmax->Parameter(0, F32({}), "av");
    XlaOp ai = argmax->Parameter(1, S32({}), "ai");
    XlaOp bv = argmax->Parameter(2, F32({}), "bv");
    XlaOp bi = argmax->Parameter(3, S32({}), "bi");
    XlaOp ge = argmax->Compare(av, bv, ComparisonDirection::kGe);
    XlaOp root = argmax->Tuple({argmax->Select(ge, av, bv), argmax->Select(ge, ai, bi)});
    auto comp = argmax->BuildComputation(root);
    if (!comp.ok()) return comp.status();
    XlaOp iota = b.Iota(S32({8, 16}), 1);
    XlaOp am = b.Reduce({x, iota}, {b.ConstantF32(-INFINITY), b.ConstantS32(0)}, *comp, {1});
    sum = b.Tuple({sum, am});
  }
  XlaOp dot = b.Dot(x, w, {{1}, {0}, {}, {}});
  if (dot.valid()) dot.instruction()->mutable_attrs()->operand_precision = {"HIGHEST", "DEFAULT"};
  XlaOp bdot = b.Dot(lhs, rhs, {{2}, {1}, {0}, {0}});
  b.SetName(bdot, "batch_dot");
  GatherDimensionNumbers g;
  g.offset_dims = {1};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  XlaOp gather = b.Gather(x, idx, g, {1, 16});
  if (gather.valid()) gather.instruction()->mutable_attrs()->indices_are_sorted = true;
  ScatterDimensionNumbers s;
  s.update_window_dims = {1};
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  XlaOp scatter = b.Scatter(x, idx, gather, b.ScalarReducer(HloOpcode::kAdd, PrimitiveType::kF32), s);
  if (scatter.valid()) scatter.instruction()->mutable_attrs()->unique_indices = true;
  return b.Build(b.Tuple({sum, dot, bdot, gather, scatter}));
}

// Tuples, while, call, conditional, fusion, barriers, tokens, custom calls,
// control predecessors.
inline ModuleOr ControlModule() {
  XlaBuilder b("control");
  XlaOp x = b.Parameter(0, F32({4}), "x");
  XlaOp sel = b.Parameter(1, S32({}), "sel");
  Shape state = Shape::Tuple({S32({}), F32({4})});

  auto cond = b.CreateSubBuilder("cond");
  XlaOp cs = cond->Parameter(0, state, "cs");
  auto cond_comp = cond->BuildComputation(
      cond->Compare(cond->GetTupleElement(cs, 0), cond->ConstantS32(10), ComparisonDirection::kLt));
  if (!cond_comp.ok()) return cond_comp.status();
  auto body = b.CreateSubBuilder("body");
  XlaOp bs = body->Parameter(0, state, "bs");
  XlaOp v = body->GetTupleElement(bs, 1);
  auto body_comp = body->BuildComputation(body->Tuple(
      {Add(body->GetTupleElement(bs, 0), body->ConstantS32(1)), Add(v, v)}));
  if (!body_comp.ok()) return body_comp.status();
  XlaOp loop = b.While(*cond_comp, *body_comp, b.Tuple({b.ConstantS32(0), x}));

  auto callee = b.CreateSubBuilder("callee");
  auto callee_comp = callee->BuildComputation(Exp(callee->Parameter(0, F32({4}), "cx")));
  if (!callee_comp.ok()) return callee_comp.status();
  XlaOp call = b.Call(*callee_comp, {x});

  std::vector<HloComputation*> branches;
  for (HloOpcode op : {HloOpcode::kNegate, HloOpcode::kAbs, HloOpcode::kExp}) {
    auto br = b.CreateSubBuilder("branch");
    auto comp = br->BuildComputation(br->Unary(op, br->Parameter(0, F32({4}), "bx")));
    if (!comp.ok()) return comp.status();
    branches.push_back(*comp);
  }
  XlaOp cond_op = b.Conditional(sel, branches, {x, x, x});

  auto fused = b.CreateSubBuilder("fused");
  auto fused_comp = fused->BuildComputation(
      Mul(fused->Parameter(0, F32({4}), "fa"), fused->Parameter(1, F32({4}), "fb")));
  if (!fused_comp.ok()) return fused_comp.status();
  (*fused_comp)->set_is_fusion_computation(true);
  HloAttributes fusion_attrs;
  fusion_attrs.fusion_kind = FusionKind::kOutput;
  XlaOp fusion = b.AddOp(HloOpcode::kFusion, {x, call}, fusion_attrs, {*fused_comp});

  XlaOp barrier = b.AddOp(HloOpcode::kOptimizationBarrier, {b.Tuple({x, fusion})});
  XlaOp token = b.AddOp(HloOpcode::kAfterAll, {});
  if (token.valid() && call.valid()) token.instruction()->AddControlPredecessor(call.instruction());

  HloAttributes cc;
  cc.custom_call_target = "my_target";
  cc.backend_config = "{\"k\": 1}";
  cc.custom_call_api_version = 4;
  cc.custom_call_has_side_effect = true;
  Shape cc_shape = Shape::Tuple({F32({4}), S32({})});
  XlaOp custom = b.AddOp(HloOpcode::kCustomCall, {x, token}, cc, {*callee_comp}, &cc_shape);
  b.SetName(custom, "custom");
  XlaOp plain = b.CustomCall("Sharding", {x}, F32({4}));
  return b.Build(b.Tuple({b.GetTupleElement(loop, 1), cond_op, barrier, custom, plain}));
}

inline ReplicaGroups IotaGroups(int64_t num_groups, int64_t size,
                                std::vector<int64_t> reshape, std::vector<int64_t> perm) {
  ReplicaGroups g;
  g.iota_form = true;
  g.iota_reshape_dims = std::move(reshape);
  g.iota_transpose_perm = std::move(perm);
  std::vector<int64_t> devices = ExpandIotaDevices(g.iota_reshape_dims, g.iota_transpose_perm);
  for (int64_t k = 0; k < num_groups; ++k) {
    g.groups.emplace_back(devices.begin() + k * size, devices.begin() + (k + 1) * size);
  }
  return g;
}

// Every collective, with iota, transposed-iota, explicit and empty groups.
inline ModuleOr CollectivesModule() {
  XlaBuilder b("collectives");
  XlaOp x = b.Parameter(0, F32({8, 16}), "x");
  HloComputation* add = b.ScalarReducer(HloOpcode::kAdd, PrimitiveType::kF32);
  ReplicaGroups explicit_groups;
  explicit_groups.groups = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  XlaOp ar = b.AllReduce(x, add, IotaGroups(1, 8, {8}, {}));
  XlaOp ag = b.AllGather(x, 0, IotaGroups(2, 4, {8}, {}));
  XlaOp rs = b.ReduceScatter(x, add, 0, explicit_groups);
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int64_t d = 0; d < 8; ++d) ring.push_back({d, (d + 1) % 8});
  XlaOp cp = b.CollectivePermute(x, ring);
  XlaOp a2a = b.AllToAll(x, 1, IotaGroups(4, 2, {2, 4}, {1, 0}));
  XlaOp ar_all = b.AllReduce(x, add, ReplicaGroups{});
  if (ar_all.valid()) {
    HloAttributes* a = ar_all.instruction()->mutable_attrs();
    a->channel_id.reset();
    a->use_global_device_ids = false;
    a->constrain_layout = true;
  }
  // The device count before Build: the verifier checks the groups against it.
  b.module()->set_num_partitions(8);
  return b.Build(b.Tuple({ar, ag, rs, cp, a2a, ar_all, b.PartitionId(), b.ReplicaId()}));
}

// Every constant element type, and a column-major constant.
inline ModuleOr LiteralsModule() {
  XlaBuilder b("literals");
  std::vector<XlaOp> outs;
  auto add = [&](const std::string& name, Literal lit) {
    XlaOp c = b.Constant(std::move(lit));
    b.SetName(c, name);
    outs.push_back(c);
  };
  using PT = PrimitiveType;
  add("c_pred", Literal::FromVector<int>(PT::kPred, {3}, {1, 0, 1}));
  add("c_s8", Literal::FromVector<int>(PT::kS8, {3}, {-128, 127, 5}));
  add("c_u8", Literal::FromVector<int>(PT::kU8, {2}, {0, 255}));
  add("c_s16", Literal::FromVector<int>(PT::kS16, {2}, {-32768, 3}));
  add("c_u16", Literal::FromVector<int>(PT::kU16, {2}, {65535, 0x1234}));
  add("c_s32", Literal::FromVector<int64_t>(PT::kS32, {2}, {-7, 2147483647}));
  add("c_u32", Literal::FromVector<int64_t>(PT::kU32, {2}, {4000000000, 1}));
  add("c_s64", Literal::FromVector<int64_t>(PT::kS64, {2}, {-(int64_t{1} << 40), 3}));
  Literal u64(Shape(PT::kU64, {2}));
  u64.data<uint64_t>()[0] = uint64_t{1} << 63 | 5;
  u64.data<uint64_t>()[1] = 7;
  add("c_u64", std::move(u64));
  add("c_f16", Literal::FromVector<float>(PT::kF16, {2}, {1.0f, -2.0f}));
  add("c_bf16", Literal::FromVector<float>(PT::kBF16, {2}, {1.0f, -2.0f}));
  add("c_f32", Literal::FromVector<float>(PT::kF32, {2, 2}, {1.5f, -0.0f, INFINITY, 3e-38f}));
  Literal f64(Shape::Scalar(PT::kF64));
  f64.SetFromDouble(0, 0.25);
  add("c_f64", std::move(f64));
  add("c_empty", Literal(Shape(PT::kF32, {0, 3})));
  Literal col = Literal::FromVector<float>(PT::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  col.mutable_shape()->set_minor_to_major({0, 1});
  add("c_colmajor", std::move(col));
  return b.Build(b.Tuple(outs));
}

// Metadata, frontend attributes, every sharding form, aliases, a declared
// entry layout, non-default layouts, and replica x partition counts.
inline ModuleOr AnnotationsModule() {
  XlaBuilder b("annotations");
  Shape col = F32({2, 3});
  col.set_minor_to_major({0, 1});
  XlaOp p0 = b.Parameter(0, col, "p0");
  XlaOp p1 = b.Parameter(1, F32({2, 3}), "p1");
  XlaOp c = b.Constant(Literal::FromVector<float>(PrimitiveType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  b.SetName(c, "c");
  XlaOp sum = Add(p0, p1);
  XlaOp prod = Mul(sum, c);
  XlaOp root = b.Tuple({sum, prod});
  b.SetName(root, "root");
  XlaOp pair = b.Tuple({p0, p1});  // dead; carries a nested tuple sharding
  b.SetName(pair, "pair");
  auto module = b.Build(root);
  if (!module.ok()) return module;

  HloInstruction* add = sum.instruction();
  OpMetadata* md = add->mutable_metadata();
  md->op_type = "Add";
  md->op_name = "jit(f)/add";
  md->source_file = "f.py";
  md->source_line = 12;
  (*add->mutable_frontend_attributes())["_xla_key"] = "value";
  (*(*module)->mutable_frontend_attributes())["module_key"] = "module_value";
  (*module)->SetOutputNames({"s", "p"});

  HloSharding explicit_tiles;
  explicit_tiles.type = HloSharding::Type::kTiled;
  explicit_tiles.tile_assignment_dims = {2, 1};
  explicit_tiles.devices = {1, 0};
  add->set_sharding(explicit_tiles);
  p0.instruction()->set_sharding(HloSharding::Replicated());
  p1.instruction()->set_sharding(HloSharding::IotaTiled({2, 1}));
  HloSharding maximal;
  maximal.type = HloSharding::Type::kMaximal;
  maximal.tile_assignment_dims = {1};
  maximal.devices = {3};
  c.instruction()->set_sharding(maximal);
  HloSharding transposed;
  transposed.type = HloSharding::Type::kTiled;
  transposed.tile_assignment_dims = {4, 2};
  transposed.iota_form = true;
  transposed.iota_reshape_dims = {2, 4};
  transposed.iota_transpose_perm = {1, 0};
  transposed.devices = ExpandIotaDevices({2, 4}, {1, 0});
  HloSharding partial = HloSharding::IotaTiled({2, 1, 4});
  partial.replicate_on_last_tile_dim = true;
  HloSharding manual_subgroup = HloSharding::IotaTiled({2, 1, 4});
  manual_subgroup.last_tile_dims = {4};  // OpSharding::MANUAL
  prod.instruction()->set_sharding(partial);
  HloSharding tuple;
  tuple.type = HloSharding::Type::kTuple;
  tuple.tuple_shardings = {HloSharding::Manual(), transposed};
  root.instruction()->set_sharding(tuple);
  HloSharding unknown;
  unknown.type = HloSharding::Type::kUnknown;
  HloSharding nested;
  nested.type = HloSharding::Type::kTuple;
  nested.tuple_shardings = {manual_subgroup, unknown};
  pair.instruction()->set_sharding(nested);

  (*module)->mutable_input_output_aliases()->push_back({{0}, 1, {}, true});
  (*module)->mutable_input_output_aliases()->push_back({{1}, 0, {}, false});
  Shape result_col = F32({2, 3});
  result_col.set_minor_to_major({0, 1});
  (*module)->set_entry_layout({col, F32({2, 3})}, Shape::Tuple({result_col, F32({2, 3})}));
  (*module)->set_replica_count(2);
  (*module)->set_num_partitions(8);  // the shardings above name devices 0..7
  return module;
}

// reduce-window: JAX's strided partial reduction (size=1x32 stride=1x32
// pad=0_0x13_13) and a variadic window with every WindowDimension field set.
inline ModuleOr ReduceWindowModule() {
  XlaBuilder b("reduce_window");
  XlaOp x = b.Parameter(0, F32({2, 70}), "x");
  XlaOp v = b.Parameter(1, F32({7}), "v");
  XlaOp i = b.Parameter(2, S32({7}), "i");
  HloAttributes tiles;
  tiles.window = {WindowDimension{}, WindowDimension{32, 32, 13, 13, 1, 1, false}};
  XlaOp tile_max = b.AddOp(HloOpcode::kReduceWindow, {x, b.ConstantF32(-INFINITY)}, tiles,
                           {b.ScalarReducer(HloOpcode::kMaximum, PrimitiveType::kF32)});
  auto pair_sum = b.CreateSubBuilder("pair_sum");
  XlaOp av = pair_sum->Parameter(0, F32({}), "av");
  XlaOp ai = pair_sum->Parameter(1, S32({}), "ai");
  XlaOp bv = pair_sum->Parameter(2, F32({}), "bv");
  XlaOp bi = pair_sum->Parameter(3, S32({}), "bi");
  auto comp = pair_sum->BuildComputation(pair_sum->Tuple({Add(av, bv), Add(ai, bi)}));
  if (!comp.ok()) return comp.status();
  HloAttributes all;
  all.window = {WindowDimension{2, 3, 1, -2, 3, 2, true}};
  XlaOp pairs = b.AddOp(HloOpcode::kReduceWindow, {v, i, b.ConstantF32(0), b.ConstantS32(0)}, all,
                        {*comp});
  return b.Build(b.Tuple({tile_max, pairs}));
}

struct NamedModule {
  std::string name;
  std::function<ModuleOr()> make;
};

// The ops of real JAX/XLA modules with their own attributes: convolution
// (groups, dilations, algorithm), sort, topk, select-and-scatter,
// reduce-precision, add-dependency.
inline ModuleOr XlaOpsModule() {
  return ParseHloText(R"(HloModule xla_ops
ge { a = f32[] parameter(0) b = f32[] parameter(1) ROOT g = pred[] compare(a, b), direction=GE }
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
lt { a = f32[] parameter(0) b = f32[] parameter(1) c = s32[] parameter(2) d = s32[] parameter(3)
     ROOT l = pred[] compare(a, b), direction=LT }
ENTRY e {
  x = f32[2,6,4] parameter(0) w = f32[3,2,6] parameter(1) i = s32[2,6,4] parameter(2)
  w2 = f32[2,3,4] parameter(3)
  c = f32[2,6,6] convolution(x, w), window={size=3 pad=1_1 lhs_dilate=1 rhs_dilate=1}, dim_labels=b0f_0io->b0f, feature_group_count=2, algorithm=dot_f32_f32_f32
  g = f32[2,6,4] convolution(x, w2), window={size=3 pad=1_1 rhs_reversal=1}, dim_labels=f0b_i0o->b0f, batch_group_count=2
  s = (f32[2,6,4], s32[2,6,4]) sort(x, i), dimensions={1}, is_stable=true, to_apply=lt
  t = (f32[2,6,2], s32[2,6,2]) topk(x), k=2, largest=true
  z = f32[] constant(0)
  p = f32[2,3,2] reduce-window(x, z), window={size=1x2x2 stride=1x2x2}, to_apply=add
  sas = f32[2,6,4] select-and-scatter(x, p, z), window={size=1x2x2 stride=1x2x2}, select=ge, scatter=add
  r = f32[2,6,4] reduce-precision(x), exponent_bits=5, mantissa_bits=10
  tok = token[] after-all()
  d = f32[2,6,4] add-dependency(r, tok)
  ROOT out = (f32[2,6,6], f32[2,6,4], (f32[2,6,4], s32[2,6,4]), (f32[2,6,2], s32[2,6,2]), f32[2,6,4], f32[2,6,4]) tuple(c, g, s, t, sas, d)
})");
}

inline std::vector<NamedModule> AllModules() {
  return {{"Elementwise", ElementwiseModule}, {"Shapes", ShapesModule},
          {"ReduceDot", ReduceDotModule},     {"Control", ControlModule},
          {"Collectives", CollectivesModule}, {"Literals", LiteralsModule},
          {"Annotations", AnnotationsModule}, {"ReduceWindow", ReduceWindowModule},
          {"XlaOps", XlaOpsModule}};
}

}  // namespace tpuoff::hlo::test_modules

#endif  // TPUOFF_TESTS_PROTO_TEST_MODULES_H_
