// `tpuoff compile`: compile-only for a TPU topology through a PJRT plugin
// (libtpu, no TPU needed) and print XLA:TPU's per-device memory beside
// tpuoff's static analysis of the same module.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/analysis/memory_analysis.h"
#include "hlo/analysis/v6e_memory_spaces.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_printer.h"
#include "nlohmann/json.hpp"
#include "runtime/device/device.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"
#include "tools/io/file_util.h"
#include "tools/io/module_io.h"
#include "tools/io/staged_output.h"

namespace tpuoff::tools {
namespace {

constexpr absl::string_view kCmd = "tpuoff compile";
constexpr absl::string_view kTargetPrefix = "tpu-";

std::string Bytes(int64_t b) {
  return absl::StrCat(runtime::HumanBytes(b), " (", b, ")");
}

// The optimised module for --dump-optimized: FILE.pb gets the serialized
// HloModuleProto, any other name HLO text (needs tpuoff's proto importer to
// know every opcode in it).
absl::StatusOr<std::string> OptimizedDump(const std::string& path, const std::string& proto) {
  if (absl::EndsWith(path, ".pb")) return proto;
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = hlo::ModuleFromProtoBytes(proto);
  if (!m.ok()) {
    return absl::Status(
        m.status().code(),
        absl::StrCat("--dump-optimized=", path, ": cannot print XLA's optimised module as "
                     "text (", m.status().message(), "); name the file *.pb to write its "
                     "binary HloModuleProto"));
  }
  return hlo::PrintModule(**m);
}

}  // namespace

int CompileMain(const std::vector<std::string>& args) {
  std::string target = "tpu-v6e:2x4";
  std::string plugin;
  std::string dump_optimized;
  std::string input_format = "auto";
  bool json = false;
  KernelFlags kernel;
  ShardFlags shard;
  FlagSet flags(
      std::string(kCmd),
      "(MODULE_FILE | --kernel=NAME [kernel flags] [--mesh=N --shard=batch|vocab]) "
      "[--target=tpu-v6e:2x4] [--pjrt-plugin=PATH/libtpu.so] [flags]",
      "Compiles the module for a TPU topology without a TPU (libtpu's PJRT\n"
      "compile-only path; libtpu never contacts a metadata server) and prints\n"
      "XLA:TPU's per-device memory (argument, output, alias, temp, generated\n"
      "code, peak) beside tpuoff's static analysis of the same module (the\n"
      "`tpuoff memory` peak, plain and TPU-padded). A per-device SPMD module\n"
      "(--mesh/--shard) is compiled as is for num_partitions devices.\n"
      "--json prints {\"xla_tpu\": {\"peak_bytes\", \"argument_bytes\",\n"
      "\"output_bytes\", \"alias_bytes\", \"temp_bytes\", \"generated_code_bytes\"},\n"
      "\"tpuoff\": {\"peak_bytes\", \"tpu_peak_bytes\"}, ...}. XLA:TPU's peak counts its\n"
      "on-chip VMEM buffers too; its HBM allocations are argument + output +\n"
      "temp - alias (printed as \"HBM allocated\").\n"
      "--dump-optimized=FILE writes XLA:TPU's optimised module (HLO text, or\n"
      "the binary HloModuleProto when FILE ends in .pb).\n"
      "Exit codes: 0 ok, 1 failure (bad module, plugin or compile error), 2 usage error.");
  flags.AddString("target", &target,
                  "tpu-<topology> as the plugin names it: tpu-v6e:1x1, tpu-v6e:2x4 (v6e-8), "
                  "tpu-v6e:4x4, tpu-v6e:16x16, ...",
                  "TARGET");
  flags.AddString("pjrt-plugin", &plugin,
                  "libtpu.so to compile with (empty = the one found at build time)", "PATH");
  flags.AddBool("json", &json, "print a JSON document instead of text");
  flags.AddString("dump-optimized", &dump_optimized,
                  "write XLA:TPU's optimised module here (text; *.pb: binary proto)", "FILE");
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
  if (!absl::StartsWith(target, kTargetPrefix) || target.size() == kTargetPrefix.size()) {
    return ReportUsageError(kCmd, absl::StrCat("--target wants tpu-<topology> (e.g. "
                                               "tpu-v6e:2x4), got '", target, "'"));
  }
  if (absl::Status s = runtime::pjrt::CheckTopologyName(target.substr(kTargetPrefix.size()));
      !s.ok()) {
    return ReportUsageError(kCmd, absl::StrCat("--target=", target, ": ", s.message()));
  }
  if (flags.WasSet("dump-optimized") && dump_optimized.empty()) {
    return ReportUsageError(kCmd, "--dump-optimized needs a file name");
  }
  if (!runtime::pjrt::Available()) {
    return ReportFailure(kCmd, runtime::pjrt::LoadPlugin("").status());
  }
  if (plugin.empty() && runtime::pjrt::DefaultTpuPluginPath().empty()) {
    return ReportUsageError(kCmd, "no libtpu known to this build: give --pjrt-plugin=PATH");
  }

  if (!from_kernel) {
    if (absl::Status s =
            CheckNotAnInput("--dump-optimized", dump_optimized, {flags.positionals()[0]});
        !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      from_kernel ? BuildShardedModule(kernel, shard)
                  : LoadModuleFile(flags.positionals()[0], *ModuleFormatFromName(input_format));
  if (!module.ok()) return ReportFailure(kCmd, module.status());
  const hlo::HloModule& m = **module;

  absl::StatusOr<hlo::DeviceMemoryReport> ours = hlo::AnalyzeDeviceMemory(m);
  if (!ours.ok()) return ReportFailure(kCmd, ours.status());
  const hlo::MemoryAnalysis* analysis = nullptr;
  for (const hlo::DeviceGroup& g : ours->groups) {
    if (analysis == nullptr || g.analysis.peak.bytes > analysis->peak.bytes) {
      analysis = &g.analysis;
    }
  }

  runtime::pjrt::TopologyCompileOptions options;
  options.plugin_path = plugin;
  options.topology = target.substr(kTargetPrefix.size());
  options.want_optimized_module = !dump_optimized.empty();
  absl::StatusOr<runtime::pjrt::TopologyCompileResult> xla =
      runtime::pjrt::CompileForTopology(m, options);
  if (!xla.ok()) return ReportFailure(kCmd, xla.status());
  const runtime::pjrt::CompiledMemoryStats& st = xla->stats;
  const int64_t n = std::max<int64_t>(m.num_partitions(), 1);

  if (!dump_optimized.empty()) {
    absl::StatusOr<std::string> dump = OptimizedDump(dump_optimized, xla->optimized_module_proto);
    if (!dump.ok()) return ReportFailure(kCmd, dump.status());
    if (absl::Status s = WriteFileAtomically(dump_optimized, *dump); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }

  // XLA:TPU's peak counts on-chip VMEM buffers (memory space S(1)) as well
  // as HBM; its HBM allocations alone are arguments + outputs + temp - alias.
  const int64_t xla_hbm = st.argument_bytes + st.output_bytes + st.temp_bytes - st.alias_bytes;
  auto rel = [&](int64_t xla_bytes) {
    return xla_bytes > 0
               ? 100.0 * (static_cast<double>(analysis->tpu_peak.bytes) / xla_bytes - 1.0)
               : 0.0;
  };
  // tpuoff's model of XLA:TPU's HBM/VMEM placement (v6e_memory_spaces.h):
  // the HBM XLA allocates, counted as XLA counts it.
  const hlo::V6eMemorySplit v6e = hlo::SplitV6eMemory(*analysis);
  const double v6e_rel =
      xla_hbm > 0 ? 100.0 * (static_cast<double>(v6e.hbm_bytes) / xla_hbm - 1.0) : 0.0;
  std::string out;
  if (json) {
    nlohmann::ordered_json j;
    j["module"] = m.name();
    j["target"] = target;
    j["num_partitions"] = n;
    j["xla_tpu"] = {{"peak_bytes", st.peak_bytes},
                    {"argument_bytes", st.argument_bytes},
                    {"output_bytes", st.output_bytes},
                    {"alias_bytes", st.alias_bytes},
                    {"temp_bytes", st.temp_bytes},
                    {"generated_code_bytes", st.generated_code_bytes}};
    j["tpuoff"] = {{"peak_bytes", analysis->peak.bytes},
                   {"tpu_peak_bytes", analysis->tpu_peak.bytes},
                   {"v6e_hbm_bytes", v6e.hbm_bytes},
                   {"v6e_hbm_temp_bytes", v6e.hbm_temp_bytes},
                   {"v6e_vmem_bytes", v6e.vmem_bytes}};
    out = j.dump(2) + "\n";
  } else {
    out = absl::StrFormat(
        "module %s: compiled for %s (%d devices, platform %s) with %s (PJRT API %d.%d) in "
        "%.2f s; %d %s\n",
        m.name(), target, xla->topology_devices, xla->platform, xla->plugin.path,
        xla->plugin.api_major, xla->plugin.api_minor, xla->compile_seconds, n,
        n == 1 ? "partition" : "partitions (per-device SPMD program)");
    absl::StrAppend(&out, absl::StrFormat("%-16s %-30s %s\n", "per device", "XLA:TPU",
                                          "tpuoff static (at its TPU-padded peak)"));
    auto row = [&](const char* what, int64_t x, const std::string& t) {
      absl::StrAppend(&out, absl::StrFormat("  %-14s %-30s %s\n", what, Bytes(x), t));
    };
    row("argument", st.argument_bytes, Bytes(analysis->tpu_peak.argument_bytes));
    row("output", st.output_bytes, Bytes(analysis->tpu_peak.output_bytes));
    row("alias", st.alias_bytes, "-");
    row("temp", st.temp_bytes, Bytes(analysis->tpu_peak.temp_bytes));
    row("generated code", st.generated_code_bytes, "-");
    row("peak", st.peak_bytes,
        absl::StrCat(Bytes(analysis->tpu_peak.bytes), "; plain ", Bytes(analysis->peak.bytes)));
    row("HBM allocated", xla_hbm, "(argument + output + temp - alias; the peak adds VMEM)");
    absl::StrAppend(&out, absl::StrFormat(
                              "tpuoff TPU-padded peak vs XLA:TPU: %+.3f%% of its HBM, %+.3f%% "
                              "of its peak\n",
                              rel(xla_hbm), rel(st.peak_bytes)));
    absl::StrAppend(
        &out,
        absl::StrFormat("tpuoff v6e model (temporaries in VMEM while they fit its %s MSA "
                        "budget): HBM %s = argument %s + output %s + HBM temp %s; VMEM %s "
                        "(%d buffers); vs XLA:TPU's HBM %+.3f%%\n",
                        runtime::HumanBytes(hlo::V6eMemoryOptions().msa_budget()),
                        Bytes(v6e.hbm_bytes), runtime::HumanBytes(v6e.argument_bytes),
                        runtime::HumanBytes(v6e.output_bytes),
                        runtime::HumanBytes(v6e.hbm_temp_bytes),
                        runtime::HumanBytes(v6e.vmem_bytes), v6e.num_vmem_buffers, v6e_rel));
  }
  if (absl::Status s = WriteToStdout(out); !s.ok()) return ReportFailure(kCmd, s);
  return kExitOk;
}

}  // namespace tpuoff::tools
