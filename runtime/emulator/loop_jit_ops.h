// Internal to the loop JIT (runtime/emulator/loop_jit.h), built only with
// LLVM: LLVM IR for the scalar semantics of the elementwise kernels
// (runtime/cpu/elementwise_ops.h, elementwise_kernels.cc, simd_math.h), on
// scalars or vectors alike. Every emitter reproduces its kernel bit for
// bit: the same IEEE operations in the same order (no fast-math flags, so
// LLVM neither reassociates nor contracts them), bf16 rounding where the
// kernel rounds, and XLA's integer rules without undefined behaviour.
#ifndef TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_OPS_H_
#define TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_OPS_H_

#include <functional>
#include <optional>

#include "hlo/ir/attributes.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/primitive_type.h"
#include "llvm/IR/IRBuilder.h"

namespace tpuoff::runtime::jit {

// Element types the JIT computes with, in their compute representation:
// f32 and bf16 as float (bf16 rounded after every op), s32 / u32 as i32,
// pred as i1.
bool IsJitType(hlo::PrimitiveType t);

class OpEmitter {
 public:
  // `fma`: runtime/cpu/simd_math.h's MulAdd fuses (kFusedMultiplyAdd).
  // `bf16_convert`: the target has AVX512_BF16 (VCVTNE2PS2BF16), used for
  // bf16 stores of 512-bit vectors.
  OpEmitter(llvm::IRBuilder<>* b, bool fma, bool bf16_convert = false)
      : b_(b), fma_(fma), bf16_convert_(bf16_convert) {}

  llvm::IRBuilder<>& b() { return *b_; }
  // The compute type of `t` (scalar).
  llvm::Type* ComputeType(hlo::PrimitiveType t);
  // The storage type of one element of `t`.
  llvm::Type* StorageType(hlo::PrimitiveType t);
  // `scalar` of the type of `like` (a vector: splatted).
  llvm::Value* Const(llvm::Type* like, double value);
  llvm::Value* ConstInt(llvm::Type* like, uint64_t value);
  // Splat of a scalar to `width` lanes (width 1: the scalar).
  llvm::Value* Widen(llvm::Value* scalar, int width);

  // Storage <-> compute representation.
  llvm::Value* FromStorage(hlo::PrimitiveType t, llvm::Value* stored);
  llvm::Value* ToStorage(hlo::PrimitiveType t, llvm::Value* v);
  // RoundToBf16 (hlo/ir/float16.h) of a float value.
  llvm::Value* RoundBf16(llvm::Value* f);
  // The bf16 bits F32ToBf16 gives, in the high 16 bits of an i32 (the low
  // 16 bits are left over from the rounding: mask or shift them out).
  llvm::Value* Bf16High(llvm::Value* f);
  // F32ToBf16 of a vector of 32, 64, ... floats with VCVTNE2PS2BF16
  // (nullptr when the target has none): the bf16 bits as i16 lanes.
  llvm::Value* NativeBf16(llvm::Value* f);
  // Rounds a float result of type t (bf16: RoundBf16; others unchanged).
  llvm::Value* Round(hlo::PrimitiveType t, llvm::Value* v);

  // ExpV / LogV of simd_math.h.
  llvm::Value* Exp(llvm::Value* x);
  llvm::Value* Log(llvm::Value* x);

  // The kernels' ops on compute values; nullopt when the op/type is not
  // expressed (the program is then interpreted). Results are rounded as
  // the kernel rounds them.
  std::optional<llvm::Value*> Unary(hlo::HloOpcode op, hlo::PrimitiveType t, llvm::Value* x);
  std::optional<llvm::Value*> Binary(hlo::HloOpcode op, hlo::PrimitiveType t, llvm::Value* a,
                                     llvm::Value* b);
  std::optional<llvm::Value*> Compare(hlo::ComparisonDirection dir, bool total_order,
                                      hlo::PrimitiveType t, llvm::Value* a, llvm::Value* b);
  std::optional<llvm::Value*> Convert(hlo::PrimitiveType from, hlo::PrimitiveType to,
                                      llvm::Value* x);
  llvm::Value* IsFinite(llvm::Value* x);
  llvm::Value* Clamp(hlo::PrimitiveType t, llvm::Value* lo, llvm::Value* x, llvm::Value* hi);
  // value(i) = start + i as type t; `start` an i64 (scalar or vector).
  llvm::Value* IotaValue(hlo::PrimitiveType t, llvm::Value* start);

  // Whether Unary / Binary / Compare / Convert express these (checked
  // before any IR is built).
  static bool HasUnary(hlo::HloOpcode op, hlo::PrimitiveType t);
  static bool HasBinary(hlo::HloOpcode op, hlo::PrimitiveType t);
  static bool HasConvert(hlo::PrimitiveType from, hlo::PrimitiveType to);

 private:
  llvm::Value* MulAdd(llvm::Value* a, llvm::Value* b, llvm::Value* c);
  llvm::Value* FMax(llvm::Value* a, llvm::Value* b);
  llvm::Value* FMin(llvm::Value* a, llvm::Value* b);
  llvm::Value* IsNan(llvm::Value* x);
  llvm::Value* Intrinsic(unsigned id, llvm::Value* x);
  llvm::Value* FloatToInt(llvm::Value* x, bool is_unsigned);

  llvm::Value* RareBranch(llvm::Value* rare, const char* name,
                          const std::function<llvm::Value*()>& common,
                          const std::function<llvm::Value*()>& rare_path);

  llvm::IRBuilder<>* b_;
  bool fma_;
  bool bf16_convert_;
};

}  // namespace tpuoff::runtime::jit

#endif  // TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_OPS_H_
