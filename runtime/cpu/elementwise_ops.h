// The scalar semantics of the elementwise ops, shared by the kernel
// families (elementwise_kernels.cc, fold_kernels.cc): XLA:CPU's integer
// wrapping, division and shift rules, NaN-propagating max/min, and the
// compute-representation rounding of 16-bit floats (see
// elementwise_kernels.h). Internal to runtime/cpu.
#ifndef TPUOFF_RUNTIME_CPU_ELEMENTWISE_OPS_H_
#define TPUOFF_RUNTIME_CPU_ELEMENTWISE_OPS_H_

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "hlo/ir/float16.h"
#include "hlo/ir/primitive_type.h"

namespace tpuoff::runtime::elementwise {

using hlo::PrimitiveType;

// Rounding modes of the compute representation: none, bf16, f16.
enum Round { kNone = 0, kBf16 = 1, kF16 = 2 };

inline float RoundF16(float v) { return hlo::F16ToF32(hlo::F32ToF16(v)); }

template <typename C, int R>
inline C Rnd(C v) {
  if constexpr (R == kBf16) {
    return hlo::RoundToBf16(v);
  } else if constexpr (R == kF16) {
    return RoundF16(v);
  } else {
    return v;
  }
}

// Categories an op accepts (kFloatOnly: real floats).
enum Cat { kFloatOnly = 1, kIntOnly = 2, kPredOnly = 4, kComplexOk = 8 };

template <typename C>
struct IsComplexT : std::false_type {};
template <typename T>
struct IsComplexT<std::complex<T>> : std::true_type {};

template <typename C>
constexpr bool kIsComplex = IsComplexT<C>::value;

template <typename C>
using U = std::make_unsigned_t<C>;

template <typename C>
constexpr bool kIsFloat = std::is_floating_point_v<C>;

// The category of compute type C (pred is handled apart).
template <typename C>
constexpr int kCatOf = kIsComplex<C> ? kComplexOk : kIsFloat<C> ? kFloatOnly : kIntOnly;

// Whether Op accepts compute type C.
template <class Op, typename C>
constexpr bool kAccepts = (Op::kCats & kCatOf<C>) != 0;

// ----- unary ops -------------------------------------------------------------
struct NegOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C x) {
    if constexpr (kIsFloat<C> || kIsComplex<C>) return -x;
    else return static_cast<C>(U<C>(0) - static_cast<U<C>>(x));
  }
};
struct AbsOp {
  static constexpr int kCats = kFloatOnly | kIntOnly;
  template <typename C>
  static C Apply(C x) {
    if constexpr (kIsFloat<C>) return std::fabs(x);
    else if constexpr (std::is_unsigned_v<C>) return x;
    else return x < 0 ? static_cast<C>(U<C>(0) - static_cast<U<C>>(x)) : x;
  }
};
struct SignOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C x) {
    if constexpr (kIsComplex<C>) {  // x / |x|, 0 for 0 (NaN stays NaN)
      const auto r = std::abs(x);
      return r == 0 ? C(0) : x / r;
    } else if constexpr (kIsFloat<C>) {
      if (std::isnan(x) || x == 0) return x;
      return x > 0 ? C(1) : C(-1);
    } else if constexpr (std::is_unsigned_v<C>) {
      return x != 0 ? C(1) : C(0);
    } else {
      return static_cast<C>((x > 0) - (x < 0));
    }
  }
};
struct NotOp {
  static constexpr int kCats = kIntOnly | kPredOnly;
  template <typename C>
  static C Apply(C x) { return static_cast<C>(~x); }
  static uint8_t ApplyPred(uint8_t x) { return x ? 0 : 1; }
};
#define TPUOFF_FLOAT_UNARY(Name, expr)            \
  struct Name {                                   \
    static constexpr int kCats = kFloatOnly;      \
    template <typename C>                         \
    static C Apply(C x) { return expr; }          \
  };
// Real and complex (std::complex overloads) alike.
#define TPUOFF_FLOAT_COMPLEX_UNARY(Name, expr)         \
  struct Name {                                         \
    static constexpr int kCats = kFloatOnly | kComplexOk; \
    template <typename C>                               \
    static C Apply(C x) { return expr; }                \
  };
TPUOFF_FLOAT_COMPLEX_UNARY(ExpOp, std::exp(x))
TPUOFF_FLOAT_COMPLEX_UNARY(LogOp, std::log(x))
TPUOFF_FLOAT_COMPLEX_UNARY(SqrtOp, std::sqrt(x))
TPUOFF_FLOAT_COMPLEX_UNARY(RsqrtOp, C(1) / std::sqrt(x))
TPUOFF_FLOAT_COMPLEX_UNARY(TanhOp, std::tanh(x))
TPUOFF_FLOAT_COMPLEX_UNARY(LogisticOp, C(1) / (C(1) + std::exp(-x)))
TPUOFF_FLOAT_COMPLEX_UNARY(SinOp, std::sin(x))
TPUOFF_FLOAT_COMPLEX_UNARY(CosOp, std::cos(x))
TPUOFF_FLOAT_COMPLEX_UNARY(TanOp, std::tan(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AcosOp, std::acos(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AcoshOp, std::acosh(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AsinOp, std::asin(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AsinhOp, std::asinh(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AtanOp, std::atan(x))
TPUOFF_FLOAT_COMPLEX_UNARY(AtanhOp, std::atanh(x))
TPUOFF_FLOAT_COMPLEX_UNARY(CoshOp, std::cosh(x))
TPUOFF_FLOAT_COMPLEX_UNARY(SinhOp, std::sinh(x))
#undef TPUOFF_FLOAT_COMPLEX_UNARY
// exp(z) - 1 and log(1 + z) without cancellation near 0 (std has no
// complex expm1/log1p): expm1(x+iy) = expm1(x)cos(y) - 2sin^2(y/2) +
// i exp(x)sin(y); log1p(x+iy) = log1p(x(2+x) + y^2)/2 + i atan2(y, 1+x).
struct Expm1Op {
  static constexpr int kCats = kFloatOnly | kComplexOk;
  template <typename C>
  static C Apply(C z) {
    if constexpr (kIsComplex<C>) {
      const auto x = z.real(), y = z.imag();
      const auto s = std::sin(y / 2);
      return C(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
    } else {
      return std::expm1(z);
    }
  }
};
struct Log1pOp {
  static constexpr int kCats = kFloatOnly | kComplexOk;
  template <typename C>
  static C Apply(C z) {
    if constexpr (kIsComplex<C>) {
      const auto x = z.real(), y = z.imag();
      return C(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, 1 + x));
    } else {
      return std::log1p(z);
    }
  }
};
TPUOFF_FLOAT_UNARY(CbrtOp, std::cbrt(x))
TPUOFF_FLOAT_UNARY(ErfOp, std::erf(x))
TPUOFF_FLOAT_UNARY(FloorOp, std::floor(x))
TPUOFF_FLOAT_UNARY(CeilOp, std::ceil(x))
TPUOFF_FLOAT_UNARY(RoundAfzOp, std::round(x))
TPUOFF_FLOAT_UNARY(RoundEvenOp, std::nearbyint(x))
#undef TPUOFF_FLOAT_UNARY

struct PopcntOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C x) { return static_cast<C>(std::popcount(static_cast<U<C>>(x))); }
};
struct ClzOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C x) { return static_cast<C>(std::countl_zero(static_cast<U<C>>(x))); }
};

// ----- binary ops ------------------------------------------------------------
template <typename C>
C FMax(C a, C b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}
template <typename C>
C FMin(C a, C b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a < b ? a : b;
}

struct AddOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C> || kIsComplex<C>) return a + b;
    else return static_cast<C>(static_cast<U<C>>(a) + static_cast<U<C>>(b));
  }
};
struct SubOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C> || kIsComplex<C>) return a - b;
    else return static_cast<C>(static_cast<U<C>>(a) - static_cast<U<C>>(b));
  }
};
struct MulOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C> || kIsComplex<C>) {
      return a * b;
    } else {
      // Promote narrow types to the unsigned type of at least int width so
      // the product wraps instead of overflowing a signed int.
      using W = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                                   U<C>>;
      return static_cast<C>(static_cast<W>(static_cast<U<C>>(a)) *
                            static_cast<W>(static_cast<U<C>>(b)));
    }
  }
};
struct DivOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C> || kIsComplex<C>) {
      return a / b;
    } else if constexpr (std::is_unsigned_v<C>) {
      return b == 0 ? std::numeric_limits<C>::max() : static_cast<C>(a / b);
    } else {  // XLA: x/0 = -1, INT_MIN/-1 = INT_MIN
      if (b == 0) return C(-1);
      if (a == std::numeric_limits<C>::min() && b == C(-1)) return a;
      return static_cast<C>(a / b);
    }
  }
};
struct RemOp {
  static constexpr int kCats = kFloatOnly | kIntOnly;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C>) {
      return std::fmod(a, b);
    } else if constexpr (std::is_unsigned_v<C>) {
      return b == 0 ? a : static_cast<C>(a % b);
    } else {  // XLA: x%0 = x, INT_MIN % -1 = 0
      if (b == 0) return a;
      if (a == std::numeric_limits<C>::min() && b == C(-1)) return C(0);
      return static_cast<C>(a % b);
    }
  }
};
struct MaxOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kPredOnly;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C>) return FMax(a, b);
    else return a > b ? a : b;
  }
  static uint8_t ApplyPred(uint8_t a, uint8_t b) { return a | b; }
};
struct MinOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kPredOnly;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsFloat<C>) return FMin(a, b);
    else return a < b ? a : b;
  }
  static uint8_t ApplyPred(uint8_t a, uint8_t b) { return a & b; }
};
struct PowOp {
  static constexpr int kCats = kFloatOnly | kIntOnly | kComplexOk;
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (kIsComplex<C>) {
      // 0^0 = 1 and 0^b = 0 for Re(b) > 0, as XLA (std::pow gives NaN).
      if (b == C(0)) return C(1);
      if (a == C(0) && b.real() > 0) return C(0);
      return std::pow(a, b);
    } else if constexpr (kIsFloat<C>) {
      return std::pow(a, b);
    } else {
      if constexpr (std::is_signed_v<C>) {
        if (b < 0) return a == 1 ? C(1) : a == -1 ? ((b & 1) ? C(-1) : C(1)) : C(0);
      }
      C result = 1, base = a;
      for (auto e = static_cast<U<C>>(b); e != 0; e >>= 1) {
        if (e & 1) result = MulOp::Apply(result, base);
        base = MulOp::Apply(base, base);
      }
      return result;
    }
  }
};
struct Atan2Op {
  static constexpr int kCats = kFloatOnly;
  template <typename C>
  static C Apply(C a, C b) { return std::atan2(a, b); }
};
#define TPUOFF_BITWISE(Name, op)                                           \
  struct Name {                                                            \
    static constexpr int kCats = kIntOnly | kPredOnly;                     \
    template <typename C>                                                  \
    static C Apply(C a, C b) { return static_cast<C>(a op b); }            \
    static uint8_t ApplyPred(uint8_t a, uint8_t b) { return a op b; }      \
  };
TPUOFF_BITWISE(AndOp, &)
TPUOFF_BITWISE(OrOp, |)
TPUOFF_BITWISE(XorOp, ^)
#undef TPUOFF_BITWISE
// Shifts by >= the bit width give 0 (or the sign fill for arithmetic right).
struct ShlOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C a, C b) {
    const auto s = static_cast<U<C>>(b);
    if (s >= sizeof(C) * 8) return 0;
    return static_cast<C>(static_cast<U<C>>(a) << s);
  }
};
struct ShrlOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C a, C b) {
    const auto s = static_cast<U<C>>(b);
    if (s >= sizeof(C) * 8) return 0;
    return static_cast<C>(static_cast<U<C>>(a) >> s);
  }
};
struct ShraOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C a, C b) {
    using S = std::make_signed_t<C>;
    const auto s = static_cast<U<C>>(b);
    const S sa = static_cast<S>(a);
    if (s >= sizeof(C) * 8) return static_cast<C>(sa < 0 ? S(-1) : S(0));
    return static_cast<C>(sa >> s);
  }
};

// High half of the double-width product (XLA's mulhi).
struct MulhiOp {
  static constexpr int kCats = kIntOnly;
  template <typename C>
  static C Apply(C a, C b) {
    constexpr int kBits = sizeof(C) * 8;
    if constexpr (kBits == 64) {
      using W = std::conditional_t<std::is_signed_v<C>, __int128, unsigned __int128>;
      return static_cast<C>((static_cast<W>(a) * static_cast<W>(b)) >> 64);
    } else {
      using W = std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>;
      return static_cast<C>((static_cast<W>(a) * static_cast<W>(b)) >> kBits);
    }
  }
};

// The one type dispatch: calls F::template Make<C, R>() for the compute type
// of `t`, or F::MakePred() for pred.
#define TPUOFF_TYPE_DISPATCH(t, F)                                   \
  switch (t) {                                                       \
    case PrimitiveType::kPred: return F::MakePred();                 \
    case PrimitiveType::kS8: return F::template Make<int8_t, kNone>(); \
    case PrimitiveType::kS16: return F::template Make<int16_t, kNone>(); \
    case PrimitiveType::kS32: return F::template Make<int32_t, kNone>(); \
    case PrimitiveType::kS64: return F::template Make<int64_t, kNone>(); \
    case PrimitiveType::kU8: return F::template Make<uint8_t, kNone>(); \
    case PrimitiveType::kU16: return F::template Make<uint16_t, kNone>(); \
    case PrimitiveType::kU32: return F::template Make<uint32_t, kNone>(); \
    case PrimitiveType::kU64: return F::template Make<uint64_t, kNone>(); \
    case PrimitiveType::kBF16: return F::template Make<float, kBf16>(); \
    case PrimitiveType::kF16: return F::template Make<float, kF16>();  \
    case PrimitiveType::kF32: return F::template Make<float, kNone>(); \
    case PrimitiveType::kF64: return F::template Make<double, kNone>(); \
    case PrimitiveType::kC64: return F::template Make<std::complex<float>, kNone>(); \
    case PrimitiveType::kC128: return F::template Make<std::complex<double>, kNone>(); \
    default: return nullptr;                                         \
  }

}  // namespace tpuoff::runtime::elementwise

#endif  // TPUOFF_RUNTIME_CPU_ELEMENTWISE_OPS_H_
