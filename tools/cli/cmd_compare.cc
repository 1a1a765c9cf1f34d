// `tpuoff compare`: build a kernel unsharded and sharded over a mesh of
// simulated v6e devices, run both on identical global inputs, and report per
// output the max abs/rel difference and per device the HBM peak beside the
// unsharded one. Exit 0 within tolerance, 1 beyond it (naming the worst
// element), 2 on usage errors.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"
#include "runtime/emulator/executor.h"
#include "tools/cli/cli_util.h"
#include "tools/io/file_util.h"
#include "tools/io/input_loader.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/output_writer.h"
#include "tools/io/partitioned_io.h"
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
      "--kernel=NAME [kernel flags] --shard=KIND[,KIND] [--mesh=N|AxB] "
      "[--seed=N | --inputs=DIR] [flags]",
      "Builds the kernel unsharded and as a shard_map over --mesh simulated v6e\n"
      "devices (--shard: what each mesh axis splits: batch, seq, vocab or none,\n"
      "e.g. --mesh=2x4 --shard=batch,vocab), runs both on identical\n"
      "global inputs (DIR/<parameter>.npy, or deterministic random ones from\n"
      "--seed), and prints per output the max abs and max relative difference\n"
      "and the worst element, and per device the peak HBM beside the\n"
      "unsharded peak. Tolerance: |sharded - unsharded| <= atol + rtol*|unsharded|\n"
      "elementwise; defaults f32 atol 1e-5 rtol 1e-4, bf16 logits atol 2e-3\n"
      "rtol 2e-2.\n"
      "--against-shard (and --against-mesh, default --mesh) make the reference\n"
      "another sharding instead of the unsharded module, e.g. --mesh=2x4\n"
      "--shard=batch,vocab --against-mesh=8 --against-shard=vocab.\n"
      "Exit codes: 0 within tolerance, 1 beyond it (or a failed run), 2 usage error.");
  RegisterKernelFlags(flags, &f.kernel);
  RegisterShardFlags(flags, &f.shard, {.with_none = false, .with_global_form = false});
  const ShardFlagOptions against_options = {
      .with_none = true, .with_global_form = false, .prefix = "against-"};
  RegisterShardFlags(flags, &f.against, against_options);
  flags.AddInt64("seed", &f.seed, "seed of the random inputs");
  flags.AddString("inputs", &f.inputs, "directory of global <parameter>.npy inputs", "DIR");
  flags.AddOptionalDouble("atol", &f.atol, "absolute tolerance (none = by logits dtype)");
  flags.AddOptionalDouble("rtol", &f.rtol, "relative tolerance (none = by logits dtype)");
  flags.AddInt64("threads", &f.threads, "host threads (0 = all)");
  flags.AddDouble("hbm-gib", &f.hbm_gib, "HBM capacity per device in GiB");
  flags.AddString("perturb", &f.perturb,
                  "testing: add 1 to element INDEX (linear) of the sharded OUTPUT "
                  "before comparing",
                  "OUTPUT:INDEX");
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (!flags.WasSet("kernel")) return ReportUsageError(kCmd, "--kernel=NAME is required");
  if (!flags.WasSet("shard")) {
    return ReportUsageError(kCmd, "--shard=KIND[,KIND] (batch, seq or vocab per mesh axis) is required");
  }
  if (absl::Status s = CheckKernelFlagUsage(flags, f.kernel); !s.ok()) {
    return ReportUsageError(kCmd, s.message());
  }
  if (absl::Status s = CheckShardFlagUsage(flags, f.shard, f.kernel,
                                           {.with_none = false, .with_global_form = false});
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
  std::string perturb_name;
  int64_t perturb_index = 0;
  if (!f.perturb.empty()) {
    if (absl::Status s = ParsePerturb(f.perturb, &perturb_name, &perturb_index); !s.ok()) {
      return ReportUsageError(kCmd, s.message());
    }
  }

  // The two modules (and the unsharded one, which names the global
  // parameters and outputs).
  ShardFlags none = f.shard;
  none.shard = "none";
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> unsharded = BuildShardedModule(f.kernel, none);
  if (!unsharded.ok()) return ReportFailure(kCmd, unsharded.status());
  absl::StatusOr<kernels::ShardingSpec> against_spec = ShardingSpecFromFlags(f.against);
  if (!against_spec.ok()) return ReportFailure(kCmd, against_spec.status());
  const bool against_sharded = against_spec->Sharded();
  std::unique_ptr<hlo::HloModule> against_module;
  if (against_sharded) {
    absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = BuildShardedModule(f.kernel, f.against);
    if (!m.ok()) return ReportFailure(kCmd, m.status());
    against_module = *std::move(m);
  }
  const hlo::HloModule& plain = **unsharded;
  const hlo::HloModule& reference = against_sharded ? *against_module : plain;
  const bool ref_partitioned = reference.num_partitions() > 1;
  absl::StatusOr<hlo::PartitionedSignature> ref_sig =
      ref_partitioned ? hlo::GetPartitionedSignature(reference)
                      : absl::StatusOr<hlo::PartitionedSignature>();
  if (ref_partitioned && !ref_sig.ok()) return ReportFailure(kCmd, ref_sig.status());
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> sharded = BuildShardedModule(f.kernel, f.shard);
  if (!sharded.ok()) return ReportFailure(kCmd, sharded.status());
  const bool partitioned = (*sharded)->num_partitions() > 1;
  absl::StatusOr<hlo::PartitionedSignature> sig =
      partitioned ? hlo::GetPartitionedSignature(**sharded)
                  : absl::StatusOr<hlo::PartitionedSignature>();
  if (partitioned && !sig.ok()) return ReportFailure(kCmd, sig.status());

  // Identical global inputs for both.
  const hlo::HloComputation& params = *plain.entry();
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

  runtime::RunOptions options;
  options.num_threads = static_cast<int>(f.threads);
  options.hbm_capacity_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(f.hbm_gib * 1073741824.0)));
  options.record_allocations = false;
  const std::vector<std::string> names =
      OutputNames(plain, plain.OutputNames().size());
  const std::string ref_label = against_sharded ? "reference" : "unsharded";
  absl::StatusOr<runtime::RunResult> ref =
      ref_partitioned ? RunPartitioned(reference, *ref_sig, *inputs, options, names)
                      : runtime::RunModule(reference, *inputs, options);
  if (!ref.ok()) {
    return ReportFailure(kCmd, absl::Status(ref.status().code(),
                                            absl::StrCat(ref_label, " run: ",
                                                         ref.status().message())));
  }
  absl::StatusOr<runtime::RunResult> got =
      partitioned ? RunPartitioned(**sharded, *sig, *inputs, options, names)
                       : runtime::RunModule(**sharded, *inputs, options);
  if (!got.ok()) {
    return ReportFailure(kCmd, absl::Status(got.status().code(),
                                            absl::StrCat("sharded run: ",
                                                         got.status().message())));
  }
  if (got->outputs.size() != ref->outputs.size() || names.size() != ref->outputs.size()) {
    return ReportFailure(kCmd, absl::InternalError(absl::StrCat(
                                   "sharded run returned ", got->outputs.size(),
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
  std::string report = absl::StrCat(
      "compare ", f.kernel.kernel, " ", f.kernel.mode, " B=", f.kernel.batch,
      " T=", f.kernel.seq, " V=", f.kernel.vocab, " ", f.kernel.logits_dtype, ": ",
      against_sharded ? absl::StrCat("reference ", DescribeShardBlocks(*against_spec,
                                                                      f.kernel.batch,
                                                                      f.kernel.seq,
                                                                      f.kernel.vocab))
                      : std::string("unsharded"),
      " vs ", DescribeShardBlocks(*spec, f.kernel.batch, f.kernel.seq, f.kernel.vocab));
  absl::StrAppend(&report, ", inputs: ",
                  f.inputs.empty() ? absl::StrCat("random, seed ", f.seed) : f.inputs, "\n");
  absl::StrAppend(&report,
                  absl::StrFormat("tolerance: |sharded - %s| <= %g + %g * |%s|\n", ref_label,
                                  atol, rtol, ref_label));
  absl::StrAppend(&report, absl::StrFormat("%-16s %-20s %-13s %-13s %-16s %s\n", "output",
                                           "shape", "max_abs_diff", "max_rel_diff",
                                           "worst_index", "result"));
  std::vector<std::string> failures;
  for (size_t i = 0; i < names.size(); ++i) {
    const hlo::Literal& r = ref->outputs[i];
    const hlo::Literal& g = got->outputs[i];
    if (!g.shape().Compatible(r.shape())) {
      failures.push_back(absl::StrCat(names[i], ": sharded shape ", g.shape().ToString(),
                                      " vs ", ref_label, " ", r.shape().ToString()));
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
          "%s: %d of %d elements beyond tolerance; worst %s: sharded %.9g vs %s %.9g "
          "(|diff| %.3g > %.3g)",
          names[i], d.violations, r.num_elements(), where, g.GetAsDouble(d.worst), ref_label,
          r.GetAsDouble(d.worst), std::fabs(g.GetAsDouble(d.worst) - r.GetAsDouble(d.worst)),
          atol + rtol * std::fabs(r.GetAsDouble(d.worst))));
    }
  }
  int64_t ref_peak = 0;
  for (const runtime::DeviceReport& dev : ref->devices) {
    ref_peak = std::max(ref_peak, dev.stats.peak_bytes);
  }
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
      absl::StrAppend(&report, absl::StrFormat("  device %d %s: %s sharded vs %s %s (%.3fx)\n",
                                               dev.device_id, dev.name,
                                               Bytes(dev.stats.peak_bytes),
                                               runtime::HumanBytes(ref_peak), ref_label,
                                               ratio(dev.stats.peak_bytes)));
    }
  } else {
    // A pod's worth of devices: the range instead of one line each.
    const runtime::DeviceReport* lo = &got->devices[0];
    const runtime::DeviceReport* hi = &got->devices[0];
    for (const runtime::DeviceReport& dev : got->devices) {
      if (dev.stats.peak_bytes < lo->stats.peak_bytes) lo = &dev;
      if (dev.stats.peak_bytes > hi->stats.peak_bytes) hi = &dev;
    }
    absl::StrAppend(&report, absl::StrFormat(
                                 "  %d devices: sharded peak from %s (device %d) to %s (device "
                                 "%d) vs %s %s (%.3fx at most)\n",
                                 got->devices.size(), Bytes(lo->stats.peak_bytes), lo->device_id,
                                 Bytes(hi->stats.peak_bytes), hi->device_id,
                                 runtime::HumanBytes(ref_peak), ref_label,
                                 ratio(hi->stats.peak_bytes)));
  }
  absl::StrAppend(&report, absl::StrFormat("wall time: %s %.3f s, sharded %.3f s\n", ref_label,
                                           ref->wall_seconds, got->wall_seconds));
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
