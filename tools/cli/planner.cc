#include "tools/cli/planner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/tpu_model.h"
#include "hlo/ir/status_macros.h"
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

std::vector<PlanConfig> PlanConfigs(const PlanRequest& r) {
  std::vector<PlanConfig> out;
  for (const std::string& kernel : r.kernels) {
    const bool fused = kernel == "grpo_fused_linear";
    for (const std::string& shard : r.shards) {
      if (shard != "none" && r.mesh == 1) continue;  // nothing to split over
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
          c.shard.mesh = absl::StrCat(shard == "none" ? 1 : r.mesh);
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
  if (r.batch_step < 1 || r.seq < 1 || r.vocab < 1 || r.hidden < 1 || r.mesh < 1 ||
      !(r.hbm_gib > 0)) {
    return absl::InvalidArgumentError("plan: batch step, seq, vocab, hidden, mesh and HBM must be positive");
  }
  const int64_t capacity = HbmCapacityBytes(r.hbm_gib);
  PlanResult result;
  for (const PlanConfig& config : PlanConfigs(r)) {
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
