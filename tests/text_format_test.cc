// HLO text format: corpus round trips (text -> IR -> verify -> text is a
// fixed point after one normalisation), exact float round trips, the syntax
// XLA and JAX print, and a table of malformed inputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/ir/float16.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/verifier.h"

namespace tpuoff::hlo {
namespace {

using ::testing::HasSubstr;

std::string CorpusDir() { return std::string(TPUOFF_SOURCE_DIR) + "/tests/corpus"; }

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(CorpusDir(), ec)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<HloModule> ParseOrDie(absl::string_view text) {
  auto module = ParseHloText(text, "test.hlo");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? std::move(*module) : nullptr;
}

// ---------------------------------------------------------------------------
// Corpus round trips.

class CorpusRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusRoundTrip, ParsesVerifiesAndPrintsAFixedPoint) {
  const std::string path = CorpusDir() + "/" + GetParam();
  const std::string text = ReadFile(path);
  ASSERT_FALSE(text.empty()) << path;
  auto module = ParseHloText(text, path);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(VerifyModule(**module).ok()) << VerifyModule(**module);
  const std::string printed = PrintModule(**module);
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("{...}")));
  auto reparsed = ParseHloText(printed, "printed.hlo");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status() << "\n" << printed;
  ASSERT_TRUE(VerifyModule(**reparsed).ok()) << VerifyModule(**reparsed);
  EXPECT_EQ(PrintModule(**reparsed), printed);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusRoundTrip, ::testing::ValuesIn(CorpusFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.size() - 4);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(Corpus, HasAtLeastTwelveModules) { EXPECT_GE(CorpusFiles().size(), 12u); }

TEST(Corpus, ExercisesEveryOpcodeAndAttribute) {
  std::set<HloOpcode> seen;
  std::string all_printed;
  for (const std::string& file : CorpusFiles()) {
    auto module = ParseHloText(ReadFile(CorpusDir() + "/" + file), file);
    ASSERT_TRUE(module.ok()) << module.status();
    for (const auto& comp : (*module)->computations()) {
      for (const auto& instr : comp->instructions()) seen.insert(instr->opcode());
    }
    all_printed += PrintModule(**module);
  }
  // Opcodes that parse and print but whose own attributes are not modelled
  // yet (async wrappers, host transfers, dynamic shapes, ...).
  const std::set<HloOpcode> not_modelled = {
      HloOpcode::kReal, HloOpcode::kImag, HloOpcode::kComplex, HloOpcode::kMap,
      HloOpcode::kCollectiveBroadcast, HloOpcode::kRaggedAllToAll,
      HloOpcode::kCollectiveReduce, HloOpcode::kAllGatherStart, HloOpcode::kAllGatherDone,
      HloOpcode::kAllReduceStart, HloOpcode::kAllReduceDone, HloOpcode::kCollectivePermuteStart,
      HloOpcode::kCollectivePermuteDone, HloOpcode::kAsyncStart, HloOpcode::kAsyncUpdate,
      HloOpcode::kAsyncDone, HloOpcode::kCopyStart, HloOpcode::kCopyDone, HloOpcode::kSend,
      HloOpcode::kSendDone, HloOpcode::kRecv, HloOpcode::kRecvDone, HloOpcode::kInfeed,
      HloOpcode::kOutfeed, HloOpcode::kStochasticConvert, HloOpcode::kSetDimensionSize,
      HloOpcode::kDynamicReshape, HloOpcode::kRaggedDot, HloOpcode::kScaledDot, HloOpcode::kScan,
      HloOpcode::kShuffle};
  for (int i = 0; i < NumOpcodes(); ++i) {
    if (not_modelled.count(static_cast<HloOpcode>(i))) continue;
    EXPECT_TRUE(seen.count(static_cast<HloOpcode>(i)))
        << "no corpus module uses " << HloOpcodeString(static_cast<HloOpcode>(i));
  }
  for (absl::string_view attr :
       {"dimensions={", "iota_dimension=", "slice={[", "dynamic_slice_sizes=", "padding=",
        "direction=", "type=TOTALORDER", "window={size=", " lhs_dilate=", " rhs_reversal=", "lhs_contracting_dims=", "rhs_contracting_dims=",
        "lhs_batch_dims=", "rhs_batch_dims=", "operand_precision={", "offset_dims=",
        "collapsed_slice_dims=", "start_index_map=", "index_vector_dim=",
        "operand_batching_dims=", "start_indices_batching_dims=", "slice_sizes=",
        "indices_are_sorted=true", "update_window_dims=", "inserted_window_dims=",
        "scatter_dims_to_operand_dims=", "input_batching_dims=",
        "scatter_indices_batching_dims=", "unique_indices=true", "to_apply=", "index=",
        "condition=", "body=", "true_computation=", "false_computation=",
        "branch_computations={", "calls=", "kind=kLoop", "kind=kInput", "channel_id=",
        "replica_groups={{", "replica_groups=[", "]T(1,0)", "use_global_device_ids=true",
        "constrain_layout=true", "source_target_pairs={{", "custom_call_target=",
        "backend_config=\"", "backend_config={", "api_version=API_VERSION_",
        "custom_call_has_side_effect=true", "called_computations={", "sharding={replicated}",
        "sharding={maximal device=", "sharding={manual}", "<=[8]", "last_tile_dim_replicate",
        "last_tile_dims={", "sharding={{", "metadata={op_type=", "source_line=",
        "frontend_attributes={", "control-predecessors={", "num_partitions=",
        "replica_count=", "input_output_alias={", "must-alias", "execution_thread=",
        "nan(0x", "-inf", "bf16[", "f16[", "f64[", "u64[", "s8[", "pred[", "token[]",
        "fft_type=RFFT", "fft_type=IRFFT", "fft_length={", "lower=true", "left_side=true",
        "unit_diagonal=true", "transpose_a=ADJOINT", "epsilon=0.001", "feature_index=",
        "distribution=rng_uniform", "algorithm=rng_three_fry", "algorithm=rng_philox",
        "delta=", "domain={kind=\"sharding\", entry=", "operand_layout_constraints={",
        "output_to_operand_aliasing={{}: (1, {})}", "origin={{\"", "origin={({"}) {
    EXPECT_THAT(all_printed, HasSubstr(attr)) << "no corpus module prints " << attr;
  }
}

// ---------------------------------------------------------------------------
// Printing details XLA's parser relies on.

TEST(TextPrinter, HeaderMatchesXlaSyntax) {
  auto module = ParseOrDie(ReadFile(CorpusDir() + "/softmax_lse.hlo"));
  ASSERT_NE(module, nullptr);
  const std::string printed = PrintModule(*module);
  EXPECT_EQ(printed.substr(0, printed.find('\n')),
            "HloModule softmax_lse, entry_computation_layout={(f32[4,16]{1,0})->"
            "(f32[4,16]{1,0}, f32[4]{0})}, frontend_attributes={output_names=\"probs,lse\"}");
  EXPECT_THAT(printed, HasSubstr("\nENTRY %main (logits: f32[4,16]) -> (f32[4,16], f32[4]) {\n"));
  EXPECT_THAT(printed, HasSubstr("  ROOT %out = (f32[4,16]{1,0}, f32[4]{0}) tuple("
                                 "f32[4,16]{1,0} %probs, f32[4]{0} %lse)\n}"));
  EXPECT_THAT(printed, HasSubstr("dimensions={1}, to_apply=%max_f32"));
  // Callees are printed before their callers.
  EXPECT_LT(printed.find("%max_f32 ("), printed.find("ENTRY"));
}

TEST(TextPrinter, PrintOptionsDropShapesPercentAndMetadata) {
  auto module = ParseOrDie(ReadFile(CorpusDir() + "/softmax_lse.hlo"));
  ASSERT_NE(module, nullptr);
  PrintOptions o;
  o.print_layouts = false;
  o.print_operand_shapes = false;
  o.print_percent = false;
  o.print_metadata = false;
  const std::string printed = PrintModule(*module, o);
  EXPECT_THAT(printed, HasSubstr("  lse = f32[4] add(log_sum, row_max)\n"));
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("metadata")));
  auto reparsed = ParseHloText(printed);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_TRUE(VerifyModule(**reparsed).ok());
}

// A one-constant module of `type` holding `bits` (little-endian elements).
std::string ConstantModule(absl::string_view type, int64_t n, const std::string& values) {
  return absl::StrCat("HloModule c\nENTRY %e () -> ", type, "[", n, "] {\n  ROOT %c = ", type,
                      "[", n, "]{0} constant({", values, "})\n}\n");
}

std::string PrintedConstant(const HloModule& m) {
  const std::string p = PrintModule(m);
  const size_t b = p.find("constant(") + 9;
  return p.substr(b, p.rfind(')') - b);
}

TEST(TextPrinter, FloatsUseTheShortestRoundTrippingForm) {
  struct Case {
    const char* type;
    const char* in;
    const char* out;
  } cases[] = {
      {"f32", "0.1", "0.1"},          {"f32", "0.3333333333", "0.33333334"},
      {"f32", "1e-45", "1e-45"},      {"f32", "16777216", "16777216"},
      {"f32", "1e20", "1e+20"},       {"f32", "-0", "-0.0"},
      {"f32", "100", "100"},          {"f32", "-inf", "-inf"},
      {"f32", "inf", "inf"},          {"f32", "nan", "nan"},
      {"f32", "-nan", "-nan"},        {"f32", "nan(0x1)", "nan(0x1)"},
      {"f32", "3.4028234663852886e38", "3.4028235e+38"},
      {"bf16", "0.1", "0.1"},         {"bf16", "3", "3"},
      {"bf16", "1.00390625", "1"},  // rounds to nearest even bf16
      {"bf16", "nan", "nan"},         {"f16", "65504", "65504"},
      {"f16", "0.1", "0.1"},          {"f16", "6e-08", "6e-08"},
      {"f64", "0.1", "0.1"},          {"f64", "1e-300", "1e-300"},
      {"f64", "0.30000000000000004", "0.30000000000000004"},
      {"pred", "true", "true"},       {"pred", "0", "false"},
      {"s8", "-128", "-128"},         {"u64", "18446744073709551615", "18446744073709551615"},
      {"s64", "-9223372036854775808", "-9223372036854775808"},
  };
  for (const Case& c : cases) {
    auto module = ParseOrDie(ConstantModule(c.type, 1, c.in));
    ASSERT_NE(module, nullptr) << c.type << " " << c.in;
    EXPECT_EQ(PrintedConstant(*module), absl::StrCat("{", c.out, "}")) << c.type << " " << c.in;
  }
}

// Every bit pattern of a 16-bit type survives print -> parse.
void ExpectAllPatternsRoundTrip(PrimitiveType type) {
  Literal lit(Shape(type, {65536}));
  for (int i = 0; i < 65536; ++i) lit.data<uint16_t>()[i] = static_cast<uint16_t>(i);
  HloModule module("patterns");
  auto comp = std::make_unique<HloComputation>("e");
  HloInstruction* c = comp->AddInstruction(HloInstruction::CreateConstant(lit));
  c->set_name("c");
  module.AddComputation(std::move(comp), /*is_entry=*/true);
  auto reparsed = ParseHloText(PrintModule(module));
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  const Literal& back = (*reparsed)->entry()->root()->literal();
  ASSERT_EQ(back.raw_size(), lit.raw_size());
  for (int i = 0; i < 65536; ++i) {
    ASSERT_EQ(back.data<uint16_t>()[i], i) << PrimitiveTypeName(type) << " pattern " << i;
  }
}

TEST(TextPrinter, EveryBf16AndF16BitPatternRoundTrips) {
  ExpectAllPatternsRoundTrip(PrimitiveType::kBF16);
  ExpectAllPatternsRoundTrip(PrimitiveType::kF16);
}

TEST(TextPrinter, RandomF32AndF64BitPatternsRoundTrip) {
  std::mt19937_64 rng(1234);
  Literal f32(Shape(PrimitiveType::kF32, {20000}));
  Literal f64(Shape(PrimitiveType::kF64, {20000}));
  for (int i = 0; i < 20000; ++i) {
    f32.data<uint32_t>()[i] = static_cast<uint32_t>(rng());
    f64.data<uint64_t>()[i] = rng();
  }
  HloModule module("patterns");
  auto comp = std::make_unique<HloComputation>("e");
  HloInstruction* a = comp->AddInstruction(HloInstruction::CreateConstant(f32));
  a->set_name("a");
  HloInstruction* b = comp->AddInstruction(HloInstruction::CreateConstant(f64));
  b->set_name("b");
  HloInstruction* t = comp->AddInstruction(HloInstruction::Create(
      HloOpcode::kTuple, Shape::Tuple({a->shape(), b->shape()}), {a, b}));
  t->set_name("t");
  module.AddComputation(std::move(comp), /*is_entry=*/true);
  auto reparsed = ParseHloText(PrintModule(module));
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  const HloComputation* e = (*reparsed)->entry();
  EXPECT_TRUE(e->FindInstruction("a")->literal() == f32);
  EXPECT_TRUE(e->FindInstruction("b")->literal() == f64);
}

// ---------------------------------------------------------------------------
// What the parser accepts and keeps.

TEST(TextParser, KeepsLayoutsAndEntryComputationLayout) {
  auto module = ParseOrDie(R"(
HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[3,2]{1,0}}
ENTRY %e (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{0,1} parameter(0)
  ROOT %t = f32[3,2]{1,0:T(8,128)S(1)} transpose(f32[2,3]{0,1} %p), dimensions={1,0}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->parameter(0)->shape().minor_to_major(),
            (std::vector<int64_t>{0, 1}));
  ASSERT_TRUE(module->entry_parameter_layouts().has_value());
  EXPECT_EQ((*module->entry_parameter_layouts())[0].minor_to_major(),
            (std::vector<int64_t>{0, 1}));
  // Tiling is dropped; the memory space (VMEM on TPU) is kept and printed.
  EXPECT_EQ(module->entry()->root()->shape().memory_space(), 1);
  EXPECT_EQ(module->entry()->root()->shape().ToString(true), "f32[3,2]{1,0:S(1)}");
  EXPECT_EQ(module->entry()->parameter(0)->shape().memory_space(), 0);
}

TEST(TextParser, AcceptsAScalarsEmptyLayout) {
  // XLA prints a scalar's layout as `{}`; `{}` on a shape of rank 1 is an
  // error naming the layout.
  auto module = ParseOrDie(R"(
HloModule m
ENTRY %e (p: f32[]) -> f32[] {
  %p = f32[]{} parameter(0)
  ROOT %n = f32[]{} negate(f32[]{} %p)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->root()->shape().ToString(true), "f32[]");
  auto bad = ParseHloText(R"(
HloModule m
ENTRY %e {
  ROOT %p = f32[2]{} parameter(0)
})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("layout"));
}

TEST(TextParser, AcceptsTheLenientSyntaxXlaAndJaxUse) {
  // No '%', untyped operands, comments, omitted shapes, forward references,
  // a callee after its caller, ROOT not last, no ROOT (last is the root),
  // single-quoted strings.
  auto module = ParseOrDie(R"(
HloModule lenient, is_scheduled=true, allow_spmd_sharding_propagation_to_output={true}
ENTRY main {
  x = f32[4] parameter(0)  // trailing comment
  r = f32[] reduce(y, z), /* inline */ to_apply=add_f32, dimensions={0}, metadata={op_name='sum'}
  y = exponential(x)
  z = f32[] constant(0)
  neg = negate(r)
}
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = add(a, b)
  unused = f32[] copy(a)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(VerifyModule(*module).ok()) << VerifyModule(*module);
  EXPECT_EQ(module->entry()->name(), "main");
  EXPECT_EQ(module->entry()->root()->name(), "neg");
  EXPECT_EQ(module->entry()->FindInstruction("y")->shape().ToString(), "f32[4]");
  EXPECT_EQ(module->entry()->FindInstruction("r")->metadata().op_name, "sum");
  const HloComputation* add = module->FindComputation("add_f32");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->root()->name(), "c");  // ROOT need not be last
  EXPECT_EQ(module->computations().front().get(), add);  // callee first
  // Without ENTRY the last computation is the entry; `sum` is no opcode.
  module = ParseOrDie("HloModule m\nf { ROOT a = f32[] parameter(0) }\ng { b = s32[] parameter(0) }");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->name(), "g");
  EXPECT_FALSE(ParseHloText("HloModule m\ng { a = f32[] parameter(0)\n b = sum(a) }").ok());
}

TEST(TextPrinter, NamesAreMadeLexable) {
  HloModule module("my module/1");
  auto comp = std::make_unique<HloComputation>("entry comp");
  HloInstruction* p = comp->AddInstruction(
      HloInstruction::CreateParameter(0, Shape(PrimitiveType::kF32, {2}), "x/in"));
  HloInstruction* n = comp->AddInstruction(
      HloInstruction::Create(HloOpcode::kNegate, p->shape(), {p}));
  n->set_name("0neg");
  module.AddComputation(std::move(comp), /*is_entry=*/true);
  const std::string printed = PrintModule(module);
  EXPECT_THAT(printed, HasSubstr("HloModule my_module_1,"));
  EXPECT_THAT(printed, HasSubstr("ENTRY %entry_comp (x_in: f32[2]) -> f32[2] {"));
  EXPECT_THAT(printed, HasSubstr("ROOT %_0neg = f32[2]{0} negate(f32[2]{0} %x_in)"));
  auto reparsed = ParseHloText(printed);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_TRUE(VerifyModule(**reparsed).ok());
}

TEST(TextPrinter, TupleConstantsPrintInFull) {
  Literal tuple = Literal::Tuple({Literal::ScalarF32(1.5f), Literal::ScalarS32(-3)});
  auto c = HloInstruction::CreateConstant(tuple);
  c->set_name("t");
  EXPECT_EQ(PrintInstruction(*c), "%t = (f32[], s32[]) constant((1.5, -3))");
}

TEST(TextParser, ShardingsAndReplicaGroups) {
  auto module = ParseOrDie(R"(
HloModule s, num_partitions=8
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e (p: f32[8,4]) -> f32[8,4] {
  %p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,2]0,2,1,3}
  %q = f32[8,4]{1,0} copy(%p), sharding={devices=[2,4]<=[4,2]T(1,0)}
  %r = f32[8,4]{1,0} copy(%q), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
  %u = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(%q, %r), sharding={{replicated}, {maximal device=3}}
  ROOT %ar = f32[8,4]{1,0} all-reduce(%r), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=%sum
})");
  ASSERT_NE(module, nullptr);
  const HloComputation* e = module->entry();
  const HloSharding& p = *e->FindInstruction("p")->sharding();
  EXPECT_EQ(p.type, HloSharding::Type::kTiled);
  EXPECT_EQ(p.tile_assignment_dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p.devices, (std::vector<int64_t>{0, 2, 1, 3}));
  const HloSharding& q = *e->FindInstruction("q")->sharding();
  EXPECT_TRUE(q.iota_form);
  EXPECT_EQ(q.devices, (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_TRUE(e->FindInstruction("r")->sharding()->replicate_on_last_tile_dim);
  const HloSharding& u = *e->FindInstruction("u")->sharding();
  ASSERT_EQ(u.type, HloSharding::Type::kTuple);
  EXPECT_EQ(u.tuple_shardings[1].type, HloSharding::Type::kMaximal);
  EXPECT_EQ(u.tuple_shardings[1].devices, (std::vector<int64_t>{3}));
  const ReplicaGroups& g = e->root()->attrs().replica_groups;
  EXPECT_EQ(g.groups, (std::vector<std::vector<int64_t>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(module->num_partitions(), 8);
  EXPECT_TRUE(VerifyModule(*module).ok()) << VerifyModule(*module);
  // The iota spellings survive printing.
  const std::string printed = PrintModule(*module);
  EXPECT_THAT(printed, HasSubstr("sharding={devices=[2,4]<=[4,2]T(1,0)}"));
  EXPECT_THAT(printed, HasSubstr("replica_groups=[2,4]<=[4,2]T(1,0)"));
  EXPECT_THAT(printed, HasSubstr("sharding={{replicated}, {maximal device=3}}"));
}

TEST(TextParser, BackendConfigStringsAndDicts) {
  auto module = ParseOrDie(R"(
HloModule b
ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  %c = f32[2]{0} custom-call(%p), custom_call_target="t", backend_config="a\"b\\c\n"
  ROOT %d = f32[2]{0} custom-call(%c), custom_call_target="u", backend_config={"k": "}{", "n": {"m": 1}}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry()->FindInstruction("c")->attrs().backend_config, "a\"b\\c\n");
  EXPECT_EQ(module->entry()->root()->attrs().backend_config, R"({"k": "}{", "n": {"m": 1}})");
  const std::string printed = PrintModule(*module);
  EXPECT_THAT(printed, HasSubstr(R"(backend_config="a\"b\\c\n")"));
  EXPECT_THAT(printed, HasSubstr(R"(backend_config={"k": "}{", "n": {"m": 1}})"));
}

// ---------------------------------------------------------------------------
// Malformed and unsupported input: the status code, and a message naming
// file:line:col and the offending token. `$` marks the expected location.

struct BadInput {
  const char* name;
  const char* text;
  absl::StatusCode code;
  const char* token;  // expected in the message
};

constexpr char kHead[] = "HloModule m\nENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n";

const BadInput kBadInputs[] = {
    {"UnknownOpcode", "  ROOT %r = f32[4]{0} $frobnicate(%p)\n}", absl::StatusCode::kInvalidArgument, "frobnicate"},
    {"UnmodelledAttribute", "  ROOT %r = (f32[4]{0}, token[]) infeed(%p), $infeed_config=\"x\"\n}", absl::StatusCode::kUnimplemented, "infeed_config of infeed"},
    {"BadFftType", "  ROOT %r = f32[4]{0} fft(%p), fft_type=$FOO, fft_length={4}\n}", absl::StatusCode::kInvalidArgument, "FOO"},
    {"MissingFftLength", "  ROOT %r = c64[4]{0} $fft(%p), fft_type=FFT\n}", absl::StatusCode::kInvalidArgument, "fft requires attribute fft_length"},
    {"BadTranspose", "  ROOT %r = f32[4]{0} triangular-solve(%p, %p), transpose_a=$SIDEWAYS\n}", absl::StatusCode::kInvalidArgument, "SIDEWAYS"},
    {"BadRngAlgorithm", "  ROOT %r = (u64[2]{0}, u32[4]{0}) rng-bit-generator(%p), algorithm=$rng_bogus\n}", absl::StatusCode::kInvalidArgument, "rng_bogus"},
    {"BadDistribution", "  ROOT %r = f32[4]{0} rng(%p, %p), distribution=$gauss\n}", absl::StatusCode::kInvalidArgument, "gauss"},
    {"RngWithoutDistribution", "  ROOT %r = f32[4]{0} $rng(%p, %p)\n}", absl::StatusCode::kInvalidArgument, "rng requires attribute distribution"},
    {"DomainWithoutExit", "  ROOT %r = f32[4]{0} domain(%p), domain=${kind=\"sharding\", entry={replicated}}\n}", absl::StatusCode::kInvalidArgument, "exit="},
    {"BadOriginLeaf", "  ROOT %r = f32[4]{0} negate(%p), origin={{$3}}\n}", absl::StatusCode::kInvalidArgument, "3"},
    {"BadAliasing", "  ROOT %r = f32[4]{0} custom-call(%p), custom_call_target=\"x\", output_to_operand_aliasing={{}: ($x, {})}\n}", absl::StatusCode::kInvalidArgument, "x"},
    {"EpsilonNotFinite", "  ROOT %r = f32[4]{0} batch-norm-inference(%p, %p, %p, %p, %p), epsilon=$inf, feature_index=0\n}", absl::StatusCode::kInvalidArgument, "epsilon must be finite"},
    {"PartlyElidedConstant", "  ROOT %r = f32[4]{0} constant({1, $...})\n}", absl::StatusCode::kInvalidArgument, "only a whole constant may be elided"},
    {"HugeShape", "  ROOT %r = $f32[99999999999]{0} parameter(1)\n}", absl::StatusCode::kInvalidArgument, "f32"},
    {"HugeProductShape", "  ROOT %r = $f32[1000000,1000000]{1,0} parameter(1)\n}", absl::StatusCode::kInvalidArgument, "f32"},
    {"MissingParen", "  ROOT %r = f32[4]{0} negate(%p\n$}", absl::StatusCode::kInvalidArgument, "}"},
    {"UnknownOperand", "  ROOT %r = f32[4]{0} negate($%q)\n}", absl::StatusCode::kInvalidArgument, "%q"},
    {"DuplicateName", "  $%p = f32[4]{0} negate(%p)\n}", absl::StatusCode::kInvalidArgument, "%p"},
    {"UnterminatedComment", "  ROOT %r = f32[4]{0} negate(%p) $/* oops\n}", absl::StatusCode::kInvalidArgument, "/*"},
    {"UnterminatedString", "  ROOT %r = f32[4]{0} custom-call(%p), custom_call_target=$\"abc\n}", absl::StatusCode::kInvalidArgument, "\"abc"},
    {"UnknownAttribute", "  ROOT %r = f32[4]{0} negate(%p), $frobnicity=1\n}", absl::StatusCode::kUnimplemented, "frobnicity="},
    {"AttributeOnWrongOpcode", "  ROOT %r = f32[4]{0} negate(%p), $dimensions={0}\n}", absl::StatusCode::kInvalidArgument, "dimensions="},
    {"MissingRequiredAttribute", "  ROOT %r = f32[] $reduce(%p, %p), dimensions={0}\n}", absl::StatusCode::kInvalidArgument, "reduce"},
    {"DuplicateAttribute", "  ROOT %r = f32[4]{0} broadcast(%p), dimensions={0}, $dimensions={0}\n}", absl::StatusCode::kInvalidArgument, "dimensions="},
    {"TooFewConstantValues", "  ROOT %r = f32[4]{0} constant({1, 2$})\n}", absl::StatusCode::kInvalidArgument, "}"},
    {"TooManyConstantValues", "  ROOT %r = f32[2]{0} constant({1, 2, $3})\n}", absl::StatusCode::kInvalidArgument, "3"},
    {"ConstantNotNested", "  ROOT %r = f32[2,2]{1,0} constant({{1, 2}, $3})\n}", absl::StatusCode::kInvalidArgument, "3"},
    {"S8OutOfRange", "  ROOT %r = s8[] constant($300)\n}", absl::StatusCode::kInvalidArgument, "300"},
    {"F16OutOfRange", "  ROOT %r = f16[] constant($70000)\n}", absl::StatusCode::kInvalidArgument, "70000"},
    {"FloatForInteger", "  ROOT %r = s32[] constant($1.5)\n}", absl::StatusCode::kInvalidArgument, "1.5"},
    {"DynamicDimension", "  ROOT %r = f32[$<=4]{0} parameter(1)\n}", absl::StatusCode::kUnimplemented, "<="},
    {"Fp8Type", "  ROOT %r = $f8e4m3fn[4]{0} parameter(1)\n}", absl::StatusCode::kUnimplemented, "f8e4m3fn"},
    {"InstructionCycle", "  $%a = f32[4]{0} negate(%b)\n  %b = f32[4]{0} negate(%a)\n  ROOT %r = f32[4]{0} add(%a, %b)\n}", absl::StatusCode::kInvalidArgument, "%a"},
    {"BadLayout", "  ROOT %r = f32[2,2]${0,0} parameter(1)\n}", absl::StatusCode::kInvalidArgument, "{"},
    {"ParameterNumberGap", "  ROOT %r = f32[4]{0} $parameter(5)\n}", absl::StatusCode::kInvalidArgument, "parameter"},
    {"UnknownComputation", "  ROOT %r = f32[] reduce(%p, %p), dimensions={0}, to_apply=$%nowhere\n}", absl::StatusCode::kInvalidArgument, "%nowhere"},
    {"InlineComputation", "  ROOT %r = f32[] reduce(%p, %p), dimensions={0}, to_apply=${ %x = f32[] parameter(0) }\n}", absl::StatusCode::kUnimplemented, "{"},
    {"NestedInstruction", "  ROOT %r = f32[4]{0} add($negate(%p), %p)\n}", absl::StatusCode::kUnimplemented, "negate"},
    {"HugeIotaGroups", "  ROOT %r = f32[4]{0} all-reduce(%p), replica_groups=$[1,99999999]<=[99999999], to_apply=%e\n}", absl::StatusCode::kInvalidArgument, "["},
    {"ShardingDeviceCount", "  ROOT %r = f32[4]{0} copy(%p), sharding=${devices=[4]0,1,2}\n}", absl::StatusCode::kInvalidArgument, "{"},
    {"NulByte", "  ROOT %r = f32[4]{0} negate(%p)$\0\n}", absl::StatusCode::kInvalidArgument, ""},
    {"EndOfInput", "  ROOT %r = f32[4]{0} negate(%p)\n$", absl::StatusCode::kInvalidArgument, "end of input"},
};

TEST(TextParserErrors, MalformedInputsNameFileLineColumnAndToken) {
  for (const BadInput& bad : kBadInputs) {
    // The NUL case is built by hand: string literals stop at '\0'.
    std::string body = bad.text;
    if (std::string(bad.name) == "NulByte") body = std::string("  ROOT %r = f32[4]{0} negate(%p)$") + '\0' + "\n}";
    std::string text = std::string(kHead) + body;
    const size_t marker = text.find('$');
    ASSERT_NE(marker, std::string::npos) << bad.name;
    text.erase(marker, 1);
    int line = 1, col = 1;
    for (size_t i = 0; i < marker; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    auto result = ParseHloText(text, "bad.hlo");
    ASSERT_FALSE(result.ok()) << bad.name;
    EXPECT_EQ(result.status().code(), bad.code) << bad.name << ": " << result.status();
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr(absl::StrCat("bad.hlo:", line, ":", col, ": ")))
        << bad.name;
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(bad.token)) << bad.name;
  }
}

TEST(TextParserErrors, ModuleLevelProblems) {
  struct Case {
    const char* text;
    absl::StatusCode code;
    const char* where;
  } cases[] = {
      {"", absl::StatusCode::kInvalidArgument, "1:1"},
      {"HloMod m", absl::StatusCode::kInvalidArgument, "1:1"},
      {"HloModule m, frobnicate=1\nENTRY e { ROOT p = f32[] parameter(0) }",
       absl::StatusCode::kUnimplemented, "1:14"},
      {"HloModule m, entry_computation_layout={(s32[])->f32[]}\nENTRY e { ROOT p = f32[] parameter(0) }",
       absl::StatusCode::kInvalidArgument, "1:14"},
      {"HloModule m\nc { ROOT x = f32[] call(), to_apply=c }\nENTRY e { ROOT p = f32[] parameter(0) }",
       absl::StatusCode::kInvalidArgument, "2:1"},
      {"HloModule m\nENTRY e { ROOT p = f32[] parameter(0) }\nENTRY f { ROOT q = f32[] parameter(0) }",
       absl::StatusCode::kInvalidArgument, "3:7"},
      {"HloModule m\nENTRY e { ROOT p = (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((f32[])))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))) parameter(0) }",
       absl::StatusCode::kInvalidArgument, "2:"},
  };
  for (const Case& c : cases) {
    auto result = ParseHloText(c.text, "m.hlo");
    ASSERT_FALSE(result.ok()) << c.text;
    EXPECT_EQ(result.status().code(), c.code) << result.status();
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(absl::StrCat("m.hlo:", c.where)))
        << result.status();
  }
}

}  // namespace
}  // namespace tpuoff::hlo
