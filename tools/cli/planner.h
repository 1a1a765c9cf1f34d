// `tpuoff plan`: the largest batch whose per-device HBM peak fits, searched
// over kernels (vocab-tiled on given logits, fused with the LM head),
// shardings (every --shard the mesh takes, 1-D or N-D), vocab tiles and token chunks; ties
// broken by the predicted v6e time. Peaks come from the same static analysis
// as `tpuoff memory` (hlo::AnalyzeDeviceMemory, fits = TPU-padded peak within
// capacity), times from `tpuoff cost` (fused counting, the mesh's v6e slice).
#ifndef TPUOFF_TOOLS_CLI_PLANNER_H_
#define TPUOFF_TOOLS_CLI_PLANNER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"

namespace tpuoff::tools {

struct PlanRequest {
  int64_t hidden = 1536;
  int64_t vocab = 151936;
  int64_t seq = 4096;
  int64_t batch_step = 1;  // batches searched: multiples of this
  std::string mesh = "8";  // "N" or "AxB" (tpuoff's --mesh)
  std::string logits_dtype = "bf16";
  std::string mode = "fwd_bwd";
  double hbm_gib = 32;
  int64_t max_batch = int64_t{1} << 20;  // search ceiling
  // The search space (defaults: everything below).
  std::vector<std::string> kernels = {"grpo_tiled", "grpo_fused_linear"};
  // --shard values; empty: every one the mesh takes (PlanShardChoices).
  std::vector<std::string> shards;
  std::vector<int64_t> block_sizes = {1024, 2048, 4096, 8192};
  // grpo_fused_linear only; nullopt = all tokens of a tile at once.
  std::vector<std::optional<int64_t>> token_chunks = {std::nullopt, 512, 1024, 2048, 4096};
};

// One configuration of the search space (batch left to the search).
struct PlanConfig {
  KernelFlags kernel;
  ShardFlags shard;
};

struct PlanCandidate {
  PlanConfig config;
  int64_t batch = 0;        // the largest fitting batch of this config (0: none)
  int64_t peak_bytes = 0;   // TPU-padded peak per device at that batch
  double predicted_seconds = 0;  // set for the candidates compared on time
  std::vector<std::string> flags;  // reproduce with `tpuoff memory FLAGS`
};

struct PlanResult {
  std::optional<PlanCandidate> best;  // nullopt: not even one batch step fits
  std::vector<PlanCandidate> candidates;  // every configuration searched
  int64_t evaluations = 0;  // module builds + memory analyses
};

// Every --shard value of a mesh: "none", then one kind from batch, seq,
// vocab or none per mesh axis (not all none), e.g. on 2x4 "batch,vocab".
absl::StatusOr<std::vector<std::string>> PlanShardChoices(const std::string& mesh);

// The configurations of the request's search space, in a fixed order.
absl::StatusOr<std::vector<PlanConfig>> PlanConfigs(const PlanRequest& request);

// Per-device TPU-padded peak (the worst device group) of `config` at `batch`;
// INVALID_ARGUMENT when the configuration cannot be built at that batch
// (e.g. H not divisible by the token shards when reduce-scattering d_lm_head).
absl::StatusOr<int64_t> PlanPeakBytes(const PlanConfig& config, int64_t batch);
// Predicted v6e step time (slowest device) of `config` at `batch`.
absl::StatusOr<double> PlanPredictedSeconds(const PlanConfig& config, int64_t batch);

// The flags `tpuoff memory` (and run/cost/dump) take for `config` at `batch`.
std::vector<std::string> PlanFlags(const PlanConfig& config, int64_t batch);

int64_t HbmCapacityBytes(double gib);

absl::StatusOr<PlanResult> SearchPlan(const PlanRequest& request);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_PLANNER_H_
