// GrpoConfig validation, case.json reading, the JSON reader, parameter and
// output naming, and BuildKernel's dispatch and errors.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "hlo/ir/verifier.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_config.h"
#include "tests/test_vectors.h"

namespace tpuoff::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GrpoConfig Small() {
  GrpoConfig c;
  c.batch = 2;
  c.seq = 3;
  c.vocab = 15;
  return c;
}

struct BadConfigCase {
  std::string name;
  std::function<void(GrpoConfig*)> mutate;
  std::string message;  // substring of the error
};

TEST(GrpoConfigTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateGrpoConfig(Small()).ok());
  GrpoConfig c;
  EXPECT_EQ(c.eps_low, 0.2);
  EXPECT_EQ(c.eps_high, 0.2);
  EXPECT_EQ(c.temperature, 1.0);
  EXPECT_EQ(c.block_size, 2048);
  EXPECT_EQ(c.loss_type, LossType::kTokenMean);
  EXPECT_EQ(c.temperature_mode, TemperatureMode::kPreSoftmax);
}

TEST(GrpoConfigTest, RejectsBadValuesWithClearErrors) {
  const std::vector<BadConfigCase> cases = {
      {"zero_batch", [](GrpoConfig* c) { c->batch = 0; }, "batch, seq and vocab must be > 0"},
      {"negative_vocab", [](GrpoConfig* c) { c->vocab = -1; }, "must be > 0"},
      {"huge_vocab", [](GrpoConfig* c) { c->vocab = int64_t{1} << 40; }, "fit in s32"},
      {"f16_logits", [](GrpoConfig* c) { c->logits_type = hlo::PrimitiveType::kF16; },
       "logits type must be f32 or bf16"},
      {"block_zero", [](GrpoConfig* c) { c->block_size = 0; }, "block_size must be > 0"},
      {"block_negative", [](GrpoConfig* c) { c->block_size = -8; }, "block_size must be > 0"},
      {"time_block_zero", [](GrpoConfig* c) { c->time_block = 0; }, "time_block"},
      {"eps_low_above_one", [](GrpoConfig* c) { c->eps_low = 1.01; }, "eps_low must be in [0, 1]"},
      {"eps_low_negative", [](GrpoConfig* c) { c->eps_low = -0.1; }, "eps_low"},
      {"eps_high_negative", [](GrpoConfig* c) { c->eps_high = -0.1; }, "eps_high"},
      {"eps_high_nan", [](GrpoConfig* c) { c->eps_high = NAN; }, "eps_high"},
      {"delta_one", [](GrpoConfig* c) { c->delta = 1.0; }, "delta must be finite and > 1"},
      {"delta_half", [](GrpoConfig* c) { c->delta = 0.5; }, "delta"},
      {"temperature_zero", [](GrpoConfig* c) { c->temperature = 0; }, "temperature"},
      {"temperature_inf", [](GrpoConfig* c) { c->temperature = INFINITY; }, "temperature"},
      {"beta_negative", [](GrpoConfig* c) { c->beta = -1; }, "beta"},
      {"max_len_zero",
       [](GrpoConfig* c) {
         c->loss_type = LossType::kConstant;
         c->max_len = 0;
       },
       "max_len must be > 0"},
      {"max_len_wrong_loss", [](GrpoConfig* c) { c->max_len = 4; }, "only used by loss_type"},
      {"token_count_sequence_mean",
       [](GrpoConfig* c) {
         c->loss_type = LossType::kSequenceMean;
         c->token_count_input = true;
       },
       "needs loss_type token_mean"},
      // Policy-loss variants (v2): bad values and contradictory pairs.
      {"delta_with_gspo",
       [](GrpoConfig* c) {
         c->policy_loss = PolicyLoss::kGspo;
         c->delta = 2.0;
       },
       "delta (the upper ratio clamp) applies to policy_loss ppo_clip only, not gspo"},
      {"delta_with_cispo",
       [](GrpoConfig* c) {
         c->policy_loss = PolicyLoss::kCispo;
         c->delta = 2.0;
       },
       "not cispo"},
      {"log_ratio_clamp_zero", [](GrpoConfig* c) { c->log_ratio_clamp = 0.0; },
       "log_ratio_clamp must be finite and > 0"},
      {"log_ratio_clamp_nan", [](GrpoConfig* c) { c->log_ratio_clamp = NAN; }, "log_ratio_clamp"},
      {"entropy_coef_inf", [](GrpoConfig* c) { c->entropy_coef = INFINITY; },
       "entropy_coef must be finite"},
      {"sapo_tau_pos_zero", [](GrpoConfig* c) { c->sapo_tau_pos = 0; }, "sapo_tau_pos must be"},
      {"sapo_tau_neg_negative", [](GrpoConfig* c) { c->sapo_tau_neg = -1; },
       "sapo_tau_neg must be"},
      {"is_cap_zero", [](GrpoConfig* c) { c->is_cap = 0; }, "is_cap must be finite and > 0"},
      {"empty_rows_skip_token_mean", [](GrpoConfig* c) { c->empty_rows = EmptyRows::kSkip; },
       "empty_rows skip applies to loss_type sequence_mean only, not token_mean"},
      {"row_count_without_skip",
       [](GrpoConfig* c) {
         c->loss_type = LossType::kSequenceMean;
         c->row_count_input = true;
       },
       "total_nonempty_rows) needs loss_type sequence_mean with empty_rows skip, not "
       "sequence_mean with empty_rows count"},
      {"row_count_token_mean", [](GrpoConfig* c) { c->row_count_input = true; },
       "not token_mean with empty_rows count"},
  };
  for (const BadConfigCase& tc : cases) {
    GrpoConfig c = Small();
    tc.mutate(&c);
    absl::Status s = ValidateGrpoConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << tc.name << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(tc.message)) << tc.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("GrpoConfig")) << tc.name;
    // BuildKernel refuses the same config rather than emitting a module.
    KernelSpec spec{KernelKind::kGrpoTiled, KernelMode::kFwdBwd, c};
    EXPECT_EQ(BuildKernel(spec).status().code(), absl::StatusCode::kInvalidArgument)
        << tc.name;
  }
}

TEST(GrpoConfigTest, AcceptsEdgeValues) {
  GrpoConfig c = Small();
  c.eps_low = 0;
  c.eps_high = 0;
  c.delta = 1.0001;
  c.block_size = 1;           // one column per tile
  c.time_block = 100;         // larger than T: one row block
  EXPECT_TRUE(ValidateGrpoConfig(c).ok());
  c.block_size = 1 << 20;     // larger than V: one tile
  EXPECT_TRUE(ValidateGrpoConfig(c).ok());
  c.eps_low = 1.0;            // TRL's upper-only cispo cap: clipped below at 0
  c.entropy_coef = -0.5;      // an entropy penalty
  c.log_ratio_clamp = 1e-6;
  EXPECT_TRUE(ValidateGrpoConfig(c).ok());
  // Parameters of a term the config leaves out are carried, not refused.
  GrpoConfig unused = Small();
  unused.kl_estimator = KlEstimator::kLowVarKl;  // beta 0
  unused.sapo_tau_pos = 3;                       // not sapo
  unused.is_mode = IsMode::kMask;                // is_level none
  unused.is_cap = 5;
  EXPECT_TRUE(ValidateGrpoConfig(unused).ok());
}

TEST(GrpoConfigTest, EnumNamesRoundTrip) {
  for (auto m : {TemperatureMode::kPreSoftmax, TemperatureMode::kPostLse}) {
    EXPECT_EQ(*ParseTemperatureMode(TemperatureModeName(m)), m);
  }
  for (auto v : {PolicyLoss::kPpoClip, PolicyLoss::kGspo, PolicyLoss::kGspoToken,
                 PolicyLoss::kCispo, PolicyLoss::kSapo}) {
    EXPECT_EQ(*ParsePolicyLoss(PolicyLossName(v)), v);
  }
  EXPECT_EQ(PolicyLossName(PolicyLoss::kGspoToken), "gspo_token");
  for (auto v : {KlEstimator::kK3, KlEstimator::kK1, KlEstimator::kK2, KlEstimator::kLowVarKl}) {
    EXPECT_EQ(*ParseKlEstimator(KlEstimatorName(v)), v);
  }
  EXPECT_EQ(KlEstimatorName(KlEstimator::kLowVarKl), "low_var_kl");
  for (auto v : {IsLevel::kNone, IsLevel::kToken, IsLevel::kSequence}) {
    EXPECT_EQ(*ParseIsLevel(IsLevelName(v)), v);
  }
  for (auto v : {IsMode::kTruncate, IsMode::kMask}) EXPECT_EQ(*ParseIsMode(IsModeName(v)), v);
  for (auto v : {EmptyRows::kCount, EmptyRows::kSkip}) {
    EXPECT_EQ(*ParseEmptyRows(EmptyRowsName(v)), v);
  }
  for (auto v : {AdvantageShape::kSequence, AdvantageShape::kToken}) {
    EXPECT_EQ(*ParseAdvantageShape(AdvantageShapeName(v)), v);
  }
  absl::StatusOr<PolicyLoss> bad = ParsePolicyLoss("ppo");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("unknown policy loss 'ppo' (expected ppo_clip, gspo, gspo_token, cispo, "
                        "sapo)"));
  for (auto t : {LossType::kTokenMean, LossType::kSequenceMean, LossType::kConstant}) {
    EXPECT_EQ(*ParseLossType(LossTypeName(t)), t);
  }
  for (auto m : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
    EXPECT_EQ(*ParseKernelMode(KernelModeName(m)), m);
  }
  for (KernelKind k : AllKernelKinds()) EXPECT_EQ(*ParseKernelKind(KernelKindName(k)), k);
  EXPECT_THAT(std::string(ParseKernelKind("grpo_fast").status().message()),
              HasSubstr("unknown kernel 'grpo_fast'"));
  EXPECT_FALSE(ParseLossType("mean").ok());
  EXPECT_FALSE(ParseTemperatureMode("post").ok());
  EXPECT_FALSE(ParseKernelMode("both").ok());
}

TEST(GrpoConfigTest, ParameterNamesFollowTheSpec) {
  GrpoConfig c = Small();
  EXPECT_THAT(GrpoParameterNames(c, KernelMode::kFwd),
              ElementsAre("logits", "chosen_ids", "completion_mask", "advantages", "old_logp"));
  c.on_policy = true;
  c.beta = 0.04;
  c.token_count_input = true;
  EXPECT_THAT(GrpoParameterNames(c, KernelMode::kBwd),
              ElementsAre("logits", "chosen_ids", "completion_mask", "advantages", "ref_logp",
                          "total_valid_tokens", "lse", "logp"));
  // v2 inputs: sampler_logp after ref_logp, the row count after the token
  // count, and the backward's entropy after lse/logp.
  c.on_policy = false;
  c.token_count_input = false;
  c.is_level = IsLevel::kSequence;
  c.loss_type = LossType::kSequenceMean;
  c.empty_rows = EmptyRows::kSkip;
  c.row_count_input = true;
  c.entropy_coef = 0.01;
  EXPECT_THAT(GrpoParameterNames(c, KernelMode::kBwd),
              ElementsAre("logits", "chosen_ids", "completion_mask", "advantages", "old_logp",
                          "ref_logp", "sampler_logp", "total_nonempty_rows", "lse", "logp",
                          "entropy"));
  EXPECT_THAT(GrpoParameterNames(c, KernelMode::kFwdBwd),
              ElementsAre("logits", "chosen_ids", "completion_mask", "advantages", "old_logp",
                          "ref_logp", "sampler_logp", "total_nonempty_rows"));
  EXPECT_THAT(GrpoOutputNames(KernelMode::kFwd),
              ElementsAre("loss", "per_token_loss", "logp", "entropy", "lse"));
  EXPECT_THAT(GrpoOutputNames(KernelMode::kBwd), ElementsAre("dlogits"));
  EXPECT_THAT(GrpoOutputNames(KernelMode::kFwdBwd),
              ElementsAre("loss", "per_token_loss", "logp", "entropy", "lse", "dlogits"));
}

TEST(GrpoConfigTest, FromCaseJsonText) {
  absl::StatusOr<GrpoConfig> c = GrpoConfigFromCaseJson(R"({
    "shape": {"B": 3, "T": 4, "V": 64}, "logits_dtype": "bf16", "on_policy": true,
    "params": {"temperature": 0.7, "temp_mode": "post_lse", "beta": 0.04, "delta": 1.5,
               "eps_low": 0.1, "eps_high": 0.28},
    "tolerance": {"atol": 1e-5, "rtol": 1e-4}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->batch, 3);
  EXPECT_EQ(c->seq, 4);
  EXPECT_EQ(c->vocab, 64);
  EXPECT_EQ(c->logits_type, hlo::PrimitiveType::kBF16);
  EXPECT_TRUE(c->on_policy);
  EXPECT_EQ(c->temperature, 0.7);
  EXPECT_EQ(c->temperature_mode, TemperatureMode::kPostLse);
  EXPECT_EQ(c->beta, 0.04);
  EXPECT_EQ(c->delta, 1.5);
  EXPECT_EQ(c->eps_low, 0.1);
  EXPECT_EQ(c->eps_high, 0.28);
  EXPECT_EQ(c->block_size, 2048);

  c = GrpoConfigFromCaseJson(R"({"shape": {"B": 2, "T": 8, "V": 33},
      "params": {"total_valid_tokens": 40.0, "loss_type": "token_mean"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->token_count_input);
  EXPECT_FALSE(c->on_policy);

  c = GrpoConfigFromCaseJson(R"({"shape": {"B": 4, "T": 7, "V": 40},
      "params": {"loss_type": "constant", "max_len": 16}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->loss_type, LossType::kConstant);
  EXPECT_EQ(c->max_len, 16);

  // Every v2 parameter.
  c = GrpoConfigFromCaseJson(R"({"shape": {"B": 4, "T": 7, "V": 40},
      "params": {"policy_loss": "gspo_token", "kl_estimator": "low_var_kl", "beta": 0.1,
                 "log_ratio_clamp": 0.4, "advantage_shape": "token", "entropy_coef": -0.02,
                 "loss_type": "sequence_mean", "empty_rows": "skip", "total_nonempty_rows": 3,
                 "sapo_tau_pos": 0.8, "sapo_tau_neg": 1.3, "is_level": "sequence",
                 "is_mode": "mask", "is_cap": 1.5, "eps_low": 1.0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->policy_loss, PolicyLoss::kGspoToken);
  EXPECT_EQ(c->kl_estimator, KlEstimator::kLowVarKl);
  EXPECT_EQ(c->log_ratio_clamp, 0.4);
  EXPECT_EQ(c->advantage_shape, AdvantageShape::kToken);
  EXPECT_EQ(c->entropy_coef, -0.02);
  EXPECT_EQ(c->empty_rows, EmptyRows::kSkip);
  EXPECT_TRUE(c->row_count_input);
  EXPECT_EQ(c->sapo_tau_pos, 0.8);
  EXPECT_EQ(c->sapo_tau_neg, 1.3);
  EXPECT_EQ(c->is_level, IsLevel::kSequence);
  EXPECT_EQ(c->is_mode, IsMode::kMask);
  EXPECT_EQ(c->is_cap, 1.5);
  EXPECT_EQ(c->eps_low, 1.0);

  // A preset, then params over it.
  c = GrpoConfigFromCaseJson(R"({"shape": {"B": 2, "T": 3, "V": 40}, "preset": "tunix-grpo",
      "params": {"beta": 0.0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->loss_type, LossType::kSequenceMean);
  EXPECT_EQ(c->empty_rows, EmptyRows::kSkip);
  EXPECT_EQ(c->kl_estimator, KlEstimator::kK1);
  EXPECT_EQ(c->log_ratio_clamp, 20.0);
  EXPECT_EQ(c->beta, 0.0);
}

TEST(GrpoConfigTest, FromCaseJsonErrors) {
  struct Bad {
    std::string json;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {R"({"params": {}})", "missing \"shape\""},
      {R"({"shape": {"B": 2, "T": 3}})", "missing \"V\""},
      {R"({"shape": {"B": 2.5, "T": 3, "V": 4}})", "shape.B must be an integer"},
      {R"({"shape": {"B": "2", "T": 3, "V": 4}})", "\"B\" must be a number"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "logits_dtype": "f16"})", "f32 or bf16"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"eps": 0.2}})",
       "params.eps: unknown parameter"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"delta": 0.9}})", "delta"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"loss_type": "sum"}})",
       "unknown loss type 'sum'"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"temperature": "hot"}})",
       "params.temperature must be a number"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4},)", "case.json:1:"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"policy_loss": "ppo"}})",
       "params.policy_loss: unknown policy loss 'ppo'"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"is_level": 1}})",
       "params.is_level must be a string"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"entropy_coef": "high"}})",
       "params.entropy_coef must be a number"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "params": {"policy_loss": "sapo", "delta": 2}})",
       "applies to policy_loss ppo_clip only, not sapo"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "preset": "trl"})", "unknown preset 'trl'"},
      {R"({"shape": {"B": 2, "T": 3, "V": 4}, "preset": 3})", "preset must be a string"},
  };
  for (const Bad& tc : cases) {
    absl::StatusOr<GrpoConfig> c = GrpoConfigFromCaseJson(tc.json);
    ASSERT_FALSE(c.ok()) << tc.json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << tc.json;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(tc.message)) << tc.json;
  }
  absl::StatusOr<GrpoConfig> missing = GrpoConfigFromCaseJson("/nonexistent/case_dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/case_dir/case.json"));
}

// Every test-vector case of grpo/, grpo_fused/ and their v2 folders (own, and
// shared when configured) reads into a valid config whose shape and optional
// inputs match the case's inputs.
TEST(GrpoConfigTest, ReadsEveryTestVectorCase) {
  int n = 0;
  for (const char* folder : {"grpo", "grpo_fused", "grpo_v2", "grpo_fused_v2"}) {
    const bool fused = absl::StartsWith(folder, "grpo_fused");
    for (const testvectors::VectorCase& vc : testvectors::VectorCases(folder)) {
      SCOPED_TRACE(vc.label);
      absl::StatusOr<GrpoConfig> c = GrpoConfigFromCaseJson(vc.dir.string());
      ASSERT_TRUE(c.ok()) << c.status();
      std::ifstream in(vc.dir / "case.json");
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(j.is_object());
      const nlohmann::json& inputs = j["inputs"];
      if (fused) {
        const nlohmann::json& hidden = inputs["hidden"]["shape"];
        ASSERT_EQ(hidden.size(), 3u);
        EXPECT_EQ(hidden[2].get<int64_t>(), c->hidden);
        EXPECT_EQ(inputs["lm_head"]["shape"][1].get<int64_t>(), c->vocab);
      }
      const nlohmann::json& shape = inputs[fused ? "hidden" : "logits"]["shape"];
      ASSERT_EQ(shape.size(), 3u);
      EXPECT_EQ(shape[0].get<int64_t>(), c->batch);
      EXPECT_EQ(shape[1].get<int64_t>(), c->seq);
      if (!fused) {
        EXPECT_EQ(shape[2].get<int64_t>(), c->vocab);
      }
      EXPECT_EQ(!inputs.contains("old_logp"), c->on_policy);
      EXPECT_EQ(inputs.contains("ref_logp"), c->beta != 0);
      EXPECT_EQ(inputs.contains("total_valid_tokens"), c->token_count_input);
      EXPECT_EQ(inputs.contains("total_nonempty_rows"), c->row_count_input);
      EXPECT_EQ(inputs.contains("sampler_logp"), c->is_level != IsLevel::kNone);
      EXPECT_EQ(inputs["advantages"]["shape"].size(),
                c->advantage_shape == AdvantageShape::kToken ? 2u : 1u);
      // The module's parameters are exactly the case's inputs.
      std::vector<std::string> names = GrpoParameterNames(*c, KernelMode::kFwd);
      if (fused) {
        names.erase(names.begin());
        names.insert(names.begin(), {"hidden", "lm_head"});
      }
      std::vector<std::string> given;
      for (const auto& [name, spec] : inputs.items()) given.push_back(name);
      std::sort(names.begin(), names.end());
      std::sort(given.begin(), given.end());
      EXPECT_EQ(names, given);
      ++n;
    }
  }
  EXPECT_GE(n, 15 + 19 + 3);
}

// v2 parameters given at their defaults read as the v1 loss.
TEST(GrpoConfigTest, V2ParametersAtDefaultsAreTheV1Loss) {
  absl::StatusOr<GrpoConfig> c = GrpoConfigFromCaseJson(
      R"({"shape": {"B": 2, "T": 3, "V": 4},
          "params": {"policy_loss": "ppo_clip", "kl_estimator": "k3", "log_ratio_clamp": null,
          "advantage_shape": "sequence", "entropy_coef": 0, "empty_rows": "count",
          "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05, "is_level": "none", "is_mode": "truncate",
          "is_cap": 2.0, "beta": 0.1}})");
  ASSERT_TRUE(c.ok()) << c.status();
  GrpoConfig v1;
  v1.batch = 2;
  v1.seq = 3;
  v1.vocab = 4;
  v1.beta = 0.1;
  EXPECT_EQ(GrpoParameterNames(*c, KernelMode::kBwd), GrpoParameterNames(v1, KernelMode::kBwd));
  EXPECT_EQ(c->policy_loss, PolicyLoss::kPpoClip);
  EXPECT_FALSE(c->log_ratio_clamp.has_value());
  EXPECT_EQ(c->is_level, IsLevel::kNone);
}

TEST(BuildKernelTest, EntropyKernelsHaveOnlyForward) {
  for (KernelKind k : {KernelKind::kEntropyReference, KernelKind::kEntropyTiled}) {
    for (KernelMode m : {KernelMode::kBwd, KernelMode::kFwdBwd}) {
      absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
          BuildKernel({k, m, Small()});
      EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(module.status().message()), HasSubstr("only the fwd mode"));
    }
    absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
        BuildKernel({k, KernelMode::kFwd, Small()});
    ASSERT_TRUE(module.ok()) << module.status();
    EXPECT_THAT((*module)->OutputNames(), ElementsAre("entropy"));
    EXPECT_EQ((*module)->entry()->num_parameters(), 1);
    EXPECT_EQ((*module)->entry()->parameter(0)->name(), "logits");
    EXPECT_EQ((*module)->entry()->root()->shape().ToString(), "f32[2,3]");
  }
}

TEST(BuildKernelTest, EveryGrpoKernelAndModeBuildsNamedVerifiedModules) {
  GrpoConfig c = Small();
  c.beta = 0.1;
  c.token_count_input = true;
  c.block_size = 4;
  for (KernelKind k : {KernelKind::kGrpoReference, KernelKind::kGrpoTiled}) {
    for (KernelMode m : {KernelMode::kFwd, KernelMode::kBwd, KernelMode::kFwdBwd}) {
      absl::StatusOr<std::unique_ptr<hlo::HloModule>> module = BuildKernel({k, m, c});
      ASSERT_TRUE(module.ok()) << KernelKindName(k) << " " << KernelModeName(m) << ": "
                               << module.status();
      EXPECT_TRUE(hlo::VerifyModule(**module).ok());
      EXPECT_EQ((*module)->OutputNames(), GrpoOutputNames(m));
      const std::vector<std::string> names = GrpoParameterNames(c, m);
      ASSERT_EQ((*module)->entry()->num_parameters(), static_cast<int64_t>(names.size()));
      for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_EQ((*module)->entry()->parameter(i)->name(), names[i]);
      }
      EXPECT_EQ((*module)->name(),
                std::string(KernelKindName(k)) + "_" + std::string(KernelModeName(m)));
    }
  }
}

}  // namespace
}  // namespace tpuoff::kernels
