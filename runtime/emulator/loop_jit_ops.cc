#if defined(TPUOFF_HAVE_JIT)

#include "runtime/emulator/loop_jit_ops.h"

#include <cstdint>
#include <functional>
#include <string>

#include "llvm/ADT/APFloat.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/MDBuilder.h"

namespace tpuoff::runtime::jit {

using hlo::ComparisonDirection;
using hlo::HloOpcode;
using hlo::PrimitiveType;
using llvm::Value;

namespace {

bool IsFloat(PrimitiveType t) { return t == PrimitiveType::kF32 || t == PrimitiveType::kBF16; }
bool IsInt(PrimitiveType t) { return t == PrimitiveType::kS32 || t == PrimitiveType::kU32; }

// An i32 type of the same shape as float value `v`'s type.
llvm::Type* IntLike(Value* v) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(v->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) {
    return llvm::VectorType::get(i32, vt->getElementCount());
  }
  return i32;
}

}  // namespace

bool IsJitType(PrimitiveType t) {
  return IsFloat(t) || IsInt(t) || t == PrimitiveType::kPred;
}

llvm::Type* OpEmitter::ComputeType(PrimitiveType t) {
  llvm::LLVMContext& c = b_->getContext();
  if (IsFloat(t)) return llvm::Type::getFloatTy(c);
  if (IsInt(t)) return llvm::Type::getInt32Ty(c);
  return llvm::Type::getInt1Ty(c);
}

llvm::Type* OpEmitter::StorageType(PrimitiveType t) {
  llvm::LLVMContext& c = b_->getContext();
  switch (t) {
    case PrimitiveType::kF32: return llvm::Type::getFloatTy(c);
    case PrimitiveType::kBF16: return llvm::Type::getInt16Ty(c);
    case PrimitiveType::kPred: return llvm::Type::getInt8Ty(c);
    default: return llvm::Type::getInt32Ty(c);
  }
}

Value* OpEmitter::Const(llvm::Type* like, double value) {
  if (like->getScalarType()->isFloatTy()) {
    // The float nearest `value` (the C++ source's f32 literal).
    return llvm::ConstantFP::get(like, static_cast<double>(static_cast<float>(value)));
  }
  return llvm::ConstantInt::get(like, static_cast<uint64_t>(static_cast<int64_t>(value)));
}

Value* OpEmitter::ConstInt(llvm::Type* like, uint64_t value) {
  return llvm::ConstantInt::get(like, value);
}

Value* OpEmitter::Widen(Value* scalar, int width) {
  if (width == 1) return scalar;
  return b_->CreateVectorSplat(width, scalar);
}

Value* OpEmitter::FromStorage(PrimitiveType t, Value* v) {
  switch (t) {
    case PrimitiveType::kBF16: {
      llvm::Type* i32 = b_->getInt32Ty();
      llvm::Type* f32 = b_->getFloatTy();
      if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) {
        i32 = llvm::VectorType::get(i32, vt->getElementCount());
        f32 = llvm::VectorType::get(f32, vt->getElementCount());
      }
      Value* bits = b_->CreateShl(b_->CreateZExt(v, i32), ConstInt(i32, 16));
      return b_->CreateBitCast(bits, f32);
    }
    case PrimitiveType::kPred:
      return b_->CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    default:
      return v;
  }
}

// Round to nearest even on the float's bits (bits + 0x7fff + the kept
// lsb); NaN quieted instead (its quiet bit set: bit 22, bf16's bit 6). Both
// in 32-bit lanes, so that a store packs the high halves of two vectors with
// one shuffle and RoundBf16 masks them, neither shifting each vector down.
Value* OpEmitter::Bf16High(Value* f) {
  llvm::Type* it = IntLike(f);
  Value* bits = b_->CreateBitCast(f, it);
  Value* is_nan = b_->CreateFCmpUNO(f, f);
  Value* lsb = b_->CreateAnd(b_->CreateLShr(bits, ConstInt(it, 16)), ConstInt(it, 1));
  Value* rounded = b_->CreateAdd(bits, b_->CreateAdd(ConstInt(it, 0x7fffu), lsb));
  Value* quiet = b_->CreateOr(bits, ConstInt(it, 0x400000u));
  return b_->CreateSelect(is_nan, quiet, rounded);
}

Value* OpEmitter::RoundBf16(Value* f) {
  Value* h = Bf16High(f);
  return b_->CreateBitCast(b_->CreateAnd(h, ConstInt(h->getType(), 0xffff0000u)), f->getType());
}

// VCVTNE2PS2BF16 rounds to nearest even and quiets NaNs as F32ToBf16 does,
// one instruction for 32 values, but reads subnormal inputs as zero (and
// so gives zero where F32ToBf16 keeps a bf16 subnormal; normal inputs never
// round to one). A group with a subnormal takes F32ToBf16's integer steps
// instead (a branch per group: one class test per 16 values on the common
// path, against seven integer operations).
Value* OpEmitter::NativeBf16(Value* f) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(f->getType());
  if (!bf16_convert_ || vt == nullptr) return nullptr;
  const int n = static_cast<int>(vt->getNumElements());
  if (n < 32 || (n & (n - 1)) != 0) return nullptr;  // 32, 64, ...: pairs of 16
  std::vector<Value*> parts;
  Value* subnormal = nullptr;
  for (int k = 0; k < n; k += 16) {
    std::vector<int> lanes(16);
    for (int l = 0; l < 16; ++l) lanes[l] = k + l;
    Value* part = b_->CreateShuffleVector(f, lanes);
    parts.push_back(part);
    // fpclass bit 5: denormal.
    Value* cls = b_->CreateIntrinsic(llvm::Intrinsic::x86_avx512_fpclass_ps_512, {},
                                     {part, b_->getInt32(0x20)});
    Value* bits = b_->CreateBitCast(cls, b_->getInt16Ty());
    subnormal = subnormal == nullptr ? bits : b_->CreateOr(subnormal, bits);
  }
  Value* any = b_->CreateICmpNE(subnormal, b_->getInt16(0));
  return RareBranch(
      any, "bf16",
      [&] {
        std::vector<Value*> packed;
        for (size_t k = 0; k < parts.size(); k += 2) {
          // The low 16 results come from the second operand.
          packed.push_back(b_->CreateIntrinsic(
              llvm::Intrinsic::x86_avx512bf16_cvtne2ps2bf16_512, {}, {parts[k + 1], parts[k]}));
        }
        while (packed.size() > 1) {  // concatenated pairwise, in order
          const int m = static_cast<int>(
              llvm::cast<llvm::FixedVectorType>(packed[0]->getType())->getNumElements());
          std::vector<int> cat(2 * m);
          for (int l = 0; l < 2 * m; ++l) cat[l] = l;
          std::vector<Value*> next;
          for (size_t k = 0; k < packed.size(); k += 2) {
            next.push_back(b_->CreateShuffleVector(packed[k], packed[k + 1], cat));
          }
          packed = std::move(next);
        }
        return packed[0];
      },
      [&] {  // F32ToBf16's integer steps
        Value* halves =
            b_->CreateBitCast(Bf16High(f), llvm::FixedVectorType::get(b_->getInt16Ty(), 2 * n));
        std::vector<int> odd(n);
        for (int i = 0; i < n; ++i) odd[i] = 2 * i + 1;
        return b_->CreateShuffleVector(halves, odd);
      });
}

// `common` unless `rare` (a rare case, weighted so), each in its own block,
// merged by a PHI.
Value* OpEmitter::RareBranch(Value* rare, const char* name,
                             const std::function<Value*()>& common,
                             const std::function<Value*()>& rare_path) {
  llvm::Function* fn = b_->GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b_->getContext();
  const std::string n(name);
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(ctx, n + "_fast", fn);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(ctx, n + "_slow", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, n + "_done", fn);
  b_->CreateCondBr(rare, slow, fast, llvm::MDBuilder(ctx).createBranchWeights(1, 1000));
  b_->SetInsertPoint(fast);
  Value* a = common();
  llvm::BasicBlock* fast_end = b_->GetInsertBlock();
  b_->CreateBr(done);
  b_->SetInsertPoint(slow);
  Value* r = rare_path();
  llvm::BasicBlock* slow_end = b_->GetInsertBlock();
  b_->CreateBr(done);
  b_->SetInsertPoint(done);
  llvm::PHINode* result = b_->CreatePHI(a->getType(), 2);
  result->addIncoming(a, fast_end);
  result->addIncoming(r, slow_end);
  return result;
}

Value* OpEmitter::ToStorage(PrimitiveType t, Value* v) {
  switch (t) {
    case PrimitiveType::kBF16: {
      if (Value* native = NativeBf16(v)) return native;
      Value* h = Bf16High(v);
      auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(h->getType());
      if (vt == nullptr) return b_->CreateTrunc(b_->CreateLShr(h, ConstInt(h->getType(), 16)),
                                                b_->getInt16Ty());
      // The odd 16-bit halves (little-endian: each lane's high half).
      const int n = static_cast<int>(vt->getNumElements());
      Value* halves = b_->CreateBitCast(h, llvm::FixedVectorType::get(b_->getInt16Ty(), 2 * n));
      std::vector<int> odd(n);
      for (int i = 0; i < n; ++i) odd[i] = 2 * i + 1;
      return b_->CreateShuffleVector(halves, odd);
    }
    case PrimitiveType::kPred: {
      llvm::Type* i8 = b_->getInt8Ty();
      if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) {
        i8 = llvm::VectorType::get(i8, vt->getElementCount());
      }
      return b_->CreateZExt(v, i8);
    }
    default:
      return v;
  }
}

Value* OpEmitter::Round(PrimitiveType t, Value* v) {
  return t == PrimitiveType::kBF16 ? RoundBf16(v) : v;
}

Value* OpEmitter::MulAdd(Value* a, Value* b, Value* c) {
  if (fma_) return b_->CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  return b_->CreateFAdd(b_->CreateFMul(a, b), c);
}

Value* OpEmitter::Intrinsic(unsigned id, Value* x) {
  return b_->CreateIntrinsic(id, {x->getType()}, {x});
}

Value* OpEmitter::IsNan(Value* x) { return b_->CreateFCmpUNO(x, x); }

// FMax: a if a is NaN, else b if b is NaN, else a > b ? a : b. A NaN b
// already comes out of `a > b ? a : b` (the comparison is false), which is
// one max instruction.
Value* OpEmitter::FMax(Value* a, Value* b) {
  Value* r = b_->CreateSelect(b_->CreateFCmpOGT(a, b), a, b);
  return b_->CreateSelect(IsNan(a), a, r);
}

Value* OpEmitter::FMin(Value* a, Value* b) {
  Value* r = b_->CreateSelect(b_->CreateFCmpOLT(a, b), a, b);
  return b_->CreateSelect(IsNan(a), a, r);
}

// simd::ExpV, operation for operation.
Value* OpEmitter::Exp(Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = IntLike(x);
  auto c = [&](float v) { return Const(ft, v); };
  auto ci = [&](uint32_t v) { return ConstInt(it, v); };
  Value* shifted = MulAdd(x, c(1.44269504088896341f), c(12582912.0f));
  Value* n = b_->CreateFSub(shifted, c(12582912.0f));
  Value* ni = b_->CreateSub(b_->CreateBitCast(shifted, it), ci(0x4B400000));
  Value* neg_n = b_->CreateFNeg(n);
  Value* r = MulAdd(neg_n, c(0.693359375f), x);
  r = MulAdd(neg_n, c(-2.12194440e-4f), r);
  Value* p = c(1.9875691500e-4f);
  p = MulAdd(p, r, c(1.3981999507e-3f));
  p = MulAdd(p, r, c(8.3334519073e-3f));
  p = MulAdd(p, r, c(4.1665795894e-2f));
  p = MulAdd(p, r, c(1.6666665459e-1f));
  p = MulAdd(p, r, c(5.0000001201e-1f));
  Value* y = b_->CreateFAdd(MulAdd(p, b_->CreateFMul(r, r), r), c(1.0f));
  // Every lane's n in [-125, 127]: y * 2^n as an exponent add (exact).
  Value* in_range = b_->CreateICmpULE(b_->CreateAdd(ni, ci(125)), ci(252));
  Value* all = in_range->getType()->isVectorTy() ? b_->CreateAndReduce(in_range) : in_range;
  return RareBranch(
      b_->CreateNot(all), "exp",
      [&] {
        // ni << 23 is shifted's bits << 23 (the bias 0x4B400000 shifts out).
        return b_->CreateBitCast(
            b_->CreateAdd(b_->CreateBitCast(y, it),
                          b_->CreateShl(b_->CreateBitCast(shifted, it), ci(23))),
            ft);
      },
      [&] {
        Value* n1 = b_->CreateAShr(ni, ci(1));
        Value* n2 = b_->CreateSub(ni, n1);
        auto pow2 = [&](Value* k) {
          return b_->CreateBitCast(b_->CreateShl(b_->CreateAdd(k, ci(127)), ci(23)), ft);
        };
        Value* z = b_->CreateFMul(y, pow2(n1));
        z = b_->CreateFMul(z, pow2(n2));
        z = b_->CreateSelect(b_->CreateFCmpOLT(x, c(-104.0f)), c(0.0f), z);
        z = b_->CreateSelect(b_->CreateFCmpOGT(x, c(89.0f)), llvm::ConstantFP::getInfinity(ft),
                             z);
        return b_->CreateSelect(b_->CreateFCmpUNE(x, x), x, z);
      });
}

// simd::LogV, operation for operation.
Value* OpEmitter::Log(Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = IntLike(x);
  auto c = [&](float v) { return Const(ft, v); };
  auto ci = [&](uint32_t v) { return ConstInt(it, v); };
  Value* nan_in = b_->CreateFCmpUNE(x, x);
  Value* negative = b_->CreateFCmpOLT(x, c(0.0f));
  Value* zero = b_->CreateFCmpOEQ(x, c(0.0f));
  Value* inf = b_->CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(ft));
  Value* tiny = b_->CreateFCmpOLT(x, c(1.17549435e-38f));
  Value* xs = b_->CreateSelect(tiny, b_->CreateFMul(x, c(8388608.0f)), x);
  Value* bits = b_->CreateBitCast(xs, it);
  Value* e = b_->CreateSub(b_->CreateAnd(b_->CreateAShr(bits, ci(23)), ci(0xff)), ci(126));
  e = b_->CreateSub(e, b_->CreateAnd(b_->CreateSExt(tiny, it), ci(23)));
  Value* m = b_->CreateBitCast(
      b_->CreateOr(b_->CreateAnd(bits, ci(0x807fffffu)), ci(0x3f000000u)), ft);
  Value* small = b_->CreateFCmpOLT(m, c(0.707106781186547524f));
  e = b_->CreateAdd(e, b_->CreateSExt(small, it));
  m = b_->CreateFSub(b_->CreateSelect(small, b_->CreateFAdd(m, m), m), c(1.0f));
  Value* ef = b_->CreateSIToFP(e, ft);
  Value* z = b_->CreateFMul(m, m);
  Value* y = c(7.0376836292e-2f);
  for (float k : {-1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                  -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f}) {
    y = MulAdd(y, m, c(k));
  }
  y = MulAdd(b_->CreateFMul(y, m), z, b_->CreateFMul(ef, c(-2.12194440e-4f)));
  y = MulAdd(z, c(-0.5f), y);
  Value* r = b_->CreateFAdd(m, y);
  r = MulAdd(ef, c(0.693359375f), r);
  r = b_->CreateSelect(inf, x, r);
  r = b_->CreateSelect(zero, llvm::ConstantFP::getInfinity(ft, /*Negative=*/true), r);
  Value* qnan = llvm::ConstantFP::get(
      ft, llvm::APFloat(llvm::APFloat::IEEEsingle(), llvm::APInt(32, 0x7fc00000u)));
  r = b_->CreateSelect(negative, qnan, r);
  return b_->CreateSelect(nan_in, x, r);
}

bool OpEmitter::HasUnary(HloOpcode op, PrimitiveType t) {
  switch (op) {
    case HloOpcode::kNegate:
    case HloOpcode::kAbs:
    case HloOpcode::kSign:
      return IsFloat(t) || IsInt(t);
    case HloOpcode::kExp:
    case HloOpcode::kLog:
    case HloOpcode::kSqrt:
    case HloOpcode::kRsqrt:
    case HloOpcode::kFloor:
    case HloOpcode::kCeil:
    case HloOpcode::kRoundNearestAfz:
    case HloOpcode::kRoundNearestEven:
      return IsFloat(t);
    case HloOpcode::kNot:
      return IsInt(t) || t == PrimitiveType::kPred;
    case HloOpcode::kPopulationCount:
    case HloOpcode::kClz:
      return IsInt(t);
    default:
      return false;
  }
}

std::optional<Value*> OpEmitter::Unary(HloOpcode op, PrimitiveType t, Value* x) {
  if (!HasUnary(op, t)) return std::nullopt;
  llvm::Type* ty = x->getType();
  if (t == PrimitiveType::kPred) return b_->CreateNot(x);
  if (IsInt(t)) {
    const bool is_unsigned = t == PrimitiveType::kU32;
    Value* zero = llvm::Constant::getNullValue(ty);
    switch (op) {
      case HloOpcode::kNegate: return b_->CreateSub(zero, x);
      case HloOpcode::kAbs:
        if (is_unsigned) return x;
        return b_->CreateSelect(b_->CreateICmpSLT(x, zero), b_->CreateSub(zero, x), x);
      case HloOpcode::kSign:
        if (is_unsigned) return b_->CreateZExt(b_->CreateICmpNE(x, zero), ty);
        return b_->CreateSub(b_->CreateZExt(b_->CreateICmpSGT(x, zero), ty),
                             b_->CreateZExt(b_->CreateICmpSLT(x, zero), ty));
      case HloOpcode::kNot: return b_->CreateNot(x);
      case HloOpcode::kPopulationCount: return Intrinsic(llvm::Intrinsic::ctpop, x);
      case HloOpcode::kClz:
        return b_->CreateIntrinsic(llvm::Intrinsic::ctlz, {ty}, {x, b_->getFalse()});
      default: return std::nullopt;
    }
  }
  Value* r = nullptr;
  switch (op) {
    case HloOpcode::kNegate: r = b_->CreateFNeg(x); break;
    case HloOpcode::kAbs: r = Intrinsic(llvm::Intrinsic::fabs, x); break;
    case HloOpcode::kSign: {
      Value* keep = b_->CreateOr(IsNan(x), b_->CreateFCmpOEQ(x, Const(ty, 0.0)));
      Value* unit = b_->CreateSelect(b_->CreateFCmpOGT(x, Const(ty, 0.0)), Const(ty, 1.0),
                                     Const(ty, -1.0));
      r = b_->CreateSelect(keep, x, unit);
      break;
    }
    case HloOpcode::kExp: r = Exp(x); break;
    case HloOpcode::kLog: r = Log(x); break;
    case HloOpcode::kSqrt: r = Intrinsic(llvm::Intrinsic::sqrt, x); break;
    case HloOpcode::kRsqrt:
      r = b_->CreateFDiv(Const(ty, 1.0), Intrinsic(llvm::Intrinsic::sqrt, x));
      break;
    case HloOpcode::kFloor: r = Intrinsic(llvm::Intrinsic::floor, x); break;
    case HloOpcode::kCeil: r = Intrinsic(llvm::Intrinsic::ceil, x); break;
    case HloOpcode::kRoundNearestAfz: r = Intrinsic(llvm::Intrinsic::round, x); break;
    case HloOpcode::kRoundNearestEven: r = Intrinsic(llvm::Intrinsic::nearbyint, x); break;
    default: return std::nullopt;
  }
  return Round(t, r);
}

bool OpEmitter::HasBinary(HloOpcode op, PrimitiveType t) {
  switch (op) {
    case HloOpcode::kAdd:
    case HloOpcode::kSubtract:
    case HloOpcode::kMultiply:
    case HloOpcode::kDivide:
      return IsFloat(t) || IsInt(t);
    case HloOpcode::kMaximum:
    case HloOpcode::kMinimum:
      return IsFloat(t) || IsInt(t) || t == PrimitiveType::kPred;
    case HloOpcode::kRemainder:
    case HloOpcode::kShiftLeft:
    case HloOpcode::kShiftRightLogical:
    case HloOpcode::kShiftRightArithmetic:
      return IsInt(t);
    case HloOpcode::kAnd:
    case HloOpcode::kOr:
    case HloOpcode::kXor:
      return IsInt(t) || t == PrimitiveType::kPred;
    default:
      return false;
  }
}

std::optional<Value*> OpEmitter::Binary(HloOpcode op, PrimitiveType t, Value* a, Value* b) {
  if (!HasBinary(op, t)) return std::nullopt;
  llvm::Type* ty = a->getType();
  if (t == PrimitiveType::kPred) {
    switch (op) {
      case HloOpcode::kAnd:
      case HloOpcode::kMinimum: return b_->CreateAnd(a, b);
      case HloOpcode::kOr:
      case HloOpcode::kMaximum: return b_->CreateOr(a, b);
      case HloOpcode::kXor: return b_->CreateXor(a, b);
      default: return std::nullopt;
    }
  }
  if (IsFloat(t)) {
    Value* r = nullptr;
    switch (op) {
      case HloOpcode::kAdd: r = b_->CreateFAdd(a, b); break;
      case HloOpcode::kSubtract: r = b_->CreateFSub(a, b); break;
      case HloOpcode::kMultiply: r = b_->CreateFMul(a, b); break;
      case HloOpcode::kDivide: r = b_->CreateFDiv(a, b); break;
      case HloOpcode::kMaximum: r = FMax(a, b); break;
      case HloOpcode::kMinimum: r = FMin(a, b); break;
      default: return std::nullopt;
    }
    return Round(t, r);
  }
  const bool is_unsigned = t == PrimitiveType::kU32;
  Value* zero = llvm::Constant::getNullValue(ty);
  Value* minus_one = llvm::Constant::getAllOnesValue(ty);
  Value* int_min = ConstInt(ty, 0x80000000u);
  switch (op) {
    case HloOpcode::kAdd: return b_->CreateAdd(a, b);
    case HloOpcode::kSubtract: return b_->CreateSub(a, b);
    case HloOpcode::kMultiply: return b_->CreateMul(a, b);
    case HloOpcode::kDivide:
    case HloOpcode::kRemainder: {
      const bool div = op == HloOpcode::kDivide;
      Value* by_zero = b_->CreateICmpEQ(b, zero);
      if (is_unsigned) {
        Value* safe = b_->CreateSelect(by_zero, ConstInt(ty, 1), b);
        Value* q = div ? b_->CreateUDiv(a, safe) : b_->CreateURem(a, safe);
        return b_->CreateSelect(by_zero, div ? minus_one : a, q);
      }
      // XLA: x/0 = -1, INT_MIN/-1 = INT_MIN; x%0 = x, INT_MIN%-1 = 0.
      Value* overflow =
          b_->CreateAnd(b_->CreateICmpEQ(a, int_min), b_->CreateICmpEQ(b, minus_one));
      Value* safe = b_->CreateSelect(b_->CreateOr(by_zero, overflow), ConstInt(ty, 1), b);
      Value* q = div ? b_->CreateSDiv(a, safe) : b_->CreateSRem(a, safe);
      q = b_->CreateSelect(overflow, div ? a : zero, q);
      return b_->CreateSelect(by_zero, div ? minus_one : a, q);
    }
    case HloOpcode::kMaximum:
      return b_->CreateSelect(is_unsigned ? b_->CreateICmpUGT(a, b) : b_->CreateICmpSGT(a, b),
                              a, b);
    case HloOpcode::kMinimum:
      return b_->CreateSelect(is_unsigned ? b_->CreateICmpULT(a, b) : b_->CreateICmpSLT(a, b),
                              a, b);
    case HloOpcode::kAnd: return b_->CreateAnd(a, b);
    case HloOpcode::kOr: return b_->CreateOr(a, b);
    case HloOpcode::kXor: return b_->CreateXor(a, b);
    case HloOpcode::kShiftLeft:
    case HloOpcode::kShiftRightLogical: {
      // Shifts by >= 32 give 0 (the shift itself is then poison, unused).
      Value* in_range = b_->CreateICmpULT(b, ConstInt(ty, 32));
      Value* s = b_->CreateSelect(in_range, b, zero);
      Value* r = op == HloOpcode::kShiftLeft ? b_->CreateShl(a, s) : b_->CreateLShr(a, s);
      return b_->CreateSelect(in_range, r, zero);
    }
    case HloOpcode::kShiftRightArithmetic: {
      // >= 32: the sign fill, which a shift by 31 gives.
      Value* s = b_->CreateSelect(b_->CreateICmpULT(b, ConstInt(ty, 32)), b, ConstInt(ty, 31));
      return b_->CreateAShr(a, s);
    }
    default:
      return std::nullopt;
  }
}

std::optional<Value*> OpEmitter::Compare(ComparisonDirection dir, bool total_order,
                                         PrimitiveType t, Value* a, Value* b) {
  if (!IsJitType(t)) return std::nullopt;
  if (IsFloat(t) && !total_order) {
    switch (dir) {
      case ComparisonDirection::kEq: return b_->CreateFCmpOEQ(a, b);
      case ComparisonDirection::kNe: return b_->CreateFCmpUNE(a, b);
      case ComparisonDirection::kGe: return b_->CreateFCmpOGE(a, b);
      case ComparisonDirection::kGt: return b_->CreateFCmpOGT(a, b);
      case ComparisonDirection::kLe: return b_->CreateFCmpOLE(a, b);
      case ComparisonDirection::kLt: return b_->CreateFCmpOLT(a, b);
    }
    return std::nullopt;
  }
  bool is_signed = t == PrimitiveType::kS32;
  if (IsFloat(t)) {
    // Total order: bits < 0 ? bits ^ 0x7fffffff : bits, compared signed.
    llvm::Type* it = IntLike(a);
    auto key = [&](Value* v) {
      Value* bits = b_->CreateBitCast(v, it);
      return b_->CreateSelect(b_->CreateICmpSLT(bits, llvm::Constant::getNullValue(it)),
                              b_->CreateXor(bits, ConstInt(it, 0x7fffffffu)), bits);
    };
    a = key(a);
    b = key(b);
    is_signed = true;
  }
  switch (dir) {
    case ComparisonDirection::kEq: return b_->CreateICmpEQ(a, b);
    case ComparisonDirection::kNe: return b_->CreateICmpNE(a, b);
    case ComparisonDirection::kGe:
      return is_signed ? b_->CreateICmpSGE(a, b) : b_->CreateICmpUGE(a, b);
    case ComparisonDirection::kGt:
      return is_signed ? b_->CreateICmpSGT(a, b) : b_->CreateICmpUGT(a, b);
    case ComparisonDirection::kLe:
      return is_signed ? b_->CreateICmpSLE(a, b) : b_->CreateICmpULE(a, b);
    case ComparisonDirection::kLt:
      return is_signed ? b_->CreateICmpSLT(a, b) : b_->CreateICmpULT(a, b);
  }
  return std::nullopt;
}

bool OpEmitter::HasConvert(PrimitiveType from, PrimitiveType to) {
  return IsJitType(from) && IsJitType(to);
}

// ConvertValue<int32/uint32>(float): NaN -> 0, saturating, else truncation.
Value* OpEmitter::FloatToInt(Value* x, bool is_unsigned) {
  llvm::Type* it = IntLike(x);
  const double lowest = is_unsigned ? 0.0 : -2147483648.0;
  const double highest = is_unsigned ? 4294967296.0 : 2147483648.0;
  Value* cast = b_->CreateFreeze(is_unsigned ? b_->CreateFPToUI(x, it) : b_->CreateFPToSI(x, it));
  Value* r = b_->CreateSelect(b_->CreateFCmpOGE(x, Const(x->getType(), highest)),
                              ConstInt(it, is_unsigned ? 0xffffffffu : 0x7fffffffu), cast);
  r = b_->CreateSelect(b_->CreateFCmpOLE(x, Const(x->getType(), lowest)),
                       ConstInt(it, is_unsigned ? 0u : 0x80000000u), r);
  return b_->CreateSelect(IsNan(x), llvm::Constant::getNullValue(it), r);
}

std::optional<Value*> OpEmitter::Convert(PrimitiveType from, PrimitiveType to, Value* x) {
  if (!HasConvert(from, to)) return std::nullopt;
  llvm::Type* xt = x->getType();
  auto shaped = [&](llvm::Type* scalar) -> llvm::Type* {
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(xt)) {
      return llvm::VectorType::get(scalar, vt->getElementCount());
    }
    return scalar;
  };
  if (to == PrimitiveType::kPred) {
    if (from == PrimitiveType::kPred) return x;
    if (IsFloat(from)) return b_->CreateFCmpUNE(x, Const(xt, 0.0));
    return b_->CreateICmpNE(x, llvm::Constant::getNullValue(xt));
  }
  if (IsFloat(to)) {
    Value* f = nullptr;
    if (IsFloat(from)) {
      f = x;
    } else if (from == PrimitiveType::kPred) {
      f = b_->CreateSelect(x, Const(shaped(b_->getFloatTy()), 1.0),
                           Const(shaped(b_->getFloatTy()), 0.0));
    } else if (from == PrimitiveType::kS32) {
      f = b_->CreateSIToFP(x, shaped(b_->getFloatTy()));
    } else {
      f = b_->CreateUIToFP(x, shaped(b_->getFloatTy()));
    }
    return Round(to, f);
  }
  // To s32 / u32.
  if (IsFloat(from)) return FloatToInt(x, to == PrimitiveType::kU32);
  if (from == PrimitiveType::kPred) return b_->CreateZExt(x, shaped(b_->getInt32Ty()));
  return x;  // s32 <-> u32: the same bits
}

Value* OpEmitter::IsFinite(Value* x) {
  return b_->CreateFCmpOLT(Intrinsic(llvm::Intrinsic::fabs, x),
                           llvm::ConstantFP::getInfinity(x->getType()));
}

Value* OpEmitter::Clamp(PrimitiveType t, Value* lo, Value* x, Value* hi) {
  if (IsFloat(t)) return FMin(FMax(x, lo), hi);
  const bool u = t == PrimitiveType::kU32;
  Value* m = b_->CreateSelect(u ? b_->CreateICmpUGT(x, lo) : b_->CreateICmpSGT(x, lo), x, lo);
  return b_->CreateSelect(u ? b_->CreateICmpULT(m, hi) : b_->CreateICmpSLT(m, hi), m, hi);
}

Value* OpEmitter::IotaValue(PrimitiveType t, Value* start) {
  llvm::Type* st = start->getType();
  auto shaped = [&](llvm::Type* scalar) -> llvm::Type* {
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(st)) {
      return llvm::VectorType::get(scalar, vt->getElementCount());
    }
    return scalar;
  };
  if (IsInt(t)) return b_->CreateTrunc(start, shaped(b_->getInt32Ty()));
  return Round(t, b_->CreateSIToFP(start, shaped(b_->getFloatTy())));
}

}  // namespace tpuoff::runtime::jit

#endif  // TPUOFF_HAVE_JIT
