// `tpuoff cost`: the static cost of a module (or a generated kernel) and its
// predicted time on TPU v6e, without executing it: flops, transcendentals,
// bytes read and written per device, the top ops by predicted time with what
// bounds each (compute, memory, collective), and the step time per device.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/analysis/cost_analysis.h"
#include "hlo/analysis/tpu_model.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/cost_report.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"
#include "tools/io/file_util.h"
#include "tools/io/module_io.h"

namespace tpuoff::tools {

int CostMain(const std::vector<std::string>& args) {
  constexpr absl::string_view kCmd = "tpuoff cost";
  std::string counting = "fused";
  std::string topology;
  int64_t top = 10;
  bool json = false;
  std::string input_format = "auto";
  KernelFlags kernel;
  ShardFlags shard;
  FlagSet flags(
      std::string(kCmd),
      "(MODULE_FILE | --kernel=NAME [kernel flags] [--mesh=N --shard=batch|vocab]) [flags]",
      "Static cost and predicted TPU v6e time, without executing anything.\n"
      "Counts per op flops, transcendentals and bytes read/written (loop bodies\n"
      "times their trip counts when known) and predicts each op's time as\n"
      "max(compute, memory) + collective time on a v6e slice: 918 TFLOP/s bf16\n"
      "(f32 matmuls as bf16 passes: 1 at DEFAULT precision, 6 at HIGHEST),\n"
      "1.64 TB/s HBM, ICI 90 GB/s one way per link (collectives costed by\n"
      "algorithm on the slice topology: 2x4 without wraparound for v6e-8,\n"
      "16x16 torus for 256 chips).\n"
      "--counting=fused (default) counts what the emulator's fusion plan moves;\n"
      "--counting=xla counts exactly as XLA's HloCostAnalysis (jaxlib's\n"
      "cost_analysis() of the same module: no fusion, a loop body once).\n"
      "Exit codes: 0 ok, 1 bad input, 2 usage error.");
  flags.AddEnum("counting", &counting, {"fused", "xla"},
                "fused = what the emulator's plan moves; xla = XLA's HloCostAnalysis");
  flags.AddString("topology", &topology,
                  "ICI topology AxB[:torus|:mesh] (default: the smallest v6e slice holding "
                  "the module's devices)",
                  "AxB");
  flags.AddInt64("top", &top, "ops listed by predicted time");
  flags.AddBool("json", &json, "print a JSON document instead of text");
  flags.AddEnum("input-format", &input_format, {"auto", "text", "proto", "json"},
                "format of MODULE_FILE (auto = detect)");
  RegisterKernelFlags(flags, &kernel);
  RegisterShardFlags(flags, &shard, {.with_none = true, .with_global_form = false});
  flags.SetPositionals("MODULE_FILE", 0, 1);
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (absl::Status s = CheckModuleOrKernelUsage(flags, &kernel, shard); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  const bool from_kernel = flags.WasSet("kernel");
  if (top < 0 || top > 1000000) {
    return ReportUsageError(kCmd, absl::StrCat("--top must be in [0, 1e6], got ", top));
  }
  std::optional<hlo::IciTopology> topo;
  if (flags.WasSet("topology")) {
    absl::StatusOr<hlo::IciTopology> t = hlo::IciTopology::Parse(topology);
    if (!t.ok()) return ReportUsageError(kCmd, absl::StrCat("--topology: ", t.status().message()));
    topo = *std::move(t);
  }

  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      from_kernel ? BuildShardedModule(kernel, shard)
                  : LoadModuleFile(flags.positionals()[0], *ModuleFormatFromName(input_format));
  if (!module.ok()) return ReportFailure(kCmd, module.status());
  hlo::CostOptions options;
  options.counting = counting == "xla" ? hlo::CostCounting::kXla : hlo::CostCounting::kFused;
  // XLA counts the module as given; the fused count plans it as `run` does.
  if (!from_kernel && options.counting == hlo::CostCounting::kFused) {
    if (absl::Status s = PrepareForExecution(module->get(), flags.positionals()[0]); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  absl::StatusOr<hlo::ModuleCost> cost = hlo::AnalyzeCost(**module, options);
  if (!cost.ok()) return ReportFailure(kCmd, cost.status());
  const int64_t devices = hlo::ModuleDeviceCount(**module);
  if (!topo) {
    absl::StatusOr<hlo::IciTopology> t = V6eTopologyForModule(**module, devices);
    if (!t.ok()) return ReportFailure(kCmd, t.status());
    topo = *std::move(t);
  }
  absl::StatusOr<hlo::ModulePrediction> prediction = hlo::PredictModule(*cost, devices, *topo);
  if (!prediction.ok()) return ReportFailure(kCmd, prediction.status());
  CostReportOptions report;
  report.top = static_cast<int>(top);
  const std::string text = json ? CostReportJson(*cost, *prediction)
                                : FormatCostReport(*cost, *prediction, report);
  if (absl::Status s = WriteToStdout(text); !s.ok()) return ReportFailure(kCmd, s);
  return kExitOk;
}

}  // namespace tpuoff::tools
