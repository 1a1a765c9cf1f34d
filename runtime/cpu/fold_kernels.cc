#include "runtime/cpu/fold_kernels.h"

#include <cstring>
#include <limits>

#include "runtime/cpu/elementwise_ops.h"

namespace tpuoff::runtime {
namespace {

using hlo::HloOpcode;
using namespace elementwise;  // NOLINT: op structs and rounding helpers

template <class Op, typename C, int R>
void FoldLoop(void* acc, const void* vals, int64_t n) {
  C lanes[kFoldLanes];
  std::memcpy(lanes, acc, sizeof(lanes));
  const C* __restrict v = static_cast<const C*>(vals);
  int64_t i = 0;
  for (; i + kFoldLanes <= n; i += kFoldLanes) {
    for (int l = 0; l < kFoldLanes; ++l) {
      lanes[l] = Rnd<C, R>(Op::template Apply<C>(lanes[l], v[i + l]));
    }
  }
  for (int l = 0; i + l < n; ++l) lanes[l] = Rnd<C, R>(Op::template Apply<C>(lanes[l], v[i + l]));
  std::memcpy(acc, lanes, sizeof(lanes));
}

template <class Op, typename C, int R>
void FoldSelectLoop(void* acc, const void* pred, const void* a, const void* b, int64_t n) {
  C lanes[kFoldLanes];
  std::memcpy(lanes, acc, sizeof(lanes));
  const uint8_t* __restrict p = static_cast<const uint8_t*>(pred);
  const C* __restrict x = static_cast<const C*>(a);
  const C y = *static_cast<const C*>(b);
  int64_t i = 0;
  for (; i + kFoldLanes <= n; i += kFoldLanes) {
    for (int l = 0; l < kFoldLanes; ++l) {
      const C v = x[i + l];
      lanes[l] = Rnd<C, R>(Op::template Apply<C>(lanes[l], p[i + l] ? v : y));
    }
  }
  for (int l = 0; i + l < n; ++l) {
    const C v = x[i + l];
    lanes[l] = Rnd<C, R>(Op::template Apply<C>(lanes[l], p[i + l] ? v : y));
  }
  std::memcpy(acc, lanes, sizeof(lanes));
}

// Separate roundings of the product and the sum, as two unfused kernels
// would give: no multiply-add contraction here.
#if defined(__clang__)
#define TPUOFF_NO_CONTRACT
#else
#define TPUOFF_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif
TPUOFF_NO_CONTRACT void FoldProductAddF32(void* acc, const void* a, const void* b, int64_t n) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  float lanes[kFoldLanes];
  std::memcpy(lanes, acc, sizeof(lanes));
  const float* __restrict x = static_cast<const float*>(a);
  const float* __restrict y = static_cast<const float*>(b);
  int64_t i = 0;
  for (; i + kFoldLanes <= n; i += kFoldLanes) {
    for (int l = 0; l < kFoldLanes; ++l) {
      const float prod = x[i + l] * y[i + l];
      lanes[l] = lanes[l] + prod;
    }
  }
  for (int l = 0; i + l < n; ++l) {
    const float prod = x[i + l] * y[i + l];
    lanes[l] = lanes[l] + prod;
  }
  std::memcpy(acc, lanes, sizeof(lanes));
}

template <class Op>
void FoldPredLoop(void* acc, const void* vals, int64_t n) {
  uint8_t* a = static_cast<uint8_t*>(acc);
  const uint8_t* v = static_cast<const uint8_t*>(vals);
  for (int64_t i = 0; i < n; ++i) a[i % kFoldLanes] = Op::ApplyPred(a[i % kFoldLanes], v[i]);
}

template <class Op>
struct FoldMaker {
  template <typename C, int R>
  static FoldKernel Make() {
    if constexpr (kAccepts<Op, C> && !kIsComplex<C>) {
      return &FoldLoop<Op, C, R>;
    }
    return nullptr;
  }
  static FoldKernel MakePred() {
    if constexpr ((Op::kCats & kPredOnly) != 0) return &FoldPredLoop<Op>;
    return nullptr;
  }
};
template <class Op>
FoldKernel MakeFold(PrimitiveType t) {
  TPUOFF_TYPE_DISPATCH(t, FoldMaker<Op>)
}

template <class Op>
struct FoldSelectMaker {
  template <typename C, int R>
  static FoldSelectKernel Make() {
    if constexpr (kAccepts<Op, C> && !kIsComplex<C>) {
      return &FoldSelectLoop<Op, C, R>;
    }
    return nullptr;
  }
  static FoldSelectKernel MakePred() { return nullptr; }
};
template <class Op>
FoldSelectKernel MakeFoldSelect(PrimitiveType t) {
  TPUOFF_TYPE_DISPATCH(t, FoldSelectMaker<Op>)
}

// Identity values, per compute type C.
template <typename C>
bool Identity(HloOpcode op, void* out) {
  C v;
  switch (op) {
    case HloOpcode::kAdd:
      if constexpr (kIsFloat<C>) v = -C(0);
      else v = C(0);
      break;
    case HloOpcode::kMultiply: v = C(1); break;
    case HloOpcode::kMaximum:
      if constexpr (kIsFloat<C>) v = -std::numeric_limits<C>::infinity();
      else v = std::numeric_limits<C>::lowest();
      break;
    case HloOpcode::kMinimum:
      if constexpr (kIsFloat<C>) v = std::numeric_limits<C>::infinity();
      else v = std::numeric_limits<C>::max();
      break;
    case HloOpcode::kAnd:
      if constexpr (kIsFloat<C>) return false;
      else v = static_cast<C>(~C(0));
      break;
    case HloOpcode::kOr:
    case HloOpcode::kXor:
      if constexpr (kIsFloat<C>) return false;
      else v = C(0);
      break;
    default:
      return false;
  }
  std::memcpy(out, &v, sizeof(C));
  return true;
}

}  // namespace

FoldKernel GetFoldKernel(HloOpcode op, PrimitiveType t) {
  switch (op) {
    case HloOpcode::kAdd: return MakeFold<AddOp>(t);
    case HloOpcode::kMultiply: return MakeFold<MulOp>(t);
    case HloOpcode::kMaximum: return MakeFold<MaxOp>(t);
    case HloOpcode::kMinimum: return MakeFold<MinOp>(t);
    case HloOpcode::kAnd: return MakeFold<AndOp>(t);
    case HloOpcode::kOr: return MakeFold<OrOp>(t);
    case HloOpcode::kXor: return MakeFold<XorOp>(t);
    default: return nullptr;
  }
}

FoldSelectKernel GetFoldSelectKernel(HloOpcode op, PrimitiveType t) {
  switch (op) {
    case HloOpcode::kAdd: return MakeFoldSelect<AddOp>(t);
    case HloOpcode::kMaximum: return MakeFoldSelect<MaxOp>(t);
    case HloOpcode::kMinimum: return MakeFoldSelect<MinOp>(t);
    default: return nullptr;
  }
}

FoldProductKernel GetFoldProductKernel(HloOpcode op, PrimitiveType t) {
  return op == HloOpcode::kAdd && t == PrimitiveType::kF32 ? &FoldProductAddF32 : nullptr;
}

bool ReducerIdentity(HloOpcode op, PrimitiveType t, void* out) {
  switch (t) {
    case PrimitiveType::kPred: {
      uint8_t v;
      if (op == HloOpcode::kMaximum || op == HloOpcode::kOr || op == HloOpcode::kXor) {
        v = 0;
      } else if (op == HloOpcode::kMinimum || op == HloOpcode::kAnd) {
        v = 1;
      } else {
        return false;
      }
      std::memcpy(out, &v, 1);
      return true;
    }
    case PrimitiveType::kS8: return Identity<int8_t>(op, out);
    case PrimitiveType::kS16: return Identity<int16_t>(op, out);
    case PrimitiveType::kS32: return Identity<int32_t>(op, out);
    case PrimitiveType::kS64: return Identity<int64_t>(op, out);
    case PrimitiveType::kU8: return Identity<uint8_t>(op, out);
    case PrimitiveType::kU16: return Identity<uint16_t>(op, out);
    case PrimitiveType::kU32: return Identity<uint32_t>(op, out);
    case PrimitiveType::kU64: return Identity<uint64_t>(op, out);
    case PrimitiveType::kBF16:
    case PrimitiveType::kF16:
    case PrimitiveType::kF32: return Identity<float>(op, out);
    case PrimitiveType::kF64: return Identity<double>(op, out);
    default: return false;
  }
}

}  // namespace tpuoff::runtime
