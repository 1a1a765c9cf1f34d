#include "runtime/cpu/elementwise_kernels.h"

#include <immintrin.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "runtime/cpu/elementwise_ops.h"
#include "runtime/cpu/simd_math.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloOpcode;
using hlo::PrimitiveType;
using namespace elementwise;  // NOLINT: the op structs and rounding helpers


// Ops with a vectorised f32 array form (runtime/cpu/simd_math.h); other ops
// and types use the scalar Apply.
template <class Op>
constexpr void (*kVectorF32)(const float*, float*, int64_t) = nullptr;
template <>
constexpr void (*kVectorF32<ExpOp>)(const float*, float*, int64_t) = &simd::Exp;
template <>
constexpr void (*kVectorF32<LogOp>)(const float*, float*, int64_t) = &simd::Log;
template <>
constexpr void (*kVectorF32<TanhOp>)(const float*, float*, int64_t) = &simd::Tanh;

template <class Op, typename C, int R>
void UnaryLoop(const void* a, void* out, int64_t n) {
  const C* x = static_cast<const C*>(a);
  C* o = static_cast<C*>(out);
  if constexpr (std::is_same_v<C, float> && kVectorF32<Op> != nullptr) {
    kVectorF32<Op>(x, o, n);
    if constexpr (R != kNone) {
      for (int64_t i = 0; i < n; ++i) o[i] = Rnd<C, R>(o[i]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = Rnd<C, R>(Op::template Apply<C>(x[i]));
}

template <class Op>
void UnaryPredLoop(const void* a, void* out, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(a);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = Op::ApplyPred(x[i]);
}

// S: which operand is a single element read for every i (ScalarOperand).
template <int S, typename C>
inline C Arg(const C* p, int64_t i, int which) {
  return S == which ? p[0] : p[i];
}

template <class Op, typename C, int R, int S>
void BinaryLoop(const void* a, const void* b, void* out, int64_t n) {
  const C* x = static_cast<const C*>(a);
  const C* y = static_cast<const C*>(b);
  C* o = static_cast<C*>(out);
  for (int64_t i = 0; i < n; ++i) {
    o[i] = Rnd<C, R>(Op::template Apply<C>(Arg<S>(x, i, 1), Arg<S>(y, i, 2)));
  }
}

template <class Op, int S>
void BinaryPredLoop(const void* a, const void* b, void* out, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(a);
  const uint8_t* y = static_cast<const uint8_t*>(b);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = Op::ApplyPred(Arg<S>(x, i, 1), Arg<S>(y, i, 2));
}

absl::Status Unsupported(absl::string_view what, PrimitiveType t) {
  return absl::UnimplementedError(absl::StrCat(
      what, " is not defined for element type ", hlo::PrimitiveTypeName(t)));
}

template <class Op>
struct UnaryMaker {
  template <typename C, int R>
  static UnaryKernel Make() {
    if constexpr (kAccepts<Op, C>) {
      return &UnaryLoop<Op, C, R>;
    }
    return nullptr;
  }
  static UnaryKernel MakePred() {
    if constexpr ((Op::kCats & kPredOnly) != 0) return &UnaryPredLoop<Op>;
    return nullptr;
  }
};
template <class Op>
UnaryKernel MakeUnary(PrimitiveType t) {
  TPUOFF_TYPE_DISPATCH(t, UnaryMaker<Op>)
}

template <class Op, int S>
struct BinaryMaker {
  template <typename C, int R>
  static BinaryKernel Make() {
    if constexpr (kAccepts<Op, C>) {
      return &BinaryLoop<Op, C, R, S>;
    }
    return nullptr;
  }
  static BinaryKernel MakePred() {
    if constexpr ((Op::kCats & kPredOnly) != 0) return &BinaryPredLoop<Op, S>;
    return nullptr;
  }
};
template <class Op, int S>
BinaryKernel MakeBinaryS(PrimitiveType t) {
  using M = BinaryMaker<Op, S>;
  TPUOFF_TYPE_DISPATCH(t, M)
}
template <class Op>
BinaryKernel MakeBinary(PrimitiveType t, ScalarOperand s) {
  switch (s) {
    case ScalarOperand::kNone: return MakeBinaryS<Op, 0>(t);
    case ScalarOperand::kFirst: return MakeBinaryS<Op, 1>(t);
    case ScalarOperand::kSecond: return MakeBinaryS<Op, 2>(t);
  }
  return nullptr;
}

// ----- loads / stores --------------------------------------------------------
template <typename S, typename C, int R>
C LoadOne(S s) {
  if constexpr (R == kBf16) return hlo::Bf16ToF32(s);
  else if constexpr (R == kF16) return hlo::F16ToF32(s);
  else return static_cast<C>(s);
}
template <typename S, typename C, int R>
S StoreOne(C c) {
  if constexpr (R == kBf16) return hlo::F32ToBf16(c);
  else if constexpr (R == kF16) return hlo::F32ToF16(c);
  else return static_cast<S>(c);
}
template <typename S, typename C, int R>
void LoadLoop(const void* src, int64_t stride, void* out, int64_t n) {
  const S* s = static_cast<const S*>(src);
  C* o = static_cast<C*>(out);
  if (stride == 1) {
    if constexpr (std::is_same_v<S, C>) {
      std::memcpy(o, s, n * sizeof(C));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = LoadOne<S, C, R>(s[i]);
    }
  } else if (stride == 0) {
    const C v = n > 0 ? LoadOne<S, C, R>(s[0]) : C();
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = LoadOne<S, C, R>(s[i * stride]);
  }
}
template <typename S, typename C, int R>
void StoreLoop(const void* in, void* dst, int64_t n) {
  const C* c = static_cast<const C*>(in);
  S* d = static_cast<S*>(dst);
  if constexpr (std::is_same_v<S, C>) {
    std::memmove(d, c, n * sizeof(C));  // may be in place (a fused identity)
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = StoreOne<S, C, R>(c[i]);
  }
}

// Streaming (non-temporal) stores for outputs far larger than the caches:
// whole aligned 64-byte lines bypass the cache, so the line is not read
// first (no read-for-ownership) and does not evict the inputs.
template <typename S, typename C, int R>
void StreamStoreLoop(const void* in, void* dst, int64_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  const C* c = static_cast<const C*>(in);
  S* d = static_cast<S*>(dst);
  constexpr int64_t kLine = 64 / sizeof(S);
  int64_t i = 0;
  // Head up to the first aligned line.
  for (; i < n && (reinterpret_cast<uintptr_t>(d + i) & 63) != 0; ++i) d[i] = StoreOne<S, C, R>(c[i]);
  alignas(64) S line[kLine];
  for (; i + kLine <= n; i += kLine) {
    for (int64_t j = 0; j < kLine; ++j) line[j] = StoreOne<S, C, R>(c[i + j]);
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_load_si512(line));
#else
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(line)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i) + 1, _mm256_load_si256(reinterpret_cast<const __m256i*>(line) + 1));
#endif
  }
  for (; i < n; ++i) d[i] = StoreOne<S, C, R>(c[i]);
  _mm_sfence();  // order the streamed lines before the loop's completion
#else
  StoreLoop<S, C, R>(in, dst, n);
#endif
}

}  // namespace

void FillElements(void* dst, int64_t bytes, const void* value, int width, bool streaming) {
  alignas(64) uint8_t line[64];
  for (int i = 0; i < 64; i += width) std::memcpy(line + i, value, width);
  uint8_t* d = static_cast<uint8_t*>(dst);
  uint8_t* const end = d + bytes;
  // Head up to the first aligned line (a whole number of elements: dst is
  // aligned to the width, which divides 64).
  const int64_t head = std::min<int64_t>(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, line, head);
  d += head;
  if (streaming) {  // whole lines past the caches, without reading them first
#if defined(__AVX512F__)
    const __m512i v = _mm512_load_si512(line);
    for (; d + 64 <= end; d += 64) _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v);
#elif defined(__AVX__)
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(line));
    for (; d + 64 <= end; d += 64) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d), v);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d) + 1, v);
    }
#else
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(line));
    for (; d + 64 <= end; d += 64) {
      for (int k = 0; k < 4; ++k) _mm_stream_si128(reinterpret_cast<__m128i*>(d) + k, v);
    }
#endif
    _mm_sfence();
  }
  for (; d + 64 <= end; d += 64) std::memcpy(d, line, 64);
  std::memcpy(d, line, end - d);
}

namespace {

// ----- compare ---------------------------------------------------------------
template <typename C>
auto TotalOrderKey(C v) {
  if constexpr (std::is_same_v<C, float>) {
    int32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits < 0 ? bits ^ 0x7fffffff : bits;
  } else if constexpr (std::is_same_v<C, double>) {
    int64_t bits;
    std::memcpy(&bits, &v, 8);
    return bits < 0 ? bits ^ 0x7fffffffffffffffLL : bits;
  } else {
    return v;
  }
}
template <typename C, hlo::ComparisonDirection D, bool kTotal, int S>
void CompareLoop(const void* a, const void* b, void* out, int64_t n) {
  using hlo::ComparisonDirection;
  const C* x = static_cast<const C*>(a);
  const C* y = static_cast<const C*>(b);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    auto l = Arg<S>(x, i, 1);
    auto r = Arg<S>(y, i, 2);
    if constexpr (kIsComplex<C>) {
      if constexpr (D == ComparisonDirection::kEq) o[i] = l == r;
      if constexpr (D == ComparisonDirection::kNe) o[i] = l != r;
    } else if constexpr (kTotal) {
      auto lk = TotalOrderKey(l), rk = TotalOrderKey(r);
      if constexpr (D == ComparisonDirection::kEq) o[i] = lk == rk;
      if constexpr (D == ComparisonDirection::kNe) o[i] = lk != rk;
      if constexpr (D == ComparisonDirection::kGe) o[i] = lk >= rk;
      if constexpr (D == ComparisonDirection::kGt) o[i] = lk > rk;
      if constexpr (D == ComparisonDirection::kLe) o[i] = lk <= rk;
      if constexpr (D == ComparisonDirection::kLt) o[i] = lk < rk;
    } else {
      if constexpr (D == ComparisonDirection::kEq) o[i] = l == r;
      if constexpr (D == ComparisonDirection::kNe) o[i] = l != r;
      if constexpr (D == ComparisonDirection::kGe) o[i] = l >= r;
      if constexpr (D == ComparisonDirection::kGt) o[i] = l > r;
      if constexpr (D == ComparisonDirection::kLe) o[i] = l <= r;
      if constexpr (D == ComparisonDirection::kLt) o[i] = l < r;
    }
  }
}
template <hlo::ComparisonDirection D, bool kTotal, int S>
struct CompareMaker {
  template <typename C, int R>
  static BinaryKernel Make() {
    if constexpr (kIsComplex<C>) {  // complex numbers are only (in)equal
      if constexpr (!kTotal && (D == hlo::ComparisonDirection::kEq ||
                                D == hlo::ComparisonDirection::kNe)) {
        return &CompareLoop<C, D, kTotal, S>;
      }
      return nullptr;
    } else {
      return &CompareLoop<C, D, kTotal, S>;
    }
  }
  static BinaryKernel MakePred() { return &CompareLoop<uint8_t, D, kTotal, S>; }
};
template <hlo::ComparisonDirection D, bool kTotal, int S>
BinaryKernel MakeCompareS(PrimitiveType t) {
  using M = CompareMaker<D, kTotal, S>;
  TPUOFF_TYPE_DISPATCH(t, M)
}
template <hlo::ComparisonDirection D, bool kTotal>
BinaryKernel MakeCompare(PrimitiveType t, ScalarOperand s) {
  switch (s) {
    case ScalarOperand::kNone: return MakeCompareS<D, kTotal, 0>(t);
    case ScalarOperand::kFirst: return MakeCompareS<D, kTotal, 1>(t);
    case ScalarOperand::kSecond: return MakeCompareS<D, kTotal, 2>(t);
  }
  return nullptr;
}

// ----- convert ---------------------------------------------------------------
template <typename To, typename From>
To ConvertValue(From v) {
  if constexpr (kIsComplex<To>) {
    if constexpr (kIsComplex<From>) {
      return To(static_cast<typename To::value_type>(v.real()),
                static_cast<typename To::value_type>(v.imag()));
    } else {
      return To(static_cast<typename To::value_type>(v));
    }
  } else if constexpr (kIsFloat<From> && !kIsFloat<To>) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) {
      return std::numeric_limits<To>::lowest();
    }
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}
template <typename CF, typename CT, int RT, bool kToPred>
void ConvertLoop(const void* a, void* out, int64_t n) {
  const CF* x = static_cast<const CF*>(a);
  CT* o = static_cast<CT*>(out);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kToPred) {
      o[i] = x[i] != CF(0);
    } else {
      o[i] = Rnd<CT, RT>(ConvertValue<CT>(x[i]));
    }
  }
}
// Complex -> real converts do not exist in XLA (real/imag/abs take parts).
template <typename CF>
struct ConvertToMaker {
  template <typename CT, int RT>
  static UnaryKernel Make() {
    if constexpr (kIsComplex<CF> && !kIsComplex<CT>) {
      return nullptr;
    } else {
      return &ConvertLoop<CF, CT, RT, false>;
    }
  }
  static UnaryKernel MakePred() {
    if constexpr (kIsComplex<CF>) {
      return nullptr;
    } else {
      return &ConvertLoop<CF, uint8_t, kNone, true>;
    }
  }
};
struct ConvertFromMaker {
  // Returns a function that, given the target type, makes the kernel.
  using Fn = UnaryKernel (*)(PrimitiveType);
  template <typename CF, int RF>
  static Fn Make() {
    return [](PrimitiveType to) -> UnaryKernel {
      TPUOFF_TYPE_DISPATCH(to, ConvertToMaker<CF>)
    };
  }
  static Fn MakePred() {
    // pred -> anything: 0/1 (pred is already 0/1 uint8).
    return [](PrimitiveType to) -> UnaryKernel {
      TPUOFF_TYPE_DISPATCH(to, ConvertToMaker<uint8_t>)
    };
  }
};
ConvertFromMaker::Fn MakeConvertFrom(PrimitiveType t) {
  TPUOFF_TYPE_DISPATCH(t, ConvertFromMaker)
}

// ----- select / clamp / is-finite / iota -------------------------------------
// S: 1 = on_true, 2 = on_false is a single element.
template <typename C, int S>
void SelectLoop(const void* p, const void* a, const void* b, void* out,
                int64_t n) {
  const uint8_t* pr = static_cast<const uint8_t*>(p);
  const C* x = static_cast<const C*>(a);
  const C* y = static_cast<const C*>(b);
  C* o = static_cast<C*>(out);
  for (int64_t i = 0; i < n; ++i) {
    // Both loads unconditionally, so the loop vectorises to a blend.
    const C a = Arg<S>(x, i, 1), b = Arg<S>(y, i, 2);
    o[i] = pr[i] ? a : b;
  }
}
template <int S>
struct SelectMaker {
  template <typename C, int R>
  static TernaryKernel Make() { return &SelectLoop<C, S>; }
  static TernaryKernel MakePred() { return &SelectLoop<uint8_t, S>; }
};
template <typename C>
void ClampLoop(const void* lo, const void* x, const void* hi, void* out,
               int64_t n) {
  const C* l = static_cast<const C*>(lo);
  const C* v = static_cast<const C*>(x);
  const C* h = static_cast<const C*>(hi);
  C* o = static_cast<C*>(out);
  for (int64_t i = 0; i < n; ++i) {
    o[i] = MinOp::Apply<C>(MaxOp::Apply<C>(v[i], l[i]), h[i]);
  }
}
struct ClampMaker {
  template <typename C, int R>
  static TernaryKernel Make() {
    if constexpr (kIsComplex<C>) {
      return nullptr;  // complex numbers are unordered
    } else {
      return &ClampLoop<C>;
    }
  }
  static TernaryKernel MakePred() { return nullptr; }
};
template <typename C>
void IsFiniteLoop(const void* a, void* out, int64_t n) {
  const C* x = static_cast<const C*>(a);
  uint8_t* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = std::isfinite(x[i]);
}
template <typename C>
void IotaLoop(int64_t start, void* out, int64_t n) {
  C* o = static_cast<C*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<C>(start + i);
}
template <typename T>
void ComplexIotaLoop(int64_t start, void* out, int64_t n) {
  std::complex<T>* o = static_cast<std::complex<T>*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = std::complex<T>(static_cast<T>(start + i), 0);
}

// real / imag / abs of complex values (component type out); real and imag
// of real values are the value and 0, as XLA defines them.
template <typename T, hlo::HloOpcode kOp>
void ComplexPartLoop(const void* a, void* out, int64_t n) {
  const std::complex<T>* x = static_cast<const std::complex<T>*>(a);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kOp == hlo::HloOpcode::kReal) o[i] = x[i].real();
    if constexpr (kOp == hlo::HloOpcode::kImag) o[i] = x[i].imag();
    if constexpr (kOp == hlo::HloOpcode::kAbs) o[i] = std::abs(x[i]);  // hypot: no overflow
  }
}
template <typename C>
void ImagOfRealLoop(const void*, void* out, int64_t n) {
  C* o = static_cast<C*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = C(0);
}
template <typename C>
void CopyLoop(const void* a, void* out, int64_t n) {
  std::memmove(out, a, n * sizeof(C));
}
// complex(re, im). S: which part is a single element.
template <typename T, int S>
void MakeComplexLoop(const void* a, const void* b, void* out, int64_t n) {
  const T* re = static_cast<const T*>(a);
  const T* im = static_cast<const T*>(b);
  std::complex<T>* o = static_cast<std::complex<T>*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = std::complex<T>(Arg<S>(re, i, 1), Arg<S>(im, i, 2));
}

}  // namespace

int ComputeWidth(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred:
    case PrimitiveType::kS8:
    case PrimitiveType::kU8: return 1;
    case PrimitiveType::kS16:
    case PrimitiveType::kU16: return 2;
    case PrimitiveType::kS64:
    case PrimitiveType::kU64:
    case PrimitiveType::kF64:
    case PrimitiveType::kC64: return 8;
    case PrimitiveType::kC128: return 16;
    default: return 4;
  }
}

LoadKernel GetLoadKernel(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred: return &LoadLoop<uint8_t, uint8_t, kNone>;
    case PrimitiveType::kS8: return &LoadLoop<int8_t, int8_t, kNone>;
    case PrimitiveType::kS16: return &LoadLoop<int16_t, int16_t, kNone>;
    case PrimitiveType::kS32: return &LoadLoop<int32_t, int32_t, kNone>;
    case PrimitiveType::kS64: return &LoadLoop<int64_t, int64_t, kNone>;
    case PrimitiveType::kU8: return &LoadLoop<uint8_t, uint8_t, kNone>;
    case PrimitiveType::kU16: return &LoadLoop<uint16_t, uint16_t, kNone>;
    case PrimitiveType::kU32: return &LoadLoop<uint32_t, uint32_t, kNone>;
    case PrimitiveType::kU64: return &LoadLoop<uint64_t, uint64_t, kNone>;
    case PrimitiveType::kBF16: return &LoadLoop<uint16_t, float, kBf16>;
    case PrimitiveType::kF16: return &LoadLoop<uint16_t, float, kF16>;
    case PrimitiveType::kF32: return &LoadLoop<float, float, kNone>;
    case PrimitiveType::kF64: return &LoadLoop<double, double, kNone>;
    case PrimitiveType::kC64:
      return &LoadLoop<std::complex<float>, std::complex<float>, kNone>;
    case PrimitiveType::kC128:
      return &LoadLoop<std::complex<double>, std::complex<double>, kNone>;
    default: return nullptr;
  }
}

StoreKernel GetStoreKernel(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kPred: return &StoreLoop<uint8_t, uint8_t, kNone>;
    case PrimitiveType::kS8: return &StoreLoop<int8_t, int8_t, kNone>;
    case PrimitiveType::kS16: return &StoreLoop<int16_t, int16_t, kNone>;
    case PrimitiveType::kS32: return &StoreLoop<int32_t, int32_t, kNone>;
    case PrimitiveType::kS64: return &StoreLoop<int64_t, int64_t, kNone>;
    case PrimitiveType::kU8: return &StoreLoop<uint8_t, uint8_t, kNone>;
    case PrimitiveType::kU16: return &StoreLoop<uint16_t, uint16_t, kNone>;
    case PrimitiveType::kU32: return &StoreLoop<uint32_t, uint32_t, kNone>;
    case PrimitiveType::kU64: return &StoreLoop<uint64_t, uint64_t, kNone>;
    case PrimitiveType::kBF16: return &StoreLoop<uint16_t, float, kBf16>;
    case PrimitiveType::kF16: return &StoreLoop<uint16_t, float, kF16>;
    case PrimitiveType::kF32: return &StoreLoop<float, float, kNone>;
    case PrimitiveType::kF64: return &StoreLoop<double, double, kNone>;
    case PrimitiveType::kC64:
      return &StoreLoop<std::complex<float>, std::complex<float>, kNone>;
    case PrimitiveType::kC128:
      return &StoreLoop<std::complex<double>, std::complex<double>, kNone>;
    default: return nullptr;
  }
}

StoreKernel GetStreamingStoreKernel(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kBF16: return &StreamStoreLoop<uint16_t, float, kBf16>;
    case PrimitiveType::kF16: return &StreamStoreLoop<uint16_t, float, kF16>;
    case PrimitiveType::kF32: return &StreamStoreLoop<float, float, kNone>;
    case PrimitiveType::kS32: return &StreamStoreLoop<int32_t, int32_t, kNone>;
    default: return GetStoreKernel(t);
  }
}

absl::StatusOr<UnaryKernel> GetUnaryKernel(HloOpcode op, PrimitiveType t) {
  UnaryKernel k = nullptr;
  switch (op) {
    case HloOpcode::kNegate: k = MakeUnary<NegOp>(t); break;
    case HloOpcode::kAbs: k = MakeUnary<AbsOp>(t); break;
    case HloOpcode::kSign: k = MakeUnary<SignOp>(t); break;
    case HloOpcode::kNot: k = MakeUnary<NotOp>(t); break;
    case HloOpcode::kExp: k = MakeUnary<ExpOp>(t); break;
    case HloOpcode::kExpm1: k = MakeUnary<Expm1Op>(t); break;
    case HloOpcode::kLog: k = MakeUnary<LogOp>(t); break;
    case HloOpcode::kLog1p: k = MakeUnary<Log1pOp>(t); break;
    case HloOpcode::kSqrt: k = MakeUnary<SqrtOp>(t); break;
    case HloOpcode::kRsqrt: k = MakeUnary<RsqrtOp>(t); break;
    case HloOpcode::kCbrt: k = MakeUnary<CbrtOp>(t); break;
    case HloOpcode::kTanh: k = MakeUnary<TanhOp>(t); break;
    case HloOpcode::kLogistic: k = MakeUnary<LogisticOp>(t); break;
    case HloOpcode::kSine: k = MakeUnary<SinOp>(t); break;
    case HloOpcode::kCosine: k = MakeUnary<CosOp>(t); break;
    case HloOpcode::kTan: k = MakeUnary<TanOp>(t); break;
    case HloOpcode::kAcos: k = MakeUnary<AcosOp>(t); break;
    case HloOpcode::kAcosh: k = MakeUnary<AcoshOp>(t); break;
    case HloOpcode::kAsin: k = MakeUnary<AsinOp>(t); break;
    case HloOpcode::kAsinh: k = MakeUnary<AsinhOp>(t); break;
    case HloOpcode::kAtan: k = MakeUnary<AtanOp>(t); break;
    case HloOpcode::kAtanh: k = MakeUnary<AtanhOp>(t); break;
    case HloOpcode::kCosh: k = MakeUnary<CoshOp>(t); break;
    case HloOpcode::kSinh: k = MakeUnary<SinhOp>(t); break;
    case HloOpcode::kErf: k = MakeUnary<ErfOp>(t); break;
    case HloOpcode::kPopulationCount: k = MakeUnary<PopcntOp>(t); break;
    case HloOpcode::kClz: k = MakeUnary<ClzOp>(t); break;
    case HloOpcode::kFloor: k = MakeUnary<FloorOp>(t); break;
    case HloOpcode::kCeil: k = MakeUnary<CeilOp>(t); break;
    case HloOpcode::kRoundNearestAfz: k = MakeUnary<RoundAfzOp>(t); break;
    case HloOpcode::kRoundNearestEven: k = MakeUnary<RoundEvenOp>(t); break;
    default: break;
  }
  if (k == nullptr) return Unsupported(hlo::HloOpcodeString(op), t);
  return k;
}

absl::StatusOr<BinaryKernel> GetBinaryKernel(HloOpcode op, PrimitiveType t,
                                             ScalarOperand s) {
  BinaryKernel k = nullptr;
  switch (op) {
    case HloOpcode::kAdd: k = MakeBinary<AddOp>(t, s); break;
    case HloOpcode::kSubtract: k = MakeBinary<SubOp>(t, s); break;
    case HloOpcode::kMultiply: k = MakeBinary<MulOp>(t, s); break;
    case HloOpcode::kDivide: k = MakeBinary<DivOp>(t, s); break;
    case HloOpcode::kRemainder: k = MakeBinary<RemOp>(t, s); break;
    case HloOpcode::kMaximum: k = MakeBinary<MaxOp>(t, s); break;
    case HloOpcode::kMinimum: k = MakeBinary<MinOp>(t, s); break;
    case HloOpcode::kPower: k = MakeBinary<PowOp>(t, s); break;
    case HloOpcode::kAtan2: k = MakeBinary<Atan2Op>(t, s); break;
    case HloOpcode::kAnd: k = MakeBinary<AndOp>(t, s); break;
    case HloOpcode::kOr: k = MakeBinary<OrOp>(t, s); break;
    case HloOpcode::kXor: k = MakeBinary<XorOp>(t, s); break;
    case HloOpcode::kShiftLeft: k = MakeBinary<ShlOp>(t, s); break;
    case HloOpcode::kShiftRightLogical: k = MakeBinary<ShrlOp>(t, s); break;
    case HloOpcode::kShiftRightArithmetic: k = MakeBinary<ShraOp>(t, s); break;
    case HloOpcode::kMulhi: k = MakeBinary<MulhiOp>(t, s); break;
    default: break;
  }
  if (k == nullptr) return Unsupported(hlo::HloOpcodeString(op), t);
  return k;
}

absl::StatusOr<BinaryKernel> GetCompareKernel(hlo::ComparisonDirection dir,
                                              PrimitiveType t,
                                              bool total_order,
                                              ScalarOperand s) {
  using D = hlo::ComparisonDirection;
  BinaryKernel k = nullptr;
#define TPUOFF_CMP(d)                                                    \
  case d:                                                                \
    k = total_order ? MakeCompare<d, true>(t, s) : MakeCompare<d, false>(t, s); \
    break;
  switch (dir) {
    TPUOFF_CMP(D::kEq)
    TPUOFF_CMP(D::kNe)
    TPUOFF_CMP(D::kGe)
    TPUOFF_CMP(D::kGt)
    TPUOFF_CMP(D::kLe)
    TPUOFF_CMP(D::kLt)
  }
#undef TPUOFF_CMP
  if (k == nullptr) return Unsupported("compare", t);
  return k;
}

absl::StatusOr<UnaryKernel> GetConvertKernel(PrimitiveType from,
                                             PrimitiveType to) {
  ConvertFromMaker::Fn f = MakeConvertFrom(from);
  UnaryKernel k = f ? f(to) : nullptr;
  if (k == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("convert from ", hlo::PrimitiveTypeName(from), " to ",
                     hlo::PrimitiveTypeName(to), " is not supported"));
  }
  return k;
}

absl::StatusOr<UnaryKernel> GetIsFiniteKernel(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::kBF16:
    case PrimitiveType::kF16:
    case PrimitiveType::kF32: return &IsFiniteLoop<float>;
    case PrimitiveType::kF64: return &IsFiniteLoop<double>;
    default: return Unsupported("is-finite", t);
  }
}

absl::StatusOr<TernaryKernel> GetSelectKernel(PrimitiveType t, ScalarOperand s) {
  auto make = [](PrimitiveType t, ScalarOperand s) -> TernaryKernel {
    switch (s) {
      case ScalarOperand::kNone: TPUOFF_TYPE_DISPATCH(t, SelectMaker<0>)
      case ScalarOperand::kFirst: TPUOFF_TYPE_DISPATCH(t, SelectMaker<1>)
      case ScalarOperand::kSecond: TPUOFF_TYPE_DISPATCH(t, SelectMaker<2>)
    }
    return nullptr;
  };
  TernaryKernel k = make(t, s);
  if (k == nullptr) return Unsupported("select", t);
  return k;
}

absl::StatusOr<TernaryKernel> GetClampKernel(PrimitiveType t) {
  auto make = [](PrimitiveType t) -> TernaryKernel {
    TPUOFF_TYPE_DISPATCH(t, ClampMaker)
  };
  TernaryKernel k = make(t);
  if (k == nullptr) return Unsupported("clamp", t);
  return k;
}

void FillIota(PrimitiveType t, int64_t start, void* out, int64_t n) {
  switch (t) {
    case PrimitiveType::kS8: return IotaLoop<int8_t>(start, out, n);
    case PrimitiveType::kS16: return IotaLoop<int16_t>(start, out, n);
    case PrimitiveType::kS32: return IotaLoop<int32_t>(start, out, n);
    case PrimitiveType::kS64: return IotaLoop<int64_t>(start, out, n);
    case PrimitiveType::kU8: return IotaLoop<uint8_t>(start, out, n);
    case PrimitiveType::kU16: return IotaLoop<uint16_t>(start, out, n);
    case PrimitiveType::kU32: return IotaLoop<uint32_t>(start, out, n);
    case PrimitiveType::kU64: return IotaLoop<uint64_t>(start, out, n);
    case PrimitiveType::kPred: return IotaLoop<uint8_t>(start != 0, out, n);
    case PrimitiveType::kBF16: {
      IotaLoop<float>(start, out, n);
      float* o = static_cast<float*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = hlo::RoundToBf16(o[i]);
      return;
    }
    case PrimitiveType::kF16: {
      IotaLoop<float>(start, out, n);
      float* o = static_cast<float*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = RoundF16(o[i]);
      return;
    }
    case PrimitiveType::kF32: return IotaLoop<float>(start, out, n);
    case PrimitiveType::kF64: return IotaLoop<double>(start, out, n);
    case PrimitiveType::kC64: return ComplexIotaLoop<float>(start, out, n);
    case PrimitiveType::kC128: return ComplexIotaLoop<double>(start, out, n);
    default: return;
  }
}

absl::StatusOr<UnaryKernel> GetComplexPartKernel(HloOpcode op, PrimitiveType from) {
  using O = HloOpcode;
  UnaryKernel k = nullptr;
  if (from == PrimitiveType::kC64) {
    k = op == O::kReal   ? &ComplexPartLoop<float, O::kReal>
        : op == O::kImag ? &ComplexPartLoop<float, O::kImag>
        : op == O::kAbs  ? &ComplexPartLoop<float, O::kAbs>
                         : nullptr;
  } else if (from == PrimitiveType::kC128) {
    k = op == O::kReal   ? &ComplexPartLoop<double, O::kReal>
        : op == O::kImag ? &ComplexPartLoop<double, O::kImag>
        : op == O::kAbs  ? &ComplexPartLoop<double, O::kAbs>
                         : nullptr;
  } else if (hlo::IsFloatingPoint(from) && (op == O::kReal || op == O::kImag)) {
    const bool wide = from == PrimitiveType::kF64;
    if (op == O::kReal) {
      k = wide ? &CopyLoop<double> : &CopyLoop<float>;
    } else {
      k = wide ? &ImagOfRealLoop<double> : &ImagOfRealLoop<float>;
    }
  }
  if (k == nullptr) return Unsupported(hlo::HloOpcodeString(op), from);
  return k;
}

absl::StatusOr<BinaryKernel> GetMakeComplexKernel(PrimitiveType part, ScalarOperand s) {
  auto make = [s](auto zero) -> BinaryKernel {
    using T = decltype(zero);
    switch (s) {
      case ScalarOperand::kNone: return &MakeComplexLoop<T, 0>;
      case ScalarOperand::kFirst: return &MakeComplexLoop<T, 1>;
      case ScalarOperand::kSecond: return &MakeComplexLoop<T, 2>;
    }
    return nullptr;
  };
  if (part == PrimitiveType::kF32) return make(0.0f);
  if (part == PrimitiveType::kF64) return make(0.0);
  return Unsupported("complex", part);
}

}  // namespace tpuoff::runtime
