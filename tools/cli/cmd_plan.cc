// `tpuoff plan`: the largest batch whose per-device HBM peak fits, over
// kernels, shardings, vocab tiles and token chunks (tools/cli/planner.h),
// with the exact flags that reproduce it.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/spmd/mesh.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/cost_report.h"
#include "tools/cli/planner.h"
#include "tools/cli/subcommands.h"
#include "tools/io/file_util.h"
#include "tools/io/json_text.h"

namespace tpuoff::tools {

int PlanMain(const std::vector<std::string>& args) {
  constexpr absl::string_view kCmd = "tpuoff plan";
  PlanRequest r;
  bool json = false;
  FlagSet flags(
      std::string(kCmd), "--hidden=H --vocab=V --seq=T --mesh=N|AxB[xC...] --hbm-gib=G [flags]",
      "Finds the largest batch whose per-device HBM peak fits in --hbm-gib,\n"
      "searching the kernel (grpo_tiled on given logits, grpo_fused_linear with\n"
      "the LM head), every --shard the mesh takes (none, or one of none, batch,\n"
      "seq, vocab per mesh axis: 4 on a 1-D mesh, 16 on a 2-D one), the vocab\n"
      "tile (--block-size 1024..8192) and the fused kernel's token chunk; peaks\n"
      "are the static analysis of `tpuoff memory` (fits = TPU-padded peak within\n"
      "capacity), ties are broken by the predicted v6e time of `tpuoff cost`.\n"
      "Prints the flags that reproduce the answer (`tpuoff memory FLAGS`).\n"
      "Exit codes: 0 ok, 1 nothing fits or bad input, 2 usage error.");
  flags.AddInt64("hidden", &r.hidden, "hidden size H (grpo_fused_linear's hidden [B,T,H])");
  flags.AddInt64("vocab", &r.vocab, "vocabulary size V");
  flags.AddInt64("seq", &r.seq, "sequence length T");
  flags.AddInt64("batch-step", &r.batch_step, "batches searched are multiples of this");
  flags.AddString("mesh", &r.mesh, "device mesh: N (1-D) or AxB (v6e chips, at most 256)",
                  "N|AxB[xC...]");
  flags.AddDouble("hbm-gib", &r.hbm_gib, "HBM capacity per device in GiB");
  flags.AddEnum("logits-dtype", &r.logits_dtype, {"f32", "bf16"}, "element type of logits");
  flags.AddEnum("mode", &r.mode, {"fwd", "bwd", "fwd_bwd"}, "kernel mode");
  flags.AddInt64("max-batch", &r.max_batch, "largest batch searched");
  flags.AddBool("json", &json, "print a JSON document instead of text");
  flags.SetPositionals("ARG", 0, 0);
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;
  for (const auto& [name, v, hi] : std::vector<std::tuple<const char*, int64_t, int64_t>>{
           {"hidden", r.hidden, 1 << 20}, {"vocab", r.vocab, int64_t{1} << 24},
           {"seq", r.seq, 1 << 24}, {"batch-step", r.batch_step, 1 << 20},
           {"max-batch", r.max_batch, int64_t{1} << 30}}) {
    if (v < 1 || v > hi) {
      return ReportUsageError(kCmd, absl::StrCat("--", name, " must be in [1, ", hi, "], got ", v));
    }
  }
  if (absl::StatusOr<hlo::Mesh> mesh = hlo::ParseMeshShape(r.mesh);
      !mesh.ok() || mesh->num_devices > 256) {
    return ReportUsageError(kCmd, absl::StrCat("--mesh: ", mesh.ok() ? "at most 256 devices (one v6e slice)"
                                                                     : mesh.status().message()));
  }
  if (!(r.hbm_gib > 0) || r.hbm_gib > 1e6) {
    return ReportUsageError(kCmd, absl::StrCat("--hbm-gib must be in (0, 1e6], got ", r.hbm_gib));
  }
  if (r.max_batch < r.batch_step) {
    return ReportUsageError(kCmd, "--max-batch must be at least --batch-step");
  }
  absl::StatusOr<PlanResult> result = SearchPlan(r);
  if (!result.ok()) return ReportFailure(kCmd, result.status());
  if (!result->best) {
    return ReportFailure(kCmd, absl::ResourceExhaustedError(absl::StrCat(
                                   "no configuration fits batch ", r.batch_step, " in ",
                                   r.hbm_gib, " GiB per device (", result->evaluations,
                                   " configurations x batches analysed)")));
  }
  const PlanCandidate& b = *result->best;
  std::string text;
  if (json) {
    nlohmann::ordered_json j;
    j["batch"] = b.batch;
    j["batch_step"] = r.batch_step;
    j["flags"] = b.flags;
    j["peak_bytes"] = b.peak_bytes;
    j["predicted_seconds"] = b.predicted_seconds;
    j["hbm_capacity_bytes"] = HbmCapacityBytes(r.hbm_gib);
    j["kernel"] = b.config.kernel.kernel;
    j["shard"] = b.config.shard.shard;
    j["mesh"] = r.mesh;
    j["block_size"] = b.config.kernel.block_size;
    if (b.config.kernel.token_chunk) {
      j["token_chunk"] = *b.config.kernel.token_chunk;
    } else {
      j["token_chunk"] = nullptr;
    }
    j["evaluations"] = result->evaluations;
    nlohmann::ordered_json cands = nlohmann::ordered_json::array();
    for (const PlanCandidate& c : result->candidates) {
      nlohmann::ordered_json o;
      o["batch"] = c.batch;
      o["peak_bytes"] = c.peak_bytes;
      o["flags"] = c.batch > 0 ? c.flags : PlanFlags(c.config, 0);
      if (c.predicted_seconds > 0) o["predicted_seconds"] = c.predicted_seconds;
      cands.push_back(std::move(o));
    }
    j["candidates"] = std::move(cands);
    text = JsonText(j);
  } else {
    absl::StrAppend(&text, "largest batch: ", b.batch, " (multiple of ", r.batch_step, ") in ",
                    r.hbm_gib, " GiB per device on v6e mesh ", r.mesh, "\n");
    absl::StrAppend(&text, "  kernel ", b.config.kernel.kernel, ", shard ", b.config.shard.shard,
                    ", vocab tile ", b.config.kernel.block_size);
    if (b.config.kernel.token_chunk) absl::StrAppend(&text, ", token chunk ", *b.config.kernel.token_chunk);
    absl::StrAppend(&text, "\n  TPU-padded peak per device ",
                    absl::StrFormat("%.3f GiB", b.peak_bytes / 1073741824.0),
                    ", predicted step time ", FormatSeconds(b.predicted_seconds), "\n");
    absl::StrAppend(&text, "  reproduce: tpuoff memory ", absl::StrJoin(b.flags, " "), "\n");
    absl::StrAppend(&text, "searched ", result->candidates.size(), " configurations (",
                    result->evaluations, " analyses); the largest batch of each kernel/shard:\n");
    // In search order, the best of each (kernel, shard).
    std::vector<std::pair<std::string, std::string>> seen;
    for (const PlanCandidate& c : result->candidates) {
      const std::pair<std::string, std::string> key = {c.config.kernel.kernel,
                                                       c.config.shard.shard};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      const PlanCandidate* top = &c;
      for (const PlanCandidate& o : result->candidates) {
        if (o.config.kernel.kernel == key.first && o.config.shard.shard == key.second &&
            o.batch > top->batch) {
          top = &o;
        }
      }
      absl::StrAppend(&text,
                      absl::StrFormat("  %-18s %-14s batch %d", key.first, key.second, top->batch),
                      top->batch > 0 ? "  (" + absl::StrJoin(top->flags, " ") + ")" : "", "\n");
    }
  }
  if (absl::Status s = WriteToStdout(text); !s.ok()) return ReportFailure(kCmd, s);
  return kExitOk;
}

}  // namespace tpuoff::tools
