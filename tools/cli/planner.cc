#include "tools/cli/planner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/tpu_model.h"
#include "hlo/ir/status_macros.h"
#include "hlo/spmd/mesh.h"
#include "tools/cli/cost_report.h"
#include "tools/cli/memory_report.h"

namespace tpuoff::tools {
namespace {

// Batches a configuration can take are multiples of this (batch sharding
// takes any B: a ragged split pads the last shards).
int64_t BatchUnit(const PlanConfig&, int64_t step) { return step; }

absl::StatusOr<std::unique_ptr<hlo::HloModule>> Build(const PlanConfig& c, int64_t batch) {
  KernelFlags k = c.kernel;
  k.batch = batch;
  return BuildShardedModule(k, c.shard);
}

}  // namespace

int64_t HbmCapacityBytes(double gib) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(gib * 1073741824.0)));
}

absl::StatusOr<std::vector<std::string>> PlanShardChoices(const std::string& mesh_text) {
  ASSIGN_OR_RETURN(hlo::Mesh mesh, hlo::ParseMeshShape(mesh_text));
  std::vector<std::string> out = {"none"};
  if (mesh.num_devices == 1) return out;
  static const char* kKinds[] = {"none", "batch", "seq", "vocab"};
  const int64_t axes = mesh.num_axes();
  int64_t combos = 1;
  for (int64_t a = 0; a < axes; ++a) combos *= 4;
  for (int64_t c = 1; c < combos; ++c) {  // c = 0 is every axis none
    std::vector<std::string> kinds;
    int64_t rest = c;
    for (int64_t a = 0; a < axes; ++a) {
      kinds.insert(kinds.begin(), kKinds[rest % 4]);
      rest /= 4;
    }
    out.push_back(absl::StrJoin(kinds, ","));
  }
  return out;
}

absl::StatusOr<std::vector<PlanConfig>> PlanConfigs(const PlanRequest& r) {
  std::vector<std::string> shards = r.shards;
  if (shards.empty()) {
    ASSIGN_OR_RETURN(shards, PlanShardChoices(r.mesh));
  }
  std::vector<PlanConfig> out;
  for (const std::string& kernel : r.kernels) {
    const bool fused = kernel == "grpo_fused_linear";
    for (const std::string& shard : shards) {
      for (int64_t block : r.block_sizes) {
        std::vector<std::optional<int64_t>> chunks = {std::nullopt};
        if (fused) chunks = r.token_chunks;
        for (const std::optional<int64_t>& chunk : chunks) {
          PlanConfig c;
          c.kernel.kernel = kernel;
          c.kernel.mode = r.mode;
          c.kernel.seq = r.seq;
          c.kernel.vocab = r.vocab;
          c.kernel.logits_dtype = r.logits_dtype;
          c.kernel.block_size = block;
          c.kernel.hidden = r.hidden;
          c.kernel.token_chunk = chunk;
          c.shard.mesh = shard == "none" ? "1" : r.mesh;
          c.shard.shard = shard;
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

absl::StatusOr<int64_t> PlanPeakBytes(const PlanConfig& config, int64_t batch) {
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module, Build(config, batch));
  ASSIGN_OR_RETURN(hlo::DeviceMemoryReport report, hlo::AnalyzeDeviceMemory(*module));
  int64_t peak = 0;
  for (const hlo::DeviceGroup& g : report.groups) {
    peak = std::max(peak, g.analysis.tpu_peak.bytes);
  }
  return peak;
}

absl::StatusOr<double> PlanPredictedSeconds(const PlanConfig& config, int64_t batch) {
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module, Build(config, batch));
  ASSIGN_OR_RETURN(hlo::ModuleCost cost, hlo::AnalyzeCost(*module));
  const int64_t devices = hlo::ModuleDeviceCount(*module);
  ASSIGN_OR_RETURN(hlo::IciTopology topology, V6eTopologyForModule(*module, devices));
  ASSIGN_OR_RETURN(hlo::ModulePrediction p, hlo::PredictModule(cost, devices, topology));
  return p.max_seconds;
}

std::vector<std::string> PlanFlags(const PlanConfig& c, int64_t batch) {
  std::vector<std::string> f = {
      absl::StrCat("--kernel=", c.kernel.kernel), absl::StrCat("--mode=", c.kernel.mode),
      absl::StrCat("--batch=", batch),           absl::StrCat("--seq=", c.kernel.seq),
      absl::StrCat("--vocab=", c.kernel.vocab),
      absl::StrCat("--logits-dtype=", c.kernel.logits_dtype),
      absl::StrCat("--block-size=", c.kernel.block_size)};
  if (c.kernel.kernel == "grpo_fused_linear") {
    f.push_back(absl::StrCat("--hidden=", c.kernel.hidden));
    if (c.kernel.token_chunk) f.push_back(absl::StrCat("--token-chunk=", *c.kernel.token_chunk));
  }
  if (c.shard.shard != "none") {
    f.push_back(absl::StrCat("--mesh=", c.shard.mesh));
    f.push_back(absl::StrCat("--shard=", c.shard.shard));
  }
  return f;
}

absl::StatusOr<PlanResult> SearchPlan(const PlanRequest& r) {
  if (r.batch_step < 1 || r.seq < 1 || r.vocab < 1 || r.hidden < 1 || !(r.hbm_gib > 0)) {
    return absl::InvalidArgumentError("plan: batch step, seq, vocab, hidden and HBM must be positive");
  }
  const int64_t capacity = HbmCapacityBytes(r.hbm_gib);
  PlanResult result;
  ASSIGN_OR_RETURN(std::vector<PlanConfig> configs, PlanConfigs(r));
  for (const PlanConfig& config : configs) {
    PlanCandidate cand;
    cand.config = config;
    const int64_t unit = BatchUnit(config, r.batch_step);
    // fits(k): the peak at batch k * unit is within capacity. Configurations
    // the kernel refuses (a tile or chunk it cannot take) fit nothing.
    auto fits = [&](int64_t k, int64_t* peak) -> absl::StatusOr<bool> {
      ++result.evaluations;
      absl::StatusOr<int64_t> p = PlanPeakBytes(config, k * unit);
      if (!p.ok()) {
        if (p.status().code() == absl::StatusCode::kInvalidArgument) return false;
        return p.status();
      }
      *peak = *p;
      return *p <= capacity;
    };
    int64_t peak = 0;
    ASSIGN_OR_RETURN(bool one, fits(1, &peak));
    if (one) {
      // Exponential search for a k that does not fit, then bisection.
      int64_t lo = 1;
      int64_t lo_peak = peak;
      int64_t hi = 2;
      const int64_t kmax = std::max<int64_t>(1, r.max_batch / unit);
      while (true) {
        if (hi > kmax) {
          hi = kmax + 1;
          break;
        }
        ASSIGN_OR_RETURN(bool ok, fits(hi, &peak));
        if (!ok) break;
        lo = hi;
        lo_peak = peak;
        hi *= 2;
      }
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        ASSIGN_OR_RETURN(bool ok, fits(mid, &peak));
        if (ok) {
          lo = mid;
          lo_peak = peak;
        } else {
          hi = mid;
        }
      }
      cand.batch = lo * unit;
      cand.peak_bytes = lo_peak;
      cand.flags = PlanFlags(config, cand.batch);
    }
    result.candidates.push_back(std::move(cand));
  }
  // The largest batch; among those, the fastest predicted time, then the
  // smallest peak, then the search order.
  int64_t best_batch = 0;
  for (const PlanCandidate& c : result.candidates) best_batch = std::max(best_batch, c.batch);
  if (best_batch == 0) return result;
  for (PlanCandidate& c : result.candidates) {
    if (c.batch != best_batch) continue;
    ASSIGN_OR_RETURN(c.predicted_seconds, PlanPredictedSeconds(c.config, c.batch));
    if (!result.best || c.predicted_seconds < result.best->predicted_seconds ||
        (c.predicted_seconds == result.best->predicted_seconds &&
         c.peak_bytes < result.best->peak_bytes)) {
      result.best = c;
    }
  }
  return result;
}

}  // namespace tpuoff::tools
