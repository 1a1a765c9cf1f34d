// HloModuleProto import/export: IR -> proto -> IR round trips (binary and
// JSON) over builder-made modules covering every opcode and attribute, the
// wire facts XLA's loader depends on, and rejection of malformed input.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/ir/builder.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/verifier.h"
#include "tests/proto_test_modules.h"
#if __has_include("proto/hlo.pb.h")
#include "proto/hlo.pb.h"
#else
#include "hlo.pb.h"
#endif

namespace tpuoff::hlo {
namespace {

using ::testing::HasSubstr;
using test_modules::NamedModule;

// ---- Structural comparison ----------------------------------------------------

std::string Names(const std::vector<HloInstruction*>& instrs) {
  std::string out;
  for (const HloInstruction* i : instrs) out += i->name() + ",";
  return out;
}

std::string Names(const std::vector<HloComputation*>& comps) {
  std::string out;
  for (const HloComputation* c : comps) out += c->name() + ",";
  return out;
}

// The declared entry layout, or the entry computation's own signature.
std::pair<std::vector<Shape>, Shape> EntryLayout(const HloModule& m) {
  if (m.entry_parameter_layouts().has_value()) {
    return {*m.entry_parameter_layouts(), m.entry_result_layout()};
  }
  return {m.entry()->ParameterShapes(), m.entry()->root()->shape()};
}

// Field-by-field equality of two modules, with messages naming the place.
void ExpectSameModule(const HloModule& a, const HloModule& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_NE(a.entry(), nullptr);
  ASSERT_NE(b.entry(), nullptr);
  EXPECT_EQ(a.entry()->name(), b.entry()->name());
  EXPECT_EQ(a.num_partitions(), b.num_partitions());
  EXPECT_EQ(a.replica_count(), b.replica_count());
  EXPECT_EQ(a.frontend_attributes(), b.frontend_attributes());
  EXPECT_EQ(a.input_output_aliases(), b.input_output_aliases());
  // A proto always carries the entry layout (host_program_shape); the import
  // records it only when it differs from the entry's own shapes, so compare
  // the effective layouts.
  EXPECT_EQ(EntryLayout(a), EntryLayout(b));
  ASSERT_EQ(a.computations().size(), b.computations().size());
  for (size_t c = 0; c < a.computations().size(); ++c) {
    const HloComputation& ca = *a.computations()[c];
    const HloComputation& cb = *b.computations()[c];
    SCOPED_TRACE("computation " + ca.name());
    EXPECT_EQ(ca.name(), cb.name());
    EXPECT_EQ(ca.is_fusion_computation(), cb.is_fusion_computation());
    EXPECT_EQ(ca.execution_thread(), cb.execution_thread());
    ASSERT_EQ(ca.instruction_count(), cb.instruction_count());
    ASSERT_NE(cb.root(), nullptr);
    EXPECT_EQ(ca.root()->name(), cb.root()->name());
    for (int64_t k = 0; k < ca.instruction_count(); ++k) {
      const HloInstruction& ia = *ca.instructions()[k];
      const HloInstruction& ib = *cb.instructions()[k];
      SCOPED_TRACE("instruction " + ia.name());
      EXPECT_EQ(ia.name(), ib.name());
      EXPECT_EQ(ia.opcode(), ib.opcode());
      EXPECT_EQ(ia.shape(), ib.shape())
          << ia.shape().ToString(true) << " vs " << ib.shape().ToString(true);
      EXPECT_EQ(Names(ia.operands()), Names(ib.operands()));
      EXPECT_EQ(Names(ia.called_computations()), Names(ib.called_computations()));
      EXPECT_EQ(Names(ia.control_predecessors()), Names(ib.control_predecessors()));
      EXPECT_TRUE(ia.attrs() == ib.attrs());
      EXPECT_EQ(ia.has_literal(), ib.has_literal());
      if (ia.has_literal() && ib.has_literal()) {
        EXPECT_TRUE(ia.literal() == ib.literal());
      }
      EXPECT_EQ(ia.metadata(), ib.metadata());
      EXPECT_EQ(ia.frontend_attributes(), ib.frontend_attributes());
      EXPECT_EQ(ia.sharding().has_value(), ib.sharding().has_value());
      if (ia.sharding().has_value() && ib.sharding().has_value()) {
        EXPECT_TRUE(*ia.sharding() == *ib.sharding());
      }
    }
  }
}

xla::HloModuleProto ToProto(const HloModule& module) {
  absl::StatusOr<std::string> bytes = ModuleToProtoBytes(module);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  xla::HloModuleProto proto;
  EXPECT_TRUE(bytes.ok() && proto.ParseFromString(*bytes));
  return proto;
}

absl::StatusOr<std::unique_ptr<HloModule>> FromProto(const xla::HloModuleProto& proto) {
  return ModuleFromProtoBytes(proto.SerializeAsString());
}

// ---- Round trips over the builder-made modules ------------------------------------

class ProtoRoundTrip : public ::testing::TestWithParam<NamedModule> {};

TEST_P(ProtoRoundTrip, Binary) {
  auto original = GetParam().make();
  ASSERT_TRUE(original.ok()) << original.status();
  absl::StatusOr<std::string> bytes = ModuleToProtoBytes(**original);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto imported = ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(VerifyModule(**imported).ok()) << VerifyModule(**imported);
  EXPECT_EQ(PrintModule(**original), PrintModule(**imported));
  ExpectSameModule(**original, **imported);
  // Exporting the import again gives the same bytes: ids and order are stable.
  absl::StatusOr<std::string> again = ModuleToProtoBytes(**imported);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*bytes, *again);
}

TEST_P(ProtoRoundTrip, Json) {
  auto original = GetParam().make();
  ASSERT_TRUE(original.ok()) << original.status();
  absl::StatusOr<std::string> json = ModuleToProtoJson(**original);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"host_program_shape\""));
  auto imported = ModuleFromProtoJson(*json);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(PrintModule(**original), PrintModule(**imported));
  ExpectSameModule(**original, **imported);
  // JSON and binary describe the same message (negative zeros included).
  EXPECT_EQ(*ModuleToProtoBytes(**imported), *ModuleToProtoBytes(**original));
}

TEST_P(ProtoRoundTrip, ProtoInvariantsXlaRelies) {
  auto module = GetParam().make();
  ASSERT_TRUE(module.ok()) << module.status();
  xla::HloModuleProto proto = ToProto(**module);
  ASSERT_TRUE(proto.has_host_program_shape());
  EXPECT_EQ(proto.host_program_shape().parameters_size(),
            (*module)->entry()->num_parameters());
  EXPECT_EQ(proto.host_program_shape().parameter_names_size(),
            (*module)->entry()->num_parameters());
  std::set<int64_t> comp_ids, instr_ids;
  bool entry_found = false;
  for (const auto& comp : proto.computations()) {
    ASSERT_TRUE(comp_ids.insert(comp.id()).second) << "duplicate computation id";
    if (comp.id() == proto.entry_computation_id()) {
      entry_found = true;
      EXPECT_EQ(comp.name(), proto.entry_computation_name());
    }
    std::set<int64_t> earlier;
    bool root_found = false;
    for (const auto& instr : comp.instructions()) {
      SCOPED_TRACE(instr.name());
      for (int64_t id : instr.operand_ids()) EXPECT_TRUE(earlier.count(id)) << id;
      for (int64_t id : instr.control_predecessor_ids()) EXPECT_TRUE(earlier.count(id));
      // Callees before callers.
      for (int64_t id : instr.called_computation_ids()) EXPECT_TRUE(comp_ids.count(id));
      ASSERT_TRUE(instr_ids.insert(instr.id()).second) << "duplicate instruction id";
      earlier.insert(instr.id());
      root_found = root_found || instr.id() == comp.root_id();
      // Every array shape carries a layout (XLA reads an absent one as "unset").
      if (instr.shape().element_type() != xla::TUPLE &&
          instr.shape().element_type() != xla::TOKEN) {
        EXPECT_TRUE(instr.shape().has_layout());
        EXPECT_EQ(instr.shape().layout().minor_to_major_size(),
                  instr.shape().dimensions_size());
      }
      if (instr.opcode() == "constant") {
        ASSERT_TRUE(instr.has_literal());
        EXPECT_EQ(instr.literal().shape().SerializeAsString(),
                  instr.shape().SerializeAsString());
      }
    }
    EXPECT_TRUE(root_found);
    EXPECT_EQ(comp.program_shape().parameters_size(),
              comp.program_shape().parameter_names_size());
  }
  EXPECT_TRUE(entry_found);
}

INSTANTIATE_TEST_SUITE_P(BuilderModules, ProtoRoundTrip,
                         ::testing::ValuesIn(test_modules::AllModules()),
                         [](const auto& info) { return info.param.name; });

// ---- Round trips over the text corpus ----------------------------------------------

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> files;
  const std::filesystem::path dir = std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests/corpus";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// protobuf's JSON mapping spells every NaN "NaN": payload and sign cannot
// survive it (binary keeps them). Canonicalise `-nan(0x..)` forms to `nan`.
std::string CanonicalNans(const std::string& text) {
  return std::regex_replace(text, std::regex(R"(-?nan(\(0x[0-9a-f]+\))?)"), "nan");
}

class CorpusProtoRoundTrip : public ::testing::TestWithParam<std::string> {};

// text -> IR -> proto bytes -> IR prints exactly as the parsed module, and
// likewise through JSON.
TEST_P(CorpusProtoRoundTrip, BinaryAndJson) {
  auto parsed = ParseHloText(ReadFile(GetParam()), GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::string text = PrintModule(**parsed);
  absl::StatusOr<std::string> bytes = ModuleToProtoBytes(**parsed);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto from_bytes = ModuleFromProtoBytes(*bytes);
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status();
  EXPECT_EQ(text, PrintModule(**from_bytes));
  ExpectSameModule(**parsed, **from_bytes);
  absl::StatusOr<std::string> json = ModuleToProtoJson(**parsed);
  ASSERT_TRUE(json.ok()) << json.status();
  auto from_json = ModuleFromProtoJson(*json);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(CanonicalNans(text), PrintModule(**from_json));
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CorpusProtoRoundTrip);
INSTANTIATE_TEST_SUITE_P(Corpus, CorpusProtoRoundTrip, ::testing::ValuesIn(CorpusFiles()),
                         [](const auto& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The fuzzer's seeds (tests/fuzz/corpus_proto) are exports of the builder
// modules (binary, plus JSON for two small ones). Each must import and
// verify; TPUOFF_UPDATE_PROTO_SEEDS=1 rewrites them from the current code.
TEST(ProtoFormatTest, FuzzSeedsImport) {
  const std::filesystem::path dir =
      std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests/fuzz/corpus_proto";
  const char* update = std::getenv("TPUOFF_UPDATE_PROTO_SEEDS");
  const bool rewrite = update != nullptr && std::string(update) == "1";
  for (const NamedModule& m : test_modules::AllModules()) {
    const bool with_json = m.name == "Annotations" || m.name == "Control";
    if (rewrite) {
      auto module = m.make();
      ASSERT_TRUE(module.ok()) << module.status();
      std::filesystem::create_directories(dir);
      std::ofstream(dir / (m.name + ".pb"), std::ios::binary) << *ModuleToProtoBytes(**module);
      if (with_json) std::ofstream(dir / (m.name + ".json")) << *ModuleToProtoJson(**module);
    }
    auto imported = ModuleFromProtoBytes(ReadFile((dir / (m.name + ".pb")).string()));
    ASSERT_TRUE(imported.ok()) << m.name << ": " << imported.status();
    EXPECT_TRUE(VerifyModule(**imported).ok()) << m.name;
    if (with_json) {
      auto from_json = ModuleFromProtoJson(ReadFile((dir / (m.name + ".json")).string()));
      ASSERT_TRUE(from_json.ok()) << m.name << ": " << from_json.status();
      EXPECT_EQ(PrintModule(**imported), PrintModule(**from_json));
    }
  }
}

TEST(ProtoFormatTest, BuilderModulesCoverEveryOpcode) {
  std::set<HloOpcode> seen;
  for (const NamedModule& m : test_modules::AllModules()) {
    auto module = m.make();
    ASSERT_TRUE(module.ok()) << m.name << ": " << module.status();
    for (const auto& c : (*module)->computations()) {
      for (const auto& i : c->instructions()) seen.insert(i->opcode());
    }
  }
  // XLA opcodes that parse, verify and print but whose own attributes
  // (fft_type, rng algorithm, async wrappers, batch-norm epsilon, ...) are
  // not modelled yet: outside the round-trip set (issue 16 follow-up).
  const std::set<HloOpcode> not_modelled = {
      HloOpcode::kReal, HloOpcode::kImag, HloOpcode::kComplex, HloOpcode::kMap,
      HloOpcode::kDomain, HloOpcode::kCollectiveBroadcast, HloOpcode::kRaggedAllToAll,
      HloOpcode::kCollectiveReduce, HloOpcode::kAllGatherStart, HloOpcode::kAllGatherDone,
      HloOpcode::kAllReduceStart, HloOpcode::kAllReduceDone, HloOpcode::kCollectivePermuteStart,
      HloOpcode::kCollectivePermuteDone, HloOpcode::kAsyncStart, HloOpcode::kAsyncUpdate,
      HloOpcode::kAsyncDone, HloOpcode::kCopyStart, HloOpcode::kCopyDone, HloOpcode::kSend,
      HloOpcode::kSendDone, HloOpcode::kRecv, HloOpcode::kRecvDone, HloOpcode::kInfeed,
      HloOpcode::kOutfeed, HloOpcode::kFft, HloOpcode::kCholesky, HloOpcode::kTriangularSolve,
      HloOpcode::kBatchNormTraining, HloOpcode::kBatchNormInference, HloOpcode::kBatchNormGrad,
      HloOpcode::kRng, HloOpcode::kRngBitGenerator, HloOpcode::kRngGetAndUpdateState,
      HloOpcode::kStochasticConvert, HloOpcode::kGetDimensionSize, HloOpcode::kSetDimensionSize,
      HloOpcode::kDynamicReshape, HloOpcode::kRaggedDot, HloOpcode::kScaledDot, HloOpcode::kScan,
      HloOpcode::kShuffle};
  for (int i = 0; i < NumOpcodes(); ++i) {
    const auto op = static_cast<HloOpcode>(i);
    if (not_modelled.count(op)) continue;
    EXPECT_TRUE(seen.count(op)) << HloOpcodeString(op) << " is not covered";
  }
}

// ---- Specific wire facts --------------------------------------------------------------

const xla::HloInstructionProto* FindInstr(const xla::HloModuleProto& proto,
                                          const std::string& name) {
  for (const auto& c : proto.computations()) {
    for (const auto& i : c.instructions()) {
      if (i.name() == name) return &i;
    }
  }
  return nullptr;
}

xla::HloInstructionProto* MutableInstr(xla::HloModuleProto* proto, const std::string& name) {
  for (auto& c : *proto->mutable_computations()) {
    for (auto& i : *c.mutable_instructions()) {
      if (i.name() == name) return &i;
    }
  }
  return nullptr;
}

TEST(ProtoFormatTest, LiteralsUseTypedFieldsInLayoutOrder) {
  auto module = test_modules::LiteralsModule();
  ASSERT_TRUE(module.ok()) << module.status();
  xla::HloModuleProto proto = ToProto(**module);
  const auto* bf16 = FindInstr(proto, "c_bf16");
  ASSERT_NE(bf16, nullptr);
  // bf16 1.0 = 0x3f80, -2.0 = 0xc000, little-endian byte pairs.
  EXPECT_EQ(bf16->literal().bf16s(), std::string("\x80\x3f\x00\xc0", 4));
  const auto* f16 = FindInstr(proto, "c_f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ(f16->literal().f16s(), std::string("\x00\x3c\x00\xc0", 4));  // 1.0, -2.0
  const auto* s8 = FindInstr(proto, "c_s8");
  ASSERT_NE(s8, nullptr);
  EXPECT_EQ(s8->literal().s8s(), std::string("\x80\x7f\x05", 3));
  const auto* u16 = FindInstr(proto, "c_u16");
  ASSERT_NE(u16, nullptr);
  EXPECT_EQ(u16->literal().u16s(), std::string("\xff\xff\x34\x12", 4));
  const auto* pred = FindInstr(proto, "c_pred");
  ASSERT_NE(pred, nullptr);
  EXPECT_THAT(pred->literal().preds(), ::testing::ElementsAre(true, false, true));
  const auto* u64 = FindInstr(proto, "c_u64");
  ASSERT_NE(u64, nullptr);
  EXPECT_THAT(u64->literal().u64s(),
              ::testing::ElementsAre(uint64_t{1} << 63 | 5, 7));
  const auto* s64 = FindInstr(proto, "c_s64");
  ASSERT_NE(s64, nullptr);
  EXPECT_THAT(s64->literal().s64s(), ::testing::ElementsAre(-(int64_t{1} << 40), 3));
  // f32[2,3]{0,1}: values 0..5 row-major are stored column-major.
  const auto* col = FindInstr(proto, "c_colmajor");
  ASSERT_NE(col, nullptr);
  EXPECT_THAT(col->shape().layout().minor_to_major(), ::testing::ElementsAre(0, 1));
  EXPECT_THAT(col->literal().shape().layout().minor_to_major(),
              ::testing::ElementsAre(0, 1));
  EXPECT_THAT(col->literal().f32s(), ::testing::ElementsAre(0, 3, 1, 4, 2, 5));
  // A scalar's layout is present and empty.
  const auto* scalar = FindInstr(proto, "c_f64");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape().has_layout());
  EXPECT_TRUE(scalar->literal().shape().has_layout());
}

TEST(ProtoFormatTest, AttributesLandInXlaFields) {
  auto shapes = test_modules::ShapesModule();
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  xla::HloModuleProto proto = ToProto(**shapes);
  const auto* iota = FindInstr(proto, "iota");
  ASSERT_NE(iota, nullptr);
  EXPECT_THAT(iota->dimensions(), ::testing::ElementsAre(1));
  const auto* pad = FindInstr(proto, "pad");
  ASSERT_NE(pad, nullptr);
  ASSERT_EQ(pad->padding_config().dimensions_size(), 3);
  EXPECT_EQ(pad->padding_config().dimensions(1).edge_padding_high(), 2);
  EXPECT_EQ(pad->padding_config().dimensions(1).interior_padding(), 1);
  const auto* slice = FindInstr(proto, "slice");
  ASSERT_NE(slice, nullptr);
  ASSERT_EQ(slice->slice_dimensions_size(), 3);
  EXPECT_EQ(slice->slice_dimensions(2).stride(), 2);
  const auto* ds = FindInstr(proto, "dynamic-slice");
  ASSERT_NE(ds, nullptr);
  EXPECT_THAT(ds->dynamic_slice_sizes(), ::testing::ElementsAre(1, 2, 2));

  auto elementwise = test_modules::ElementwiseModule();
  ASSERT_TRUE(elementwise.ok()) << elementwise.status();
  proto = ToProto(**elementwise);
  const auto* gt = FindInstr(proto, "compare_gt");
  ASSERT_NE(gt, nullptr);
  EXPECT_EQ(gt->comparison_direction(), "GT");
  EXPECT_EQ(gt->comparison_type(), "TOTALORDER");

  auto reduce = test_modules::ReduceDotModule();
  ASSERT_TRUE(reduce.ok()) << reduce.status();
  proto = ToProto(**reduce);
  const auto* dot = FindInstr(proto, "dot");
  ASSERT_NE(dot, nullptr);
  EXPECT_THAT(dot->dot_dimension_numbers().lhs_contracting_dimensions(),
              ::testing::ElementsAre(1));
  EXPECT_THAT(dot->precision_config().operand_precision(),
              ::testing::ElementsAre(xla::PrecisionConfig::HIGHEST, xla::PrecisionConfig::DEFAULT));
  const auto* bdot = FindInstr(proto, "batch_dot");
  ASSERT_NE(bdot, nullptr);
  // An unspecified precision is written as XLA writes it: DEFAULT per operand.
  EXPECT_EQ(bdot->precision_config().operand_precision_size(), 2);
  const auto* gather = FindInstr(proto, "gather");
  ASSERT_NE(gather, nullptr);
  EXPECT_THAT(gather->gather_slice_sizes(), ::testing::ElementsAre(1, 16));
  EXPECT_TRUE(gather->indices_are_sorted());
  const auto* scatter = FindInstr(proto, "scatter");
  ASSERT_NE(scatter, nullptr);
  EXPECT_TRUE(scatter->unique_indices());
  EXPECT_THAT(scatter->scatter_dimension_numbers().scatter_dims_to_operand_dims(),
              ::testing::ElementsAre(0));

  auto control = test_modules::ControlModule();
  ASSERT_TRUE(control.ok()) << control.status();
  proto = ToProto(**control);
  const auto* cc = FindInstr(proto, "custom");
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(cc->custom_call_target(), "my_target");
  EXPECT_EQ(cc->backend_config(), "{\"k\": 1}");
  EXPECT_EQ(cc->custom_call_api_version(), xla::API_VERSION_TYPED_FFI);
  EXPECT_TRUE(cc->custom_call_has_side_effect());
  const auto* fusion = FindInstr(proto, "fusion");
  ASSERT_NE(fusion, nullptr);
  EXPECT_EQ(fusion->fusion_kind(), "kOutput");
  const auto* loop = FindInstr(proto, "while");
  ASSERT_NE(loop, nullptr);
  ASSERT_EQ(loop->called_computation_ids_size(), 2);
  // body first, then condition
  for (const auto& c : proto.computations()) {
    if (c.id() == loop->called_computation_ids(0)) EXPECT_EQ(c.name(), "body");
    if (c.id() == loop->called_computation_ids(1)) EXPECT_EQ(c.name(), "cond");
  }
}

TEST(ProtoFormatTest, CollectivesAndDeviceCounts) {
  auto module = test_modules::CollectivesModule();
  ASSERT_TRUE(module.ok()) << module.status();
  xla::HloModuleProto proto = ToProto(**module);
  // Partition count travels as the static device assignment.
  ASSERT_TRUE(proto.has_device_assignment());
  EXPECT_EQ(proto.device_assignment().replica_count(), 1);
  EXPECT_EQ(proto.device_assignment().computation_count(), 8);
  ASSERT_EQ(proto.device_assignment().computation_devices_size(), 8);
  EXPECT_THAT(proto.device_assignment().computation_devices(3).replica_device_ids(),
              ::testing::ElementsAre(3));
  const auto* ag = FindInstr(proto, "all-gather");
  ASSERT_NE(ag, nullptr);
  EXPECT_THAT(ag->dimensions(), ::testing::ElementsAre(0));
  EXPECT_TRUE(ag->use_global_device_ids());
  EXPECT_GT(ag->channel_id(), 0);
  // Iota groups: explicit legacy list (read first by every XLA version) plus
  // the compact form.
  ASSERT_EQ(ag->replica_groups_size(), 2);
  EXPECT_THAT(ag->replica_groups(1).replica_ids(), ::testing::ElementsAre(4, 5, 6, 7));
  const auto& iota = ag->collective_device_list().iota_replica_group_list();
  EXPECT_EQ(iota.num_replica_groups(), 2);
  EXPECT_EQ(iota.num_devices_per_group(), 4);
  EXPECT_THAT(iota.iota_reshape_dims(), ::testing::ElementsAre(8));
  EXPECT_THAT(iota.iota_transpose_perm(), ::testing::ElementsAre(0));
  const auto* a2a = FindInstr(proto, "all-to-all");
  ASSERT_NE(a2a, nullptr);
  EXPECT_THAT(a2a->replica_groups(0).replica_ids(), ::testing::ElementsAre(0, 4));
  EXPECT_THAT(a2a->dimensions(), ::testing::ElementsAre(1));
  const auto* rs = FindInstr(proto, "reduce-scatter");
  ASSERT_NE(rs, nullptr);
  EXPECT_FALSE(rs->has_collective_device_list());  // explicit groups only
  const auto* cp = FindInstr(proto, "collective-permute");
  ASSERT_NE(cp, nullptr);
  ASSERT_EQ(cp->source_target_pairs_size(), 8);
  EXPECT_EQ(cp->source_target_pairs(7).target(), 0);

  // An XLA-style proto with only the compact form imports to the same groups.
  xla::HloInstructionProto* ag_mut = MutableInstr(&proto, "all-gather");
  ag_mut->clear_replica_groups();
  auto imported = FromProto(proto);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ExpectSameModule(**module, **imported);
}

TEST(ProtoFormatTest, ShardingAliasesAndEntryLayout) {
  auto module = test_modules::AnnotationsModule();
  ASSERT_TRUE(module.ok()) << module.status();
  xla::HloModuleProto proto = ToProto(**module);
  EXPECT_EQ(proto.device_assignment().replica_count(), 2);
  EXPECT_EQ(proto.device_assignment().computation_count(), 8);
  EXPECT_THAT(proto.device_assignment().computation_devices(1).replica_device_ids(),
              ::testing::ElementsAre(2, 3));
  ASSERT_EQ(proto.input_output_alias().entries_size(), 2);
  EXPECT_EQ(proto.input_output_alias().entries(0).kind(), xla::MUST_ALIAS);
  EXPECT_EQ(proto.frontend_attributes().map().at("module_key"), "module_value");
  // The declared entry layout, not the computation's, is the host shape.
  EXPECT_THAT(proto.host_program_shape().result().tuple_shapes(0).layout().minor_to_major(),
              ::testing::ElementsAre(0, 1));
  const auto* p1 = FindInstr(proto, "p1");
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->sharding().type(), xla::OpSharding::OTHER);
  EXPECT_THAT(p1->sharding().tile_assignment_dimensions(), ::testing::ElementsAre(2, 1));
  EXPECT_THAT(p1->sharding().iota_reshape_dims(), ::testing::ElementsAre(2));
  EXPECT_EQ(p1->sharding().tile_assignment_devices_size(), 0);
  const auto* add = FindInstr(proto, "add");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(add->sharding().tile_assignment_devices(), ::testing::ElementsAre(1, 0));
  EXPECT_EQ(add->metadata().op_name(), "jit(f)/add");
  EXPECT_EQ(add->metadata().source_line(), 12);
  EXPECT_EQ(add->frontend_attributes().map().at("_xla_key"), "value");
  const auto* root = FindInstr(proto, "root");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->sharding().type(), xla::OpSharding::TUPLE);
  EXPECT_EQ(root->sharding().tuple_shardings(0).type(), xla::OpSharding::MANUAL);
  const auto* c = FindInstr(proto, "c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->sharding().type(), xla::OpSharding::MAXIMAL);
  EXPECT_THAT(c->sharding().tile_assignment_devices(), ::testing::ElementsAre(3));
}

TEST(ProtoFormatTest, ExportSortsOperandsBeforeUsers) {
  XlaBuilder b("reorder");
  XlaOp x = b.Parameter(0, Shape(PrimitiveType::kF32, {4}), "x");
  XlaOp neg = Neg(x);
  XlaOp e = Exp(x);
  auto module = b.Build(b.Tuple({neg, e}));
  ASSERT_TRUE(module.ok()) << module.status();
  neg.instruction()->ReplaceOperand(0, e.instruction());  // now uses a later op
  xla::HloModuleProto proto = ToProto(**module);
  const auto& instrs = proto.computations(0).instructions();
  std::vector<std::string> order;
  for (const auto& i : instrs) order.push_back(i.name());
  EXPECT_THAT(order, ::testing::ElementsAre("x", "exponential", "negate", "tuple"));
  auto imported = FromProto(proto);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_TRUE(VerifyModule(**imported).ok());

  // A cycle cannot be exported.
  e.instruction()->ReplaceOperand(0, neg.instruction());
  absl::StatusOr<std::string> bytes = ModuleToProtoBytes(**module);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.status().message(), HasSubstr("cycle"));
}

TEST(ProtoFormatTest, TupleLiteralImports) {
  auto module = test_modules::LiteralsModule();
  ASSERT_TRUE(module.ok()) << module.status();
  xla::HloModuleProto proto = ToProto(**module);
  xla::HloInstructionProto* c = MutableInstr(&proto, "c_f64");
  xla::LiteralProto scalar = c->literal();
  xla::LiteralProto tuple;
  tuple.mutable_shape()->set_element_type(xla::TUPLE);
  *tuple.mutable_shape()->add_tuple_shapes() = scalar.shape();
  *tuple.mutable_shape()->add_tuple_shapes() = scalar.shape();
  *tuple.add_tuple_literals() = scalar;
  *tuple.add_tuple_literals() = scalar;
  *c->mutable_literal() = tuple;
  *c->mutable_shape() = tuple.shape();
  auto imported = FromProto(proto);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const HloInstruction* ic = (*imported)->entry()->FindInstruction("c_f64");
  ASSERT_NE(ic, nullptr);
  ASSERT_EQ(ic->literal().tuple_elements().size(), 2u);
  EXPECT_EQ(ic->literal().tuple_elements()[1].GetAsDouble(0), 0.25);
}

TEST(ProtoFormatTest, JsonKeepsNegativeZero) {
  XlaBuilder b("negzero");
  XlaOp x = b.Parameter(0, Shape(PrimitiveType::kF32, {4}), "x");
  XlaOp r = b.Reduce(x, b.ConstantF32(-0.0f), HloOpcode::kAdd, {0});
  auto module = b.Build(r);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<std::string> json = ModuleToProtoJson(**module);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("-0.0"));
  // Other protobuf writers (XLA's dumps) spell it `-0`; that must not read as +0.
  std::string external = std::regex_replace(*json, std::regex("-0\\.0"), "-0");
  ASSERT_NE(external, *json);
  for (const std::string& text : {*json, external}) {
    auto imported = ModuleFromProtoJson(text);
    ASSERT_TRUE(imported.ok()) << imported.status();
    const HloInstruction* init = (*imported)->entry()->root()->operand(1);
    ASSERT_EQ(init->opcode(), HloOpcode::kConstant);
    EXPECT_TRUE(std::signbit(init->literal().GetAsDouble(0)));
  }
}

// ---- Malformed input ---------------------------------------------------------------

class ProtoImportErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto module = test_modules::ReduceDotModule();
    ASSERT_TRUE(module.ok()) << module.status();
    proto_ = ToProto(**module);
  }
  // Imports proto_ and expects failure with `code` and every piece of text.
  void ExpectError(absl::StatusCode code, const std::vector<std::string>& pieces) {
    auto result = FromProto(proto_);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), code) << result.status();
    for (const std::string& piece : pieces) {
      EXPECT_THAT(result.status().message(), HasSubstr(piece));
    }
  }
  xla::HloModuleProto proto_;
};

TEST_F(ProtoImportErrors, TruncatedBytes) {
  const std::string bytes = proto_.SerializeAsString();
  auto result = ModuleFromProtoBytes(bytes.substr(0, bytes.size() - 1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("not a valid serialized HloModuleProto"));
  // No prefix crashes. A prefix may end on a field boundary and still be a
  // well-formed module (e.g. without the trailing entry_computation_id, the
  // entry is found by name); then it must verify.
  int failures = 0;
  for (size_t n = 0; n < bytes.size(); n += 3) {
    auto prefix = ModuleFromProtoBytes(bytes.substr(0, n));
    if (!prefix.ok()) {
      ++failures;
      continue;
    }
    EXPECT_TRUE(VerifyModule(**prefix).ok()) << n << ": " << VerifyModule(**prefix);
  }
  EXPECT_GT(failures, static_cast<int>(bytes.size() / 3) * 9 / 10);
}

TEST_F(ProtoImportErrors, GarbageBytes) {
  auto result = ModuleFromProtoBytes("this is not a proto");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("not a valid serialized HloModuleProto"));
  auto empty = ModuleFromProtoBytes("");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("has no computations"));
  auto json = ModuleFromProtoJson("{\"computations\": [");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("JSON"));
}

TEST_F(ProtoImportErrors, BadOperandId) {
  MutableInstr(&proto_, "dot")->set_operand_ids(1, 9999);
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"computation 'main'", "instruction 'dot'", "operand_ids[1] = 9999",
               "names no instruction"});
}

TEST_F(ProtoImportErrors, ForwardOperandReference) {
  xla::HloInstructionProto* w = MutableInstr(&proto_, "w");
  w->set_opcode("negate");
  w->add_operand_ids(FindInstr(proto_, "dot")->id());  // defined later
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'w'", "operand_ids[0]", "later instruction"});
}

TEST_F(ProtoImportErrors, UnknownOpcode) {
  MutableInstr(&proto_, "dot")->set_opcode("frobnicate");
  ExpectError(absl::StatusCode::kUnimplemented,
              {"instruction 'dot'", "unknown opcode 'frobnicate'"});
}

TEST_F(ProtoImportErrors, LiteralSizeMismatch) {
  xla::HloInstructionProto* c = MutableInstr(&proto_, "init");
  ASSERT_NE(c, nullptr);
  c->mutable_literal()->add_f32s(2.0f);  // a scalar with two values
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'init'", "f32s holds 2 elements", "has 1"});
}

TEST_F(ProtoImportErrors, WrongOperandCount) {
  MutableInstr(&proto_, "dot")->add_operand_ids(FindInstr(proto_, "x")->id());
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'dot'", "takes 2 operands", "has 3"});
}

TEST_F(ProtoImportErrors, DuplicateInstructionId) {
  MutableInstr(&proto_, "w")->set_id(FindInstr(proto_, "x")->id());
  ExpectError(absl::StatusCode::kInvalidArgument, {"duplicate instruction id"});
}

TEST_F(ProtoImportErrors, ParameterNumberOutOfRange) {
  MutableInstr(&proto_, "w")->set_parameter_number(int64_t{1} << 60);
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'w'", "parameter_number 1152921504606846976"});
}

TEST_F(ProtoImportErrors, UnknownElementTypes) {
  MutableInstr(&proto_, "dot")->mutable_shape()->set_element_type(
      static_cast<xla::PrimitiveType>(999));
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'dot'", "shape", "unknown element_type 999"});
  MutableInstr(&proto_, "dot")->mutable_shape()->set_element_type(xla::F8E4M3FN);
  ExpectError(absl::StatusCode::kUnimplemented, {"element_type F8E4M3FN is not supported"});
}

TEST_F(ProtoImportErrors, BadDimensions) {
  MutableInstr(&proto_, "dot")->mutable_shape()->set_dimensions(0, -3);
  ExpectError(absl::StatusCode::kInvalidArgument, {"instruction 'dot'", "dimensions[0] = -3"});
  auto* shape = MutableInstr(&proto_, "dot")->mutable_shape();
  shape->set_dimensions(0, int64_t{1} << 30);
  shape->set_dimensions(1, int64_t{1} << 30);
  ExpectError(absl::StatusCode::kInvalidArgument, {"exceeds the limit"});
}

TEST_F(ProtoImportErrors, BadLayout) {
  auto* layout = MutableInstr(&proto_, "dot")->mutable_shape()->mutable_layout();
  layout->set_minor_to_major(1, 1);  // {1,0} -> {1,1}
  ExpectError(absl::StatusCode::kInvalidArgument, {"minor_to_major {1,1}", "not a permutation"});
}

TEST_F(ProtoImportErrors, TupleIndexOutOfRange) {
  auto module = test_modules::ControlModule();
  ASSERT_TRUE(module.ok()) << module.status();
  proto_ = ToProto(**module);
  xla::HloInstructionProto* gte = nullptr;
  for (auto& c : *proto_.mutable_computations()) {
    for (auto& i : *c.mutable_instructions()) {
      if (i.opcode() == "get-tuple-element") gte = &i;
    }
  }
  ASSERT_NE(gte, nullptr);
  gte->set_tuple_index(7);
  ExpectError(absl::StatusCode::kInvalidArgument, {"tuple_index 7 is out of range"});
}

// Convolution dimension numbers arrive unchecked from a proto (found by the
// proto_import fuzzer: the verifier read operand dimensions at whatever index
// the proto named). Each corruption must fail verification with its reason.
TEST(ProtoImportVerify, ConvolutionDimensionNumbersOutOfRange) {
  auto parsed = ParseHloText(R"(HloModule conv
ENTRY main {
  x = f32[2,5,5,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  ROOT c = f32[2,5,5,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})", "conv");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(VerifyModule(**parsed).ok()) << VerifyModule(**parsed);
  const xla::HloModuleProto good = ToProto(**parsed);
  using Dims = xla::ConvolutionDimensionNumbers;
  const std::vector<std::pair<std::function<void(Dims*)>, std::string>> cases = {
      {[](Dims* d) { d->set_input_batch_dimension(40); }, "input dimension numbers"},
      {[](Dims* d) { d->set_input_feature_dimension(-1); }, "input dimension numbers"},
      {[](Dims* d) { d->set_input_spatial_dimensions(1, 0); }, "input dimension numbers"},
      {[](Dims* d) { d->set_kernel_input_feature_dimension(7); }, "kernel dimension numbers"},
      {[](Dims* d) { d->set_kernel_spatial_dimensions(0, 3); }, "kernel dimension numbers"},
      {[](Dims* d) { d->add_kernel_spatial_dimensions(2); }, "spatial dimensions"},
      {[](Dims* d) { d->set_output_feature_dimension(int64_t{1} << 40); },
       "output dimension numbers"},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    xla::HloModuleProto proto = good;
    xla::HloInstructionProto* conv = MutableInstr(&proto, "c");
    ASSERT_NE(conv, nullptr);
    cases[k].first(conv->mutable_convolution_dimension_numbers());
    auto imported = FromProto(proto);
    if (!imported.ok()) continue;  // rejected on import: also fine
    const absl::Status verified = VerifyModule(**imported);
    ASSERT_FALSE(verified.ok()) << "case " << k;
    EXPECT_THAT(verified.message(), HasSubstr("convolution")) << "case " << k;
    EXPECT_THAT(verified.message(), HasSubstr(cases[k].second)) << "case " << k << ": " << verified;
  }
}

// Inputs the fuzzer once crashed on (tests/fuzz/corpus_proto/regress_*, kept
// as seeds): each must be refused, on import or by the verifier, with a
// status (the sanitizer build runs this test too).
TEST(ProtoImportVerify, FuzzerRegressionsAreRefused) {
  const std::filesystem::path dir =
      std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests/fuzz/corpus_proto";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("regress_", 0) != 0) continue;
    ++seen;
    auto imported = ModuleFromProtoBytes(ReadFile(entry.path().string()));
    if (!imported.ok()) continue;
    const absl::Status verified = VerifyModule(**imported);
    EXPECT_FALSE(verified.ok()) << name;
  }
  EXPECT_GE(seen, 2);
}

TEST_F(ProtoImportErrors, MissingEntry) {
  proto_.set_entry_computation_id(12345);
  ExpectError(absl::StatusCode::kInvalidArgument, {"missing entry computation"});
}

TEST_F(ProtoImportErrors, CalleeAfterCallerOrCycle) {
  // Point the reduce at the entry computation itself (a cycle).
  MutableInstr(&proto_, "reduce")->set_called_computation_ids(0, proto_.entry_computation_id());
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'reduce'", "called_computation_ids[0]", "callees must come before"});
}

TEST_F(ProtoImportErrors, DuplicateComputationId) {
  proto_.mutable_computations(1)->set_id(proto_.computations(0).id());
  ExpectError(absl::StatusCode::kInvalidArgument, {"duplicate computation id"});
}

TEST_F(ProtoImportErrors, MissingRoot) {
  proto_.mutable_computations(0)->set_root_id(424242);
  ExpectError(absl::StatusCode::kInvalidArgument, {"root_id 424242"});
}

TEST_F(ProtoImportErrors, BadSharding) {
  auto* sharding = MutableInstr(&proto_, "dot")->mutable_sharding();
  sharding->set_type(xla::OpSharding::OTHER);
  sharding->add_tile_assignment_dimensions(2);
  sharding->add_tile_assignment_dimensions(2);
  sharding->add_tile_assignment_devices(0);
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"instruction 'dot'", "sharding", "tile_assignment_devices has 1 entries"});
  sharding->clear_tile_assignment_devices();
  sharding->add_iota_reshape_dims(4);
  sharding->add_iota_transpose_perm(3);
  ExpectError(absl::StatusCode::kInvalidArgument, {"iota_transpose_perm [3]"});
}

TEST_F(ProtoImportErrors, BadAlias) {
  auto* alias = proto_.mutable_input_output_alias()->add_entries();
  alias->set_parameter_number(17);
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"input_output_alias.entries[0]", "parameter_number 17"});
}

}  // namespace
}  // namespace tpuoff::hlo
