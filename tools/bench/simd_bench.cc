// Microbenchmarks of the emulator's building blocks: vectorised exp/log
// (runtime/cpu/simd_math.h) against libm, and the fork-join pool's per-loop
// overhead (runtime/cpu/parallel.h).
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "runtime/cpu/parallel.h"
#include "runtime/cpu/simd_math.h"

namespace tpuoff {
namespace {

std::vector<float> Inputs(int64_t n, float lo, float hi) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / n;
  return x;
}

void BM_SimdExp(benchmark::State& state) {
  std::vector<float> x = Inputs(state.range(0), -30, 5), y(x.size());
  for (auto _ : state) {
    runtime::simd::Exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * x.size());
  state.SetLabel(runtime::simd::VectorIsaName());
}
BENCHMARK(BM_SimdExp)->Arg(1024)->Arg(1 << 16);

void BM_StdExp(benchmark::State& state) {
  std::vector<float> x = Inputs(state.range(0), -30, 5), y(x.size());
  for (auto _ : state) {
    for (size_t i = 0; i < x.size(); ++i) y[i] = std::exp(x[i]);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * x.size());
}
BENCHMARK(BM_StdExp)->Arg(1024)->Arg(1 << 16);

void BM_SimdLog(benchmark::State& state) {
  std::vector<float> x = Inputs(state.range(0), 1e-3f, 1e3f), y(x.size());
  for (auto _ : state) {
    runtime::simd::Log(x.data(), y.data(), static_cast<int64_t>(x.size()));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * x.size());
}
BENCHMARK(BM_SimdLog)->Arg(1024)->Arg(1 << 16);

void BM_StdLog(benchmark::State& state) {
  std::vector<float> x = Inputs(state.range(0), 1e-3f, 1e3f), y(x.size());
  for (auto _ : state) {
    for (size_t i = 0; i < x.size(); ++i) y[i] = std::log(x[i]);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * x.size());
}
BENCHMARK(BM_StdLog)->Arg(1024)->Arg(1 << 16);

// One empty ParallelFor over all threads: the cost of a fused step's fork
// and join.
void BM_ParallelForOverhead(benchmark::State& state) {
  const int threads = runtime::MaxParallelism();
  for (auto _ : state) {
    runtime::ParallelFor(threads, threads, [](int64_t b, int64_t e) {
      benchmark::DoNotOptimize(b + e);
    });
  }
  state.SetLabel(std::to_string(threads) + " threads");
}
BENCHMARK(BM_ParallelForOverhead);

}  // namespace
}  // namespace tpuoff

BENCHMARK_MAIN();
