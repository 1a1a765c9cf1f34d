// The emulator and the hand-fused floor on the GRPO/entropy kernels at a
// small shape (B=1, T=256, V=151936), as Google Benchmarks. Times are
// process CPU seconds (all threads, manual time): on a machine shared with
// other jobs they move far less than wall time, which is what comparing two
// builds of the emulator needs. `tpuoff bench` gives the wall-time table at
// the seed shape.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/build_kernel.h"
#include "tools/bench/cpu_time.h"
#include "runtime/emulator/executor.h"
#include "tools/cli/bench_cases.h"
#include "tools/cli/bench_floor.h"
#include "tools/cli/kernel_flags.h"

namespace tpuoff {
namespace {

tools::KernelFlags Flags(const std::string& kernel, const std::string& dtype) {
  tools::KernelFlags k;
  k.kernel = kernel;
  k.mode = kernel.rfind("entropy", 0) == 0 ? "fwd" : "fwd_bwd";
  k.batch = 1;
  k.seq = 256;
  k.vocab = 151936;
  k.logits_dtype = dtype;
  return k;
}

// Inputs per dtype, generated once.
const std::vector<hlo::Literal>& Inputs(const std::string& dtype) {
  static auto* cache = new std::map<std::string, std::vector<hlo::Literal>>();
  auto it = cache->find(dtype);
  if (it == cache->end()) {
    std::vector<std::string> names;
    absl::StatusOr<std::vector<hlo::Literal>> in =
        tools::MakeBenchInputs(Flags("grpo_tiled", dtype), &names);
    if (!in.ok()) std::abort();
    it = cache->emplace(dtype, *std::move(in)).first;
  }
  return it->second;
}

void BM_Emulator(benchmark::State& state, const std::string& kernel, const std::string& dtype) {
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> m =
      tools::BuildKernelModule(Flags(kernel, dtype));
  if (!m.ok()) {
    state.SkipWithError(std::string(m.status().message()).c_str());
    return;
  }
  const std::vector<hlo::Literal>& all = Inputs(dtype);
  absl::Span<const hlo::Literal> args(all.data(), (*m)->entry()->num_parameters());
  runtime::RunOptions options;
  options.record_allocations = false;
  for (auto _ : state) {
    const double c0 = CpuSeconds();
    absl::StatusOr<runtime::RunResult> r = runtime::RunModule(**m, args, options);
    state.SetIterationTime(CpuSeconds() - c0);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
}
BENCHMARK_CAPTURE(BM_Emulator, grpo_tiled_bf16, "grpo_tiled", "bf16")->UseManualTime();
BENCHMARK_CAPTURE(BM_Emulator, grpo_tiled_f32, "grpo_tiled", "f32")->UseManualTime();
BENCHMARK_CAPTURE(BM_Emulator, grpo_reference_bf16, "grpo_reference", "bf16")->UseManualTime();
BENCHMARK_CAPTURE(BM_Emulator, entropy_tiled_bf16, "entropy_tiled", "bf16")->UseManualTime();

void BM_Floor(benchmark::State& state, const std::string& kernel, const std::string& dtype) {
  absl::StatusOr<kernels::KernelSpec> spec = tools::KernelSpecFromFlags(Flags(kernel, dtype));
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> m =
      tools::BuildKernelModule(Flags(kernel, dtype));
  if (!spec.ok() || !m.ok()) {
    state.SkipWithError("bad kernel");
    return;
  }
  const std::vector<hlo::Literal>& all = Inputs(dtype);
  absl::Span<const hlo::Literal> args(all.data(), (*m)->entry()->num_parameters());
  tools::FloorOptions o;
  o.entropy_only = kernels::IsEntropyKernel(spec->kind);
  for (auto _ : state) {
    const double c0 = CpuSeconds();
    absl::StatusOr<tools::FloorOutputs> r = tools::RunFloor(spec->config, *(*m)->entry(), args, o);
    state.SetIterationTime(CpuSeconds() - c0);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
}
BENCHMARK_CAPTURE(BM_Floor, grpo_bf16, "grpo_tiled", "bf16")->UseManualTime();
BENCHMARK_CAPTURE(BM_Floor, entropy_bf16, "entropy_tiled", "bf16")->UseManualTime();

}  // namespace
}  // namespace tpuoff
