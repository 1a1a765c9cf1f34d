#include "tools/io/normal_fill.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace tpuoff::tools {
namespace {

namespace simd = runtime::simd;
using hlo::Literal;
using hlo::PrimitiveType;
using simd::VF;
using simd::VI;
typedef uint32_t VU __attribute__((vector_size(simd::kLanes * 4)));

// Pairs per group: a group of 32 values is pairs' r*cos(θ) then r*sin(θ),
// on every vector width.
constexpr int kGroupPairs = 16;
constexpr int kGroup = 2 * kGroupPairs;
// Values generated, stored and (for row statistics) summed per step: 4 KiB
// of f32 scratch, in L1 throughout.
constexpr int64_t kBlock = 1024;

VU SplatU(uint32_t v) { return VU{} + v; }

// A 32-bit integer hash with full avalanche (Wellons' "lowbias32" shape,
// constants from his hash-prospector search).
inline VU Mix32(VU x) {
  x ^= x >> 16;
  x *= 0x21f0aaadu;
  x ^= x >> 15;
  x *= 0x735a2d97u;
  x ^= x >> 15;
  return x;
}

// log(x) for normal floats in (0, 1]: simd::LogV's polynomial without its
// special-value handling (never needed here).
inline VF LogUnit(VF x) {
  const VI bits = simd::AsI(x);
  VI e = ((bits >> 23) & 0xff) - 126;
  VF m = simd::AsF((bits & 0x807fffff) | 0x3f000000);  // [0.5, 1)
  const VI small = m < simd::Splat(0.707106781186547524f);
  e = e + small;  // small lanes are -1
  m = simd::Select(small, m + m, m) - simd::Splat(1.0f);
  const VF ef = __builtin_convertvector(e, VF);
  // The polynomial by Estrin's scheme: a shorter dependency chain than
  // Horner's (this loop is latency-bound).
  const VF z = m * m;
  const VF z2 = z * z;
  const VF z4 = z2 * z2;
  const VF q01 = simd::MulAdd(simd::Splat(7.0376836292e-2f), m, simd::Splat(-1.1514610310e-1f));
  const VF q23 = simd::MulAdd(simd::Splat(1.1676998740e-1f), m, simd::Splat(-1.2420140846e-1f));
  const VF q45 = simd::MulAdd(simd::Splat(1.4249322787e-1f), m, simd::Splat(-1.6668057665e-1f));
  const VF q67 = simd::MulAdd(simd::Splat(2.0000714765e-1f), m, simd::Splat(-2.4999993993e-1f));
  const VF q03 = simd::MulAdd(q01, z, q23);
  const VF q47 = simd::MulAdd(q45, z, q67);
  const VF q07 = simd::MulAdd(q03, z4, q47);
  VF y = simd::MulAdd(q07, m, simd::Splat(3.3333331174e-1f));
  y = simd::MulAdd(y * m, z, ef * simd::Splat(-2.12194440e-4f));
  y = simd::MulAdd(z, simd::Splat(-0.5f), y);
  return simd::MulAdd(ef, simd::Splat(0.693359375f), m + y);
}

// sin and cos of 2*pi*u for u in [0, 1): the quadrant q = round(4u), then
// Taylor polynomials on [-pi/4, pi/4] (|error| < 4e-7), the quadrant's
// swaps and signs with selects and sign flips.
inline void SinCos2Pi(VF u, VF* s, VF* c) {
  const VF shifted = simd::MulAdd(u, simd::Splat(4.0f), simd::Splat(12582912.0f));
  const VF q = shifted - simd::Splat(12582912.0f);
  const VI k = simd::AsI(shifted) - simd::SplatI(0x4B400000);
  const VF phi = simd::MulAdd(q, simd::Splat(-0.25f), u) * simd::Splat(6.28318530718f);
  const VF p2 = phi * phi;
  VF sp = simd::MulAdd(p2, simd::Splat(-1.0f / 5040), simd::Splat(1.0f / 120));
  sp = simd::MulAdd(sp, p2, simd::Splat(-1.0f / 6));
  sp = simd::MulAdd(sp * p2, phi, phi);
  VF cp = simd::MulAdd(p2, simd::Splat(1.0f / 40320), simd::Splat(-1.0f / 720));
  cp = simd::MulAdd(cp, p2, simd::Splat(1.0f / 24));
  cp = simd::MulAdd(cp, p2, simd::Splat(-0.5f));
  cp = simd::MulAdd(cp, p2, simd::Splat(1.0f));
  // k: 0 -> (sp, cp), 1 -> (cp, -sp), 2 -> (-sp, -cp), 3 -> (-cp, sp).
  const VI odd = (k & 1) != 0;
  const VF a = simd::Select(odd, cp, sp);
  const VF b = simd::Select(odd, sp, cp);
  *s = simd::AsF(simd::AsI(a) ^ ((k & 2) << 30));
  *c = simd::AsF(simd::AsI(b) ^ (((k + 1) & 2) << 30));
}

// Vectors of pairs generated together, statement by statement: the loop is
// bound by its dependency chain (hash, log, sqrt), and interleaving two
// independent chains measured ~15% faster than one.
constexpr int kInterleave = 2;
constexpr int64_t kStepValues = 2 * kInterleave * simd::kLanes;
// Values are generated in whole steps and whole groups.
constexpr int64_t kGenUnit = kStepValues > kGroup ? kStepValues : kGroup;

// Values [first, first + n) of a chunk, f32; first and n multiples of
// kGenUnit.
void NormalValues(uint64_t seed, int64_t first, int64_t n, float sd, float* out) {
  constexpr uint32_t kA = 0x9e3779b9u, kB = 0x85ebca6bu;  // odd: p -> p*k is a bijection
  VU lane;
  for (int l = 0; l < simd::kLanes; ++l) lane[l] = static_cast<uint32_t>(l);
  const uint32_t pair0 = static_cast<uint32_t>(first / 2);
  // p*kA + k1 and p*kB + k2 for the pairs p of the next vectors, advanced
  // by addition (a multiply's latency off the dependency chain).
  VU a[kInterleave], b[kInterleave];
  for (int j = 0; j < kInterleave; ++j) {
    a[j] = (lane + (pair0 + j * simd::kLanes)) * kA + static_cast<uint32_t>(seed);
    b[j] = (lane + (pair0 + j * simd::kLanes)) * kB + static_cast<uint32_t>(seed >> 32);
  }
  const VU step_a = SplatU(kA * kInterleave * simd::kLanes);
  const VU step_b = SplatU(kB * kInterleave * simd::kLanes);
  const VF vsd = simd::Splat(sd);
  for (int64_t p = 0; p < n / 2; p += kInterleave * simd::kLanes) {
    VU h1[kInterleave], h2[kInterleave];
    VF u1[kInterleave], u2[kInterleave], radius[kInterleave], s[kInterleave], c[kInterleave];
    for (int j = 0; j < kInterleave; ++j) {
      h1[j] = Mix32(a[j]);
      h2[j] = Mix32(b[j]);
      a[j] += step_a;
      b[j] += step_b;
    }
    // 24-bit integers: exact through int32 (which converts in vectors).
    for (int j = 0; j < kInterleave; ++j) {
      u1[j] = simd::MulAdd(__builtin_convertvector((VI)(h1[j] >> 8), VF), simd::Splat(0x1.0p-24f),
                           simd::Splat(0x1.0p-25f));  // (0, 1)
      u2[j] = __builtin_convertvector((VI)(h2[j] >> 8), VF) * simd::Splat(0x1.0p-24f);
    }
    for (int j = 0; j < kInterleave; ++j) u1[j] = LogUnit(u1[j]);
    for (int j = 0; j < kInterleave; ++j) radius[j] = vsd * simd::SqrtV(simd::Splat(-2.0f) * u1[j]);
    for (int j = 0; j < kInterleave; ++j) SinCos2Pi(u2[j], &s[j], &c[j]);
    for (int j = 0; j < kInterleave; ++j) {
      // Pair q's r*cos at q's group's position q % 16, r*sin 16 after.
      const int64_t q = p + j * simd::kLanes;
      float* o = out + q / kGroupPairs * kGroup + q % kGroupPairs;
      simd::Store(o, radius[j] * c[j]);
      simd::Store(o + kGroupPairs, radius[j] * s[j]);
    }
  }
}

// f32 -> bf16, round to nearest even, kLanes at a time (finite values);
// v keeps the rounded values (as f32).
inline void StoreBf16(float* v, int64_t n, uint16_t* d) {
  typedef uint16_t VH __attribute__((vector_size(simd::kLanes * 2)));
  int64_t i = 0;
  for (; i + simd::kLanes <= n; i += simd::kLanes) {
    VU w = (VU)simd::Load(v + i);
    w = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
    const VH h = __builtin_convertvector(w, VH);
    std::memcpy(d + i, &h, sizeof(h));
    simd::Store(v + i, (VF)(w << 16));
  }
  for (; i < n; ++i) {
    d[i] = hlo::F32ToBf16(v[i]);
    v[i] = hlo::Bf16ToF32(d[i]);
  }
}

// Stores n values at element `first` of `lit`; for bf16, v keeps the
// rounded values.
void StoreValues(Literal& lit, int64_t first, float* v, int64_t n) {
  switch (lit.shape().element_type()) {
    case PrimitiveType::kF32:
      std::memcpy(lit.data<float>() + first, v, n * sizeof(float));
      return;
    case PrimitiveType::kBF16:
      StoreBf16(v, n, lit.data<uint16_t>() + first);
      return;
    case PrimitiveType::kF64: {
      double* d = lit.data<double>() + first;
      for (int64_t i = 0; i < n; ++i) d[i] = v[i];
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) lit.SetFromDouble(first + i, v[i]);
  }
}

static_assert(kRandomChunk % kBlock == 0 && kBlock % kGenUnit == 0 &&
              kGroupPairs % simd::kLanes == 0);

// Running log-sum-exp of part of a row: sum of exp(x - max).
struct Piece {
  int64_t row;
  double max;
  double sum;
};

// Adds (max m, sum s) into p (p.sum == 0: empty).
void Merge(Piece& p, double m, double s) {
  if (p.sum == 0) {
    p.max = m;
    p.sum = s;
  } else if (m > p.max) {
    p.sum = p.sum * std::exp(p.max - m) + s;
    p.max = m;
  } else {
    p.sum += s * std::exp(m - p.max);
  }
}

// Max and sum of exp(x*scale - max) of n stored values (n <= kBlock): the
// sums in f32 lanes (at most kBlock / kLanes terms each), then in f64.
void BlockLse(const float* x, int64_t n, float scale, double* max_out, double* sum_out) {
  const VF vscale = simd::Splat(scale);
  VF vmax = simd::Splat(-INFINITY);
  int64_t k = 0;
  for (; k + simd::kLanes <= n; k += simd::kLanes) vmax = simd::Max(vmax, LoadScaled(x, k, vscale));
  float mx = simd::ReduceMax(vmax);
  for (int64_t j = k; j < n; ++j) mx = std::max(mx, ScaledAt(x, j, scale));
  const VF vmx = simd::Splat(mx);
  // Two vectors a step, one range test for both (as simd::StoreExpV2):
  // the two exp chains overlap.
  VF acc = simd::Splat(0.0f), acc2 = simd::Splat(0.0f);
  for (k = 0; k + 2 * simd::kLanes <= n; k += 2 * simd::kLanes) {
    const VF xa = LoadScaled(x, k, vscale) - vmx;
    const VF xb = LoadScaled(x, k + simd::kLanes, vscale) - vmx;
    const simd::ExpParts pa = simd::ExpReduce(xa), pb = simd::ExpReduce(xb);
    if (pa.fast && pb.fast) {
      acc += simd::ExpFast(pa);
      acc2 += simd::ExpFast(pb);
    } else {
      acc += simd::ExpGeneral(xa, pa);
      acc2 += simd::ExpGeneral(xb, pb);
    }
  }
  acc += acc2;
  for (; k + simd::kLanes <= n; k += simd::kLanes) {
    acc += simd::ExpV(LoadScaled(x, k, vscale) - vmx);
  }
  if (k < n) {
    float tail[simd::kLanes];
    for (int l = 0; l < simd::kLanes; ++l) {
      tail[l] = k + l < n ? ScaledAt(x, k + l, scale) : -INFINITY;
    }
    acc += simd::ExpV(simd::Load(tail) - vmx);
  }
  double s = 0;
  for (int l = 0; l < simd::kLanes; ++l) s += acc[l];
  *max_out = mx;
  *sum_out = s;
}

// Adds the stored values x[0, n), elements [first, first + n) of the
// array, to the chunk's pieces, split at row boundaries.
void AddToPieces(const float* x, int64_t first, int64_t n, const RowLseRequest& req,
                 std::vector<Piece>& pieces) {
  const int64_t v = req.row_length;
  for (int64_t i = first; i < first + n;) {
    const int64_t row = i / v;
    const int64_t end = std::min(first + n, (row + 1) * v);
    if (pieces.empty() || pieces.back().row != row) pieces.push_back({row, 0, 0});
    double m, s;
    BlockLse(x + (i - first), end - i, req.scale, &m, &s);
    Merge(pieces.back(), m, s);
    i = end;
  }
}

}  // namespace

void FillNormal(Literal& lit, uint64_t stream, double stddev, const RowLseRequest* lse) {
  const int64_t n = lit.num_elements();
  const int64_t chunks = (n + kRandomChunk - 1) / kRandomChunk;
  const float sd = static_cast<float>(stddev);
  const PrimitiveType type = lit.shape().element_type();
  const bool stats = lse != nullptr && lse->lse != nullptr && lse->row_length > 0 &&
                     (type == PrimitiveType::kF32 || type == PrimitiveType::kBF16);
  std::vector<std::vector<Piece>> pieces(stats ? chunks : 0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) float out[kBlock];
    const uint64_t seed = RandomChunkSeed(stream, c);
    const int64_t len = std::min(kRandomChunk, n - c * kRandomChunk);
    for (int64_t b = 0; b < len; b += kBlock) {
      const int64_t m = std::min(kBlock, len - b);
      NormalValues(seed, b, (m + kGenUnit - 1) / kGenUnit * kGenUnit, sd, out);
      const int64_t at = c * kRandomChunk + b;
      StoreValues(lit, at, out, m);
      if (stats) AddToPieces(out, at, m, *lse, pieces[c]);
    }
  }
  if (!stats) return;
  const int64_t rows = n / lse->row_length;
  std::vector<Piece> total(rows, Piece{0, 0, 0});
  for (const std::vector<Piece>& chunk : pieces) {  // chunk order: fixed
    for (const Piece& p : chunk) {
      if (p.row < rows) Merge(total[p.row], p.max, p.sum);
    }
  }
  lse->lse->assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) (*lse->lse)[r] = total[r].max + std::log(total[r].sum);
}

}  // namespace tpuoff::tools
