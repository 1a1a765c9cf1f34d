// The CLI support library: the flag parser (accepted forms, strict errors,
// generated usage), the kernel flags -> KernelSpec mapping, atomic file
// writes / staged output directories, and deterministic random inputs.
#include "tools/cli/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hlo/ir/instruction.h"
#include "tools/io/file_util.h"
#include "tools/io/json_text.h"
#include "tools/io/staged_output.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::tools {
namespace {

using ::testing::HasSubstr;

struct Flags {
  bool verbose = false;
  int64_t batch = 8;
  double eps = 0.2;
  std::string out;
  std::string format = "text";
  std::optional<double> delta;
  std::optional<int64_t> max_len;
};

class FlagSetTest : public ::testing::Test {
 protected:
  FlagSetTest() : fs_("tpuoff test", "FILE [flags]", "A test command.") {
    fs_.AddBool("verbose", &f_.verbose, "talk more");
    fs_.AddInt64("batch", &f_.batch, "batch size");
    fs_.AddDouble("eps", &f_.eps, "clip epsilon");
    fs_.AddString("out", &f_.out, "output file");
    fs_.AddEnum("format", &f_.format, {"text", "proto", "json"}, "output format");
    fs_.AddOptionalDouble("delta", &f_.delta, "ratio clamp");
    fs_.AddOptionalInt64("max-len", &f_.max_len, "max length");
    fs_.SetPositionals("FILE", 0, 1);
  }
  absl::Status Parse(std::vector<std::string> args) { return fs_.Parse(args); }

  Flags f_;
  FlagSet fs_;
};

TEST_F(FlagSetTest, DefaultsStayWhenNothingIsGiven) {
  ASSERT_TRUE(Parse({}).ok());
  EXPECT_FALSE(f_.verbose);
  EXPECT_EQ(f_.batch, 8);
  EXPECT_EQ(f_.eps, 0.2);
  EXPECT_EQ(f_.format, "text");
  EXPECT_FALSE(f_.delta.has_value());
  EXPECT_FALSE(fs_.WasSet("batch"));
  EXPECT_TRUE(fs_.positionals().empty());
}

TEST_F(FlagSetTest, AcceptsEqualsSpaceBooleanAndPositionalForms) {
  absl::Status s = Parse({"--batch=4", "--eps", "-0.5", "m.hlo", "--verbose",
                          "--format", "json", "--out=-", "--delta=2",
                          "--max-len", "16"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(f_.verbose);
  EXPECT_EQ(f_.batch, 4);
  EXPECT_EQ(f_.eps, -0.5);
  EXPECT_EQ(f_.format, "json");
  EXPECT_EQ(f_.out, "-");
  ASSERT_TRUE(f_.delta.has_value());
  EXPECT_EQ(*f_.delta, 2.0);
  EXPECT_EQ(f_.max_len, 16);
  EXPECT_TRUE(fs_.WasSet("batch"));
  EXPECT_EQ(fs_.positionals(), (std::vector<std::string>{"m.hlo"}));
}

TEST_F(FlagSetTest, BooleanExplicitValuesAndDoubleDash) {
  ASSERT_TRUE(Parse({"--verbose=false", "--", "--batch=3"}).ok());
  EXPECT_FALSE(f_.verbose);
  EXPECT_EQ(f_.batch, 8);
  EXPECT_EQ(fs_.positionals(), (std::vector<std::string>{"--batch=3"}));
}

TEST_F(FlagSetTest, StrictErrorsSayWhatWasExpected) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown flag --bogus"},
      {{"-x"}, "unknown option '-x'"},
      {{"--batch=four"}, "--batch expects an integer, got 'four'"},
      {{"--batch=4.5"}, "--batch expects an integer"},
      {{"--batch="}, "--batch expects an integer, got ''"},
      {{"--eps=abc"}, "--eps expects a finite number"},
      {{"--eps=nan"}, "--eps expects a finite number"},
      {{"--format=xml"}, "--format expects one of text|proto|json, got 'xml'"},
      {{"--verbose=maybe"}, "--verbose expects true or false"},
      {{"--batch"}, "--batch needs a value (INT)"},
      {{"--out", "--verbose"}, "--out needs a value"},
      {{"--batch=1", "--batch=2"}, "--batch given more than once"},
      {{"a", "b"}, "expected 0 to 1 FILE argument(s), got 2"},
  };
  for (const Case& c : cases) {
    Flags f;
    FlagSet fs("tpuoff test", "", "");
    fs.AddBool("verbose", &f.verbose, "");
    fs.AddInt64("batch", &f.batch, "");
    fs.AddDouble("eps", &f.eps, "");
    fs.AddString("out", &f.out, "");
    fs.AddEnum("format", &f.format, {"text", "proto", "json"}, "");
    fs.SetPositionals("FILE", 0, 1);
    absl::Status s = fs.Parse(c.args);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(s.message()), HasSubstr("tpuoff test"));
  }
}

TEST_F(FlagSetTest, MissingRequiredPositional) {
  Flags f;
  FlagSet fs("tpuoff x", "FILE", "");
  fs.SetPositionals("FILE", 1, 1);
  absl::Status s = fs.Parse({});
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected 1 FILE argument(s), got 0"));
  FlagSet none("tpuoff y", "", "");
  EXPECT_THAT(std::string(none.Parse({"stray"}).message()),
              HasSubstr("unexpected argument 'stray'"));
}

TEST_F(FlagSetTest, HelpSkipsPositionalChecksAndUsageListsEveryFlag) {
  ASSERT_TRUE(Parse({"a", "b", "--help"}).ok());
  EXPECT_TRUE(fs_.help_requested());
  const std::string usage = fs_.Usage();
  EXPECT_THAT(usage, HasSubstr("usage: tpuoff test FILE [flags]"));
  EXPECT_THAT(usage, HasSubstr("A test command."));
  EXPECT_THAT(usage, HasSubstr("--batch=INT"));
  EXPECT_THAT(usage, HasSubstr("batch size (default: 8)"));
  EXPECT_THAT(usage, HasSubstr("--eps=NUM"));
  EXPECT_THAT(usage, HasSubstr("clip epsilon (default: 0.2)"));
  EXPECT_THAT(usage, HasSubstr("--format=text|proto|json"));
  EXPECT_THAT(usage, HasSubstr("output format (default: text)"));
  EXPECT_THAT(usage, HasSubstr("--verbose"));
  EXPECT_THAT(usage, HasSubstr("talk more (default: false)"));
  EXPECT_THAT(usage, HasSubstr("ratio clamp (default: none)"));
  EXPECT_THAT(usage, HasSubstr("--help"));
}

absl::Status ParseKernel(FlagSet& fs, std::vector<std::string> args) {
  return fs.Parse(args);
}

TEST(KernelFlagsTest, MapsEveryFlagIntoTheSpec) {
  KernelFlags k;
  FlagSet fs("tpuoff k", "", "");
  RegisterKernelFlags(fs, &k);
  ASSERT_TRUE(ParseKernel(fs, {"--kernel=grpo_tiled", "--mode=fwd_bwd",
                               "--batch=3", "--seq=5", "--vocab=37",
                               "--logits-dtype=bf16", "--eps-low=0.1",
                               "--eps-high=0.3", "--temperature=0.7",
                               "--temperature-mode=post_lse", "--beta=0.04",
                               "--delta=1.5", "--loss-type=constant",
                               "--max-len=9", "--on-policy",
                               "--block-size=16"})
                  .ok());
  absl::Status usage = CheckKernelFlagUsage(fs, &k);
  ASSERT_TRUE(usage.ok()) << usage;
  absl::StatusOr<kernels::KernelSpec> spec = KernelSpecFromFlags(k);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, kernels::KernelKind::kGrpoTiled);
  EXPECT_EQ(spec->mode, kernels::KernelMode::kFwdBwd);
  const kernels::GrpoConfig& c = spec->config;
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.seq, 5);
  EXPECT_EQ(c.vocab, 37);
  EXPECT_EQ(c.logits_type, hlo::PrimitiveType::kBF16);
  EXPECT_EQ(c.eps_low, 0.1);
  EXPECT_EQ(c.eps_high, 0.3);
  EXPECT_EQ(c.temperature, 0.7);
  EXPECT_EQ(c.temperature_mode, kernels::TemperatureMode::kPostLse);
  EXPECT_EQ(c.beta, 0.04);
  EXPECT_EQ(c.delta, 1.5);
  EXPECT_EQ(c.loss_type, kernels::LossType::kConstant);
  EXPECT_EQ(c.max_len, 9);
  EXPECT_FALSE(c.token_count_input);
  EXPECT_TRUE(c.on_policy);
  EXPECT_EQ(c.block_size, 16);

  // The run-time token count goes with token_mean (the default).
  KernelFlags k2;
  FlagSet fs2("tpuoff k", "", "");
  RegisterKernelFlags(fs2, &k2);
  ASSERT_TRUE(ParseKernel(fs2, {"--kernel=grpo_reference", "--token-count-input"}).ok());
  absl::StatusOr<kernels::KernelSpec> spec2 = KernelSpecFromFlags(k2);
  ASSERT_TRUE(spec2.ok()) << spec2.status();
  EXPECT_TRUE(spec2->config.token_count_input);
  EXPECT_EQ(spec2->kind, kernels::KernelKind::kGrpoReference);
  EXPECT_EQ(spec2->mode, kernels::KernelMode::kFwd);
  EXPECT_EQ(spec2->config.vocab, 151936);
}

TEST(KernelFlagsTest, MapsEveryPolicyLossFlagIntoTheSpec) {
  KernelFlags k;
  FlagSet fs("tpuoff k", "", "");
  RegisterKernelFlags(fs, &k);
  ASSERT_TRUE(ParseKernel(fs, {"--kernel=grpo_tiled", "--mode=bwd", "--policy-loss=sapo",
                               "--kl-estimator=k2", "--beta=0.1", "--log-ratio-clamp=0.5",
                               "--advantage-shape=token", "--entropy-coef=-0.01",
                               "--loss-type=sequence_mean", "--empty-rows=skip",
                               "--row-count-input", "--sapo-tau-pos=0.7",
                               "--sapo-tau-neg=1.2", "--is-level=token", "--is-mode=mask",
                               "--is-cap=4"})
                  .ok());
  absl::Status usage = CheckKernelFlagUsage(fs, &k);
  ASSERT_TRUE(usage.ok()) << usage;
  absl::StatusOr<kernels::KernelSpec> spec = KernelSpecFromFlags(k);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const kernels::GrpoConfig& c = spec->config;
  EXPECT_EQ(c.policy_loss, kernels::PolicyLoss::kSapo);
  EXPECT_EQ(c.kl_estimator, kernels::KlEstimator::kK2);
  EXPECT_EQ(c.log_ratio_clamp, 0.5);
  EXPECT_EQ(c.advantage_shape, kernels::AdvantageShape::kToken);
  EXPECT_EQ(c.entropy_coef, -0.01);
  EXPECT_EQ(c.empty_rows, kernels::EmptyRows::kSkip);
  EXPECT_TRUE(c.row_count_input);
  EXPECT_EQ(c.sapo_tau_pos, 0.7);
  EXPECT_EQ(c.sapo_tau_neg, 1.2);
  EXPECT_EQ(c.is_level, kernels::IsLevel::kToken);
  EXPECT_EQ(c.is_mode, kernels::IsMode::kMask);
  EXPECT_EQ(c.is_cap, 4);
  // The module takes the v2 inputs.
  auto module = BuildKernelModule(k);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<std::string> names;
  for (const hlo::HloInstruction* p : (*module)->entry()->parameters()) names.push_back(p->name());
  EXPECT_THAT(names, ::testing::ElementsAre("logits", "chosen_ids", "completion_mask",
                                            "advantages", "old_logp", "ref_logp",
                                            "sampler_logp", "total_nonempty_rows", "lse",
                                            "logp", "entropy"));
  EXPECT_EQ((*module)->entry()->parameter(3)->shape().rank(), 2);  // token advantages
}

// --preset fills what the command line leaves unset; explicit flags win, and
// a preset's options tied to its own aggregation or surrogate are dropped
// when those are overridden.
TEST(KernelFlagsTest, PresetsResolveUnderExplicitFlags) {
  auto resolve = [](std::vector<std::string> args) -> absl::StatusOr<kernels::GrpoConfig> {
    KernelFlags k;
    FlagSet fs("tpuoff k", "", "");
    RegisterKernelFlags(fs, &k);
    args.insert(args.begin(), "--kernel=grpo_reference");
    if (absl::Status s = fs.Parse(args); !s.ok()) return s;
    if (absl::Status s = CheckKernelFlagUsage(fs, &k); !s.ok()) return s;
    absl::StatusOr<kernels::KernelSpec> spec = KernelSpecFromFlags(k);
    if (!spec.ok()) return spec.status();
    return spec->config;
  };
  auto tunix = resolve({"--preset=tunix-grpo"});
  ASSERT_TRUE(tunix.ok()) << tunix.status();
  EXPECT_EQ(tunix->beta, 0.04);
  EXPECT_EQ(tunix->kl_estimator, kernels::KlEstimator::kK1);
  EXPECT_EQ(tunix->loss_type, kernels::LossType::kSequenceMean);
  EXPECT_EQ(tunix->empty_rows, kernels::EmptyRows::kSkip);
  EXPECT_EQ(tunix->log_ratio_clamp, 20.0);

  auto tunix_override = resolve({"--preset=tunix-grpo", "--beta=0.5", "--loss-type=token_mean"});
  ASSERT_TRUE(tunix_override.ok()) << tunix_override.status();
  EXPECT_EQ(tunix_override->beta, 0.5);
  EXPECT_EQ(tunix_override->loss_type, kernels::LossType::kTokenMean);
  EXPECT_EQ(tunix_override->empty_rows, kernels::EmptyRows::kCount);  // dropped with it
  EXPECT_EQ(tunix_override->kl_estimator, kernels::KlEstimator::kK1);

  auto dapo = resolve({"--preset=trl-dapo"});
  ASSERT_TRUE(dapo.ok()) << dapo.status();
  EXPECT_EQ(dapo->eps_high, 0.28);
  EXPECT_TRUE(dapo->token_count_input);
  auto dapo_seq = resolve({"--preset=trl-dapo", "--loss-type=sequence_mean"});
  ASSERT_TRUE(dapo_seq.ok()) << dapo_seq.status();
  EXPECT_FALSE(dapo_seq->token_count_input);

  auto verl = resolve({"--preset=verl-grpo", "--policy-loss=cispo"});
  ASSERT_TRUE(verl.ok()) << verl.status();
  EXPECT_EQ(verl->policy_loss, kernels::PolicyLoss::kCispo);
  EXPECT_FALSE(verl->delta.has_value());  // verl's dual clip belongs to ppo_clip
  EXPECT_EQ(verl->log_ratio_clamp, 20.0);
  auto verl_delta = resolve({"--preset=verl-grpo", "--policy-loss=cispo", "--delta=2"});
  ASSERT_FALSE(verl_delta.ok());
  EXPECT_THAT(std::string(verl_delta.status().message()),
              HasSubstr("applies to policy_loss ppo_clip only, not cispo"));

  // Unresolved presets are refused rather than ignored.
  KernelFlags raw;
  raw.kernel = "grpo_tiled";
  raw.preset = "trl-grpo";
  EXPECT_THAT(std::string(KernelSpecFromFlags(raw).status().message()),
              HasSubstr("--preset=trl-grpo was not resolved"));
}

TEST(KernelFlagsTest, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--batch=2"}, "--batch only applies with --kernel=NAME"},
      {{"--kernel=grpo_tiled", "--seq=0"}, "--seq must be >= 1, got 0"},
      {{"--kernel=grpo_tiled", "--vocab=1000000000000", "--batch=4096"},
       "too large"},
      {{"--kernel=entropy_tiled", "--mode=bwd"}, "has only --mode=fwd"},
      {{"--kernel=grpo_reference", "--delta=0.9"}, "delta"},
      {{"--kernel=grpo_reference", "--temperature=-1"}, "temperature"},
      {{"--policy-loss=gspo"}, "--policy-loss only applies with --kernel=NAME"},
      {{"--preset=trl-grpo"}, "--preset only applies with --kernel=NAME"},
      {{"--kernel=grpo_tiled", "--policy-loss=gspo", "--delta=1.5"},
       "delta (the upper ratio clamp) applies to policy_loss ppo_clip only, not gspo"},
      {{"--kernel=grpo_tiled", "--empty-rows=skip"},
       "empty_rows skip applies to loss_type sequence_mean only"},
      {{"--kernel=grpo_tiled", "--row-count-input", "--loss-type=sequence_mean"},
       "needs loss_type sequence_mean with empty_rows skip"},
      {{"--kernel=grpo_tiled", "--log-ratio-clamp=0"}, "log_ratio_clamp must be"},
      {{"--kernel=grpo_tiled", "--is-cap=-2"}, "is_cap must be"},
      {{"--kernel=grpo_tiled", "--sapo-tau-neg=0"}, "sapo_tau_neg must be"},
  };
  for (const Case& c : cases) {
    KernelFlags k;
    FlagSet fs("tpuoff k", "", "");
    RegisterKernelFlags(fs, &k);
    ASSERT_TRUE(fs.Parse(c.args).ok()) << c.message;
    absl::Status s = CheckKernelFlagUsage(fs, &k);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(JsonTextTest, EscapesNamesKeepsKeyOrderAndOneRecordPerLine) {
  using Json = nlohmann::ordered_json;
  // Names are bytes: quotes, backslashes, control characters and invalid
  // UTF-8 must still give a document a JSON parser reads back.
  const std::string odd = "a\"b\\c\nd\x01" "e";
  std::vector<Json> records = {{{"name", odd}, {"shape", std::vector<int64_t>{2, 3}}},
                               {{"name", std::string("bad\xff")}, {"x", 0.1}}};
  const std::string text = JsonRecords({{"zeta", 1}, {"alpha", nullptr}}, "items", records);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;
  EXPECT_EQ(text.rfind("{\"zeta\":1,\"alpha\":null,\"items\":[\n", 0), 0u) << text;
  const Json back = Json::parse(text);
  EXPECT_EQ(back["items"][0]["name"], odd);
  EXPECT_EQ(back["items"][0]["shape"], Json({2, 3}));
  EXPECT_EQ(back["items"][1]["name"], "bad\xef\xbf\xbd");  // U+FFFD
  EXPECT_EQ(back["items"][1]["x"].get<double>(), 0.1);  // round-trip precision
  EXPECT_EQ(back.begin().key(), "zeta");
  EXPECT_EQ(JsonRecords(Json::object(), "outputs", {}), "{\"outputs\":[\n]}\n");
  EXPECT_EQ(JsonText({{"b", true}, {"a", 2}}), "{\"b\":true,\"a\":2}\n");
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tpuoff_cli_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Names in the directory, sorted.
  std::vector<std::string> List(const std::string& d) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_;
};

TEST_F(TempDirTest, WriteFileAtomicallyReplacesAndLeavesNothingOnFailure) {
  const std::string path = dir_ + "/a.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_EQ(List(dir_), (std::vector<std::string>{"a.txt"}));

  absl::Status missing = WriteFileAtomically(dir_ + "/no/such/b.txt", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  absl::Status onto_dir = WriteFileAtomically(dir_, "x");
  EXPECT_EQ(onto_dir.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(List(dir_), (std::vector<std::string>{"a.txt"}));
  EXPECT_EQ(ReadFile(dir_ + "/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TempDirTest, StagedDirectoryPublishesAllOrNothing) {
  const std::string out = dir_ + "/out";
  {
    auto staged = StagedDirectory::Create(out);
    ASSERT_TRUE(staged.ok()) << staged.status();
    ASSERT_TRUE(staged->WriteFile("x.npy", "1").ok());
    EXPECT_FALSE(PathExists(out));  // nothing visible before Commit
    EXPECT_EQ(staged->WriteFile("../evil", "1").code(),
              absl::StatusCode::kInvalidArgument);
    // Destroyed without Commit: the temp directory disappears.
  }
  EXPECT_TRUE(List(dir_).empty());

  auto staged = StagedDirectory::Create(out);
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(staged->WriteFile("x.npy", "1").ok());
  ASSERT_TRUE(staged->WriteFile("manifest.json", "{}").ok());
  EXPECT_EQ(staged->WriteFile("x.npy", "2").code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(staged->Commit().ok());
  EXPECT_EQ(List(dir_), (std::vector<std::string>{"out"}));
  EXPECT_EQ(List(out), (std::vector<std::string>{"manifest.json", "x.npy"}));

  // A non-empty directory is refused unless it is a previous output and
  // overwrite is asked for; then it is replaced as a whole.
  EXPECT_EQ(StagedDirectory::Create(out).status().code(), absl::StatusCode::kFailedPrecondition);
  {
    // "{}" is no tpuoff manifest: not a previous output.
    auto not_ours = StagedDirectory::Create(out, {.overwrite = true});
    EXPECT_EQ(not_ours.status().code(), absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(WriteFileAtomically(out + "/manifest.json",
                                  R"({"outputs": [{"name": "x", "file": "x.npy"}]})")
                  .ok());
  auto again = StagedDirectory::Create(out, {.overwrite = true});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(again->WriteFile("y.npy", "3").ok());
  ASSERT_TRUE(again->Commit().ok());
  EXPECT_EQ(List(dir_), (std::vector<std::string>{"out"}));
  EXPECT_EQ(List(out), (std::vector<std::string>{"y.npy"}));
  EXPECT_EQ(*ReadFile(out + "/y.npy"), "3");

  EXPECT_EQ(StagedDirectory::Create(out + "/y.npy").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StagedDirectory::Create(dir_ + "/a/b").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RandomInputsTest, GrpoInputsAreDeterministicAndSensible) {
  KernelFlags k;
  k.kernel = "grpo_reference";
  k.mode = "bwd";
  k.batch = 2;
  k.seq = 8;
  k.vocab = 37;
  k.beta = 0.1;
  k.token_count_input = true;
  auto module = BuildKernelModule(k);
  ASSERT_TRUE(module.ok()) << module.status();
  const hlo::HloComputation& entry = *(*module)->entry();
  RandomInputOptions o;
  o.seed = 11;
  auto a = MakeRandomInputs(entry, o);
  auto b = MakeRandomInputs(entry, o);
  o.seed = 12;
  auto c = MakeRandomInputs(entry, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->size(), static_cast<size_t>(entry.num_parameters()));

  std::map<std::string, const hlo::Literal*> by_name;
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    EXPECT_TRUE((*a)[i] == (*b)[i]) << "same seed, different " << entry.parameter(i)->name();
    // total_valid_tokens is derived (the mask's sum, checked below): two
    // seeds may give equal counts.
    if (entry.parameter(i)->name() != "total_valid_tokens") {
      EXPECT_FALSE((*a)[i] == (*c)[i]) << "seed ignored for " << entry.parameter(i)->name();
    }
    EXPECT_EQ((*a)[i].shape(), entry.parameter(i)->shape());
    by_name[entry.parameter(i)->name()] = &(*a)[i];
  }
  for (const char* name : {"logits", "chosen_ids", "completion_mask", "advantages",
                           "old_logp", "ref_logp", "total_valid_tokens", "lse", "logp"}) {
    ASSERT_TRUE(by_name.count(name)) << name;
  }
  const hlo::Literal& ids = *by_name["chosen_ids"];
  const hlo::Literal& mask = *by_name["completion_mask"];
  double mask_sum = 0;
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    EXPECT_GE(ids.GetAsInt64(i), 0);
    EXPECT_LT(ids.GetAsInt64(i), 37);
    const double m = mask.GetAsDouble(i);
    EXPECT_TRUE(m == 0.0 || m == 1.0) << m;
    mask_sum += m;
  }
  EXPECT_EQ(by_name["total_valid_tokens"]->GetAsDouble(0), std::max(mask_sum, 1.0));
  // lse and logp are those of the logits (f32 storage: 1e-5 relative).
  const hlo::Literal& logits = *by_name["logits"];
  for (int64_t r = 0; r < ids.num_elements(); ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < 37; ++v) mx = std::max(mx, logits.GetAsDouble(r * 37 + v));
    for (int64_t v = 0; v < 37; ++v) sum += std::exp(logits.GetAsDouble(r * 37 + v) - mx);
    const double lse = mx + std::log(sum);
    EXPECT_NEAR(by_name["lse"]->GetAsDouble(r), lse, 1e-5 * std::fabs(lse) + 1e-6);
    const double logp = logits.GetAsDouble(r * 37 + ids.GetAsInt64(r)) - lse;
    EXPECT_NEAR(by_name["logp"]->GetAsDouble(r), logp, 1e-5 * std::fabs(logp) + 1e-6);
    // old_logp is logp plus N(0, 0.1^2) noise: within 6 sigma.
    EXPECT_NEAR(by_name["old_logp"]->GetAsDouble(r), logp, 0.6);
  }
}

// The v2 inputs: sampler_logp near logp, the non-empty row count, the
// backward's entropy of softmax(z/τ) (post_lse: not of the lse's domain z).
TEST(RandomInputsTest, PolicyLossInputs) {
  KernelFlags k;
  k.kernel = "grpo_tiled";
  k.mode = "bwd";
  k.batch = 3;
  k.seq = 5;
  k.vocab = 29;
  k.temperature = 0.5;
  k.temperature_mode = "post_lse";
  k.entropy_coef = 0.1;
  k.is_level = "token";
  k.loss_type = "sequence_mean";
  k.empty_rows = "skip";
  k.row_count_input = true;
  k.advantage_shape = "token";
  auto module = BuildKernelModule(k);
  ASSERT_TRUE(module.ok()) << module.status();
  const hlo::HloComputation& entry = *(*module)->entry();
  RandomInputOptions o;
  o.seed = 5;
  o.temperature = 0.5;
  o.post_lse = true;
  auto a = MakeRandomInputs(entry, o);
  ASSERT_TRUE(a.ok()) << a.status();
  std::map<std::string, const hlo::Literal*> by_name;
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    by_name[entry.parameter(i)->name()] = &(*a)[i];
  }
  for (const char* name : {"sampler_logp", "total_nonempty_rows", "entropy", "advantages"}) {
    ASSERT_TRUE(by_name.count(name)) << name;
  }
  EXPECT_EQ(by_name["advantages"]->num_elements(), 15);
  const hlo::Literal& mask = *by_name["completion_mask"];
  double rows = 0;
  for (int64_t b = 0; b < 3; ++b) {
    bool any = false;
    for (int64_t t = 0; t < 5; ++t) any = any || mask.GetAsDouble(b * 5 + t) != 0;
    rows += any;
  }
  EXPECT_EQ(by_name["total_nonempty_rows"]->GetAsDouble(0), std::max(rows, 1.0));
  const hlo::Literal& logits = *by_name["logits"];
  for (int64_t r = 0; r < 15; ++r) {
    double mx = -INFINITY, sum = 0, usum = 0;
    for (int64_t v = 0; v < 29; ++v) mx = std::max(mx, logits.GetAsDouble(r * 29 + v) / 0.5);
    for (int64_t v = 0; v < 29; ++v) {
      const double d = logits.GetAsDouble(r * 29 + v) / 0.5 - mx;
      sum += std::exp(d);
      usum += std::exp(d) * d;
    }
    const double h = std::log(sum) - usum / sum;
    EXPECT_NEAR(by_name["entropy"]->GetAsDouble(r), h, 1e-5 * std::fabs(h) + 1e-6) << r;
    EXPECT_NEAR(by_name["sampler_logp"]->GetAsDouble(r), by_name["logp"]->GetAsDouble(r), 0.6);
    EXPECT_NE(by_name["sampler_logp"]->GetAsDouble(r), by_name["logp"]->GetAsDouble(r));
  }
}

}  // namespace
}  // namespace tpuoff::tools
