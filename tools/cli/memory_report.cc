#include "tools/cli/memory_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/ir/instruction.h"
#include "runtime/device/device.h"
#include "tools/io/json_text.h"

namespace tpuoff::tools {
namespace {

using hlo::AllocatedBuffer;
using hlo::DeviceGroup;
using hlo::MemoryAnalysis;
using runtime::HumanBytes;

// "0-7", "0,2,4-5".
std::string DeviceRanges(const std::vector<int64_t>& devices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < devices.size();) {
    size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(devices[i])
                           : absl::StrCat(devices[i], "-", devices[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string GroupTitle(const DeviceGroup& g) {
  if (g.devices.size() == 1) return absl::StrCat("device ", g.devices[0]);
  return absl::StrCat("devices ", DeviceRanges(g.devices), " (", g.devices.size(),
                      " identical)");
}

std::string Bytes(int64_t bytes) {
  return absl::StrCat(HumanBytes(bytes), " (", bytes, " bytes)");
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "0.0%";
  return absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) /
                                       static_cast<double>(whole));
}

std::string BufferName(const AllocatedBuffer& b) {
  std::string name = b.instruction ? absl::StrCat("%", b.instruction->name()) : "?";
  const bool in_entry = b.instruction == nullptr || b.computation == nullptr ||
                        b.computation->parent() == nullptr ||
                        b.computation->parent()->entry() == b.computation;
  if (!in_entry) absl::StrAppend(&name, " in ", b.computation->name());
  return name;
}

std::string LiveTable(const MemoryAnalysis& a, int top) {
  const std::vector<int>& live = a.peak.live;
  const int shown = std::min<int>(top, static_cast<int>(live.size()));
  std::string out = absl::StrCat("  live at the peak (", shown == static_cast<int>(live.size())
                                                             ? "all "
                                                             : absl::StrCat("top ", shown, " of "),
                                 live.size(), " buffers, largest first):\n");
  absl::StrAppend(&out, absl::StrFormat("    %10s %10s  %-9s %-26s %s\n", "bytes",
                                        "tpu-bytes", "kind", "shape", "instruction"));
  for (int i = 0; i < shown; ++i) {
    const AllocatedBuffer& b = a.buffers[live[i]];
    absl::StrAppend(&out, absl::StrFormat("    %10s %10s  %-9s %-26s %s\n",
                                          HumanBytes(b.bytes), HumanBytes(b.tpu_bytes),
                                          hlo::BufferKindName(b.kind), b.shape.ToString(),
                                          BufferName(b)));
  }
  return out;
}

}  // namespace

bool GroupFits(const DeviceGroup& group, const MemoryReportOptions& options) {
  return group.analysis.tpu_peak.bytes <= options.hbm_capacity_bytes;
}

bool ReportFits(const hlo::DeviceMemoryReport& report,
                const MemoryReportOptions& options) {
  for (const DeviceGroup& g : report.groups) {
    if (!GroupFits(g, options)) return false;
  }
  return true;
}

namespace {
// Byte counts the analysis may leave out (-1) as JSON null.
nlohmann::ordered_json BytesOrNull(int64_t bytes) {
  return bytes >= 0 ? nlohmann::ordered_json(bytes) : nlohmann::ordered_json(nullptr);
}
}  // namespace

std::string FormatMemoryReport(const hlo::DeviceMemoryReport& report,
                               const MemoryReportOptions& options) {
  const std::string cap = HumanBytes(options.hbm_capacity_bytes);
  std::string out = absl::StrCat(
      "module ", report.module_name, ": static HBM analysis, ", report.num_devices,
      report.num_devices == 1 ? " device" : " devices", " (TPU v6e, ", cap,
      " hbm each)\n");
  for (const DeviceGroup& g : report.groups) {
    const MemoryAnalysis& a = g.analysis;
    absl::StrAppend(&out, "\n", GroupTitle(g), ":\n");
    absl::StrAppend(&out, "  peak HBM            ", Bytes(a.peak.bytes), "\n");
    if (a.best_fit_bytes >= 0) {
      absl::StrAppend(&out, "  best-fit placement  ", Bytes(a.best_fit_bytes),
                      " (fragmentation ", HumanBytes(a.best_fit_bytes - a.peak.bytes),
                      ")\n");
    } else {
      absl::StrAppend(&out, "  best-fit placement  not computed (too many buffers live "
                            "together)\n");
    }
    absl::StrAppend(&out, "  at the peak         argument ", HumanBytes(a.peak.argument_bytes),
                    ", output ", HumanBytes(a.peak.output_bytes), ", temp ",
                    HumanBytes(a.peak.temp_bytes), "\n");
    absl::StrAppend(&out, "  peak time           t=", a.peak.time, " of ", a.num_times,
                    ": ", a.peak.point.where, "\n");
    absl::StrAppend(&out, "  TPU-padded peak     ", Bytes(a.tpu_peak.bytes), " (padding +",
                    HumanBytes(a.tpu_peak.bytes - a.peak.bytes), ", ",
                    Percent(a.tpu_peak.bytes - a.peak.bytes, a.peak.bytes),
                    "); best-fit ",
                    a.tpu_best_fit_bytes >= 0 ? HumanBytes(a.tpu_best_fit_bytes)
                                              : "not computed",
                    "\n");
    absl::StrAppend(&out, "  TPU-padded split    argument ",
                    HumanBytes(a.tpu_peak.argument_bytes), ", output ",
                    HumanBytes(a.tpu_peak.output_bytes), ", temp ",
                    HumanBytes(a.tpu_peak.temp_bytes), " at t=", a.tpu_peak.time, "\n");
    absl::StrAppend(&out, "  program totals      arguments ", HumanBytes(a.argument_bytes),
                    ", outputs ", HumanBytes(a.output_bytes), "\n");
    const hlo::V6eMemorySplit v6e = hlo::SplitV6eMemory(a);
    absl::StrAppend(&out, "  XLA:TPU v6e model   HBM ", Bytes(v6e.hbm_bytes), " = arguments ",
                    HumanBytes(v6e.argument_bytes), " + outputs ",
                    HumanBytes(v6e.output_bytes), " + temp ", HumanBytes(v6e.hbm_temp_bytes),
                    "; VMEM ", HumanBytes(v6e.vmem_bytes), " (", v6e.num_vmem_buffers,
                    " temporaries within the ",
                    HumanBytes(hlo::V6eMemoryOptions().msa_budget()), " MSA budget)\n");
    absl::StrAppend(&out, LiveTable(a, options.top));
    const bool fits = GroupFits(g, options);
    absl::StrAppend(&out, "  ", fits ? "fits" : "DOES NOT FIT", ": TPU-padded peak ",
                    HumanBytes(a.tpu_peak.bytes), " of ", cap, " hbm (",
                    Percent(a.tpu_peak.bytes, options.hbm_capacity_bytes), ")");
    if (fits && a.tpu_best_fit_bytes > options.hbm_capacity_bytes) {
      absl::StrAppend(&out, "; the best-fit placement needs ",
                      HumanBytes(a.tpu_best_fit_bytes), ", fragmentation may not fit");
    }
    out += "\n";
  }
  return out;
}

std::string MemoryReportJson(const hlo::DeviceMemoryReport& report,
                             const MemoryReportOptions& options) {
  using Json = nlohmann::ordered_json;
  auto name_of = [](const auto* node) { return node ? node->name() : std::string(); };
  Json groups = Json::array();
  for (const DeviceGroup& g : report.groups) {
    const MemoryAnalysis& a = g.analysis;
    const hlo::V6eMemorySplit v6e = hlo::SplitV6eMemory(a);
    Json live = Json::array();
    const int shown = std::min<int>(options.top, static_cast<int>(a.peak.live.size()));
    for (int i = 0; i < shown; ++i) {
      const AllocatedBuffer& b = a.buffers[a.peak.live[i]];
      live.push_back({{"instruction", name_of(b.instruction)},
                      {"computation", name_of(b.computation)},
                      {"shape", b.shape.ToString()},
                      {"dtype", hlo::PrimitiveTypeName(b.shape.element_type())},
                      {"dims", b.shape.dimensions()},
                      {"bytes", b.bytes},
                      {"tpu_bytes", b.tpu_bytes},
                      {"kind", hlo::BufferKindName(b.kind)},
                      {"live", {b.start, b.end}}});
    }
    groups.push_back({{"devices", g.devices},
                      {"count", g.devices.size()},
                      {"peak_bytes", a.peak.bytes},
                      {"best_fit_bytes", BytesOrNull(a.best_fit_bytes)},
                      {"argument_bytes", a.peak.argument_bytes},
                      {"output_bytes", a.peak.output_bytes},
                      {"temp_bytes", a.peak.temp_bytes},
                      {"peak_time", a.peak.time},
                      {"num_times", a.num_times},
                      {"peak_entry_step", a.peak.point.entry_step},
                      {"peak_instruction", name_of(a.peak.point.instruction)},
                      {"peak_where", a.peak.point.where},
                      {"tpu_peak_bytes", a.tpu_peak.bytes},
                      {"tpu_best_fit_bytes", BytesOrNull(a.tpu_best_fit_bytes)},
                      {"tpu_argument_bytes", a.tpu_peak.argument_bytes},
                      {"tpu_output_bytes", a.tpu_peak.output_bytes},
                      {"tpu_temp_bytes", a.tpu_peak.temp_bytes},
                      {"tpu_peak_time", a.tpu_peak.time},
                      {"padding_overhead_bytes", a.tpu_peak.bytes - a.peak.bytes},
                      {"total_argument_bytes", a.argument_bytes},
                      {"total_output_bytes", a.output_bytes},
                      {"v6e_hbm_bytes", v6e.hbm_bytes},
                      {"v6e_hbm_temp_bytes", v6e.hbm_temp_bytes},
                      {"v6e_vmem_bytes", v6e.vmem_bytes},
                      {"fits", GroupFits(g, options)},
                      {"num_live_at_peak", a.peak.live.size()},
                      {"live_at_peak", std::move(live)}});
  }
  return JsonText({{"module", report.module_name},
                   {"num_devices", report.num_devices},
                   {"hbm_capacity_bytes", options.hbm_capacity_bytes},
                   {"fits", ReportFits(report, options)},
                   {"groups", std::move(groups)}});
}

}  // namespace tpuoff::tools
