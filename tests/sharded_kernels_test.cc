// The sharded GRPO and entropy kernels against the test vectors
// (tests/testdata/grpo/<case>/, and ../shared/testdata/grpo/ when configured):
// grpo_tiled vocab-sharded on meshes of 2,
// 4 and 8 devices (ragged shards and ragged tiles inside them), and
// batch-sharded on the largest mesh dividing B; fwd_bwd and fwd then bwd;
// each run on the emulator's mesh with global inputs split and global
// outputs reassembled by the modules' shardings. Plus: bit-identical
// repeated runs, padding contents that cannot leak into results, the
// structure of the Qwen-sized per-device program, and the errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "hlo/spmd/sharding_util.h"
#include "hlo/text/text_printer.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_config.h"
#include "kernels/grpo_sharded.h"
#include "runtime/emulator/executor.h"
#include "runtime/device/sharding_io.h"
#include "tests/test_vectors.h"

namespace tpuoff::kernels {
namespace {

using hlo::HloInstruction;
using hlo::HloModule;
using hlo::HloOpcode;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using Outputs = std::map<std::string, Literal>;

using testvectors::AllClose;
using testvectors::LoadNpy;
using testvectors::VectorCase;

std::filesystem::path CasesRoot() { return testvectors::OwnFolder("grpo"); }

ShardingSpec Sharded(ShardKind kind, int64_t n) {
  ShardingSpec s;
  s.kind = kind;
  s.mesh.num_devices = n;
  return s;
}

bool BitwiseEqual(const Literal& a, const Literal& b) {
  return a.shape().Compatible(b.shape()) && a.raw_size() == b.raw_size() &&
         std::memcmp(a.raw(), b.raw(), a.raw_size()) == 0;
}

// Builds `spec` sharded as `sharding` and runs it on global arguments:
// `extra` by name, the rest DIR/<name>.npy. Returns the global outputs.
absl::StatusOr<Outputs> RunSharded(const KernelSpec& spec, const ShardingSpec& sharding,
                                   const std::filesystem::path& dir, const Outputs& extra = {}) {
  absl::StatusOr<std::unique_ptr<HloModule>> module = BuildShardedKernel(spec, sharding);
  if (!module.ok()) return module.status();
  absl::StatusOr<hlo::PartitionedSignature> sig = hlo::GetPartitionedSignature(**module);
  if (!sig.ok()) return sig.status();
  std::vector<Literal> args;
  for (size_t i = 0; i < sig->parameter_names.size(); ++i) {
    const std::string& name = sig->parameter_names[i];
    if (auto it = extra.find(name); it != extra.end()) {
      args.push_back(it->second);
      continue;
    }
    absl::StatusOr<Literal> lit = LoadNpy(dir / (name + ".npy"), sig->global_parameters[i]);
    if (!lit.ok()) return lit.status();
    args.push_back(*std::move(lit));
  }
  absl::StatusOr<std::vector<std::vector<Literal>>> per_device =
      runtime::SplitArguments(*sig, args);
  if (!per_device.ok()) return per_device.status();
  absl::StatusOr<runtime::RunResult> result = runtime::RunSpmd(**module, *per_device);
  if (!result.ok()) return result.status();
  const std::vector<std::string> names = (*module)->OutputNames();
  absl::StatusOr<std::vector<Literal>> global =
      runtime::AssembleOutputs(*sig, result->outputs, names);
  if (!global.ok()) return global.status();
  Outputs out;
  for (size_t i = 0; i < names.size(); ++i) out[names[i]] = std::move((*global)[i]);
  return out;
}

class ShardedVectorsTest : public ::testing::TestWithParam<VectorCase> {
 protected:
  void SetUp() override {
    absl::StatusOr<testvectors::Case> c = testvectors::LoadCase(GetParam());
    ASSERT_TRUE(c.ok()) << c.status();
    dir_ = c->dir;
    config_ = c->config;
    atol_ = c->atol;
    rtol_ = c->rtol;
  }

  void ExpectOutputs(const Outputs& got, const std::string& label) {
    for (const auto& [name, lit] : got) {
      absl::StatusOr<Literal> expected = LoadNpy(
          dir_ / ("expected_" + name + ".npy"), Shape(PrimitiveType::kF32, lit.shape().dimensions()));
      ASSERT_TRUE(expected.ok()) << label << ": " << expected.status();
      EXPECT_TRUE(AllClose(lit, *expected, atol_, rtol_)) << GetParam().label << " " << label
                                                          << " output " << name;
    }
  }

  // fwd_bwd, then fwd followed by bwd fed with the forward's lse and logp.
  void CheckGrpo(KernelKind kind, const GrpoConfig& config, const ShardingSpec& sharding,
                 const std::string& label) {
    auto fwd_bwd = RunSharded({kind, KernelMode::kFwdBwd, config}, sharding, dir_);
    ASSERT_TRUE(fwd_bwd.ok()) << label << ": " << fwd_bwd.status();
    ASSERT_EQ(fwd_bwd->size(), 6u);
    ExpectOutputs(*fwd_bwd, label + " fwd_bwd");
    auto fwd = RunSharded({kind, KernelMode::kFwd, config}, sharding, dir_);
    ASSERT_TRUE(fwd.ok()) << label << ": " << fwd.status();
    ASSERT_EQ(fwd->size(), 5u);
    ExpectOutputs(*fwd, label + " fwd");
    Outputs saved = {{"lse", fwd->at("lse")}, {"logp", fwd->at("logp")}, {"entropy", fwd->at("entropy")}};
    auto bwd = RunSharded({kind, KernelMode::kBwd, config}, sharding, dir_, saved);
    ASSERT_TRUE(bwd.ok()) << label << ": " << bwd.status();
    ASSERT_EQ(bwd->size(), 1u);
    ExpectOutputs(*bwd, label + " bwd");
    // Masked rows get exactly zero gradient, on every shard.
    const Literal& d = bwd->at("dlogits");
    absl::StatusOr<Literal> mask = LoadNpy(dir_ / "completion_mask.npy",
                                           Shape(PrimitiveType::kF32, {config.batch, config.seq}));
    ASSERT_TRUE(mask.ok()) << mask.status();
    for (int64_t row = 0; row < config.batch * config.seq; ++row) {
      if (mask->GetAsDouble(row) != 0) continue;
      for (int64_t v = 0; v < config.vocab; ++v) {
        ASSERT_EQ(d.GetAsDouble(row * config.vocab + v), 0.0) << label << " row " << row;
      }
    }
  }

  // The largest mesh of at most 8 devices dividing B (>= 2 devices).
  int64_t BatchMesh() const {
    for (int64_t n = 8; n >= 2; --n) {
      if (config_.batch % n == 0) return n;
    }
    return 1;
  }

  std::filesystem::path dir_;
  GrpoConfig config_;
  double atol_ = 0, rtol_ = 0;
};

// Vocab tiles narrower than a shard (ragged tail inside the shard), one
// tile per shard with row blocks (collectives inside the row loop), and
// tiny tiles on 8 devices (for V < 40 some shards are all padding).
TEST_P(ShardedVectorsTest, GrpoTiledVocabSharded) {
  struct Variant {
    int64_t mesh;
    int64_t block;
    bool time_blocks;
  };
  for (const Variant& v : {Variant{2, 8, false}, Variant{4, 2048, true}, Variant{8, 3, false}}) {
    if (config_.vocab < v.mesh) continue;
    GrpoConfig c = config_;
    c.block_size = v.block;
    if (v.time_blocks) c.time_block = c.seq / 2 + 1;
    const std::string label = absl::StrCat("vocab mesh ", v.mesh, " block ", v.block,
                                           v.time_blocks ? " time blocks" : "");
    SCOPED_TRACE(label);
    CheckGrpo(KernelKind::kGrpoTiled, c, Sharded(ShardKind::kVocab, v.mesh), label);
  }
}

TEST_P(ShardedVectorsTest, GrpoBatchSharded) {
  const int64_t n = BatchMesh();
  ASSERT_GT(n, 1) << "B=" << config_.batch;
  GrpoConfig c = config_;
  c.block_size = 8;
  CheckGrpo(KernelKind::kGrpoTiled, c, Sharded(ShardKind::kBatch, n),
            absl::StrCat("grpo_tiled batch mesh ", n));
  CheckGrpo(KernelKind::kGrpoReference, config_, Sharded(ShardKind::kBatch, n),
            absl::StrCat("grpo_reference batch mesh ", n));
}

TEST_P(ShardedVectorsTest, EntropySharded) {
  GrpoConfig c = config_;
  c.block_size = 8;
  const int64_t vocab_mesh = std::min<int64_t>(4, config_.vocab);
  for (const auto& [label, kind, sharding] :
       {std::tuple{"entropy_tiled vocab", KernelKind::kEntropyTiled,
                   Sharded(ShardKind::kVocab, vocab_mesh)},
        std::tuple{"entropy_tiled batch", KernelKind::kEntropyTiled,
                   Sharded(ShardKind::kBatch, BatchMesh())},
        std::tuple{"entropy_reference batch", KernelKind::kEntropyReference,
                   Sharded(ShardKind::kBatch, BatchMesh())}}) {
    auto out = RunSharded({kind, KernelMode::kFwd, c}, sharding, dir_);
    ASSERT_TRUE(out.ok()) << label << ": " << out.status();
    ASSERT_EQ(out->size(), 1u);
    ExpectOutputs(*out, label);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ShardedVectorsTest,
                         ::testing::ValuesIn(testvectors::VectorCases("grpo")),
                         testvectors::CaseTestName);
// The policy-loss variants (GRPO_SPEC.md v2): batch sharding counts the
// non-empty rows (empty_rows skip) over the whole batch, vocab sharding
// merges the entropy domain's statistics too.
INSTANTIATE_TEST_SUITE_P(V2Cases, ShardedVectorsTest,
                         ::testing::ValuesIn(testvectors::VectorCases("grpo_v2")),
                         testvectors::CaseTestName);

TEST(ShardedKernelsTest, CasesArePresent) {
  EXPECT_GE(testvectors::CaseNamesIn(CasesRoot()).size(), 12u) << CasesRoot();
}

// Same inputs, same bits: collectives combine in device order, whatever the
// threads' arrival order.
TEST(ShardedKernelsTest, RepeatedRunsAreBitIdentical) {
  const std::filesystem::path dir = CasesRoot() / "medium_vocab";
  absl::StatusOr<GrpoConfig> config = GrpoConfigFromCaseJson(dir.string());
  ASSERT_TRUE(config.ok()) << config.status();
  config->block_size = 64;  // 4099 / 8 = 513 per device: 8 tiles + a tail of 1
  for (ShardKind kind : {ShardKind::kVocab, ShardKind::kBatch}) {
    const ShardingSpec sharding = Sharded(kind, kind == ShardKind::kVocab ? 8 : 2);
    auto first = RunSharded({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, *config}, sharding, dir);
    ASSERT_TRUE(first.ok()) << first.status();
    for (int repeat = 0; repeat < 3; ++repeat) {
      auto again =
          RunSharded({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, *config}, sharding, dir);
      ASSERT_TRUE(again.ok()) << again.status();
      for (const auto& [name, lit] : *first) {
        EXPECT_TRUE(BitwiseEqual(lit, again->at(name)))
            << ShardKindName(kind) << " " << name << " differs on repeat " << repeat;
      }
    }
  }
}

// The padding of the last shards (37 = 7·5 + 2 on 8 devices) is never read
// into a result: NaN there changes no bit, and its gradient is exactly 0.
TEST(ShardedKernelsTest, PaddingContentsAreIgnored) {
  const std::filesystem::path dir = CasesRoot() / "odd_vocab_tail";
  absl::StatusOr<GrpoConfig> config = GrpoConfigFromCaseJson(dir.string());
  ASSERT_TRUE(config.ok()) << config.status();
  config->block_size = 2;
  auto module = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, *config},
                                   Sharded(ShardKind::kVocab, 8));
  ASSERT_TRUE(module.ok()) << module.status();
  auto sig = hlo::GetPartitionedSignature(**module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  std::vector<Literal> args;
  for (size_t i = 0; i < sig->parameter_names.size(); ++i) {
    auto lit = LoadNpy(dir / (sig->parameter_names[i] + ".npy"), sig->global_parameters[i]);
    ASSERT_TRUE(lit.ok()) << lit.status();
    args.push_back(*std::move(lit));
  }
  auto zero_padded = runtime::SplitArguments(*sig, args);
  ASSERT_TRUE(zero_padded.ok()) << zero_padded.status();
  auto nan_padded = *zero_padded;
  Literal& last = nan_padded[7][0];  // device 7's logits [B,T,5]: columns 2..4 pad
  ASSERT_EQ(last.shape().dimensions(2), 5);
  for (int64_t i = 0; i < last.num_elements(); ++i) {
    if (i % 5 >= 2) last.SetFromDouble(i, std::numeric_limits<double>::quiet_NaN());
  }
  auto a = runtime::RunSpmd(**module, *zero_padded);
  auto b = runtime::RunSpmd(**module, nan_padded);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->outputs.size(), b->outputs.size());
  for (size_t i = 0; i < a->outputs.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(a->outputs[i], b->outputs[i])) << "leaf " << i;
  }
  const Literal& d7 = b->outputs.back();  // device 7's dlogits
  for (int64_t i = 0; i < d7.num_elements(); ++i) {
    if (i % 5 >= 2) ASSERT_EQ(d7.GetAsDouble(i), 0.0) << i;
  }
}

// Logits masked out with -inf (disallowed or padded vocab entries) fill
// whole vocab tiles and whole vocab shards: the tiled and sharded kernels
// keep the reference kernel's finite lse, logp, loss and gradient (before,
// a tile or shard whose max was -inf computed -inf - -inf = NaN). V = 37,
// columns 28..36 at -inf, chosen ids below 28; entropy is left out
// (GRPO_SPEC's sum of p * z is 0 * -inf there, in every form).
TEST(ShardedKernelsTest, MaskedOutVocabTilesAndShardsStayFinite) {
  const std::filesystem::path dir = CasesRoot() / "odd_vocab_tail";
  absl::StatusOr<GrpoConfig> config = GrpoConfigFromCaseJson(dir.string());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->vocab, 37);
  ASSERT_EQ(config->batch, 2);
  const Shape logits_shape(PrimitiveType::kF32, {config->batch, config->seq, 37});
  auto logits = LoadNpy(dir / "logits.npy", logits_shape);
  auto ids = LoadNpy(dir / "chosen_ids.npy", Shape(PrimitiveType::kS32, {config->batch, config->seq}));
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_TRUE(ids.ok()) << ids.status();
  for (int64_t i = 0; i < logits->num_elements(); ++i) {
    if (i % 37 >= 28) logits->SetFromDouble(i, -std::numeric_limits<double>::infinity());
  }
  for (int64_t i = 0; i < ids->num_elements(); ++i) {
    ids->SetFromDouble(i, static_cast<double>(static_cast<int64_t>(ids->GetAsDouble(i)) % 28));
  }
  const Outputs inputs = {{"logits", *logits}, {"chosen_ids", *ids}};
  GrpoConfig small_tiles = *config;
  small_tiles.block_size = 4;  // columns 28-31, 32-35, 36: all -inf
  GrpoConfig shard_tiles = *config;
  shard_tiles.block_size = 2;  // 5 columns per device: devices 6 and 7 all -inf
  auto reference = RunSharded({KernelKind::kGrpoReference, KernelMode::kFwdBwd, *config},
                              Sharded(ShardKind::kBatch, 2), dir, inputs);
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto tiled = RunSharded({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, small_tiles},
                          Sharded(ShardKind::kBatch, 2), dir, inputs);
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  auto vocab = RunSharded({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, shard_tiles},
                          Sharded(ShardKind::kVocab, 8), dir, inputs);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  for (const char* name : {"loss", "per_token_loss", "lse", "logp", "dlogits"}) {
    const Literal& want = reference->at(name);
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      ASSERT_TRUE(std::isfinite(want.GetAsDouble(i))) << "reference " << name << " " << i;
    }
    EXPECT_TRUE(AllClose(tiled->at(name), want, 1e-5, 1e-5)) << "tiled " << name;
    EXPECT_TRUE(AllClose(vocab->at(name), want, 1e-5, 1e-5)) << "vocab-sharded " << name;
  }
  const Literal& d = vocab->at("dlogits");  // no probability mass on -inf columns
  for (int64_t i = 0; i < d.num_elements(); ++i) {
    if (i % 37 >= 28) ASSERT_EQ(d.GetAsDouble(i), 0.0) << i;
  }
}

// Masked tokens contribute nothing (GRPO_SPEC): an old_logp of -100 at a
// masked position overflows the ratio there (per_token_loss inf), and the
// loss stays the one without it, in every kernel form (before: 0 * inf =
// NaN in the loss, while the gradient was already finite).
TEST(ShardedKernelsTest, MaskedTokensWithNonFiniteLossesContributeNothing) {
  const std::filesystem::path dir = CasesRoot() / "odd_vocab_tail";
  absl::StatusOr<GrpoConfig> config = GrpoConfigFromCaseJson(dir.string());
  ASSERT_TRUE(config.ok()) << config.status();
  config->block_size = 8;
  const Shape bt(PrimitiveType::kF32, {config->batch, config->seq});
  auto mask = LoadNpy(dir / "completion_mask.npy", bt);
  auto old = LoadNpy(dir / "old_logp.npy", bt);
  ASSERT_TRUE(mask.ok() && old.ok());
  int masked = 0;
  for (int64_t i = 0; i < old->num_elements(); ++i) {
    if (mask->GetAsDouble(i) == 0) {
      old->SetFromDouble(i, -100.0);
      ++masked;
    }
  }
  ASSERT_GT(masked, 0);
  struct Form {
    KernelKind kind;
    ShardKind shard;
    int64_t devices;
  };
  for (const Form& f : {Form{KernelKind::kGrpoReference, ShardKind::kBatch, 2},
                        Form{KernelKind::kGrpoTiled, ShardKind::kBatch, 2},
                        Form{KernelKind::kGrpoTiled, ShardKind::kVocab, 4}}) {
    auto clean = RunSharded({f.kind, KernelMode::kFwdBwd, *config}, Sharded(f.shard, f.devices), dir);
    auto hostile = RunSharded({f.kind, KernelMode::kFwdBwd, *config}, Sharded(f.shard, f.devices),
                              dir, {{"old_logp", *old}});
    ASSERT_TRUE(clean.ok()) << clean.status();
    ASSERT_TRUE(hostile.ok()) << hostile.status();
    const Literal& ptl = hostile->at("per_token_loss");
    int inf = 0;
    for (int64_t i = 0; i < ptl.num_elements(); ++i) inf += std::isinf(ptl.GetAsDouble(i)) ? 1 : 0;
    EXPECT_GE(inf, 1) << "a masked token's overflowing ratio (negative advantage) gives inf";
    EXPECT_TRUE(BitwiseEqual(hostile->at("loss"), clean->at("loss")))
        << KernelKindName(f.kind) << " loss " << hostile->at("loss").GetAsDouble(0) << " vs "
        << clean->at("loss").GetAsDouble(0);
    EXPECT_TRUE(BitwiseEqual(hostile->at("dlogits"), clean->at("dlogits"))) << KernelKindName(f.kind);
  }
}

std::vector<const HloInstruction*> WithOpcode(const HloModule& m, HloOpcode op) {
  std::vector<const HloInstruction*> out;
  for (const auto& comp : m.computations()) {
    for (const auto& instr : comp->instructions()) {
      if (instr->opcode() == op) out.push_back(instr.get());
    }
  }
  return out;
}

// The Qwen vocab on a v6e-8: 151936 = 8 · 18992 columns per device, tiled
// 9 · 2048 + 560; no mask (V divisible), one partition-id, one all-reduce
// max and one (stacked) all-reduce sum; nothing of the global vocab width.
TEST(ShardedKernelsTest, QwenVocabPerDeviceStructure) {
  GrpoConfig c;
  c.batch = 2;
  c.seq = 16;
  for (int64_t vocab : {151936, 151937}) {
    c.vocab = vocab;
    auto module = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, c},
                                     Sharded(ShardKind::kVocab, 8));
    ASSERT_TRUE(module.ok()) << module.status();
    const HloModule& m = **module;
    const int64_t width = hlo::ShardSize(vocab, 8);
    EXPECT_EQ(m.num_partitions(), 8);
    const HloInstruction* logits = m.entry()->parameter(0);
    EXPECT_EQ(logits->shape(), Shape(PrimitiveType::kF32, {2, 16, width}));
    ASSERT_TRUE(logits->sharding().has_value());
    EXPECT_EQ(*logits->sharding(), hlo::SplitSharding(3, 2, 8));
    std::vector<int64_t> widths;
    for (const HloInstruction* ds : WithOpcode(m, HloOpcode::kDynamicSlice)) {
      if (ds->shape().rank() == 3) widths.push_back(ds->shape().dimensions(2));
    }
    EXPECT_THAT(widths, ::testing::Contains(2048));
    EXPECT_THAT(widths, ::testing::Contains(width - 9 * 2048));
    EXPECT_THAT(widths, ::testing::Each(::testing::AnyOf(2048, width - 9 * 2048)));
    EXPECT_EQ(WithOpcode(m, HloOpcode::kPartitionId).size(), 1u);
    EXPECT_EQ(WithOpcode(m, HloOpcode::kAllReduce).size(), 2u);
    // The padding mask exists exactly when V is not a multiple of 8.
    EXPECT_EQ(WithOpcode(m, HloOpcode::kClamp).size(), vocab % 8 == 0 ? 0u : 1u) << vocab;
    for (const auto& comp : m.computations()) {
      for (const auto& instr : comp->instructions()) {
        if (instr->shape().IsArray() && instr->shape().rank() == 3) {
          EXPECT_EQ(instr->shape().dimensions(2) <= width, true) << instr->name();
        }
      }
    }
    const std::string text = hlo::PrintModule(m);
    EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat(
                          "%logits = f32[2,16,", width,
                          "]{2,1,0} parameter(0), sharding={devices=[1,1,8]<=[8]}")));
    EXPECT_THAT(text, ::testing::HasSubstr(absl::StrCat(
                          "global_parameter_shapes=\"f32[2,16,", vocab, "];")));
  }
}

TEST(ShardedKernelsTest, Errors) {
  GrpoConfig c;
  c.batch = 3;
  c.seq = 4;
  c.vocab = 64;
  // A kinds list that does not match the mesh's axes.
  ShardingSpec three;
  three.mesh = hlo::Mesh::Grid({2, 4});
  three.axis_kinds = {ShardKind::kBatch, ShardKind::kVocab, ShardKind::kSeq};
  auto r = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, c}, three);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              ::testing::HasSubstr("3 entries (batch,vocab,seq) for the 2 axes of mesh 2x4"));
  r = BuildShardedKernel({KernelKind::kGrpoReference, KernelMode::kFwdBwd, c},
                         Sharded(ShardKind::kVocab, 2));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("vocab sharding needs a tiled kernel"));
  ShardingSpec seq_vocab;
  seq_vocab.mesh = hlo::Mesh::Grid({2, 4});
  seq_vocab.axis_kinds = {ShardKind::kSeq, ShardKind::kVocab};
  r = BuildShardedKernel({KernelKind::kEntropyReference, KernelMode::kFwd, c}, seq_vocab);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("vocab sharding needs a tiled kernel"));
  r = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, c},
                         Sharded(ShardKind::kVocab, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("number of devices"));
  // Ragged splits are fine: B=3 over 2 and 8 devices (whole shards of
  // padding rows), T=4 over 8; none is the unsharded module.
  for (const ShardingSpec& s : {Sharded(ShardKind::kBatch, 2), Sharded(ShardKind::kBatch, 8),
                                Sharded(ShardKind::kSeq, 8)}) {
    auto m = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwdBwd, c}, s);
    EXPECT_TRUE(m.ok()) << s.KindsString() << " " << s.mesh.num_devices << ": " << m.status();
  }
  auto plain = BuildShardedKernel({KernelKind::kGrpoTiled, KernelMode::kFwd, c},
                                  Sharded(ShardKind::kNone, 8));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->num_partitions(), 1);
}

}  // namespace
}  // namespace tpuoff::kernels
