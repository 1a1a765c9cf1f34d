// chosen_ids outside [0, V): every kernel form gives the same, documented
// result (kernels/grpo_common.h SanitizeChosenIds): such an id picks no
// vocab entry, its chosen logit counts as 0 (logp = -lse, / tau in post_lse
// mode) and its gradient has no one-hot term. Checked for grpo_reference,
// grpo_tiled and grpo_fused_linear, unsharded, batch-sharded and
// vocab-sharded (V not a multiple of the mesh or the tile, so padding
// columns exist that an id >= V must not hit), fwd_bwd and fwd then bwd.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hlo/spmd/sharding_util.h"
#include "kernels/build_kernel.h"
#include "kernels/grpo_config.h"
#include "kernels/grpo_sharded.h"
#include "runtime/device/sharding_io.h"
#include "runtime/emulator/executor.h"

namespace tpuoff::kernels {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using Outputs = std::map<std::string, Literal>;

constexpr int64_t kB = 2, kT = 3, kV = 10, kH = 4;
// Two valid ids per row and every kind of invalid one.
const int32_t kIds[kB * kT] = {3, -1, 10, 9, std::numeric_limits<int32_t>::min(), 1000};
bool Valid(int64_t i) { return kIds[i] >= 0 && kIds[i] < kV; }

Literal F32(const std::vector<int64_t>& dims, uint32_t seed) {
  Literal l(Shape(PrimitiveType::kF32, dims));
  for (int64_t i = 0; i < l.num_elements(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    l.SetFromDouble(i, (static_cast<double>(seed >> 8) / (1 << 24)) * 4.0 - 2.0);
  }
  return l;
}

GrpoConfig Config(TemperatureMode mode) {
  GrpoConfig c;
  c.batch = kB;
  c.seq = kT;
  c.vocab = kV;
  c.block_size = 4;
  c.temperature = 0.7;
  c.temperature_mode = mode;
  c.hidden = kH;
  return c;
}

// Inputs by name: logits (or hidden and lm_head), ids, mask, advantages,
// old_logp; lse/logp only for bwd (`saved`).
Literal Input(const std::string& name, const Shape& shape) {
  if (name == "chosen_ids") {
    Literal l(shape);
    for (int64_t i = 0; i < l.num_elements(); ++i) l.SetFromDouble(i, kIds[i]);
    return l;
  }
  if (name == "completion_mask") {
    Literal l(shape);
    for (int64_t i = 0; i < l.num_elements(); ++i) l.SetFromDouble(i, 1);
    return l;
  }
  return F32(shape.dimensions(), static_cast<uint32_t>(std::hash<std::string>()(name)));
}

absl::StatusOr<Outputs> RunKernel(KernelKind kind, KernelMode mode, const GrpoConfig& config,
                            ShardKind shard, int64_t mesh, const Outputs& saved = {}) {
  KernelSpec spec{kind, mode, config};
  ShardingSpec sharding;
  sharding.kind = shard;
  sharding.mesh.num_devices = mesh;
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module = BuildShardedKernel(spec, sharding);
  if (!module.ok()) return module.status();
  const std::vector<std::string> names = (*module)->OutputNames();
  std::vector<Literal> args;
  if (shard == ShardKind::kNone) {
    for (const hlo::HloInstruction* p : (*module)->entry()->parameters()) {
      auto it = saved.find(p->name());
      args.push_back(it != saved.end() ? it->second : Input(p->name(), p->shape()));
    }
    absl::StatusOr<runtime::RunResult> r = runtime::RunModule(**module, args);
    if (!r.ok()) return r.status();
    Outputs out;
    for (size_t i = 0; i < names.size(); ++i) out[names[i]] = std::move(r->outputs[i]);
    return out;
  }
  absl::StatusOr<hlo::PartitionedSignature> sig = hlo::GetPartitionedSignature(**module);
  if (!sig.ok()) return sig.status();
  for (size_t i = 0; i < sig->parameter_names.size(); ++i) {
    auto it = saved.find(sig->parameter_names[i]);
    args.push_back(it != saved.end() ? it->second
                                     : Input(sig->parameter_names[i], sig->global_parameters[i]));
  }
  absl::StatusOr<std::vector<std::vector<Literal>>> per_device =
      runtime::SplitArguments(*sig, args);
  if (!per_device.ok()) return per_device.status();
  absl::StatusOr<runtime::RunResult> r = runtime::RunSpmd(**module, *per_device);
  if (!r.ok()) return r.status();
  absl::StatusOr<std::vector<Literal>> global = runtime::AssembleOutputs(*sig, r->outputs, names);
  if (!global.ok()) return global.status();
  Outputs out;
  for (size_t i = 0; i < names.size(); ++i) out[names[i]] = std::move((*global)[i]);
  return out;
}

void ExpectClose(const Literal& got, const Literal& want, const std::string& what) {
  ASSERT_EQ(got.num_elements(), want.num_elements()) << what;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
    EXPECT_NEAR(g, w, 1e-5 + 1e-5 * std::fabs(w)) << what << " element " << i;
  }
}

struct Form {
  const char* name;
  KernelKind kind;
  ShardKind shard;
  int64_t mesh;
};

class ChosenIdsTest : public ::testing::TestWithParam<TemperatureMode> {};

TEST_P(ChosenIdsTest, EveryFormGivesTheDocumentedResult) {
  const GrpoConfig c = Config(GetParam());
  const bool post_lse = GetParam() == TemperatureMode::kPostLse;
  // The logits kernels share their inputs.
  const std::vector<Form> forms = {
      {"reference", KernelKind::kGrpoReference, ShardKind::kNone, 1},
      {"tiled", KernelKind::kGrpoTiled, ShardKind::kNone, 1},
      {"reference batch/2", KernelKind::kGrpoReference, ShardKind::kBatch, 2},
      {"tiled batch/2", KernelKind::kGrpoTiled, ShardKind::kBatch, 2},
      {"tiled vocab/4", KernelKind::kGrpoTiled, ShardKind::kVocab, 4},
      {"tiled vocab/3", KernelKind::kGrpoTiled, ShardKind::kVocab, 3},
  };
  absl::StatusOr<Outputs> ref = RunKernel(KernelKind::kGrpoReference, KernelMode::kFwdBwd, c,
                                    ShardKind::kNone, 1);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // The documented values: logp = -lse (/ tau) for invalid ids, and no
  // one-hot term: dlogits of such a token sums to -coef * sum(softmax) =
  // -coef, i.e. every element has the sign of -coef, none of +coef's.
  const Literal& logp = ref->at("logp");
  const Literal& lse = ref->at("lse");
  for (int64_t i = 0; i < kB * kT; ++i) {
    if (Valid(i)) continue;
    const double want = -lse.GetAsDouble(i) / (post_lse ? c.temperature : 1.0);
    EXPECT_NEAR(logp.GetAsDouble(i), want, 1e-5) << "token " << i << " id " << kIds[i];
    EXPECT_TRUE(std::isfinite(ref->at("per_token_loss").GetAsDouble(i)));
  }
  const Literal& dl = ref->at("dlogits");
  for (int64_t i = 0; i < kB * kT; ++i) {
    if (Valid(i)) continue;
    double sum = 0;
    for (int64_t v = 0; v < kV; ++v) sum += dl.GetAsDouble(i * kV + v);
    // sum_v coef*(onehot_v - p_v) = -coef without a one-hot term (0 with one).
    double some = 0;
    for (int64_t v = 0; v < kV; ++v) some = std::max(some, std::fabs(dl.GetAsDouble(i * kV + v)));
    if (some > 0) EXPECT_GT(std::fabs(sum), 1e-7) << "token " << i << " has a one-hot term";
  }
  for (const Form& f : forms) {
    for (KernelMode mode : {KernelMode::kFwdBwd, KernelMode::kFwd}) {
      absl::StatusOr<Outputs> got = RunKernel(f.kind, mode, c, f.shard, f.mesh);
      ASSERT_TRUE(got.ok()) << f.name << ": " << got.status();
      for (const auto& [name, lit] : *got) {
        ExpectClose(lit, ref->at(name), absl::StrCat(f.name, " ", KernelModeName(mode), " ", name));
      }
      if (mode != KernelMode::kFwd) continue;
      Outputs saved = {{"lse", got->at("lse")}, {"logp", got->at("logp")}};
      absl::StatusOr<Outputs> bwd = RunKernel(f.kind, KernelMode::kBwd, c, f.shard, f.mesh, saved);
      ASSERT_TRUE(bwd.ok()) << f.name << " bwd: " << bwd.status();
      ExpectClose(bwd->at("dlogits"), ref->at("dlogits"), std::string(f.name) + " bwd dlogits");
    }
  }
}

TEST_P(ChosenIdsTest, FusedLinearKernelAgreesWithTheReferenceOnItsLogits) {
  const GrpoConfig c = Config(GetParam());
  // The reference on logits = hidden @ lm_head computed here in double.
  const Literal hidden = Input("hidden", Shape(PrimitiveType::kF32, {kB, kT, kH}));
  const Literal lm_head = Input("lm_head", Shape(PrimitiveType::kF32, {kH, kV}));
  Literal logits(Shape(PrimitiveType::kF32, {kB, kT, kV}));
  for (int64_t r = 0; r < kB * kT; ++r) {
    for (int64_t v = 0; v < kV; ++v) {
      double s = 0;
      for (int64_t h = 0; h < kH; ++h) s += hidden.GetAsDouble(r * kH + h) * lm_head.GetAsDouble(h * kV + v);
      logits.SetFromDouble(r * kV + v, s);
    }
  }
  absl::StatusOr<Outputs> ref = RunKernel(KernelKind::kGrpoReference, KernelMode::kFwd, c,
                                    ShardKind::kNone, 1, {{"logits", logits}});
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (auto [shard, mesh] : {std::pair{ShardKind::kNone, int64_t{1}}, {ShardKind::kVocab, 4},
                             {ShardKind::kBatch, 2}}) {
    absl::StatusOr<Outputs> got = RunKernel(KernelKind::kGrpoFusedLinear, KernelMode::kFwd, c, shard,
                                      mesh, {{"hidden", hidden}, {"lm_head", lm_head}});
    ASSERT_TRUE(got.ok()) << got.status();
    for (const char* name : {"loss", "per_token_loss", "logp", "entropy", "lse"}) {
      ExpectClose(got->at(name), ref->at(name), absl::StrCat("fused ", ShardKindName(shard), " ", name));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ChosenIdsTest,
                         ::testing::Values(TemperatureMode::kPreSoftmax, TemperatureMode::kPostLse));

}  // namespace
}  // namespace tpuoff::kernels
