// `tpuoff dump`: read a module (or generate a GRPO/entropy kernel), verify it
// and write it as HLO text, binary HloModuleProto or proto JSON.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "tools/cli/cli_util.h"
#include "tools/io/file_util.h"
#include "tools/io/staged_output.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/module_io.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"

namespace tpuoff::tools {

int DumpMain(const std::vector<std::string>& args) {
  constexpr absl::string_view kCmd = "tpuoff dump";
  std::string format = "text";
  std::string input_format = "auto";
  std::string out;
  KernelFlags kernel;
  ShardFlags shard;
  FlagSet flags(
      std::string(kCmd), "(MODULE_FILE | --kernel=NAME [kernel flags]) [flags]",
      "Reads MODULE_FILE (HLO text, binary HloModuleProto or proto JSON; the\n"
      "format is detected; '-' reads stdin) or generates a kernel module from\n"
      "the kernel flags, verifies it, and writes it in --format.\n"
      "--mesh=N|AxB[xC...] --shard=KIND[,KIND] (batch, seq, vocab or none per mesh\n"
      "axis, e.g. --mesh=2x4 --shard=batch,vocab) emit the kernel as the\n"
      "per-device SPMD module of a shard_map over the mesh (num_partitions =\n"
      "devices, sharding= on parameters and root, collectives with the replica\n"
      "groups of their axes); --global-form emits JAX's\n"
      "global program for it instead.\n"
      "Without --out, text and json go to stdout; binary proto is written to\n"
      "stdout only with an explicit --out=- (it would garble a terminal).\n"
      "Files are written atomically: on any error nothing is left behind.\n"
      "Exit codes: 0 ok, 1 bad input or write failure, 2 usage error.");
  flags.AddEnum("format", &format, {"text", "proto", "json"},
                "output format");
  flags.AddString("out", &out, "output file ('-' = stdout; empty = stdout "
                               "for text/json)",
                  "FILE");
  flags.AddEnum("input-format", &input_format,
                {"auto", "text", "proto", "json"},
                "format of MODULE_FILE (auto = detect)");
  RegisterKernelFlags(flags, &kernel);
  RegisterShardFlags(flags, &shard);
  flags.SetPositionals("MODULE_FILE", 0, 1);
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (absl::Status s = CheckModuleOrKernelUsage(flags, &kernel, shard); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  const bool from_kernel = flags.WasSet("kernel");
  const ModuleFormat out_format = *ModuleFormatFromName(format);
  if (out_format == ModuleFormat::kProto && out.empty()) {
    return ReportUsageError(kCmd,
                            "--format=proto writes binary data: give --out=FILE "
                            "(or --out=- to force stdout)");
  }

  if (!from_kernel) {
    if (absl::Status s = CheckNotAnInput("--out", out, {flags.positionals()[0]}); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      from_kernel ? BuildShardedModule(kernel, shard)
                  : LoadModuleFile(flags.positionals()[0],
                                   *ModuleFormatFromName(input_format));
  if (!module.ok()) return ReportFailure(kCmd, module.status());

  absl::StatusOr<std::string> bytes = SerializeModule(**module, out_format);
  if (!bytes.ok()) return ReportFailure(kCmd, bytes.status());
  const absl::Status written = out.empty() || out == "-"
                                   ? WriteToStdout(*bytes)
                                   : WriteFileAtomically(out, *bytes);
  if (!written.ok()) return ReportFailure(kCmd, written);
  return kExitOk;
}

}  // namespace tpuoff::tools
