// `tpuoff run`: execute a module (or a generated kernel) on the host emulator
// with per-device HBM accounting; print output checksums and peak HBM, and
// optionally write the outputs as .npy and a Chrome trace.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/instruction.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/executor.h"
#include "tools/cli/cli_util.h"
#include "tools/io/file_util.h"
#include "tools/io/input_loader.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/predicted_trace.h"
#include "tools/io/module_io.h"
#include "tools/io/output_writer.h"
#include "tools/io/partitioned_io.h"
#include "tools/io/random_inputs.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"

namespace tpuoff::tools {
namespace {

constexpr absl::string_view kCmd = "tpuoff run";

struct RunFlags {
  std::string inputs;
  bool random_inputs = false;
  int64_t seed = 0;
  std::string outputs;
  std::string trace;
  double hbm_gib = 32.0;
  int64_t threads = 0;
  std::string input_format = "auto";
  std::string bf16_outputs = "f32";
  KernelFlags kernel;
  ShardFlags shard;
};

// Arguments of `params` (the entry, or the global signature of a
// partitioned module) from --inputs DIR (or DIR/device<d>/ when `device`
// >= 0 and it exists) or --random-inputs.
absl::StatusOr<std::vector<hlo::Literal>> MakeArgumentSet(const hlo::HloComputation& params,
                                                          const RunFlags& f, int64_t device) {
  if (f.random_inputs) {
    RandomInputOptions o;
    o.seed = static_cast<uint64_t>(f.seed);
    o.device = std::max<int64_t>(device, 0);
    if (!f.kernel.kernel.empty()) {
      o.temperature = f.kernel.temperature;
      o.post_lse = f.kernel.temperature_mode == "post_lse";
      o.vocab = f.kernel.vocab;
    }
    return MakeRandomInputs(params, o);
  }
  std::string dir = f.inputs;
  const std::string device_dir = absl::StrCat(f.inputs, "/device", device);
  if (device >= 0 && IsDirectory(device_dir)) dir = device_dir;
  return LoadInputsFromDirectory(params, dir);
}

// Arguments for every device: one set, or (SPMD without shardings) one per
// device. With --inputs, DIR/device<d>/ is used for device d when it
// exists, else DIR. `params`, when given, replaces the entry's parameters.
absl::StatusOr<std::vector<std::vector<hlo::Literal>>> MakeArguments(
    const hlo::HloModule& module, const RunFlags& f, int64_t num_devices,
    const hlo::HloComputation* params = nullptr) {
  std::vector<std::vector<hlo::Literal>> per_device;
  for (int64_t d = 0; d < num_devices; ++d) {
    ASSIGN_OR_RETURN(std::vector<hlo::Literal> args,
                     MakeArgumentSet(params ? *params : *module.entry(), f,
                                     num_devices > 1 ? d : -1));
    per_device.push_back(std::move(args));
  }
  return per_device;
}

}  // namespace

int RunMain(const std::vector<std::string>& args) {
  RunFlags f;
  FlagSet flags(
      std::string(kCmd),
      "(MODULE_FILE | --kernel=NAME [kernel flags]) "
      "(--inputs=DIR | --random-inputs [--seed=N]) [flags]",
      "Runs the module's entry computation on the host emulator of TPU v6e\n"
      "devices (one device, or num_partitions devices for an SPMD module).\n"
      "Inputs: DIR/<parameter name>.npy per entry parameter, or deterministic\n"
      "random values from --seed. A partitioned module (num_partitions > 1,\n"
      "sharding= on every parameter and the root, e.g. --shard=batch,vocab)\n"
      "takes GLOBAL arrays, split per the shardings, and writes global\n"
      "outputs; other SPMD modules take DIR/deviceD/ inputs when present and\n"
      "write per-device outputs.\n"
      "Prints each output's shape, dtype and checksum, each device's peak HBM\n"
      "and the wall time. --outputs writes <name>.npy per output (bf16 as\n"
      "float32, or ml_dtypes bfloat16 with --bf16-outputs=bf16) and\n"
      "manifest.json, all or nothing. Running out of simulated HBM exits 1\n"
      "and writes nothing.\n"
      "Exit codes: 0 ok, 1 failure (bad input, out of HBM), 2 usage error.");
  flags.AddString("inputs", &f.inputs, "directory of <parameter>.npy inputs",
                  "DIR");
  flags.AddBool("random-inputs", &f.random_inputs,
                "generate deterministic random inputs");
  flags.AddInt64("seed", &f.seed, "seed of --random-inputs");
  flags.AddString("outputs", &f.outputs,
                  "directory for <output>.npy + manifest.json (none = "
                  "don't write)",
                  "DIR");
  flags.AddString("trace", &f.trace, "write a Chrome trace JSON here (host wall time per device, and the predicted v6e timeline of the same ops beside it)",
                  "FILE");
  flags.AddDouble("hbm-gib", &f.hbm_gib, "HBM capacity per device in GiB");
  flags.AddInt64("threads", &f.threads, "host threads (0 = all)");
  flags.AddEnum("bf16-outputs", &f.bf16_outputs, {"f32", "bf16"},
                "write bf16 outputs as float32 (exact) or as ml_dtypes bfloat16");
  flags.AddEnum("input-format", &f.input_format,
                {"auto", "text", "proto", "json"},
                "format of MODULE_FILE (auto = detect)");
  RegisterKernelFlags(flags, &f.kernel);
  RegisterShardFlags(flags, &f.shard, {.with_none = true, .with_global_form = false});
  flags.SetPositionals("MODULE_FILE", 0, 1);
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  const bool from_kernel = flags.WasSet("kernel");
  if (absl::Status s = CheckKernelFlagUsage(flags, f.kernel); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (absl::Status s = CheckShardFlagUsage(flags, f.shard, f.kernel); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (from_kernel == !flags.positionals().empty()) {
    return ReportUsageError(
        kCmd, from_kernel ? "give either MODULE_FILE or --kernel, not both"
                          : "expected MODULE_FILE or --kernel=NAME");
  }
  if (flags.WasSet("inputs") && f.random_inputs) {
    return ReportUsageError(kCmd, "give --inputs=DIR or --random-inputs, not both");
  }
  if (flags.WasSet("seed") && !f.random_inputs) {
    return ReportUsageError(kCmd, "--seed only applies with --random-inputs");
  }
  if (!(f.hbm_gib > 0) || f.hbm_gib > 1e6) {
    return ReportUsageError(kCmd, absl::StrCat("--hbm-gib must be in (0, 1e6], got ",
                                               f.hbm_gib));
  }
  if (f.threads < 0 || f.threads > 4096) {
    return ReportUsageError(kCmd, "--threads must be in [0, 4096]");
  }
  if (flags.WasSet("outputs") && f.outputs.empty()) {
    return ReportUsageError(kCmd, "--outputs needs a directory name");
  }

  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      from_kernel ? BuildShardedModule(f.kernel, f.shard)
                  : LoadModuleFile(flags.positionals()[0],
                                   *ModuleFormatFromName(f.input_format));
  if (!module.ok()) return ReportFailure(kCmd, module.status());
  if (!from_kernel) {
    if (absl::Status s = PrepareForExecution(module->get(), flags.positionals()[0]); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  const hlo::HloModule& m = **module;

  // A partitioned module takes and returns global arrays.
  const bool partitioned = hlo::IsPartitionedModule(m);
  std::optional<hlo::PartitionedSignature> signature;
  std::unique_ptr<hlo::HloComputation> global_params;
  if (partitioned) {
    absl::StatusOr<hlo::PartitionedSignature> sig = hlo::GetPartitionedSignature(m);
    if (!sig.ok()) return ReportFailure(kCmd, sig.status());
    signature = *std::move(sig);
    global_params = GlobalParameterComputation(*signature);
  }
  const hlo::HloComputation& params = partitioned ? *global_params : *m.entry();

  if (!flags.WasSet("inputs") && !f.random_inputs && params.num_parameters() > 0) {
    std::fprintf(stderr,
                 "%s: the module has parameters: give --inputs=DIR or "
                 "--random-inputs; expected parameters:\n%s",
                 std::string(kCmd).c_str(), ExpectedParametersText(params).c_str());
    return kExitUsage;
  }

  const int64_t num_devices = std::max<int64_t>(m.num_partitions(), 1);
  // Partitioned: one set of global arguments; else one set per device.
  absl::StatusOr<std::vector<std::vector<hlo::Literal>>> arguments =
      partitioned ? MakeArguments(m, f, 1, &params) : MakeArguments(m, f, num_devices);
  if (!arguments.ok()) return ReportFailureDetailed(kCmd, arguments.status());

  runtime::RunOptions options;
  options.num_threads = static_cast<int>(f.threads);
  options.hbm_capacity_bytes = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(f.hbm_gib * 1073741824.0)));
  options.record_trace = !f.trace.empty();
  options.record_allocations = false;
  absl::StatusOr<runtime::RunResult> result =
      partitioned
          ? RunPartitioned(m, *signature, (*arguments)[0], options,
                           OutputNames(m, signature->global_outputs.size()))
          : num_devices == 1 ? runtime::RunModule(m, (*arguments)[0], options)
                             : runtime::RunSpmd(m, *arguments, options);
  if (!result.ok()) return ReportFailure(kCmd, result.status());

  // Name and summarise every output (per device unless reassembled).
  const int64_t output_sets = partitioned ? 1 : num_devices;
  const int64_t per_device =
      static_cast<int64_t>(result->outputs.size()) / output_sets;
  const std::vector<std::string> names = OutputNames(m, per_device);
  std::vector<NamedOutput> named;
  std::string report = absl::StrCat("module ", m.name(), ": ",
                                    m.entry()->num_parameters(), " parameters, ",
                                    per_device, " outputs, ", num_devices,
                                    num_devices == 1 ? " device" : " devices",
                                    partitioned ? " (global inputs and outputs)\n" : "\n");
  for (int64_t d = 0; d < output_sets; ++d) {
    for (int64_t i = 0; i < per_device; ++i) {
      const hlo::Literal& lit = result->outputs[d * per_device + i];
      NamedOutput out{output_sets == 1 ? names[i]
                                       : absl::StrCat(names[i], ".device", d),
                      &lit, output_sets == 1 ? -1 : d};
      absl::StrAppend(&report, "output ", out.name, ": ",
                      lit.shape().ToString(), " ",
                      FormatChecksum(ComputeChecksum(lit)), "\n");
      named.push_back(out);
    }
  }
  for (const runtime::DeviceReport& dev : result->devices) {
    absl::StrAppend(&report, "device ", dev.device_id, " ", dev.name,
                    ": peak HBM ", dev.stats.peak_bytes, " bytes (",
                    runtime::HumanBytes(dev.stats.peak_bytes), " of ",
                    runtime::HumanBytes(dev.hbm_capacity_bytes), ")\n");
  }
  absl::StrAppend(&report, absl::StrFormat("wall time: %.6f s\n",
                                           result->wall_seconds));

  // Files: the trace first, then the outputs; if the outputs fail the trace
  // is taken back so a failed run leaves nothing behind.
  if (!f.trace.empty()) {
    // Beside the host wall time: what a v6e slice would take for the same
    // program (the cost model on the plan the emulator ran).
    // A program the model cannot place (more devices than a v6e slice) still
    // gets its host trace.
    if (absl::Status s = AppendPredictedTimeline(m, num_devices, &result->trace); !s.ok()) {
      std::fprintf(stderr, "%s: warning: no predicted v6e track in the trace: %s\n",
                   std::string(kCmd).c_str(), OneLine(s.message()).c_str());
    }
    if (absl::Status s = WriteFileAtomically(f.trace, result->trace.ToChromeJson());
        !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  if (!f.outputs.empty()) {
    NpyWriteOptions npy_options;
    npy_options.bf16_as_float32 = f.bf16_outputs == "f32";
    if (absl::Status s = WriteOutputs(f.outputs, named, npy_options); !s.ok()) {
      if (!f.trace.empty() && f.trace != "-") std::remove(f.trace.c_str());
      return ReportFailure(kCmd, s);
    }
  }
  if (absl::Status s = WriteToStdout(report); !s.ok()) {
    return ReportFailure(kCmd, s);
  }
  return kExitOk;
}

}  // namespace tpuoff::tools
