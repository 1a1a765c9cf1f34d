// Every project test vector (tests/testdata/grpo, grpo_fused; and
// ../shared/testdata when configured) through the 2-D and sequence
// shardings of issue 20: 2x4 batch×vocab, 4x2 batch×vocab, 2x4 seq×vocab,
// 8-way seq and 2x4 batch×seq (the fused LM-head kernel on 2x4 seq×vocab and
// 8-way seq). Each run is checked against the vector's expected outputs (its
// own tolerances) and against the unsharded module on the same inputs
// (compare's defaults: f32 1e-5 + 1e-4·|x|, bf16 logits 2e-3 + 2e-2·|x|).
// B and T of the vectors are small (2..4, 1..9), so most of these splits are
// ragged: whole shards of padding rows or positions, and ragged vocab shards.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/spmd/sharding_util.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_fused_linear_sharded.h"
#include "kernels/grpo_sharded.h"
#include "runtime/emulator/executor.h"
#include "tests/test_vectors.h"
#include "tools/io/partitioned_io.h"

namespace tpuoff::kernels {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using Outputs = std::map<std::string, Literal>;
using testvectors::AllClose;
using testvectors::LoadNpy;
using testvectors::VectorCase;

struct MeshCase {
  std::string label;
  std::vector<int64_t> mesh;
  std::vector<ShardKind> kinds;
};

const std::vector<MeshCase>& MeshCases() {
  static const std::vector<MeshCase> cases = {
      {"2x4_batch_vocab", {2, 4}, {ShardKind::kBatch, ShardKind::kVocab}},
      {"4x2_batch_vocab", {4, 2}, {ShardKind::kBatch, ShardKind::kVocab}},
      {"2x4_seq_vocab", {2, 4}, {ShardKind::kSeq, ShardKind::kVocab}},
      {"8_seq", {8}, {ShardKind::kSeq}},
      {"2x4_batch_seq", {2, 4}, {ShardKind::kBatch, ShardKind::kSeq}},
  };
  return cases;
}

ShardingSpec SpecOf(const MeshCase& m) {
  ShardingSpec s;
  if (m.mesh.size() == 1) {
    s.mesh.num_devices = m.mesh[0];
    s.kind = m.kinds[0];
  } else {
    s.mesh = hlo::Mesh::Grid(m.mesh);
    s.axis_kinds = m.kinds;
    s.kind = m.kinds[0];
  }
  return s;
}

bool Has(const MeshCase& m, ShardKind kind) {
  for (ShardKind k : m.kinds) {
    if (k == kind) return true;
  }
  return false;
}

void PrintTo(const MeshCase& m, std::ostream* os) { *os << m.label; }

// Runs `spec` (sharded as `sharding` unless it is null) on global arguments:
// `extra` by name, the rest DIR/<name>.npy.
absl::StatusOr<Outputs> RunKernel(const KernelSpec& spec, const ShardingSpec* sharding,
                                  const std::filesystem::path& dir, const Outputs& extra = {}) {
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      sharding ? BuildShardedKernel(spec, *sharding) : BuildKernel(spec);
  if (!module.ok()) return module.status();
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  absl::StatusOr<hlo::PartitionedSignature> sig;
  if (sharding) {
    sig = hlo::GetPartitionedSignature(**module);
    if (!sig.ok()) return sig.status();
    names = sig->parameter_names;
    shapes = sig->global_parameters;
  } else {
    for (const hlo::HloInstruction* p : (*module)->entry()->parameters()) {
      names.push_back(p->name());
      shapes.push_back(p->shape());
    }
  }
  std::vector<Literal> args;
  for (size_t i = 0; i < names.size(); ++i) {
    if (auto it = extra.find(names[i]); it != extra.end()) {
      args.push_back(it->second);
      continue;
    }
    absl::StatusOr<Literal> lit = LoadNpy(dir / (names[i] + ".npy"), shapes[i]);
    if (!lit.ok()) return lit.status();
    args.push_back(*std::move(lit));
  }
  const std::vector<std::string> out_names = (*module)->OutputNames();
  absl::StatusOr<runtime::RunResult> result =
      sharding ? tools::RunPartitioned(**module, *sig, args, {}, out_names)
               : runtime::RunModule(**module, args);
  if (!result.ok()) return result.status();
  if (result->outputs.size() != out_names.size()) {
    return absl::InternalError(absl::StrCat(result->outputs.size(), " outputs for ",
                                            out_names.size(), " names"));
  }
  Outputs out;
  for (size_t i = 0; i < out_names.size(); ++i) out[out_names[i]] = std::move(result->outputs[i]);
  return out;
}

class MeshVectorsTest : public ::testing::TestWithParam<std::tuple<VectorCase, MeshCase>> {
 protected:
  void SetUp() override {
    absl::StatusOr<testvectors::Case> c = testvectors::LoadCase(std::get<0>(GetParam()));
    ASSERT_TRUE(c.ok()) << c.status();
    case_ = *std::move(c);
    mesh_ = std::get<1>(GetParam());
    sharding_ = SpecOf(mesh_);
    bf16_ = case_.config.logits_type == PrimitiveType::kBF16;
  }

  // Against the vector and against `unsharded` (same outputs).
  void Expect(const Outputs& got, const Outputs& unsharded, const std::string& label) {
    for (const auto& [name, lit] : got) {
      auto shape = case_.expected_shapes.find(name);
      ASSERT_NE(shape, case_.expected_shapes.end()) << label << ": no expected " << name;
      absl::StatusOr<Literal> expected = LoadNpy(case_.dir / ("expected_" + name + ".npy"),
                                                 Shape(PrimitiveType::kF32, shape->second));
      ASSERT_TRUE(expected.ok()) << label << ": " << expected.status();
      EXPECT_TRUE(AllClose(lit, *expected, case_.atol, case_.rtol))
          << case_.name << " " << label << " " << name << " vs the vector";
      auto ref = unsharded.find(name);
      ASSERT_NE(ref, unsharded.end()) << label << ": unsharded run has no " << name;
      EXPECT_TRUE(AllClose(lit, ref->second, bf16_ ? 2e-3 : 1e-5, bf16_ ? 2e-2 : 1e-4))
          << case_.name << " " << label << " " << name << " vs unsharded";
    }
  }

  // fwd_bwd (GRPO kernels), and with `split` also fwd followed by bwd fed
  // with the forward's lse, logp and entropy; fwd only (entropy kernels).
  void Check(KernelKind kind, const GrpoConfig& config, const std::string& label,
             bool split = false) {
    SCOPED_TRACE(label);
    const bool entropy = IsEntropyKernel(kind);
    const KernelMode first = entropy ? KernelMode::kFwd : KernelMode::kFwdBwd;
    auto ref = RunKernel({kind, first, config}, nullptr, case_.dir);
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto got = RunKernel({kind, first, config}, &sharding_, case_.dir);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), ref->size());
    Expect(*got, *ref, label);
    if (entropy || !split) return;
    auto fwd = RunKernel({kind, KernelMode::kFwd, config}, &sharding_, case_.dir);
    ASSERT_TRUE(fwd.ok()) << fwd.status();
    Expect(*fwd, *ref, label + " fwd");
    const Outputs saved = {{"lse", fwd->at("lse")},
                           {"logp", fwd->at("logp")},
                           {"entropy", fwd->at("entropy")}};
    auto bwd = RunKernel({kind, KernelMode::kBwd, config}, &sharding_, case_.dir, saved);
    ASSERT_TRUE(bwd.ok()) << bwd.status();
    ASSERT_EQ(bwd->size(), 1u);
    Expect(*bwd, *ref, label + " bwd");
  }

  testvectors::Case case_;
  MeshCase mesh_;
  ShardingSpec sharding_;
  bool bf16_ = false;
};

// grpo_tiled: ragged tiles inside the (ragged) vocab shards; on seq meshes
// the row loop too (one row per block, the collectives inside it); fwd then
// bwd as well on the 2-D meshes. entropy_tiled; the reference kernels where
// nothing splits the vocab.
TEST_P(MeshVectorsTest, GrpoAndEntropy) {
  // Small tiles, but not thousands of them for the few large vocabularies.
  const bool large = case_.config.vocab > 64;
  GrpoConfig tiles = case_.config;
  tiles.block_size = large ? 257 : 8;
  if (Has(mesh_, ShardKind::kSeq)) {
    tiles.block_size = large ? 257 : 3;
    tiles.time_block = 1;
  }
  const std::string label =
      absl::StrCat("grpo_tiled block ", tiles.block_size,
                   tiles.time_block.has_value() ? " time_block 1" : "");
  Check(KernelKind::kGrpoTiled, tiles, label, /*split=*/mesh_.mesh.size() > 1);
  Check(KernelKind::kEntropyTiled, tiles, "entropy_tiled");
  if (!Has(mesh_, ShardKind::kVocab)) {
    Check(KernelKind::kGrpoReference, case_.config, "grpo_reference");
    Check(KernelKind::kEntropyReference, case_.config, "entropy_reference");
  }
}

std::string MeshTestName(const ::testing::TestParamInfo<std::tuple<VectorCase, MeshCase>>& info) {
  return absl::StrCat(
      testvectors::CaseTestName({std::get<0>(info.param), info.index}), "_",
      std::get<1>(info.param).label);
}

// The v1 and the v2 (policy-loss variants) vectors.
std::vector<VectorCase> CasesOf(const std::string& v1, const std::string& v2) {
  std::vector<VectorCase> cases = testvectors::VectorCases(v1);
  for (VectorCase& c : testvectors::VectorCases(v2)) cases.push_back(std::move(c));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, MeshVectorsTest,
                         ::testing::Combine(::testing::ValuesIn(CasesOf("grpo", "grpo_v2")),
                                            ::testing::ValuesIn(MeshCases())),
                         MeshTestName);

// The fused LM-head kernel: seq×vocab on 2x4 and 8-way seq, d_lm_head
// all-reduced or reduce-scattered over the seq axis.
class MeshFusedTest : public MeshVectorsTest {};

TEST_P(MeshFusedTest, FusedLinear) {
  const GrpoConfig& base = case_.config;
  GrpoConfig config = base;
  config.block_size = 8;
  config.token_chunk = 2;
  const std::string label = "grpo_fused_linear block 8 chunk 2";
  SCOPED_TRACE(label);
  const KernelSpec spec{KernelKind::kGrpoFusedLinear, KernelMode::kFwdBwd, config};
  auto ref = RunKernel(spec, nullptr, case_.dir);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto got = RunKernel(spec, &sharding_, case_.dir);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 7u);
  Expect(*got, *ref, label);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MeshFusedTest,
    ::testing::Combine(::testing::ValuesIn(CasesOf("grpo_fused", "grpo_fused_v2")),
                       ::testing::Values(MeshCase{"2x4_seq_vocab", {2, 4},
                                                  {ShardKind::kSeq, ShardKind::kVocab}},
                                         MeshCase{"8_seq", {8}, {ShardKind::kSeq}},
                                         MeshCase{"4x2_batch_vocab", {4, 2},
                                                  {ShardKind::kBatch, ShardKind::kVocab}})),
    MeshTestName);

}  // namespace
}  // namespace tpuoff::kernels
