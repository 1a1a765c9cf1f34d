// Element types, numbered as XLA's PrimitiveType so proto export is a cast.
#ifndef TPUOFF_HLO_IR_PRIMITIVE_TYPE_H_
#define TPUOFF_HLO_IR_PRIMITIVE_TYPE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpuoff::hlo {

enum class PrimitiveType : int {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kTuple = 13,
  kC64 = 15,   // (re, im) f32 pair, as std::complex<float>
  kBF16 = 16,
  kToken = 17,
  kC128 = 18,  // (re, im) f64 pair
};

// "f32", "bf16", "pred", "token", ... as in HLO text.
absl::string_view PrimitiveTypeName(PrimitiveType type);
absl::StatusOr<PrimitiveType> PrimitiveTypeFromName(absl::string_view name);
// Whether the XLA enum value is one we model.
bool IsKnownPrimitiveType(int value);

// Bytes per element of an array type; 0 for tuple/token/invalid.
int64_t ByteWidth(PrimitiveType type);
// Real floating-point types (f16, bf16, f32, f64); complex types are not.
bool IsFloatingPoint(PrimitiveType type);
bool IsComplex(PrimitiveType type);
// The component type of a complex type (c64 -> f32, c128 -> f64); the
// type itself otherwise.
PrimitiveType ComplexComponentType(PrimitiveType type);
bool IsSignedInteger(PrimitiveType type);
bool IsUnsignedInteger(PrimitiveType type);
inline bool IsInteger(PrimitiveType t) {
  return IsSignedInteger(t) || IsUnsignedInteger(t);
}
inline bool IsArrayType(PrimitiveType t) {
  return t != PrimitiveType::kInvalid && t != PrimitiveType::kTuple &&
         t != PrimitiveType::kToken;
}

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_PRIMITIVE_TYPE_H_
