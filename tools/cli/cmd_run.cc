// `tpuoff run`: execute a module (or a generated kernel) on the host emulator
// with per-device HBM accounting; print output checksums and peak HBM, and
// optionally write the outputs as .npy and a Chrome trace.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
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
#include "tools/io/backend_run.h"
#include "tools/io/file_util.h"
#include "tools/io/host_budget.h"
#include "tools/io/input_loader.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/run_limit_flags.h"
#include "tools/cli/predicted_trace.h"
#include "tools/io/module_io.h"
#include "tools/io/output_writer.h"
#include "tools/io/partitioned_io.h"
#include "tools/io/rank_run.h"
#include "tools/io/random_inputs.h"
#include "tools/io/staged_output.h"
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
  bool overwrite = false;
  double hbm_gib = 32.0;
  int64_t threads = 0;
  RunLimitFlags limits;
  std::string input_format = "auto";
  std::string bf16_outputs = "f32";
  std::string backend = "emulator";
  std::string pjrt_plugin;
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
// `first`/`count`: only those devices' sets (a rank of a distributed run).
absl::StatusOr<std::vector<std::vector<hlo::Literal>>> MakeArguments(
    const hlo::HloModule& module, const RunFlags& f, int64_t num_devices,
    const hlo::HloComputation* params = nullptr, int64_t first = 0, int64_t count = -1) {
  std::vector<std::vector<hlo::Literal>> per_device;
  if (count < 0) count = num_devices;
  for (int64_t d = first; d < first + count; ++d) {
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
      "devices (one device, or num_partitions devices for an SPMD module), or\n"
      "with --backend=pjrt on the devices of a PJRT plugin (default: the XLA\n"
      "CPU plugin this tpuoff was built with; an SPMD module runs as is on\n"
      "num_partitions devices, XLA does not partition it again).\n"
      "Inputs: DIR/<parameter name>.npy per entry parameter, or deterministic\n"
      "random values from --seed. A partitioned module (num_partitions > 1,\n"
      "sharding= on every parameter and the root, e.g. --shard=batch,vocab)\n"
      "takes GLOBAL arrays, split per the shardings, and writes global\n"
      "outputs; other SPMD modules take DIR/deviceD/ inputs when present and\n"
      "write per-device outputs.\n"
      "Prints each output's shape, dtype and checksum, each device's peak HBM\n"
      "and the wall time. --outputs writes <name>.npy per output (bf16 as\n"
      "float32, or ml_dtypes bfloat16 with --bf16-outputs=bf16) and\n"
      "manifest.json, all or nothing, into a new or empty directory\n"
      "(--overwrite: replacing a previous output). A failed run (bad input,\n"
      "out of simulated HBM, a loop or time limit) exits 1 and writes\n"
      "nothing; the run is refused up front when the host cannot hold its\n"
      "inputs and device buffers.\n"
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
  flags.AddBool("overwrite", &f.overwrite,
                "let --outputs replace a previous tpuoff output (manifest.json and the files "
                "it lists, nothing else) instead of needing a new or empty directory");
  flags.AddString("trace", &f.trace, "write a Chrome trace JSON here (host wall time per device, and the predicted v6e "
                  "timeline of the same ops beside it; only when the run succeeds)",
                  "FILE");
  flags.AddDouble("hbm-gib", &f.hbm_gib, "HBM capacity per device in GiB");
  flags.AddInt64("threads", &f.threads, "host threads (0 = all)");
  flags.AddEnum("bf16-outputs", &f.bf16_outputs, {"f32", "bf16"},
                "write bf16 outputs as float32 (exact) or as ml_dtypes bfloat16");
  RegisterRunLimitFlags(flags, &f.limits);
  flags.AddEnum("backend", &f.backend, {"emulator", "pjrt"},
                "where to run: the host emulator or a PJRT plugin");
  flags.AddString("pjrt-plugin", &f.pjrt_plugin,
                  "PJRT plugin for --backend=pjrt (empty = the XLA CPU plugin found at "
                  "build time)",
                  "PATH");
  flags.AddEnum("input-format", &f.input_format,
                {"auto", "text", "proto", "json"},
                "format of MODULE_FILE (auto = detect)");
  RegisterKernelFlags(flags, &f.kernel);
  RegisterShardFlags(flags, &f.shard, {.with_none = true, .with_global_form = false});
  flags.SetPositionals("MODULE_FILE", 0, 1);
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (absl::Status s = CheckModuleOrKernelUsage(flags, &f.kernel, f.shard); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  const bool from_kernel = flags.WasSet("kernel");
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
  if (flags.WasSet("trace") && f.trace.empty()) {
    return ReportUsageError(kCmd, "--trace needs a file name");
  }
  if (absl::Status s = CheckRunLimitFlags(f.limits); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (f.overwrite && f.outputs.empty()) {
    return ReportUsageError(kCmd, "--overwrite only applies with --outputs=DIR");
  }
  // Where the outputs go is checked before the (maybe long) run.
  if (!f.outputs.empty()) {
    if (absl::Status s = CheckOutputDirectory(f.outputs, {.overwrite = f.overwrite}); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  const Backend backend = *ParseBackend(f.backend);
  // Under mpirun with several ranks: the emulator's devices spread over them.
  const bool distributed = runtime::Distributed();
  if (distributed) {
    for (const char* name : {"trace", "backend", "pjrt-plugin"}) {
      if (flags.WasSet(name)) {
        return ReportUsageError(kCmd, absl::StrCat("--", name, " does not apply to a run across ",
                                                   runtime::WorldSize(), " MPI ranks"));
      }
    }
  }
  if (backend != Backend::kPjrt && flags.WasSet("pjrt-plugin")) {
    return ReportUsageError(kCmd, "--pjrt-plugin needs --backend=pjrt");
  }
  if (backend == Backend::kPjrt) {
    for (const char* name : {"trace", "hbm-gib", "threads", "max-loop-iterations",
                              "collective-timeout"}) {
      if (flags.WasSet(name)) {
        return ReportUsageError(
            kCmd, absl::StrCat("--", name, " applies to the emulator, not --backend=pjrt"));
      }
    }
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

  const bool no_inputs = !flags.WasSet("inputs") && !f.random_inputs;
  if (no_inputs && params.num_parameters() > 0) {
    std::fprintf(stderr,
                 "%s: the module has parameters: give --inputs=DIR or "
                 "--random-inputs; expected parameters:\n%s",
                 std::string(kCmd).c_str(),
                 EscapeControlCharacters(ExpectedParametersText(params), "\n").c_str());
    return kExitUsage;
  }

  const int64_t num_devices = std::max<int64_t>(m.num_partitions(), 1);
  if (!f.trace.empty()) {
    // The module and every .npy the run would read (DIR and DIR/device<d>).
    std::vector<std::string> read;
    if (!from_kernel) read.push_back(flags.positionals()[0]);
    if (!f.inputs.empty()) {
      for (const std::string& file : InputFileNames(params)) {
        read.push_back(absl::StrCat(f.inputs, "/", file));
        for (int64_t d = 0; d < num_devices && !partitioned && num_devices > 1; ++d) {
          read.push_back(absl::StrCat(f.inputs, "/device", d, "/", file));
        }
      }
    }
    if (absl::Status s = CheckNotAnInput("--trace", f.trace, read); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
    // The outputs directory holds the outputs and their manifest only.
    if (!f.outputs.empty()) {
      std::error_code out_ec, trace_ec;
      const std::filesystem::path out =
          std::filesystem::absolute(f.outputs, out_ec).lexically_normal();
      const std::filesystem::path tr =
          std::filesystem::absolute(f.trace, trace_ec).lexically_normal();
      const auto [end, at] = std::mismatch(out.begin(), out.end(), tr.begin(), tr.end());
      if (!out_ec && !trace_ec &&
          (end == out.end() || (std::next(end) == out.end() && end->empty()))) {
        return ReportUsageError(kCmd, absl::StrCat("--trace=", f.trace, " is --outputs=",
                                                   f.outputs, " or inside it (that directory ",
                                                   "holds only the outputs and their manifest)"));
      }
    }
  }
  // This process's devices: all, or a rank's block of them.
  absl::StatusOr<runtime::DeviceBlock> block = LocalDevices(num_devices);
  if (!block.ok()) return ReportFailure(kCmd, block.status());
  // A rank reads only its devices' pieces of the global inputs.
  const bool local_shards = distributed && partitioned && flags.WasSet("inputs");
  // Nothing is allocated before the host is known to hold it all: inputs,
  // every device's planned buffers and the outputs' copies.
  if (absl::Status s = CheckHostMemory(
          "this run",
          RunHostNeed(m, partitioned ? &*signature : nullptr,
                      {.local_devices = block->count, .global_inputs = !local_shards,
                       .output_copies = f.outputs.empty() ? 0 : 1}));
      !s.ok()) {
    return ReportFailure(kCmd, s);
  }
  // Partitioned: one set of global arguments; else one set per device.
  // Distributed: this rank's devices' sets only (read by offset from the
  // global .npy files when partitioned; random global arrays are made
  // whole and split).
  const bool local_sets = distributed && (!partitioned || local_shards);
  absl::StatusOr<std::vector<std::vector<hlo::Literal>>> arguments =
      no_inputs ? std::vector<std::vector<hlo::Literal>>(
                      partitioned ? (local_sets ? block->count : 1)
                                  : (local_sets ? block->count : num_devices))
      : local_shards ? LoadLocalShards(*signature, params, f.inputs, *block)
      : partitioned  ? MakeArguments(m, f, 1, &params)
      : local_sets   ? MakeArguments(m, f, num_devices, nullptr, block->first, block->count)
                     : MakeArguments(m, f, num_devices);
  if (!arguments.ok()) return ReportFailureDetailed(kCmd, arguments.status());
  if (from_kernel && flags.WasSet("inputs")) {
    for (const std::vector<hlo::Literal>& set : *arguments) {
      if (absl::Status s = CheckKernelInputs(f.kernel, params, set); !s.ok()) {
        return ReportFailure(kCmd, absl::Status(s.code(), absl::StrCat("--inputs=", f.inputs,
                                                                      ": ", s.message())));
      }
    }
  }

  BackendOptions options;
  options.local_arguments = local_sets;
  options.backend = backend;
  options.pjrt_plugin = f.pjrt_plugin;
  options.emulator.num_threads = static_cast<int>(f.threads);
  options.emulator.hbm_capacity_bytes = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(f.hbm_gib * 1073741824.0)));
  ApplyRunLimits(f.limits, &options.emulator);
  options.pjrt_timeout_seconds = f.limits.timeout;
  options.emulator.record_trace = !f.trace.empty();
  options.emulator.record_allocations = false;
  absl::StatusOr<BackendResult> ran =
      RunOnBackend(m, signature, *arguments, options,
                   partitioned ? OutputNames(m, signature->global_outputs.size())
                               : std::vector<std::string>{});
  if (!ran.ok()) return ReportFailure(kCmd, ran.status());
  // Rank 0 holds every device's results and reports as one process would.
  if (runtime::WorldRank() != 0) return kExitOk;
  runtime::RunResult* result = &ran->run;

  // Name and summarise every output (per device unless reassembled).
  const int64_t output_sets = partitioned ? 1 : num_devices;
  const int64_t per_device =
      static_cast<int64_t>(result->outputs.size()) / output_sets;
  const std::vector<std::string> names = OutputNames(m, per_device);
  std::vector<NamedOutput> named;
  std::string report = absl::StrCat("module ", EscapeControlCharacters(m.name()), ": ",
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
  if (backend == Backend::kPjrt) absl::StrAppend(&report, ran->summary, "\n");
  absl::StrAppend(&report, absl::StrFormat("wall time: %.6f s\n",
                                           result->wall_seconds));

  // Files only after a successful run, staged first and published last. A
  // failure before that leaves whatever the user had untouched.
  std::optional<StagedFile> trace;
  if (!f.trace.empty()) {
    // Beside the host wall time: what a v6e slice would take for the same
    // program (the cost model on the plan the emulator ran).
    // A program the model cannot place (more devices than a v6e slice) still
    // gets its host trace.
    if (absl::Status s = AppendPredictedTimeline(m, num_devices, &result->trace); !s.ok()) {
      std::fprintf(stderr, "%s: warning: no predicted v6e track in the trace: %s\n",
                   std::string(kCmd).c_str(), OneLine(s.message()).c_str());
    }
    absl::StatusOr<StagedFile> staged = StagedFile::Create(f.trace, result->trace.ToChromeJson());
    if (!staged.ok()) return ReportFailure(kCmd, staged.status());
    trace.emplace(*std::move(staged));
  }
  std::optional<StagedDirectory> outputs;
  if (!f.outputs.empty()) {
    NpyWriteOptions npy_options;
    npy_options.bf16_as_float32 = f.bf16_outputs == "f32";
    absl::StatusOr<StagedDirectory> staged =
        StageOutputs(f.outputs, named, npy_options, {.overwrite = f.overwrite});
    if (!staged.ok()) return ReportFailure(kCmd, staged.status());
    outputs.emplace(*std::move(staged));
  }
  // What can still fail goes first: the report (a full or closed stdout),
  // then the trace (written through a device or FIFO only now), and the
  // outputs directory, one rename, last.
  if (absl::Status s = WriteToStdout(report); !s.ok()) {
    return ReportFailure(kCmd, s);
  }
  if (trace.has_value()) {
    if (absl::Status s = trace->Commit(); !s.ok()) return ReportFailure(kCmd, s);
  }
  if (outputs.has_value()) {
    if (absl::Status s = outputs->Commit(); !s.ok()) return ReportFailure(kCmd, s);
  }
  return kExitOk;
}

}  // namespace tpuoff::tools
