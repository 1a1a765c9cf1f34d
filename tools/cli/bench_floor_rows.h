// The hand-fused floor's row kernels (tools/cli/bench_floor.h), compiled once
// per vector ISA and chosen when the benchmark runs: AVX-512 (16 lanes) when
// the CPU has it, else AVX2 + FMA (8 lanes), else the build's baseline. Each
// ISA's translation unit (bench_floor_rows_avx512.cc, _avx2.cc,
// _baseline.cc) compiles the same source, bench_floor_rows.inc, with its own
// flags; the rest of the program never runs an instruction the CPU lacks.
//
// What a row kernel computes, for one row z[0..v) of logits (f32 or bf16)
// and x_j = z_j * scale (scale > 0):
//  - forward: against a reference m (the row's max, or a value at most a few
//    units below it: the first block's max, raised when a later block
//    exceeds it), s = sum_j e^(x_j - m) and u = sum_j e^(x_j - m) (x_j - m),
//    in one pass over memory (each block of the row is read once from
//    memory and, for the first block only, once more from L1);
//    lse = m + log s and entropy = log s - u / s;
//  - backward: out_j = c * (1[j == y] - e^(x_j - lse)), written once with
//    non-temporal stores where the ISA has them.
// The exp is the Cephes polynomial of runtime/cpu/simd_math.h (about 1 ulp)
// with the range reduction of an argument known to be <= ~0 and finite:
// arguments below -87 give e^-87 (1.6e-38) instead of something smaller,
// which no sum over a row and no output at bf16/f32 precision can see.
#ifndef TPUOFF_TOOLS_CLI_BENCH_FLOOR_ROWS_H_
#define TPUOFF_TOOLS_CLI_BENCH_FLOOR_ROWS_H_

#include <cstdint>

namespace tpuoff::tools {

struct FloorRowStats {
  float ref = 0;   // m, scaled
  float sum = 0;   // s
  float usum = 0;  // u
};

struct FloorRowKernels {
  const char* isa;  // "avx512", "avx2" or "baseline"
  int lanes;
  void (*forward_f32)(const float* z, int64_t v, float scale, FloorRowStats* out);
  void (*forward_bf16)(const uint16_t* z, int64_t v, float scale, FloorRowStats* out);
  // out may be any address; y outside [0, v) means no one-hot entry.
  void (*backward_f32)(const float* z, int64_t v, float scale, float lse, float c, int64_t y,
                       float* out);
  void (*backward_bf16)(const uint16_t* z, int64_t v, float scale, float lse, float c,
                        int64_t y, uint16_t* out);
};

// The kernels of each build variant: nullptr when this compiler could not
// build it. They may only run on a CPU with the ISA (see FloorRowKernelsForCpu).
const FloorRowKernels* FloorRowKernelsAvx512();
const FloorRowKernels* FloorRowKernelsAvx2();
const FloorRowKernels* FloorRowKernelsBaseline();

// The widest variant this CPU runs (checked with cpuid at the first call).
const FloorRowKernels& FloorRowKernelsForCpu();

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_FLOOR_ROWS_H_
