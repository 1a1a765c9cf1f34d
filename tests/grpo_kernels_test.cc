// The GRPO and entropy kernels against the test vectors (tests/testdata/grpo/
// <case>/, and ../shared/testdata/grpo/ when configured; new folders are picked
// up automatically), run on the host emulator, plus the structural guarantees
// of the tiled kernels: no [B,T,V] intermediate other than logits and dlogits,
// ragged tiles by a static tail, names as in docs/GRPO_SPEC.md.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "hlo/ir/verifier.h"
#include "hlo/ir/builder.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_common.h"
#include "kernels/grpo_config.h"
#include "kernels/grpo_tiled.h"
#include "kernels/vocab_stats.h"
#include "runtime/emulator/executor.h"
#include "tests/test_vectors.h"

namespace tpuoff::kernels {
namespace {

using hlo::HloInstruction;
using hlo::HloModule;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;

using testvectors::AllClose;
using testvectors::Case;
using testvectors::LoadCase;
using testvectors::LoadNpy;
using testvectors::VectorCase;

// ---------------------------------------------------------------------------
// Structure: which instructions hold a [B,T,V]-sized array.

void ArrayLeaves(const Shape& shape, std::vector<const Shape*>* out) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) ArrayLeaves(s, out);
  } else if (shape.IsArray()) {
    out->push_back(&shape);
  }
}

// Instructions holding an array of B*T*V elements other than the logits and
// dlogits buffers themselves: those may only be the logits parameter, the
// zero-initialised dlogits (broadcast of a scalar), their passage through
// loop state (tuple, while, get-tuple-element, body parameters) and the
// tile-by-tile dynamic-update-slice of dlogits, all in the logits type.
std::vector<std::string> FullVocabViolations(const HloModule& module, const GrpoConfig& c) {
  const int64_t full = c.batch * c.seq * c.vocab;
  std::vector<std::string> bad;
  for (const auto& comp : module.computations()) {
    for (const auto& instr : comp->instructions()) {
      std::vector<const Shape*> leaves;
      ArrayLeaves(instr->shape(), &leaves);
      for (const Shape* leaf : leaves) {
        if (leaf->num_elements() != full) continue;
        bool ok = leaf->element_type() == c.logits_type;
        switch (instr->opcode()) {
          case HloOpcode::kParameter:
            if (comp.get() == module.entry()) ok = ok && instr->name() == "logits";
            break;
          case HloOpcode::kBroadcast:
            ok = ok && instr->operand(0)->shape().rank() == 0;
            break;
          case HloOpcode::kTuple:
          case HloOpcode::kWhile:
          case HloOpcode::kGetTupleElement:
          case HloOpcode::kDynamicUpdateSlice:
            break;
          default:
            ok = false;
        }
        if (!ok) {
          bad.push_back(absl::StrCat(comp->name(), "/", instr->name(), " ",
                                     hlo::HloOpcodeString(instr->opcode()), " ",
                                     leaf->ToString()));
        }
      }
    }
  }
  return bad;
}

std::vector<const HloInstruction*> InstructionsWithOpcode(const HloModule& m, HloOpcode op) {
  std::vector<const HloInstruction*> out;
  for (const auto& comp : m.computations()) {
    for (const auto& instr : comp->instructions()) {
      if (instr->opcode() == op) out.push_back(instr.get());
    }
  }
  return out;
}

GrpoConfig QwenSized(PrimitiveType type) {
  GrpoConfig c;
  c.batch = 2;
  c.seq = 16;
  c.vocab = 151936;  // = 74 * 2048 + 384
  c.logits_type = type;
  return c;
}

TEST(GrpoTiledStructureTest, QwenVocabHasNoFullSizeIntermediates) {
  for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
    for (KernelMode mode : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
      GrpoConfig c = QwenSized(type);
      auto module = BuildKernel({KernelKind::kGrpoTiled, mode, c});
      ASSERT_TRUE(module.ok()) << module.status();
      EXPECT_THAT(FullVocabViolations(**module, c), ::testing::IsEmpty())
          << KernelModeName(mode) << " " << hlo::PrimitiveTypeName(type);
      // Full tiles in a while loop (74 trips), the 384-wide tail as a
      // straight-line dynamic slice; nothing padded, concatenated or copied.
      std::vector<int64_t> widths;
      for (const HloInstruction* ds : InstructionsWithOpcode(**module, HloOpcode::kDynamicSlice)) {
        if (ds->shape().rank() == 3) widths.push_back(ds->shape().dimensions(2));
      }
      EXPECT_THAT(widths, ::testing::Contains(2048));
      EXPECT_THAT(widths, ::testing::Contains(384));
      EXPECT_THAT(widths, ::testing::Each(::testing::AnyOf(2048, 384)));
      const int64_t loops = mode == KernelMode::kFwdBwd ? 2 : 1;
      EXPECT_EQ(InstructionsWithOpcode(**module, HloOpcode::kWhile).size(), loops);
      EXPECT_TRUE(InstructionsWithOpcode(**module, HloOpcode::kPad).empty());
      EXPECT_TRUE(InstructionsWithOpcode(**module, HloOpcode::kConcatenate).empty());
      EXPECT_TRUE(InstructionsWithOpcode(**module, HloOpcode::kCopy).empty());
      bool trip_count_74 = false;
      for (const HloInstruction* k : InstructionsWithOpcode(**module, HloOpcode::kConstant)) {
        if (k->shape().element_type() == PrimitiveType::kS32 && k->shape().rank() == 0 &&
            k->literal().GetAsInt64(0) == 74 && k->users().size() == 1 &&
            k->users()[0]->opcode() == HloOpcode::kCompare) {
          trip_count_74 = true;
        }
      }
      EXPECT_TRUE(trip_count_74);
    }
  }
  GrpoConfig c = QwenSized(PrimitiveType::kBF16);
  auto entropy = BuildKernel({KernelKind::kEntropyTiled, KernelMode::kFwd, c});
  ASSERT_TRUE(entropy.ok()) << entropy.status();
  EXPECT_THAT(FullVocabViolations(**entropy, c), ::testing::IsEmpty());
}

TEST(GrpoTiledStructureTest, TimeBlocksKeepTheGuarantee) {
  GrpoConfig c = QwenSized(PrimitiveType::kBF16);
  c.time_block = 6;  // 16 = 2 * 6 + 4: a row loop plus a row tail
  for (KernelMode mode : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
    auto module = BuildKernel({KernelKind::kGrpoTiled, mode, c});
    ASSERT_TRUE(module.ok()) << module.status();
    EXPECT_THAT(FullVocabViolations(**module, c), ::testing::IsEmpty());
    std::vector<std::vector<int64_t>> tiles;
    for (const HloInstruction* ds : InstructionsWithOpcode(**module, HloOpcode::kDynamicSlice)) {
      if (ds->shape().rank() == 3) tiles.push_back(ds->shape().dimensions());
    }
    EXPECT_THAT(tiles, ::testing::Contains(std::vector<int64_t>{2, 6, 2048}));
    EXPECT_THAT(tiles, ::testing::Contains(std::vector<int64_t>{2, 4, 384}));
  }
}

// The checker itself must be able to fail: the reference materialises f32
// [B,T,V] log-probabilities.
TEST(GrpoTiledStructureTest, CheckerFlagsTheReference) {
  GrpoConfig c = QwenSized(PrimitiveType::kBF16);
  c.vocab = 4096;
  auto module = BuildKernel({KernelKind::kGrpoReference, KernelMode::kFwdBwd, c});
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<std::string> bad = FullVocabViolations(**module, c);
  EXPECT_THAT(bad, ::testing::Contains(::testing::HasSubstr("f32[2,16,4096]")));
}

// ---------------------------------------------------------------------------
// Numerics against the vectors.

class GrpoVectorsTest : public ::testing::TestWithParam<VectorCase> {
 protected:
  void SetUp() override {
    absl::StatusOr<Case> c = LoadCase(GetParam());
    ASSERT_TRUE(c.ok()) << c.status();
    case_ = *std::move(c);
  }

  // Arguments for the module's parameters, by name; lse/logp come from
  // `extra` (a forward run), everything else from <name>.npy.
  absl::StatusOr<std::vector<Literal>> Arguments(const HloModule& module,
                                                 const std::map<std::string, Literal>& extra) {
    std::vector<Literal> args;
    for (const HloInstruction* p : module.entry()->parameters()) {
      auto it = extra.find(p->name());
      if (it != extra.end()) {
        args.push_back(it->second);
        continue;
      }
      absl::StatusOr<Literal> lit = LoadNpy(case_.dir / (p->name() + ".npy"), p->shape());
      if (!lit.ok()) return lit.status();
      args.push_back(*std::move(lit));
    }
    return args;
  }

  // Runs and returns the outputs by name.
  absl::StatusOr<std::map<std::string, Literal>> Run(
      const KernelSpec& spec, const std::map<std::string, Literal>& extra = {}) {
    absl::StatusOr<std::unique_ptr<HloModule>> module = BuildKernel(spec);
    if (!module.ok()) return module.status();
    absl::StatusOr<std::vector<Literal>> args = Arguments(**module, extra);
    if (!args.ok()) return args.status();
    absl::StatusOr<runtime::RunResult> result = runtime::RunModule(**module, *args);
    if (!result.ok()) return result.status();
    const std::vector<std::string> names = (*module)->OutputNames();
    if (names.size() != result->outputs.size()) {
      return absl::InternalError(absl::StrCat(names.size(), " output names for ",
                                              result->outputs.size(), " outputs"));
    }
    std::map<std::string, Literal> out;
    for (size_t i = 0; i < names.size(); ++i) out[names[i]] = std::move(result->outputs[i]);
    return out;
  }

  void ExpectOutputs(const std::map<std::string, Literal>& got, const std::string& label) {
    for (const auto& [name, lit] : got) {
      auto shape = case_.expected_shapes.find(name);
      ASSERT_NE(shape, case_.expected_shapes.end()) << label << ": no expected " << name;
      absl::StatusOr<Literal> expected = LoadNpy(case_.dir / ("expected_" + name + ".npy"),
                                                 Shape(PrimitiveType::kF32, shape->second));
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_TRUE(AllClose(lit, *expected, case_.atol, case_.rtol))
          << case_.name << " " << label << " output " << name;
    }
  }

  // fwd_bwd, then fwd followed by bwd fed with the forward's lse and logp
  // (and entropy, which a backward with an entropy bonus takes).
  void CheckGrpo(KernelKind kind, const GrpoConfig& config, const std::string& label) {
    auto fwd_bwd = Run({kind, KernelMode::kFwdBwd, config});
    ASSERT_TRUE(fwd_bwd.ok()) << label << ": " << fwd_bwd.status();
    EXPECT_EQ(fwd_bwd->size(), 6u);
    ExpectOutputs(*fwd_bwd, label + " fwd_bwd");

    auto fwd = Run({kind, KernelMode::kFwd, config});
    ASSERT_TRUE(fwd.ok()) << label << ": " << fwd.status();
    EXPECT_EQ(fwd->size(), 5u);
    ExpectOutputs(*fwd, label + " fwd");
    std::map<std::string, Literal> saved = {{"lse", fwd->at("lse")}, {"logp", fwd->at("logp")}, {"entropy", fwd->at("entropy")}};
    auto bwd = Run({kind, KernelMode::kBwd, config}, saved);
    ASSERT_TRUE(bwd.ok()) << label << ": " << bwd.status();
    ASSERT_EQ(bwd->size(), 1u);
    ExpectOutputs(*bwd, label + " bwd");
    // Masked rows get exactly zero gradient.
    const Literal& d = bwd->at("dlogits");
    absl::StatusOr<Literal> mask =
        LoadNpy(case_.dir / "completion_mask.npy",
                Shape(PrimitiveType::kF32, {config.batch, config.seq}));
    ASSERT_TRUE(mask.ok()) << mask.status();
    for (int64_t row = 0; row < config.batch * config.seq; ++row) {
      if (mask->GetAsDouble(row) != 0) continue;
      for (int64_t v = 0; v < config.vocab; ++v) {
        ASSERT_EQ(d.GetAsDouble(row * config.vocab + v), 0.0) << label << " row " << row;
      }
    }
  }

  // Block layouts of the tiled kernels: small tiles with a ragged tail, the
  // production width, a width leaving a large tail, and row tiles.
  std::vector<std::pair<std::string, GrpoConfig>> TiledVariants() const {
    const GrpoConfig& base = case_.config;
    std::vector<std::pair<std::string, GrpoConfig>> out;
    GrpoConfig c = base;
    c.block_size = 8;
    out.push_back({"block8", c});
    c.block_size = 2048;
    out.push_back({"block2048", c});
    int64_t ragged = base.vocab / 3 + 1;
    while (ragged < base.vocab && base.vocab % ragged == 0) ++ragged;
    c.block_size = ragged;
    out.push_back({absl::StrCat("block", ragged), c});
    c.block_size = 8;
    c.time_block = base.seq / 2 + 1;
    out.push_back({absl::StrCat("block8_time", *c.time_block), c});
    return out;
  }

  Case case_;
};

TEST_P(GrpoVectorsTest, Reference) {
  CheckGrpo(KernelKind::kGrpoReference, case_.config, "grpo_reference");
}

TEST_P(GrpoVectorsTest, Tiled) {
  for (const auto& [label, config] : TiledVariants()) {
    SCOPED_TRACE(label);
    CheckGrpo(KernelKind::kGrpoTiled, config, "grpo_tiled " + label);
  }
}

TEST_P(GrpoVectorsTest, Entropy) {
  std::vector<std::pair<std::string, KernelSpec>> specs = {
      {"entropy_reference", {KernelKind::kEntropyReference, KernelMode::kFwd, case_.config}}};
  for (const auto& [label, config] : TiledVariants()) {
    specs.push_back({"entropy_tiled " + label,
                     {KernelKind::kEntropyTiled, KernelMode::kFwd, config}});
  }
  for (const auto& [label, spec] : specs) {
    auto out = Run(spec);
    ASSERT_TRUE(out.ok()) << label << ": " << out.status();
    ASSERT_EQ(out->size(), 1u);
    ExpectOutputs(*out, label);
  }
}

TEST_P(GrpoVectorsTest, TiledStructure) {
  for (const auto& [label, config] : TiledVariants()) {
    if (config.block_size >= config.vocab) continue;  // one tile is the whole row
    for (KernelMode mode : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
      auto module = BuildKernel({KernelKind::kGrpoTiled, mode, config});
      ASSERT_TRUE(module.ok()) << module.status();
      EXPECT_TRUE(hlo::VerifyModule(**module).ok());
      EXPECT_THAT(FullVocabViolations(**module, config), ::testing::IsEmpty())
          << label << " " << KernelModeName(mode);
    }
  }
}

// The per-shard building blocks: statistics of two vocab ranges (as two
// devices would hold them), each with chosen ids relative to its own first
// column, merged with MergeVocabStats, equal the vectors' lse/logp/entropy.
TEST_P(GrpoVectorsTest, VocabRangesMerge) {
  const GrpoConfig& c = case_.config;
  if (c.vocab < 2) GTEST_SKIP();
  const int64_t split = c.vocab / 2 + 1;
  hlo::XlaBuilder b("vocab_ranges");
  GrpoParams p = EmitGrpoParameters(&b, c, KernelMode::kFwd);
  const StatsSpec spec = GrpoStatsSpec(c);
  const TileOptions tiles{8, 1};
  hlo::XlaOp lo = b.Slice(p.logits, {0, 0, 0}, {c.batch, c.seq, split}, {1, 1, 1});
  hlo::XlaOp hi = b.Slice(p.logits, {0, 0, split}, {c.batch, c.seq, c.vocab}, {1, 1, 1});
  hlo::XlaOp t0 = b.ConstantS32(0);
  VocabStats s_lo = EmitVocabRangeStats(&b, lo, t0, c.seq, p.chosen_ids, spec, tiles);
  VocabStats s_hi = EmitVocabRangeStats(
      &b, hi, t0, c.seq, hlo::Sub(p.chosen_ids, b.ConstantS32(static_cast<int32_t>(split))),
      spec, tiles);
  VocabStats merged = MergeVocabStats(&b, s_hi, s_lo, spec);
  hlo::XlaOp lse = LseOf(&b, merged.lse);
  hlo::XlaOp logp = hlo::Sub(merged.chosen, lse);
  if (c.temperature_mode == TemperatureMode::kPostLse) {
    logp = hlo::Div(logp, b.ConstantF32(static_cast<float>(c.temperature)));
  }
  auto module = FinishModule(&b, {lse, logp, EntropyOf(&b, merged.entropy)},
                             {"lse", "logp", "entropy"});
  ASSERT_TRUE(module.ok()) << module.status();
  auto args = Arguments(**module, {});
  ASSERT_TRUE(args.ok()) << args.status();
  auto result = runtime::RunModule(**module, *args);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 3u);
  std::map<std::string, Literal> got;
  got["lse"] = std::move(result->outputs[0]);
  got["logp"] = std::move(result->outputs[1]);
  got["entropy"] = std::move(result->outputs[2]);
  ExpectOutputs(got, "two vocab ranges");
}

INSTANTIATE_TEST_SUITE_P(Cases, GrpoVectorsTest,
                         ::testing::ValuesIn(testvectors::VectorCases("grpo")),
                         testvectors::CaseTestName);
// The policy-loss variants (GRPO_SPEC.md v2) through the same checks.
INSTANTIATE_TEST_SUITE_P(V2Cases, GrpoVectorsTest,
                         ::testing::ValuesIn(testvectors::VectorCases("grpo_v2")),
                         testvectors::CaseTestName);

// The own vectors ship with the source tree (at least the shared set's 12
// cases, 19 for v2); the shared ones, when configured, must be there too.
TEST(GrpoVectorsPresenceTest, VectorsExist) {
  for (const testvectors::VectorRoot& root : testvectors::VectorRoots()) {
    EXPECT_GE(testvectors::CaseNamesIn(root.dir / "grpo").size(), 12u)
        << "cases under " << root.dir / "grpo";
    EXPECT_GE(testvectors::CaseNamesIn(root.dir / "grpo_v2").size(), 19u)
        << "cases under " << root.dir / "grpo_v2";
  }
}

}  // namespace
}  // namespace tpuoff::kernels
