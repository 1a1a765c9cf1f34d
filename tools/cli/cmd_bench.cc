// `tpuoff bench`: the emulator against XLA:CPU and the physical references,
// in one run. See bench_cases.h for what is measured and bench_floor.h for
// the references.
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "hlo/spmd/shard_map.h"
#include "runtime/device/device.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "runtime/emulator/gemm.h"
#include "tools/cli/bench_cases.h"
#include "tools/cli/bench_cold.h"
#include "tools/cli/bench_corpus.h"
#include "tools/cli/bench_floor.h"
#include "tools/cli/bench_floor_rows.h"
#include "tools/cli/cli_util.h"
#include "tools/io/file_util.h"
#include "tools/io/json_text.h"
#include "tools/io/host_budget.h"
#include "tools/io/staged_output.h"
#include "tools/cli/subcommands.h"

namespace tpuoff::tools {
namespace {

constexpr absl::string_view kCmd = "tpuoff bench";
const char* const kAllCases[] = {"grpo_tiled", "grpo_reference", "entropy_tiled",
                                 "grpo_tiled_vocab", "grpo_fused_linear",
                                 "grpo_fused_linear_dlogits_bf16"};
// Cases that exist only in one dtype (skipped for the others).
bool CaseHasDtype(const std::string& id, const std::string& dtype) {
  return id != "grpo_fused_linear_dlogits_bf16" || dtype == "bf16";
}
bool IsFusedCase(const std::string& id) { return absl::StartsWith(id, "grpo_fused_linear"); }

struct BenchFlags {
  bool quick = false;
  int64_t reps = 3;
  int64_t warmup = 1;
  int64_t batch = 1;
  int64_t seq = 4096;
  int64_t vocab = 151936;
  int64_t block_size = 2048;
  int64_t mesh = 8;
  int64_t threads = 0;
  std::string dtypes = "bf16,f32";
  std::string cases =
      "grpo_tiled,grpo_reference,entropy_tiled,grpo_tiled_vocab,grpo_fused_linear,"
      "grpo_fused_linear_dlogits_bf16";
  // grpo_fused_linear: its own T (four [T,H]x[H,V] matmuls per run: at the
  // seed T=4096 one run takes minutes on two cores) and H.
  int64_t fused_seq = 512;
  int64_t hidden = 1536;
  std::string xla_python;
  std::string xla_script;
  bool no_jax = false;
  bool no_floor = false;
  bool no_pjrt = false;
  bool no_cold = false;
  std::string pjrt_plugin;
  std::string json;
  std::string corpus;
  std::string work_dir;
  bool keep_work = false;
  int64_t bandwidth_mib = 1024;
};

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string LoadAverage() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "n/a";
  return absl::StrFormat("%.2f %.2f %.2f", l[0], l[1], l[2]);
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// tools/xla_check/bench_xla.py next to the build directory holding this
// binary (build-*/tpuoff -> ../tools/xla_check), or "" when not found.
std::string DefaultXlaScript() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (std::filesystem::path dir = exe.parent_path(); !dir.empty() && dir != dir.parent_path();
       dir = dir.parent_path()) {
    const std::filesystem::path p = dir / "tools" / "xla_check" / "bench_xla.py";
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "";
}

std::string SecondsText(double s) {
  if (s >= 10) return absl::StrFormat("%.1f s", s);
  if (s >= 0.1) return absl::StrFormat("%.3f s", s);
  return absl::StrFormat("%.3g ms", s * 1e3);
}

std::string Seconds(const Timing& t) {
  if (!t.error.empty()) return "error";
  if (!t.median) return "-";
  return SecondsText(*t.median);
}

std::string Ratio(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b || *b <= 0) return "-";
  return absl::StrFormat("%.2f", *a / *b);
}

std::string Gib(int64_t bytes) { return runtime::HumanBytes(bytes); }

// This binary, for the cold runs.
std::string SelfExe() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : exe.string();
}

// The matrix products' rates of the cases that have any, and the bf16/f32
// ratio of a case measured in both dtypes.
std::string GemmLines(const std::vector<CaseResult>& results) {
  std::string out;
  auto rate = [](double flops, double seconds) {
    return seconds > 0 ? flops / seconds * 1e-9 : 0.0;
  };
  for (const CaseResult& r : results) {
    if (r.gemm_seconds <= 0) continue;
    if (out.empty()) absl::StrAppend(&out, "\nMatrix products (", runtime::GemmDescription(), "):");
    absl::StrAppend(&out, "\n", r.bench.name, " ", r.dtype, ": dots ",
                    absl::StrFormat("%.1f GFLOP/s (%.3g GFLOP in %.3f s)",
                                    rate(r.gemm_flops, r.gemm_seconds), r.gemm_flops * 1e-9,
                                    r.gemm_seconds));
    if (r.gemm_bf16_seconds > 0) {
      absl::StrAppend(&out, absl::StrFormat(", of them bf16 x bf16: %.1f GFLOP/s",
                                            rate(r.gemm_bf16_flops, r.gemm_bf16_seconds)));
    }
    if (r.dtype != "bf16") continue;
    for (const CaseResult& o : results) {
      if (o.dtype != "f32" || o.bench.family != r.bench.family || o.gemm_seconds <= 0) continue;
      absl::StrAppend(&out, absl::StrFormat(
                                "; bf16/f32 GEMM rate %.2f",
                                rate(r.gemm_flops, r.gemm_seconds) /
                                    rate(o.gemm_flops, o.gemm_seconds)));
      if (r.gemm_bf16_seconds > 0) {
        absl::StrAppend(&out, absl::StrFormat(
                                  " (bf16 x bf16 dots vs all f32 dots %.2f)",
                                  rate(r.gemm_bf16_flops, r.gemm_bf16_seconds) /
                                      rate(o.gemm_flops, o.gemm_seconds)));
      }
    }
  }
  return out.empty() ? out : out + "\n";
}

// The bytes a case's cold runs faulted in (their median minor faults).
int64_t ColdFaultedBytes(const CaseResult& r) {
  return r.cold_minor_faults * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// The cold runs beside their page floor: fresh memory of as many bytes as
// each cold run faulted in (TimeFreshPages) against the warm emulator, and
// the cold run against the warm run plus that floor.
std::string FreshPagesLines(const std::vector<CaseResult>& results) {
  std::string out;
  for (const CaseResult& r : results) {
    if (!r.cold_fresh_pages || !r.cold.median || !r.emulator.median) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", r.bench.name, " ", r.dtype, ": ",
                    Gib(ColdFaultedBytes(r)), " in ", SecondsText(*r.cold_fresh_pages), " = ",
                    Ratio(r.cold_fresh_pages, r.emulator.median), "x warm, cold/(warm + pages) ",
                    Ratio(r.cold.median, *r.emulator.median + *r.cold_fresh_pages));
  }
  if (out.empty()) return out;
  return absl::StrCat("\nFresh host memory, the cold runs' page floor (as many bytes as each "
                      "cold run faulted in, mapped, populated for writing as the runtime maps its "
                      "buffers, and unmapped, in this process): ",
                      out, ".");
}

std::string Table(const std::vector<CaseResult>& results) {
  std::string out =
      "| case | dtype | emulator | cold run | XLA:CPU | XLA CPU plugin | jax.jit | floor | bound "
      "| cold/warm | emu/XLA | emu/plugin | emu/floor | emu/bound | floor/bound | host RSS peak "
      "| HBM peak | floor check |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const CaseResult& r : results) {
    std::string check = "-";
    if (r.floor_check) {
      check = *r.floor_check <= 1 ? "ok" : absl::StrFormat("MISMATCH %.3g", *r.floor_check);
    }
    absl::StrAppend(&out, "| ", r.bench.name, " | ", r.dtype, " | ", Seconds(r.emulator), " | ",
                    Seconds(r.cold), " | ", Seconds(r.xla), " | ", Seconds(r.pjrt), " | ",
                    Seconds(r.jax), " | ", Seconds(r.floor), " | ",
                    r.bound_seconds > 0 ? SecondsText(r.bound_seconds) : "-", " | ",
                    Ratio(r.cold.median, r.emulator.median), " | ",
                    Ratio(r.emulator.median, r.xla.median), " | ",
                    Ratio(r.emulator.median, r.pjrt.median), " | ",
                    Ratio(r.emulator.median, r.floor.median), " | ",
                    Ratio(r.emulator.median, r.bound_seconds), " | ",
                    Ratio(r.floor.median, r.bound_seconds), " | ", Gib(r.rss_peak_bytes),
                    " | ", Gib(r.hbm_peak_bytes), " | ", check, " |\n");
  }
  return out;
}

nlohmann::ordered_json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json JsonTiming(const Timing& t) {
  return {{"median_s", OrNull(t.median)},
          {"samples_s", t.samples},
          {"cpu_median_s", OrNull(t.cpu_median)},
          {"compile_s", OrNull(t.compile_seconds)},
          {"peak_rss_bytes", t.peak_rss_bytes},
          {"error", t.error}};
}

std::string Json(const std::vector<CaseResult>& results, const std::vector<CorpusRow>& corpus,
                 const std::string& header) {
  std::vector<nlohmann::ordered_json> cases;
  for (const CaseResult& r : results) {
    cases.push_back({{"case", r.bench.name},
                     {"dtype", r.dtype},
                     {"emulator", JsonTiming(r.emulator)},
                     {"cold", JsonTiming(r.cold)},
                     {"cold_minor_faults", r.cold_minor_faults},
                     {"cold_empty_jit_cache_s", OrNull(r.cold_empty_jit_cache)},
                     {"cold_fresh_pages_s", OrNull(r.cold_fresh_pages)},
                     {"gemm_flops", r.gemm_flops},
                     {"gemm_s", r.gemm_seconds},
                     {"gemm_bf16_flops", r.gemm_bf16_flops},
                     {"gemm_bf16_s", r.gemm_bf16_seconds},
                     {"xla", JsonTiming(r.xla)},
                     {"pjrt", JsonTiming(r.pjrt)},
                     {"jax", JsonTiming(r.jax)},
                     {"floor", JsonTiming(r.floor)},
                     {"bound_s", r.bound_seconds},
                     {"host_io_s", r.host_io_seconds},
                     {"host_rss_peak_bytes", r.rss_peak_bytes},
                     {"hbm_peak_bytes", r.hbm_peak_bytes},
                     {"floor_check", OrNull(r.floor_check)}});
  }
  std::vector<nlohmann::ordered_json> programs;
  for (const CorpusRow& r : corpus) {
    programs.push_back({{"corpus", r.corpus},
                        {"program", r.name},
                        {"instructions", r.instructions},
                        {"emulator", JsonTiming(r.emulator)},
                        {"plan", JsonTiming(r.plan)},
                        {"xla", JsonTiming(r.xla)}});
  }
  return JsonRecords({{"header", header}, {"corpus", programs}}, "cases", cases);
}

BenchCase MakeCase(const std::string& id, const BenchFlags& f, const std::string& dtype) {
  BenchCase c;
  c.kernel.batch = f.batch;
  c.kernel.seq = f.seq;
  c.kernel.vocab = f.vocab;
  c.kernel.block_size = f.block_size;
  c.kernel.logits_dtype = dtype;
  c.kernel.mode = "fwd_bwd";
  c.kernel.kernel = id;
  if (id == "entropy_tiled") c.kernel.mode = "fwd";
  if (id == "grpo_fused_linear_dlogits_bf16") c.kernel.kernel = "grpo_fused_linear";
  if (id == "grpo_tiled_vocab") {
    c.kernel.kernel = "grpo_tiled";
    c.shard.shard = "vocab";
    c.shard.mesh = absl::StrCat(f.mesh);
  }
  c.name = absl::StrCat(c.kernel.kernel, " ", c.kernel.mode);
  if (c.shard.shard != "none") absl::StrAppend(&c.name, " ", c.shard.shard, "/", c.shard.mesh);
  if (IsFusedCase(id)) {
    c.kernel.seq = f.fused_seq;
    c.kernel.hidden = f.hidden;
    absl::StrAppend(&c.name, " T=", f.fused_seq, " H=", f.hidden);
  }
  c.family = c.name;
  if (id == "grpo_fused_linear_dlogits_bf16") {
    c.kernel.dlogits_dtype = "bf16";
    absl::StrAppend(&c.name, " dlogits bf16");
  }
  return c;
}


// A case's kernel flags as `run` would check them, then its host memory:
// the inputs and every device's buffers (bench refuses up front instead of
// failing with bad_alloc in the middle).
absl::Status CheckBenchCase(const BenchCase& c) {
  const KernelFlags& k = c.kernel;
  if (k.batch > (int64_t{1} << 40) / k.seq || k.batch * k.seq > (int64_t{1} << 40) / k.vocab ||
      k.hidden > (int64_t{1} << 40) / k.vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.name, ": --batch * --seq * --vocab (or --hidden * --vocab) is too large (> 2^40 "
                "elements)"));
  }
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module = BuildShardedModule(k, c.shard);
  if (!module.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": ", module.status().message()));
  }
  const hlo::HloModule& m = **module;
  HostNeed need;
  need.num_devices = std::max<int64_t>(1, m.num_partitions());
  need.inputs = SaturatingBytes(ParameterBytes(*m.entry()), need.num_devices + 1);
  need.per_device = std::max<int64_t>(0, DeviceBytesBeyondArguments(m));
  need.outputs = SaturatingBytes(ResultBytes(*m.entry()), need.num_devices);
  return CheckHostMemory(absl::StrCat("bench case ", c.name, " ", k.logits_dtype), need);
}
}  // namespace

int BenchMain(const std::vector<std::string>& args) {
  BenchFlags f;
  if (const char* py = std::getenv("TPUOFF_XLA_PYTHON")) f.xla_python = py;
  FlagSet flags(
      std::string(kCmd), "[flags]",
      "Times the host emulator on the GRPO/entropy kernels (grpo_tiled and\n"
      "grpo_reference fwd_bwd, entropy_tiled, grpo_tiled vocab-sharded over\n"
      "--mesh devices) at B=1 T=4096 V=151936 in bf16 and f32, and the fused\n"
      "LM-head kernel (grpo_fused_linear fwd_bwd at T=--fused-seq, H=--hidden;\n"
      "in bf16 also with --dlogits-dtype=bf16: case grpo_fused_linear_dlogits_bf16),\n"
      "next to, in the same run and on the same inputs:\n"
      "  XLA:CPU compiling and running the same emitted module and jax.jit of the\n"
      "    JAX-written reference math (for the fused kernel: the unfused matmul +\n"
      "    loss) (tools/xla_check/bench_xla.py with the pinned jaxlib; needs\n"
      "    --xla-python or $TPUOFF_XLA_PYTHON, e.g. the path\n"
      "    tools/xla_check/setup_venv.sh prints), after the emulator's side has\n"
      "    released its memory, one Python process per side;\n"
      "  the XLA CPU PJRT plugin running the same module through tpuoff's PJRT\n"
      "    backend, in process (transfers + execution; compile timed apart;\n"
      "    --pjrt-plugin, default the plugin found at build time; none without\n"
      "    the PJRT backend);\n"
      "  a hand-fused C++ floor: one streaming forward and one backward pass with\n"
      "    vectorised exp (tools/cli/bench_floor.cc), checked against the\n"
      "    emulator's outputs; timed at least 3 times whatever --reps;\n"
      "  the bandwidth bound: logits read in the forward and again in the\n"
      "    backward, dlogits written, at this machine's measured bandwidth;\n"
      "  the cold run: one `tpuoff run --kernel=... --random-inputs` process per\n"
      "    repetition (inputs generated, planning, the run on fresh host memory,\n"
      "    checksums, exit), what a user sees on a repeated run (compiled loops\n"
      "    from the JIT's disk cache, filled by the warm runs); one more with an\n"
      "    empty cache is reported under the table; --no-cold skips them. Beside\n"
      "    them, the page floor: as many bytes as a cold run faulted in, mapped fresh,\n"
      "    populated for writing as the runtime maps its buffers and unmapped, in\n"
      "    this process (what fresh memory costs before any of it is computed),\n"
      "    and cold/(warm + page floor);\n"
      "Prints a markdown table of medians (after --warmup runs) and the ratios\n"
      "cold/warm, emulator/XLA, emulator/floor, emulator/bound, floor/bound, with the host RSS\n"
      "peak next to the simulated HBM peak; below it the matrix products' rate\n"
      "(GFLOP/s of the dot steps of one traced run) and bf16/f32 for the fused\n"
      "kernel (each bf16 fused case against the f32 one). A sharded case times the devices' programs and\n"
      "collectives on per-device arrays (as XLA's execute_sharded is timed); the\n"
      "host's split of the global inputs and assembly of the global outputs is\n"
      "reported under the table. --quick: a small shape and 2 repetitions (CI).\n"
      "Exit codes: 0 ok, 1 a run failed or the floor disagrees with the\n"
      "emulator, 2 usage error.");
  flags.AddBool("quick", &f.quick,
                "small shape (B=1 T=64 V=8192; fused T=64 H=64), 2 reps: a smoke run");
  flags.AddInt64("reps", &f.reps, "timed repetitions (median)");
  flags.AddInt64("warmup", &f.warmup, "untimed runs first");
  flags.AddInt64("batch", &f.batch, "B");
  flags.AddInt64("seq", &f.seq, "T");
  flags.AddInt64("vocab", &f.vocab, "V");
  flags.AddInt64("block-size", &f.block_size, "vocab tile of the tiled kernels");
  flags.AddInt64("fused-seq", &f.fused_seq, "T of the grpo_fused_linear case");
  flags.AddInt64("hidden", &f.hidden, "H of the grpo_fused_linear case");
  flags.AddInt64("mesh", &f.mesh, "devices of the vocab-sharded case");
  flags.AddInt64("threads", &f.threads, "host threads of emulator and floor (0 = all)");
  flags.AddString("dtypes", &f.dtypes, "comma-separated logits dtypes (bf16, f32)", "LIST");
  flags.AddString("cases", &f.cases,
                  "comma-separated: grpo_tiled, grpo_reference, entropy_tiled, "
                  "grpo_tiled_vocab, grpo_fused_linear, grpo_fused_linear_dlogits_bf16 (bf16 "
                  "only)",
                  "LIST");
  flags.AddString("xla-python", &f.xla_python,
                  "python of the pinned jax venv (default $TPUOFF_XLA_PYTHON; empty: "
                  "no XLA/JAX columns)",
                  "PATH");
  flags.AddString("xla-script", &f.xla_script,
                  "bench_xla.py (default: found from the binary's location)", "PATH");
  flags.AddBool("no-jax", &f.no_jax, "skip jax.jit of the reference math");
  flags.AddBool("no-floor", &f.no_floor, "skip the hand-fused floor");
  flags.AddString("pjrt-plugin", &f.pjrt_plugin,
                  "XLA CPU PJRT plugin for the plugin column (empty = the one found at "
                  "build time; none without the PJRT backend)",
                  "PATH");
  flags.AddBool("no-pjrt", &f.no_pjrt, "skip the XLA CPU plugin column");
  flags.AddBool("no-cold", &f.no_cold,
                "skip the cold runs (one `tpuoff run --random-inputs` process per repetition)");
  flags.AddString("json", &f.json, "also write the results as JSON here", "FILE");
  flags.AddString("corpus", &f.corpus,
                  "comma-separated jax_corpus.py corpus directories: time each program's "
                  "jax.hlo on the emulator and on XLA:CPU (bench_corpus.py) on its inputs",
                  "DIRS");
  flags.AddString("work-dir", &f.work_dir,
                  "scratch for the XLA side's modules and inputs (default: a new "
                  "/tmp/tpuoff-bench-* removed at exit)",
                  "DIR");
  flags.AddBool("keep-work", &f.keep_work, "keep the scratch directory");
  flags.AddInt64("bandwidth-mib", &f.bandwidth_mib, "buffer of the bandwidth measurement");
  if (auto exit = ParseFlagsOrExit(flags, kCmd, args)) return *exit;

  if (f.quick) {
    if (!flags.WasSet("seq")) f.seq = 64;
    if (!flags.WasSet("vocab")) f.vocab = 8192;
    if (!flags.WasSet("fused-seq")) f.fused_seq = 64;
    if (!flags.WasSet("hidden")) f.hidden = 64;
    if (!flags.WasSet("reps")) f.reps = 2;
    if (!flags.WasSet("bandwidth-mib")) f.bandwidth_mib = 64;
  }
  if (f.reps < 1 || f.reps > 1000 || f.warmup < 0 || f.warmup > 100) {
    return ReportUsageError(kCmd, "--reps must be in [1, 1000] and --warmup in [0, 100]");
  }
  if (f.batch < 1 || f.seq < 1 || f.vocab < 1 || f.block_size < 1 || f.mesh < 1 ||
      f.fused_seq < 1 || f.hidden < 1 || f.threads < 0 || f.bandwidth_mib < 1) {
    return ReportUsageError(kCmd, "--batch, --seq, --vocab, --block-size, --mesh, --fused-seq, "
                                  "--hidden and --bandwidth-mib must be >= 1, --threads >= 0");
  }
  // More threads than the machine has measure nothing (and thousands of
  // OpenMP threads exhaust the address space).
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  if (f.threads > hardware) {
    return ReportUsageError(kCmd, absl::StrCat("--threads must be in [0, ", hardware,
                                               "] (this machine's hardware threads), got ",
                                               f.threads));
  }
  if (f.mesh > hlo::kMaxMeshDevices) {
    return ReportUsageError(kCmd, absl::StrCat("--mesh must be in [1, ", hlo::kMaxMeshDevices,
                                               "], got ", f.mesh));
  }
  // The bandwidth buffer: at most 1 TiB, and it must fit in the host.
  constexpr int64_t kMaxBandwidthMib = int64_t{1} << 20;
  if (f.bandwidth_mib > kMaxBandwidthMib) {
    return ReportUsageError(kCmd, absl::StrCat("--bandwidth-mib must be in [1, ",
                                               kMaxBandwidthMib, "], got ", f.bandwidth_mib));
  }
  if (absl::Status st = CheckHostMemory("the bandwidth measurement (--bandwidth-mib)",
                                        {.inputs = f.bandwidth_mib << 20});
      !st.ok()) {
    return ReportFailure(kCmd, st);
  }
  // --cases=none: only the corpus part.
  if (f.cases == "none") f.cases.clear();
  // Every case's kernel must be a valid one, and its inputs and buffers fit.
  for (const std::string& id :
       std::vector<std::string>(absl::StrSplit(f.cases, ',', absl::SkipEmpty()))) {
    for (const std::string& d :
         std::vector<std::string>(absl::StrSplit(f.dtypes, ',', absl::SkipEmpty()))) {
      if (d != "bf16" && d != "f32") continue;  // reported below
      if (std::find(std::begin(kAllCases), std::end(kAllCases), id) == std::end(kAllCases) ||
          !CaseHasDtype(id, d)) {
        continue;
      }
      if (absl::Status st = CheckBenchCase(MakeCase(id, f, d)); !st.ok()) {
        return st.code() == absl::StatusCode::kInvalidArgument ? ReportUsageError(kCmd, st.message())
                                                               : ReportFailure(kCmd, st);
      }
    }
  }
  std::vector<std::string> dtypes = absl::StrSplit(f.dtypes, ',', absl::SkipEmpty());
  std::vector<std::string> case_ids = absl::StrSplit(f.cases, ',', absl::SkipEmpty());
  if (dtypes.empty() && !case_ids.empty()) {
    return ReportUsageError(kCmd, "--dtypes needs bf16, f32 or both for the --cases");
  }
  if (case_ids.empty() && f.corpus.empty()) {
    return ReportUsageError(kCmd, "--cases is empty and there is no --corpus: nothing to time");
  }
  for (const std::string& d : dtypes) {
    if (d != "bf16" && d != "f32") {
      return ReportUsageError(kCmd, absl::StrCat("--dtypes: unknown dtype '", d, "'"));
    }
  }
  for (const std::string& c : case_ids) {
    if (std::find(std::begin(kAllCases), std::end(kAllCases), c) == std::end(kAllCases)) {
      return ReportUsageError(kCmd, absl::StrCat("--cases: unknown case '", c, "'"));
    }
  }
  for (const std::string& c : case_ids) {
    if (std::none_of(dtypes.begin(), dtypes.end(),
                     [&](const std::string& d) { return CaseHasDtype(c, d); })) {
      return ReportUsageError(kCmd, absl::StrCat("--cases: ", c, " runs in bf16 only, and "
                                                 "--dtypes has no bf16"));
    }
  }
  const std::vector<std::string> corpora = absl::StrSplit(f.corpus, ',', absl::SkipEmpty());
  if (dtypes.empty() || (case_ids.empty() && corpora.empty())) {
    return ReportUsageError(kCmd, "--dtypes and --cases must name at least one (--cases=none "
                                  "only with --corpus)");
  }

  BenchSettings s;
  s.reps = static_cast<int>(f.reps);
  s.warmup = static_cast<int>(f.warmup);
  s.num_threads = static_cast<int>(f.threads);
  s.xla_python = f.xla_python;
  s.xla_script = f.xla_script.empty() ? DefaultXlaScript() : f.xla_script;
  s.with_jax = !f.no_jax;
  s.with_floor = !f.no_floor;
  if (!f.no_pjrt && runtime::pjrt::Available()) {
    s.pjrt_plugin =
        f.pjrt_plugin.empty() ? runtime::pjrt::DefaultCpuPluginPath() : f.pjrt_plugin;
  }
  if (!s.xla_python.empty() && s.xla_script.empty()) {
    return ReportUsageError(kCmd, "cannot find tools/xla_check/bench_xla.py: give --xla-script");
  }
  bool own_work_dir = false;
  if (!s.xla_python.empty()) {
    if (f.work_dir.empty()) {
      char tmpl[] = "/tmp/tpuoff-bench-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) {
        return ReportFailure(kCmd, absl::InternalError("cannot create a scratch directory"));
      }
      f.work_dir = tmpl;
      own_work_dir = !f.keep_work;
    }
    s.work_dir = f.work_dir;
  }

  const int threads = f.threads > 0 ? static_cast<int>(f.threads) : omp_get_max_threads();
  const std::string load_before = LoadAverage();
  const Bandwidth bw = MeasureBandwidth(f.bandwidth_mib << 20, static_cast<int>(f.threads), 5);
  std::string header = absl::StrFormat(
      "tpuoff bench, %s; %s, %u cores (%s; floor %s), %d threads; load average %s before\n"
      "shape B=%d T=%d V=%d, block %d; median of %d (floor %d) after %d warm-up; streaming "
      "bandwidth read %.1f GB/s, write %.1f GB/s\n",
      UtcNow(), CpuModel(), std::thread::hardware_concurrency(),
      runtime::simd::VectorIsaName(), FloorRowKernelsForCpu().isa, threads, load_before, f.batch, f.seq, f.vocab,
      f.block_size, f.reps, std::max<int>(f.reps, kMinFloorReps), f.warmup,
      bw.read_bytes_per_s / 1e9, bw.write_bytes_per_s / 1e9);
  std::fputs(header.c_str(), stdout);
  std::fflush(stdout);

  std::vector<CaseResult> results;
  bool failed = false;
  auto report = [&](const CaseResult& r, const Timing& t, const char* side) {
    if (t.error.empty()) return;
    std::fprintf(stderr, "%s: %s %s: %s: %s\n", std::string(kCmd).c_str(), r.bench.name.c_str(),
                 r.dtype.c_str(), side, t.error.c_str());
  };
  // Cases sharing inputs: the logits kernels, then the fused kernel.
  std::vector<std::vector<std::string>> groups(2);
  for (const std::string& id : case_ids) groups[IsFusedCase(id)].push_back(id);
  for (const std::string& dtype : dtypes) {
    for (const std::vector<std::string>& all_in_group : groups) {
      std::vector<std::string> group;
      for (const std::string& id : all_in_group) {
        if (CaseHasDtype(id, dtype)) group.push_back(id);
      }
      if (group.empty()) continue;
      std::vector<std::string> names;
      absl::StatusOr<std::vector<hlo::Literal>> inputs =
          MakeBenchInputs(MakeCase(group.front(), f, dtype).kernel, &names);
      if (!inputs.ok()) return ReportFailure(kCmd, inputs.status());
      std::string xla_inputs;
      if (!s.xla_python.empty()) {
        xla_inputs = absl::StrCat(s.work_dir, "/inputs_", dtype, "_", group.front());
        if (absl::Status st = WriteXlaInputs(xla_inputs, *inputs, names); !st.ok()) {
          return ReportFailure(kCmd, st);
        }
      }
      const size_t first = results.size();
      for (const std::string& id : group) {
        const BenchCase c = MakeCase(id, f, dtype);
        absl::StatusOr<CaseResult> r =
            RunBenchCase(c, dtype, *inputs, names, bw, s, xla_inputs);
        if (!r.ok()) {
          std::fprintf(stderr, "%s: %s %s: %s\n", std::string(kCmd).c_str(), c.name.c_str(),
                       dtype.c_str(), OneLine(r.status().message()).c_str());
          failed = true;
          continue;
        }
        report(*r, r->floor, "floor");
        report(*r, r->pjrt, "XLA CPU plugin");
        if (r->floor_check && !(*r->floor_check <= 1)) failed = true;
        std::string floor_text = "no floor for this case";
        if (r->floor.cpu_median) {
          floor_text = absl::StrFormat("floor %s (CPU %.3f s)", Seconds(r->floor),
                                       *r->floor.cpu_median);
        }
        std::fprintf(stderr, "%s: %s %s: emulator %s (CPU %.3f s), %s\n",
                     std::string(kCmd).c_str(), c.name.c_str(), dtype.c_str(),
                     Seconds(r->emulator).c_str(), r->emulator.cpu_median.value_or(0),
                     floor_text.c_str());
        results.push_back(*std::move(r));
      }
      // The XLA side gets the machine's memory to itself: the inputs are on
      // disk, the emulator's cached buffers go back to the system.
      inputs->clear();
      runtime::ReleaseHostCache();
      for (size_t i = first; i < results.size(); ++i) {
        CaseResult& r = results[i];
        RunXlaSide(s, &r);
        report(r, r.xla, "XLA:CPU");
        report(r, r.jax, "jax.jit");
        // A side that was asked for and failed fails the bench.
        if (!r.xla.error.empty() || !r.jax.error.empty()) failed = true;
        if (!f.no_cold) {
          TimeColdRuns(SelfExe(), r.bench, s.reps, s.num_threads, &r.cold, &r.cold_minor_faults,
                       &r.cold_empty_jit_cache);
          report(r, r.cold, "cold run");
          if (!r.cold.error.empty()) failed = true;
          if (r.cold.median) {
            r.cold_fresh_pages = TimeFreshPages(ColdFaultedBytes(r), s.reps);
          }
        }
        if (!r.xla_case_dir.empty()) {
          std::fprintf(stderr, "%s: %s %s: XLA:CPU %s, jax.jit %s\n",
                       std::string(kCmd).c_str(), r.bench.name.c_str(), dtype.c_str(),
                       Seconds(r.xla).c_str(), Seconds(r.jax).c_str());
        }
      }
      if (!xla_inputs.empty() && !f.keep_work) {
        std::error_code ec;
        std::filesystem::remove_all(xla_inputs, ec);
      }
    }
  }
  // The real-HLO corpus: the emulator against XLA:CPU on JAX's modules.
  std::vector<CorpusRow> corpus_rows;
  for (const std::string& dir : corpora) {
    absl::StatusOr<std::vector<CorpusRow>> rows = RunCorpusBench(dir, s);
    if (!rows.ok()) return ReportFailure(kCmd, rows.status());
    for (CorpusRow& r : *rows) {
      for (const auto& [t, side] : {std::pair{&r.emulator, "emulator"}, {&r.xla, "XLA:CPU"}}) {
        if (t->error.empty()) continue;
        std::fprintf(stderr, "%s: corpus %s: %s: %s\n", std::string(kCmd).c_str(),
                     r.name.c_str(), side, OneLine(t->error).c_str());
        failed = true;
      }
      corpus_rows.push_back(std::move(r));
    }
  }
  absl::StrAppend(&header, "load average ", LoadAverage(), " after\n");
  std::string table = results.empty() ? "" : Table(results);
  for (const CaseResult& r : results) {
    if (r.host_io_seconds <= 0) continue;
    absl::StrAppend(&table, "\n", r.bench.name, " ", r.dtype,
                    ": devices' programs and collectives on per-device arrays; splitting the "
                    "global inputs and assembling the global outputs on the host took ",
                    SecondsText(r.host_io_seconds), " more (once, not in the median).");
  }
  std::string empty_cache;
  for (const CaseResult& r : results) {
    if (!r.cold_empty_jit_cache) continue;
    absl::StrAppend(&empty_cache, empty_cache.empty() ? "" : "; ", r.bench.name, " ", r.dtype, " ",
                    SecondsText(*r.cold_empty_jit_cache));
  }
  if (!empty_cache.empty()) {
    absl::StrAppend(&table, "\nCold runs load the loops the warm runs compiled from the JIT's "
                            "disk cache; one cold run each with an empty cache (loops compiled, "
                            "as after a rebuild): ", empty_cache, ".");
  }
  absl::StrAppend(&table, FreshPagesLines(results));
  absl::StrAppend(&table, GemmLines(results));
  if (!corpus_rows.empty()) {
    absl::StrAppend(&table, table.empty() ? "" : "\n",
                    "Real-HLO corpus: the module jax.jit lowers each program to (jax.hlo), on the "
                    "emulator (planned once; the planning timed apart) and on XLA:CPU (compiled "
                    "once), same inputs; medians\n\n",
                    CorpusTable(corpus_rows));
  }
  const absl::Status printed = WriteToStdout(
      absl::StrCat("\n", table, "\nload average ", LoadAverage(), " after\n"));
  if (!f.json.empty()) {
    if (absl::Status st = WriteFileAtomically(f.json, Json(results, corpus_rows, header));
        !st.ok()) {
      return ReportFailure(kCmd, st);
    }
  }
  if (own_work_dir) {
    std::error_code ec;
    std::filesystem::remove_all(f.work_dir, ec);
  } else if (!f.work_dir.empty()) {
    std::fprintf(stderr, "%s: scratch kept in %s\n", std::string(kCmd).c_str(),
                 f.work_dir.c_str());
  }
  if (!printed.ok()) return ReportFailure(kCmd, printed);
  return failed ? kExitFailure : kExitOk;
}

}  // namespace tpuoff::tools
