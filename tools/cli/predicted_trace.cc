#include "tools/cli/predicted_trace.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/tpu_model.h"
#include "hlo/ir/status_macros.h"
#include "tools/cli/cost_report.h"

namespace tpuoff::tools {
namespace {

constexpr int64_t kMaxFlows = 100000;  // keeps 256-device traces loadable

// The device groups a collective synchronises: its replica groups, or every
// device named by a collective-permute's pairs.
std::vector<std::vector<int64_t>> SyncGroups(const hlo::HloInstruction& x, int64_t n) {
  if (x.opcode() == hlo::HloOpcode::kCollectivePermute) {
    std::set<int64_t> all;
    for (const auto& [s, t] : x.attrs().source_target_pairs) {
      if (s >= 0 && s < n) all.insert(s);
      if (t >= 0 && t < n) all.insert(t);
    }
    return {std::vector<int64_t>(all.begin(), all.end())};
  }
  std::vector<std::vector<int64_t>> groups = x.attrs().replica_groups.groups;
  if (groups.empty()) {
    std::vector<int64_t> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = i;
    groups.push_back(std::move(g));
  }
  for (std::vector<int64_t>& g : groups) {
    g.erase(std::remove_if(g.begin(), g.end(), [&](int64_t d) { return d < 0 || d >= n; }),
            g.end());
  }
  return groups;
}

}  // namespace

absl::Status AppendPredictedTimeline(const hlo::HloModule& module, int64_t num_devices,
                                     runtime::Trace* trace) {
  ASSIGN_OR_RETURN(hlo::ModuleCost cost, hlo::AnalyzeCost(module));
  const int64_t n = std::max<int64_t>(num_devices, 1);
  ASSIGN_OR_RETURN(hlo::IciTopology topology, V6eTopologyForModule(module, n));
  ASSIGN_OR_RETURN(hlo::ModulePrediction pred, hlo::PredictModule(cost, n, topology));
  // Each device's per-op times.
  std::vector<const hlo::DeviceTimes*> times(n, nullptr);
  for (const hlo::DeviceTimes& g : pred.groups) {
    for (int64_t d : g.devices) {
      if (d >= 0 && d < n) times[d] = &g;
    }
  }
  for (int64_t d = 0; d < n; ++d) {
    if (times[d] == nullptr) return absl::InternalError(absl::StrCat("no prediction for device ", d));
  }
  std::vector<double> cursor(n, 0.0);  // microseconds
  int64_t flows = 0;
  auto event = [&](int64_t d, size_t i, double start_us, double dur_us, double wait_us) {
    const hlo::OpCost& op = cost.ops[i];
    const hlo::OpTime& t = times[d]->ops[i];
    runtime::TraceEvent e;
    e.name = op.executions > 1 ? absl::StrCat(op.name, " x", op.executions) : op.name;
    e.category = op.collectives.empty() ? "predicted" : "predicted collective";
    e.device = d;
    e.track = runtime::kPredictedTrack;
    e.start_us = start_us;
    e.duration_us = dur_us;
    e.bytes = static_cast<int64_t>(op.executions * op.bytes_written);
    e.args = {{"executions", op.executions},
              {"flops", op.executions * op.flops},
              {"transcendentals", op.executions * op.transcendentals},
              {"bytes_accessed", op.executions * op.bytes_accessed()},
              {"compute_us", t.compute_s * 1e6},
              {"memory_us", t.memory_s * 1e6},
              {"collective_us", t.collective_s * 1e6}};
    if (wait_us > 0) e.args.push_back({"wait_for_group_us", wait_us});
    e.note = absl::StrCat(hlo::BoundName(t.bound), "-bound; ", op.where);
    trace->AddEvent(std::move(e));
  };
  for (size_t i = 0; i < cost.ops.size(); ++i) {
    const hlo::OpCost& op = cost.ops[i];
    if (op.collectives.empty() || n == 1) {
      for (int64_t d = 0; d < n; ++d) {
        const double dur = times[d]->ops[i].seconds * 1e6;
        event(d, i, cursor[d], dur, 0);
        cursor[d] += dur;
      }
      continue;
    }
    // The op's own collective decides who waits for whom (fused counting:
    // one collective per op).
    const hlo::HloInstruction& x = *op.collectives.front().first;
    std::vector<bool> done(n, false);
    for (const std::vector<int64_t>& g : SyncGroups(x, n)) {
      if (g.empty()) continue;
      double arrive = 0;
      double comm = 0;
      for (int64_t d : g) {
        const hlo::OpTime& t = times[d]->ops[i];
        arrive = std::max(arrive, cursor[d] + (t.seconds - t.collective_s) * 1e6);
        comm = std::max(comm, t.collective_s * 1e6);
      }
      const double end = arrive + comm;
      for (int64_t d : g) {
        const hlo::OpTime& t = times[d]->ops[i];
        const double local = (t.seconds - t.collective_s) * 1e6;
        event(d, i, cursor[d], end - cursor[d], arrive - (cursor[d] + local));
        cursor[d] = end;
        done[d] = true;
      }
      // Data moves between ring neighbours (or along the permute's pairs).
      const double mid = arrive + comm / 2;
      if (x.opcode() == hlo::HloOpcode::kCollectivePermute) {
        for (const auto& [s, t] : x.attrs().source_target_pairs) {
          if (s < 0 || t < 0 || s >= n || t >= n || s == t || flows >= kMaxFlows) continue;
          trace->AddFlow({op.name, s, arrive, t, std::max(arrive, end - 1e-3)});
          ++flows;
        }
      } else if (g.size() > 1) {
        for (size_t k = 0; k < g.size() && flows < kMaxFlows; ++k) {
          trace->AddFlow({op.name, g[k], std::min(mid, arrive + 1e-3), g[(k + 1) % g.size()],
                          std::max(mid, end - 1e-3)});
          ++flows;
        }
      }
    }
    // Devices outside every group only run the op's local part.
    for (int64_t d = 0; d < n; ++d) {
      if (done[d]) continue;
      const double dur = times[d]->ops[i].seconds * 1e6;
      event(d, i, cursor[d], dur, 0);
      cursor[d] += dur;
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::tools
