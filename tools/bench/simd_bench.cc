// Microbenchmarks of the emulator's building blocks: vectorised exp/log
// (runtime/cpu/simd_math.h) against libm and the library candidates of
// simd_alternatives.h (Highway, SLEEF) on the same arrays, and the fork-join
// pool's per-loop overhead (runtime/cpu/parallel.h).
//
// The machine is shared: compare candidates with interleaved repetitions and
// medians, e.g. tpuoff_benchmarks --benchmark_filter='Exp|Log'
// --benchmark_repetitions=15 --benchmark_enable_random_interleaving=true
// --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "runtime/cpu/parallel.h"
#include "runtime/cpu/simd_math.h"
#include "tools/bench/simd_alternatives.h"

namespace tpuoff {
namespace {

using bench::ArrayFn;

std::vector<float> Inputs(int64_t n, float lo, float hi) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / n;
  return x;
}

void LibmExp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void LibmLog(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}

void Run(benchmark::State& state, ArrayFn fn, float lo, float hi) {
  std::vector<float> x = Inputs(state.range(0), lo, hi), y(x.size());
  for (auto _ : state) {
    fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * x.size());
}

// exp of x - max over a row of logits: [-30, 0]; log of a softmax sum:
// [1, 151936] (up to the vocabulary size).
void BM_Exp(benchmark::State& state, ArrayFn fn) { Run(state, fn, -30.0f, 0.0f); }
void BM_Log(benchmark::State& state, ArrayFn fn) { Run(state, fn, 1.0f, 151936.0f); }

#define TPUOFF_SIMD_CASES(bm, name, fn) BENCHMARK_CAPTURE(bm, name, fn)->Arg(1024)->Arg(1 << 16)
TPUOFF_SIMD_CASES(BM_Exp, tpuoff, &runtime::simd::Exp);
TPUOFF_SIMD_CASES(BM_Exp, hwy, &bench::HwyExp);
TPUOFF_SIMD_CASES(BM_Exp, sleef_u10, &bench::SleefExpU10);
TPUOFF_SIMD_CASES(BM_Exp, libm, &LibmExp);
TPUOFF_SIMD_CASES(BM_Log, tpuoff, &runtime::simd::Log);
TPUOFF_SIMD_CASES(BM_Log, hwy, &bench::HwyLog);
TPUOFF_SIMD_CASES(BM_Log, sleef_u10, &bench::SleefLogU10);
TPUOFF_SIMD_CASES(BM_Log, sleef_u35, &bench::SleefLogU35);
TPUOFF_SIMD_CASES(BM_Log, libm, &LibmLog);

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
