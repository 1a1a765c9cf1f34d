// What a cold `tpuoff run --random-inputs` spends outside the kernel, as
// Google Benchmarks at a small shape (B=1, T=256, V=151936): generating the
// random inputs (normal logits, then the derived inputs from the logits'
// row statistics) and checksumming an output. Times are process CPU seconds
// (all threads, manual time), as in emulator_bench.cc; bytes/s is the
// logits' size over that time. The host block cache serves the inputs'
// memory after the first iteration, so page faults are not in these times
// (`tpuoff bench`'s cold column has them).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/build_kernel.h"
#include "tools/bench/cpu_time.h"
#include "tools/cli/kernel_flags.h"
#include "tools/io/checksum.h"
#include "tools/io/random_inputs.h"

namespace tpuoff {
namespace {

std::unique_ptr<hlo::HloModule> GrpoModule(const std::string& dtype) {
  tools::KernelFlags k;
  k.kernel = "grpo_tiled";
  k.mode = "fwd_bwd";
  k.batch = 1;
  k.seq = 256;
  k.vocab = 151936;
  k.logits_dtype = dtype;
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> m = tools::BuildKernelModule(k);
  return m.ok() ? *std::move(m) : nullptr;
}

void BM_RandomInputs(benchmark::State& state, const std::string& dtype) {
  std::unique_ptr<hlo::HloModule> m = GrpoModule(dtype);
  if (m == nullptr) {
    state.SkipWithError("bad kernel");
    return;
  }
  int64_t logits_bytes = 0;
  for (auto _ : state) {
    const double c0 = CpuSeconds();
    absl::StatusOr<std::vector<hlo::Literal>> in =
        tools::MakeRandomInputs(*m->entry(), tools::RandomInputOptions{});
    state.SetIterationTime(CpuSeconds() - c0);
    if (!in.ok()) {
      state.SkipWithError(std::string(in.status().message()).c_str());
      return;
    }
    logits_bytes = (*in)[0].shape().byte_size();
  }
  state.SetBytesProcessed(state.iterations() * logits_bytes);
}
BENCHMARK_CAPTURE(BM_RandomInputs, grpo_bf16, "bf16")->UseManualTime();
BENCHMARK_CAPTURE(BM_RandomInputs, grpo_f32, "f32")->UseManualTime();

void BM_Checksum(benchmark::State& state, const std::string& dtype) {
  std::unique_ptr<hlo::HloModule> m = GrpoModule(dtype);
  if (m == nullptr) {
    state.SkipWithError("bad kernel");
    return;
  }
  absl::StatusOr<std::vector<hlo::Literal>> in =
      tools::MakeRandomInputs(*m->entry(), tools::RandomInputOptions{});
  if (!in.ok()) {
    state.SkipWithError(std::string(in.status().message()).c_str());
    return;
  }
  const hlo::Literal& logits = (*in)[0];
  for (auto _ : state) {
    const double c0 = CpuSeconds();
    benchmark::DoNotOptimize(tools::ComputeChecksum(logits));
    state.SetIterationTime(CpuSeconds() - c0);
  }
  state.SetBytesProcessed(state.iterations() * logits.shape().byte_size());
}
BENCHMARK_CAPTURE(BM_Checksum, bf16, "bf16")->UseManualTime();
BENCHMARK_CAPTURE(BM_Checksum, f32, "f32")->UseManualTime();

}  // namespace
}  // namespace tpuoff
