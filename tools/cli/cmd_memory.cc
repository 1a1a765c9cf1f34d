// `tpuoff memory`: the static HBM analysis of a module (or a generated
// kernel) per device, without executing it: peak bytes, best-fit placement,
// argument/output/temp split, the time of the peak, the largest buffers live
// there, the TPU-padded view, and whether it fits in HBM.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/analysis/memory_analysis.h"
#include "tools/cli/cli_util.h"
#include "tools/io/file_util.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/memory_report.h"
#include "tools/io/module_io.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"

namespace tpuoff::tools {

int MemoryMain(const std::vector<std::string>& args) {
  constexpr absl::string_view kCmd = "tpuoff memory";
  double hbm_gib = 32.0;
  int64_t top = 10;
  bool json = false;
  bool fail_if_over = false;
  std::string input_format = "auto";
  KernelFlags kernel;
  ShardFlags shard;
  FlagSet flags(
      std::string(kCmd),
      "(MODULE_FILE | --kernel=NAME [kernel flags] [--mesh=N|AxB[xC...] --shard=KIND[,KIND]]) "
      "[flags]",
      "Static HBM analysis: plans the module exactly as the emulator runs it\n"
      "(same schedule, fusion and buffer lifetimes) and reports per device,\n"
      "without executing anything: the peak bytes (equal to `tpuoff run`'s\n"
      "peak), a best-fit placement's size, the argument/output/temp split at\n"
      "the peak, the logical time and step of the peak, the largest buffers\n"
      "live there, and the same with every buffer padded to v6e tiles ((8,128)\n"
      "for 32- and 16-bit types: XLA:TPU v6e's T(8,128)(2,1) for bf16).\n"
      "Devices of an SPMD module run the same program and are reported once\n"
      "with a count; --mesh/--shard analyse a kernel's per-device program.\n"
      "Fits when the TPU-padded peak is within --hbm-gib. Loops are assumed\n"
      "to run at least once; conditionals take their largest branch.\n"
      "Exit codes: 0 ok (fits or not, unless --fail-if-over), 1 bad input or\n"
      "(with --fail-if-over) over capacity, 2 usage error.");
  flags.AddDouble("hbm-gib", &hbm_gib, "HBM capacity per device in GiB");
  flags.AddInt64("top", &top, "live buffers listed per device group");
  flags.AddBool("json", &json, "print a JSON document instead of text");
  flags.AddBool("fail-if-over", &fail_if_over,
                "exit 1 when a device's TPU-padded peak exceeds --hbm-gib");
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
  if (!(hbm_gib > 0) || hbm_gib > 1e6) {
    return ReportUsageError(kCmd,
                            absl::StrCat("--hbm-gib must be in (0, 1e6], got ", hbm_gib));
  }
  if (top < 0 || top > 1000000) {
    return ReportUsageError(kCmd, absl::StrCat("--top must be in [0, 1e6], got ", top));
  }

  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      from_kernel ? BuildShardedModule(kernel, shard)
                  : LoadModuleFile(flags.positionals()[0],
                                   *ModuleFormatFromName(input_format));
  if (!module.ok()) return ReportFailure(kCmd, module.status());
  if (!from_kernel) {
    if (absl::Status s = PrepareForExecution(module->get(), flags.positionals()[0]); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }

  absl::StatusOr<hlo::DeviceMemoryReport> report = hlo::AnalyzeDeviceMemory(**module);
  if (!report.ok()) return ReportFailure(kCmd, report.status());

  MemoryReportOptions options;
  options.hbm_capacity_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(hbm_gib * 1073741824.0)));
  options.top = static_cast<int>(top);
  const std::string text = json ? MemoryReportJson(*report, options)
                                : FormatMemoryReport(*report, options);
  if (absl::Status s = WriteToStdout(text); !s.ok()) return ReportFailure(kCmd, s);
  if (fail_if_over && !ReportFits(*report, options)) return kExitFailure;
  return kExitOk;
}

}  // namespace tpuoff::tools
