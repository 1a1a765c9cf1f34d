#include "tools/cli/cost_report.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/spmd/mesh.h"
#include "tools/io/json_text.h"

namespace tpuoff::tools {
namespace {

using Json = nlohmann::ordered_json;

std::string Count(double v) {
  if (v < 0) return absl::StrFormat("%.0f", v);
  if (v < 1e4) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g", v);
}

std::string Bytes(double v) {
  if (v < 0) return absl::StrFormat("%.0f B", v);
  if (v >= 1e9) return absl::StrFormat("%.3f GB", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.3f MB", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.3f kB", v / 1e3);
  return absl::StrFormat("%.0f B", v);
}

std::string DeviceList(const std::vector<int64_t>& d) {
  if (d.size() == 1) return absl::StrCat("device ", d[0]);
  bool contiguous = true;
  for (size_t i = 1; i < d.size(); ++i) contiguous = contiguous && d[i] == d[i - 1] + 1;
  if (contiguous) return absl::StrCat("devices ", d.front(), "-", d.back());
  return absl::StrCat("devices ", absl::StrJoin(d, ","));
}

}  // namespace

absl::StatusOr<hlo::IciTopology> V6eTopologyForModule(const hlo::HloModule& module,
                                                      int64_t num_devices) {
  absl::StatusOr<hlo::IciTopology> topology = hlo::IciTopology::V6eSlice(num_devices);
  if (!topology.ok()) return topology;
  absl::StatusOr<hlo::Mesh> mesh = hlo::ParseMeshShape(absl::StrCat(num_devices));
  const auto attr = module.frontend_attributes().find(std::string(hlo::kMeshShapeAttr));
  if (attr != module.frontend_attributes().end()) mesh = hlo::ParseMeshShape(attr->second);
  if (mesh.ok() && mesh->num_devices == num_devices && num_devices == topology->num_chips()) {
    topology->chip_of_device = hlo::V6eChipOrder(*mesh);
  }
  return topology;
}

std::string FormatSeconds(double s) {
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  if (s >= 1e-6) return absl::StrFormat("%.3f us", s * 1e6);
  return absl::StrFormat("%.1f ns", s * 1e9);
}

std::string FormatCostReport(const hlo::ModuleCost& cost, const hlo::ModulePrediction& pred,
                             const CostReportOptions& options) {
  std::string out;
  absl::StrAppend(&out, "module ", cost.module_name, ": counting=",
                  hlo::CostCountingName(cost.counting), ", ", pred.num_devices, " device",
                  pred.num_devices == 1 ? "" : "s", " on v6e ", pred.topology.ToString(), "\n");
  absl::StrAppend(&out, "per device: flops ", Count(cost.totals.flops), ", transcendentals ",
                  Count(cost.totals.transcendentals), ", bytes accessed ",
                  Bytes(cost.totals.bytes_accessed()), " (read ", Bytes(cost.totals.bytes_read),
                  ", written ", Bytes(cost.totals.bytes_written), ")\n");
  absl::StrAppend(&out, "predicted step time per device: ", FormatSeconds(pred.max_seconds), "\n");
  for (const hlo::DeviceTimes& g : pred.groups) {
    absl::StrAppend(&out, "  ", DeviceList(g.devices), ": ", FormatSeconds(g.seconds),
                    " (compute ", FormatSeconds(g.compute_s), ", memory ",
                    FormatSeconds(g.memory_s), ", collective ", FormatSeconds(g.collective_s),
                    ")\n");
  }
  if (pred.groups.empty() || cost.ops.empty()) return out;
  // The slowest group's ops, largest first.
  const hlo::DeviceTimes* slow = &pred.groups[0];
  for (const hlo::DeviceTimes& g : pred.groups) {
    if (g.seconds > slow->seconds) slow = &g;
  }
  std::vector<size_t> order(cost.ops.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return slow->ops[a].seconds > slow->ops[b].seconds;
  });
  const size_t n = std::min<size_t>(order.size(), static_cast<size_t>(std::max(options.top, 0)));
  absl::StrAppend(&out, "top ", n, " of ", cost.ops.size(), " ops by predicted time (",
                  DeviceList(slow->devices), "):\n");
  absl::StrAppend(&out, absl::StrFormat("  %10s %6s %-10s %6s %10s %10s %11s  %s\n", "time",
                                        "share", "bound", "execs", "flops", "transc", "bytes",
                                        "op [where]"));
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    const hlo::OpCost& op = cost.ops[i];
    const hlo::OpTime& t = slow->ops[i];
    const double share = slow->seconds > 0 ? 100 * t.seconds / slow->seconds : 0;
    absl::StrAppend(&out, absl::StrFormat("  %10s %5.1f%% %-10s %6s %10s %10s %11s  %s [%s]\n",
                                          FormatSeconds(t.seconds), share, hlo::BoundName(t.bound),
                                          Count(op.executions), Count(op.flops),
                                          Count(op.transcendentals), Bytes(op.bytes_accessed()),
                                          op.name, op.where));
  }
  for (const std::string& note : cost.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

std::string CostReportJson(const hlo::ModuleCost& cost, const hlo::ModulePrediction& pred) {
  Json j;
  j["module"] = cost.module_name;
  j["counting"] = hlo::CostCountingName(cost.counting);
  j["flops"] = cost.totals.flops;
  j["transcendentals"] = cost.totals.transcendentals;
  j["bytes_accessed"] = cost.totals.bytes_accessed();
  j["bytes_read"] = cost.totals.bytes_read;
  j["bytes_written"] = cost.totals.bytes_written;
  j["predicted_seconds"] = pred.max_seconds;
  j["num_devices"] = pred.num_devices;
  j["topology"] = pred.topology.ToString();
  const hlo::TpuChipSpec& c = pred.chip;
  j["machine"] = {
      {"chip", c.name},
      {"bf16_flops_per_s", c.bf16_flops_per_s},
      {"f32_flops_per_s", c.f32_flops_per_s()},
      {"hbm_bytes_per_s", c.hbm_bytes_per_s},
      {"vpu_ops_per_s", c.vpu_ops_per_s},
      {"transcendentals_per_s", c.transcendentals_per_s},
      {"ici_link_bytes_per_s", c.ici_link_bytes_per_s},
      {"ici_links_per_chip", c.ici_links_per_chip},
      {"ici_hop_latency_s", c.ici_hop_latency_s},
  };
  Json groups = Json::array();
  for (const hlo::DeviceTimes& g : pred.groups) {
    groups.push_back({{"devices", g.devices},
                      {"predicted_seconds", g.seconds},
                      {"compute_seconds", g.compute_s},
                      {"memory_seconds", g.memory_s},
                      {"collective_seconds", g.collective_s}});
  }
  j["devices"] = std::move(groups);
  Json ops = Json::array();
  for (size_t i = 0; i < cost.ops.size(); ++i) {
    const hlo::OpCost& op = cost.ops[i];
    Json o;
    o["name"] = op.name;
    o["opcode"] = op.instruction ? std::string(hlo::HloOpcodeString(op.instruction->opcode())) : "";
    o["where"] = op.where;
    o["executions"] = op.executions;
    o["fused_ops"] = op.fused_ops;
    o["flops"] = op.flops;
    o["transcendentals"] = op.transcendentals;
    o["bytes_read"] = op.bytes_read;
    o["bytes_written"] = op.bytes_written;
    o["bytes_accessed"] = op.bytes_accessed();
    if (!pred.groups.empty()) {
      const hlo::OpTime& t = pred.groups[0].ops[i];
      o["compute_seconds"] = t.compute_s;
      o["memory_seconds"] = t.memory_s;
      o["collective_seconds"] = t.collective_s;
      o["predicted_seconds"] = t.seconds;
      o["bound"] = hlo::BoundName(t.bound);
    }
    ops.push_back(std::move(o));
  }
  j["instructions"] = std::move(ops);
  j["notes"] = cost.notes;
  return JsonText(j);
}

}  // namespace tpuoff::tools
