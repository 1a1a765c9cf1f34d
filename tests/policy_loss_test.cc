// The policy-loss variants (GRPO_SPEC.md v2) beyond the vector tables of
// grpo_kernels_test / grpo_fused_test / sharded_kernels_test:
//  - the trainer presets against vectors computed with each trainer's own
//    loss (tests/testdata_presets, tools/presets/): every GRPO kernel form,
//    unsharded, vocab- and batch-sharded; without the preset they fail;
//  - memory: no option changes the tiled or fused kernels' peak beyond the
//    bytes of its own [B,T] inputs and a few [B,T] temporaries;
//  - the entropy bonus's gradient needs no extra vocab pass (only a
//    backward-only module in post_lse mode with τ != 1 makes one).
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/spmd/sharding_util.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_config.h"
#include "kernels/grpo_presets.h"
#include "kernels/grpo_sharded.h"
#include "nlohmann/json.hpp"
#include "runtime/emulator/executor.h"
#include "tests/test_vectors.h"
#include "tools/io/partitioned_io.h"

namespace tpuoff::kernels {
namespace {

using hlo::HloModule;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using Outputs = std::map<std::string, Literal>;
using testvectors::AllClose;
using testvectors::LoadNpy;
using testvectors::VectorCase;

std::filesystem::path PresetsRoot() {
  return std::filesystem::path(TPUOFF_SOURCE_DIR) / "tests" / "testdata_presets";
}

std::vector<VectorCase> PresetCases() {
  std::vector<VectorCase> out;
  for (const std::string& name : testvectors::CaseNamesIn(PresetsRoot())) {
    out.push_back({"presets/" + name, PresetsRoot() / name});
  }
  return out;
}

ShardingSpec Sharding(ShardKind kind, int64_t devices) {
  ShardingSpec s;
  s.kind = kind;
  s.mesh.num_devices = devices;
  return s;
}

class PresetVectorsTest : public ::testing::TestWithParam<VectorCase> {
 protected:
  void SetUp() override {
    absl::StatusOr<testvectors::Case> c = testvectors::LoadCase(GetParam());
    ASSERT_TRUE(c.ok()) << c.status();
    case_ = *std::move(c);
    fused_ = case_.config.hidden > 0;
  }

  // `spec` sharded as `sharding` (or not) on the case's global inputs, `extra`
  // by name (a forward's lse/logp/entropy for the backward).
  absl::StatusOr<Outputs> Run(const KernelSpec& spec, const ShardingSpec& sharding,
                              const Outputs& extra = {}) {
    absl::StatusOr<std::unique_ptr<HloModule>> module = BuildShardedKernel(spec, sharding);
    if (!module.ok()) return module.status();
    const std::vector<std::string> names = (*module)->OutputNames();
    Outputs out;
    if (sharding.kind == ShardKind::kNone) {
      std::vector<Literal> args;
      for (const hlo::HloInstruction* p : (*module)->entry()->parameters()) {
        if (auto it = extra.find(p->name()); it != extra.end()) {
          args.push_back(it->second);
          continue;
        }
        absl::StatusOr<Literal> lit = LoadNpy(case_.dir / (p->name() + ".npy"), p->shape());
        if (!lit.ok()) return lit.status();
        args.push_back(*std::move(lit));
      }
      absl::StatusOr<runtime::RunResult> result = runtime::RunModule(**module, args);
      if (!result.ok()) return result.status();
      for (size_t i = 0; i < names.size() && i < result->outputs.size(); ++i) {
        out[names[i]] = std::move(result->outputs[i]);
      }
      return out;
    }
    absl::StatusOr<hlo::PartitionedSignature> sig = hlo::GetPartitionedSignature(**module);
    if (!sig.ok()) return sig.status();
    std::vector<Literal> args;
    for (size_t i = 0; i < sig->parameter_names.size(); ++i) {
      const std::string& name = sig->parameter_names[i];
      if (auto it = extra.find(name); it != extra.end()) {
        args.push_back(it->second);
        continue;
      }
      absl::StatusOr<Literal> lit = LoadNpy(case_.dir / (name + ".npy"), sig->global_parameters[i]);
      if (!lit.ok()) return lit.status();
      args.push_back(*std::move(lit));
    }
    absl::StatusOr<runtime::RunResult> result =
        tools::RunPartitioned(**module, *sig, args, {}, names);
    if (!result.ok()) return result.status();
    for (size_t i = 0; i < names.size() && i < result->outputs.size(); ++i) {
      out[names[i]] = std::move(result->outputs[i]);
    }
    return out;
  }

  // Every output within the case's tolerance (or, `expect_match` false,
  // at least one outside it).
  ::testing::AssertionResult Matches(const Outputs& got) {
    std::string bad;
    for (const auto& [name, lit] : got) {
      auto shape = case_.expected_shapes.find(name);
      if (shape == case_.expected_shapes.end()) {
        return ::testing::AssertionFailure() << "no expected " << name;
      }
      absl::StatusOr<Literal> expected = LoadNpy(case_.dir / ("expected_" + name + ".npy"),
                                                 Shape(PrimitiveType::kF32, shape->second));
      if (!expected.ok()) return ::testing::AssertionFailure() << expected.status();
      ::testing::AssertionResult r = AllClose(lit, *expected, case_.atol, case_.rtol);
      if (!r) absl::StrAppend(&bad, name, ": ", r.message(), "; ");
    }
    if (bad.empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad;
  }

  // fwd_bwd, then fwd and bwd on the forward's lse/logp/entropy.
  void Check(KernelKind kind, const GrpoConfig& config, const ShardingSpec& sharding,
             const std::string& label) {
    SCOPED_TRACE(label);
    auto fwd_bwd = Run({kind, KernelMode::kFwdBwd, config}, sharding);
    ASSERT_TRUE(fwd_bwd.ok()) << fwd_bwd.status();
    EXPECT_TRUE(Matches(*fwd_bwd)) << case_.name << " " << label << " fwd_bwd";
    auto fwd = Run({kind, KernelMode::kFwd, config}, sharding);
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    EXPECT_TRUE(Matches(*fwd)) << case_.name << " " << label << " fwd";
    auto bwd = Run({kind, KernelMode::kBwd, config}, sharding,
                   {{"lse", fwd->at("lse")}, {"logp", fwd->at("logp")},
                    {"entropy", fwd->at("entropy")}});
    ASSERT_TRUE(bwd.ok()) << bwd.status();
    EXPECT_TRUE(Matches(*bwd)) << case_.name << " " << label << " bwd";
  }

  testvectors::Case case_;
  bool fused_ = false;
};

// The module the preset gives takes exactly the case's inputs.
TEST_P(PresetVectorsTest, PresetGivesTheCaseInputs) {
  std::vector<std::string> names = GrpoParameterNames(case_.config, KernelMode::kFwd);
  if (fused_) {
    names.erase(names.begin());
    names.insert(names.begin(), {"hidden", "lm_head"});
  }
  for (const std::string& name : names) {
    EXPECT_TRUE(std::filesystem::exists(case_.dir / (name + ".npy"))) << name;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(case_.dir)) {
    const std::string f = e.path().filename().string();
    if (e.path().extension() == ".npy" && f.rfind("expected_", 0) != 0) files.push_back(f);
  }
  EXPECT_EQ(files.size(), names.size());
}

TEST_P(PresetVectorsTest, EveryKernelReproducesTheTrainer) {
  const GrpoConfig& c = case_.config;
  const ShardingSpec none = Sharding(ShardKind::kNone, 1);
  if (fused_) {
    GrpoConfig chunked = c;
    chunked.block_size = 64;
    chunked.token_chunk = 7;
    Check(KernelKind::kGrpoFusedLinear, c, none, "grpo_fused_linear");
    Check(KernelKind::kGrpoFusedLinear, chunked, Sharding(ShardKind::kVocab, 3),
          "grpo_fused_linear block64 chunk7 vocab/3");
    Check(KernelKind::kGrpoFusedLinear, c, Sharding(ShardKind::kBatch, 2),
          "grpo_fused_linear batch/2");
    return;
  }
  GrpoConfig tiled = c;
  tiled.block_size = 16;
  GrpoConfig rows = tiled;
  rows.time_block = c.seq / 2 + 1;
  Check(KernelKind::kGrpoReference, c, none, "grpo_reference");
  Check(KernelKind::kGrpoTiled, tiled, none, "grpo_tiled block16");
  Check(KernelKind::kGrpoTiled, rows, Sharding(ShardKind::kVocab, 4),
        "grpo_tiled block16 time blocks vocab/4");
  Check(KernelKind::kGrpoTiled, tiled, Sharding(ShardKind::kBatch, 2), "grpo_tiled batch/2");
  Check(KernelKind::kGrpoReference, c, Sharding(ShardKind::kBatch, 4), "grpo_reference batch/4");
}

// The same case without its preset (defaults plus its params) computes a
// different loss: each vector depends on its preset, so the test above can
// fail. When the preset changes the module's inputs it is needed anyway.
TEST_P(PresetVectorsTest, WithoutThePresetTheVectorFails) {
  std::ifstream in(case_.dir / "case.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j.erase("preset");
  absl::StatusOr<GrpoConfig> plain = GrpoConfigFromCaseJson(j.dump());
  ASSERT_TRUE(plain.ok()) << plain.status();
  if (GrpoParameterNames(*plain, KernelMode::kFwdBwd) !=
      GrpoParameterNames(case_.config, KernelMode::kFwdBwd)) {
    GTEST_SUCCEED() << "the preset changes the module's inputs";
    return;
  }
  const KernelKind kind = fused_ ? KernelKind::kGrpoFusedLinear : KernelKind::kGrpoReference;
  auto got = Run({kind, KernelMode::kFwdBwd, *plain}, Sharding(ShardKind::kNone, 1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(Matches(*got)) << case_.name << " matches without --preset";
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetVectorsTest, ::testing::ValuesIn(PresetCases()),
                         testvectors::CaseTestName);

// Every preset has at least one vector.
TEST(PresetVectorsPresenceTest, EveryPresetHasAVector) {
  std::map<std::string, int> seen;
  for (const VectorCase& vc : PresetCases()) {
    std::ifstream in(vc.dir / "case.json");
    seen[nlohmann::json::parse(in)["preset"].get<std::string>()]++;
  }
  for (const std::string& name : GrpoPresetNames()) EXPECT_GT(seen[name], 0) << name;
}

// ---------------------------------------------------------------------------
// Memory and structure.

int64_t ParameterBytes(const HloModule& m) {
  int64_t bytes = 0;
  for (const hlo::HloInstruction* p : m.entry()->parameters()) bytes += p->shape().total_leaf_bytes();
  return bytes;
}

GrpoConfig Shape2x64(PrimitiveType type) {
  GrpoConfig c;
  c.batch = 2;
  c.seq = 64;
  c.vocab = 8192 + 300;  // ragged last tile
  c.block_size = 1024;
  c.logits_type = type;
  c.hidden = 64;
  return c;
}

// Option sets touching every v2 branch of the kernels.
std::vector<std::pair<std::string, std::function<void(GrpoConfig*)>>> OptionSets() {
  return {
      {"gspo+seq_is+lowvar+entropy+token_adv",
       [](GrpoConfig* c) {
         c->policy_loss = PolicyLoss::kGspo;
         c->loss_type = LossType::kSequenceMean;
         c->empty_rows = EmptyRows::kSkip;
         c->row_count_input = true;
         c->is_level = IsLevel::kSequence;
         c->is_mode = IsMode::kMask;
         c->beta = 0.04;
         c->kl_estimator = KlEstimator::kLowVarKl;
         c->log_ratio_clamp = 0.5;
         c->entropy_coef = 0.01;
         c->advantage_shape = AdvantageShape::kToken;
       }},
      {"gspo_token+token_is+k2", [](GrpoConfig* c) {
         c->policy_loss = PolicyLoss::kGspoToken;
         c->is_level = IsLevel::kToken;
         c->beta = 0.1;
         c->kl_estimator = KlEstimator::kK2;
       }},
      {"cispo", [](GrpoConfig* c) { c->policy_loss = PolicyLoss::kCispo; }},
      {"sapo+entropy", [](GrpoConfig* c) {
         c->policy_loss = PolicyLoss::kSapo;
         c->entropy_coef = -0.02;
       }},
  };
}

// Peaks (tpuoff memory's analysis, equal to the emulator's) of the tiled and
// fused kernels, every mode, unsharded and vocab-sharded: an option adds at
// most its own [B,T] inputs' bytes plus 16 [B,T] f32 temporaries — far less
// than one [B,T,W] f32 tile of logits, the unit any new vocab-sized buffer
// would add.
TEST(PolicyLossMemoryTest, OptionsKeepTheTiledAndFusedPeaks) {
  for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16}) {
    for (KernelKind kind : {KernelKind::kGrpoTiled, KernelKind::kGrpoFusedLinear}) {
      for (KernelMode mode : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
        for (ShardKind shard : {ShardKind::kNone, ShardKind::kVocab}) {
         // v1 temperatures (post_lse with τ != 1 streams a second softmax
         // domain for the entropy, with or without options) times the option sets.
         for (TemperatureMode tm : {TemperatureMode::kPreSoftmax, TemperatureMode::kPostLse}) {
          GrpoConfig base = Shape2x64(type);
          base.temperature = 0.7;
          base.temperature_mode = tm;
          const ShardingSpec sharding = Sharding(shard, shard == ShardKind::kNone ? 1 : 4);
          auto plain = BuildShardedKernel({kind, mode, base}, sharding);
          ASSERT_TRUE(plain.ok()) << plain.status();
          auto plain_peak = hlo::AnalyzeMemory(**plain);
          ASSERT_TRUE(plain_peak.ok()) << plain_peak.status();
          const int64_t per_token = base.batch * base.seq * 4;
          const int64_t tile = per_token * base.block_size;
          for (const auto& [label, apply] : OptionSets()) {
            GrpoConfig c = base;
            apply(&c);
            auto module = BuildShardedKernel({kind, mode, c}, sharding);
            ASSERT_TRUE(module.ok()) << label << ": " << module.status();
            auto peak = hlo::AnalyzeMemory(**module);
            ASSERT_TRUE(peak.ok()) << peak.status();
            const int64_t inputs = ParameterBytes(**module) - ParameterBytes(**plain);
            const int64_t growth = peak->peak.bytes - plain_peak->peak.bytes;
            EXPECT_LE(growth, inputs + 16 * per_token)
                << KernelKindName(kind) << " " << KernelModeName(mode) << " "
                << ShardKindName(shard) << " " << hlo::PrimitiveTypeName(type) << " "
                << TemperatureModeName(tm) << " " << label
                << ": peak " << plain_peak->peak.bytes << " -> " << peak->peak.bytes
                << " (inputs +" << inputs << ")";
            EXPECT_LT(inputs + 16 * per_token, tile);  // the bound can tell a tile apart
          }
         }
        }
      }
    }
  }
}

int64_t CountOpcode(const HloModule& m, HloOpcode op) {
  int64_t n = 0;
  for (const auto& comp : m.computations()) {
    for (const auto& instr : comp->instructions()) n += instr->opcode() == op;
  }
  return n;
}

// Vocab passes are while loops over vocab tiles (V > block): the entropy
// bonus adds none in the forward stream or the value-and-grad module, and
// exactly one to a backward-only module whose lse input is of z while the
// entropy is of z/τ (post_lse, τ != 1).
TEST(PolicyLossStructureTest, EntropyBonusNeedsNoExtraVocabPass) {
  for (KernelKind kind : {KernelKind::kGrpoTiled, KernelKind::kGrpoFusedLinear}) {
    for (TemperatureMode tm : {TemperatureMode::kPreSoftmax, TemperatureMode::kPostLse}) {
      for (KernelMode mode : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
        GrpoConfig c = Shape2x64(PrimitiveType::kBF16);
        c.temperature = 0.8;
        c.temperature_mode = tm;
        auto plain = BuildKernel({kind, mode, c});
        c.entropy_coef = 0.05;
        auto bonus = BuildKernel({kind, mode, c});
        ASSERT_TRUE(plain.ok() && bonus.ok());
        const bool extra = mode == KernelMode::kBwd && tm == TemperatureMode::kPostLse;
        EXPECT_EQ(CountOpcode(**bonus, HloOpcode::kWhile),
                  CountOpcode(**plain, HloOpcode::kWhile) + (extra ? 1 : 0))
            << KernelKindName(kind) << " " << TemperatureModeName(tm) << " "
            << KernelModeName(mode);
        if (kind == KernelKind::kGrpoFusedLinear) {
          // The fused kernel's passes recompute logits tiles: more matmuls only then.
          const int64_t more_dots =
              CountOpcode(**bonus, HloOpcode::kDot) - CountOpcode(**plain, HloOpcode::kDot);
          if (extra) {
            EXPECT_GT(more_dots, 0);
          } else {
            EXPECT_EQ(more_dots, 0) << TemperatureModeName(tm) << " " << KernelModeName(mode);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpuoff::kernels
