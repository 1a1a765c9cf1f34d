// `tpuoff compare`: build a kernel unsharded and sharded over a mesh of
// simulated v6e devices, run both on identical global inputs, and report per
// output the max abs/rel difference and per device the HBM peak beside the
// unsharded one. Exit 0 within tolerance, 1 beyond it (naming the worst
// element), 2 on usage errors.
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
#include "tools/io/output_writer.h"
#include "tools/io/partitioned_io.h"
#include "runtime/device/process_world.h"
#include "tools/io/random_inputs.h"
#include "tools/cli/shard_flags.h"
#include "tools/cli/subcommands.h"

namespace tpuoff::tools {
namespace {

constexpr absl::string_view kCmd = "tpuoff compare";

struct CompareFlags {
  KernelFlags kernel;
  ShardFlags shard;
  ShardFlags against;  // the reference: unsharded (none) or another sharding
  int64_t seed = 0;
  std::string inputs;
  std::optional<double> atol;
  std::optional<double> rtol;
  int64_t threads = 0;
  double hbm_gib = 32.0;
  std::string perturb;  // OUTPUT:INDEX (testing)
  RunLimitFlags limits;
  std::string backends;  // "A,B": backend A vs backend B on one module
  std::string pjrt_plugin;
};

// How one output compares: tolerance |got − ref| <= atol + rtol·|ref|.
struct OutputDiff {
  double max_abs = 0;
  double max_rel = 0;  // over elements with ref != 0
  int64_t worst = -1;  // largest excess over the tolerance (or largest diff)
  double worst_excess = -std::numeric_limits<double>::infinity();
  int64_t violations = 0;
};

OutputDiff Diff(const hlo::Literal& got, const hlo::Literal& ref, double atol, double rtol) {
  OutputDiff d;
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    const double g = got.GetAsDouble(i), r = ref.GetAsDouble(i);
    double diff = std::fabs(g - r);
    if (std::isnan(g) && std::isnan(r)) diff = 0;                 // both NaN: equal
    if (std::isinf(g) && std::isinf(r) && g == r) diff = 0;       // same infinity
    if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
    const double excess = diff - (atol + rtol * std::fabs(r));
    d.max_abs = std::max(d.max_abs, diff);
    if (r != 0 && std::isfinite(r)) d.max_rel = std::max(d.max_rel, diff / std::fabs(r));
    if (excess > 0) ++d.violations;
    if (excess > d.worst_excess) {
      d.worst_excess = excess;
      d.worst = i;
    }
  }
  return d;
}

std::string MultiIndex(const hlo::Shape& shape, int64_t linear) {
  std::vector<int64_t> idx(shape.rank());
  for (int64_t i = shape.rank() - 1; i >= 0; --i) {
    idx[i] = linear % shape.dimensions(i);
    linear /= shape.dimensions(i);
  }
  return absl::StrCat("[", absl::StrJoin(idx, ","), "]");
}

std::string Bytes(int64_t b) {
  return absl::StrCat(runtime::HumanBytes(b), " (", b, " bytes)");
}

// "OUTPUT:INDEX" of --perturb.
absl::Status ParsePerturb(const std::string& text, std::string* name, int64_t* index) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(text.substr(colon + 1), index) || *index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--perturb wants OUTPUT:INDEX (a linear element index), got '", text, "'"));
  }
  *name = text.substr(0, colon);
  return absl::OkStatus();
}

}  // namespace

int CompareMain(const std::vector<std::string>& args) {
  CompareFlags f;
  f.shard.shard = "";
  f.against.mesh = "";
  FlagSet flags(
      std::string(kCmd),
      "--kernel=NAME [kernel flags] (--shard=KIND[,KIND] [--mesh=N|AxB[xC...]] "
      "[--against-shard=KIND[,KIND] --against-mesh=N|AxB[xC...]] | --backends=A,B "
      "[--shard=...]) [--seed=N | --inputs=DIR] [flags]",
      "Builds the kernel unsharded and as a shard_map over --mesh simulated v6e\n"
      "devices (--shard: what each mesh axis splits: batch, seq, vocab or none,\n"
      "e.g. --mesh=2x4 --shard=batch,vocab), runs both on identical\n"
      "global inputs (DIR/<parameter>.npy, or deterministic random ones from\n"
      "--seed), and prints per output the max abs and max relative difference\n"
      "and the worst element, and per device the peak HBM beside the\n"
      "unsharded peak. --against-shard (and --against-mesh, default --mesh) make\n"
      "the reference another sharding instead of the unsharded module, e.g.\n"
      "--mesh=2x4 --shard=batch,vocab --against-mesh=8 --against-shard=vocab.\n"
      "--backends=emulator,pjrt instead runs one module (the\n"
      "kernel, sharded by --shard when given) on the two backends and compares\n"
      "B against A (--pjrt-plugin: the PJRT plugin, default the XLA CPU plugin).\n"
      "Tolerance: |sharded - unsharded| <= atol + rtol*|unsharded|\n"
      "elementwise; defaults f32 atol 1e-5 rtol 1e-4, bf16 logits atol 2e-3\n"
      "rtol 2e-2.\n"
      "Exit codes: 0 within tolerance, 1 beyond it (or a failed run), 2 usage error.");
  RegisterKernelFlags(flags, &f.kernel);
  RegisterShardFlags(flags, &f.shard, {.with_none = true, .with_global_form = false});
  const ShardFlagOptions against_options = {
      .with_none = true, .with_global_form = false, .prefix = "against-"};
  RegisterShardFlags(flags, &f.against, against_options);
  flags.AddInt64("seed", &f.seed, "seed of the random inputs");
  flags.AddString("inputs", &f.inputs, "directory of global <parameter>.npy inputs", "DIR");
  flags.AddOptionalDouble("atol", &f.atol, "absolute tolerance (none = by logits dtype)");
  flags.AddOptionalDouble("rtol", &f.rtol, "relative tolerance (none = by logits dtype)");
  flags.AddInt64("threads", &f.threads, "host threads (0 = all)");
  flags.AddDouble("hbm-gib", &f.hbm_gib, "HBM capacity per device in GiB");
  RegisterRunLimitFlags(flags, &f.limits);
  flags.AddString("perturb", &f.perturb,
                  "testing: add 1 to element INDEX (linear) of the sharded OUTPUT "
                  "before comparing",
                  "OUTPUT:INDEX");
  flags.AddString("backends", &f.backends,
                  "compare two backends on one module instead: A,B with A, B in "
                  "{emulator, pjrt}",
                  "A,B");
  flags.AddString("pjrt-plugin", &f.pjrt_plugin,
                  "PJRT plugin of --backends (empty = the XLA CPU plugin found at build time)",
                  "PATH");
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (!flags.WasSet("kernel")) return ReportUsageError(kCmd, "--kernel=NAME is required");
  std::vector<Backend> backends;
  if (flags.WasSet("backends")) {
    for (absl::string_view name : absl::StrSplit(f.backends, ',')) {
      absl::StatusOr<Backend> b = ParseBackend(name);
      if (!b.ok()) return ReportUsageError(kCmd, absl::StrCat("--backends: ", b.status().message()));
      backends.push_back(*b);
    }
    if (backends.size() != 2) {
      return ReportUsageError(kCmd, absl::StrCat("--backends wants two backends A,B, got '",
                                                 f.backends, "'"));
    }
    if (!flags.WasSet("shard")) f.shard.shard = "none";
  } else if (flags.WasSet("pjrt-plugin")) {
    return ReportUsageError(kCmd, "--pjrt-plugin needs --backends");
  } else if (!flags.WasSet("shard")) {
    return ReportUsageError(
        kCmd, "--shard=KIND[,KIND] (batch, seq or vocab per mesh axis) is required");
  }
  if (!backends.empty() && runtime::Distributed()) {
    return ReportUsageError(kCmd, "--backends does not apply across MPI ranks (the emulator's "
                                  "sharded run spreads over them)");
  }
  if (!backends.empty() && (flags.WasSet("against-shard") || flags.WasSet("against-mesh"))) {
    return ReportUsageError(kCmd, "--against-shard/--against-mesh do not apply with --backends");
  }
  if (absl::Status s = CheckKernelFlagUsage(flags, &f.kernel); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (absl::Status s = CheckShardFlagUsage(
          flags, f.shard, f.kernel,
          {.with_none = !backends.empty(), .with_global_form = false});
      !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (flags.WasSet("against-mesh") && !flags.WasSet("against-shard")) {
    return ReportUsageError(kCmd, "--against-mesh needs --against-shard");
  }
  if (!flags.WasSet("against-mesh")) f.against.mesh = f.shard.mesh;
  if (absl::Status s = CheckShardFlagUsage(flags, f.against, f.kernel, against_options);
      !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (flags.WasSet("inputs") && flags.WasSet("seed")) {
    return ReportUsageError(kCmd, "give --inputs=DIR or --seed=N, not both");
  }
  if (flags.WasSet("inputs") && f.inputs.empty()) {
    return ReportUsageError(kCmd, "--inputs needs a directory name");
  }
  for (const auto& [name, v] : {std::pair{"atol", f.atol}, {"rtol", f.rtol}}) {
    if (v.has_value() && !(*v >= 0)) {
      return ReportUsageError(kCmd, absl::StrCat("--", name, " must be >= 0"));
    }
  }
  if (!(f.hbm_gib > 0) || f.hbm_gib > 1e6) {
    return ReportUsageError(kCmd, "--hbm-gib must be in (0, 1e6]");
  }
  if (f.threads < 0 || f.threads > 4096) {
    return ReportUsageError(kCmd, "--threads must be in [0, 4096]");
  }
  if (absl::Status s = CheckRunLimitFlags(f.limits); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  std::string perturb_name;
  int64_t perturb_index = 0;
  if (!f.perturb.empty()) {
    if (absl::Status s = ParsePerturb(f.perturb, &perturb_name, &perturb_index); !s.ok()) {
      return ReportUsageError(kCmd, s.message());
    }
  }

  // The two modules.
  ShardFlags none = f.shard;
  none.shard = "none";
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> unsharded = BuildShardedModule(f.kernel, none);
  if (!unsharded.ok()) return ReportFailure(kCmd, unsharded.status());
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> sharded = BuildShardedModule(f.kernel, f.shard);
  if (!sharded.ok()) return ReportFailure(kCmd, sharded.status());
  auto signature_of = [](const hlo::HloModule& m)
      -> absl::StatusOr<std::optional<hlo::PartitionedSignature>> {
    if (!hlo::IsPartitionedModule(m)) return std::optional<hlo::PartitionedSignature>();
    ASSIGN_OR_RETURN(hlo::PartitionedSignature s, hlo::GetPartitionedSignature(m));
    return std::optional<hlo::PartitionedSignature>(std::move(s));
  };
  absl::StatusOr<std::optional<hlo::PartitionedSignature>> sig = signature_of(**sharded);
  if (!sig.ok()) return ReportFailure(kCmd, sig.status());
  // The reference of a sharding comparison: the unsharded module, or the
  // --against-shard one.
  absl::StatusOr<kernels::ShardingSpec> against_spec = ShardingSpecFromFlags(f.against);
  if (!against_spec.ok()) return ReportFailure(kCmd, against_spec.status());
  const bool against_sharded = backends.empty() && against_spec->Sharded();
  std::unique_ptr<hlo::HloModule> against_module;
  if (against_sharded) {
    absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = BuildShardedModule(f.kernel, f.against);
    if (!m.ok()) return ReportFailure(kCmd, m.status());
    against_module = *std::move(m);
  }
  const hlo::HloModule& reference = against_sharded ? *against_module : **unsharded;
  absl::StatusOr<std::optional<hlo::PartitionedSignature>> ref_sig = signature_of(reference);
  if (!ref_sig.ok()) return ReportFailure(kCmd, ref_sig.status());

  // Identical global inputs for both.
  const hlo::HloComputation& params = *(*unsharded)->entry();
  // Both runs' memory on the host, checked before any input exists: the
  // inputs, the reference run (its outputs stay while the other one runs),
  // and every device of the sharded run with its split inputs and the
  // reassembled outputs.
  {
    const hlo::HloModule& sm = **sharded;
    const int64_t ref_devices = std::max<int64_t>(reference.num_partitions(), 1);
    HostNeed need;
    need.num_devices = std::max<int64_t>(sm.num_partitions(), 1);
    need.inputs = ParameterBytes(params);
    need.per_device = std::max<int64_t>(0, DeviceBytesBeyondArguments(sm)) +
                      ParameterBytes(*sm.entry());
    need.outputs = SaturatingBytes(ResultBytes(*(*unsharded)->entry()), 2) +
                   SaturatingBytes(std::max<int64_t>(0, DeviceBytesBeyondArguments(reference)) +
                                       (ref_devices > 1 ? ParameterBytes(*reference.entry()) : 0),
                                   ref_devices);
    if (absl::Status s = CheckHostMemory("this comparison", need); !s.ok()) {
      return ReportFailure(kCmd, s);
    }
  }
  absl::StatusOr<std::vector<hlo::Literal>> inputs;
  if (!f.inputs.empty()) {
    inputs = LoadInputsFromDirectory(params, f.inputs);
  } else {
    RandomInputOptions o;
    o.seed = static_cast<uint64_t>(f.seed);
    o.temperature = f.kernel.temperature;
    o.post_lse = f.kernel.temperature_mode == "post_lse";
    o.vocab = f.kernel.vocab;
    inputs = MakeRandomInputs(params, o);
  }
  if (!inputs.ok()) return ReportFailureDetailed(kCmd, inputs.status());
  if (!f.inputs.empty()) {
    if (absl::Status s = CheckKernelInputs(f.kernel, params, *inputs); !s.ok()) {
      return ReportFailure(kCmd, absl::Status(s.code(), absl::StrCat("--inputs=", f.inputs,
                                                                    ": ", s.message())));
    }
  }

  BackendOptions options;
  options.pjrt_plugin = f.pjrt_plugin;
  options.emulator.num_threads = static_cast<int>(f.threads);
  options.emulator.hbm_capacity_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(f.hbm_gib * 1073741824.0)));
  options.emulator.record_allocations = false;
  ApplyRunLimits(f.limits, &options.emulator);
  const std::vector<std::string> names =
      OutputNames(**unsharded, (*unsharded)->OutputNames().size());
  // Reference and candidate: unsharded vs sharded on the emulator, or one
  // module on backends A and B.
  const bool by_backend = !backends.empty();
  const std::string ref_label = by_backend        ? std::string(BackendName(backends[0]))
                                : against_sharded ? "reference"
                                                  : "unsharded";
  const std::string got_label = by_backend ? std::string(BackendName(backends[1])) : "sharded";
  std::vector<std::vector<hlo::Literal>> global_args;
  global_args.push_back(*std::move(inputs));
  options.backend = by_backend ? backends[0] : Backend::kEmulator;
  // Across MPI ranks the sharded run spreads over them; a single-device
  // reference runs on rank 0 alone.
  const bool distributed = runtime::Distributed();
  const bool ref_on_all = !by_backend && reference.num_partitions() > 1;
  absl::StatusOr<BackendResult> ref_run =
      distributed && !ref_on_all && runtime::WorldRank() != 0
          ? absl::StatusOr<BackendResult>(BackendResult())
      : by_backend ? RunOnBackend(**sharded, *sig, global_args, options, names)
                   : RunOnBackend(reference, *ref_sig, global_args, options, names);
  if (!ref_run.ok()) {
    return ReportFailure(kCmd, absl::Status(ref_run.status().code(),
                                            absl::StrCat(ref_label, " run: ",
                                                         ref_run.status().message())));
  }
  options.backend = by_backend ? backends[1] : Backend::kEmulator;
  absl::StatusOr<BackendResult> got_run =
      RunOnBackend(**sharded, *sig, global_args, options, names);
  if (!got_run.ok()) {
    return ReportFailure(kCmd, absl::Status(got_run.status().code(),
                                            absl::StrCat(got_label, " run: ",
                                                         got_run.status().message())));
  }
  global_args.clear();
  if (runtime::WorldRank() != 0) return kExitOk;  // rank 0 holds both runs' results
  runtime::RunResult* ref = &ref_run->run;
  runtime::RunResult* got = &got_run->run;
  if (got->outputs.size() != ref->outputs.size() || names.size() != ref->outputs.size()) {
    return ReportFailure(kCmd, absl::InternalError(absl::StrCat(
                                   got_label, " run returned ", got->outputs.size(),
                                   " outputs, ", ref_label, " ", ref->outputs.size())));
  }
  if (!perturb_name.empty()) {
    bool done = false;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] != perturb_name) continue;
      hlo::Literal& lit = got->outputs[i];
      if (perturb_index >= lit.num_elements()) break;
      lit.SetFromDouble(perturb_index, lit.GetAsDouble(perturb_index) + 1.0);
      done = true;
    }
    if (!done) {
      return ReportUsageError(kCmd, absl::StrCat("--perturb=", f.perturb,
                                                 ": no such output or index out of range"));
    }
  }

  // Report.
  const bool bf16 = f.kernel.logits_dtype == "bf16";
  const double atol = f.atol.value_or(bf16 ? 2e-3 : 1e-5);
  const double rtol = f.rtol.value_or(bf16 ? 2e-2 : 1e-4);
  absl::StatusOr<kernels::ShardingSpec> spec = ShardingSpecFromFlags(f.shard);
  if (!spec.ok()) return ReportFailure(kCmd, spec.status());
  const std::string blocks =
      spec->Sharded()
          ? DescribeShardBlocks(*spec, f.kernel.batch, f.kernel.seq, f.kernel.vocab)
          : std::string("unsharded");
  std::string report = absl::StrCat("compare ", f.kernel.kernel, " ", f.kernel.mode,
                                    " B=", f.kernel.batch, " T=", f.kernel.seq, " V=",
                                    f.kernel.vocab, " ", f.kernel.logits_dtype, ": ");
  if (by_backend) {
    absl::StrAppend(&report, ref_label, " vs ", got_label, " on the ",
                    spec->Sharded() ? absl::StrCat("module ", blocks) : "unsharded module");
  } else {
    absl::StrAppend(&report,
                    against_sharded
                        ? absl::StrCat("reference ", DescribeShardBlocks(*against_spec,
                                                                        f.kernel.batch,
                                                                        f.kernel.seq,
                                                                        f.kernel.vocab))
                        : std::string("unsharded"),
                    " vs ", blocks);
  }
  absl::StrAppend(&report, ", inputs: ",
                  f.inputs.empty() ? absl::StrCat("random, seed ", f.seed) : f.inputs, "\n");
  absl::StrAppend(&report,
                  absl::StrFormat("tolerance: |%s - %s| <= %g + %g * |%s|\n", got_label,
                                  ref_label, atol, rtol, ref_label));
  absl::StrAppend(&report, absl::StrFormat("%-16s %-20s %-13s %-13s %-16s %s\n", "output",
                                           "shape", "max_abs_diff", "max_rel_diff",
                                           "worst_index", "result"));
  std::vector<std::string> failures;
  for (size_t i = 0; i < names.size(); ++i) {
    const hlo::Literal& r = ref->outputs[i];
    const hlo::Literal& g = got->outputs[i];
    if (!g.shape().Compatible(r.shape())) {
      failures.push_back(absl::StrCat(names[i], ": ", got_label, " shape ",
                                      g.shape().ToString(), " vs ", ref_label, " ",
                                      r.shape().ToString()));
      continue;
    }
    const OutputDiff d = Diff(g, r, atol, rtol);
    const std::string where = d.worst >= 0 ? MultiIndex(r.shape(), d.worst) : "-";
    absl::StrAppend(&report,
                    absl::StrFormat("%-16s %-20s %-13.3e %-13.3e %-16s %s\n", names[i],
                                    r.shape().ToString(), d.max_abs, d.max_rel, where,
                                    d.violations == 0 ? "ok" : "MISMATCH"));
    if (d.violations > 0) {
      failures.push_back(absl::StrFormat(
          "%s: %d of %d elements beyond tolerance; worst %s: %s %.9g vs %s %.9g "
          "(|diff| %.3g > %.3g)",
          names[i], d.violations, r.num_elements(), where, got_label, g.GetAsDouble(d.worst),
          ref_label,
          r.GetAsDouble(d.worst), std::fabs(g.GetAsDouble(d.worst) - r.GetAsDouble(d.worst)),
          atol + rtol * std::fabs(r.GetAsDouble(d.worst))));
    }
  }
  int64_t ref_peak = 0;
  for (const runtime::DeviceReport& dev : ref->devices) {
    ref_peak = std::max(ref_peak, dev.stats.peak_bytes);
  }
  if (by_backend) {
    absl::StrAppend(&report, ref_label, " run: ", ref_run->summary, "\n", got_label,
                    " run: ", got_run->summary, "\n");
  } else {
    absl::StrAppend(&report, "peak HBM: ", ref_label, " ", Bytes(ref_peak),
                    against_sharded ? absl::StrCat(" per device (the largest of ",
                                                   ref->devices.size(), ")")
                                    : std::string(" on one device"),
                    "\n");
    auto ratio = [&](int64_t peak) {
      return ref_peak > 0 ? static_cast<double>(peak) / static_cast<double>(ref_peak) : 0.0;
    };
    if (got->devices.size() <= 16) {
      for (const runtime::DeviceReport& dev : got->devices) {
        absl::StrAppend(&report,
                        absl::StrFormat("  device %d %s: %s sharded vs %s %s (%.3fx)\n",
                                        dev.device_id, dev.name, Bytes(dev.stats.peak_bytes),
                                        runtime::HumanBytes(ref_peak), ref_label,
                                        ratio(dev.stats.peak_bytes)));
      }
    } else if (!got->devices.empty()) {
      // A pod's worth of devices: the range instead of one line each.
      const runtime::DeviceReport* lo = &got->devices[0];
      const runtime::DeviceReport* hi = &got->devices[0];
      for (const runtime::DeviceReport& dev : got->devices) {
        if (dev.stats.peak_bytes < lo->stats.peak_bytes) lo = &dev;
        if (dev.stats.peak_bytes > hi->stats.peak_bytes) hi = &dev;
      }
      absl::StrAppend(&report, absl::StrFormat(
                                   "  %d devices: sharded peak from %s (device %d) to %s "
                                   "(device %d) vs %s %s (%.3fx at most)\n",
                                   got->devices.size(), Bytes(lo->stats.peak_bytes),
                                   lo->device_id, Bytes(hi->stats.peak_bytes), hi->device_id,
                                   runtime::HumanBytes(ref_peak), ref_label,
                                   ratio(hi->stats.peak_bytes)));
    }
  }
  absl::StrAppend(&report, absl::StrFormat("wall time: %s %.3f s, %s %.3f s\n", ref_label,
                                           ref->wall_seconds, got_label, got->wall_seconds));
  if (failures.empty()) {
    absl::StrAppend(&report, "PASS: ", names.size(), " outputs within tolerance\n");
  } else {
    for (const std::string& line : failures) absl::StrAppend(&report, "FAIL: ", line, "\n");
  }
  if (absl::Status s = WriteToStdout(report); !s.ok()) return ReportFailure(kCmd, s);
  if (!failures.empty()) {
    std::fprintf(stderr, "%s: %zu of %zu outputs beyond tolerance (first: %s)\n",
                 std::string(kCmd).c_str(), failures.size(), names.size(),
                 failures[0].c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tpuoff::tools
