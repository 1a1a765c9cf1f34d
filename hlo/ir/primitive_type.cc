#include "hlo/ir/primitive_type.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::hlo {
namespace {

struct TypeInfo {
  PrimitiveType type;
  absl::string_view name;
  int64_t bytes;
};

constexpr TypeInfo kTypes[] = {
    {PrimitiveType::kPred, "pred", 1}, {PrimitiveType::kS8, "s8", 1},
    {PrimitiveType::kS16, "s16", 2},   {PrimitiveType::kS32, "s32", 4},
    {PrimitiveType::kS64, "s64", 8},   {PrimitiveType::kU8, "u8", 1},
    {PrimitiveType::kU16, "u16", 2},   {PrimitiveType::kU32, "u32", 4},
    {PrimitiveType::kU64, "u64", 8},   {PrimitiveType::kF16, "f16", 2},
    {PrimitiveType::kF32, "f32", 4},   {PrimitiveType::kF64, "f64", 8},
    {PrimitiveType::kBF16, "bf16", 2}, {PrimitiveType::kToken, "token", 0},
    {PrimitiveType::kC64, "c64", 8},   {PrimitiveType::kC128, "c128", 16},
};

const TypeInfo* Find(PrimitiveType type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

}  // namespace

absl::string_view PrimitiveTypeName(PrimitiveType type) {
  if (type == PrimitiveType::kTuple) return "tuple";
  const TypeInfo* info = Find(type);
  return info ? info->name : "invalid";
}

absl::StatusOr<PrimitiveType> PrimitiveTypeFromName(absl::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown element type '", name, "'"));
}

bool IsKnownPrimitiveType(int value) {
  return value == static_cast<int>(PrimitiveType::kTuple) ||
         Find(static_cast<PrimitiveType>(value)) != nullptr;
}

int64_t ByteWidth(PrimitiveType type) {
  const TypeInfo* info = Find(type);
  return info ? info->bytes : 0;
}

bool IsFloatingPoint(PrimitiveType t) {
  return t == PrimitiveType::kF16 || t == PrimitiveType::kF32 ||
         t == PrimitiveType::kF64 || t == PrimitiveType::kBF16;
}

bool IsComplex(PrimitiveType t) {
  return t == PrimitiveType::kC64 || t == PrimitiveType::kC128;
}

PrimitiveType ComplexComponentType(PrimitiveType t) {
  if (t == PrimitiveType::kC64) return PrimitiveType::kF32;
  if (t == PrimitiveType::kC128) return PrimitiveType::kF64;
  return t;
}

bool IsSignedInteger(PrimitiveType t) {
  return t == PrimitiveType::kS8 || t == PrimitiveType::kS16 ||
         t == PrimitiveType::kS32 || t == PrimitiveType::kS64;
}

bool IsUnsignedInteger(PrimitiveType t) {
  return t == PrimitiveType::kU8 || t == PrimitiveType::kU16 ||
         t == PrimitiveType::kU32 || t == PrimitiveType::kU64;
}

}  // namespace tpuoff::hlo
