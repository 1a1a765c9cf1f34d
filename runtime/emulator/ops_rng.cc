// rng-bit-generator, bit-exact with XLA's RngBitGeneratorExpander (what
// XLA:CPU runs): Philox-4x32-10 (RNG_PHILOX and RNG_DEFAULT, XLA:CPU's
// default) and ThreeFry-2x32-20 (RNG_THREE_FRY) with XLA's counter layout,
// element order and state update (xla/hlo/builder/lib/prng.cc). And `rng`
// as XLA's RngExpander lowers it: Philox bits from a counter that
// rng-get-and-update-state advances, turned into uniform or normal
// (Box-Muller) values.
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloInstruction;
using hlo::PrimitiveType;
using hlo::Shape;

struct U128 {
  uint64_t lo = 0, hi = 0;
  U128 Plus(uint64_t d) const {
    U128 r{lo + d, hi};
    if (r.lo < lo) ++r.hi;
    return r;
  }
};

// Philox-4x32 with 10 rounds.
void Philox(uint32_t x[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{x[0]} * 0xD2511F53u;
    const uint64_t p1 = uint64_t{x[2]} * 0xCD9E8D57u;
    const uint32_t y[4] = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k0, static_cast<uint32_t>(p1),
                           static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k1, static_cast<uint32_t>(p0)};
    std::memcpy(x, y, sizeof(y));
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// Philox bits: `n` 32-bit words (or 64-bit ones when `wide`), from
// counter, counter+1, ... each giving 4 words; returns the next counter.
U128 PhiloxBits(uint64_t key, U128 counter, int64_t n, bool wide, void* out) {
  const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  const int64_t words = wide ? 2 * n : n;
  const int64_t blocks = (words + 3) / 4;
  for (int64_t i = 0; i < blocks; ++i) {
    const U128 c = counter.Plus(static_cast<uint64_t>(i));
    uint32_t x[4] = {static_cast<uint32_t>(c.lo), static_cast<uint32_t>(c.lo >> 32),
                     static_cast<uint32_t>(c.hi), static_cast<uint32_t>(c.hi >> 32)};
    Philox(x, k0, k1);
    if (wide) {
      const uint64_t v[2] = {x[0] | uint64_t{x[1]} << 32, x[2] | uint64_t{x[3]} << 32};
      for (int j = 0; j < 2 && 2 * i + j < n; ++j) static_cast<uint64_t*>(out)[2 * i + j] = v[j];
    } else {
      for (int j = 0; j < 4 && 4 * i + j < n; ++j) static_cast<uint32_t*>(out)[4 * i + j] = x[j];
    }
  }
  return counter.Plus(static_cast<uint64_t>(blocks));
}

uint32_t RotL(uint32_t v, int d) { return (v << d) | (v >> (32 - d)); }

// ThreeFry-2x32 with 20 rounds.
void ThreeFry(uint32_t x[2], uint32_t k0, uint32_t k1) {
  static constexpr int kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x[0] += ks[0];
  x[1] += ks[1];
  for (int group = 0; group < 5; ++group) {
    for (int r = 0; r < 4; ++r) {
      x[0] += x[1];
      x[1] = RotL(x[1], kRot[(group % 2) * 4 + r]);
      x[1] ^= x[0];
    }
    x[0] += ks[(group + 1) % 3];
    x[1] += ks[(group + 2) % 3] + static_cast<uint32_t>(group + 1);
  }
}

// XLA's SplitShapeIntoHalves: the dimension split in two (the first even
// one, else the first largest); -1 for a scalar.
int64_t SplitDimension(const std::vector<int64_t>& dims) {
  if (dims.empty()) return -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] % 2 == 0) return static_cast<int64_t>(i);
  }
  int64_t best = 0;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] > dims[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

// Calls fn(half_index, out_index_of_pair0, out_index_of_pair1 or -1) for
// each element of the half shape, in row-major order of the half shape:
// element (.., h, ..) of the half shape feeds (.., 2h, ..) and (.., 2h+1, ..).
template <typename Fn>
void ForHalfPairs(const std::vector<int64_t>& dims, Fn fn) {
  const int64_t s = SplitDimension(dims);
  if (s < 0) {
    fn(0, 0, -1);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < s; ++d) outer *= dims[d];
  for (size_t d = s + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t len = dims[s], half = (len + 1) / 2;
  int64_t k = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t h = 0; h < half; ++h) {
      for (int64_t i = 0; i < inner; ++i, ++k) {
        const int64_t p0 = (o * len + 2 * h) * inner + i;
        const int64_t p1 = 2 * h + 1 < len ? p0 + inner : -1;
        fn(k, p0, p1);
      }
    }
  }
}

// ThreeFry bits of `dims`: 32-bit words (or 64-bit when `wide`) from
// counter `state`; returns the next counter.
uint64_t ThreeFryBits(uint64_t key, uint64_t state, const std::vector<int64_t>& dims, bool wide,
                      void* out) {
  const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (wide) {
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t c = state + static_cast<uint64_t>(i);
      uint32_t x[2] = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)};
      ThreeFry(x, k0, k1);
      static_cast<uint64_t*>(out)[i] = x[0] | uint64_t{x[1]} << 32;
    }
    return state + static_cast<uint64_t>(n);
  }
  int64_t halves = 0;
  ForHalfPairs(dims, [&](int64_t k, int64_t p0, int64_t p1) {
    const uint64_t c = state + static_cast<uint64_t>(k);
    uint32_t x[2] = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)};
    ThreeFry(x, k0, k1);
    static_cast<uint32_t*>(out)[p0] = x[0];
    if (p1 >= 0) static_cast<uint32_t*>(out)[p1] = x[1];
    halves = k + 1;
  });
  return state + static_cast<uint64_t>(halves);
}

// Narrows 32-bit words to the low `bytes` bytes (XLA converts u32 -> u8/u16).
void Narrow(const std::vector<uint32_t>& words, int64_t bytes, void* out) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (bytes == 1) {
      static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(words[i]);
    } else {
      static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(words[i]);
    }
  }
}

}  // namespace

absl::Status RngBitGeneratorKernel(const HloInstruction& instr, const void* state_in,
                                   void* state_out, void* data_out) {
  const Shape& ss = instr.operand(0)->shape();
  const Shape& ds = instr.shape().tuple_shapes(1);
  const int64_t n = ss.dimensions(0);
  const int64_t bytes = hlo::ByteWidth(ds.element_type());
  if (hlo::ByteWidth(ss.element_type()) != 8) {
    return absl::UnimplementedError(absl::StrCat("rng-bit-generator %", instr.name(),
                                                 ": the emulator needs a 64-bit state, got ",
                                                 ss.ToString()));
  }
  const auto* s = static_cast<const uint64_t*>(state_in);
  auto* so = static_cast<uint64_t*>(state_out);
  const int64_t count = ds.num_elements();
  const bool wide = bytes == 8;
  std::vector<uint32_t> narrow(bytes < 4 ? count : 0);
  void* bits = bytes < 4 ? static_cast<void*>(narrow.data()) : data_out;
  const hlo::RngAlgorithm alg = instr.attrs().rng_algorithm;
  if (alg == hlo::RngAlgorithm::kThreeFry) {
    if (n != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rng-bit-generator %", instr.name(), ": RNG_THREE_FRY needs a u64[2] state, got ",
          ss.ToString()));
    }
    so[0] = s[0];
    so[1] = ThreeFryBits(s[0], s[1], ds.dimensions(), wide, bits);
  } else {
    // Philox (XLA:CPU's RNG_DEFAULT): key s[0]; a 128-bit counter in
    // s[1..2], or for a 2-word state (s[1], s[0]) with only the low word
    // written back.
    if (n < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rng-bit-generator %", instr.name(), ": RNG_PHILOX needs a state of at least 2 words, got ",
          ss.ToString()));
    }
    const U128 counter = n >= 3 ? U128{s[1], s[2]} : U128{s[1], s[0]};
    const U128 next = PhiloxBits(s[0], counter, count, wide, bits);
    std::memcpy(so, s, n * sizeof(uint64_t));
    so[1] = next.lo;
    if (n >= 3) so[2] = next.hi;
  }
  if (bytes < 4) Narrow(narrow, bytes, data_out);
  return absl::OkStatus();
}

int64_t RngStateDelta(const HloInstruction& rng) {
  const int64_t bytes = hlo::ByteWidth(rng.shape().element_type());
  return rng.shape().num_elements() * (bytes == 8 ? 2 : 1);
}

namespace {

// Uniform [a, b) from mantissa bits, in T arithmetic (XLA's
// ConvertRandomBitsToUniformFloatingPoint).
template <typename T, typename Bits>
T UniformFromBits(Bits bits, T a, T b) {
  constexpr int kMantissa = sizeof(T) == 4 ? 23 : 52;
  const T v = static_cast<T>(bits >> (8 * sizeof(Bits) - kMantissa)) *
              static_cast<T>(std::ldexp(1.0, -kMantissa));
  return v * (b - a) + a;
}

// rng of f32/f64 values (f16/bf16 are computed as f32 by the caller).
template <typename T>
void RngFloat(const HloInstruction& instr, uint64_t key, U128 counter, T a, T b, T* out) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const std::vector<int64_t>& dims = instr.shape().dimensions();
  const int64_t n = instr.shape().num_elements();
  if (instr.attrs().distribution == hlo::RngDistribution::kUniform) {
    std::vector<Bits> bits(n);
    PhiloxBits(key, counter, n, sizeof(T) == 8, bits.data());
    for (int64_t i = 0; i < n; ++i) out[i] = UniformFromBits<T>(bits[i], a, b);
    return;
  }
  // Normal: uniforms over the shape with its split dimension doubled in
  // pairs, then Box-Muller on each (first, second) pair.
  const int64_t s = SplitDimension(dims);
  int64_t halves = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    halves *= static_cast<int64_t>(d) == s ? (dims[d] + 1) / 2 : dims[d];
  }
  std::vector<Bits> bits(2 * halves);
  PhiloxBits(key, counter, 2 * halves, sizeof(T) == 8, bits.data());
  // The concat shape is [.., half, 2, ..]: pair (h, 0) and (h, 1) are
  // `inner` apart in it.
  int64_t inner = 1;
  for (size_t d = s + 1; s >= 0 && d < dims.size(); ++d) inner *= dims[d];
  const T two_pi = static_cast<T>(2.0f * M_PI);
  const T tiny = static_cast<T>(1.0e-7f);
  ForHalfPairs(dims, [&](int64_t k, int64_t p0, int64_t p1) {
    const int64_t i = k / inner, j = k % inner;  // (outer*half) row, inner column
    const T x0 = UniformFromBits<T>(bits[(2 * i) * inner + j], T(0), T(1));
    const T x1 = UniformFromBits<T>(bits[(2 * i + 1) * inner + j], T(0), T(1));
    const T u1 = std::max(x0, tiny);
    const T v1 = two_pi * x1;
    const T u2 = std::sqrt(T(-2) * std::log(u1));
    out[p0] = a + b * (std::sin(v1) * u2);
    if (p1 >= 0) out[p1] = a + b * (std::cos(v1) * u2);
  });
}

// rng of integers: bits % (b - a) split in halves as XLA does.
template <typename T>
void RngInt(const HloInstruction& instr, uint64_t key, U128 counter, T a, T b, T* out) {
  using U = std::make_unsigned_t<T>;
  const int64_t n = instr.shape().num_elements();
  std::vector<U> bits(n);
  PhiloxBits(key, counter, n, sizeof(T) == 8, bits.data());
  const U range = static_cast<U>(b) - static_cast<U>(a);
  for (int64_t i = 0; i < n; ++i) {
    const U dist = range == 0 ? bits[i] : bits[i] % range;
    const U half = dist >> 1;
    out[i] = static_cast<T>(static_cast<U>(a) + half + (dist - half));
  }
}

}  // namespace

absl::Status RngKernel(const HloInstruction& instr, const void* a, const void* b,
                       const uint64_t state[2], void* out) {
  // XLA's key is a random 64-bit value drawn when the module is compiled;
  // tpuoff uses this fixed one (see README).
  constexpr uint64_t kKey = 0;
  const U128 counter{state[0], state[1]};
  const PrimitiveType t = instr.shape().element_type();
  const int64_t n = instr.shape().num_elements();
  switch (t) {
    case PrimitiveType::kF32:
      RngFloat<float>(instr, kKey, counter, *static_cast<const float*>(a),
                      *static_cast<const float*>(b), static_cast<float*>(out));
      return absl::OkStatus();
    case PrimitiveType::kF64:
      RngFloat<double>(instr, kKey, counter, *static_cast<const double*>(a),
                       *static_cast<const double*>(b), static_cast<double*>(out));
      return absl::OkStatus();
    case PrimitiveType::kF16:
    case PrimitiveType::kBF16: {
      auto widen = [&](const void* p) {
        const uint16_t v = *static_cast<const uint16_t*>(p);
        return t == PrimitiveType::kBF16 ? hlo::Bf16ToF32(v) : hlo::F16ToF32(v);
      };
      std::vector<float> f(n);
      RngFloat<float>(instr, kKey, counter, widen(a), widen(b), f.data());
      for (int64_t i = 0; i < n; ++i) {
        static_cast<uint16_t*>(out)[i] =
            t == PrimitiveType::kBF16 ? hlo::F32ToBf16(f[i]) : hlo::F32ToF16(f[i]);
      }
      return absl::OkStatus();
    }
    case PrimitiveType::kS32:
      RngInt<int32_t>(instr, kKey, counter, *static_cast<const int32_t*>(a),
                      *static_cast<const int32_t*>(b), static_cast<int32_t*>(out));
      return absl::OkStatus();
    case PrimitiveType::kU32:
      RngInt<uint32_t>(instr, kKey, counter, *static_cast<const uint32_t*>(a),
                       *static_cast<const uint32_t*>(b), static_cast<uint32_t*>(out));
      return absl::OkStatus();
    case PrimitiveType::kS64:
      RngInt<int64_t>(instr, kKey, counter, *static_cast<const int64_t*>(a),
                      *static_cast<const int64_t*>(b), static_cast<int64_t*>(out));
      return absl::OkStatus();
    case PrimitiveType::kU64:
      RngInt<uint64_t>(instr, kKey, counter, *static_cast<const uint64_t*>(a),
                       *static_cast<const uint64_t*>(b), static_cast<uint64_t*>(out));
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(absl::StrCat("rng %", instr.name(), " of ",
                                                   hlo::PrimitiveTypeName(t),
                                                   " is not supported (XLA supports 32/64-bit "
                                                   "integers and floats)"));
  }
}

}  // namespace tpuoff::runtime
