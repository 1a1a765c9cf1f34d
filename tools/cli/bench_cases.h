// The measurements behind `tpuoff bench`: one case is a kernel (mode,
// sharding) at one shape and dtype, timed on the host emulator, on XLA:CPU
// (tools/xla_check/bench_xla.py, the same module on the same inputs), as
// jax.jit of the reference math, and against the physical references of
// bench_floor.h. Medians of `reps` runs after `warmup` untimed ones.
//
// A case runs in two phases: RunBenchCase (emulator and floor; it also
// writes the module and manifest the XLA side reads) and, once the caller
// has released the inputs and the emulator's cached host memory, RunXlaSide
// (XLA:CPU and jax.jit in one Python process each), so the GiB-sized arrays
// of one side never share the machine's memory with the other's.
#ifndef TPUOFF_TOOLS_CLI_BENCH_CASES_H_
#define TPUOFF_TOOLS_CLI_BENCH_CASES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hlo/ir/literal.h"
#include "tools/cli/bench_floor.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"

namespace tpuoff::tools {

struct BenchCase {
  std::string name;  // "grpo_tiled fwd_bwd", "grpo_tiled fwd_bwd vocab/8"
  // The name without a variant's suffix (" dlogits bf16"): a bf16 case's
  // GEMM rate is set against the f32 case of its family.
  std::string family;
  KernelFlags kernel;
  ShardFlags shard;  // shard == "none": one device
};

// Timed runs of the hand-fused floor at least (the bench's --reps when more).
inline constexpr int kMinFloorReps = 3;

struct BenchSettings {
  int reps = 3;
  int warmup = 1;
  int num_threads = 0;        // emulator and floor threads (0: all)
  std::string xla_python;     // python of the pinned venv; empty: no XLA/JAX
  std::string xla_script;     // tools/xla_check/bench_xla.py
  std::string work_dir;       // scratch for the XLA side's module and inputs
  bool with_jax = true;       // jax.jit of the reference math
  bool with_floor = true;
  // The XLA CPU PJRT plugin on the same module (runtime/pjrt): a plugin
  // path; empty: no such column.
  std::string pjrt_plugin;
};

// One timed side: median and all samples (seconds); error when it failed.
struct Timing {
  std::optional<double> median;
  std::vector<double> samples;
  std::optional<double> compile_seconds;
  // Process CPU time (all threads) per timed run, median; robust to other
  // load on the machine, unlike wall time. Emulator and floor only.
  std::optional<double> cpu_median;
  std::vector<double> cpu_samples;
  int64_t peak_rss_bytes = 0;
  std::string error;  // empty on success or when not run
};

struct CaseResult {
  BenchCase bench;
  std::string dtype;  // "bf16" | "f32"
  // pjrt: the XLA CPU plugin through tpuoff's PJRT backend, in process;
  // each sample is host->device + execution + device->host (compile apart).
  Timing emulator, xla, jax, floor, pjrt;
  double bound_seconds = 0;  // bandwidth bound; 0: none (the fused kernel)
  // A partitioned case times the devices' programs and collectives on
  // per-device arrays, as XLA's execute_sharded is timed; splitting the
  // global inputs and assembling the global outputs on the host is timed
  // once on its own (seconds).
  double host_io_seconds = 0;
  int64_t hbm_peak_bytes = 0;  // max over devices
  int64_t rss_peak_bytes = 0;  // host VmHWM during the emulator runs
  // Floor vs emulator outputs: max |diff| / (atol + rtol |emulator|) over
  // dlogits/entropy (<= 1: agree); nullopt when not compared.
  std::optional<double> floor_check;
  // The run's matrix products (its dot ops): flops, and emulator seconds
  // summed over their steps in one traced run after the timed ones; the
  // same for the dots of two bf16 operands alone. 0: no dots.
  double gemm_flops = 0, gemm_seconds = 0;
  double gemm_bf16_flops = 0, gemm_bf16_seconds = 0;
  // One `tpuoff run --random-inputs` process per sample (bench_cold.h),
  // and its median minor page faults.
  Timing cold;
  int64_t cold_minor_faults = 0;
  // One more cold run with an empty loop-JIT disk cache (wall seconds).
  std::optional<double> cold_empty_jit_cache;
  // Fresh memory of the cold runs' faulted bytes (minor faults x page
  // size), mapped, populated and unmapped in this process (TimeFreshPages,
  // seconds).
  std::optional<double> cold_fresh_pages;
  // Written by RunBenchCase for RunXlaSide (empty: no XLA side).
  std::string xla_case_dir;
  bool xla_with_jax = false;
};

// Helpers of the bench parts that start Python: `s` quoted for /bin/sh, and
// why a popen()ed command failed (from pclose's status).
std::string ShellQuote(const std::string& s);
std::string ExitText(int status);

// Random inputs for `kernel`: for the logits kernels, the unsharded
// grpo_tiled module's parameters (a superset of every logits case's
// parameters at that shape and dtype); for grpo_fused_linear, its own.
absl::StatusOr<std::vector<hlo::Literal>> MakeBenchInputs(const KernelFlags& kernel,
                                                          std::vector<std::string>* names);

// Writes each input as raw bytes to DIR/<name>.bin for bench_xla.py.
absl::Status WriteXlaInputs(const std::string& dir, absl::Span<const hlo::Literal> inputs,
                            const std::vector<std::string>& names);

// Runs the emulator and floor of one case on `inputs` (named by `names`;
// each case takes a prefix). When settings.xla_python is set, also writes
// the case's module and manifest for RunXlaSide, on the inputs
// WriteXlaInputs put in `xla_inputs_dir`.
absl::StatusOr<CaseResult> RunBenchCase(const BenchCase& c, const std::string& dtype,
                                        absl::Span<const hlo::Literal> inputs,
                                        const std::vector<std::string>& names,
                                        const Bandwidth& bw, const BenchSettings& settings,
                                        const std::string& xla_inputs_dir);

// XLA:CPU on the case's module and jax.jit of its reference math, each in a
// process of its own; failures (a Python error, a process killed for lack
// of memory) land in CaseResult::xla/jax.error. No-op without a case dir.
void RunXlaSide(const BenchSettings& settings, CaseResult* r);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_CASES_H_
