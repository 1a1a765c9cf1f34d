// Rendering of the static cost analysis and v6e prediction
// (hlo/analysis/cost_analysis.h, hlo/analysis/tpu_model.h) for `tpuoff cost`:
// a human-readable report and a JSON document.
#ifndef TPUOFF_TOOLS_CLI_COST_REPORT_H_
#define TPUOFF_TOOLS_CLI_COST_REPORT_H_

#include <string>

#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/tpu_model.h"

namespace tpuoff::tools {

struct CostReportOptions {
  int top = 10;  // ops listed by predicted time
};

std::string FormatCostReport(const hlo::ModuleCost& cost, const hlo::ModulePrediction& prediction,
                             const CostReportOptions& options);

// {"module", "counting", "flops", "transcendentals", "bytes_accessed",
//  "bytes_read", "bytes_written", "predicted_seconds" (the slowest device),
//  "num_devices", "topology", "machine": {...figures...},
//  "devices": [{"devices": [...], "predicted_seconds", "compute_seconds",
//  "memory_seconds", "collective_seconds"}],
//  "instructions": [{"name", "opcode", "where", "executions", "fused_ops",
//  "flops", "transcendentals", "bytes_read", "bytes_written", "bytes_accessed",
//  "compute_seconds", "memory_seconds", "collective_seconds",
//  "predicted_seconds", "bound"} per op, schedule order, times of device 0's
//  group], "notes": [...]}. Per-op costs are per execution; times include
// executions.
std::string CostReportJson(const hlo::ModuleCost& cost, const hlo::ModulePrediction& prediction);

// The v6e slice `module` runs on (the smallest holding `num_devices` chips),
// its partitions placed on chips as jax's create_device_mesh places the
// module's mesh (hlo::V6eChipOrder of its `mesh_shape` attribute, or of a 1-D
// mesh): ring neighbours on the tray are ICI neighbours.
absl::StatusOr<hlo::IciTopology> V6eTopologyForModule(const hlo::HloModule& module,
                                                      int64_t num_devices);

// "1.23 ms", "456 us", "7.8 s".
std::string FormatSeconds(double seconds);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_COST_REPORT_H_
