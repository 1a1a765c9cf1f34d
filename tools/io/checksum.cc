#include "tools/io/checksum.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// GCC 12's AVX-512 intrinsics self-initialise their "undefined" operands,
// which -Wuninitialized reports in every caller (as in bench_floor_rows).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/float16.h"

// The 512-bit vector types below are only ever used inlined; without
// AVX-512 GCC warns that passing them by value would change the ABI.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tpuoff::tools {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr int64_t kChunkBytes = int64_t{1} << 20;
constexpr uint32_t kFnv32Offset = 0x811c9dc5u;
constexpr uint32_t kFnv32Prime = 0x01000193u;
constexpr int kLanes = 16;  // sum lanes
constexpr int kHashLanes = 32;        // 32-bit FNV-1a lanes
constexpr int64_t kBlockBytes = 128;  // one 4-byte word per hash lane

typedef uint64_t Q8 __attribute__((vector_size(64)));
typedef uint32_t U16 __attribute__((vector_size(64)));
typedef double D8 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));
typedef uint32_t W8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef uint16_t H8 __attribute__((vector_size(16)));

// 32 lanes of 32-bit FNV-1a over a chunk's 4-byte words, two vectors of
// sixteen: each step is one 32-bit multiply per vector (native on AVX2 and
// AVX-512; the old single 64-bit chain ran at ~1.2 GB/s, and 64-bit vector
// multiplies are emulated without AVX-512). A changed word always changes
// its lane (the multiply is a bijection); the lanes are folded into 64 bits.
class LaneHash {
 public:
  LaneHash() {
    lo_ = U16{} + kFnv32Offset;
    hi_ = lo_;
  }
  // The 128 bytes at p: word l into lane l.
  void Block(const uint8_t* p) {
    U16 a, b;
    std::memcpy(&a, p, sizeof(a));
    std::memcpy(&b, p + sizeof(a), sizeof(b));
    lo_ = (lo_ ^ a) * kFnv32Prime;
    hi_ = (hi_ ^ b) * kFnv32Prime;
  }
  // The chunk's last `tail` (< 128) bytes, word k into lane k, then the
  // chunk's length and the lanes in order through 64-bit FNV-1a.
  uint64_t Finish(const uint8_t* p, int64_t tail, int64_t chunk_bytes) const {
    uint32_t lane[kHashLanes];
    for (int l = 0; l < 16; ++l) {
      lane[l] = lo_[l];
      lane[l + 16] = hi_[l];
    }
    for (int64_t i = 0, k = 0; i < tail; i += 4, ++k) {
      uint32_t w = 0;
      std::memcpy(&w, p + i, static_cast<size_t>(std::min<int64_t>(4, tail - i)));
      lane[k] = (lane[k] ^ w) * kFnv32Prime;
    }
    uint64_t h = (kFnvOffset ^ static_cast<uint64_t>(chunk_bytes)) * kFnvPrime;
    for (uint32_t v : lane) h = (h ^ v) * kFnvPrime;
    return h;
  }

 private:
  U16 lo_, hi_;
};

uint64_t HashChunk(const uint8_t* p, int64_t bytes) {
  LaneHash h;
  const int64_t done = bytes / kBlockBytes * kBlockBytes;
  for (int64_t b = 0; b < done; b += kBlockBytes) h.Block(p + b);
  return h.Finish(p + done, bytes - done, bytes);
}

// Adds a chunk's lanes into c, in order.
void AddLanes(const double* sum, const double* abs_sum, Checksum* c) {
  double s = 0, a = 0;
  for (int l = 0; l < kLanes; ++l) {
    s += sum[l];
    a += abs_sum[l];
  }
  c->sum += s;
  c->abs_sum += a;
}

// The sums of n values at(0..n-1) in the defined lane order; NaNs and
// infinities are counted and left out.
template <typename At>
void SumValues(int64_t n, At at, Checksum* c) {
  double sum[kLanes] = {}, abs_sum[kLanes] = {};
  auto add = [&](int lane, double x) {
    const bool nan = x != x;
    const bool inf = std::fabs(x) == std::numeric_limits<double>::infinity();
    c->nan_count += nan;
    c->pos_inf_count += inf && x > 0;
    c->neg_inf_count += inf && x < 0;
    if (!nan && !inf) {
      sum[lane] += x;
      abs_sum[lane] += std::fabs(x);
    }
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) add(l, at(i + l));
  }
  for (; i < n; ++i) add(0, at(i));
  AddLanes(sum, abs_sum, c);
}

// Vector sums of f32 (E = float) or bf16 (E = uint16_t) elements, sixteen
// lanes as two vectors of eight doubles; `special` records an exponent of
// all ones (NaN or infinity) in any lane.
template <typename E>
struct GroupSums {
  static constexpr int64_t kGroupBytes = kLanes * sizeof(E);
  D8 sum_lo = {}, sum_hi = {}, abs_lo = {}, abs_hi = {};

  // Inlined: a D8 passed by value goes through memory without AVX-512.
  __attribute__((always_inline)) static D8 Abs(D8 d) {
    return (D8)((Q8)d & ~(uint64_t{1} << 63));
  }

#if defined(__AVX512F__) && defined(__AVX512DQ__)
  // Sixteen elements as one 512-bit vector of f32 (GCC splits the generic
  // conversions below into 128-bit pieces).
  void Add(const uint8_t* p) {
    __m512i w;
    if constexpr (sizeof(E) == 2) {
      w = _mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16);
    } else {
      w = _mm512_loadu_si512(p);
    }
    const __m512i exponent = _mm512_set1_epi32(0x7f800000);
    special_mask |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(w, exponent), exponent);
    const __m512 f = _mm512_castsi512_ps(w);
    Accumulate((D8)_mm512_cvtps_pd(_mm512_castps512_ps256(f)),
               (D8)_mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1)));
  }
  bool Special() const { return special_mask != 0; }
  __mmask16 special_mask = 0;
#else
  static W8 Load8(const uint8_t* p) {
    W8 w;
    if constexpr (sizeof(E) == 2) {
      H8 h;
      std::memcpy(&h, p, sizeof(h));
      w = __builtin_convertvector(h, W8) << 16;
    } else {
      std::memcpy(&w, p, sizeof(w));
    }
    return w;
  }
  void Add(const uint8_t* p) {  // sixteen elements
    const W8 lo = Load8(p), hi = Load8(p + 8 * sizeof(E));
    special |= ((lo & 0x7f800000u) == 0x7f800000u) | ((hi & 0x7f800000u) == 0x7f800000u);
    Accumulate(__builtin_convertvector((F8)lo, D8), __builtin_convertvector((F8)hi, D8));
  }
  bool Special() const {
    for (int l = 0; l < 8; ++l) {
      if (special[l]) return true;
    }
    return false;
  }
  I8 special = {};
#endif

  __attribute__((always_inline)) void Accumulate(D8 dlo, D8 dhi) {
    sum_lo += dlo;
    sum_hi += dhi;
    abs_lo += Abs(dlo);
    abs_hi += Abs(dhi);
  }
};

float ElementAsFloat(const uint8_t* p, float) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return f;
}
float ElementAsFloat(const uint8_t* p, uint16_t) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return hlo::Bf16ToF32(h);
}

// One pass over a chunk of f32 or bf16 elements: its hash, and its sums
// when every element is finite (then returns true; else nothing is added
// and the caller counts the specials with SumValues). Bit for bit the sums
// SumValues gives.
template <typename E>
bool HashAndSumChunk(const uint8_t* p, int64_t bytes, Checksum* c) {
  LaneHash hash;
  GroupSums<E> s;
  const int64_t blocks_end = bytes / kBlockBytes * kBlockBytes;
  for (int64_t b = 0; b < blocks_end; b += kBlockBytes) {
    hash.Block(p + b);
    for (int64_t g = 0; g < kBlockBytes; g += GroupSums<E>::kGroupBytes) s.Add(p + b + g);
  }
  c->hash = hash.Finish(p + blocks_end, bytes - blocks_end, bytes);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(E));
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t i = blocks_end / static_cast<int64_t>(sizeof(E)); i < whole; i += kLanes) {
    s.Add(p + i * sizeof(E));
  }
  if (s.Special()) return false;
  double sum[kLanes], abs_sum[kLanes];
  for (int l = 0; l < 8; ++l) {
    sum[l] = s.sum_lo[l];
    sum[l + 8] = s.sum_hi[l];
    abs_sum[l] = s.abs_lo[l];
    abs_sum[l + 8] = s.abs_hi[l];
  }
  for (int64_t i = whole; i < n; ++i) {
    const float f = ElementAsFloat(p + i * sizeof(E), E{});
    if (!std::isfinite(f)) return false;
    sum[0] += f;
    abs_sum[0] += std::fabs(f);
  }
  AddLanes(sum, abs_sum, c);
  return true;
}

// The checksum of one chunk: `first` is its first element (arrays).
Checksum ChunkChecksum(const hlo::Literal& lit, const uint8_t* p, int64_t bytes, int64_t first) {
  Checksum c;
  const bool array = lit.shape().IsArray();
  const hlo::PrimitiveType type = array ? lit.shape().element_type() : hlo::PrimitiveType::kTuple;
  if (type == hlo::PrimitiveType::kF32) {
    if (HashAndSumChunk<float>(p, bytes, &c)) return c;
    SumValues(bytes / 4, [p](int64_t i) { return double{ElementAsFloat(p + 4 * i, float{})}; }, &c);
    return c;
  }
  if (type == hlo::PrimitiveType::kBF16) {
    if (HashAndSumChunk<uint16_t>(p, bytes, &c)) return c;
    SumValues(bytes / 2, [p](int64_t i) { return double{ElementAsFloat(p + 2 * i, uint16_t{})}; },
              &c);
    return c;
  }
  c.hash = HashChunk(p, bytes);
  const int64_t width = array ? hlo::ByteWidth(type) : 0;
  if (width > 0 && bytes > 0) {
    SumValues(bytes / width, [&lit, first](int64_t i) { return lit.GetAsDouble(first + i); }, &c);
  }
  return c;
}

}  // namespace

Checksum ComputeChecksum(const hlo::Literal& literal) {
  // Fixed 1 MiB chunks, hashed and summed in parallel and combined in
  // order: the result does not depend on the number of threads.
  const uint8_t* raw = literal.raw();
  const int64_t size = literal.raw_size();
  const int64_t chunks = std::max<int64_t>(1, (size + kChunkBytes - 1) / kChunkBytes);
  const int64_t width =
      literal.shape().IsArray() ? std::max<int64_t>(1, hlo::ByteWidth(literal.shape().element_type()))
                                : 1;
  std::vector<Checksum> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunkBytes;
    const int64_t bytes = std::max<int64_t>(0, std::min(size - begin, kChunkBytes));
    part[k] = ChunkChecksum(literal, raw + begin, bytes, begin / width);
  }
  Checksum c;
  c.hash = kFnvOffset;
  for (const Checksum& p : part) {
    c.hash = (c.hash ^ p.hash) * kFnvPrime;
    c.sum += p.sum;
    c.abs_sum += p.abs_sum;
    c.nan_count += p.nan_count;
    c.pos_inf_count += p.pos_inf_count;
    c.neg_inf_count += p.neg_inf_count;
  }
  return c;
}

std::string FormatChecksum(const Checksum& c) {
  // Finite sums overflowing double could still meet as inf - inf: print any
  // NaN as "nan", never printf's "-nan".
  auto number = [](double v) {
    return std::isnan(v) ? std::string("nan") : absl::StrFormat("%.9g", v);
  };
  std::string s = absl::StrFormat("sum=%s abs_sum=%s hash=%016x", number(c.sum),
                                  number(c.abs_sum), c.hash);
  if (c.nan_count > 0) absl::StrAppend(&s, " nan=", c.nan_count);
  if (c.pos_inf_count > 0) absl::StrAppend(&s, " +inf=", c.pos_inf_count);
  if (c.neg_inf_count > 0) absl::StrAppend(&s, " -inf=", c.neg_inf_count);
  return s;
}

}  // namespace tpuoff::tools
