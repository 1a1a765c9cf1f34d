// Rendering of the static HBM analysis (hlo/analysis/memory_analysis.h) for
// `tpuoff memory`: a human-readable report and a JSON document, one section
// per group of identical devices.
#ifndef TPUOFF_TOOLS_CLI_MEMORY_REPORT_H_
#define TPUOFF_TOOLS_CLI_MEMORY_REPORT_H_

#include <cstdint>
#include <string>

#include "hlo/analysis/memory_analysis.h"

namespace tpuoff::tools {

struct MemoryReportOptions {
  int64_t hbm_capacity_bytes = int64_t{32} << 30;  // per device (v6e)
  int top = 10;  // live buffers listed per group
};

// Whether a group fits: its TPU-padded peak is within the capacity. The
// padded peak is what a v6e core needs at least (tiles are padded, and no
// allocator beats the no-fragmentation bound), so "does not fit" is certain.
bool GroupFits(const hlo::DeviceGroup& group, const MemoryReportOptions& options);
bool ReportFits(const hlo::DeviceMemoryReport& report,
                const MemoryReportOptions& options);

std::string FormatMemoryReport(const hlo::DeviceMemoryReport& report,
                               const MemoryReportOptions& options);

// {"module":..., "num_devices":..., "hbm_capacity_bytes":..., "fits":...,
//  "groups":[{"devices":[...], "count":..., "peak_bytes":..., ...,
//  "live_at_peak":[{"instruction":..., "shape":..., "dtype":..., "bytes":...,
//  "tpu_bytes":..., "kind":...}, ...]}]}
std::string MemoryReportJson(const hlo::DeviceMemoryReport& report,
                             const MemoryReportOptions& options);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_MEMORY_REPORT_H_
