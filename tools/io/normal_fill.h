// Normal random arrays for --random-inputs, generated at close to the
// machine's arithmetic rate, and the per-row log-sum-exp of the stored values
// computed while each block is still in L1 (not in a second sweep over the
// GiB-sized array).
//
// Values: Box-Muller on 24-bit uniforms from a 32-bit counter hash, in fixed
// chunks of kRandomChunk values, chunk c seeded by RandomChunkSeed(stream, c)
// and generated on one thread: the values depend on neither the thread
// count nor the vector width (groups of 16 pairs are the unit on every ISA;
// AVX-512 and AVX2 builds give the same bits, checked by hashing 2 M values
// of each; a build without FMA rounds the polynomials differently).
#ifndef TPUOFF_TOOLS_IO_NORMAL_FILL_H_
#define TPUOFF_TOOLS_IO_NORMAL_FILL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "hlo/ir/float16.h"
#include "hlo/ir/literal.h"
#include "runtime/cpu/simd_math.h"

namespace tpuoff::tools {

inline constexpr int64_t kRandomChunk = 1 << 16;

// splitmix64's output function of `x`: a seed per (stream, chunk).
inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t RandomChunkSeed(uint64_t stream, int64_t chunk) {
  return SplitMix64(stream ^ (static_cast<uint64_t>(chunk) * 0xd1b54a32d192ed03ull));
}

// Rows of `row_length` values, the log-sum-exp of each row's stored values
// times `scale` wanted in `lse` (resized to the row count).
struct RowLseRequest {
  int64_t row_length = 1;
  float scale = 1;
  std::vector<double>* lse = nullptr;
};

// Fills the float array `lit` with N(0, stddev^2) values from `stream`.
// With `lse` (f32 and bf16 arrays only; ignored for other types) also the
// rows' log-sum-exp, summed in a fixed order (the same for any thread count).
void FillNormal(hlo::Literal& lit, uint64_t stream, double stddev,
                const RowLseRequest* lse = nullptr);

// kLanes values of a stored f32 or bf16 array from element k on, times
// `scale`, and one such value.
inline runtime::simd::VF LoadScaled(const float* x, int64_t k, runtime::simd::VF scale) {
  return runtime::simd::Load(x + k) * scale;
}
inline runtime::simd::VF LoadScaled(const uint16_t* x, int64_t k, runtime::simd::VF scale) {
  typedef uint16_t VH __attribute__((vector_size(runtime::simd::kLanes * 2)));
  typedef uint32_t VU __attribute__((vector_size(runtime::simd::kLanes * 4)));
  VH h;
  std::memcpy(&h, x + k, sizeof(h));
  return (runtime::simd::VF)(__builtin_convertvector(h, VU) << 16) * scale;
}
inline float ScaledAt(const float* x, int64_t k, float scale) { return x[k] * scale; }
inline float ScaledAt(const uint16_t* x, int64_t k, float scale) {
  return hlo::Bf16ToF32(x[k]) * scale;
}

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_NORMAL_FILL_H_
