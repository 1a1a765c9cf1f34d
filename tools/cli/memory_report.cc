#include "tools/cli/memory_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/instruction.h"
#include "runtime/device/device.h"

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

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
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
std::string JsonBytesOrNull(int64_t bytes) {
  return bytes >= 0 ? absl::StrCat(bytes) : "null";
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
  std::string out = absl::StrCat(
      "{\"module\":", JsonString(report.module_name), ",\"num_devices\":",
      report.num_devices, ",\"hbm_capacity_bytes\":", options.hbm_capacity_bytes,
      ",\"fits\":", ReportFits(report, options) ? "true" : "false", ",\"groups\":[");
  for (size_t gi = 0; gi < report.groups.size(); ++gi) {
    const DeviceGroup& g = report.groups[gi];
    const MemoryAnalysis& a = g.analysis;
    absl::StrAppend(
        &out, gi ? "," : "", "{\"devices\":[", absl::StrJoin(g.devices, ","),
        "],\"count\":", g.devices.size(), ",\"peak_bytes\":", a.peak.bytes,
        ",\"best_fit_bytes\":", JsonBytesOrNull(a.best_fit_bytes),
        ",\"argument_bytes\":", a.peak.argument_bytes,
        ",\"output_bytes\":", a.peak.output_bytes, ",\"temp_bytes\":", a.peak.temp_bytes,
        ",\"peak_time\":", a.peak.time, ",\"num_times\":", a.num_times,
        ",\"peak_entry_step\":", a.peak.point.entry_step, ",\"peak_instruction\":",
        JsonString(a.peak.point.instruction ? a.peak.point.instruction->name() : ""),
        ",\"peak_where\":", JsonString(a.peak.point.where),
        ",\"tpu_peak_bytes\":", a.tpu_peak.bytes,
        ",\"tpu_best_fit_bytes\":", JsonBytesOrNull(a.tpu_best_fit_bytes),
        ",\"tpu_argument_bytes\":", a.tpu_peak.argument_bytes,
        ",\"tpu_output_bytes\":", a.tpu_peak.output_bytes,
        ",\"tpu_temp_bytes\":", a.tpu_peak.temp_bytes,
        ",\"tpu_peak_time\":", a.tpu_peak.time,
        ",\"padding_overhead_bytes\":", a.tpu_peak.bytes - a.peak.bytes,
        ",\"total_argument_bytes\":", a.argument_bytes,
        ",\"total_output_bytes\":", a.output_bytes,
        ",\"fits\":", GroupFits(g, options) ? "true" : "false",
        ",\"num_live_at_peak\":", a.peak.live.size(), ",\"live_at_peak\":[");
    const int shown = std::min<int>(options.top, static_cast<int>(a.peak.live.size()));
    for (int i = 0; i < shown; ++i) {
      const AllocatedBuffer& b = a.buffers[a.peak.live[i]];
      absl::StrAppend(
          &out, i ? "," : "", "{\"instruction\":",
          JsonString(b.instruction ? b.instruction->name() : ""),
          ",\"computation\":", JsonString(b.computation ? b.computation->name() : ""),
          ",\"shape\":", JsonString(b.shape.ToString()), ",\"dtype\":",
          JsonString(hlo::PrimitiveTypeName(b.shape.element_type())),
          ",\"dims\":[", absl::StrJoin(b.shape.dimensions(), ","), "],\"bytes\":",
          b.bytes, ",\"tpu_bytes\":", b.tpu_bytes, ",\"kind\":",
          JsonString(hlo::BufferKindName(b.kind)), ",\"live\":[", b.start, ",", b.end,
          "]}");
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace tpuoff::tools
